// `posenc lab passkey`: does a model *use* context past its training length? Flat bits per
// character do not show it (ALiBi keeps its loss flat partly by looking only nearby, Press et
// al. 2022, App. B.2), so each model is trained at train_len on text mixed with passkey sequences
// (passkey_task.h) and asked for the key at every grid length x depth; RoPE also with each
// length extension (PI, Chen et al. 2023; NTK and dynamic NTK; YaRN, Peng et al. 2023)
// zero-shot and after a short fine-tune at 2x the training length, as the PI paper does
// (about 1% of the training steps), and each distance remap (Self-Extend, ReRoPE, leaky ReRoPE)
// zero-shot at each of its settings. RULER (Hsieh et al. 2024) shows one needle can be too easy;
// this grid is the single-needle baseline.
//
// Runs survive like `lab extrapolate`: checkpoints every checkpoint_every steps, finished models
// leave <out>/<model>.passkey.json keyed by everything that determines their rows
// (result_cache.h). Plain C++ types: callers need not include <torch/torch.h>.
#pragma once

#include <string>
#include <vector>

#include "posenc_lab/corpus.h"
#include "posenc_lab/distributed.h"
#include "posenc_lab/run_settings.h"

namespace posenc::lab {

struct PasskeyConfig {
  std::string corpus = kDefaultCorpus;
  std::vector<std::string> schemes = {"rope", "alibi", "nope"};
  // RoPE's extensions, each zero-shot and (finetune_steps > 0, not none, not a remap) fine-tuned at 2x.
  std::vector<RopeExtension> extensions = {RopeExtension::kNone,       RopeExtension::kPi,     RopeExtension::kNtk,
                                           RopeExtension::kDynamic,    RopeExtension::kYarn,   RopeExtension::kSelfExtend,
                                           RopeExtension::kReRope,     RopeExtension::kLeakyReRope};
  RemapSettings remaps;  // the settings each remap extension is scored at
  // train_len 64, 1500 steps of 32, lr 3e-3, warm-up 50. Measured with probe_every on this
  // 2-core machine: at 2 layers x 64 wide, lr 3e-3, exact match at 1x jumps from 0% to ~96%
  // between steps 500 and 600 (RoPE, ALiBi) or 600 and 900 (NoPE); 1500 steps leave a margin
  // past the jump. lr 6e-3 never left the plateau in 1000.
  TrainSettings training{64, 1500, 32, 3e-3, 50, 100, "out/lab-passkey"};
  ModelShape shape{2, 64, 4};   // layers, d_model, heads
  std::vector<int> multiples = {1, 2, 4, 8};  // grid lengths: train_len times these
  std::vector<double> depths = {0, 0.25, 0.5, 0.75, 1};
  double passkey_fraction = 0.9;  // passkey rows per training batch (the rest: plain text)
  // Distractor keys (passkey_task.h; RULER's multi-key needle): each training passkey row has a
  // uniform 0 .. distractors of them, and the grid is scored with none and with this many (rows
  // with PasskeyRow::distractors > 0). 0: one key only, as before.
  int distractors = 0;
  // Per extension, at 2x the training length (0: zero-shot only); about a quarter of training.
  // The PI paper's ~1% (15 steps here) barely moves these models; after 100, NTK and YaRN
  // retrieved at 2x and PI did not (it squeezes the high frequencies that the previous-token
  // head reads, as Peng et al. 2023 argue); after 400, PI did too.
  int finetune_steps = 400;
  int samples = 32;               // sequences per grid cell
  int curve_chars = 8192;         // validation characters of the per-position loss curve
  int seed = 0;
  // Every probe_every training steps, exact match at 1x on the grid's 1x cells (0: off).
  // Retrieval by content is an induction-head task (Olsson et al. 2022), learned suddenly after
  // a plateau: the probe shows when it switched on. It leaves the weights as they would be.
  int probe_every = 100;
  long stop_after_steps = -1;  // stop (as if killed) after this many training steps in this run
  LaunchConfig launch;  // ranks of a distributed run (distributed.h); default: RANK and WORLD_SIZE, else this process alone

  // `--full`: also sinusoidal and T5, lengths to 64x, 64 sequences per cell, for each of
  // schemes, multiples and samples the user did not give (a list typed as the default's stays).
  PasskeyConfig full(bool schemes_given, bool multiples_given, bool samples_given) const;
};

struct PasskeyRow {
  std::string model, scheme, extension;  // extension "none" for no RoPE extension
  bool finetune = false;
  int length = 0;
  double depth = 0;
  double accuracy = 0;  // greedy exact match, 0..1
  double logprob = 0;   // mean natural-log probability of an answer digit
  int samples = 0;
  int distractors = 0;  // distractor keys in each sequence of the cell
};

// Bits per character against position on plain validation text at the longest grid length.
struct PositionCurve {
  std::string model, extension;
  bool finetune = false;
  std::vector<double> bits;  // one per position
};

// Exact match at the training length during training (probe_every).
struct ProbePoint {
  std::string model;
  long step = 0;
  double accuracy = 0, logprob = 0;
};

struct PasskeyResult {
  std::vector<PasskeyRow> rows;
  std::vector<ProbePoint> probes;
  std::vector<PositionCurve> curves;
  std::vector<std::string> notes;
  bool complete = true;  // false when stop_after_steps cut the run short
  std::vector<std::string> figures;  // what write_passkey_figures wrote
};

// Runs (or resumes) every model and writes the results beside them: <out>/results.json
// (passkey_json) and the figures (write_passkey_figures).
PasskeyResult run_passkey(const PasskeyConfig& config);
// Throws Error naming the first setting out of range (called by run_passkey first).
void validate_passkey(const PasskeyConfig& config);

// The stdout table: one row per model variant, one column per grid length (accuracy over the
// depths, and mean log-probability).
std::string passkey_table(const PasskeyResult& result, const PasskeyConfig& config);
// {"train_len": ..., "results": [...], "curves": [...], "notes": [...]}.
std::string passkey_json(const PasskeyResult& result, const PasskeyConfig& config);
// Writes <out>/heatmap-<variant>.png + .svg (depth x length, accuracy) per model variant and
// <out>/position-loss.svg; returns the paths written.
std::vector<std::string> write_passkey_figures(const PasskeyResult& result, const PasskeyConfig& config);

// A variant's name in tables and files: model, "+ext" when extended, "+ft" when fine-tuned.
std::string variant_name(const std::string& model, const std::string& extension, bool finetune);

}  // namespace posenc::lab
