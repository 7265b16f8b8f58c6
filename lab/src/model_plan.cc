#include "model_plan.h"

#include <algorithm>
#include <thread>

#include "check_range.h"
#include "posenc/threads.h"

namespace posenc::lab {

torch_layer::ModelConfig model_config(Scheme scheme, const ModelShape& shape, int train_len, int vocab,
                                      const RelativeSettings& relative) {
  torch_layer::ModelConfig m;
  m.vocab_size = vocab;
  m.d_model = shape.d_model;
  m.n_layers = shape.layers;
  m.n_heads = shape.heads;
  m.scheme = scheme;
  m.learned_positions = train_len;
  m.t5 = {32, 128, false};
  m.deberta_buckets = relative.deberta_buckets;
  m.deberta_max_relative = 256;
  if (scheme == Scheme::kXl && relative.xl_memory) m.xl_mem_len = train_len;
  return m;
}

int max_lab_threads() { return std::clamp(static_cast<int>(std::thread::hardware_concurrency()), 1, posenc::kMaxThreads); }

void check_training(const TrainSettings& t) {
  check_range("--steps", t.steps, 1, kMaxSteps);
  check_range("--threads", t.threads, 0, max_lab_threads());
  check_range("batch", t.batch, 1, 1024);
  // A training forward reads train_len positions (the sorting task's 2 train_len: validate_sort).
  if (t.randomize_positions != 0) check_range("--randomize-positions", t.randomize_positions, t.train_len, kMaxEvalLen);
  check_range("checkpoint_every", t.checkpoint_every, 1, kMaxSteps);
  if (!(t.lr > 0 && t.lr < 1)) throw Error("lr must be in (0, 1), got " + format_number(t.lr));
}

void check_shape(const ModelShape& s, const TrainSettings& t, const TrainRowNames& names) {
  check_range("--layers", s.layers, 1, 64);
  check_range("--heads", s.heads, 1, 256);
  check_range("--d-model", s.d_model, 2 * s.heads, 4096);
  if (s.d_model % (2 * s.heads) != 0)
    throw Error("--d-model must be a multiple of " + std::to_string(2 * s.heads) + " (heads x an even head width), got " +
                std::to_string(s.d_model));
  const double need = training_bytes(s, t.batch, t.train_len);
  const MemoryBudget memory = usable_memory();
  if (memory.bytes > 0 && need > 0.8 * memory.bytes)
    throw Error("--d-model " + std::to_string(s.d_model) + " --layers " + std::to_string(s.layers) + " with " +
                std::to_string(t.batch) + " " + names.rows + " of " + std::to_string(t.train_len) + " " + names.unit + " needs about " +
                format_number(need / 1e9) + " GB to train (weights, gradients, AdamW's moments and activations in float32), " +
                "more than the " + format_number(0.8 * memory.bytes / 1e9) + " GB it can have (80% of " + memory.what +
                "): use a smaller model or a smaller " + names.length_flag);
}

void check_remaps(const RemapSettings& r, int train_len) {
  for (const int g : r.groups) check_range("--remap-groups", g, 2, kMaxEvalLen);
  for (const int w : r.windows) check_range("--remap-windows", w, 1, train_len - 2);  // leaky ReRoPE divides by L - 1 - w
  if (r.groups.empty()) throw Error("--remap-groups is empty: give at least one Self-Extend group size >= 2");
  if (r.windows.empty() && train_len < 4)
    throw Error("--remap-windows: the default windows train_len / 4 and / 2 need --train-len >= 4, got " + std::to_string(train_len));
}

std::vector<std::string> extension_names(const std::vector<RopeExtension>& extensions) {
  std::vector<std::string> names;
  for (RopeExtension e : extensions) names.emplace_back(to_string(e));
  return names;
}

}  // namespace posenc::lab
