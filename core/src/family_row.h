// The family table's row builder (private to the core library): one chained setter per
// FamilyQuirks field, so each row of model_families.cc reads as its HF rules.
#pragma once

#include <vector>

#include "posenc/model_families.h"

namespace posenc::family_table {

// One row: the families and the modeling code every field of it follows.
struct Row {
  FamilyQuirks q;
  Row(const char* types, const char* source) { q.model_types = types, q.hf_source = source; }
  Row& layout(RopeLayout l) { return q.layout = l, *this; }
  Row& rope_layers(RopeLayers r) { return q.rope_layers = r, *this; }
  Row& window(Window w, int full_every = 0) { return q.window = w, q.full_every = full_every, *this; }
  Row& default_layers(DefaultLayers d) { return q.default_layers = d, *this; }
  Row& default_sliding_window(int w) { return q.default_sliding_window = w, *this; }
  Row& query_scale(QueryScale s) { return q.query_scale = s, *this; }
  Row& softmax(SoftmaxScale s) { return q.softmax_scale = s, *this; }
  Row& qk_norm(QkNorm n) { return q.qk_norm = n, *this; }
  Row& layer_count(const char* key) { return q.layer_count_key = key, *this; }
  Row& mla() { return q.mla = true, *this; }
  Row& rope_interleave_key() { return q.rope_interleave_key = true, *this; }
  Row& mrope(MropeStyle style) { return q.mrope_style = style, *this; }
  Row& shape_keys(const char* hidden, const char* heads) { return q.hidden_key = hidden, q.heads_key = heads, *this; }
  Row& head_dim_key(const char* key) { return q.head_dim_key = key, *this; }
  Row& max_pos_key(const char* key) { return q.max_pos_key = key, *this; }
  Row& layer_types_key(const char* key) { return q.layer_types_key = key, *this; }
  Row& head_dim_twice_hidden() { return q.head_dim_twice_hidden = true, *this; }
  Row& theta_in_attn_config() { return q.theta_in_attn_config = true, *this; }
  Row& theta_from_rope_ratio() { return q.theta_from_rope_ratio = true, *this; }
  Row& default_partial_rotary(double f) { return q.default_partial_rotary = f, *this; }
  Row& own_rotary_dim(int d) { return q.own_rotary_dim = d, *this; }
  Row& ignored_rope_keys(const char* keys) { return q.ignored_rope_keys = keys, *this; }
  Row& default_mrope_section(std::vector<int> s) { return q.default_mrope_section = std::move(s), *this; }
  Row& legacy_keys(const char* theta, const char* fraction) { return q.theta_key = theta, q.fraction_key = fraction, *this; }
  Row& yarn_means_longrope() { return q.yarn_means_longrope = true, *this; }
  Row& default_theta(double theta) { return q.default_theta = theta, *this; }
  Row& ntk_alpha() { return q.ntk_alpha = true, *this; }
  Row& mscale_reads_factor() { return q.mscale_reads_factor = true, *this; }
  Row& global_head_dim(int d) { return q.default_global_head_dim = d, *this; }
  Row& last_layer_full() { return q.last_layer_full = true, *this; }
  Row& kv_sharing() { return q.kv_sharing = true, *this; }
  Row& default_rope_parameters(const char* json) { return q.default_rope_parameters = json, *this; }
  Row& qwen_seq_length() { return q.qwen_seq_length = true, *this; }
  Row& dsa_indexer() { return q.dsa_indexer = true, *this; }
  Row& deepseek_v4() { return q.deepseek_v4 = true, *this; }
  Row& xdrope() { return q.xdrope = true, q.mrope_style = MropeStyle::kXdrope, *this; }
  Row& sliding_layers_unscaled(const char* local_theta_key = nullptr) {
    return q.sliding_layers_unscaled = true, q.local_theta_key = local_theta_key, *this;
  }
};

}  // namespace posenc::family_table
