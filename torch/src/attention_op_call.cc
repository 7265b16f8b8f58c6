#include "attention_op_call.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <mutex>
#include <string>

#include "posenc/error.h"
#include "posenc/names.h"
#include "posenc_torch/kernel_view.h"

namespace posenc::torch_layer {
namespace {

constexpr std::int64_t kMaxInt = 2147483647;

std::string sizes(const at::Tensor& x) { return c10::str(x.sizes()); }
std::string sizes(const std::vector<std::int64_t>& v) { return c10::str(at::IntArrayRef(v)); }

Error refused(const std::string& what) { return Error("posenc::attention: " + what); }

void check_qkv(const at::Tensor& x, const char* name) {
  require_cpu(x, (std::string("posenc::attention: ") + name).c_str());
  if (x.dim() != 4) throw refused(std::string(name) + " must be 4-D [B, H, tokens, D], got " + sizes(x));
  const auto t = x.scalar_type();
  if (t != at::kFloat && t != at::kBFloat16 && t != at::kHalf)
    throw refused(std::string(name) + " must be float32, bfloat16 or float16, got " + c10::toString(t));
}

std::int64_t in_range(const char* name, std::int64_t v, std::int64_t lo, std::int64_t hi) {
  if (v < lo || v > hi)
    throw refused(std::string(name) + " must be in [" + std::to_string(lo) + ", " + std::to_string(hi) + "], got " + std::to_string(v));
  return v;
}

// Position ids [B or 1, tokens], int32 or int64, as the kernels read them (int64, contiguous).
at::Tensor ids_of(const at::Tensor& x, std::int64_t batch, std::int64_t tokens, const char* name) {
  require_cpu(x, (std::string("posenc::attention: ") + name).c_str());
  if (x.scalar_type() != at::kLong && x.scalar_type() != at::kInt)
    throw refused(std::string(name) + " must be int32 or int64, got " + c10::toString(x.scalar_type()));
  if (x.dim() != 2 || x.size(1) != tokens || (x.size(0) != batch && x.size(0) != 1))
    throw refused(std::string(name) + " must be [" + std::to_string(batch) + " or 1, " + std::to_string(tokens) + "], got " + sizes(x));
  return positions_view(x, name);
}

PositionIds explicit_ids(const at::Tensor& ids, std::int64_t offset) {
  PositionIds p = PositionIds::explicit_ids(ids.data_ptr<std::int64_t>());
  p.shared_across_batch = ids.size(0) == 1;
  p.offset = offset;
  return p;
}

// The few RoPE tables kept per process, most recently used last: a model's layers and steps call
// with the same frequencies, so a decode step at position 100 000 reads rows built once. A call
// whose positions reach kTableLimit or beyond takes the kernel's own rule (attention.h) instead,
// so no hostile position grows a shared table without bound.
constexpr std::int64_t kTableLimit = std::int64_t{1} << 17;
constexpr std::size_t kTablesKept = 4;

std::shared_ptr<const RopeTable> shared_table(const RopeApplyParams& params) {
  static std::mutex mutex;
  static std::vector<std::shared_ptr<const RopeTable>> tables;
  const std::lock_guard<std::mutex> lock(mutex);
  const auto found = std::find_if(tables.begin(), tables.end(), [&](const auto& t) { return t->matches(params); });
  std::shared_ptr<const RopeTable> table;
  if (found != tables.end()) {
    table = *found;
    tables.erase(found);
  } else {
    table = std::make_shared<const RopeTable>(params);
    if (tables.size() == kTablesKept) tables.erase(tables.begin());
  }
  tables.push_back(table);
  return table;
}

std::int64_t largest_position(const at::Tensor& ids, std::int64_t offset, std::int64_t tokens) {
  if (ids.defined()) return ids.numel() ? ids.max().item<std::int64_t>() + offset : -1;
  return tokens - 1 + offset;
}

}  // namespace

AttentionShape attention_shape(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v) {
  check_qkv(q, "q");
  check_qkv(k, "k");
  check_qkv(v, "v");
  AttentionShape s{q.size(0), q.size(1), q.size(2), k.size(1), k.size(2), q.size(3)};
  if (k.size(0) != s.batch || k.size(3) != s.head_dim || v.sizes() != k.sizes())
    throw refused("q [B, Hq, S, D] = " + sizes(q) + ", k " + sizes(k) + " and v " + sizes(v) +
                  " must share B and D, and k and v their whole shape");
  if (s.head_dim < 1) throw refused("head_dim D must be >= 1, got q " + sizes(q));
  if (s.kv_heads < 1 || s.heads % s.kv_heads != 0)
    throw refused("query heads Hq = " + std::to_string(s.heads) + " must be a multiple of kv heads Hk = " +
                  std::to_string(s.kv_heads) + " >= 1");
  return s;
}

std::vector<std::int64_t> bias_shape(const AttentionOpArgs& a, const AttentionShape& s) {
  if (a.positions == "t5") return {in_range("t5_num_buckets", a.t5_num_buckets, 1, kMaxInt), s.heads};
  if (a.positions == "distance-table") {
    const std::int64_t length = in_range("distance_length", a.distance_length, 1, kMaxInt + 1);
    return {s.heads, from_name<DistanceSide>(a.distance_side) == DistanceSide::kSigned ? 2 * length - 1 : length};
  }
  if (a.positions == "forget-gate") return {s.batch, s.heads, s.k_tokens};
  return {};
}

AttentionCall::AttentionCall(const AttentionOpArgs& a, const AttentionShape& s) {
  const auto positions = try_from_name<AttentionPositions>(a.positions);
  if (!positions)
    throw refused("positions must be one of " + enum_names_joined<AttentionPositions>() + ", got '" + a.positions + "'");
  p_.positions = *positions;
  p_.scale = a.scale;
  p_.mask.causal = a.causal;
  p_.mask.past = a.past;
  p_.mask.sliding_window = a.window;
  p_.mask.chunk = a.chunk;
  if (a.key_padding) {
    const at::Tensor& m = *a.key_padding;
    require_cpu(m, "posenc::attention: key_padding");
    if (m.dim() != 2 || m.size(0) != s.batch || m.size(1) != s.k_tokens)
      throw refused("key_padding must be [B, T] = [" + std::to_string(s.batch) + ", " + std::to_string(s.k_tokens) + "], got " + sizes(m));
    if (at::isFloatingType(m.scalar_type()) || at::isComplexType(m.scalar_type()))
      throw refused(std::string("key_padding must be bool or integer (nonzero: a real key), got ") + c10::toString(m.scalar_type()));
    padding_ = m.ne(0).to(at::kByte).contiguous();
    p_.mask.key_padding = padding_.data_ptr<std::uint8_t>();
  }
  if (a.q_positions.has_value() != a.k_positions.has_value())
    throw refused("give both q_positions and k_positions, or neither (positions index + q_offset, k_offset)");
  if (a.q_positions) {
    q_ids_ = ids_of(*a.q_positions, s.batch, s.q_tokens, "q_positions");
    k_ids_ = ids_of(*a.k_positions, s.batch, s.k_tokens, "k_positions");
    p_.q_positions = explicit_ids(q_ids_, a.q_offset);
    p_.k_positions = explicit_ids(k_ids_, a.k_offset);
  } else {
    p_.q_positions = PositionIds::implicit(a.q_offset);
    p_.k_positions = PositionIds::implicit(a.k_offset);
  }
  const bool rope = p_.positions == AttentionPositions::kRope;
  if (!rope && (a.inv_freq || !a.axis_of_freq.empty() || a.remap != "none"))
    throw refused("inv_freq, axis_of_freq and remap are RoPE's: positions is '" + a.positions + "'");
  if (rope) {
    if (!a.inv_freq || a.inv_freq->dim() != 1 || a.inv_freq->scalar_type() != at::kFloat)
      throw refused("positions 'rope' need inv_freq, a float32 [F] tensor");
    require_cpu(*a.inv_freq, "posenc::attention: inv_freq");
    const at::Tensor f = a.inv_freq->contiguous();
    inv_freq_.assign(f.data_ptr<float>(), f.data_ptr<float>() + f.numel());
    for (const std::int64_t axis : a.axis_of_freq)
      if (axis != 0) throw refused("attention takes one position axis: axis_of_freq entries must be 0 (M-RoPE is not supported), got " + std::to_string(axis));
    const auto layout = try_from_name<RopeLayout>(a.rope_layout);
    if (!layout) throw refused("rope_layout must be one of " + enum_names_joined<RopeLayout>() + ", got '" + a.rope_layout + "'");
    p_.rope = rope_apply_params(inv_freq_, a.attention_factor, *layout, axes_);
    const std::int64_t largest = std::max(largest_position(q_ids_, a.q_offset, s.q_tokens), largest_position(k_ids_, a.k_offset, s.k_tokens));
    if (largest >= 0 && largest < kTableLimit && !inv_freq_.empty() && !s.empty()) table_ = shared_table(p_.rope);
  }
  if (p_.positions != AttentionPositions::kAlibi && !a.alibi_slopes.empty())
    throw refused("alibi_slopes are read only with positions 'alibi', not '" + a.positions + "'");
  if (p_.positions == AttentionPositions::kAlibi) {
    if (static_cast<std::int64_t>(a.alibi_slopes.size()) != s.heads)
      throw refused("alibi needs one slope per query head: " + std::to_string(a.alibi_slopes.size()) + " slopes, " +
                    std::to_string(s.heads) + " heads");
    p_.alibi_slopes = a.alibi_slopes.data();
    p_.alibi_mode = a.alibi_symmetric ? AlibiMode::kSymmetric : AlibiMode::kCausal;
  }
  const std::vector<std::int64_t> shape = bias_shape(a, s);
  if (shape.empty() && a.bias) throw refused("a bias input is read only with positions t5, distance-table or forget-gate, not '" + a.positions + "'");
  if (!shape.empty()) {
    if (!a.bias) throw refused("positions '" + a.positions + "' need their bias input " + sizes(shape));
    require_cpu(*a.bias, "posenc::attention: bias");
    if (!at::isFloatingType(a.bias->scalar_type()) || a.bias->sizes() != at::IntArrayRef(shape))
      throw refused("the bias input of positions '" + a.positions + "' must be a floating tensor " + sizes(shape) + ", got " +
                    c10::toString(a.bias->scalar_type()) + " " + sizes(*a.bias));
    bias_ = a.bias->detach().to(at::kFloat).contiguous();
  }
  const float* bias = bias_.defined() ? bias_.data_ptr<float>() : nullptr;
  if (p_.positions == AttentionPositions::kT5) {
    p_.t5 = {static_cast<int>(shape[0]), static_cast<int>(in_range("t5_max_distance", a.t5_max_distance, 1, kMaxInt)), a.t5_bidirectional};
    p_.t5_table = bias;
  }
  if (p_.positions == AttentionPositions::kDistanceTable) {
    p_.distance_table = {bias, a.distance_length, from_name<DistanceSide>(a.distance_side)};
  }
  if (p_.positions == AttentionPositions::kForgetGate) p_.gate_cumulative = bias;
  const auto remap = try_from_name<PositionRemapKind>(a.remap);
  if (!remap) throw refused("remap must be one of " + enum_names_joined<PositionRemapKind>() + ", got '" + a.remap + "'");
  p_.remap = {*remap, a.remap_window, a.remap_group, a.remap_leak, a.remap_chunk_size, a.remap_local_size};
}

KernelOptions AttentionCall::options() const {
  KernelOptions options;
  options.threads = std::clamp(at::get_num_threads(), 1, kMaxThreads);
  options.table = table_.get();
  return options;
}

}  // namespace posenc::torch_layer
