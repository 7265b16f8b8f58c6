// Hostile inputs of issue 33 on the framework-free commands (spec, golden, bench rope, the list
// and seed flags, a file-size limit): each ends with exit code 2 and a message naming the value,
// never a signal (exit -1 here), a silent default or a file left half-written.
#include <gtest/gtest.h>

#include <filesystem>

#include <dirent.h>
#include <sys/stat.h>

#include <fstream>
#include <initializer_list>
#include <nlohmann/json.hpp>
#include <string>

#include "cli_run.h"
#include "golden.h"

namespace {

using posenc::testing::CliRun;
using posenc::testing::reference_dir;
using posenc::testing::run_bounded;
using posenc::testing::run_limited;
using posenc::testing::temp_path;
using posenc::testing::write_config;


nlohmann::json real_config(const std::string& name) {
  return nlohmann::json::parse(posenc::testing::read_file(reference_dir() + "/real-configs/" + name + ".json"));
}

// Names in dir ending in suffix.
int files_ending(const std::string& dir, const std::string& suffix) {
  int n = 0;
  if (DIR* d = ::opendir(dir.c_str())) {
    while (const dirent* e = ::readdir(d)) {
      const std::string name = e->d_name;
      n += name.size() >= suffix.size() && name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0;
    }
    ::closedir(d);
  }
  return n;
}

// F1: golden wrote out of bounds (SIGSEGV) and spec printed "channels [-64, 0) of 0".
TEST(CliHostile, MlaNopeChannelsOutOfRangeAreRefusedBySpecAndGolden) {
  for (const char* value : {"-64", "-32", "2147483648", "1099511627776"}) {
    nlohmann::json c = real_config("DeepSeek-V2-Lite");
    c["qk_nope_head_dim"] = std::stoll(value);
    const std::string cfg = write_config(c);
    for (const std::string& command : {"spec --config " + cfg, "golden --config " + cfg + " --out " + temp_path("_g")}) {
      SCOPED_TRACE(command);
      EXPECT_CLEAN_ERROR(run_bounded(command), "qk_nope_head_dim must be in [0, 65472]", std::string("got ") + value);
    }
  }
}

// F8: a softmax scale of inf (query_pre_attn_scalar 0) reached the manifest as null.
TEST(CliHostile, MeaninglessPerLayerValuesAreRefusedBySpec) {
  nlohmann::json gemma = real_config("gemma-3-1b-it");
  gemma["query_pre_attn_scalar"] = 0;
  EXPECT_CLEAN_ERROR(run_bounded("spec --config " + write_config(gemma)), "query_pre_attn_scalar must be a finite number > 0");
  nlohmann::json window = real_config("gemma-3-1b-it");
  window["sliding_window"] = -4096;
  EXPECT_CLEAN_ERROR(run_bounded("golden --out " + temp_path("_g") + " --config " + write_config(window)),
                     "sliding_window must be in [1, 2147483647], got -4096");
}

// F9: head_dim 65536 at 4096 positions grew to 3.3 GB before bad_alloc (internal error, exit 1).
TEST(CliHostile, GoldenEstimatesItsSizeBeforeAllocating) {
  nlohmann::json c = real_config("Qwen3-8B");
  c["head_dim"] = 65536;
  std::string positions = "0";
  for (int p = 1; p < 4096; ++p) positions += "," + std::to_string(p);
  const CliRun r = run_bounded("golden --config " + write_config(c) + " --out " + temp_path("_g") + " --positions " + positions,
                               20, 1024);
  EXPECT_CLEAN_ERROR(r, "golden vectors for 4096 positions and 1 layer type(s) (head_dim 65536) need",
                     "give fewer --positions");
}

// F8: explain opened with "RoPE (default) rotates 128 of 128 channels" for a model none of
// whose layers rotates (Llama 4, no_rope_layers all 0); now it says that no layer uses RoPE.
TEST(CliHostile, ExplainSaysWhenNoLayerRotates) {
  const nlohmann::json c = {{"model_type", "llama4_text"}, {"hidden_size", 512}, {"num_attention_heads", 4},
                            {"head_dim", 128}, {"num_hidden_layers", 2}, {"rope_theta", 500000.0},
                            {"no_rope_layers", {0, 0}}};
  const std::string cfg = write_config(c);
  EXPECT_CLEAN_ERROR(run_bounded("explain --config " + cfg), "no layer type of this model uses RoPE");
  EXPECT_CLEAN_ERROR(run_bounded("freqs --config " + cfg), "no layer type of this model uses RoPE");
}

// Golden wrote q, k and logits for Qwen 3.5's linear-attention (Gated DeltaNet) layers, which
// have no q.k logits and no positions: now they are listed with their kind and no vectors.
TEST(CliHostile, GoldenWritesNoVectorsForLayersWithoutSoftmaxAttention) {
  const std::string dir = temp_path("_g");
  const CliRun r = run_bounded("golden --config " + reference_dir() + "/real-configs/Qwen3.5-9B.json --out " + dir);
  ASSERT_EQ(r.code, 0) << r.err;
  const auto m = nlohmann::json::parse(posenc::testing::read_file(dir + "/manifest.json"));
  int linear = 0;
  for (const auto& entry : m.at("layer_types")) {
    if (entry.at("layer_type") != "linear_attention") {
      EXPECT_FALSE(entry.at("tensors").empty()) << entry.dump();
      continue;
    }
    ++linear;
    EXPECT_EQ(entry.at("attention"), "linear");
    EXPECT_EQ(entry.at("rope"), false);
    EXPECT_TRUE(entry.at("tensors").empty()) << entry.dump();
  }
  EXPECT_EQ(linear, 1);
}

// --layer-type "" explained the default layer type (what no --layer-type means), while
// --positions "" was refused: given, it must name a type.
TEST(CliHostile, AnEmptyLayerTypeIsRefused) {
  const std::string cfg = reference_dir() + "/real-configs/gemma-2-9b.json";
  for (const char* cmd : {"explain", "freqs", "table"})
    EXPECT_CLEAN_ERROR(run_bounded(std::string(cmd) + " --config " + cfg + " --layer-type ''"),
                       "--layer-type: an empty layer type; give one of the config's layer_types");
}

// CLI11 saturated 64-bit flags: --context 99999999999999999999 was "got 9223372036854775807",
// a number never typed. Each integer flag now refuses it naming the value typed.
TEST(CliHostile, IntegersBeyondSixtyFourBitsAreNamedAsTyped) {
  const std::string cfg = reference_dir() + "/real-configs/Llama-3.1-8B-Instruct.json";
  EXPECT_CLEAN_ERROR(run_bounded("explain --config " + cfg + " --context 99999999999999999999"),
                     "--context: 99999999999999999999 is beyond a 64-bit integer's range");
  EXPECT_CLEAN_ERROR(run_bounded("golden --config " + cfg + " -o " + temp_path("_g") + " --shift -99999999999999999999"),
                     "--shift: -99999999999999999999 is beyond a 64-bit integer's range");
  EXPECT_EQ(run_bounded("explain --config " + cfg + " --context 4096").code, 0);
}

// F11: position 2^31-1 is valid for the kernels; golden asked the schedule for seq_len 2^31.
TEST(CliHostile, GoldenAcceptsTheLastValidPosition) {
  const std::string dir = temp_path("_g");
  const CliRun r = run_bounded("golden --config " + reference_dir() + "/real-configs/Qwen3-8B.json --out " + dir +
                               " --positions 0,2147483647");
  ASSERT_EQ(r.code, 0) << r.err;
  const auto m = nlohmann::json::parse(posenc::testing::read_file(dir + "/manifest.json"));
  EXPECT_EQ(m.at("seq_len"), 2147483648LL);
  EXPECT_CLEAN_ERROR(run_bounded("golden --config " + reference_dir() + "/real-configs/Qwen3-8B.json --out " + dir +
                                 " --positions 2147483648"),
                     "--positions: 2147483648 is outside [0, 2147483647]");
}

// F18: "" was position 0, "0,,1" was 0,1 and --seed -1 was 2^64-1, all silently.
TEST(CliHostile, EmptyListItemsAndSignedSeedsAreRefused) {
  const std::string golden = "golden --config " + reference_dir() + "/real-configs/Qwen3-8B.json --out " + temp_path("_g");
  EXPECT_CLEAN_ERROR(run_bounded(golden + " --positions ''"), "--positions: item 1 of '' is empty");
  EXPECT_CLEAN_ERROR(run_bounded(golden + " --positions 0,,1"), "--positions: item 2 of '0,,1' is empty");
  EXPECT_CLEAN_ERROR(run_bounded(golden + " --positions 1,"), "--positions: item 2 of '1,' is empty");
  EXPECT_CLEAN_ERROR(run_bounded(golden + " --seed -1"), "--seed", "got -1");
  // spec-089: 2^64 saturated to 2^64-1 (the manifest recorded 18446744073709551615).
  EXPECT_CLEAN_ERROR(run_bounded(golden + " --seed 18446744073709551616"), "--seed",
                     "in [0, 18446744073709551615], got 18446744073709551616");
  EXPECT_CLEAN_ERROR(run_bounded(golden + " --seed 100000000000000000000000"), "--seed", "got 100000000000000000000000");
  EXPECT_CLEAN_ERROR(run_bounded("table --scheme sinusoidal --dim 8 --seed -5 --positions 0,1"), "--seed", "got -5");
  // The schedule's list flags (freqs --long-factor, --mrope-section) are list flags too.
  EXPECT_CLEAN_ERROR(run_bounded("freqs --head-dim 8 --mrope-section 1,,1"), "--mrope-section: item 2");
  EXPECT_CLEAN_ERROR(run_bounded("freqs --head-dim 8 --mrope-section 1,x,1"), "--mrope-section: 'x' is not a valid item");
}

// F4: tokens x heads x head_dim wrapped int64 to 0 and the repeats check divided by it (SIGFPE);
// F9: 2^30 repeats of a 2-element shape passed the work budget and died by bad_alloc.
TEST(CliHostile, BenchShapesThatWrapOrRepeatsWithoutEndAreRefused) {
  EXPECT_CLEAN_ERROR(run_bounded("bench rope --tokens 1073741824 --heads 1073741824 --head-dim 16 --kv-heads 0"),
                     "--tokens 1073741824", "beyond 2^63");
  EXPECT_CLEAN_ERROR(run_bounded("bench rope --tokens 2147483647 --heads 2147483647 --head-dim 2147483646"),
                     "beyond 2^63");
  EXPECT_CLEAN_ERROR(run_bounded("bench rope --tokens 65536 --heads 65536 --head-dim 64 --kv-heads 0"),
                     "is 274877906944 q + k elements, more than the limit of 134217728");
  EXPECT_CLEAN_ERROR(run_bounded("bench rope --tokens 1 --heads 1 --head-dim 2 --kv-heads 0 --repeats 1073741824"),
                     "--repeats 1073741824", "use at most 32768 repeats");
}

// bench-010..014: one message for every bad setting named none; bench-022: --threads 1024 reached
// libgomp ("Thread creation failed") where bench attention and train refuse more threads than
// the machine has.
TEST(CliHostile, BenchRopeNamesTheSettingAndRefusesThreadsBeyondTheMachine) {
  EXPECT_CLEAN_ERROR(run_bounded("bench rope --tokens 0"), "--tokens must be >= 1, got 0");
  EXPECT_CLEAN_ERROR(run_bounded("bench rope --heads -1"), "--heads must be >= 1, got -1");
  EXPECT_CLEAN_ERROR(run_bounded("bench rope --kv-heads -1"), "--kv-heads must be >= 0, got -1");
  EXPECT_CLEAN_ERROR(run_bounded("bench rope --head-dim 3"), "--head-dim must be even and >= 2, got 3");
  EXPECT_CLEAN_ERROR(run_bounded("bench rope --head-dim 0"), "--head-dim must be even and >= 2, got 0");
  EXPECT_CLEAN_ERROR(run_bounded("bench rope --threads 1024 --tokens 64 --heads 2 --kv-heads 1 --head-dim 64 --repeats 7"),
                     "bench rope: --threads must be in [0, ", "(this machine's hardware threads; 0: all), got 1024");
}

// F15: under RLIMIT_FSIZE the CLI died by SIGXFSZ mid-write, leaving golden.safetensors.tmp.
// A learner's table that never ends (no newline: one endless CSV line) is refused by its size
// within the command's 2 GB bound, naming the file.
TEST(CliHostile, HeatmapFromAnEndlessFileIsRefused) {
  EXPECT_CLEAN_ERROR(run_bounded("plot heatmap --from /dev/zero -o " + temp_path("_z.svg")), "/dev/zero",
                     "more than 128 MiB of CSV");
}

TEST(CliHostile, AFileSizeLimitIsAnErrorAndLeavesNoTempFile) {
  const std::string dir = temp_path("_g");
  std::string positions = "0";
  for (int p = 1; p < 200; ++p) positions += "," + std::to_string(p);  // about 1 MB of tensors
  const CliRun r = run_limited("ulimit -f 64; ", "golden --config " + reference_dir() +
                                                     "/real-configs/Qwen3-8B.json --out " + dir + " --positions " + positions);
  EXPECT_CLEAN_ERROR(r, "cannot write " + dir + "/golden.safetensors", "File too large");
  EXPECT_EQ(files_ending(dir, ".tmp"), 0);
  EXPECT_EQ(files_ending(dir, ".safetensors"), 0);
  EXPECT_FALSE(std::filesystem::exists(dir)) << "the directory golden made for the failed write is left";
}

// golden's two files are one set: a manifest that cannot be written leaves the old tensors, not
// new tensors beside an old manifest.
TEST(CliHostile, GoldenReplacesBothFilesOrNeither) {
  const std::string dir = temp_path("_g");
  const std::string golden = "golden --config " + reference_dir() + "/real-configs/Qwen3-8B.json --out " + dir;
  ASSERT_EQ(run_bounded(golden + " --seed 1").code, 0);
  const std::string before = posenc::testing::read_file(dir + "/golden.safetensors");
  // The manifest's temp file (<path>.<host>.<pid>.tmp) cannot be created: a directory holds its
  // name. The shell's pid is posenc's, as the shell execs it.
  EXPECT_CLEAN_ERROR(run_limited("mkdir " + dir + "/manifest.json.$(cat /proc/sys/kernel/hostname).$$.tmp; ", golden + " --seed 2"),
                     "cannot write " + dir + "/manifest.json");
  EXPECT_EQ(posenc::testing::read_file(dir + "/golden.safetensors"), before);
  EXPECT_EQ(files_ending(dir, "safetensors.tmp"), 0);
}

}  // namespace

namespace {

// CLI11's own refusals come in posenc's form: "posenc: error: ...", the command's help named, exit 2.
TEST(CliHostile, ParserRefusalsHaveThePosencForm) {
  const auto extra = posenc::testing::run("freqs --dim 0 --config x");
  EXPECT_CLEAN_ERROR(extra, "posenc: error: The following arguments were not expected", "(posenc freqs --help)");
  const auto twice = posenc::testing::run("golden --config a --config b --out x");
  EXPECT_CLEAN_ERROR(twice, "posenc: error: --config", "(posenc golden --help)");
}

}  // namespace
