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
  check_range("checkpoint_every", t.checkpoint_every, 1, kMaxSteps);
  if (!(t.lr > 0 && t.lr < 1)) throw Error("lr must be in (0, 1), got " + format_number(t.lr));
}

void check_shape(const ModelShape& s) {
  check_range("--layers", s.layers, 1, 64);
  check_range("--heads", s.heads, 1, 256);
  check_range("--d-model", s.d_model, 2 * s.heads, 4096);
  if (s.d_model % (2 * s.heads) != 0)
    throw Error("--d-model must be a multiple of " + std::to_string(2 * s.heads) + " (heads x an even head width), got " +
                std::to_string(s.d_model));
}

std::vector<std::string> extension_names(const std::vector<RopeExtension>& extensions) {
  std::vector<std::string> names;
  for (RopeExtension e : extensions) names.emplace_back(to_string(e));
  return names;
}

}  // namespace posenc::lab
