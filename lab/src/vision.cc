// `posenc lab vision` (vision.h): each scheme's ViT trained through the lab's one training loop
// (train_loop.h: checkpoints, resume, progress), tested at every grid, its rows kept in the keyed
// result cache (result_cache.h). One process: the models are small enough that the data-parallel
// and model-parallel runs of run_models.h would not pay for their start.
#include "posenc_lab/vision.h"

#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <sstream>

#include "check_range.h"
#include "lm_train.h"
#include "posenc/error.h"
#include "posenc_lab/file_io.h"
#include "posenc_lab/result_cache.h"
#include "posenc_torch/blas_threads.h"
#include "train_loop.h"
#include "vision_model.h"

namespace posenc::lab {
namespace {

// SplitMix64 of a stream and an index: the scene of each training row and test image, so a
// resumed run draws the same batches and every grid the same test scenes. A bijection of
// stream * golden + index, so the training streams scene_seed(1, seed) (seed < 2^31) never
// equal the test stream scene_seed(2, 0), and the scenes drawn from them meet with odds of about
// steps x batch / 2^64.
unsigned long long scene_seed(unsigned long long stream, unsigned long long index) {
  unsigned long long z = stream * 0x9E3779B97F4A7C15ull + index + 0x632BE59BD9B4E019ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}
const unsigned long long kTestStream = scene_seed(2, 0);  // the test scenes: one set for every seed

// Test images per forward at a grid: 64, fewer where the scores [images, heads, S, S] (float32,
// about three such tensors alive) would pass 256 MiB, so a fine grid never exhausts memory.
int eval_batch(int grid, int heads) {
  const double per_image = 3.0 * heads * std::pow(static_cast<double>(grid) * grid, 2) * sizeof(float);
  return static_cast<int>(std::clamp(256.0 * (1 << 20) / per_image, 1.0, 64.0));
}

// Images [count] of a grid as rows [count, g * g * 2 + 1] float32: the patches, then the label.
torch::Tensor image_rows(int grid, int count, const VisionTask& task, const std::function<unsigned long long(int)>& seed_of) {
  const std::int64_t width = static_cast<std::int64_t>(grid) * grid * 2;
  torch::Tensor rows = torch::empty({count, width + 1}, torch::kFloat32);
  float* out = rows.data_ptr<float>();
  for (int i = 0; i < count; ++i) {
    const VisionImage image = vision_image(grid, seed_of(i), task);
    std::copy(image.patches.begin(), image.patches.end(), out + i * (width + 1));
    out[i * (width + 1) + width] = static_cast<float>(image.label);
  }
  return rows;
}

// Logits of rows [B, g * g * 2 + 1] and their labels [B].
std::pair<torch::Tensor, torch::Tensor> logits_and_labels(VisionTransformer& model, const torch::Tensor& rows, int grid) {
  const std::int64_t width = static_cast<std::int64_t>(grid) * grid * 2;
  const torch::Tensor patches = rows.narrow(1, 0, width).view({rows.size(0), grid * grid, 2});
  return {model->forward(patches, grid), rows.select(1, width).to(torch::kInt64)};
}

CacheKey vision_key(const std::string& name, const VisionConfig& c) {
  const TrainSettings& t = c.training;
  return {{{"format", 2}, {"task", "vision"}, {"scheme", name}, {"train_grid", t.train_len}, {"steps", t.steps}, {"batch", t.batch},
           {"lr", t.lr}, {"warmup", t.warmup}, {"layers", c.shape.layers}, {"d_model", c.shape.d_model}, {"heads", c.shape.heads},
           {"seed", c.seed}, {"radius", c.task.radius}, {"near", c.task.near}, {"samples", c.task.samples}},
          {{"test_grids", c.test_grids}, {"test_images", c.test_images}}};
}

VitConfig vit_config(VisionScheme scheme, const VisionConfig& c) {
  VitConfig v;
  v.scheme = scheme;
  v.shape = c.shape;
  v.train_grid = c.training.train_len;
  return v;
}

VisionTransformer train_vision(const std::string& name, const VisionConfig& c, const nlohmann::json& train_key) {
  const int grid = c.training.train_len;
  torch::manual_seed(static_cast<std::uint64_t>(c.seed));
  VisionTransformer model(vit_config(from_name<VisionScheme>(name), c));
  TrainLoop loop = settings_loop(c.training, "vision " + name, c.training.out_dir + "/vision-" + name + ".ckpt", train_key);
  loop.tokens_per_row = static_cast<long>(grid) * grid;
  loop.loss_per = "image";
  loop.tokens_name = "patches";
  loop.batch = [&c, grid](long step) {
    const unsigned long long first = static_cast<unsigned long long>(step) * static_cast<unsigned long long>(c.training.batch);
    return image_rows(grid, c.training.batch, c.task, [&c, first](int i) {
      return vision_training_scene(c.seed, first + static_cast<unsigned long long>(i));
    });
  };
  loop.loss = [model, grid](const torch::Tensor& rows) mutable {
    const auto [logits, labels] = logits_and_labels(model, rows, grid);
    return torch::nn::functional::cross_entropy(logits, labels);
  };
  long budget = -1;
  run_train_loop(*model, loop, &budget);
  return model;
}

std::vector<VisionRow> test_vision(VisionTransformer& model, const std::string& name, const VisionConfig& c) {
  torch::NoGradGuard no_grad;
  model->eval();
  std::vector<VisionRow> rows;
  for (const int grid : c.test_grids) {
    long right = 0;
    const int batch = eval_batch(grid, c.shape.heads);
    for (int first = 0; first < c.test_images; first += batch) {
      const int count = std::min(batch, c.test_images - first);
      const torch::Tensor batch = image_rows(grid, count, c.task, [first](int i) {
        return vision_test_scene(static_cast<unsigned long long>(first + i));
      });
      const auto [logits, labels] = logits_and_labels(model, batch, grid);
      right += logits.argmax(-1).eq(labels).sum().item<long>();
    }
    rows.push_back({name, grid, static_cast<double>(right) / c.test_images});
  }
  return rows;
}

VisionRow row_from_json(const nlohmann::json& r, const std::string& path) {
  try {
    return {r.at("scheme"), r.at("grid"), r.at("accuracy")};
  } catch (const nlohmann::json::exception& e) {
    throw Error(path + " is corrupt (a row: " + e.what() + "); delete it to recompute");
  }
}

}  // namespace

unsigned long long vision_training_scene(int seed, unsigned long long index) {
  return scene_seed(scene_seed(1, static_cast<unsigned long long>(seed)), index);
}
unsigned long long vision_test_scene(unsigned long long index) { return scene_seed(kTestStream, index); }

void validate_vision(const VisionConfig& c) {
  check_range("--train-grid", c.training.train_len, 1, kMaxVisionGrid);
  if (c.training.randomize_positions != 0) throw Error("lab vision: randomized positions are for the sequence tasks, got " +
                                                       std::to_string(c.training.randomize_positions));
  // This command's own flags first (check_training names the sequence tasks' settings).
  check_range("--batch", c.training.batch, 1, 1024);
  if (!(c.training.lr > 0 && c.training.lr < 1)) throw Error("--lr must be in (0, 1), got " + format_number(c.training.lr));
  check_training(c.training);
  check_range("--warmup", c.training.warmup, 0, kMaxSteps);  // more than --steps: the rate never reaches its peak
  TrainSettings as_tokens = c.training;  // the memory check counts tokens: g * g patches per image
  as_tokens.train_len = c.training.train_len * c.training.train_len;
  check_shape(c.shape, as_tokens, {"images", "patches", "--train-grid or --batch"});
  validate_vision_task(c.task);
  check_range("--test-images", c.test_images, 1, 4096);
  if (c.test_grids.empty()) throw Error("--test-grids is empty: give at least one grid");
  for (const int g : c.test_grids) check_range("--test-grids", g, 1, kMaxVisionGrid);
  check_distinct("--test-grids", c.test_grids, [](int g) { return "grid " + std::to_string(g); });
  if (c.schemes.empty()) throw Error("--schemes is empty: give at least one of " + enum_names_joined<VisionScheme>(", "));
  for (const std::string& name : c.schemes) validate(vit_config(from_name<VisionScheme>(name), c));
  check_distinct_names("--schemes", c.schemes);
}

std::vector<VisionRow> run_vision(const VisionConfig& c) {
  validate_vision(c);
  const auto lock = open_out_dir(c.training.out_dir);  // one run at a time in a directory; a killed run's .tmp files removed
  torch_layer::set_torch_and_blas_threads(c.training.threads > 0 ? c.training.threads : 1);  // one: run_models.cc's measurement
  std::vector<VisionRow> rows;
  for (const std::string& name : c.schemes) {
    const std::string path = c.training.out_dir + "/vision-" + name + ".result.json";
    const CacheKey key = vision_key(name, c);
    nlohmann::json saved;
    if (const auto cached = cached_rows(path, key)) {
      saved = *cached;
    } else {  // trained now, or resumed; a finished checkpoint is tested again (other test grids)
      VisionTransformer model = train_vision(name, c, key.train);
      for (const VisionRow& r : test_vision(model, name, c)) saved.push_back({{"scheme", r.scheme}, {"grid", r.grid}, {"accuracy", r.accuracy}});
      write_cached_rows(path, key, saved);
    }
    for (const auto& r : saved) rows.push_back(row_from_json(r, path));
  }
  write_file_atomic(c.training.out_dir + "/results.json", vision_json(rows, c));
  return rows;
}

std::string format_vision_table(const std::vector<VisionRow>& rows, const VisionConfig& c) {
  std::ostringstream out;
  char buf[96];
  std::snprintf(buf, sizeof buf, "%-10s", "scheme");
  out << buf;
  for (const int g : c.test_grids) {
    std::snprintf(buf, sizeof buf, "  %9s%s", (std::to_string(g) + "x" + std::to_string(g)).c_str(), g == c.training.train_len ? "*" : " ");
    out << buf;
  }
  out << "   (accuracy on " << c.test_images << " scenes per grid, chance 50%; * the training grid)\n";
  for (const std::string& scheme : c.schemes) {  // each cell looked up by (scheme, grid): never shifted
    std::snprintf(buf, sizeof buf, "%-10s", scheme.c_str());
    out << buf;
    for (const int g : c.test_grids) {
      const auto it = std::find_if(rows.begin(), rows.end(), [&](const VisionRow& r) { return r.scheme == scheme && r.grid == g; });
      if (it == rows.end()) std::snprintf(buf, sizeof buf, "  %9s ", "-");
      else std::snprintf(buf, sizeof buf, "  %8.1f%% ", 100 * it->accuracy);
      out << buf;
    }
    out << "\n";
  }
  return out.str();
}

std::string vision_json(const std::vector<VisionRow>& rows, const VisionConfig& c) {
  nlohmann::json j = {{"results", nlohmann::json::array()}, {"train_grid", c.training.train_len}, {"test_grids", c.test_grids},
                      {"test_images", c.test_images}, {"seed", c.seed}, {"steps", c.training.steps}};
  for (const auto& r : rows) j["results"].push_back({{"scheme", r.scheme}, {"grid", r.grid}, {"accuracy", r.accuracy}});
  return j.dump(1);
}

}  // namespace posenc::lab
