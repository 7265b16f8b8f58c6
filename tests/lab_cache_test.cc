// The lab's result cache is keyed by everything that determines a row: re-running into the same
// --out with another evaluation setting re-evaluates the trained weights (no retraining), with
// another training setting or corpus is an error naming it, never a stale row.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <functional>

#include "lab_support.h"
#include "posenc/error.h"
#include "posenc_lab/extrapolate.h"
#include "posenc_lab/file_io.h"
#include "posenc_lab/result_cache.h"
#include "posenc_lab/sort_task.h"
#include "posenc_torch/model_config.h"

namespace posenc::lab {
namespace {

namespace fs = std::filesystem;

struct EvalSetting {
  const char* name;
  std::function<void(ExtrapolateConfig&)> change;
  std::function<bool(const ExtrapolateResult&)> holds;  // true when the rows reflect the change
};

bool has_row(const ExtrapolateResult& r, const std::string& ext, int len) {
  for (const auto& row : r.rows)
    if (row.extension == ext && row.eval_len == len) return true;
  return false;
}

long tokens_of(const ExtrapolateResult& r, const std::string& ext, int len) {
  for (const auto& row : r.rows)
    if (row.extension == ext && row.eval_len == len) return row.tokens;
  return -1;
}

void PrintTo(const EvalSetting& s, std::ostream* os) { *os << s.name; }

class LabStaleRows : public ::testing::TestWithParam<EvalSetting> {};

TEST_P(LabStaleRows, AnotherEvaluationSettingReEvaluatesTheTrainedWeights) {
  const EvalSetting& s = GetParam();
  ExtrapolateConfig c = test::tiny(std::string("lab_stale_") + s.name, {"rope"});
  const ExtrapolateResult first = run_extrapolate(c);
  const std::string ckpt = test::slurp(c.training.out_dir + "/rope.ckpt");
  s.change(c);
  const ExtrapolateResult second = run_extrapolate(c);
  EXPECT_TRUE(s.holds(second)) << s.name << ": the old rows were reused";
  EXPECT_EQ(test::slurp(c.training.out_dir + "/rope.ckpt"), ckpt) << "the trained weights are reused, not retrained";
  // A row both runs compute is the same number: the same weights.
  for (const auto& a : first.rows)
    for (const auto& b : second.rows)
      if (a.extension == "none" && b.extension == "none" && a.eval_len == 16 && b.eval_len == 16 && a.tokens == b.tokens) {
        EXPECT_EQ(a.bpc, b.bpc);
      }
  // And a third run with the same settings reuses the second's rows.
  const ExtrapolateResult third = run_extrapolate(c);
  ASSERT_EQ(third.rows.size(), second.rows.size());
  for (std::size_t i = 0; i < third.rows.size(); ++i) EXPECT_EQ(third.rows[i].bpc, second.rows[i].bpc);
}

INSTANTIATE_TEST_SUITE_P(
    EachSetting, LabStaleRows,
    ::testing::Values(
        EvalSetting{"eval_lens", [](ExtrapolateConfig& c) { c.eval_lens = {16, 48}; },
                    [](const ExtrapolateResult& r) { return has_row(r, "none", 48) && !has_row(r, "none", 32); }},
        EvalSetting{"extensions", [](ExtrapolateConfig& c) { c.extensions = {RopeExtension::kNone, RopeExtension::kNtk}; },
                    [](const ExtrapolateResult& r) { return has_row(r, "ntk", 32) && !has_row(r, "pi", 32); }},
        EvalSetting{"eval_chars", [](ExtrapolateConfig& c) { c.eval_chars = 256; },
                    [](const ExtrapolateResult& r) { return tokens_of(r, "none", 32) == 256; }},
        EvalSetting{"incremental_tokens", [](ExtrapolateConfig& c) { c.incremental_tokens = 32; },
                    [](const ExtrapolateResult& r) { return tokens_of(r, "dynamic-incremental", 16) == 32; }},
        EvalSetting{"pi_finetune_steps", [](ExtrapolateConfig& c) { c.pi_finetune_steps = 2; },
                    [](const ExtrapolateResult& r) { return has_row(r, "pi+finetune", 32); }}),
    [](const ::testing::TestParamInfo<EvalSetting>& info) { return std::string(info.param.name); });

TEST(LabStaleRows, AnotherCorpusOfTheSameSizeIsAnErrorNamingIt) {
  ExtrapolateConfig c = test::tiny("lab_stale_corpus", {"alibi"});
  run_extrapolate(c);
  c.corpus = test::tiny_corpus(7);  // the same bytes shuffled: the same size
  const std::string e = test::error_of([&] { run_extrapolate(c); });
  EXPECT_HAS(e, "corpus_fnv1a64");
  EXPECT_HAS(e, "alibi.");
}

TEST(LabStaleRows, AnotherTrainingSettingIsAnErrorNamingIt) {
  ExtrapolateConfig c = test::tiny("lab_stale_steps", {"alibi"});
  run_extrapolate(c);
  c.training.steps = 30;
  EXPECT_HAS(test::error_of([&] { run_extrapolate(c); }), "steps 24 then, 30 now");
}


// A key written before the field table spelled RoPE's record `type`/`theta` (HF: rope_type,
// rope_theta): the same model under older names is the same training key, another value is not.
TEST(LabKeys, AnOlderRecordOfTheSameModelIsTheSameKey) {
  torch_layer::ModelConfig m;
  m.scheme = Scheme::kRope;
  const nlohmann::json wanted = {{"model", nlohmann::json::parse(torch_layer::config_to_json(m))}, {"steps", 24}};
  nlohmann::json older = wanted;
  nlohmann::json& rope = older["model"]["rope"];
  ASSERT_TRUE(rope.contains("rope_theta") && rope.contains("rope_type")) << rope.dump();
  rope["theta"] = rope["rope_theta"];
  rope["type"] = rope["rope_type"];
  rope.erase("rope_theta");
  rope.erase("rope_type");
  EXPECT_NO_THROW(check_training_key("old.result.json", older, wanted));
  rope["theta"] = 500000.0;
  // The setting that changed, by its path in today's form, with both values.
  EXPECT_HAS(test::error_of([&] { check_training_key("old.result.json", older, wanted); }),
             "(model.rope.rope_theta 500000.0 then, 10000.0 now)");
}

TEST(LabSortCache, OtherTestLengthsAreTestedAgainAndTheTableStaysAligned) {
  SortConfig c = test::tiny_sort("lab_sort_cache");
  const auto first = run_sort(c);
  const std::string model = test::slurp(c.training.out_dir + "/sort-alibi.pt");
  c.test_lens = {4, 6, 5};
  const auto rows = run_sort(c);
  ASSERT_EQ(rows.size(), 6u);
  std::vector<int> lengths;
  for (const auto& r : rows) lengths.push_back(r.length);
  EXPECT_EQ(lengths, (std::vector<int>{4, 6, 5, 4, 6, 5})) << "the old rows were reused";
  EXPECT_EQ(rows[0].token_accuracy, first[0].token_accuracy) << "the same model, the same test at length 4";
  EXPECT_EQ(test::slurp(c.training.out_dir + "/sort-alibi.pt"), model) << "not retrained";
  const std::string table = format_sort_table(rows, c);
  EXPECT_NE(table.find("learned"), std::string::npos);
  c.test_sequences = 8;
  EXPECT_EQ(run_sort(c).size(), 6u);
  c.training.steps = 12;
  EXPECT_HAS(test::error_of([&] { run_sort(c); }), "steps 10 then, 12 now");
}

// A result file carries a checksum of its keys and rows: an edited bpc is an error naming the
// file, never a result; a file from before checksums is recomputed from the saved weights.
TEST(LabResultChecksum, AnEditedRowIsAnErrorAndAnUncheckedOneIsRecomputed) {
  ExtrapolateConfig c = test::tiny("lab_result_checksum", {"rope"});
  const ExtrapolateResult first = run_extrapolate(c);
  const std::string path = c.training.out_dir + "/rope.result.json";
  nlohmann::json saved = read_json_file(path);
  nlohmann::json edited = saved;
  edited["rows"][0]["bpc"] = 0.001;
  write_file_atomic(path, edited.dump(1));
  EXPECT_HAS(test::error_of([&] { run_extrapolate(c); }), path + " was changed after posenc wrote it");
  edited = saved;
  edited.erase("checksum");
  write_file_atomic(path, edited.dump(1));
  const ExtrapolateResult again = run_extrapolate(c);  // recomputed from rope.ckpt, not trusted
  ASSERT_EQ(again.rows.size(), first.rows.size());
  for (std::size_t i = 0; i < again.rows.size(); ++i) EXPECT_EQ(again.rows[i].bpc, first.rows[i].bpc);
  EXPECT_TRUE(read_json_file(path).contains("checksum"));
}

// lab sort re-tests a saved model only when it is the model its result file was computed from.
TEST(LabSortCache, ASwappedModelFileIsAnErrorNotAnotherModelsScore) {
  SortConfig c = test::tiny_sort("lab_sort_swapped");
  run_sort(c);
  const std::string dir = c.training.out_dir;
  write_file_atomic(dir + "/sort-alibi.pt", test::slurp(dir + "/sort-learned.pt"));
  c.test_lens = {4, 6};  // another test: the saved models are tested again
  EXPECT_HAS(test::error_of([&] { run_sort(c); }), dir + "/sort-alibi.pt is not the model");
}

TEST(LabSortCache, TableLooksUpEachCellByLength) {
  SortConfig c;
  c.test_lens = {4, 8};
  const std::vector<SortRow> rows = {{"rope", 8, true, 0.5, 0.25}, {"nope", 4, true, 1, 1}};  // rope has no length 4
  const std::string table = format_sort_table(rows, c);
  const std::string rope_line = table.substr(table.find("rope"), table.find('\n', table.find("rope")) - table.find("rope"));
  EXPECT_EQ(rope_line.find("50.0%"), rope_line.rfind("50.0%"));
  EXPECT_LT(rope_line.find('-'), rope_line.find("50.0%")) << rope_line;
}

}  // namespace
}  // namespace posenc::lab
