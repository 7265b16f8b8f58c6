// `posenc lab vision`: the tiny ViT trained at one grid of patches, tested at finer ones
// (posenc_lab/vision.h says the task and the schemes).
#include <iostream>
#include <memory>

#include "commands.h"
#include "lab_options.h"
#include "options.h"
#include "posenc_lab/vision.h"

namespace posenc::cli {

void add_lab_vision_command(CLI::App& lab) {
  struct Args {
    lab::VisionConfig config;
    bool quick = false, full = false, json = false;
  };
  auto a = std::make_shared<Args>();
  lab::VisionConfig& c = a->config;
  CLI::App* cmd = lab.add_subcommand("vision", "a tiny ViT on a synthetic image task (are two discs near?), trained at one grid of "
                                               "patches, tested on the same scenes at finer grids: 2-D RoPE (axial, pixel, mixed) "
                                               "against learned absolute positions");
  add_size_flags(cmd, &a->quick, &a->full, "none, learned, axial, pixel, mixed: 400 steps at 8x8, tested at 8x8, 12x12, 16x16; a few minutes",
                 "2000 steps, tested at 8x8 to 32x32 on 1024 scenes");
  add_list_option(cmd, "--schemes", c.schemes, "schemes: " + enum_names_joined<lab::VisionScheme>(", "))->default_str("none,learned,axial,pixel,mixed");
  cmd->add_option("--train-grid", c.training.train_len, "patches per side of the training images")->capture_default_str();
  add_list_option(cmd, "--test-grids", c.test_grids, "patches per side of the test images (default 8,12,16)");
  cmd->add_option("--test-images", c.test_images, "test scenes per grid (the same scenes at every grid)")->capture_default_str();
  cmd->add_option("--batch", c.training.batch, "images per training step")->capture_default_str();
  cmd->add_option("--lr", c.training.lr, "peak learning rate (AdamW, warm-up then cosine)")->capture_default_str();
  cmd->add_option("--warmup", c.training.warmup, "learning-rate warm-up steps")->capture_default_str();
  add_lab_model_options(cmd, &c.training, &c.shape, &c.seed, &a->json);
  cmd->callback([a, cmd] {
    lab::VisionConfig v = a->config;
    if (a->full) {  // what the flags given did not set
      if (cmd->count("--steps") == 0) v.training.steps = 2000;
      if (cmd->count("--test-grids") == 0) v.test_grids = {8, 12, 16, 24, 32};
      if (cmd->count("--test-images") == 0) v.test_images = 1024;
    }
    const auto rows = lab::run_vision(v);  // it writes results.json
    if (a->json) {
      std::cout << lab::vision_json(rows, v) << "\n";
      return;
    }
    std::cout << lab::format_vision_table(rows, v) << "results: " << v.training.out_dir << "/results.json\n";
  });
}

}  // namespace posenc::cli
