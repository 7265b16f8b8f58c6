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
constexpr double kMaxFloat = 3.4028234663852886e38;  // FLT_MAX: the kernels compute in float

std::string sizes(const at::Tensor& x) { return c10::str(x.sizes()); }
std::string sizes(const std::vector<std::int64_t>& v) { return c10::str(at::IntArrayRef(v)); }

Error refused(const std::string& what) { return Error("posenc::attention: " + what); }

// A name as given, cut to 80 characters (the whole of a hostile string is not echoed back).
std::string quoted(const std::string& name) { return "'" + (name.size() > 80 ? name.substr(0, 80) + "..." : name) + "'"; }

// A value the kernels take as a float: finite, within float's range and at least lo.
double float_value(const char* name, double v, double lo) {
  if (!(v >= lo && v <= kMaxFloat))
    throw refused(std::string(name) + " must be a finite number in [" + c10::str(lo) + ", FLT_MAX], got " + c10::str(v));
  return v;
}

// The device is the caller's to check: the CPU kernel's views (kernel_view.h) or the torch-native path.
void check_qkv(const at::Tensor& x, const char* name) {
  if (x.dim() != 4) throw refused(std::string(name) + " must be 4-D [B, H, tokens, D], got " + sizes(x));
  const auto t = x.scalar_type();
  if (t != at::kFloat && t != at::kBFloat16 && t != at::kHalf)
    throw refused(std::string(name) + " must be float32, bfloat16 or float16, got " + c10::toString(t));
  for (int d = 0; d < 4; ++d)  // the kernels index in int
    if (x.size(d) > kMaxInt)
      throw refused(std::string(name) + "'s dimension " + std::to_string(d) + " is " + std::to_string(x.size(d)) +
                    ", over 2^31-1 (" + sizes(x) + ")");
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
    throw refused(std::string(name) + " must be [" + (batch == 1 ? "1" : std::to_string(batch) + " or 1") + ", " + std::to_string(tokens) +
                  "], got " + sizes(x));
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

struct TableCache {
  std::mutex mutex;
  std::vector<std::shared_ptr<const RopeTable>> tables;
};
TableCache& table_cache() {
  static TableCache cache;
  return cache;
}

std::shared_ptr<const RopeTable> shared_table(const RopeApplyParams& params) {
  TableCache& cache = table_cache();
  std::vector<std::shared_ptr<const RopeTable>>& tables = cache.tables;
  const std::lock_guard<std::mutex> lock(cache.mutex);
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
  const std::int64_t last = ids.defined() ? (ids.numel() ? ids.max().item<std::int64_t>() : -1) : tokens - 1;
  return last < 0 || offset > kMaxInt || last > kMaxInt ? -1 : last + offset;  // -1: none, or beyond any table
}

}  // namespace

std::size_t attention_op_cached_rope_tables() {
  TableCache& cache = table_cache();
  const std::lock_guard<std::mutex> lock(cache.mutex);
  return cache.tables.size();
}

void attention_op_clear_rope_tables() {
  TableCache& cache = table_cache();
  const std::lock_guard<std::mutex> lock(cache.mutex);
  cache.tables.clear();
}

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

AttentionCall::AttentionCall(const AttentionOpArgs& a, const AttentionShape& s, Table table) {
  const auto positions = try_from_name<AttentionPositions>(a.positions);
  if (!positions) throw refused("positions must be one of " + enum_names_joined<AttentionPositions>() + ", got " + quoted(a.positions));
  p_.positions = *positions;
  p_.scale = float_value("scale (0: 1/sqrt(D))", a.scale, 0);
  in_range("window", a.window, 0, kMaxInt);
  in_range("chunk", a.chunk, 0, kMaxInt);
  in_range("past (-1: T - S)", a.past, -1, kMaxInt);
  if (a.window > 0 && !a.causal)
    throw refused("window is a causal sliding window (the W keys up to the query); with causal false it would be one-sided");
  if (p_.positions == AttentionPositions::kForgetGate && !a.causal) throw refused("FoX's forget gate is causal: causal must be true");
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
  if (!rope && (a.inv_freq || !a.axis_of_freq.empty() || a.remap != "none" || a.xpos_scale_base != 0 ||
                a.rope_channel_offset != 0 || a.rope_rotated_heads != 0))
    throw refused("inv_freq, axis_of_freq, remap, xpos_scale_base, rope_channel_offset and rope_rotated_heads are RoPE's: "
                  "positions is " + quoted(a.positions));
  if (rope) {
    if (!a.inv_freq || a.inv_freq->dim() != 1 || a.inv_freq->scalar_type() != at::kFloat)
      throw refused("positions 'rope' need inv_freq, a float32 [F] tensor");
    require_cpu(*a.inv_freq, "posenc::attention: inv_freq");
    const at::Tensor f = a.inv_freq->contiguous();
    inv_freq_.assign(f.data_ptr<float>(), f.data_ptr<float>() + f.numel());
    if (!a.axis_of_freq.empty() && a.axis_of_freq.size() != inv_freq_.size())
      throw refused("axis_of_freq must be empty or one axis per frequency (" + std::to_string(inv_freq_.size()) + "), got " +
                    std::to_string(a.axis_of_freq.size()) + " entries");
    for (const std::int64_t axis : a.axis_of_freq)
      if (axis != 0) throw refused("attention takes one position axis: axis_of_freq entries must be 0 (M-RoPE is not supported), got " + std::to_string(axis));
    const auto layout = try_from_name<RopeLayout>(a.rope_layout);
    if (!layout) throw refused("rope_layout must be one of " + enum_names_joined<RopeLayout>() + ", got " + quoted(a.rope_layout));
    p_.rope = rope_apply_params(inv_freq_, float_value("attention_factor", a.attention_factor, 0), *layout, axes_);
    p_.rope.xpos = {a.xpos_scale_base, a.xpos_gamma, a.xpos_center};  // validate_xpos checks them with the positions
    p_.rope.channel_offset = static_cast<int>(in_range("rope_channel_offset", a.rope_channel_offset, 0, kMaxInt));
    p_.rope.rotated_heads = static_cast<int>(in_range("rope_rotated_heads", a.rope_rotated_heads, 0, kMaxInt));
    // The shared table only for plain RoPE (a remap's far positions would grow it to its window)
    // and positions the call's own size vouches for: the rows the kernel would build itself
    // (attention.h: up to 2 (S + T) + 4096), or kTableLimit.
    const std::int64_t largest = std::max(largest_position(q_ids_, a.q_offset, s.q_tokens), largest_position(k_ids_, a.k_offset, s.k_tokens));
    const std::int64_t vouched = std::max(kTableLimit, 2 * (s.q_tokens + s.k_tokens) + 4096);
    if (table == Table::kShared && a.remap == "none" && largest >= 0 && largest < vouched && !inv_freq_.empty() && !s.empty())
      table_ = shared_table(p_.rope);
  }
  if (p_.positions != AttentionPositions::kAlibi && !a.alibi_slopes.empty())
    throw refused("alibi_slopes are read only with positions 'alibi', not " + quoted(a.positions));
  if (p_.positions == AttentionPositions::kAlibi) {
    if (static_cast<std::int64_t>(a.alibi_slopes.size()) != s.heads)
      throw refused("alibi needs one slope per query head: " + std::to_string(a.alibi_slopes.size()) + " slopes, " +
                    std::to_string(s.heads) + " heads");
    for (const double slope : a.alibi_slopes)
      if (!(std::abs(slope) <= kMaxFloat)) throw refused("alibi_slopes must be finite numbers within float's range, got " + c10::str(slope));
    p_.alibi_slopes = a.alibi_slopes.data();
    p_.alibi_mode = a.alibi_symmetric ? AlibiMode::kSymmetric : AlibiMode::kCausal;
  }
  const std::vector<std::int64_t> shape = bias_shape(a, s);
  if (shape.empty() && a.bias) throw refused("a bias input is read only with positions t5, distance-table or forget-gate, not " + quoted(a.positions));
  if (!shape.empty()) {
    if (!a.bias) throw refused("positions '" + a.positions + "' need their bias input " + sizes(shape));
    require_cpu(*a.bias, "posenc::attention: bias");
    if (!at::isFloatingType(a.bias->scalar_type()) || a.bias->sizes() != at::IntArrayRef(shape))
      throw refused("the bias input of positions '" + a.positions + "' must be a floating tensor " + sizes(shape) + ", got " +
                    c10::toString(a.bias->scalar_type()) + " " + sizes(*a.bias));
    bias_ = a.bias->detach().to(at::kFloat).contiguous();
    if (!at::isfinite(bias_).all().item<bool>())  // a NaN or a float overflow would silently zero rows
      throw refused("the bias input of positions '" + a.positions + "' holds a value that is not finite (as float32)");
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
  if (!remap) throw refused("remap must be one of " + enum_names_joined<PositionRemapKind>() + ", got " + quoted(a.remap));
  p_.remap = {*remap, a.remap_window, a.remap_group, a.remap_leak, a.remap_chunk_size, a.remap_local_size};
}

KernelOptions AttentionCall::options() const {
  KernelOptions options;
  options.threads = std::clamp(at::get_num_threads(), 1, kMaxThreads);
  options.table = table_.get();
  return options;
}

}  // namespace posenc::torch_layer
