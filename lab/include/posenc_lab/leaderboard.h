// `posenc lab leaderboard`: every positional scheme on the same footing. For each corpus and
// seed it runs the lab's three experiments with one shape and budget per experiment —
// `lab extrapolate` (bits per character from 1x to 64x the training length, RoPE also with its
// zero-shot extensions), `lab passkey` (retrieval at 1x-8x, one key and with distractor keys,
// zero-shot and fine-tuned RoPE extensions), `lab sort` (accuracy at 1x, 1.5x, 2x) — each into its
// own directory, so every model is cached and resumed as those commands do, then gathers their
// numbers into observations (one number of one row, metric, corpus and seed) and aggregates
// them over seeds: the mean and the sample standard deviation (n - 1).
//
// It writes results.json (every observation and every aggregate), results.csv (the aggregates),
// leaderboard.md and report.html (leaderboard_report.h). Plain C++ types: callers need not
// include <torch/torch.h>.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "posenc_lab/extrapolate.h"
#include "posenc_lab/passkey.h"
#include "posenc_lab/sort_task.h"

namespace posenc::lab {

// One measured number. row: a scheme ("alibi"), or a RoPE variant ("rope+yarn"; "+ft" when
// fine-tuned). metric: "bpc" (bits per character, all tokens), "passkey" and "multikey" (exact
// match, 0..1; mean over depths unless depth >= 0), "sort_tokens" and "sort_sequences" (accuracy,
// 0..1), "retrieval_step" (the first probe step with passkey exact match >= 0.5 at 1x; NaN when
// it never switched on), "train_tokens_per_s", "train_s" (the extrapolate model's training loop).
struct Observation {
  std::string corpus, row, metric;
  double multiple = 0;  // evaluation length / training length; 0 for metrics without a length
  double depth = -1;    // passkey cells: the key's depth; -1: the mean over depths
  int seed = 0;
  double value = 0;
};

// One (corpus, row, metric, multiple, depth) over the seeds: the mean of the finite values and
// their sample standard deviation (0 for one value); missing counts the seeds with a NaN.
struct Aggregate {
  std::string corpus, row, metric;
  double multiple = 0, depth = -1;
  double mean = 0, spread = 0;
  int seeds = 0, missing = 0;
};

std::vector<Aggregate> aggregate(const std::vector<Observation>& observations);

// The second corpus of --full, of another genre than the Bible: Debian's fortunes (quotations,
// jokes, verse), made by scripts/make-corpus.sh (digits and '=' removed: the passkey needs both
// absent from the filler).
inline constexpr const char* kSecondCorpus = "data/fortunes.txt";

// The sorting task's rows name this corpus: digits, the same whatever --corpora says.
inline constexpr const char* kSortCorpus = "digits";

struct LeaderboardConfig {
  // The board's schemes: all of them in lab extrapolate; in lab passkey and lab sort those their
  // configs below also list (quick() runs passkey on a subset; --schemes sets all three).
  std::vector<std::string> schemes;
  std::vector<std::string> corpora = {kDefaultCorpus};
  std::vector<int> seeds = {0, 1};
  // Each experiment's settings; their seeds, corpus and out_dir are the leaderboard's.
  ExtrapolateConfig extrapolate;
  PasskeyConfig passkey;
  SortConfig sort;
  std::string out_dir = "out/lab-leaderboard";
  std::string command;                     // the command line, for the report
  // The ranks every experiment runs on (distributed.h): whole models handed out
  // (--distribute models), or each model data parallel. Rank 0 writes the board.
  LaunchConfig launch;

  // The subset that fits about 15 minutes on a 2-core machine, and the whole board.
  static LeaderboardConfig quick();
  static LeaderboardConfig full();
};

// The fewest rows of one training step among the experiments it runs: data parallelism splits
// each over the ranks (distributed.h's check_batch_split).
int leaderboard_min_batch(const LeaderboardConfig& c);

struct LeaderboardResult {
  std::vector<Observation> observations;
  std::vector<Aggregate> aggregates;
  std::vector<std::string> notes;
  std::map<std::string, std::string> units;  // corpus -> "bits per character" (or per byte: Corpus::unit())
  double seconds = 0;  // wall time of this run (models found cached cost nothing)
  std::string commit;  // the source commit of this binary (build_info.h)
};

// Throws Error naming the first bad setting (a seed or a corpus given twice, two corpora of one
// file name, each experiment's own checks) or the first corpus an experiment cannot use (missing,
// unreadable, too short): all before anything is made or trains.
void validate_leaderboard(const LeaderboardConfig& config);
// Runs (or resumes) every experiment of every corpus and seed, then writes the files above into
// out_dir, which it holds locked throughout (a second run into it waits, then reuses the models).
LeaderboardResult run_leaderboard(const LeaderboardConfig& config);

// leaderboard.md's text (also what the command prints): per corpus, the board and the claims.
std::string leaderboard_markdown(const LeaderboardResult& result, const LeaderboardConfig& config);

// The experiments' own results as observations (also what the tests feed the aggregation).
void observe_extrapolate(const ExtrapolateResult& result, const ExtrapolateConfig& config, const std::string& corpus,
                         std::vector<Observation>* out);
// Passkey rows with distractors are the "multikey" metric.
void observe_passkey(const PasskeyResult& result, const PasskeyConfig& config, const std::string& corpus, std::vector<Observation>* out);
void observe_sort(const std::vector<SortRow>& rows, const SortConfig& config, const std::string& corpus, std::vector<Observation>* out);

}  // namespace posenc::lab
