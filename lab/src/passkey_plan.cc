#include "passkey_plan.h"

#include "check_range.h"
#include "extrapolate_plan.h"
#include "posenc_lab/passkey_task.h"
#include "posenc/error.h"
#include "posenc_lab/result_cache.h"
#include "posenc_torch/model_config.h"

namespace posenc::lab {

using torch_layer::ModelConfig;

// What train() reads: the passkey run's schedule in lab extrapolate's settings.
ExtrapolateConfig train_settings(const PasskeyConfig& c) {
  ExtrapolateConfig t;
  t.train_len = c.train_len;
  t.steps = c.steps;
  t.batch = c.batch;
  t.lr = c.lr;
  t.warmup = c.warmup;
  t.checkpoint_every = c.checkpoint_every;
  t.out_dir = c.out_dir;
  return t;
}

ModelPlan plan_for(const std::string& name, const PasskeyConfig& c, int vocab) {
  ModelConfig m;
  m.vocab_size = vocab;
  m.d_model = c.d_model;
  m.n_layers = c.layers;
  m.n_heads = c.heads;
  m.scheme = from_name<Scheme>(name);  // validate_passkey checked the name
  m.learned_positions = c.train_len;
  return {name, m, c.seed};
}

// The key sentence and the question as the examples spell them (training and grid alike).
std::string task_format() {
  const std::string digits(kPasskeyDigits, 'N');
  return std::string(kKeyPrefix) + digits + std::string(kKeySuffix) + "..." + std::string(kQuestion) + digits;
}

// Everything that determines a model's weights: what determines a language model's (lab
// extrapolate's key over the same settings), the task and its example format, the mix.
nlohmann::json training_key(const ModelPlan& p, const PasskeyConfig& c, const Corpus& corpus) {
  nlohmann::json k = lab::training_key(p, train_settings(c), corpus);
  k["task"] = "passkey";
  k["example"] = task_format();
  k["passkey_fraction"] = c.passkey_fraction;
  return k;
}

// Everything that determines the rows from the weights (fine-tunes included).
nlohmann::json evaluation_key(const ModelPlan& p, const PasskeyConfig& c) {
  nlohmann::json k = {{"format", 2}, {"example", task_format()}, {"multiples", c.multiples}, {"depths", c.depths}, {"samples", c.samples}, {"curve_chars", c.curve_chars},
                      {"probe_every", c.probe_every}};
  if (p.config.scheme == Scheme::kRope) {
    k["extensions"] = c.extensions;
    k["finetune_steps"] = c.finetune_steps;
  }
  return k;
}

void validate_passkey(const PasskeyConfig& c) {
  check_range("--train-len", c.train_len, kMinPasskeyLen, kMaxTrainLen / kFinetuneScale);
  check_range("--steps", c.steps, 1, kMaxSteps);
  check_range("--threads", c.threads, 0, max_lab_threads());
  check_range("--samples", c.samples, 1, 4096);
  check_range("--finetune-steps", c.finetune_steps, 0, kMaxSteps);
  check_range("--batch", c.batch, 1, 1024);
  check_range("--layers", c.layers, 1, 64);
  check_range("--d-model", c.d_model, 2 * c.heads, 4096);
  if (c.d_model % (2 * c.heads) != 0)
    throw Error("--d-model must be a multiple of " + std::to_string(2 * c.heads) + " (heads x an even head width), got " + std::to_string(c.d_model));
  check_range("warmup", c.warmup, 1, kMaxSteps);
  check_range("checkpoint_every", c.checkpoint_every, 1, kMaxSteps);
  check_range("--probe-every", c.probe_every, 0, kMaxSteps);
  check_range("curve_chars", c.curve_chars, 1, 1 << 24);
  if (!(c.lr > 0 && c.lr < 1)) throw Error("lr must be in (0, 1), got " + format_number(c.lr));
  if (!(c.passkey_fraction >= 0 && c.passkey_fraction <= 1))
    throw Error("--passkey-fraction must be in [0, 1], got " + format_number(c.passkey_fraction));
  if (c.multiples.empty()) throw Error("--multiples is empty: give at least one multiple of the training length");
  for (int m : c.multiples) check_range("--multiples", static_cast<long>(m) * c.train_len, c.train_len, kMaxEvalLen);
  if (c.depths.empty()) throw Error("--depths is empty: give at least one depth in [0, 1]");
  for (double d : c.depths) check_depth(d);
  if (c.schemes.empty()) throw Error("--schemes is empty: give at least one scheme");
  for (const std::string& name : c.schemes) {
    const auto scheme = try_from_name<Scheme>(name);
    if (!scheme || *scheme == Scheme::kMrope || *scheme == Scheme::kXl)
      throw Error("--schemes: '" + name + "' is not a passkey scheme; use: nope, sinusoidal, learned, rope, alibi, t5, deberta");
  }
  if (c.extensions.empty()) throw Error("--extensions is empty: give at least one of none, pi, ntk, dynamic, yarn");
  for (const std::string& ext : c.extensions) extension_params(ModelConfig{}, ext, 2, 4);  // throws naming a bad one
}

}  // namespace posenc::lab
