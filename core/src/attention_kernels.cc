// The one foreach_target translation unit of fused attention: compiles attention_kernels-inl.h
// for every Highway target and dispatches once per call.
#include "posenc/attention.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "attention_kernels-inl.h"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include "attention_kernels-inl.h"

#if HWY_ONCE
#include <string>

#include "attention_bf16.h"
#include "attention_decode.h"
#include "attention_packed.h"

#include "posenc/error.h"
#include "posenc/rope_kernels.h"

#ifdef _OPENMP
#include <omp.h>
#endif

namespace posenc {

HWY_EXPORT(AttentionAll);
HWY_EXPORT(AttentionTarget);

void attention(const RopeTensor& q, const RopeTensor& k, const RopeTensor& v, const RopeTensor& out,
               const AttentionParams& params, const AttentionOptions& options) {
  const int threads = kernel_threads(options.threads, "attention");
  const attention_detail::Plan plan = attention_detail::make_plan(q, k, v, out, params, options.table);
  if (std::int64_t{q.batch} * q.tokens == 0) return;
  if (attention_detail::decode_applies(q, params))
    return attention_detail::attention_decode(plan, threads, options.lse, attention_detail::decode_bf16_products(k, v, params, options));
  if (attention_detail::run_attention_bf16(plan, threads, options)) return;  // bf16 q, k, v on AVX512-BF16
  HWY_DYNAMIC_DISPATCH(AttentionAll)(plan, threads, options.lse);
}

std::int64_t attention_extra_bytes(const RopeTensor& q, const RopeTensor& k, const AttentionParams& p, const KernelOptions& options) {
  const int far_queries = p.positions == AttentionPositions::kRope ? attention_detail::Remap{p.remap, nullptr, nullptr}.far_queries() : 0;
  const auto floats = static_cast<std::int64_t>(attention_detail::tile_floats(q.head_dim, far_queries));
  const int threads = std::max(kernel_threads(options.threads, "attention"), 1);
  // The f32 kernel's tiles and packed keys (attention_packed.h; the larger of it and the bf16
  // path's, which runs instead on bf16 inputs where the CPU has the instructions).
  const std::int64_t f32_bytes = floats * static_cast<std::int64_t>(sizeof(float)) * threads +
                                 attention_detail::forward_pack_bytes(q, k);
  std::int64_t bytes = attention_detail::decode_applies(q, p) ? attention_detail::decode_extra_bytes(q, k, threads)
                                                              : std::max(f32_bytes, attention_detail::bf16_extra_bytes(q, k, p, threads));
  if (p.remap.kind == PositionRemapKind::kLeakyReRope && p.positions == AttentionPositions::kRope)  // Remap::keys, queries
    for (const auto& [x, ids] : {std::pair{&k, &p.k_positions}, std::pair{&q, &p.q_positions}})
      bytes += std::int64_t{ids->same_for_every_batch_row() ? std::min(x->batch, 1) : x->batch} * x->tokens * 2 * p.rope.num_freqs *
               static_cast<std::int64_t>(sizeof(float));
  if (p.positions != AttentionPositions::kRope || options.table) return bytes;
  const std::int64_t largest = attention_detail::table_position(q, k, p);
  if (!attention_detail::builds_own_table(q, k, largest)) return bytes;
  std::int64_t rows = 1;  // RopeTable's size: doubled until it covers the largest position
  while (rows <= largest) rows *= 2;
  return bytes + rows * 2 * std::int64_t{p.rope.num_freqs} * static_cast<std::int64_t>(sizeof(float));
}

const char* attention_kernel_target() { return hwy::TargetName(HWY_DYNAMIC_DISPATCH(AttentionTarget)()); }

}  // namespace posenc
#endif  // HWY_ONCE
