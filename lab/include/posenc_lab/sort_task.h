// The sorting task: a sequence of random digits, a separator, then the same digits sorted. Train
// on length n, test on longer sequences: does the positional scheme let attention find "the next
// smallest digit" at lengths it never saw? Accuracy is teacher-forced over the sorted half
// (per token, and whole sequences right). Each model is saved as <out>/sort-<scheme>.pt for
// attention maps. Plain C++ types: callers need not include <torch/torch.h>.
#pragma once

#include <string>
#include <vector>

#include "posenc_lab/distributed.h"
#include "posenc_lab/run_settings.h"

namespace posenc::lab {

// Limits that keep one run under ~2 GB of memory (test sequences are scored in one batch).
inline constexpr int kMaxSortTrainLen = 64, kMaxSortTestLen = 128;

struct SortConfig {
  std::vector<std::string> schemes = {"nope", "sinusoidal", "learned", "rope", "alibi", "t5"};
  // train_len: digits per training sequence (of 2n + 1 tokens); 600 steps of 64 at a constant lr 3e-3.
  TrainSettings training{16, 600, 64, 3e-3, 0, 100, "out/lab-sort", 0, LrSchedule::kConstant};
  ModelShape shape{2, 64, 4};  // layers, d_model, heads
  std::vector<int> test_lens = {16, 24, 32};
  int seed = 0;
  int test_sequences = 256;
  LaunchConfig launch;  // ranks of a distributed run (distributed.h); default: this process alone
};

struct SortRow {
  std::string scheme;
  int length = 0;
  bool available = true;  // false: a learned table shorter than the sequence
  double token_accuracy = 0, sequence_accuracy = 0;
};

// Results are cached per scheme in <out>/sort-<scheme>.result.json under the keys of
// result_cache.h: other test settings test the saved model again; other training settings are an
// Error naming them. Rank 0 writes <out>/results.json (sort_json).
std::vector<SortRow> run_sort(const SortConfig& config);
// Throws Error naming the first bad setting (run_sort's own check, before anything is made).
void validate_sort(const SortConfig& config);
std::string format_sort_table(const std::vector<SortRow>& rows, const SortConfig& config);
std::string sort_json(const std::vector<SortRow>& rows, const SortConfig& config);

// One sequence of the task for n digits: [digits..., separator, sorted digits...] (2n + 1 ids;
// digits are 0..9, the separator is 10).
std::vector<long> sort_example(int n, unsigned long long seed);

}  // namespace posenc::lab

namespace posenc::lab {

struct HeatmapRequestAttention {
  std::string model_path;          // a model saved by save_model (e.g. <out>/sort-rope.pt)
  std::vector<long> tokens;        // input ids
  int layer = 0, head = 0;
};
// Attention probabilities of one head ([query][key], row-major) and their size.
std::vector<double> attention_weights(const HeatmapRequestAttention& request, int* size);

// Which heads look where, measured (`posenc lab heads`): a saved sort model run on `sequences`
// test sequences of `digits` digits (2 digits + 1 tokens each, drawn from seed).
struct HeadOffsetsRequest {
  std::string model_path;  // e.g. <out>/sort-rope.pt
  int digits = 16;
  int sequences = 64;
  unsigned long long seed = 1;
};
// Per (layer, head): mass[o], the attention probability on the key o tokens back (o = 0: the
// query itself), averaged over the queries that have such a key and over the sequences; and the
// offset with the most. A previous-token head (Olsson et al. 2022) has most of it at o = 1.
struct HeadOffsets {
  int layer = 0, head = 0;
  double top_mass = 0;
  int top_offset = 0;
  std::vector<double> mass;  // [2 digits + 1]
  double previous() const { return mass.size() > 1 ? mass[1] : 0; }
};
// Errors name the value: a file that is not a sort model, digits or sequences out of range.
std::vector<HeadOffsets> sort_head_offsets(const HeadOffsetsRequest& request);

}  // namespace posenc::lab
