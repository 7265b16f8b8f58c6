#include "extrapolate_plan.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>

#include "check_range.h"
#include "posenc/error.h"
#include "posenc_lab/result_cache.h"
#include "posenc_torch/model_config.h"

namespace posenc::lab {

using torch_layer::Fusion;
using torch_layer::ModelConfig;

namespace {

// A base in a model's name: integers whole ("rope-base100", "sinusoidal-base1000000"), others
// in the shortest form that reads back.
std::string base_label(double b) {
  if (b == std::floor(b) && b < 1e15) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.0f", b);
    return buf;
  }
  return format_number(b);
}

}  // namespace

std::vector<ModelPlan> plan_models(const ExtrapolateConfig& c, int vocab) {
  std::vector<ModelPlan> plans;
  // DeBERTa with 32 buckets, Transformer-XL with its memory (model_plan.h): this command's numbers.
  const RelativeSettings relative{/*deberta_buckets=*/32, /*xl_memory=*/true};
  auto base = [&](Scheme s) {
    torch_layer::ModelConfig m = model_config(s, c.shape, c.training.train_len, vocab, relative);
    m.learned_positions = position_range(c.training, c.training.train_len);
    return m;
  };
  for (int seed : c.seeds) {
    const std::string suffix = c.seeds.size() > 1 ? "-s" + std::to_string(seed) : "";
    for (const std::string& name : c.schemes) {
      plans.push_back({name + suffix, base(torch_layer::language_model_scheme(name, "--schemes")), seed});
    }
    for (double b : c.rope_bases) {
      ModelPlan p{"rope-base" + base_label(b) + suffix, base(Scheme::kRope), seed, true};
      p.config.rope.theta = b;
      plans.push_back(p);
    }
    for (int n : c.rope_clips) {
      ModelPlan p{"rope-clip" + std::to_string(n) + suffix, base(Scheme::kRope), seed, true};
      p.config.rope.clip_low = n;
      plans.push_back(p);
    }
    for (double b : c.sinusoidal_bases) {
      ModelPlan p{"sinusoidal-base" + base_label(b) + suffix, base(Scheme::kSinusoidal), seed, true};
      p.config.sinusoidal_base = b;
      plans.push_back(p);
    }
    for (const std::string& f : c.fusions) {
      ModelPlan p{"sinusoidal-" + f + suffix, base(Scheme::kSinusoidal), seed, true};
      p.config.fusion = from_name<Fusion>(f);
      if (p.config.fusion != Fusion::kAdd) plans.push_back(p);  // add: the plain sinusoidal model
    }
    for (const std::string& f : c.raw_index) {
      ModelPlan p{(f == "add" ? "raw-index" : "raw-index-" + f) + suffix, base(Scheme::kSinusoidal), seed, true};
      p.config.raw_index = true;
      p.config.fusion = from_name<Fusion>(f);
      plans.push_back(p);
    }
    if (c.embed_scale) {
      ModelPlan p{"sinusoidal-embed-scale" + suffix, base(Scheme::kSinusoidal), seed, true};
      p.config.embed_scale = true;
      plans.push_back(p);
    }
  }
  return plans;
}

nlohmann::json training_key(const ModelPlan& p, const TrainSettings& t, const Corpus& corpus) {
  nlohmann::json key = {{"format", 2},
                        {"model", nlohmann::json::parse(torch_layer::config_to_json(p.config))},
                        {"seed", p.seed},
                        {"steps", t.steps},
                        {"batch", t.batch},
                        {"lr", t.lr},
                        {"warmup", t.warmup},
                        {"train_len", t.train_len},
                        {"corpus_fnv1a64", hex64(corpus.hash)}};
  if (t.randomize_positions > 0) key["randomize_positions"] = t.randomize_positions;  // keys without keep their value
  return key;
}

bool scores_incremental(const ExtrapolateConfig& c) {
  return c.incremental_tokens > 0 && std::find(c.extensions.begin(), c.extensions.end(), RopeExtension::kDynamic) != c.extensions.end();
}

bool fine_tunes(const ModelPlan& p, const ExtrapolateConfig& c) {
  return p.config.scheme == Scheme::kRope && !p.variant && c.pi_finetune_steps > 0;
}

nlohmann::json evaluation_key(const ModelPlan& p, const ExtrapolateConfig& c) {
  nlohmann::json k = {{"eval_lens", c.eval_lens}, {"eval_chars", c.eval_chars}};
  if (p.config.scheme == Scheme::kRope) {
    k["extensions"] = extension_names(c.extensions);
    if (scores_incremental(c)) k["incremental_tokens"] = c.incremental_tokens;
    if (std::any_of(c.extensions.begin(), c.extensions.end(), is_remap))  // keys without remaps or streams keep their value
      k["remaps"] = {{"groups", c.remaps.groups}, {"windows", c.remaps.windows}, {"leak", "(len - 1 - w) / (train_len - 1 - w)"}};
    if (c.stream.on) k["stream"] = {{"sinks", c.stream.sinks}, {"window", c.stream.window}, {"multiple", c.stream.multiple}};
  }
  if (fine_tunes(p, c)) k["pi_finetune_steps"] = c.pi_finetune_steps;
  return k;
}

void check_corpus(const ExtrapolateConfig& c, const Corpus& corpus) {
  const int longest = *std::max_element(c.eval_lens.begin(), c.eval_lens.end());
  if (static_cast<long>(corpus.valid.size()) < longest + 1)
    throw Error("the validation text of " + c.corpus + " (" + std::to_string(corpus.valid.size()) +
                " tokens) is shorter than the longest eval length " + std::to_string(longest) + " + 1");
  const int train_len = c.training.train_len;
  const long need = static_cast<long>(c.pi_finetune_steps > 0 ? kPiScale * train_len : train_len) + 2;
  if (static_cast<long>(corpus.train.size()) < need)
    throw Error("the training text of " + c.corpus + " (" + std::to_string(corpus.train.size()) + " tokens) is shorter than " +
                std::to_string(need) + ", the training length " + std::to_string(need - 2) + " + 2");
}

void validate(const ExtrapolateConfig& c) {
  check_range("--train-len", c.training.train_len, 2, kMaxTrainLen);
  check_training(c.training);
  check_shape(c.shape, c.training);
  check_range("warmup", c.training.warmup, 1, kMaxSteps);
  check_range("eval_chars", c.eval_chars, 1, 1 << 24);
  check_range("incremental_tokens", c.incremental_tokens, 0, 1 << 16);
  check_range("pi_finetune_steps", c.pi_finetune_steps, 0, kMaxSteps);
  if (c.pi_finetune_steps > 0) check_range("--train-len (the PI fine-tune trains at 4x)", c.training.train_len, 2, kMaxTrainLen / kPiScale);
  if (c.eval_lens.empty()) throw Error("--eval-lens is empty: give at least one evaluation length");
  for (int len : c.eval_lens) check_range("--eval-lens", len, 2, kMaxEvalLen);
  check_distinct("--eval-lens", c.eval_lens, [](int len) { return "length " + std::to_string(len); });
  if (c.schemes.empty() && c.rope_bases.empty() && c.rope_clips.empty() && c.sinusoidal_bases.empty() && c.fusions.empty() && c.raw_index.empty() &&
      !c.embed_scale)
    throw Error("--schemes is empty: give at least one scheme");
  for (double b : c.rope_bases)
    if (!(b > 1 && std::isfinite(b))) throw Error("--rope-bases: a base must be a finite number > 1, got " + format_number(b));
  for (double b : c.sinusoidal_bases)
    if (!(b > 1 && std::isfinite(b))) throw Error("--sinusoidal-bases: a base must be a finite number > 1, got " + format_number(b));
  const auto base_text = [](double b) { return "base " + base_label(b); };
  check_distinct("--rope-bases", c.rope_bases, base_text);
  // Soft clipping spans n >= 2 frequencies (its ramp divides by n - 1), at most the head's.
  for (int n : c.rope_clips) check_range("--rope-clips", n, 2, c.shape.d_model / c.shape.heads / 2);
  check_distinct("--rope-clips", c.rope_clips, [](int n) { return "n " + std::to_string(n); });
  check_distinct("--sinusoidal-bases", c.sinusoidal_bases, base_text);
  for (const std::string& name : c.schemes) torch_layer::language_model_scheme(name, "--schemes");  // throws naming a bad one
  check_distinct_names("--schemes", c.schemes);
  check_distinct_names("--extensions", extension_names(c.extensions));
  for (const auto* fusions : {&c.fusions, &c.raw_index}) {
    for (const std::string& name : *fusions) from_name<Fusion>(name);  // throws naming a bad one
    check_distinct(fusions == &c.fusions ? "--fusion" : "--raw-index", *fusions,
                   [](const std::string& name) { return "fusion '" + name + "'"; });
  }
  if (c.extensions.empty()) throw Error("--extensions is empty: give at least one of " + enum_names_joined<RopeExtension>(", "));
  check_remaps(c.remaps, c.training.train_len);
  if (c.stream.on) {
    check_range("--stream-sinks", c.stream.sinks, 0, c.training.train_len - 1);
    check_range("--stream-window", c.stream.window, 0, kMaxEvalLen);
    check_range("--stream-multiple", static_cast<long>(c.stream.multiple) * c.training.train_len, c.training.train_len, kMaxEvalLen);
  }
  if (c.seeds.empty()) throw Error("give at least one seed");
  if (c.training.randomize_positions > 0 && std::find(c.schemes.begin(), c.schemes.end(), "xl") != c.schemes.end())
    throw Error("--randomize-positions: xl's segments carry their own positions (Transformer-XL's memory); leave xl out of --schemes");
}

ExtrapolateConfig ExtrapolateConfig::full(int seed, bool schemes_given, bool steps_given) const {
  ExtrapolateConfig c = *this;
  if (!schemes_given) c.schemes = {"nope", "sinusoidal", "learned", "rope", "alibi", "t5", "xl", "deberta"};
  if (c.rope_bases.empty()) c.rope_bases = {100, 1e6};  // with the default rope (base 10000): the base sweep
  if (c.sinusoidal_bases.empty()) c.sinusoidal_bases = {100, 1e6};  // and the sinusoidal table's
  if (c.fusions.empty()) c.fusions = {"concat", "multiply"};
  c.pi_finetune_steps = 200;
  if (!steps_given) c.training.steps = 800;
  c.eval_chars = 16384;  // one window at 16384
  c.eval_lens = kFullEvalLens;
  if (seed > std::numeric_limits<int>::max() - 2)  // the three seeds seed, seed + 1, seed + 2 must be ints
    throw Error("--full trains seeds --seed, --seed + 1 and --seed + 2: --seed must be at most " +
                std::to_string(std::numeric_limits<int>::max() - 2) + ", got " + std::to_string(seed));
  c.seeds = {seed, seed + 1, seed + 2};
  return c;
}

}  // namespace posenc::lab
