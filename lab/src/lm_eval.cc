#include "lm_eval.h"

#include <cmath>
#include <cstdio>

#include "lm_stream.h"

#include "posenc/error.h"
#include "posenc_lab/progress.h"

namespace posenc::lab {

using torch_layer::KVCache;
using torch_layer::ModelConfig;
using torch_layer::TransformerLM;

using torch_layer::RotaryEmbedding;
using torch_layer::RotaryEmbeddingImpl;

namespace {
// Token by token with a KV cache that keeps keys rotated (HF's dynamic NTK at inference). rope
// carries HF's runtime state from token to token (and window to window), as the model's own
// rotary embedding would.
Score score_incremental(TransformerLM& model, const Corpus& corpus, int len, int train_len, long windows, RotaryEmbeddingImpl* rope) {
  Score s;
  for (long w = 0; w < windows; ++w) {
    KVCache cache;
    cache.hf_stale_keys = true;
    for (int t = 0; t < len; ++t) {
      const std::size_t at = static_cast<std::size_t>(w) * static_cast<std::size_t>(len) + static_cast<std::size_t>(t);
      const torch::Tensor token = torch::tensor({{corpus.valid[at]}}, torch::kInt64);
      const torch::Tensor logits = model->forward(token, {}, &cache, rope).view({1, -1});
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

}  // namespace

bool xl_memory(TransformerLM& model) {
  return model->config().scheme == Scheme::kXl && model->config().xl_mem_len > 0;
}

torch::Tensor forward_in_segments(TransformerLM& model, const torch::Tensor& tokens, int segment) {
  torch_layer::XLMemory memory;
  std::vector<torch::Tensor> logits;
  for (std::int64_t s0 = 0; s0 < tokens.size(1); s0 += segment)
    logits.push_back(model->forward_segment(tokens.narrow(1, s0, std::min<std::int64_t>(segment, tokens.size(1) - s0)), memory));
  return torch::cat(logits, 1);
}

// Non-overlapping windows of len tokens over the validation text, each scored in one pass.
Score score_windows(TransformerLM& model, const Corpus& corpus, int len, int train_len, long max_tokens, RotaryEmbeddingImpl* rope) {
  const long windows = std::max<long>(1, std::min<long>(max_tokens / len, (static_cast<long>(corpus.valid.size()) - 1) / len));
  Score s;
  const long group = std::max<long>(1, 8192 / len);  // windows per forward
  for (long w0 = 0; w0 < windows; w0 += group) {
    const long n = std::min(group, windows - w0);
    torch::Tensor ids = torch::empty({n, len + 1}, torch::kInt64);
    auto acc = ids.accessor<std::int64_t, 2>();
    for (long w = 0; w < n; ++w)
      for (int i = 0; i <= len; ++i) acc[w][i] = corpus.valid[static_cast<std::size_t>((w0 + w) * len + i)];
    const torch::Tensor logits = xl_memory(model) ? forward_in_segments(model, ids.narrow(1, 0, len), train_len)
                                                  : model->forward(ids.narrow(1, 0, len), {}, nullptr, rope);
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

ResultRow make_row(const ModelPlan& p, const std::string& ext, int len, const Score& s, const std::string& note) {
  ResultRow r;
  r.model = p.name;
  r.scheme = to_string(p.config.scheme);
  r.extension = ext;
  r.seed = p.seed;
  r.eval_len = len;
  r.bpc = s.nll / std::max<long>(1, s.tokens) / kLn2;
  r.bpc_beyond = s.tokens_beyond ? s.nll_beyond / s.tokens_beyond / kLn2 : std::nan("");
  r.tokens = s.tokens;
  r.tokens_beyond = s.tokens_beyond;
  r.note = note;
  if (!std::isfinite(r.bpc) || (s.tokens_beyond && !std::isfinite(r.bpc_beyond))) {  // never a NaN marked available
    r.available = false;
    r.bpc = r.bpc_beyond = std::nan("");
    r.note = "n/a (the score is not finite: the model diverged)";
  }
  return r;
}

RopeParams extension_params(const ModelConfig& m, RopeExtension ext, int train_len, int len) {
  RopeParams p = m.rope;
  p.head_dim = m.head_dim();
  const double s = static_cast<double>(len) / train_len;
  if (ext == RopeExtension::kNone || is_remap(ext) || s <= 1) return p;  // a remap keeps the model's schedule
  switch (ext) {
    case RopeExtension::kNone:
    case RopeExtension::kSelfExtend:
    case RopeExtension::kReRope:
    case RopeExtension::kLeakyReRope:
    case RopeExtension::kDualChunk: return p;
    case RopeExtension::kPi: p.type = RopeType::kLinear; break;
    case RopeExtension::kNtk: p.type = RopeType::kNtk; break;
    case RopeExtension::kYarn:
      p.type = RopeType::kYarn;
      p.original_max_position_embeddings = train_len;
      break;
    case RopeExtension::kDynamic:
      p.type = RopeType::kDynamic;
      p.max_position_embeddings = train_len;
      p.factor = 1.0;  // base = theta * (L / train_len)^(d/(d-2)): NTK at the window's own scale
      return p;
  }
  p.factor = s;
  return p;
}

std::vector<ExtensionVariant> extension_variants(const std::vector<RopeExtension>& extensions, const RemapSettings& remaps, int train_len) {
  std::vector<int> windows = remaps.windows;
  if (windows.empty()) windows = {train_len / 4, train_len / 2};
  std::vector<ExtensionVariant> out;
  for (const RopeExtension ext : extensions) {
    const std::string name = to_string(ext);
    if (!is_remap(ext)) {
      out.push_back({ext, name, 1, 0});
      continue;
    }
    for (const int w : windows) {
      if (ext == RopeExtension::kDualChunk) {  // local_size w, chunk_size the training length
        out.push_back({ext, name + "-c" + std::to_string(train_len) + "-l" + std::to_string(w), 1, w});
        continue;
      }
      if (ext != RopeExtension::kSelfExtend) {
        out.push_back({ext, name + "-w" + std::to_string(w), 1, w});
        continue;
      }
      for (const int g : remaps.groups) out.push_back({ext, name + "-g" + std::to_string(g) + "-w" + std::to_string(w), g, w});
    }
  }
  return out;
}

PositionRemap extension_remap(const ExtensionVariant& v, int train_len, int len) {
  PositionRemap r;
  r.window = v.window;
  switch (v.extension) {
    case RopeExtension::kSelfExtend:
      r.kind = PositionRemapKind::kSelfExtend;
      r.group = v.group;
      break;
    case RopeExtension::kReRope: r.kind = PositionRemapKind::kReRope; break;
    case RopeExtension::kLeakyReRope:  // the longest distance of len lands on L - 1
      r.kind = PositionRemapKind::kLeakyReRope;
      r.leak = std::max(1.0, static_cast<double>(len - 1 - v.window) / (train_len - 1 - v.window));
      break;
    case RopeExtension::kDualChunk:  // c = L - w: a key one chunk back sits at most L away
      r.kind = PositionRemapKind::kDualChunk;
      r.chunk_size = train_len;
      r.local_size = v.window;
      r.window = 0;
      break;
    default: return {};  // a schedule extension
  }
  return r;
}

RotaryEmbedding extension_rope(const ModelConfig& m, RopeExtension ext, int train_len, int len) {
  return RotaryEmbedding(extension_params(m, ext, train_len, len));
}

std::vector<ResultRow> evaluate(TransformerLM& model, const ModelPlan& plan, const ExtrapolateConfig& c, const Corpus& corpus) {
  torch::NoGradGuard no_grad;
  model->eval();
  std::vector<ResultRow> rows;
  const bool rope = plan.config.scheme == Scheme::kRope;
  const int train_len = c.training.train_len;
  const std::vector<ExtensionVariant> variants =
      extension_variants(rope ? c.extensions : std::vector<RopeExtension>{RopeExtension::kNone}, c.remaps, train_len);
  const std::vector<std::pair<std::string, torch_layer::SinkCacheOptions>> streams =
      rope && c.stream.on ? stream_variants(c.stream, train_len) : std::vector<std::pair<std::string, torch_layer::SinkCacheOptions>>{};
  Progress progress("eval  " + plan.name, static_cast<long>(variants.size() * c.eval_lens.size() + streams.size()));
  long done = 0;
  for (const ExtensionVariant& variant : variants) {
    const RopeExtension ext = variant.extension;
    const std::string& name = variant.label;
    for (int len : c.eval_lens) {
      progress.update(done++, std::nan(""));
      if (xl_memory(model)) {
        const int reach = plan.config.n_layers * plan.config.xl_mem_len;
        char note[128];
        std::snprintf(note, sizeof note, "segments of %d with memory %d: a token sees at most %d tokens back (layers x memory)",
                      train_len, plan.config.xl_mem_len, reach + train_len - 1);
        rows.push_back(make_row(plan, name, len, score_windows(model, corpus, len, train_len, c.eval_chars), note));
        continue;
      }
      if (plan.config.scheme == Scheme::kLearned && len > plan.config.learned_positions) {
        ResultRow r = make_row(plan, name, len, {}, "n/a (cannot extrapolate)");
        r.available = false;
        r.bpc = r.bpc_beyond = std::nan("");
        rows.push_back(r);
        continue;
      }
      // A RoPE model is scored with the extension's schedule, fresh for each length (HF's runtime
      // state starts over); other models with their own positions.
      RotaryEmbedding schedule = rope ? extension_rope(plan.config, ext, train_len, len) : RotaryEmbedding(nullptr);
      RotaryEmbeddingImpl* const override_rope = rope ? schedule.get() : nullptr;
      const ScopedRemap remap(model, extension_remap(variant, train_len, len));
      if (!(rope && ext == RopeExtension::kDynamic && c.incremental_tokens > 0)) {
        rows.push_back(make_row(plan, name, len, score_windows(model, corpus, len, train_len, c.eval_chars, override_rope)));
        continue;
      }
      // Dynamic NTK both ways on the same windows (the first incremental_tokens characters): one
      // pass per window, then token by token under HF's runtime rule; their gap is drift only.
      const long text = std::min<long>(c.incremental_tokens, c.eval_chars);
      const long windows = std::max<long>(1, std::min<long>(text / len, (static_cast<long>(corpus.valid.size()) - 1) / len));
      char note[96];
      std::snprintf(note, sizeof note, "one pass over %ld window(s) of %d, the text of dynamic-incremental", windows, len);
      rows.push_back(make_row(plan, name, len, score_windows(model, corpus, len, train_len, windows * len, override_rope), note));
      RotaryEmbedding incremental = extension_rope(plan.config, ext, train_len, len);  // its runtime state from the first token
      std::snprintf(note, sizeof note, "token by token over %ld window(s) of %d (HF's runtime rule)", windows, len);
      rows.push_back(make_row(plan, kIncrementalRow, len,
                              score_incremental(model, corpus, len, train_len, windows, incremental.get()), note));
    }
  }
  // The streaming run: one text of multiple x train_len per stream, token by token (lm_stream.h).
  for (const auto& [label, options] : streams) {
    progress.update(done++, std::nan(""));
    const int len = c.stream.multiple * train_len;
    char note[128];
    std::snprintf(note, sizeof note, "token by token through a cache of %lld sinks + %lld recent tokens%s", static_cast<long long>(options.sinks),
                  static_cast<long long>(options.window), options.rerotate ? ", keys re-rotated to their slots" : ", keys not re-rotated");
    rows.push_back(make_row(plan, label, len, score_stream(model, corpus, len, train_len, c.eval_chars, options), note));
  }
  progress.finish("evaluated");
  return rows;
}

}  // namespace posenc::lab
