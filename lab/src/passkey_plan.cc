#include "passkey_plan.h"

#include <algorithm>

#include "check_range.h"
#include "extrapolate_plan.h"
#include "model_plan.h"
#include "posenc_lab/passkey_task.h"
#include "posenc/error.h"
#include "posenc_lab/result_cache.h"
#include "posenc_torch/model_config.h"

namespace posenc::lab {

ModelPlan plan_for(const std::string& name, const PasskeyConfig& c, int vocab) {
  // validate_passkey checked the name
  torch_layer::ModelConfig m = model_config(from_name<Scheme>(name), c.shape, c.training.train_len, vocab);
  m.learned_positions = position_range(c.training, c.training.train_len);
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
  nlohmann::json k = lab::training_key(p, c.training, corpus);
  k["task"] = "passkey";
  k["example"] = task_format();
  k["passkey_fraction"] = c.passkey_fraction;
  if (c.distractors > 0) k["distractors"] = c.distractors;  // keys without keep their value
  return k;
}

// Everything that determines the rows from the weights (fine-tunes included).
nlohmann::json evaluation_key(const ModelPlan& p, const PasskeyConfig& c) {
  nlohmann::json k = {{"format", 2}, {"example", task_format()}, {"multiples", c.multiples}, {"depths", c.depths}, {"samples", c.samples}, {"curve_chars", c.curve_chars},
                      {"probe_every", c.probe_every}};
  if (p.config.scheme == Scheme::kRope) {
    k["extensions"] = extension_names(c.extensions);
    k["finetune_steps"] = c.finetune_steps;
    if (std::any_of(c.extensions.begin(), c.extensions.end(), is_remap))  // keys without remaps keep their value
      k["remaps"] = {{"groups", c.remaps.groups}, {"windows", c.remaps.windows}, {"leak", "(len - 1 - w) / (train_len - 1 - w)"}};
  }
  if (c.distractors > 0) k["distractors"] = c.distractors;
  return k;
}

void validate_passkey(const PasskeyConfig& c) {
  const TrainSettings& t = c.training;
  check_range("--distractors", c.distractors, 0, kMaxDistractors);
  check_range(c.distractors ? "--train-len (with --distractors " + std::to_string(c.distractors) + ")" : std::string("--train-len"), t.train_len,
              min_passkey_len(c.distractors), kMaxTrainLen / kFinetuneScale);
  check_training(t);
  check_range("--samples", c.samples, 1, 4096);
  check_range("--finetune-steps", c.finetune_steps, 0, kMaxSteps);
  check_shape(c.shape, t);
  check_range("warmup", t.warmup, 1, kMaxSteps);
  check_range("--probe-every", c.probe_every, 0, kMaxSteps);
  check_range("curve_chars", c.curve_chars, 1, 1 << 24);
  if (!(c.passkey_fraction >= 0 && c.passkey_fraction <= 1))
    throw Error("--passkey-fraction must be in [0, 1], got " + format_number(c.passkey_fraction));
  if (c.multiples.empty()) throw Error("--multiples is empty: give at least one multiple of the training length");
  // Each multiple m scores prompts of m x --train-len characters, at most kMaxEvalLen.
  const long most = std::max(1L, static_cast<long>(kMaxEvalLen) / t.train_len);
  for (int m : c.multiples)
    if (m < 1 || m > most)
      throw Error("--multiples must be in [1, " + std::to_string(most) + "] (m x --train-len " + std::to_string(t.train_len) +
                  " characters, at most " + std::to_string(kMaxEvalLen) + "), got " + std::to_string(m));
  check_distinct("--multiples", c.multiples, [](int m) { return "multiple " + std::to_string(m); });
  if (c.depths.empty()) throw Error("--depths is empty: give at least one depth in [0, 1]");
  for (double d : c.depths) check_depth(d);
  check_distinct("--depths", c.depths, [](double d) { return "depth " + format_number(d); });
  if (c.schemes.empty()) throw Error("--schemes is empty: give at least one scheme");
  for (const std::string& name : c.schemes) {
    const auto scheme = try_from_name<Scheme>(name);
    if (!scheme || *scheme == Scheme::kMrope || *scheme == Scheme::kXl)
      throw Error("--schemes: '" + name + "' is not a passkey scheme; use: " + torch_layer::language_model_scheme_names({Scheme::kXl}));
  }
  if (c.extensions.empty()) throw Error("--extensions is empty: give at least one of " + enum_names_joined<RopeExtension>(", "));
  check_distinct_names("--schemes", c.schemes);
  check_distinct_names("--extensions", extension_names(c.extensions));
  check_remaps(c.remaps, t.train_len);
}

void check_passkey_corpus(const PasskeyConfig& c, const Corpus& corpus) {
  const int longest = c.training.train_len * *std::max_element(c.multiples.begin(), c.multiples.end());
  if (static_cast<long>(corpus.valid.size()) < longest + 2 ||
      static_cast<long>(corpus.train.size()) < kFinetuneScale * c.training.train_len + 2)
    throw Error("the corpus " + c.corpus + " is too short for sequences of " + std::to_string(longest) + " characters");
}

PasskeyConfig PasskeyConfig::full(bool schemes_given, bool multiples_given, bool samples_given) const {
  PasskeyConfig c = *this;
  if (!schemes_given) c.schemes = {"rope", "alibi", "nope", "sinusoidal", "t5"};
  if (!multiples_given) c.multiples = {1, 2, 4, 8, 16, 32, 64};
  if (!samples_given) c.samples = 64;
  return c;
}

}  // namespace posenc::lab
