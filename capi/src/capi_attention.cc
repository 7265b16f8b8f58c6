// Fused attention (attention.h) and the encodings that are plain functions (ALiBi slopes, T5
// buckets, sinusoidal rows) through the C ABI. The C params struct maps field for field onto
// AttentionParams; only the checks posenc's own validate_attention cannot make (enum values,
// NULL pointers, out sharing memory with an input) are made here.
#include <cmath>

#include "capi_internal.h"
#include "posenc/attention.h"
#include "posenc/sinusoidal.h"

namespace posenc::capi {
namespace {

// Byte range [begin, end) a view reaches; {0, 0} when empty.
struct Range {
  std::uintptr_t begin = 0, end = 0;
  bool meets(Range o) const { return begin < o.end && o.begin < end; }
};

Range range_of(const RopeTensor& x) {
  if (empty_view(x)) return {};
  const auto begin = reinterpret_cast<std::uintptr_t>(x.data);
  return {begin, begin + static_cast<std::uintptr_t>(extent_elements(x)) * dtype_size(x.dtype)};
}

AttentionPositions positions_of(std::int32_t kind) {
  switch (kind) {
    case POSENC_POS_NONE: return AttentionPositions::kNone;
    case POSENC_POS_ROPE: return AttentionPositions::kRope;
    case POSENC_POS_ALIBI: return AttentionPositions::kAlibi;
    case POSENC_POS_T5: return AttentionPositions::kT5;
  }
  fail("params->positions " + std::to_string(kind) + " is not one of 0 (none), 1 (rope), 2 (alibi), 3 (t5)");
}

std::int32_t zero_or_one(std::int32_t value, const char* name) {
  return static_cast<std::int32_t>(in_range(value, 0, 1, name));
}

}  // namespace
}  // namespace posenc::capi

static_assert(static_cast<int>(posenc::PositionRemapKind::kSelfExtend) == POSENC_REMAP_SELF_EXTEND &&
                  static_cast<int>(posenc::PositionRemapKind::kReRope) == POSENC_REMAP_RE_ROPE &&
                  static_cast<int>(posenc::PositionRemapKind::kLeakyReRope) == POSENC_REMAP_LEAKY_RE_ROPE &&
                  static_cast<int>(posenc::PositionRemapKind::kDualChunk) == POSENC_REMAP_DUAL_CHUNK,
              "posenc.h's POSENC_REMAP_* are attention.h's PositionRemapKind");

using namespace posenc;
using namespace posenc::capi;

extern "C" {

POSENC_API posenc_status posenc_attention_forward(const posenc_attention_params* params, const posenc_tensor* q,
                                                  const posenc_tensor* k, const posenc_tensor* v,
                                                  const posenc_tensor* out) {
  return guarded(__func__, [&] {
    require(params, "params");
    posenc_attention_params defaults;
    posenc_attention_params_init(&defaults);
    const posenc_attention_params p = read_versioned(params, defaults, "posenc_attention_params");
    const RopeTensor qt = to_tensor(q, "q"), kt = to_tensor(k, "k"), vt = to_tensor(v, "v"), ot = to_tensor(out, "out");
    for (const auto& [x, name] : {std::pair{&qt, "q"}, std::pair{&kt, "k"}, std::pair{&vt, "v"}})
      if (views_overlap(ot, *x)) fail(std::string("out shares elements with ") + name + ", which it overwrites");

    AttentionParams a;
    a.scale = p.scale;
    a.mask.causal = zero_or_one(p.causal, "params->causal") != 0;
    a.mask.past = p.past;
    a.mask.key_padding = p.key_padding;
    a.mask.sliding_window = p.sliding_window;
    a.mask.chunk = p.chunk;
    a.positions = positions_of(p.positions);
    a.q_positions = to_positions(&p.q_positions, "params->q_positions");
    a.k_positions = to_positions(&p.k_positions, "params->k_positions");
    if (a.positions == AttentionPositions::kRope) {
      require(p.rope, "params->rope (the schedule, for positions = rope)");
      a.rope = apply_params(*p.rope, layout_of(p.rope_layout, *p.rope, "params->rope_layout"), __func__);
      refuse_xdrope_axes(*p.rope, a.q_positions, "params->q_positions");
      refuse_xdrope_axes(*p.rope, a.k_positions, "params->k_positions");
    }
    const RopeApplyParams* rope = a.positions == AttentionPositions::kRope ? &a.rope : nullptr;
    fit_implicit_axes(a.q_positions, rope);
    fit_implicit_axes(a.k_positions, rope);
    check_id_values(a.q_positions, qt, "params->q_positions");
    check_id_values(a.k_positions, kt, "params->k_positions");
    if (a.positions == AttentionPositions::kAlibi) require(p.alibi_slopes, "params->alibi_slopes ([Hq], for alibi)");
    a.alibi_slopes = p.alibi_slopes;
    a.alibi_mode = zero_or_one(p.alibi_mode, "params->alibi_mode (0 causal, 1 symmetric)") ? AlibiMode::kSymmetric
                                                                                           : AlibiMode::kCausal;
    if (a.positions == AttentionPositions::kT5) require(p.t5_table, "params->t5_table ([num_buckets][Hq], for t5)");
    a.t5_table = p.t5_table;
    a.t5.num_buckets = p.t5_num_buckets;
    a.t5.max_distance = p.t5_max_distance;
    a.t5.bidirectional = zero_or_one(p.t5_bidirectional, "params->t5_bidirectional") != 0;
    a.remap.kind = static_cast<PositionRemapKind>(
        in_range(p.remap, POSENC_REMAP_NONE, POSENC_REMAP_DUAL_CHUNK, "params->remap (POSENC_REMAP_*)"));
    a.remap.window = p.remap_window;  // the core names a value out of range
    a.remap.group = p.remap_group;
    a.remap.leak = p.remap_leak;
    a.remap.chunk_size = p.remap_chunk_size;
    a.remap.local_size = p.remap_local_size;

    AttentionOptions options;
    options.threads = static_cast<int>(in_range(p.threads, 0, kMaxThreads, "params->threads (0: every hardware thread)"));
    options.lse = p.lse;
    if (p.lse) {  // [B, Hq, S] floats, dense: it must not land on what attention reads or writes
      const auto begin = reinterpret_cast<std::uintptr_t>(p.lse);
      const Range lse{begin, begin + static_cast<std::uintptr_t>(std::int64_t{qt.batch} * qt.heads * qt.tokens) * 4};
      for (const auto& [x, name] : {std::pair{&qt, "q"}, std::pair{&kt, "k"}, std::pair{&vt, "v"}, std::pair{&ot, "out"}})
        if (lse.meets(range_of(*x))) fail(std::string("params->lse overlaps ") + name);
    }
    attention(qt, kt, vt, ot, a, options);
  });
}

POSENC_API posenc_status posenc_alibi_slopes(int32_t num_heads, double* out, int64_t capacity, int64_t* count) {
  return guarded(__func__, [&] {
    require(count, "count");
    *count = 0;
    // Checked before the vector is built: a huge head count is refused, not allocated.
    in_range(num_heads, 1, 1 << 20, "num_heads");
    copy_out(alibi_slopes(num_heads), out, capacity, count, "alibi slopes");
  });
}

POSENC_API posenc_status posenc_t5_bucket(int64_t relative_position, int32_t num_buckets, int32_t max_distance,
                                          int32_t bidirectional, int32_t* bucket) {
  return guarded(__func__, [&] {
    require(bucket, "bucket");
    T5BucketParams t5;
    t5.num_buckets = num_buckets;
    t5.max_distance = max_distance;
    t5.bidirectional = zero_or_one(bidirectional, "bidirectional") != 0;
    validate(t5);
    // |r| < 2^62: negating it cannot overflow.
    in_range(relative_position, -(std::int64_t{1} << 62), std::int64_t{1} << 62, "relative_position");
    *bucket = t5_bucket(relative_position, t5);
  });
}

POSENC_API posenc_status posenc_sinusoidal_rows(int32_t dim, int32_t layout, int32_t freqs, double base,
                                                const double* positions, int64_t count, float* out,
                                                int64_t capacity) {
  return guarded(__func__, [&] {
    SinusoidalParams sp;
    sp.dim = static_cast<int>(in_range(dim, 1, 1 << 20, "dim"));
    sp.layout = zero_or_one(layout, "layout (0 interleaved, 1 halves)") ? SinusoidalLayout::kHalves
                                                                          : SinusoidalLayout::kInterleaved;
    sp.freqs = zero_or_one(freqs, "freqs (0 vaswani, 1 fairseq)") ? SinusoidalFreqs::kFairseq : SinusoidalFreqs::kVaswani;
    sp.base = base;
    validate(sp);
    in_range(count, 0, std::int64_t{1} << 40, "count");
    in_range(capacity, 0, INT64_MAX, "capacity");
    if (capacity < count * dim)  // count * dim < 2^60: no overflow
      fail("out holds " + std::to_string(capacity) + " floats, count x dim = " + std::to_string(count * dim),
           POSENC_ERR_BUFFER);
    if (count == 0) return;
    require(positions, "positions");
    require(out, "out");
    for (std::int64_t i = 0; i < count; ++i)  // sinusoidal_row is accurate for |p| up to 2^31
      if (!(std::fabs(positions[i]) <= 2147483648.0))
        fail("positions[" + std::to_string(i) + "] = " + format_number(positions[i]) + " must be finite, |p| <= 2^31",
             POSENC_ERR_VALUE);
    for (std::int64_t i = 0; i < count; ++i) sinusoidal_row(sp, positions[i], out + i * dim);
  });
}

}  // extern "C"
