#include "posenc_lab/extrapolate.h"

#include <torch/torch.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>

#include "posenc/error.h"
#include "posenc_lab/progress.h"
#include "posenc_lab/results_io.h"
#include "posenc_torch/model.h"

namespace posenc::lab {
namespace {

using torch_layer::Fusion;
using torch_layer::KVCache;
using torch_layer::ModelConfig;
using torch_layer::TransformerLM;
namespace fs = std::filesystem;

constexpr double kLn2 = 0.69314718055994530942;

// One model to train: its name, scheme and settings.
struct ModelPlan {
  std::string name;
  ModelConfig config;
  int seed = 0;
};

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
    return m;
  };
  for (int seed : c.seeds) {
    const std::string suffix = c.seeds.size() > 1 ? "-s" + std::to_string(seed) : "";
    for (const std::string& name : c.schemes) {
      const auto scheme = scheme_from_name(name);
      if (!scheme || *scheme == Scheme::kMrope)
        throw Error("--schemes: '" + name + "' is not a language-model scheme; use: nope, sinusoidal, learned, rope, alibi, t5, xl, deberta");
      plans.push_back({name + suffix, base(*scheme), seed});
    }
    for (double b : c.rope_bases) {
      ModelPlan p{"rope-base" + format_number(b) + suffix, base(Scheme::kRope), seed};
      p.config.rope.theta = b;
      plans.push_back(p);
    }
    for (const std::string& f : c.fusions) {
      ModelPlan p{"sinusoidal-" + f + suffix, base(Scheme::kSinusoidal), seed};
      if (f == "add") continue;  // the plain sinusoidal model
      if (f == "concat") p.config.fusion = Fusion::kConcat;
      else if (f == "multiply") p.config.fusion = Fusion::kMultiply;
      else throw Error("--fusions: '" + f + "' is not add, concat or multiply");
      plans.push_back(p);
    }
  }
  return plans;
}

double lr_at(const ExtrapolateConfig& c, long step) {
  if (step < c.warmup) return c.lr * static_cast<double>(step + 1) / c.warmup;
  const double progress = static_cast<double>(step - c.warmup) / std::max(1, c.steps - c.warmup);
  return c.lr * (0.1 + 0.9 * 0.5 * (1 + std::cos(3.14159265358979 * progress)));  // cosine to 10%
}

// The batch of training step `step`: a function of (seed, step) only, so a resumed run sees
// exactly the batches an uninterrupted one would.
torch::Tensor batch_at(const Corpus& corpus, int seed, long step, int batch, int len) {
  std::mt19937_64 rng(static_cast<std::uint64_t>(seed) * 1000003ull + static_cast<std::uint64_t>(step));
  std::uniform_int_distribution<std::size_t> offset(0, corpus.train.size() - static_cast<std::size_t>(len) - 2);
  torch::Tensor out = torch::empty({batch, len + 1}, torch::kInt64);
  auto acc = out.accessor<std::int64_t, 2>();
  for (int b = 0; b < batch; ++b) {
    const std::size_t o = offset(rng);
    for (int i = 0; i <= len; ++i) acc[b][i] = corpus.train[o + static_cast<std::size_t>(i)];
  }
  return out;
}

std::string signature(const ModelPlan& p, const ExtrapolateConfig& c, const Corpus& corpus) {
  return torch_layer::config_to_json(p.config) + "|seed " + std::to_string(p.seed) + "|steps " + std::to_string(c.steps) +
         "|batch " + std::to_string(c.batch) + "|lr " + format_number(c.lr) + "|train_len " + std::to_string(c.train_len) +
         "|corpus " + std::to_string(corpus.train.size() + corpus.valid.size());
}

void save_checkpoint(const std::string& path, TransformerLM& model, torch::optim::AdamW& optimizer, long step,
                     const std::string& sig) {
  torch::serialize::OutputArchive archive;
  archive.write("signature", c10::IValue(sig));
  archive.write("step", c10::IValue(static_cast<std::int64_t>(step)));
  torch::serialize::OutputArchive model_archive, optimizer_archive;
  model->save(model_archive);
  optimizer.save(optimizer_archive);
  archive.write("model", model_archive);
  archive.write("optimizer", optimizer_archive);
  const std::string tmp = path + ".tmp";
  archive.save_to(tmp);
  fs::rename(tmp, path);
}

long load_checkpoint(const std::string& path, TransformerLM& model, torch::optim::AdamW& optimizer, const std::string& sig) {
  torch::serialize::InputArchive archive;
  archive.load_from(path);
  c10::IValue saved_sig, step;
  archive.read("signature", saved_sig);
  if (saved_sig.toStringRef() != sig)
    throw Error(path + " was written by a run with other settings; use another --out directory or delete it");
  archive.read("step", step);
  torch::serialize::InputArchive model_archive, optimizer_archive;
  archive.read("model", model_archive);
  archive.read("optimizer", optimizer_archive);
  model->load(model_archive);
  optimizer.load(optimizer_archive);
  return step.toInt();
}

// Trains (or resumes) one model; returns false when stop_after_steps cut it short.
bool train(TransformerLM& model, const ModelPlan& plan, const ExtrapolateConfig& c, const Corpus& corpus, long* budget) {
  const std::string ckpt = c.out_dir + "/" + plan.name + ".ckpt";
  const std::string sig = signature(plan, c, corpus);
  torch::optim::AdamW optimizer(model->parameters(), torch::optim::AdamWOptions(c.lr).weight_decay(0.01));
  long step = fs::exists(ckpt) ? load_checkpoint(ckpt, model, optimizer, sig) : 0;
  Progress progress("train " + plan.name, c.steps, step);
  model->train();
  double loss_value = 0;
  while (step < c.steps) {
    if (*budget == 0) {
      save_checkpoint(ckpt, model, optimizer, step, sig);
      return false;
    }
    for (auto& group : optimizer.param_groups())
      static_cast<torch::optim::AdamWOptions&>(group.options()).lr(lr_at(c, step));
    const torch::Tensor batch = batch_at(corpus, plan.seed, step, c.batch, c.train_len);
    optimizer.zero_grad();
    const torch::Tensor logits = model->forward(batch.narrow(1, 0, c.train_len));
    const torch::Tensor loss = torch::nn::functional::cross_entropy(logits.reshape({-1, logits.size(-1)}),
                                                                    batch.narrow(1, 1, c.train_len).reshape({-1}));
    loss.backward();
    torch::nn::utils::clip_grad_norm_(model->parameters(), 1.0);
    optimizer.step();
    loss_value = loss.item<double>();
    ++step;
    if (*budget > 0) --*budget;
    progress.update(step, loss_value);
    if (step % c.checkpoint_every == 0 || step == c.steps) save_checkpoint(ckpt, model, optimizer, step, sig);
  }
  char summary[96];
  std::snprintf(summary, sizeof summary, "trained, loss %.3f (%.2f bpc)", loss_value, loss_value / kLn2);
  progress.finish(summary);
  return true;
}

struct Score {
  double nll = 0, nll_beyond = 0;
  long tokens = 0, tokens_beyond = 0;
};

// Non-overlapping windows of len tokens over the validation text, each scored in one pass.
Score score_windows(TransformerLM& model, const Corpus& corpus, int len, int train_len, int max_tokens) {
  const long windows = std::max<long>(1, std::min<long>(max_tokens / len, (static_cast<long>(corpus.valid.size()) - 1) / len));
  Score s;
  const long group = std::max<long>(1, 8192 / len);  // windows per forward
  for (long w0 = 0; w0 < windows; w0 += group) {
    const long n = std::min(group, windows - w0);
    torch::Tensor ids = torch::empty({n, len + 1}, torch::kInt64);
    auto acc = ids.accessor<std::int64_t, 2>();
    for (long w = 0; w < n; ++w)
      for (int i = 0; i <= len; ++i) acc[w][i] = corpus.valid[static_cast<std::size_t>((w0 + w) * len + i)];
    const torch::Tensor logits = model->forward(ids.narrow(1, 0, len));
    const torch::Tensor nll = torch::nn::functional::cross_entropy(
        logits.reshape({-1, logits.size(-1)}), ids.narrow(1, 1, len).reshape({-1}),
        torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kNone)).view({n, len});
    s.nll += nll.sum().item<double>();
    s.tokens += n * len;
    if (len > train_len) {
      s.nll_beyond += nll.narrow(1, train_len, len - train_len).sum().item<double>();
      s.tokens_beyond += n * (len - train_len);
    }
  }
  return s;
}

// Token by token with a KV cache that keeps keys rotated (HF's dynamic NTK at inference).
Score score_incremental(TransformerLM& model, const Corpus& corpus, int len, int train_len, int windows) {
  Score s;
  for (int w = 0; w < windows; ++w) {
    KVCache cache;
    cache.hf_stale_keys = true;
    for (int t = 0; t < len; ++t) {
      const std::size_t at = static_cast<std::size_t>(w) * static_cast<std::size_t>(len) + static_cast<std::size_t>(t);
      const torch::Tensor token = torch::tensor({{corpus.valid[at]}}, torch::kInt64);
      const torch::Tensor logits = model->forward(token, {}, &cache).view({1, -1});
      const double nll = torch::nn::functional::cross_entropy(logits, torch::tensor({corpus.valid[at + 1]}, torch::kInt64)).item<double>();
      s.nll += nll;
      ++s.tokens;
      if (t >= train_len) {
        s.nll_beyond += nll;
        ++s.tokens_beyond;
      }
    }
  }
  return s;
}

ResultRow make_row(const ModelPlan& p, const std::string& ext, int len, const Score& s, const std::string& note = "") {
  ResultRow r;
  r.model = p.name;
  r.scheme = scheme_info(p.config.scheme).name;
  r.extension = ext;
  r.seed = p.seed;
  r.eval_len = len;
  r.bpc = s.nll / std::max<long>(1, s.tokens) / kLn2;
  r.bpc_beyond = s.tokens_beyond ? s.nll_beyond / s.tokens_beyond / kLn2 : std::nan("");
  r.tokens = s.tokens;
  r.tokens_beyond = s.tokens_beyond;
  r.note = note;
  return r;
}

RopeParams extension_params(const ModelConfig& m, const std::string& ext, int train_len, int len) {
  RopeParams p = m.rope;
  p.head_dim = m.head_dim();
  const double s = static_cast<double>(len) / train_len;
  if (ext == "none" || s <= 1) return p;
  if (ext == "pi") p.type = RopeType::kLinear;
  else if (ext == "ntk") p.type = RopeType::kNtk;
  else if (ext == "yarn") {
    p.type = RopeType::kYarn;
    p.original_max_position_embeddings = train_len;
  } else if (ext == "dynamic") {
    p.type = RopeType::kDynamic;
    p.max_position_embeddings = train_len;
    p.factor = 1.0;  // base = theta * (L / train_len)^(d/(d-2)): NTK at the window's own scale
    return p;
  } else {
    throw Error("--extensions: '" + ext + "' is not none, pi, ntk, dynamic or yarn");
  }
  p.factor = s;
  return p;
}

std::vector<ResultRow> evaluate(TransformerLM& model, const ModelPlan& plan, const ExtrapolateConfig& c, const Corpus& corpus) {
  torch::NoGradGuard no_grad;
  model->eval();
  std::vector<ResultRow> rows;
  const bool rope = plan.config.scheme == Scheme::kRope;
  const std::vector<std::string> exts = rope ? c.extensions : std::vector<std::string>{"none"};
  Progress progress("eval  " + plan.name, static_cast<long>(exts.size() * c.eval_lens.size()));
  long done = 0;
  for (const std::string& ext : exts) {
    for (int len : c.eval_lens) {
      progress.update(done++, std::nan(""));
      if (plan.config.scheme == Scheme::kLearned && len > plan.config.learned_positions) {
        ResultRow r = make_row(plan, ext, len, {}, "n/a (cannot extrapolate)");
        r.available = false;
        r.bpc = r.bpc_beyond = std::nan("");
        rows.push_back(r);
        continue;
      }
      if (rope) model->rotary = model->replace_module("rotary", torch_layer::RotaryEmbedding(extension_params(plan.config, ext, c.train_len, len)));
      rows.push_back(make_row(plan, ext, len, score_windows(model, corpus, len, c.train_len, c.eval_chars)));
      if (rope && ext == "dynamic" && c.incremental_tokens > 0) {
        // Same text both ways: one pass per window vs token by token (HF's runtime rule).
        const int windows = std::max(1, c.incremental_tokens / len);
        const Score one_pass = score_windows(model, corpus, len, c.train_len, windows * len);
        model->rotary = model->replace_module("rotary", torch_layer::RotaryEmbedding(extension_params(plan.config, ext, c.train_len, len)));
        char note[96];
        std::snprintf(note, sizeof note, "token by token over %d window(s); one pass on the same text: %.3f bpc", windows,
                      one_pass.nll / std::max<long>(1, one_pass.tokens) / kLn2);
        rows.push_back(make_row(plan, "dynamic-incremental", len, score_incremental(model, corpus, len, c.train_len, windows), note));
      }
    }
  }
  if (rope) model->rotary = model->replace_module("rotary", torch_layer::RotaryEmbedding(extension_params(plan.config, "none", c.train_len, c.train_len)));
  progress.finish("evaluated");
  return rows;
}

// PI with a short fine-tune (Chen et al. 2023 recover a 4x PI model in ~1000 steps; scaled
// down here): the trained RoPE model, positions divided by 4, trained on at 4x the length,
// then scored with that schedule (and PI's own scale beyond 4x).
std::vector<ResultRow> pi_finetune(const ModelPlan& base, const ExtrapolateConfig& c, const Corpus& corpus, long* budget) {
  constexpr int kScale = 4;
  ModelPlan plan = base;
  plan.name = base.name + "-pi-finetune";
  plan.config.rope.type = RopeType::kLinear;
  plan.config.rope.factor = kScale;
  ExtrapolateConfig ft = c;
  ft.train_len = c.train_len * kScale;
  ft.steps = c.pi_finetune_steps;
  ft.batch = std::max(1, c.batch / kScale);  // the same tokens per step
  ft.lr = c.lr / 4;
  ft.warmup = std::min(c.warmup, c.pi_finetune_steps / 4 + 1);
  torch::manual_seed(static_cast<std::uint64_t>(plan.seed));
  TransformerLM model(plan.config);
  {  // start from the trained model's weights (its final checkpoint)
    torch::serialize::InputArchive archive, model_archive;
    archive.load_from(c.out_dir + "/" + base.name + ".ckpt");
    archive.read("model", model_archive);
    model->load(model_archive);
  }
  if (!train(model, plan, ft, corpus, budget)) return {};
  torch::NoGradGuard no_grad;
  model->eval();
  std::vector<ResultRow> rows;
  for (int len : c.eval_lens) {
    RopeParams p = plan.config.rope;
    p.head_dim = plan.config.head_dim();
    p.factor = std::max<double>(kScale, static_cast<double>(len) / c.train_len);
    model->rotary = model->replace_module("rotary", torch_layer::RotaryEmbedding(p));
    char note[80];
    std::snprintf(note, sizeof note, "PI x%d fine-tuned %d steps at length %d", kScale, c.pi_finetune_steps, ft.train_len);
    ResultRow r = make_row(base, "pi+finetune", len, score_windows(model, corpus, len, c.train_len, c.eval_chars), note);
    rows.push_back(r);
  }
  return rows;
}

}  // namespace

ExtrapolateResult run_extrapolate(const ExtrapolateConfig& c) {
  if (c.train_len < 2 || c.steps < 1 || c.batch < 1 || c.eval_lens.empty() || c.checkpoint_every < 1)
    throw Error("lab needs train_len >= 2, steps >= 1, batch >= 1, checkpoint_every >= 1 and at least one eval length");
  for (int len : c.eval_lens)
    if (len < 2) throw Error("eval lengths must be >= 2, got " + std::to_string(len));
  const Corpus corpus = load_corpus(c.corpus);
  const int longest = *std::max_element(c.eval_lens.begin(), c.eval_lens.end());
  if (static_cast<long>(corpus.valid.size()) < longest + 1)
    throw Error("validation text (" + std::to_string(corpus.valid.size()) + " tokens) is shorter than the longest eval length " +
                std::to_string(longest));
  // Default one thread: measured on the 2-vCPU machines this project runs on, libtorch trained
  // these small models 3x slower with 2 threads than with 1.
  torch::set_num_threads(c.threads > 0 ? c.threads : 1);
  fs::create_directories(c.out_dir);
  ExtrapolateResult result;
  {
    // YaRN's beta_fast zone at this training length (HF's floor/ceil of the correction range).
    RopeParams probe;
    probe.head_dim = c.d_model / c.heads;
    probe.type = RopeType::kYarn;
    probe.factor = 4;
    probe.original_max_position_embeddings = c.train_len;
    const auto range = *compute_schedule(probe).correction_range;
    if (range[0] <= 0)
      result.notes.push_back("yarn: at training length " + std::to_string(c.train_len) + " and head_dim " + std::to_string(probe.head_dim) +
                             " the beta_fast=32 correction dimension is below 0: no frequency keeps its value (HF rounds the range to [" +
                             format_number(range[0]) + ", " + format_number(range[1]) + "]); YaRN is all ramp and temperature here");
  }
  result.notes.push_back("evaluation: non-overlapping windows over the first " + std::to_string(c.eval_chars) +
                         " validation characters, each scored in one pass; 'dynamic' is then NTK at the window's scale; "
                         "'dynamic-incremental' decodes the first " + std::to_string(c.incremental_tokens) +
                         " characters token by token under HF's runtime rule (its note gives one-pass bpc on the same text)");
  long budget = c.stop_after_steps;
  for (const ModelPlan& plan : plan_models(c, static_cast<int>(corpus.vocab.size()))) {
    const std::string result_path = c.out_dir + "/" + plan.name + ".result.json";
    const std::string sig = signature(plan, c, corpus);
    if (fs::exists(result_path)) {
      std::ifstream in(result_path);
      const nlohmann::json saved = nlohmann::json::parse(in);
      if (saved.at("signature") != sig)
        throw Error(result_path + " was written by a run with other settings; use another --out directory or delete it");
      for (const auto& row : saved.at("rows")) result.rows.push_back(row_from_json(row));
      std::fprintf(stderr, "%s: finished earlier, reusing %s\n", plan.name.c_str(), result_path.c_str());
      continue;
    }
    torch::manual_seed(static_cast<std::uint64_t>(plan.seed));
    TransformerLM model(plan.config);
    if (!train(model, plan, c, corpus, &budget)) {
      result.complete = false;
      return result;
    }
    {  // the trained model and the vocabulary, for `posenc plot attention --text`
      torch_layer::save_model(model, c.out_dir + "/" + plan.name + ".pt.tmp");
      fs::rename(c.out_dir + "/" + plan.name + ".pt.tmp", c.out_dir + "/" + plan.name + ".pt");
      write_file_atomic(c.out_dir + "/vocab.json", nlohmann::json(corpus.vocab).dump());
    }
    auto rows = evaluate(model, plan, c, corpus);
    if (plan.config.scheme == Scheme::kRope && plan.config.rope.theta == 10000.0 && c.pi_finetune_steps > 0) {
      const auto tuned = pi_finetune(plan, c, corpus, &budget);
      if (tuned.empty()) {
        result.complete = false;
        return result;
      }
      rows.insert(rows.end(), tuned.begin(), tuned.end());
    }
    nlohmann::json saved = {{"signature", sig}, {"rows", nlohmann::json::array()}};
    for (const auto& r : rows) saved["rows"].push_back(row_json(r));
    write_file_atomic(result_path, saved.dump(1));
    result.rows.insert(result.rows.end(), rows.begin(), rows.end());
  }
  return result;
}

}  // namespace posenc::lab
