#include "posenc_torch/model.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>

#include "posenc/attention.h"
#include "posenc/error.h"
#include "posenc/file_io.h"
#include "posenc/rope_schedule.h"
#include "posenc_torch/rope_op.h"

namespace posenc::torch_layer {
namespace {

// Elements of one [B, H, rows, T] float32 score tensor per query block at inference (32 MiB).
// A block holds at most about eight tensors of that size at once (q.k; DeBERTa's c2p, p2c and
// their sum, or XL's BD over distances [B, H, rows, rows + T]; the scaled sum, the masked
// scores, softmax) plus int64 [B, rows, T] distances, buckets and gather rows (each half a score
// tensor at four heads): about 256 MiB live whatever the length. At the lab's size (B 1, H 4) and
// T = 16384 that is blocks of 128 queries, where one block of 16384 would need 4 GiB per tensor.
constexpr std::int64_t kQueryBlockScores = std::int64_t{1} << 23;

}  // namespace

AttentionImpl::AttentionImpl(const ModelConfig& c) : config_(c) {
  const int dh = c.head_dim();
  wq = register_module("wq", torch::nn::Linear(torch::nn::LinearOptions(c.d_model, c.n_heads * dh).bias(false)));
  wk = register_module("wk", torch::nn::Linear(torch::nn::LinearOptions(c.d_model, c.kv_heads() * dh).bias(false)));
  wv = register_module("wv", torch::nn::Linear(torch::nn::LinearOptions(c.d_model, c.kv_heads() * dh).bias(false)));
  wo = register_module("wo", torch::nn::Linear(torch::nn::LinearOptions(c.n_heads * dh, c.d_model).bias(false)));
  dropout = register_module("dropout", torch::nn::Dropout(c.dropout));
  if (c.scheme == Scheme::kXl)
    xl = register_module("xl", XLRelativePosition(c.d_model, c.n_heads, dh, c.xl_clamp_len, !c.causal));
  if (c.scheme == Scheme::kDeberta)
    deberta = register_module("deberta", DebertaRelative(c.d_model, c.n_heads, dh, c.deberta_buckets, c.deberta_max_relative));
  if (c.scheme == Scheme::kFox) fox = register_module("fox", ForgetGate(c.d_model, c.n_heads));
  if (c.scheme == Scheme::kShaw) shaw = register_module("shaw", ShawRelative(dh, c.shaw_max_relative));
  if (c.scheme == Scheme::kCope) cope = register_module("cope", Cope(dh, c.cope_max_pos));
}

torch::Tensor AttentionImpl::forward(const torch::Tensor& x, const ForwardContext& ctx, torch::Tensor* cache_k,
                                     torch::Tensor* cache_v, const torch::Tensor& memory, torch::Tensor* cache_gate) {
  const std::int64_t B = x.size(0), S = x.size(1);
  const int H = config_.n_heads, Hk = config_.kv_heads(), dh = config_.head_dim();
  // Keys and values also come from the memory (Transformer-XL), queries only from x.
  const torch::Tensor kv_in = memory.defined() ? torch::cat({memory, x}, 1) : x;
  const std::int64_t T_in = kv_in.size(1);
  torch::Tensor q = wq->forward(x).view({B, S, H, dh}).transpose(1, 2);
  torch::Tensor k = wk->forward(kv_in).view({B, T_in, Hk, dh}).transpose(1, 2);
  torch::Tensor v = wv->forward(kv_in).view({B, T_in, Hk, dh}).transpose(1, 2);
  if (ctx.rope && ctx.cache_rotated_keys) k = rope(k, ctx.q_positions, ctx.rope->for_keys());  // HF: rotate, then cache
  if (cache_k) {  // otherwise keys before RoPE, so a changing schedule re-rotates all of them
    k = cache_k->defined() ? torch::cat({*cache_k, k}, 2) : k;
    v = cache_v->defined() ? torch::cat({*cache_v, v}, 2) : v;
    *cache_k = k;
    *cache_v = v;
  }
  if (ctx.learned_inv_freq.defined()) {  // rope-learned: keys cached unrotated, all rotated here
    RopeOpArgs learned;
    learned.inv_freq = ctx.learned_inv_freq;
    learned.positions = ctx.q_positions;
    q = rope_native(q, learned);
    learned.positions = ctx.k_positions;
    k = rope_native(k, learned);
  }
  // FoX: this layer's cumulative gate over every key, continuing the cached keys' (c is a running
  // sum, so the new tokens' start from the last cached value).
  torch::Tensor gate;
  if (fox) {
    const bool cached = cache_gate && cache_gate->defined();
    const torch::Tensor fresh = fox->cumulative(x, cached ? cache_gate->select(2, cache_gate->size(2) - 1) : torch::Tensor());
    gate = cached ? torch::cat({*cache_gate, fresh}, 2) : fresh;
    if (cache_gate) *cache_gate = gate.detach();
  }
  // The fused kernel over the same memory (q: a transposed view of [B, S, H, Dh]) -> [B, S, H, Dh],
  // positions applied inside, no [S, T] matrix.
  if (ctx.fused)
    return wo->forward(torch_layer::fused_attention({q, k, v, ctx.t5_table, ctx.distance_table, gate}, ctx.fused).view({B, S, H * dh}));
  if (ctx.rope) {
    if (ctx.cache_rotated_keys) {
      q = rope(q, ctx.q_positions, *ctx.rope);
    } else if (q.size(2) == k.size(2) && torch::equal(ctx.q_positions, ctx.k_positions)) {
      std::tie(q, k) = rope_qk(q, k, ctx.q_positions, *ctx.rope);  // one kernel call for both
    } else {
      q = rope(q, ctx.q_positions, *ctx.rope);
      k = rope(k, ctx.k_positions, ctx.rope->for_keys());
    }
  }
  if (Hk != H) {
    k = k.repeat_interleave(H / Hk, 1);
    v = v.repeat_interleave(H / Hk, 1);
  }
  if (ctx.polar) {  // PoPE: q, k -> [B, H, *, 2 Dh] (keys per query head: delta is a query head's)
    q = ctx.polar->queries(q, ctx.q_positions);
    k = ctx.polar->keys(k, ctx.k_positions);
  }
  // Inference without recorded weights: queries in blocks, each forming scores over the keys it
  // can see only ([B, H, rows, T'] instead of [B, H, S, T]). Every term is computed from the
  // block's own queries and positions (XL's distances and DeBERTa's buckets from q - k), so a
  // block's rows equal the same rows of one block. Training and `record`: one block.
  std::int64_t rows = S;
  if (!torch::GradMode::is_enabled() && !is_training() && !record)
    rows = ctx.query_rows > 0 ? ctx.query_rows : std::max<std::int64_t>(1, kQueryBlockScores / (B * H * k.size(2)));
  if (rows >= S) return wo->forward(attend(q, k, v, ctx, 0, S, gate));
  std::vector<torch::Tensor> parts;  // [B, rows, H * Dh] each
  for (std::int64_t q0 = 0; q0 < S; q0 += rows) parts.push_back(attend(q, k, v, ctx, q0, std::min(rows, S - q0), gate));
  return wo->forward(torch::cat(parts, 1));
}

BlockImpl::BlockImpl(const ModelConfig& c) {
  const int ff = c.d_ff > 0 ? c.d_ff : 4 * c.d_model;
  ln1 = register_module("ln1", torch::nn::LayerNorm(torch::nn::LayerNormOptions({c.d_model})));
  ln2 = register_module("ln2", torch::nn::LayerNorm(torch::nn::LayerNormOptions({c.d_model})));
  attention = register_module("attention", Attention(c));
  fc1 = register_module("fc1", torch::nn::Linear(c.d_model, ff));
  fc2 = register_module("fc2", torch::nn::Linear(ff, c.d_model));
  dropout = register_module("dropout", torch::nn::Dropout(c.dropout));
}

torch::Tensor BlockImpl::forward(const torch::Tensor& x, const ForwardContext& ctx, torch::Tensor* cache_k,
                                 torch::Tensor* cache_v, const torch::Tensor& memory, torch::Tensor* cache_gate) {
  const torch::Tensor normed_memory = memory.defined() ? ln1->forward(memory) : memory;
  torch::Tensor h =
      x + dropout->forward(attention->forward(ln1->forward(x), ctx, cache_k, cache_v, normed_memory, cache_gate));
  return h + dropout->forward(fc2->forward(torch::gelu(fc1->forward(ln2->forward(h)))));
}

// ---- the model -------------------------------------------------------------------------------

TransformerLMImpl::TransformerLMImpl(const ModelConfig& config) : config_(config) {
  config_.validate();
  config_.rope.head_dim = config_.head_dim();
  const bool absolute = scheme_info(config_.scheme).kind == SchemeKind::kAbsolute;
  const int pe_dim = config_.fusion == Fusion::kConcat ? (config_.pe_dim > 0 ? config_.pe_dim : config_.d_model / 4)
                                                         : config_.d_model;
  const int token_dim = absolute && config_.fusion == Fusion::kConcat ? config_.d_model - pe_dim : config_.d_model;
  embed = register_module("embed", torch::nn::Embedding(config_.vocab_size, token_dim));
  switch (config_.scheme) {
    case Scheme::kSinusoidal: sinusoidal = register_module("sinusoidal", SinusoidalPositionalEncoding(pe_dim, SinusoidalLayout::kInterleaved, config_.sinusoidal_base)); break;
    case Scheme::kLearned: learned = register_module("learned", LearnedPositionalEmbedding(config_.learned_positions, pe_dim)); break;
    case Scheme::kRope:
    case Scheme::kXpos:
    case Scheme::kMrope: rotary = register_module("rotary", RotaryEmbedding(config_.rope)); break;
    case Scheme::kRopeLearned: {
      const std::vector<float>& f = compute_schedule(config_.rope).inv_freq;
      rope_inv_freq = register_parameter("rope_inv_freq", torch::tensor(f, torch::kFloat32));
      break;
    }
    case Scheme::kPope: polar = register_module("polar", PolarEmbedding(config_.head_dim(), config_.n_heads, config_.rope.theta)); break;
    case Scheme::kAlibi: alibi = register_module("alibi", ALiBiBias(config_.n_heads, !config_.causal)); break;
    case Scheme::kT5: t5 = register_module("t5", T5RelativeBias(config_.n_heads, config_.t5)); break;
    case Scheme::kKerple: kerple = register_module("kerple", KerpleBias(config_.n_heads)); break;
    case Scheme::kSandwich: sandwich = register_module("sandwich", SandwichBias(config_.n_heads, config_.head_dim())); break;
    case Scheme::kDpb: dpb = register_module("dpb", DynamicPositionBias(config_.n_heads, std::max(1, config_.d_model / 4))); break;
    case Scheme::kFire: fire = register_module("fire", FireBias(config_.n_heads)); break;
    // Their positions live elsewhere (FoX: a gate in each layer; XL, DeBERTa: in attention) or nowhere.
    case Scheme::kNope:
    case Scheme::kFox:
    case Scheme::kXl:
    case Scheme::kDeberta:
    case Scheme::kShaw:
    case Scheme::kCope: break;
  }
  for (int i = 0; i < config_.n_layers; ++i) blocks.push_back(register_module("block" + std::to_string(i), Block(config_)));
  ln_f = register_module("ln_f", torch::nn::LayerNorm(torch::nn::LayerNormOptions({config_.d_model})));
  head = register_module("head", torch::nn::Linear(torch::nn::LinearOptions(config_.d_model, config_.vocab_size).bias(false)));
  dropout = register_module("dropout", torch::nn::Dropout(config_.dropout));
}

torch::Tensor TransformerLMImpl::positions_for(const torch::Tensor& full_mask, std::int64_t new_tokens) const {
  const torch::Tensor pos = (full_mask.to(torch::kInt64).cumsum(1) - 1).clamp_min(0);
  return pos.narrow(1, pos.size(1) - new_tokens, new_tokens).contiguous();
}

torch::Tensor TransformerLMImpl::forward_at(const torch::Tensor& tokens, const torch::Tensor& positions) {
  TORCH_CHECK(tokens.dim() == 2, "tokens must be [B, S]");
  if (positions.sizes() != tokens.sizes() || positions.scalar_type() != torch::kInt64)
    throw Error("forward_at: positions must be int64 of the tokens' shape " + std::string(c10::str(tokens.sizes())) + ", got " +
                std::string(c10::str(positions.scalar_type())) + " " + std::string(c10::str(positions.sizes())));
  if (remap.kind != PositionRemapKind::kNone) throw Error("forward_at: positions of one's own and a remap do not go together");
  if (positions.numel() > 0) {
    const torch::Tensor p = positions.cpu();
    if (p.min().item<std::int64_t>() < 0) throw Error("forward_at: positions must be >= 0, got " + std::to_string(p.min().item<std::int64_t>()));
    if (p.size(1) > 1 && !(p.narrow(1, 1, p.size(1) - 1) > p.narrow(1, 0, p.size(1) - 1)).all().item<bool>())
      throw Error("forward_at: each row's positions must increase strictly (a causal model reads them in order)");
    if (learned && p.max().item<std::int64_t>() >= config_.learned_positions)
      throw Error("forward_at: position " + std::to_string(p.max().item<std::int64_t>()) + " is past the learned table's " +
                  std::to_string(config_.learned_positions) + " rows");
  }
  given_positions_ = positions.contiguous();
  try {
    torch::Tensor out = forward(tokens);
    given_positions_ = torch::Tensor();
    return out;
  } catch (...) {
    given_positions_ = torch::Tensor();
    throw;
  }
}

torch::Tensor TransformerLMImpl::forward(const torch::Tensor& tokens, const torch::Tensor& attention_mask, KVCache* cache,
                                         RotaryEmbeddingImpl* rope_override) {
  TORCH_CHECK(tokens.dim() == 2, "tokens must be [B, S]");
  const std::int64_t B = tokens.size(0), S = tokens.size(1);
  const torch::Tensor new_mask = attention_mask.defined() ? attention_mask.to(torch::kBool)
                                                          : torch::ones({B, S}, tokens.options().dtype(torch::kBool));
  ForwardContext ctx;
  ctx.query_rows = attention_query_rows;
  ctx.past = cache ? cache->length() : 0;
  ctx.key_mask = cache && cache->mask.defined() ? torch::cat({cache->mask, new_mask}, 1) : new_mask;
  const torch::Tensor all_positions = given_positions_.defined()
                                          ? given_positions_
                                          : positions_for(ctx.key_mask, ctx.key_mask.size(1)) + (cache ? cache->position_offset : 0);
  RopeSpec spec;
  if (RotaryEmbeddingImpl* const rope = rope_override ? rope_override : rotary ? rotary.get() : nullptr) {
    spec = rope->spec_for(all_positions.max().item<std::int64_t>());
    if (config_.scheme == Scheme::kXpos) spec = spec.with_xpos({config_.xpos_scale_base});  // q's role; keys: for_keys()
    ctx.rope = &spec;
    ctx.cache_rotated_keys = cache && cache->hf_stale_keys;
    if (cache) cache->xpos_keys = ctx.cache_rotated_keys && spec.params().xpos.enabled();
    if (cache && !cache->hf_stale_keys && ctx.past > 0 && spec.inv_freq() != cache->inv_freq) {
      // The schedule changed: every cached key and value is stale. Re-run the whole prefix.
      const torch::Tensor all_tokens = torch::cat({cache->tokens, tokens}, 1);
      const torch::Tensor all_mask = ctx.key_mask;
      cache->clear();
      ++cache->rebuilds;
      return forward(all_tokens, all_mask, cache, rope_override).narrow(1, all_tokens.size(1) - S, S);
    }
  }
  if (cache) {
    cache->mask = ctx.key_mask;
    cache->tokens = cache->tokens.defined() ? torch::cat({cache->tokens, tokens}, 1) : tokens;
    cache->inv_freq = spec.inv_freq();
    cache->k.resize(blocks.size());
    cache->v.resize(blocks.size());
    cache->gate.resize(blocks.size());
  }
  ctx.k_positions = all_positions;
  ctx.q_positions = all_positions.narrow(1, ctx.past, S).contiguous();
  ctx.learned_inv_freq = rope_inv_freq;
  ctx.polar = polar ? polar.get() : nullptr;

  torch::Tensor x = embed->forward(tokens);
  if (config_.embed_scale) x = x * std::sqrt(static_cast<double>(config_.d_model));
  torch::Tensor pe;
  if (sinusoidal && config_.raw_index) {
    // PE(p) = p in each of the table's channels ([B, S] -> [B, S, width]; float32 holds p exactly).
    const std::int64_t width = config_.fusion == Fusion::kConcat ? config_.d_model - x.size(-1) : x.size(-1);
    pe = ctx.q_positions.to(x.scalar_type()).unsqueeze(-1).expand({B, S, width});
  } else if (sinusoidal) {
    pe = sinusoidal->forward(ctx.q_positions);
  }
  if (learned) pe = learned->forward(ctx.q_positions);
  if (pe.defined()) {
    switch (config_.fusion) {
      case Fusion::kAdd: x = x + pe; break;
      case Fusion::kConcat: x = torch::cat({x, pe}, -1); break;
      case Fusion::kMultiply: x = x * (1 + pe); break;
    }
  }
  x = dropout->forward(x);
  // The fused kernel (positions inside) unless recording weights, training with weight dropout, or
  // computing gradients without fused_training.
  bool recording = false;
  for (const auto& block : blocks) recording = recording || block->attention->record;
  // The kernel reads float32 CPU memory; other models keep the libtorch path.
  const bool float_cpu = embed->weight.is_cpu() && embed->weight.scalar_type() == torch::kFloat;
  const bool gradients = torch::GradMode::is_enabled();
  const bool weight_dropout = is_training() && config_.dropout > 0;  // the kernel drops no weights
  // FIRE is a distance table while every query is below its threshold L (fire.h); beyond, per block.
  const bool fused = use_fused_attention && float_cpu && (!gradients || fused_training) && !weight_dropout &&
                     !ctx.cache_rotated_keys && fused_attention_covers(config_) && !recording &&
                     (!fire || fire->table_covers(ctx.q_positions));
  // Kerple's, Sandwich's, DPB's (and FIRE's) table over every distance this forward has (positions 0 .. max).
  const std::int64_t distances = all_positions.numel() ? all_positions.max().item<std::int64_t>() + 1 : 1;
  if (kerple) ctx.distance_table = kerple->table(distances);
  if (sandwich) ctx.distance_table = sandwich->table(distances);
  if (dpb) ctx.distance_table = dpb->table(distances);
  if (fire && fused) ctx.distance_table = fire->table(distances);
  ctx.fire = fire && !fused ? fire.get() : nullptr;
  if (remap.kind != PositionRemapKind::kNone && !(fused && ctx.rope))
    throw Error(std::string("TransformerLM: remap ") + to_string(remap.kind) + " needs a RoPE model on the fused kernel at inference" +
                (ctx.rope ? " (eval mode, no gradients, no recorded weights, keys cached unrotated)" : "; the scheme is " +
                 std::string(to_string(config_.scheme))));
  if (fused) {
    ctx.fused = fused_spec(ctx);
    if (t5) ctx.t5_table = t5->table;  // layer 0's table, shared (T5); its gradient when training
  } else {
    if (alibi) ctx.bias = alibi->forward(ctx.q_positions, ctx.k_positions);
    if (t5) ctx.bias = t5->forward(ctx.q_positions, ctx.k_positions);  // layer 0's table, shared (T5)
    if (ctx.distance_table.defined()) ctx.bias = distance_bias_scores(ctx.distance_table, ctx.q_positions, ctx.k_positions, side());
  }
  for (std::size_t i = 0; i < blocks.size(); ++i)
    x = blocks[i]->forward(x, ctx, cache ? &cache->k[i] : nullptr, cache ? &cache->v[i] : nullptr, {},
                           cache ? &cache->gate[i] : nullptr);
  return head->forward(ln_f->forward(x));
}

torch::Tensor TransformerLMImpl::forward_segment(const torch::Tensor& tokens, XLMemory& memory) {
  if (config_.scheme != Scheme::kXl || config_.xl_mem_len < 1)
    throw Error("forward_segment needs the xl scheme with xl_mem_len >= 1, got scheme '" +
                std::string(to_string(config_.scheme)) + "', xl_mem_len " + std::to_string(config_.xl_mem_len));
  TORCH_CHECK(tokens.dim() == 2, "tokens must be [B, S]");
  const std::int64_t B = tokens.size(0), S = tokens.size(1), M = memory.length();
  if (M > 0 && (memory.layers.size() != blocks.size() || memory.layers[0].size(0) != B))
    throw Error("XL memory of another model or batch size: clear it first");
  ForwardContext ctx;
  ctx.query_rows = attention_query_rows;
  ctx.past = M;
  ctx.key_mask = torch::ones({B, M + S}, tokens.options().dtype(torch::kBool));
  ctx.k_positions = torch::arange(M + S, tokens.options().dtype(torch::kInt64)).expand({B, M + S}).contiguous();
  ctx.q_positions = ctx.k_positions.narrow(1, M, S).contiguous();
  torch::Tensor x = embed->forward(tokens);
  if (config_.embed_scale) x = x * std::sqrt(static_cast<double>(config_.d_model));
  x = dropout->forward(x);
  std::vector<torch::Tensor> next(blocks.size());
  for (std::size_t i = 0; i < blocks.size(); ++i) {
    const torch::Tensor mem = M > 0 ? memory.layers[i] : torch::Tensor();
    // This layer's input over memory + segment, its last xl_mem_len states kept for the next
    // segment, gradients stopped (the paper's SG(h_{tau-1})).
    const torch::Tensor all = M > 0 ? torch::cat({mem, x}, 1) : x;
    const std::int64_t keep = std::min<std::int64_t>(config_.xl_mem_len, all.size(1));
    next[i] = all.narrow(1, all.size(1) - keep, keep).detach();
    x = blocks[i]->forward(x, ctx, nullptr, nullptr, mem);
  }
  memory.layers = std::move(next);
  return head->forward(ln_f->forward(x));
}

// ---- config and serialization ----------------------------------------------------------------

void save_model(TransformerLM& model, const std::string& path) {
  torch::serialize::OutputArchive archive;
  archive.write("posenc_config", c10::IValue(config_to_json(model->config())));
  model->save(archive);
  // Serialised in memory, then written whole: libtorch's own file writer throws from a
  // destructor when a write fails (disk full), which terminates the process.
  std::ostringstream bytes;
  archive.save_to(bytes);
  write_file_atomic(path, bytes.str());
}

TransformerLM load_model(const std::string& path) {
  if (!std::ifstream(path)) throw Error("cannot open model file '" + path + "'");
  torch::serialize::InputArchive archive;
  try {
    archive.load_from(path);
  } catch (const c10::Error& e) {
    throw Error(path + " is not a torch archive of a posenc model: " + e.what_without_backtrace());
  }
  c10::IValue config;
  if (!archive.try_read("posenc_config", config)) throw Error(path + " is not a posenc model (no posenc_config)");
  ModelConfig model_config;
  try {
    model_config = config_from_json(config.toStringRef());
    model_config.validate();
  } catch (const Error& e) {
    throw Error(path + ": " + e.what());
  }
  TransformerLM model(model_config);
  try {
    model->load(archive);
  } catch (const c10::Error& e) {
    throw Error(path + ": its weights do not fit its config: " + e.what_without_backtrace());
  }
  return model;
}

}  // namespace posenc::torch_layer
