// What every lab command (extrapolate, sort, passkey) sets alike: how a model trains
// (TrainSettings), how big it is (ModelShape), the RoPE length extensions it is scored with
// (RopeExtension, named in one table), and the limits that keep one run under ~2 GB of memory.
// Each command's config embeds the two structs with its own defaults. Plain C++ types: callers
// need not include <torch/torch.h>.
#pragma once

#include <string>
#include <vector>

#include "posenc/names.h"

namespace posenc::lab {

// Eval lengths reach 16384 (256x the default training length, `--full`'s longest): attention at
// inference never forms an S x S matrix (the fused kernel; DeBERTa and XL in query blocks, model.cc).
inline constexpr int kMaxTrainLen = 512, kMaxEvalLen = 16384, kMaxSteps = 1000000;

// The most torch threads a lab run takes: this machine's hardware threads (at least 1, at most
// posenc::kMaxThreads). More only oversubscribe: 256 threads on 2 cores took 55 s for 3 sort steps.
int max_lab_threads();

// The learning rate of each training step.
enum class LrSchedule {
  kWarmupCosine,  // linear warm-up over `warmup` steps, then cosine down to 10% of lr (extrapolate, passkey)
  kConstant,      // lr at every step (sort)
};

// How one model trains, and where its files go.
struct TrainSettings {
  int train_len = 64;  // tokens per training sequence (sort: digits, the sequence is 2n + 1)
  int steps = 600;
  int batch = 32;      // rows per step
  double lr = 2e-3;    // peak learning rate (AdamW)
  int warmup = 50;     // steps of warm-up (kWarmupCosine)
  int checkpoint_every = 100;
  std::string out_dir = "out/lab";
  int threads = 0;     // torch threads; 0: one (faster than two for models this small on a 2-vCPU machine); at most max_lab_threads()
  LrSchedule schedule = LrSchedule::kWarmupCosine;
  // Ruoss et al. 2023: > 0 trains each row at a sorted random subset of 0 .. this-1 instead of
  // 0 .. len-1 (a learned table gets this many rows); evaluation reads 0 .. len-1. 0: off.
  int randomize_positions = 0;
};

// The transformer's size (the rest of its ModelConfig follows from the scheme: model_plan.h).
struct ModelShape {
  int layers = 3;
  int d_model = 128;  // split over the heads; the head width must be even (RoPE rotates pairs)
  int heads = 4;
};

// Throws Error naming the first setting out of range. The training length's range is the
// command's own (checked by it); so is warmup, which only kWarmupCosine reads.
void check_training(const TrainSettings& training);
// What a training row is, for check_shape's message: `lab vision` trains images of g x g
// patches, set by --train-grid.
struct TrainRowNames {
  const char* rows = "sequences";
  const char* unit = "tokens";
  const char* length_flag = "--train-len";
};
// shape's ranges, and that training it fits the memory this process may use (usable_memory):
// training_bytes of training.batch rows of training.train_len tokens over 80% of it is an Error
// naming the sizes and the limit.
void check_shape(const ModelShape& shape, const TrainSettings& training, const TrainRowNames& names = {});

// What this process may allocate: the least of physical memory, what its address-space limit
// (ulimit -v) leaves beyond what is mapped, its data limit (ulimit -d) and its cgroup's memory
// limit (v2 memory.max, v1 memory.limit_in_bytes), with what sets it (for messages).
struct MemoryBudget {
  double bytes = 0;  // 0: unknown
  std::string what;
};
MemoryBudget usable_memory();
// Bytes to train shape on batch sequences of len tokens: weights, gradients and AdamW's two
// moments (16 bytes a weight) plus a float32 estimate of the activations (Korthikanti et al.
// 2022's per-layer count, doubled for float32).
double training_bytes(const ModelShape& shape, int batch, int len);

// RoPE's inference-time length extensions (scale = eval_len / train_len), no retraining: none,
// position interpolation (Chen et al. 2023), NTK-aware base scaling, dynamic NTK (the scale of
// each window), YaRN (Peng et al. 2023); and remaps of the query-key distance on the model's own
// schedule (the core's PositionRemap, fused kernel, inference only): Self-Extend (Jin et al. 2024),
// ReRoPE and leaky ReRoPE (Su 2023), and Dual Chunk Attention (An et al. 2024; chunk_size the
// training length, as Qwen2.5-1M's config sets it to the trained context, local_size each window),
// each scored at the settings of RemapSettings.
enum class RopeExtension { kNone, kPi, kNtk, kDynamic, kYarn, kSelfExtend, kReRope, kLeakyReRope, kDualChunk };

// Whether ext remaps distances (scored zero-shot only: a remap has no backward pass to fine-tune).
inline bool is_remap(RopeExtension ext) {
  return ext == RopeExtension::kSelfExtend || ext == RopeExtension::kReRope || ext == RopeExtension::kLeakyReRope ||
         ext == RopeExtension::kDualChunk;
}

// The settings the remaps are scored at (train_len L). A distance Delta beyond Self-Extend's
// window w becomes about Delta / G + w (1 - 1/G), inside the trained range while
// Delta < G (L - w) + w: w = L/2 reaches 2.5L, 4.5L, 8.5L at G = 4, 8, 16, and w = L/4 reaches
// 3.25L, 6.25L, 12.25L, so the defaults span the passkey grid's 4x and 8x, with a neighbour window
// of a half or a quarter of the trained range kept exact (the paper's w is 1/8 to 1/4 of L).
// ReRoPE and leaky ReRoPE take each window too; leaky's slope k = (len - 1 - w) / (L - 1 - w)
// maps the longest distance of a length to L - 1, the longest one trained (k = 1 up to L).
struct RemapSettings {
  std::vector<int> groups = {4, 8, 16};  // Self-Extend's G, each >= 2
  std::vector<int> windows;              // w in [1, L - 2]; empty: {L / 4, L / 2}
};

// Throws Error naming the first remap setting out of range for training length train_len.
void check_remaps(const RemapSettings& remaps, int train_len);

// The names of extensions, in order (the JSON of results and cache keys).
std::vector<std::string> extension_names(const std::vector<RopeExtension>& extensions);

}  // namespace posenc::lab

namespace posenc {
POSENC_ENUM_NAMES(lab::RopeExtension, "--extensions", {lab::RopeExtension::kNone, "none"}, {lab::RopeExtension::kPi, "pi"},
                  {lab::RopeExtension::kNtk, "ntk"}, {lab::RopeExtension::kDynamic, "dynamic"}, {lab::RopeExtension::kYarn, "yarn"},
                  {lab::RopeExtension::kSelfExtend, "self-extend"}, {lab::RopeExtension::kReRope, "rerope"},
                  {lab::RopeExtension::kLeakyReRope, "leaky-rerope"}, {lab::RopeExtension::kDualChunk, "dual-chunk"});
}  // namespace posenc
