// `posenc table` and `posenc check` end to end, against the golden values.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>

#include "cli_run.h"
#include "golden.h"
#include "posenc/learned.h"
#include "posenc/position_grid.h"

namespace {

using namespace posenc::testing;

double max_diff(const nlohmann::json& a, const nlohmann::json& b) {
  const auto x = flatten(a), y = flatten(b);
  if (x.size() != y.size()) return INFINITY;
  double worst = 0;
  for (std::size_t i = 0; i < x.size(); ++i) worst = std::max(worst, std::fabs(x[i] - y[i]));
  return worst;
}

TEST(CliTable, SinusoidalLayouts) {
  struct Case {
    const char* name;
    const char* flags;
    double tol;
  };
  for (const Case& c : {Case{"xlm_distilbert_interleaved_d8", "--layout interleaved", 2e-7},
                        Case{"marian_halves_d8", "--layout halves", 2e-7},
                        Case{"whisper_d8", "--layout halves --freq fairseq", 5e-5}}) {
    SCOPED_TRACE(c.name);
    const auto& g = golden_case("sinusoidal", c.name);
    const auto j = run_json(std::string("table --scheme sinusoidal --dim 8 --positions 0,1,2,3,10,100,1000 ") + c.flags);
    EXPECT_LE(max_diff(j.at("values"), g.at("table")), c.tol);
  }
}

TEST(CliTable, AlibiSlopes) {
  const auto& g = golden().at("alibi");
  for (int h = 1; h <= 16; ++h) {
    const auto j = run_json("table --scheme alibi --heads " + std::to_string(h));
    EXPECT_LE(max_diff(j.at("slopes"), g.at("paper_slopes_f64")[static_cast<std::size_t>(h - 1)]), 1e-16) << h;
  }
  const auto bias = run_json("table --scheme alibi --heads 2 --positions 0:3");
  EXPECT_EQ(bias.at("bias")[0][2][0].get<double>(), -0.0625 * 2) << "-slope * (i - j), slope 2^-4 for head 0 of 2";
}

TEST(CliTable, T5Buckets) {
  const auto& g = golden().at("t5_relative_bias");
  for (const auto& c : g.at("bucket_cases")) {
    const std::string mode = c.at("bidirectional").get<bool>() ? "--bidirectional" : "--causal";
    const auto j = run_json("table --scheme t5 --num-buckets 32 --max-distance 128 " + mode + " --relative -300:301");
    EXPECT_EQ(j.at("buckets"), c.at("buckets")) << mode;
  }
}

TEST(CliTable, TransformerXlRopeMropeDeberta) {
  const auto& xl = golden_case("sinusoidal", "transfo_xl_PositionalEmbedding_d8");
  EXPECT_LE(max_diff(run_json("table --scheme xl --dim 8 --klen 6").at("values"), xl.at("pos_emb_[klen,1,width]")), 2e-7);

  const auto& apply = golden_case("rope_apply", "llama_half_split_default_d8");
  std::string positions;
  for (const auto& p : apply.at("positions")) positions += (positions.empty() ? "" : ",") + std::to_string(p.get<int>());
  const auto rope = run_json("table --scheme rope --dim 8 --hf-compatible --positions " + positions);
  EXPECT_LE(max_diff(rope.at("cos"), apply.at("cos")), 1e-7);
  EXPECT_LE(max_diff(rope.at("sin"), apply.at("sin")), 1e-7);

  const auto& idx = golden_case("mrope_and_2d", "qwen2vl_get_rope_index_image_t1_h4_w6");
  const auto m = run_json("table --scheme mrope --grid 1,4,6 --merge 2 --text-before 2 --text-after 2");
  EXPECT_EQ(m.at("position_ids"), idx.at("position_ids_v5_main"));
  EXPECT_EQ(m.at("rope_delta"), idx.at("rope_deltas_v5_main")[0][0]);
  // Qwen2.5-Omni's time-aligned frames (rule v4.49, 25 ids per second, 0.04 s per grid): HF's
  // float32 (arange(6) * 0.04 * 25).long() = [0, 1, 2, 3, 4, 4] after one text token.
  const auto omni = run_json("table --scheme mrope --grid 6,2,2 --merge 2 --text-before 1 --v4 --time-interval 25 "
                             "--seconds-per-grid 0.04");
  EXPECT_EQ(omni.at("position_ids")[0], (nlohmann::json{0, 1, 2, 3, 4, 5, 5}));
  const auto& tiny = golden_case("mrope_and_2d", "qwen2vl_mrope_apply_tiny_d16");
  const auto axis = run_json("table --scheme mrope --mrope-section 2,3,3").at("axis_of_freq");
  for (std::size_t c = 0; c < 16; ++c) EXPECT_EQ(axis[c % 8], tiny.at("axis_of_channel")[c]) << c;

  const auto d = run_json("table --scheme deberta --position-buckets 256 --max-relative-positions 512 --relative 126:131");
  // mid = 128: itself up to 128, then 128 + ceil(ln(r/128) / ln(511/128) * 127): 129 -> 129, 130 -> 130.
  EXPECT_EQ(d.at("buckets"), (nlohmann::json{126, 127, 128, 129, 130}));
  EXPECT_TRUE(run_json("table --scheme nope").is_object());
}

// A vision tower's learned 2-D table resized to an image: the seeded table the rows of --scheme
// learned come from, through position_grid.h, in both modes; misplaced flags refused.
TEST(CliTable, LearnedGridResized) {
  for (const char* mode : {"bicubic", "bilinear_antialias"}) {
    SCOPED_TRACE(mode);
    const auto j = run_json(std::string("table --scheme learned --table-grid 4,5 --resize 3,7 --dim 6 --seed 3 --resize-mode ") + mode);
    const posenc::LearnedTable t = posenc::learned_init(20, 6, posenc::kLearnedInitStd, 3);
    const auto want = posenc::resize_position_grid(posenc::PositionGrid{4, 5, 6, t.weight}, 3, 7,
                                                   posenc::from_name<posenc::GridResize>(mode));
    EXPECT_EQ(j.at("resize"), nlohmann::json({3, 7}));
    ASSERT_EQ(j.at("values").size(), 21u);
    const auto got = flatten(j.at("values"));
    for (std::size_t i = 0; i < got.size(); ++i) EXPECT_EQ(static_cast<float>(got[i]), want.values[i]) << i;
  }
  EXPECT_CLEAN_ERROR(run("table --scheme learned --resize 2,3"), "--resize needs --table-grid");
  EXPECT_CLEAN_ERROR(run("table --scheme learned --table-grid 4,4 --resize 2,3 --positions 0:2"), "--positions does not apply");
  EXPECT_CLEAN_ERROR(run("table --scheme learned --table-grid 4,4"), "--table-grid needs --resize");
  EXPECT_CLEAN_ERROR(run("table --scheme learned --resize-mode bicubic"), "--resize-mode needs --table-grid");
  EXPECT_CLEAN_ERROR(run("table --scheme learned --table-grid 4,0 --resize 2,2"), "--table-grid");
  EXPECT_CLEAN_ERROR(run("table --scheme rope --resize 2,2"), "--resize does not apply to --scheme rope");
}

TEST(CliTable, BadOptionsExitTwo) {
  expect_usage_errors({
      {"table --scheme rope --dim 7", "even"},
      {"table --scheme alibi --heads 0", "0"},
      {"table --scheme alibi", "--heads"},
      {"table --scheme t5 --num-buckets 1 --causal", "num_buckets"},
      {"table --scheme t5 --num-buckets 32", "--bidirectional"},
      {"table --scheme cope", "no table"},
      {"table --scheme copee", "copee"},
      {"table --scheme sinusoidal --heads 4", "--heads"},
      {"table --scheme sinusoidal --layout diagonal", "diagonal"},
      {"table --scheme sinusoidal --positions 5:2", "5:2"},
      {"table --scheme sinusoidal --positions 1,x", "'x'"},
      {"table --scheme sinusoidal --dim 2 --freq fairseq", "dim"},
      {"table --scheme learned --num-positions 16 --positions 16", "position 16"},
      {"table --scheme mrope", "--mrope-section"},
      {"table --scheme mrope --grid 1,3,4", "divisible"},
      {"check --dim 7", "dim"},
      {"table --scheme sinusoidal --dim 1048576 --positions 0:100000", "values"},
      {"table --scheme alibi --heads 64 --positions 0:100000", "values"},
      {"table --scheme mrope --grid 1048576,1048576,1048576", "tokens"},
      {"table --scheme t5 --causal --relative 0:2000000", "2000000"},
  });
}

TEST(CliCheck, PassesAndFailsHonestly) {
  const CliRun ok = run("check");
  EXPECT_EQ(ok.code, 0) << ok.out;
  EXPECT_EQ(ok.out.find("FAIL"), std::string::npos);
  EXPECT_NE(ok.out.find("PASS  rope.relative"), std::string::npos);
  const auto j = run_json("check --dim 128 --positions 1000");
  EXPECT_TRUE(j.at("pass").get<bool>());
  EXPECT_EQ(j.at("checks").size(), 25u);
  for (const char* claim : {"PASS  rope.clip_identity", "PASS  xpos.relative", "PASS  pope.closed_form", "PASS  pope.relative", "PASS  axial.one_axis",
                           "PASS  fire.unit"})
    EXPECT_NE(ok.out.find(claim), std::string::npos) << claim << " missing from\n" << ok.out;
  // Two frequencies are too few for RoFormer's decay: the check says so and exits 1.
  const CliRun few = run("check --dim 4 --positions 100");
  EXPECT_EQ(few.code, 1);
  EXPECT_NE(few.out.find("FAIL  rope.decay"), std::string::npos) << few.out;
}

// The learner's own table (issue 32): drawn with the stripe diagnosis; a bad file is refused by name.
TEST(CliPlot, HeatmapFromTheLearnersTable) {
  const std::string dir = ::testing::TempDir();
  {
    std::ofstream(dir + "posenc_stuck.csv") << "0,1,0.5\n0,1,0.5\n0,1,0.5\n";  // every position the same row
    std::ofstream(dir + "posenc_fine.csv") << "0,1\n1,0\n";
    std::ofstream(dir + "posenc_bad.csv") << "0,1\nx,2\n";
  }
  const CliRun stuck = run("plot heatmap --from " + dir + "posenc_stuck.csv -o " + dir + "posenc_stuck.svg");
  ASSERT_EQ(stuck.code, 0) << stuck.err;
  EXPECT_NE(stuck.out.find("3 rows x 3 columns"), std::string::npos) << stuck.out;
  EXPECT_NE(stuck.out.find("diagnosis: every row is the same"), std::string::npos) << stuck.out;
  EXPECT_NE(posenc::testing::read_file(dir + "posenc_stuck.svg").find("posenc_stuck.csv: your table"), std::string::npos);
  const CliRun fine = run("plot heatmap --from " + dir + "posenc_fine.csv -o " + dir + "posenc_fine.svg");
  EXPECT_NE(fine.out.find("diagnosis: the values vary along both indices"), std::string::npos) << fine.out;
  EXPECT_CLEAN_ERROR(run("plot heatmap --from " + dir + "posenc_bad.csv -o " + dir + "x.svg"), "posenc_bad.csv",
                     "line 2, column 1 is 'x'; expected a number");
  // --model (a lab checkpoint) exists only where the CLI was built with libtorch; make sanitize builds without.
  const bool has_torch = run("lab --help").code == 0;
  EXPECT_CLEAN_ERROR(run("plot heatmap -o " + dir + "x.svg"), has_torch ? "needs --scheme NAME, --from FILE or --model FILE"
                                                                        : "needs --scheme NAME or --from FILE");
  EXPECT_EQ(run("plot heatmap --scheme rope --from " + dir + "posenc_fine.csv -o " + dir + "x.svg").code, 2);
}

}  // namespace

namespace {

TEST(CliBench, RopeReportsThePinnedFields) {
  const auto j = run_json("bench rope --tokens 64 --heads 2 --kv-heads 1 --head-dim 64 --threads 1 --repeats 7");
  for (const char* key : {"gbps", "ceiling_gbps", "fraction_of_ceiling", "ns_per_element"})
    EXPECT_GT(j.at(key).get<double>(), 0.0) << key;
  EXPECT_FALSE(j.at("target").get<std::string>().empty());
  const auto fly = run_json("bench rope --tokens 16 --heads 1 --kv-heads 0 --head-dim 8 --dtype bf16 --layout interleaved "
                            "--on-the-fly --repeats 7");
  EXPECT_EQ(fly.at("mode"), "on-the-fly");
  EXPECT_EQ(run_json("bench rope --tokens 16 --heads 2 --kv-heads 1 --head-dim 8 --memory bhsd --repeats 7").at("memory"), "bhsd");
  for (const std::string bad : {"--dtype f64", "--layout zigzag", "--repeats 3", "--table --on-the-fly", "--head-dim 7", "--memory sbhd",
                                "--target ZEN9"}) {
    const CliRun r = run("bench rope --tokens 16 " + bad);
    EXPECT_EQ(r.code, 2) << bad;
    EXPECT_FALSE(r.err.empty()) << bad;
  }
  // A bf16 run times float32 of the same shape beside it and says how it narrows; any target
  // this machine runs can be chosen (SCALAR always), and the ceiling runs on it too.
  const auto bf16 = run_json("bench rope --tokens 32 --heads 2 --kv-heads 1 --head-dim 64 --dtype bf16 --repeats 7");
  EXPECT_GT(bf16.at("rate_vs_f32").get<double>(), 0.0);
  EXPECT_GT(bf16.at("f32_ns_per_element").get<double>(), 0.0);
  const std::string narrowing = bf16.at("bf16_narrowing");
  EXPECT_TRUE(narrowing == "instruction" || narrowing == "emulated") << narrowing;
  EXPECT_EQ(run_json("bench rope --tokens 16 --repeats 7").at("rate_vs_f32").get<double>(), 1.0);  // its own reference
  const auto scalar = run_json("bench rope --tokens 16 --heads 2 --kv-heads 1 --head-dim 64 --dtype bf16 --target SCALAR --repeats 7");
  EXPECT_EQ(scalar.at("target"), "SCALAR");
  EXPECT_EQ(scalar.at("bf16_narrowing"), "emulated");
}

}  // namespace

namespace {

TEST(CliPlot, PicturesAndExplain) {
  const std::string dir = ::testing::TempDir();
  const CliRun heat = run("plot heatmap --scheme rope --dim 32 --positions 0:64 -o " + dir + "posenc_rope.png");
  ASSERT_EQ(heat.code, 0) << heat.err;
  EXPECT_FALSE(posenc::testing::read_file(dir + "posenc_rope.png").empty());
  EXPECT_NE(posenc::testing::read_file(dir + "posenc_rope.svg").find("<svg"), std::string::npos);
  const std::string config = posenc::testing::reference_dir() + "/real-configs/Qwen2.5-7B-Instruct.json";
  EXPECT_EQ(run("plot wavelengths --config " + config + " -o " + dir + "posenc_wl.svg").code, 0);
  EXPECT_EQ(run("plot decay --scheme alibi -o " + dir + "posenc_decay.svg").code, 0);
  const auto explained = run_json("explain --config " + config + " --context 131072");
  EXPECT_EQ(explained.at("rotary_dim"), 128);
  EXPECT_GT(explained.at("frequencies_out_of_range_at_context").get<int>(), 0);
  for (const std::string& bad : std::vector<std::string>{"plot wavelengths --config " + config + " -o " + dir + "x.png", "plot heatmap --scheme cope -o " + dir + "x.png",
                                "plot heatmap --scheme alibi --head 9 -o " + dir + "x.png", "plot decay --scheme xl -o " + dir + "x.svg",
                                "plot attention --model /nonexistent.pt --tokens 1,2 -o " + dir + "x.png", std::string("explain --config /nonexistent.json"),
                                "explain --config " + config + " --context 0"}) {
    const CliRun r = run(bad);
    EXPECT_EQ(r.code, 2) << bad << "\n" << r.err;
    EXPECT_FALSE(r.err.empty()) << bad;
  }
}

}  // namespace

namespace {

TEST(CliLab, AttentionOfACharacterModelOnText) {
  if (run("lab --help").code != 0) GTEST_SKIP() << "this build has no libtorch layer (POSENC_WITH_TORCH=OFF)";
  const std::string dir = ::testing::TempDir() + "posenc_cli_lab";
  const std::string corpus = ::testing::TempDir() + "posenc_cli_corpus.txt";
  {
    std::ofstream out(corpus);
    for (int i = 0; i < 400; ++i) out << "in the beginning god created the heaven and the earth. ";
  }
  std::remove((dir + "/rope.result.json").c_str());
  std::remove((dir + "/rope.ckpt").c_str());
  const CliRun trained = run("lab extrapolate --schemes rope --extensions none --steps 3 --train-len 16 --eval-lens 16,32 --corpus " +
                             corpus + " --out " + dir + " --json");
  ASSERT_EQ(trained.code, 0) << trained.err;
  const auto results = nlohmann::json::parse(trained.out).at("results");
  EXPECT_EQ(results.size(), 2u);
  EXPECT_EQ(results[0].at("scheme"), "rope");
  const CliRun map = run("plot attention --model " + dir + "/rope.pt --text 'the earth' --layer 0 --head 0 -o " + dir + "/a.png");
  EXPECT_EQ(map.code, 0) << map.err;
  // Every row and column named by its character (the space as '_'), on one colour scale [0, 1].
  const std::string svg = read_file(dir + "/a.svg");
  EXPECT_NE(svg.find(">_</text>"), std::string::npos) << svg.substr(0, 400);
  for (const char* name : {">t</text>", ">h</text>", ">a</text>", ">r</text>"}) EXPECT_NE(svg.find(name), std::string::npos) << name;
  EXPECT_NE(svg.find(">1</text>"), std::string::npos) << "the colour bar's top";
  EXPECT_NE(svg.find(">0</text>"), std::string::npos) << "the colour bar's bottom";
  const CliRun unknown = run("plot attention --model " + dir + "/rope.pt --text 'THE' -o " + dir + "/a.png");
  EXPECT_EQ(unknown.code, 2);
  EXPECT_NE(unknown.err.find("'T'"), std::string::npos) << unknown.err;
}

// `lab extrapolate --fusion` and `--raw-index` add their models by name; a trained learned table
// is drawn by `plot heatmap --model`, and a model without one is refused naming its scheme.
TEST(CliLab, FusionsRawIndexAndTheTrainedLearnedTable) {
  if (run("lab --help").code != 0) GTEST_SKIP() << "this build has no libtorch layer (POSENC_WITH_TORCH=OFF)";
  const std::string dir = temp_path("cli_lab_fusion"), corpus = temp_path("cli_lab_fusion.txt");
  {
    std::ofstream out(corpus);
    for (int i = 0; i < 400; ++i) out << "in the beginning god created the heaven and the earth. ";
  }
  const CliRun trained = run("lab extrapolate --schemes learned --fusion concat,multiply --raw-index add,concat --embed-scale --extensions none "
                             "--steps 2 --train-len 16 --eval-lens 16 --corpus " + corpus + " --out " + dir + " --json");
  ASSERT_EQ(trained.code, 0) << trained.err;
  std::vector<std::string> models;
  const auto results = nlohmann::json::parse(trained.out);  // kept: the loop reads into it
  for (const auto& row : results.at("results")) models.push_back(row.at("model").get<std::string>());
  EXPECT_EQ(models, (std::vector<std::string>{"learned", "sinusoidal-concat", "sinusoidal-multiply", "raw-index", "raw-index-concat",
                                               "sinusoidal-embed-scale"}));
  const CliRun table = run("plot heatmap --model " + dir + "/learned.pt -o " + dir + "/learned.svg");
  ASSERT_EQ(table.code, 0) << table.err;
  EXPECT_NE(read_file(dir + "/learned.svg").find("Learned positions after training (learned.pt)"), std::string::npos);
  EXPECT_CLEAN_ERROR(run("plot heatmap --model " + dir + "/raw-index.pt -o " + dir + "/x.svg"), "raw-index.pt",
                     "no learned position table: its scheme is 'sinusoidal'");
  EXPECT_CLEAN_ERROR(run("lab extrapolate --fusion sum --out " + dir), "fusion must be one of add|concat|multiply, got 'sum'");
  EXPECT_CLEAN_ERROR(run("lab extrapolate --raw-index add,add --out " + dir), "--raw-index: fusion 'add' is given twice");
}

// Kerple at posenc's initial parameters and Sandwich, read at |query - key|; FoX has no table.
TEST(CliTable, DistanceBiases) {
  const auto kerple = run_json("table --scheme kerple --heads 2 --relative -3:4");
  EXPECT_EQ(kerple.at("r1"), (std::vector<double>{1, 1}));
  const auto& row = kerple.at("bias")[0];  // relative -3 .. 3: symmetric, 0 at 0, falling with |d|
  EXPECT_EQ(row[3].get<double>(), 0.0);
  EXPECT_FALSE(std::signbit(row[3].get<double>())) << "+0, not -0";
  EXPECT_EQ(row[0], row[6]);
  EXPECT_NEAR(row[4].get<double>(), -std::log1p(kerple.at("r2")[0].get<double>()), 1e-7);
  const auto sandwich = run_json("table --scheme sandwich --heads 2 --dim 8 --relative 0:3");
  EXPECT_EQ(sandwich.at("bias")[0][0].get<double>(), 0.0);
  EXPECT_LT(sandwich.at("bias")[0][2].get<double>(), sandwich.at("bias")[0][1].get<double>());
  const CliRun fox = run("table --scheme fox");
  EXPECT_EQ(fox.code, 2);
  EXPECT_NE(fox.err.find("no table"), std::string::npos) << fox.err;
}

}  // namespace

namespace {

// Qwen3-Omni-MoE keeps its float32 T ids: 0.5 s per temporal patch at 25 ids per second is 12.5
// per patch (the integer walk truncates to 14 where Qwen3-Omni has 14.5).
TEST(CliTable, MropeQwen3OmniKeepsFractionalTemporalIds) {
  const std::string base = "table --scheme mrope --grid 3,4,4 --text-before 2 --text-after 2 --time-interval 25 --seconds-per-grid 0.5";
  const auto r = posenc::testing::run(base + " --qwen3-omni");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("T: 0 1 2 2 2 2 14.5 14.5 14.5 14.5 27 27 27 27 28 29"), std::string::npos) << r.out;
  const auto v4 = posenc::testing::run(base + " --v4");
  EXPECT_NE(v4.out.find("T: 0 1 2 2 2 2 14 14 14 14 27"), std::string::npos) << v4.out;
  EXPECT_CLEAN_ERROR(posenc::testing::run(base + " --qwen3-omni --v4"), "--qwen3-omni has its own rule");
}

}  // namespace
