#include "extrapolate_plan.h"

#include <algorithm>

#include "check_range.h"
#include "posenc/error.h"
#include "posenc_lab/result_cache.h"
#include "posenc_torch/model_config.h"

namespace posenc::lab {

using torch_layer::Fusion;
using torch_layer::ModelConfig;

std::vector<ModelPlan> plan_models(const ExtrapolateConfig& c, int vocab) {
  std::vector<ModelPlan> plans;
  auto base = [&](Scheme s) {
    ModelConfig m;
    m.vocab_size = vocab;
    m.d_model = c.d_model;
    m.n_layers = c.layers;
    m.n_heads = c.heads;
    m.scheme = s;
    m.learned_positions = c.train_len;  // a learned table is exactly as long as training
    m.t5 = {32, 128, false};
    m.deberta_buckets = 32;
    m.deberta_max_relative = 256;
    // Transformer-XL with its segment recurrence: memory as long as a training segment (the
    // paper's mem_len = tgt_len), so its reach is n_layers x train_len tokens.
    if (s == Scheme::kXl) m.xl_mem_len = c.train_len;
    return m;
  };
  for (int seed : c.seeds) {
    const std::string suffix = c.seeds.size() > 1 ? "-s" + std::to_string(seed) : "";
    for (const std::string& name : c.schemes) {
      plans.push_back({name + suffix, base(torch_layer::language_model_scheme(name, "--schemes")), seed});
    }
    for (double b : c.rope_bases) {
      ModelPlan p{"rope-base" + format_number(b) + suffix, base(Scheme::kRope), seed, true};
      p.config.rope.theta = b;
      plans.push_back(p);
    }
    for (const std::string& f : c.fusions) {
      ModelPlan p{"sinusoidal-" + f + suffix, base(Scheme::kSinusoidal), seed, true};
      p.config.fusion = from_name<Fusion>(f);
      if (p.config.fusion != Fusion::kAdd) plans.push_back(p);  // add: the plain sinusoidal model
    }
  }
  return plans;
}

nlohmann::json training_key(const ModelPlan& p, const ExtrapolateConfig& c, const Corpus& corpus) {
  return {{"format", 2},
          {"model", nlohmann::json::parse(torch_layer::config_to_json(p.config))},
          {"seed", p.seed},
          {"steps", c.steps},
          {"batch", c.batch},
          {"lr", c.lr},
          {"warmup", c.warmup},
          {"train_len", c.train_len},
          {"corpus_fnv1a64", hex64(corpus.hash)}};
}

bool scores_incremental(const ExtrapolateConfig& c) {
  return c.incremental_tokens > 0 && std::find(c.extensions.begin(), c.extensions.end(), "dynamic") != c.extensions.end();
}

bool fine_tunes(const ModelPlan& p, const ExtrapolateConfig& c) {
  return p.config.scheme == Scheme::kRope && !p.variant && c.pi_finetune_steps > 0;
}

nlohmann::json evaluation_key(const ModelPlan& p, const ExtrapolateConfig& c) {
  nlohmann::json k = {{"eval_lens", c.eval_lens}, {"eval_chars", c.eval_chars}};
  if (p.config.scheme == Scheme::kRope) {
    k["extensions"] = c.extensions;
    if (scores_incremental(c)) k["incremental_tokens"] = c.incremental_tokens;
  }
  if (fine_tunes(p, c)) k["pi_finetune_steps"] = c.pi_finetune_steps;
  return k;
}

void validate(const ExtrapolateConfig& c) {
  check_range("--train-len", c.train_len, 2, kMaxTrainLen);
  check_range("--steps", c.steps, 1, kMaxSteps);
  check_range("--threads", c.threads, 0, max_lab_threads());
  check_range("batch", c.batch, 1, 1024);
  check_range("warmup", c.warmup, 1, kMaxSteps);
  check_range("checkpoint_every", c.checkpoint_every, 1, kMaxSteps);
  check_range("eval_chars", c.eval_chars, 1, 1 << 24);
  check_range("incremental_tokens", c.incremental_tokens, 0, 1 << 16);
  check_range("pi_finetune_steps", c.pi_finetune_steps, 0, kMaxSteps);
  if (c.pi_finetune_steps > 0) check_range("--train-len (the PI fine-tune trains at 4x)", c.train_len, 2, kMaxTrainLen / kPiScale);
  if (!(c.lr > 0 && c.lr < 1)) throw Error("lr must be in (0, 1), got " + format_number(c.lr));
  if (c.eval_lens.empty()) throw Error("--eval-lens is empty: give at least one evaluation length");
  for (int len : c.eval_lens) check_range("--eval-lens", len, 2, kMaxEvalLen);
  if (c.schemes.empty() && c.rope_bases.empty() && c.fusions.empty()) throw Error("--schemes is empty: give at least one scheme");
  if (c.extensions.empty()) throw Error("--extensions is empty: give at least one of none, pi, ntk, dynamic, yarn");
  ModelConfig probe;
  for (const std::string& ext : c.extensions) extension_params(probe, ext, 2, 4);  // throws on a bad name
  if (c.seeds.empty()) throw Error("give at least one seed");
}

}  // namespace posenc::lab
