// `posenc freqs --vision`: a vision tower's 2-D RoPE from a config and from flags, the same
// object `posenc spec --json` gives, and its refusals.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "cli_run.h"
#include "golden.h"

namespace {

using namespace posenc::testing;

TEST(CliFreqsVision, FromAConfigIsWhatSpecGives) {
  for (const std::string& path : {real_config("Qwen2.5-VL-7B-Instruct"), real_config("gemma-4-31B-it"),
                                  real_config("Devstral-Small-2-24B-Instruct")}) {
    SCOPED_TRACE(path);
    const auto tower = run_json("freqs --vision --config " + path);
    EXPECT_EQ(tower, run_json("spec --config " + path).at("vision_rope"));
    EXPECT_EQ(tower.at("inv_freq").size() * 2, tower.at("head_dim").get<std::size_t>());
  }
}

// The flags name what the config's vision_config gives; the defaults are HF's (theta 10000, Gemma 4's 100).
TEST(CliFreqsVision, FromFlagsEqualsFromTheConfig) {
  EXPECT_EQ(run_json("freqs --vision qwen2_vl --head-dim 80"),
            run_json("freqs --vision --config " + real_config("Qwen2.5-VL-7B-Instruct")));
  EXPECT_EQ(run_json("freqs --vision gemma4 --head-dim 72"), run_json("freqs --vision --config " + real_config("gemma-4-31B-it")));
  EXPECT_EQ(run_json("freqs --vision pixtral --head-dim 64 --patches-per-side 110"),
            run_json("freqs --vision --config " + real_config("Devstral-Small-2-24B-Instruct")));
  const auto merged = run_json("freqs --vision qwen2_vl --head-dim 80 --merge-size 4");
  EXPECT_EQ(merged.at("spatial_merge_size"), 4);
  EXPECT_NE(run_json("freqs --vision gemma4 --head-dim 72 --rope-theta 10000").at("inv_freq"),
            run_json("freqs --vision gemma4 --head-dim 72").at("inv_freq"));
}

// The text table: each frequency with the axis it reads and its block of channels (Qwen2-VL: the
// first half rows, the second columns, one block; Gemma 4: columns then rows, two blocks).
TEST(CliFreqsVision, TheTableNamesEachFrequencysAxisAndBlock) {
  const CliRun qwen = run("freqs --vision qwen2_vl --head-dim 16");
  ASSERT_EQ(qwen.code, 0) << qwen.err;
  for (const char* row : {"    0  1               row     0", "    3  0.001           row     0",
                          "    4  1               column  0", "    7  0.001           column  0"})
    EXPECT_NE(qwen.out.find(row), std::string::npos) << row << "\n" << qwen.out;
  const CliRun gemma = run("freqs --vision gemma4 --head-dim 16");
  ASSERT_EQ(gemma.code, 0) << gemma.err;
  for (const char* row : {"    0  1               column  0", "    4  1               row     1"})
    EXPECT_NE(gemma.out.find(row), std::string::npos) << row << "\n" << gemma.out;
}

TEST(CliFreqsVision, RefusesWhatItCannotShow) {
  expect_usage_errors(
      {
          {"freqs --vision", "give --config, or --vision FAMILY"},
          {"freqs --vision qwen2_vl", "--vision qwen2_vl needs --head-dim"},
          {"freqs --vision foo --head-dim 8", "got 'foo'"},
          {"freqs --vision llama4 --head-dim 88", "needs --patches-per-side"},
          {"freqs --vision moonvit --head-dim 64 --patches-per-side 3", "moonvit fixes its table at 512"},
          {"freqs --vision pixtral --head-dim 64 --patches-per-side 10 --merge-size 2", "pixtral does not read it"},
          {"freqs --vision qwen2_vl --head-dim 80 --factor 2", "--factor is a text layer's schedule flag"},
          {"freqs --vision qwen2_vl --head-dim 80 --seq-len 9", "--seq-len"},
          {"freqs --vision qwen2_vl --head-dim 6", "divisible by 4, got 6"},
          {"freqs --head-dim 8 --merge-size 2", "--merge-size describes a vision tower"},
          {"freqs --vision --config " + real_config("Qwen3-8B"), "has no vision tower with 2-D RoPE"},
          {"freqs --vision qwen2_vl --config " + real_config("Qwen2.5-VL-7B-Instruct"), "exclude each other"},
          {"freqs --vision --config " + real_config("Qwen2.5-VL-7B-Instruct") + " --layer-type full_attention",
           "--layer-type selects a text layer"},
          {"freqs --vision --config " + real_config("Qwen2.5-VL-7B-Instruct") + " --merge-size 4", "--merge-size is not read there"},
          {"freqs --vision --config " + real_config("Qwen2.5-VL-7B-Instruct") + " --head-dim 999", "--head-dim is not read there"},
          {"freqs --vision qwen2_vl --head-dim 80 --lenient", "--vision qwen2_vl takes none"},
      },
      true);
}

}  // namespace
