// `lab leaderboard`: the three experiments per corpus and seed, their numbers as observations.
#include "posenc_lab/leaderboard.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <map>
#include <set>
#include <tuple>

#include "build_info.h"
#include "extrapolate_plan.h"
#include "leaderboard_files.h"
#include "passkey_plan.h"
#include "posenc/error.h"
#include "posenc_lab/file_io.h"
#include "posenc_lab/passkey_task.h"
#include "posenc_lab/train_timing.h"
#include "posenc_torch/model_config.h"

namespace posenc::lab {
namespace {

std::string variant_row(const std::string& model, const std::string& extension, bool finetune) {
  return variant_name(model, extension, finetune);
}

// The corpus's short name in directories and tables: its file name without the extension.
std::string corpus_name(const std::string& corpus) { return std::filesystem::path(corpus).stem().string(); }

// The first probe step at which exact match at 1x reached one half (Olsson et al. 2022's phase
// change of an induction head), per model; NaN when it never did.
void observe_retrieval_steps(const PasskeyResult& r, const std::string& corpus, int seed, std::vector<Observation>* out) {
  std::vector<std::string> models;
  for (const auto& p : r.probes)
    if (std::find(models.begin(), models.end(), p.model) == models.end()) models.push_back(p.model);
  for (const auto& m : models) {
    double first = std::nan("");
    for (const auto& p : r.probes)
      if (p.model == m && p.accuracy >= 0.5 && !(first <= p.step)) first = static_cast<double>(p.step);
    out->push_back({corpus, m, "retrieval_step", 0, -1, seed, first});
  }
}

// The schemes of the board that an experiment runs: its own list's, in the board's order.
std::vector<std::string> experiment_schemes(const std::vector<std::string>& board, const std::vector<std::string>& experiment) {
  std::vector<std::string> out;
  for (const auto& s : board)
    if (std::find(experiment.begin(), experiment.end(), s) != experiment.end()) out.push_back(s);
  return out;
}

}  // namespace

void observe_extrapolate(const ExtrapolateResult& r, const ExtrapolateConfig& c, const std::string& corpus, std::vector<Observation>* out) {
  for (const ResultRow& row : r.rows) {
    if (!row.available) continue;  // a learned table shorter than the length: no number
    // PI's fine-tuned rows ("pi+finetune") take passkey's name for a fine-tuned variant.
    const std::string extension = row.extension == "pi+finetune" ? "pi+ft" : row.extension;
    const std::string name = extension == "none" ? row.model : row.model + "+" + extension;
    out->push_back({corpus, name, "bpc", static_cast<double>(row.eval_len) / c.training.train_len, -1, row.seed, row.bpc});
  }
}

void observe_passkey(const PasskeyResult& r, const PasskeyConfig& c, const std::string& corpus, std::vector<Observation>* out) {
  // Per variant, grid and length: every depth's cell, and their mean.
  using Key = std::tuple<std::string, std::string, int>;  // row, metric, length
  std::map<Key, std::pair<double, int>> mean;
  std::vector<Key> order;
  for (const PasskeyRow& row : r.rows) {
    const Key k{variant_row(row.model, row.extension, row.finetune), row.distractors > 0 ? "multikey" : "passkey", row.length};
    const double multiple = static_cast<double>(row.length) / c.training.train_len;
    out->push_back({corpus, std::get<0>(k), std::get<1>(k), multiple, row.depth, c.seed, row.accuracy});
    if (!mean.count(k)) order.push_back(k);
    mean[k].first += row.accuracy;
    mean[k].second += 1;
  }
  for (const Key& k : order)
    out->push_back({corpus, std::get<0>(k), std::get<1>(k), static_cast<double>(std::get<2>(k)) / c.training.train_len, -1, c.seed,
                    mean[k].first / mean[k].second});
  observe_retrieval_steps(r, corpus, c.seed, out);
}

void observe_sort(const std::vector<SortRow>& rows, const SortConfig& c, const std::string& corpus, std::vector<Observation>* out) {
  for (const SortRow& row : rows) {
    if (!row.available) continue;
    const double multiple = static_cast<double>(row.length) / c.training.train_len;
    out->push_back({corpus, row.scheme, "sort_tokens", multiple, -1, c.seed, row.token_accuracy});
    out->push_back({corpus, row.scheme, "sort_sequences", multiple, -1, c.seed, row.sequence_accuracy});
  }
}

LeaderboardConfig LeaderboardConfig::quick() {
  LeaderboardConfig c;
  // Every claim the board checks has its rows (FIRE's and xPos's too), passkey aside.
  c.schemes = {"nope", "sinusoidal", "rope", "alibi", "kerple", "fox", "fire", "xpos"};
  c.seeds = {0, 1};
  c.out_dir = "out/lab-leaderboard-quick";
  // Language modelling: 2 layers x 64 wide (passkey's size), 400 steps at 64 characters, scored
  // from 1x to 64x on 4096 validation characters; RoPE zero-shot with PI, NTK and YaRN (dynamic
  // NTK's token-by-token pass alone would take minutes).
  c.extrapolate.shape = {2, 64, 4};
  c.extrapolate.training.steps = 400;
  c.extrapolate.eval_chars = 4096;
  c.extrapolate.incremental_tokens = 0;
  c.extrapolate.extensions = {RopeExtension::kNone, RopeExtension::kPi, RopeExtension::kNtk, RopeExtension::kYarn};
  // Retrieval: RoPE, ALiBi and NoPE only, 1200 steps, 3 depths x 4 lengths of 16 sequences,
  // zero-shot; one key, and among 2 distractor keys (training rows carry 0 to 2 of them).
  c.passkey.schemes = {"rope", "alibi", "nope"};
  c.passkey.distractors = 2;
  c.passkey.training.steps = 1200;
  c.passkey.depths = {0, 0.5, 1};
  c.passkey.samples = 16;
  c.passkey.finetune_steps = 0;
  c.passkey.extensions = c.extrapolate.extensions;
  // Sorting: every scheme, 400 steps.
  c.sort.schemes = c.schemes;
  c.sort.training.steps = 400;
  c.sort.test_sequences = 128;
  return c;
}

LeaderboardConfig LeaderboardConfig::full() {
  LeaderboardConfig c;
  c.schemes = {"nope",   "sinusoidal", "learned", "rope", "alibi", "t5",   "xl",  "deberta",
               "kerple", "sandwich",   "fox",     "dpb",  "shaw",  "fire", "cope", "xpos"};
  c.corpora = {kDefaultCorpus, kSecondCorpus};
  c.seeds = {0, 1, 2};
  c.out_dir = "out/lab-leaderboard-full";
  // Each experiment at its own defaults (lab extrapolate's 3 x 128 model, lab passkey's fine-tunes),
  // and PI fine-tuned at 4x in bits per character too (Chen et al. 2023's recovery).
  c.extrapolate.eval_lens = {64, 128, 256, 512, 1024, 2048, 4096};
  c.extrapolate.pi_finetune_steps = 200;
  c.passkey.schemes = c.schemes;
  c.passkey.distractors = 2;
  c.sort.schemes = c.schemes;
  return c;
}

namespace {

// The board's passkey schemes: xl has none (lab passkey trains no segment-memory model).
std::vector<std::string> passkey_schemes_of(const LeaderboardConfig& c) {
  std::vector<std::string> schemes = experiment_schemes(c.schemes, c.passkey.schemes);
  schemes.erase(std::remove(schemes.begin(), schemes.end(), "xl"), schemes.end());
  return schemes;
}

// One seed and corpus of the board: each experiment's config as it runs, in <out>/<corpus>/seed-<seed>.
std::string unit_dir(const LeaderboardConfig& c, const std::string& corpus, int seed) {
  return c.out_dir + "/" + corpus + "/seed-" + std::to_string(seed);
}

ExtrapolateConfig extrapolate_config(const LeaderboardConfig& c, int seed, const std::string& corpus_path) {
  ExtrapolateConfig ex = c.extrapolate;
  ex.schemes = c.schemes;
  ex.seeds = {seed};
  ex.corpus = corpus_path;
  ex.training.out_dir = unit_dir(c, corpus_name(corpus_path), seed) + "/extrapolate";
  ex.launch = c.launch;
  return ex;
}

PasskeyConfig passkey_config(const LeaderboardConfig& c, int seed, const std::string& corpus_path) {
  PasskeyConfig pk = c.passkey;
  pk.schemes = passkey_schemes_of(c);
  pk.seed = seed;
  pk.corpus = corpus_path;
  pk.training.out_dir = unit_dir(c, corpus_name(corpus_path), seed) + "/passkey";
  pk.launch = c.launch;
  return pk;
}

SortConfig sort_config(const LeaderboardConfig& c, int seed) {  // digits, not text: once per seed, whatever the corpora
  SortConfig so = c.sort;
  so.schemes = experiment_schemes(c.schemes, c.sort.schemes);
  so.seed = seed;
  so.training.out_dir = unit_dir(c, kSortCorpus, seed) + "/sort";
  so.launch = c.launch;
  return so;
}

}  // namespace

void validate_leaderboard(const LeaderboardConfig& c) {
  if (c.schemes.empty()) throw Error("--schemes is empty: give at least one scheme");
  if (c.seeds.empty()) throw Error("--seeds: give at least one seed");
  if (c.corpora.empty()) throw Error("--corpora is empty: give at least one corpus");
  const std::set<int> distinct(c.seeds.begin(), c.seeds.end());
  if (distinct.size() != c.seeds.size()) {
    for (std::size_t i = 0; i < c.seeds.size(); ++i)
      if (std::count(c.seeds.begin(), c.seeds.end(), c.seeds[i]) > 1)
        throw Error("--seeds: seed " + std::to_string(c.seeds[i]) + " is given twice");
  }
  // A corpus is its file name in the board's rows and directories: two of one name would share them.
  for (std::size_t i = 0; i < c.corpora.size(); ++i) {
    const std::string& path = c.corpora[i];
    if (corpus_name(path) == kSortCorpus)
      throw Error("--corpora: '" + path + "' would be named '" + kSortCorpus + "', the sorting task's rows: rename the file");
    for (std::size_t j = 0; j < i; ++j) {
      if (c.corpora[j] == path) throw Error("--corpora: " + path + " is given twice");
      if (corpus_name(c.corpora[j]) == corpus_name(path))
        throw Error("--corpora: " + c.corpora[j] + " and " + path + " would share the name '" + corpus_name(path) +
                    "' (the board's rows and directories): give corpora of different file names");
    }
  }
  for (const auto& s : c.schemes) torch_layer::language_model_scheme(s, "--schemes");  // throws naming a bad one
  // Every experiment's settings, then every corpus read and checked as each experiment will:
  // nothing is made and nothing trains before all of them are good.
  const int seed = c.seeds.front();
  const bool passkey = !passkey_schemes_of(c).empty(), sort = !sort_config(c, seed).schemes.empty();
  validate(extrapolate_config(c, seed, c.corpora.front()));
  if (passkey) validate_passkey(passkey_config(c, seed, c.corpora.front()));
  if (sort) validate_sort(sort_config(c, seed));
  for (const std::string& path : c.corpora) {
    const Corpus corpus = load_corpus(path);
    check_corpus(extrapolate_config(c, seed, path), corpus);
    if (passkey) check_passkey_corpus(passkey_config(c, seed, path), corpus);
  }
}

int leaderboard_min_batch(const LeaderboardConfig& c) {
  int batch = c.extrapolate.training.batch;
  if (!passkey_schemes_of(c).empty()) batch = std::min(batch, c.passkey.training.batch);
  if (!experiment_schemes(c.schemes, c.sort.schemes).empty()) batch = std::min(batch, c.sort.training.batch);
  return batch;
}

LeaderboardResult run_leaderboard(const LeaderboardConfig& c) {
  validate_leaderboard(c);
  const LaunchConfig launch = resolve_launch(c.launch);
  const bool primary = is_primary(launch);
  // The experiments' runs, one after another, on one connection to the ranks' store, made before
  // rank 0 may wait for the lock below: its heartbeat tells the others it is alive.
  const RunSeries series(launch);
  // Rank 0 holds out_dir (a second run into it waits for this one, then reuses its models); the
  // others write only the files of models handed to them, inside it.
  std::unique_ptr<DirLock> lock;
  if (primary) lock = open_out_dir(c.out_dir);
  else make_out_dir(c.out_dir);
  const auto began = std::chrono::steady_clock::now();
  LeaderboardResult result;
  result.commit = build_commit();
  if (world_size_of(launch) > 1)
    result.notes.push_back(std::to_string(world_size_of(launch)) + " ranks (" + (distributes_models(launch) ? "whole models handed out" : "data parallel") +
                           "): training speed is each model's while the ranks ran at once, sharing a host's cores where they share a host");
  if (experiment_schemes(c.schemes, c.passkey.schemes) != passkey_schemes_of(c))
    result.notes.push_back("xl: no passkey rows (lab passkey trains no segment-memory model)");
  for (int seed : c.seeds) {
    for (const std::string& corpus_path : c.corpora) {
      const std::string corpus = corpus_name(corpus_path);
      const ExtrapolateConfig ex = extrapolate_config(c, seed, corpus_path);
      const ExtrapolateResult er = run_extrapolate(ex);
      const PasskeyConfig pk = passkey_config(c, seed, corpus_path);
      const PasskeyResult pr = pk.schemes.empty() ? PasskeyResult{} : run_passkey(pk);
      if (!primary) continue;  // rank 0 gathers the numbers
      result.units[corpus] = er.unit;
      observe_extrapolate(er, ex, corpus, &result.observations);
      for (const std::string& s : ex.schemes) {
        // Written beside the checkpoint by whoever trained it: absent when the model was trained
        // before timings were kept, or on another host (--distribute models).
        const auto t = read_train_timing(ex.training.out_dir + "/" + s + ".ckpt");
        if (!t) continue;
        result.observations.push_back({corpus, s, "train_tokens_per_s", 0, -1, seed, t->tokens_per_second()});
        if (t->first_step == 0) result.observations.push_back({corpus, s, "train_s", 0, -1, seed, t->seconds});  // a resumed run timed part
      }
      if (!pk.schemes.empty()) observe_passkey(pr, pk, corpus, &result.observations);
    }
    const SortConfig so = sort_config(c, seed);
    if (so.schemes.empty()) continue;
    const std::vector<SortRow> sorted = run_sort(so);
    if (primary) observe_sort(sorted, so, kSortCorpus, &result.observations);
  }
  if (!primary) return result;
  result.aggregates = aggregate(result.observations);
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count();
  write_leaderboard_files(result, c);
  return result;
}

}  // namespace posenc::lab
