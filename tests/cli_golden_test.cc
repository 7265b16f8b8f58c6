// `posenc golden` end to end: files written, bad input refused with exit 2.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "cli_run.h"
#include "golden.h"

namespace {

using posenc::testing::reference_dir;
using posenc::testing::run;
using posenc::testing::temp_path;

TEST(CliGolden, WritesTensorsAndManifestWithThePositionsInRowOrder) {
  const std::string dir = temp_path("_golden");
  const auto r = run("golden --config " + reference_dir() + "/real-configs/gemma-3-1b-it.json --out " + dir +
                     " --positions 9,0,4096 --seed 5");
  ASSERT_EQ(r.code, 0) << r.err;
  const auto m = nlohmann::json::parse(posenc::testing::read_file(dir + "/manifest.json"));
  EXPECT_EQ(m.at("positions"), nlohmann::json({9, 0, 4096}));
  EXPECT_EQ(m.at("layer_types").size(), 2u);
  EXPECT_TRUE(std::ifstream(dir + "/golden.safetensors").good());
}

TEST(CliGolden, BadInputIsExitTwo) {
  const std::string cfg = reference_dir() + "/real-configs/Qwen3-8B.json";
  const auto neg = run("golden --config " + cfg + " --out " + temp_path("_g2") + " --positions 1,-4");
  EXPECT_EQ(neg.code, 2);
  EXPECT_NE(neg.err.find("-4 is outside [0, 2147483647]"), std::string::npos) << neg.err;
  EXPECT_EQ(run("golden --config " + cfg + " --out /nonexistent/dir/x").code, 2);
  EXPECT_EQ(run("golden --config " + cfg).code, 2);  // --out required
}

TEST(CliGolden, MropeModelsGetVisionVectorsAtTheGridsGiven) {
  const std::string cfg = reference_dir() + "/real-configs/Qwen2-VL-7B-Instruct__4layer.json";
  const std::string dir = temp_path("_golden_vl");
  const auto r = run("golden --config " + cfg + " --out " + dir + " --positions 0,1 --image-grid 1,2,4 --video-grid 3,2,2");
  ASSERT_EQ(r.code, 0) << r.err;
  const auto m = nlohmann::json::parse(posenc::testing::read_file(dir + "/manifest.json"));
  const auto& v = m.at("layer_types")[0].at("vision");
  // text 2, image 1x1x2 merged tokens, text 2, video 3x1x1, text 2
  EXPECT_EQ(v.at("seq_len"), 11);
  EXPECT_EQ(v.at("runs")[1].at("grid_thw"), nlohmann::json({1, 2, 4}));
  EXPECT_EQ(v.at("runs")[3].at("grid_thw"), nlohmann::json({3, 2, 2}));
  EXPECT_CLEAN_ERROR(run("golden --config " + cfg + " --out " + dir + " --image-grid 1,2"), "--image-grid");
  EXPECT_CLEAN_ERROR(run("golden --config " + cfg + " --out " + dir + " --video-grid 1,3,2"), "divisible");
}

// A grid nothing reads is refused; a vision tower reads the image's H x W.
TEST(CliGolden, GridsAreReadOrRefused) {
  const std::string dir = temp_path("_golden_grid");
  EXPECT_CLEAN_ERROR(run("golden --config " + reference_dir() + "/real-configs/Qwen3-8B.json --out " + dir + " --image-grid 1,2,2"),
                     "--image-grid", "qwen3");
  EXPECT_CLEAN_ERROR(run("golden --config " + reference_dir() + "/configs-extra/HunyuanOCR__constructed.json --out " + dir +
                         " --video-grid 1,2,2"),
                     "--video-grid", "hunyuan_vl");
  EXPECT_CLEAN_ERROR(run("golden --config " + reference_dir() + "/real-configs/Devstral-Small-2-24B-Instruct.json --out " +
                         dir + " --image-grid 2,3,5"),
                     "expected T = 1");
  const auto r = run("golden --config " + reference_dir() + "/real-configs/Devstral-Small-2-24B-Instruct.json --out " + dir +
                     " --positions 0 --image-grid 1,3,5");
  ASSERT_EQ(r.code, 0) << r.err;
  const auto m = nlohmann::json::parse(posenc::testing::read_file(dir + "/manifest.json"));
  EXPECT_EQ(m.at("vision_tower").at("grid"), nlohmann::json({3, 5}));
  EXPECT_EQ(m.at("vision_tower").at("tokens"), 15);
}

TEST(CliGolden, ShiftWritesShiftedKeysAndRefusesANegativePosition) {
  const std::string cfg = reference_dir() + "/real-configs/Qwen3-8B.json";
  const std::string dir = temp_path("_golden_shift");
  const auto r = run("golden --config " + cfg + " --out " + dir + " --positions 4,9 --shift -4");
  ASSERT_EQ(r.code, 0) << r.err;
  const auto m = nlohmann::json::parse(posenc::testing::read_file(dir + "/manifest.json"));
  EXPECT_EQ(m.at("layer_types")[0].at("k_shifted").at("delta"), -4);
  EXPECT_NE(m.at("layer_types")[0].at("tensors").dump().find("full_attention.k_shifted"), std::string::npos);
  EXPECT_CLEAN_ERROR(run("golden --config " + cfg + " --out " + dir + " --positions 4,9 --shift -5"), "shift -5 moves",
                     "position 4");
}

// --positions takes a range as the other commands do; --remap writes the remapped attention and
// names what is wrong with a setting.
TEST(CliGolden, RemapWritesTheRemappedAttentionAndRefusesBadSettings) {
  const std::string cfg = reference_dir() + "/real-configs/Qwen3-8B.json";
  const std::string dir = temp_path("_golden_remap");
  const auto r = run("golden --config " + cfg + " --out " + dir + " --positions 0:40 --remap self-extend:group=4,window=8");
  ASSERT_EQ(r.code, 0) << r.err;
  const auto m = nlohmann::json::parse(posenc::testing::read_file(dir + "/manifest.json"));
  EXPECT_EQ(m.at("positions").size(), 40u);
  const auto& remap = m.at("layer_types")[0].at("remap");
  EXPECT_EQ(remap.at("settings"), nlohmann::json({{"kind", "self-extend"}, {"group", 4}, {"window", 8}}));
  EXPECT_EQ(remap.at("tensors"), nlohmann::json({"full_attention.v", "full_attention.remap_logits", "full_attention.remap_out"}));
  const std::string base = "golden --config " + cfg + " --out " + dir + " --remap ";
  EXPECT_CLEAN_ERROR(run(base + "stretch"), "unknown remap 'stretch'", "self-extend:group=G,window=W");
  EXPECT_CLEAN_ERROR(run(base + "self-extend:window=8"), "self-extend needs group=");
  EXPECT_CLEAN_ERROR(run(base + "rerope:window=8,group=2"), "'group' is not a setting of rerope");
  EXPECT_CLEAN_ERROR(run(base + "rerope:window"), "'window' has no value");
  EXPECT_CLEAN_ERROR(run(base + "rerope:window=4,window=5"), "window given twice");
  EXPECT_CLEAN_ERROR(run(base + "leaky-rerope:window=4,leak=0"), "leak = '0'", "finite number > 0");
  EXPECT_CLEAN_ERROR(run(base + "self-extend:group=0,window=8"), "group: 0 is outside [1, 2147483647]");
  EXPECT_CLEAN_ERROR(run(base + "dual-chunk:chunk_size=8,local_size=8"), "chunk_size = 8 must be > local_size = 8");
  EXPECT_CLEAN_ERROR(run("golden --config " + cfg + " --out " + dir + " --positions 0:5000"), "--positions", "more than 4096");
  EXPECT_CLEAN_ERROR(run(base + "rerope:window=16:17"), "window = '16:17'", "non-negative integer");  // not a range
  EXPECT_CLEAN_ERROR(run(base + "leaky-rerope:window=4,leak=+2"), "leak = '+2'");
  EXPECT_CLEAN_ERROR(run("golden --config " + cfg + " --out " + dir + " --positions 0:4,9"), "mixes a range A:B with a list");
  const auto far = run("golden --config " + cfg + " --out " + dir + " --positions 0,2147483647 --remap leaky-rerope:window=1,leak=0.5");
  EXPECT_CLEAN_ERROR(far, "far position", "\"leak\":0.5");  // refused before any pair is computed
}

}  // namespace
