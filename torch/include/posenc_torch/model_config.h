// ModelConfig: everything that determines a TransformerLM's architecture and positional scheme,
// and its JSON form (saved with the weights by save_model, written beside the lab's results).
// No libtorch here: tools read and write configs without the slow headers.
//
// The JSON form (version 2) is the whole config, every RopeParams field included:
//   {"format": "posenc-model-config", "version": 2, "vocab_size": 128, ..., "scheme": "rope",
//    "fusion": "add", "rope": {...rope_params_json.h...},
//    "t5": {"num_buckets": 32, "max_distance": 128, "bidirectional": false}, ...}
// Reading is strict: an unknown key, scheme or fusion name is an error, never a default.
// Version 1 files (posenc before the version key: five rope fields, T5 direction implied by
// causal) still load.
#pragma once

#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>

#include "posenc/rope_params.h"
#include "posenc/schemes.h"
#include "posenc/t5_bias.h"

namespace posenc::torch_layer {

// How an absolute encoding meets the token embedding (none for relative and rotary schemes).
enum class Fusion {
  kAdd,       // x + PE (Vaswani; the norm)
  kConcat,    // [x_tokens (d_model - pe_dim) | PE (pe_dim)]
  kMultiply,  // x * (1 + PE): a position-dependent gain, the identity where PE = 0
};
}  // namespace posenc::torch_layer

namespace posenc {
POSENC_ENUM_NAMES(torch_layer::Fusion, "fusion", {torch_layer::Fusion::kAdd, "add"}, {torch_layer::Fusion::kConcat, "concat"},
                  {torch_layer::Fusion::kMultiply, "multiply"});
}  // namespace posenc

namespace posenc::torch_layer {

// A scheme a text-only TransformerLM takes (every scheme but M-RoPE, which needs (T, H, W)
// position ids); anything else is an Error naming `what` (e.g. "--schemes") and the choices.
Scheme language_model_scheme(const std::string& name, const std::string& what);
// The names it accepts (every Scheme but mrope), less `also_excluded`, joined by ", ": what an
// error lists after "use:", so a new scheme appears in every such list by itself.
std::string language_model_scheme_names(std::initializer_list<Scheme> also_excluded = {});

struct ModelConfig {
  int vocab_size = 128;
  int d_model = 128;
  int n_layers = 3;
  int n_heads = 4;
  int n_kv_heads = 0;  // 0: n_heads (multi-head); fewer: grouped-query attention
  int d_ff = 0;        // 0: 4 d_model
  double dropout = 0.0;
  bool causal = true;
  bool embed_scale = false;  // multiply token embeddings by sqrt(d_model) (Vaswani)
  Scheme scheme = Scheme::kRope;
  Fusion fusion = Fusion::kAdd;
  int pe_dim = 0;  // concat: width of the positional part (0: d_model / 4)
  double sinusoidal_base = 10000;  // the sinusoidal table's base (Vaswani et al. 2017: 10000)
  // The sinusoidal scheme's table replaced by the raw index: PE(p) = p in every channel, the
  // first encoding tutorials warn against (issue 32's pitfall), fused as `fusion` says.
  bool raw_index = false;
  RopeParams rope;  // type, theta, scaling; head_dim is set from d_model / n_heads
  int learned_positions = 1024;
  T5BucketParams t5{32, 128, false};
  int deberta_buckets = 64, deberta_max_relative = 256;
  int xl_clamp_len = 0;
  int shaw_max_relative = 16;  // Shaw: distances past +-16 share the edge rows (Shaw et al.'s k = 16)
  int cope_max_pos = 64;       // CoPE: contextual positions clamped at cope_max_pos - 1 (npos_max)
  // xPos (rope_xpos.h): RoPE with zeta_i^((m - n)/B) on each pair's score, B = xpos_scale_base
  // (Sun et al. 2022: 512), gamma 0.4; centre 0, so positions up to ~32 k at B = 512 (e^80).
  double xpos_scale_base = 512;
  // Transformer-XL segment recurrence: each layer also attends to the last xl_mem_len hidden
  // states it saw in earlier segments (gradients stopped). 0: no memory.
  int xl_mem_len = 0;

  int head_dim() const { return d_model / n_heads; }
  int kv_heads() const { return n_kv_heads > 0 ? n_kv_heads : n_heads; }
  void validate() const;  // throws posenc::Error
};

inline constexpr int kModelConfigVersion = 7;  // 3: sinusoidal_base; 4: raw_index; 5: shaw_max_relative; 6: cope_max_pos; 7: xpos_scale_base

// The field table of ModelConfig (and of its T5 buckets): one row per field, its JSON key and
// the file version that brought it. It drives config_to_json, config_from_json (keys, known-key
// check) and the round-trip test; a new field is one member and one row. Member types: int,
// double, bool, a named enum, RopeParams (its own table, rope_fields.h), T5BucketParams.
struct ConfigField {
  const char* name;
  int since_version = 1;  // version 1 kept RopeParams and the T5 buckets as flat keys
};

template <class C, class V, std::enable_if_t<std::is_same_v<std::remove_const_t<C>, ModelConfig>, int> = 0>
void for_each_field(C& c, V&& visit) {
  visit(ConfigField{"vocab_size"}, c.vocab_size);
  visit(ConfigField{"d_model"}, c.d_model);
  visit(ConfigField{"n_layers"}, c.n_layers);
  visit(ConfigField{"n_heads"}, c.n_heads);
  visit(ConfigField{"n_kv_heads"}, c.n_kv_heads);
  visit(ConfigField{"d_ff"}, c.d_ff);
  visit(ConfigField{"dropout"}, c.dropout);
  visit(ConfigField{"causal"}, c.causal);
  visit(ConfigField{"embed_scale"}, c.embed_scale);
  visit(ConfigField{"scheme"}, c.scheme);
  visit(ConfigField{"fusion"}, c.fusion);
  visit(ConfigField{"pe_dim"}, c.pe_dim);
  visit(ConfigField{"sinusoidal_base", 3}, c.sinusoidal_base);
  visit(ConfigField{"raw_index", 4}, c.raw_index);
  visit(ConfigField{"rope", 2}, c.rope);
  visit(ConfigField{"learned_positions"}, c.learned_positions);
  visit(ConfigField{"t5", 2}, c.t5);
  visit(ConfigField{"deberta_buckets"}, c.deberta_buckets);
  visit(ConfigField{"deberta_max_relative"}, c.deberta_max_relative);
  visit(ConfigField{"xl_clamp_len"}, c.xl_clamp_len);
  visit(ConfigField{"xl_mem_len", 2}, c.xl_mem_len);
  visit(ConfigField{"shaw_max_relative", 5}, c.shaw_max_relative);
  visit(ConfigField{"cope_max_pos", 6}, c.cope_max_pos);
  visit(ConfigField{"xpos_scale_base", 7}, c.xpos_scale_base);
}

std::string config_to_json(const ModelConfig& config);
// Throws posenc::Error naming the key for anything unknown, mistyped or missing.
ModelConfig config_from_json(const std::string& text);

}  // namespace posenc::torch_layer

namespace posenc {
// T5's buckets inside a saved ModelConfig ("t5": {...}); beside T5BucketParams' namespace, so
// that a call on one finds it.
template <class C, class V, std::enable_if_t<std::is_same_v<std::remove_const_t<C>, T5BucketParams>, int> = 0>
void for_each_field(C& t5, V&& visit) {
  using torch_layer::ConfigField;
  visit(ConfigField{"num_buckets"}, t5.num_buckets);
  visit(ConfigField{"max_distance"}, t5.max_distance);
  visit(ConfigField{"bidirectional"}, t5.bidirectional);
}
}  // namespace posenc
