// The one foreach_target translation unit of decode attention (attention_decode.h): compiles
// attention_decode-inl.h for every Highway target and dispatches once per call.
#include "attention_decode.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "attention_decode-inl.h"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include "attention_decode-inl.h"

#if HWY_ONCE
#include <algorithm>

#include "attention_bf16_tiles.h"
#include "attention_decode_bf16.h"
#include "posenc/attention_bf16.h"

namespace posenc::attention_detail {

HWY_EXPORT(AttentionDecode);

bool decode_applies(const RopeTensor& q, const AttentionParams& p) {
  return q.tokens == 1 && !(p.positions == AttentionPositions::kRope && p.remap.kind != PositionRemapKind::kNone);
}

int decode_splits(std::int64_t sequences, std::int64_t key_tiles, int threads) {
  if (threads <= 1 || sequences <= 0) return 1;
  const std::int64_t wanted = (std::int64_t{kDecodeItemsPerThread} * threads + sequences - 1) / sequences;
  return static_cast<int>(std::max<std::int64_t>(1, std::min(wanted, key_tiles / kDecodeMinTiles)));
}

std::size_t decode_workspace_floats(int query_heads, int kv_heads, int D) {
  const std::size_t hq = static_cast<std::size_t>(query_heads), d = static_cast<std::size_t>(D);
  const std::size_t key_rows = static_cast<std::size_t>(std::max(4, kv_heads));
  const std::size_t acc = static_cast<std::size_t>(decode_bf16::value_width(D)), pairs = static_cast<std::size_t>(decode_bf16::query_words(D));
  return hq * (d + acc + pairs) + 2 * hq * kKeyTile + 2 * hq + (key_rows + 1) * d;  // two score tiles (the pipeline)
}

std::int64_t decode_extra_bytes(const RopeTensor& q, const RopeTensor& k, int threads) {
  const std::int64_t key_tiles = (std::int64_t{k.tokens} + kKeyTile - 1) / kKeyTile;
  const int splits = decode_splits(q.batch, key_tiles, threads);
  const std::int64_t partials = splits > 1 ? std::int64_t{q.batch} * splits * q.heads * (std::int64_t{q.head_dim} + 2) : 0;
  return (static_cast<std::int64_t>(decode_workspace_floats(q.heads, k.heads, q.head_dim)) * threads + partials) *
         static_cast<std::int64_t>(sizeof(float));
}

DecodeBf16 decode_bf16_products(const RopeTensor& k, const RopeTensor& v, const AttentionParams& params, const AttentionOptions& options) {
  DecodeBf16 bf16;
  if (!POSENC_ATTENTION_BF16_X86 || !options.bf16_dot_products || !attention_bf16_available()) return bf16;
  bf16.scores = k.dtype == DType::kBF16 && params.positions != AttentionPositions::kRope;
  bf16.values = v.dtype == DType::kBF16;
  return bf16;
}

void attention_decode(const Plan& plan, int threads, float* lse, DecodeBf16 bf16) {
  HWY_DYNAMIC_DISPATCH(AttentionDecode)(plan, threads, lse, bf16);
}

}  // namespace posenc::attention_detail
#endif  // HWY_ONCE
