// Train short, test long: one small character-level TransformerLM per positional scheme, trained
// at train_len, evaluated in bits per character (per byte when the corpus is not ASCII) at every
// eval length; the RoPE model also with
// each inference-time extension (PI, NTK, dynamic NTK, YaRN; scale = eval_len / train_len), no
// retraining. Plain C++ types: callers need not include <torch/torch.h>.
//
// Evaluation: non-overlapping windows of eval_len tokens over the validation text (the first
// eval_chars tokens of it), every window scored in one pass; bpc over all tokens and over the
// tokens at positions >= train_len. Dynamic NTK is scored twice on the same text (the first
// incremental_tokens validation tokens): one pass per window (its scale is then fixed by the
// window length, which makes it static NTK at scale eval_len/train_len) and incrementally, token
// by token with a KV cache under HF's runtime rule (keys cached rotated, never rebuilt), which is
// how it behaves in transformers.
//
// Runs survive: each model checkpoints to out_dir every checkpoint_every steps (checksummed,
// written to a temp file, then renamed); finished models leave <model>.result.json, keyed by
// every setting that determines the rows (result_cache.h): the same command reuses them, other
// evaluation settings re-evaluate the trained weights, other training settings are an error.
// An interrupted model resumes from its last checkpoint with the same batches. Each trained
// model is also saved as <model>.pt, with the vocabulary in vocab.json (a JSON array of byte
// values, index = token id, -1 for the unknown id), for `posenc plot attention --text`.
#pragma once

#include <string>
#include <vector>

#include "posenc_lab/corpus.h"
#include "posenc_lab/distributed.h"
#include "posenc_lab/file_io.h"
#include "posenc_lab/run_settings.h"

namespace posenc::lab {

// `--full`'s eval lengths: the default's, on to kMaxEvalLen.
inline const std::vector<int> kFullEvalLens = {64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384};

// The row label of dynamic NTK scored token by token with a KV cache (beside its "dynamic" row).
inline constexpr const char* kIncrementalRow = "dynamic-incremental";

// The streaming run (`--stream`): the RoPE model reads streams of multiple x train_len tokens of the
// validation text, token by token, through StreamingLLM's cache (Xiao et al. 2023;
// posenc_torch/sink_cache.h) of `sinks` + `window` tokens, keys re-rotated to their slots on
// eviction and not, and through the window alone (no sinks); bits per character over every token,
// rows "stream-s<S>-w<W>", "...-no-rerotate", "stream-s0-w<S+W>" at eval length multiple x train_len.
struct StreamSettings {
  bool on = false;
  int sinks = 4;
  int window = 0;     // 0: train_len - sinks, so the cache spans the trained range exactly
  int multiple = 16;  // each stream's length over the training length
};

struct ExtrapolateConfig {
  std::string corpus = kDefaultCorpus;
  std::vector<std::string> schemes = {"nope", "sinusoidal", "rope", "alibi"};
  std::vector<RopeExtension> extensions = {RopeExtension::kNone, RopeExtension::kPi, RopeExtension::kNtk, RopeExtension::kDynamic,
                                           RopeExtension::kYarn};
  TrainSettings training;  // train_len 64, 600 steps of 32 rows, lr 2e-3, warm-up 50, into out/lab
  ModelShape shape;        // 3 layers, 128 wide, 4 heads
  // Up to 64x the training length (`--full` adds 8192 and 16384, kFullEvalLens).
  std::vector<int> eval_lens = {64, 128, 256, 512, 1024, 2048, 4096};
  std::vector<int> seeds = {0};
  int eval_chars = 8192;         // validation tokens scored per eval length
  int incremental_tokens = 1024;  // validation tokens decoded one by one for incremental dynamic NTK, and the text of the 'dynamic' row then (0: skip)
  std::vector<double> rope_bases;    // base sweep: extra RoPE models ("rope-base100", ...)
  // Clipped RoPE (Li et al. 2026, arXiv 2602.05258): extra RoPE models whose n lowest frequencies
  // are softly clipped (RopeParams::clip_low), "rope-clip<n>" for each n, trained and scored so.
  std::vector<int> rope_clips;
  std::vector<double> sinusoidal_bases;  // base sweep: extra sinusoidal models ("sinusoidal-base100", ...)
  std::vector<std::string> fusions;  // extra sinusoidal models with these fusions ("sinusoidal-concat", ...)
  // Raw-index models (ModelConfig::raw_index: PE(p) = p in every channel), one per fusion named:
  // "raw-index" (add), "raw-index-concat", "raw-index-multiply". The tutorials' pitfall (issue 32).
  std::vector<std::string> raw_index;
  // An extra sinusoidal model whose token embeddings are multiplied by sqrt(d_model) before the
  // table is added (ModelConfig::embed_scale; Vaswani et al. 2017, section 3.4):
  // "sinusoidal-embed-scale". The tutorials' scaling step (issue 32).
  bool embed_scale = false;
  int pi_finetune_steps = 0;         // PI with a short fine-tune at 4x the training length
  RemapSettings remaps;              // the settings of the remap extensions (self-extend, rerope, leaky-rerope)
  StreamSettings stream;             // the streaming run of the RoPE model (off by default)
  long stop_after_steps = -1;        // stop (as if killed) after this many training steps in this run
  LaunchConfig launch;               // ranks of a distributed run (distributed.h); default: this process alone

  // `--full`: every scheme, 3 seeds from seed, the RoPE and sinusoidal base sweeps (100 and 1e6 beside the
  // default 10000), the sinusoidal fusion modes, PI with a fine-tune, scored to kMaxEvalLen.
  // What the user set stays: schemes_given / steps_given keep this config's schemes / steps.
  ExtrapolateConfig full(int seed, bool schemes_given, bool steps_given) const;
};

struct ResultRow {
  std::string model, scheme, extension;
  int seed = 0;
  int eval_len = 0;
  bool available = true;  // false: "n/a (cannot extrapolate)"
  double bpc = 0, bpc_beyond = 0;  // bpc_beyond: tokens at positions >= train_len (NaN when none)
  long tokens = 0, tokens_beyond = 0;
  std::string note;
};

struct ExtrapolateResult {
  std::vector<ResultRow> rows;
  std::vector<std::string> notes;
  bool complete = true;  // false when stop_after_steps cut the run short
  std::string unit = "bits per character";  // Corpus::unit()
};

// Runs (or resumes) every model and writes the results beside them (rank 0): results.json,
// results.csv and chart.svg in out_dir.
ExtrapolateResult run_extrapolate(const ExtrapolateConfig& config);

// The stdout table: one row per model/extension, one column per eval length (bpc, all tokens).
std::string format_table(const ExtrapolateResult& result, const ExtrapolateConfig& config);
// results.json text ({"results": [...], "notes": [...], "config": {...}}) and results.csv text.
std::string results_json(const ExtrapolateResult& result, const ExtrapolateConfig& config);
std::string results_csv(const ExtrapolateResult& result);
// The chart: bpc against eval length (log x), one line per model/extension (mean over seeds).
std::string results_svg(const ExtrapolateResult& result, const ExtrapolateConfig& config);

}  // namespace posenc::lab
