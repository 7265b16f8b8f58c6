// Decode's AVX512-BF16 products (layouts in attention_decode_bf16.h). Intrinsics in functions
// compiled for the extension by attribute, for the reasons attention_bf16_tiles.cc gives.
//
// VDPBF16PS (Intel SDM): per f32 lane i, acc[i] += a[2i] b[2i] + a[2i+1] b[2i+1] over bf16
// pairs, products exact in f32, sums rounded to nearest even; bf16 subnormal inputs read as 0.
// The scores use 256-bit vectors, as the f32 decode does (a Zen 4 core splits 512-bit operations
// in two, and folding four 8-lane sums takes one shuffle level fewer than 16-lane ones); the
// values use 512-bit vectors: one VPUNPCK{L,H}WD pair interleaves 32 channels of two keys.
#include "attention_decode_bf16.h"

#include <algorithm>
#include <cstring>

#include "attention_bf16_tiles.h"
#include "attention_plan.h"

#if POSENC_ATTENTION_BF16_X86
#include <immintrin.h>

namespace posenc::attention_detail::decode_bf16 {
namespace {

POSENC_AVX512_BF16 inline __m256bh as_bf16(__m256i x) { return reinterpret_cast<__m256bh>(x); }
POSENC_AVX512_BF16 inline __m512bh as_bf16(__m512i x) { return reinterpret_cast<__m512bh>(x); }

// Lanes 0..3: the sums of the 8 lanes of a, b, c and e (attention_decode_tiles-inl.h's SumOf4).
POSENC_AVX512_BF16 inline __m128 sum_of_4(__m256 a, __m256 b, __m256 c, __m256 e) {
  // Per 128-bit block: [a0+a2, b0+b2, a1+a3, b1+b3] and the same of c, e; then [a, b, c, e].
  const __m256d ab = _mm256_castps_pd(_mm256_add_ps(_mm256_unpacklo_ps(a, b), _mm256_unpackhi_ps(a, b)));
  const __m256d ce = _mm256_castps_pd(_mm256_add_ps(_mm256_unpacklo_ps(c, e), _mm256_unpackhi_ps(c, e)));
  const __m256 sums = _mm256_add_ps(_mm256_castpd_ps(_mm256_unpacklo_pd(ab, ce)), _mm256_castpd_ps(_mm256_unpackhi_pd(ab, ce)));
  return _mm_add_ps(_mm256_castps256_ps128(sums), _mm256_extractf128_ps(sums, 1));
}

// The 16 bf16 channels of a key row at x (fewer at the row's end: zeros past D, never read).
POSENC_AVX512_BF16 inline __m256bh load_key(const std::uint16_t* row, int x, int D) {
  const int left = D - x;
  return as_bf16(left >= 16 ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + x))
                            : _mm256_maskz_loadu_epi16(static_cast<__mmask16>((1u << left) - 1), row + x));
}
POSENC_AVX512_BF16 inline __m256bh load_query(const std::uint32_t* q, int x) {
  return as_bf16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(q + x / 2)));
}

// Lanes 0..3: q[i] . k[i], four independent (query row, key row) products.
POSENC_AVX512_BF16 inline __m128 dot4(const std::uint32_t* const* q, const std::uint16_t* const* k, int D) {
  __m256 s[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
  for (int x = 0; x < D; x += 16)
#pragma GCC unroll 4
    for (int i = 0; i < 4; ++i) s[i] = _mm256_dpbf16_ps(s[i], load_query(q[i], x), load_key(k[i], x, D));
  return sum_of_4(s[0], s[1], s[2], s[3]);
}

// column[i kKeyTile] = q[i] . k[i] for i < n (n <= 4; the products past n repeat the first).
POSENC_AVX512_BF16 inline void dots_down_column(const std::uint32_t** q, const std::uint16_t** k, int n, int D, float* column) {
  for (int i = n; i < 4; ++i) {
    q[i] = q[0];
    k[i] = k[0];
  }
  alignas(16) float four[4];
  _mm_store_ps(four, dot4(q, k, D));
  for (int i = 0; i < n; ++i) column[i * kKeyTile] = four[i];
}

// column[r kKeyTile + c] for 4 query rows x 4 keys: each key vector loaded once for the 4 rows
// and each query vector once for the 4 keys (16 sums in registers).
POSENC_AVX512_BF16 inline void rows4_keys4(const std::uint32_t* Qp, int words, int D, const std::uint16_t* const* keys, float* column) {
  __m256 s[4][4];
#pragma GCC unroll 4
  for (int r = 0; r < 4; ++r)
#pragma GCC unroll 4
    for (int c = 0; c < 4; ++c) s[r][c] = _mm256_setzero_ps();
  for (int x = 0; x < D; x += 16) {
    const __m256bh k0 = load_key(keys[0], x, D), k1 = load_key(keys[1], x, D), k2 = load_key(keys[2], x, D), k3 = load_key(keys[3], x, D);
#pragma GCC unroll 4
    for (int r = 0; r < 4; ++r) {
      const __m256bh q = load_query(Qp + r * words, x);
      s[r][0] = _mm256_dpbf16_ps(s[r][0], q, k0);
      s[r][1] = _mm256_dpbf16_ps(s[r][1], q, k1);
      s[r][2] = _mm256_dpbf16_ps(s[r][2], q, k2);
      s[r][3] = _mm256_dpbf16_ps(s[r][3], q, k3);
    }
  }
#pragma GCC unroll 4
  for (int r = 0; r < 4; ++r) _mm_storeu_ps(column + r * kKeyTile, sum_of_4(s[r][0], s[r][1], s[r][2], s[r][3]));
}

// The 32 channels of a value row at x, zeros past D (and for the missing partner of an odd key).
POSENC_AVX512_BF16 inline __m512i load_values(const std::uint16_t* row, int x, int D) {
  const int left = D - x;
  return left >= 32 ? _mm512_loadu_si512(row + x) : _mm512_maskz_loadu_epi16((__mmask32{1} << left) - 1, row + x);
}

// acc[r][x .. x + 32 kBlocks) += P[r] . V_r over the keys, r < kRows, in pair order: per pair of
// keys, each 32-channel block of their rows interleaved (low and high halves of each 128-bit
// lane) and dotted with the rows' bf16 weight pairs. V_r = V (kOwn false: a kv head's group) or
// V + r hs (kOwn: each row its own kv head, groups of 1).
template <int kRows, int kBlocks, bool kOwn>
POSENC_AVX512_BF16 void value_block(const std::uint32_t (*pairs)[kKeyTile / 2], const std::uint16_t* V, std::int64_t ld, std::int64_t hs, int cols,
                                    int D, int x, int width, float* acc) {
  constexpr int kSources = kOwn ? kRows : 1;
  __m512 a[kRows][2 * kBlocks];
#pragma GCC unroll 4
  for (int r = 0; r < kRows; ++r)
#pragma GCC unroll 4
    for (int n = 0; n < 2 * kBlocks; ++n) a[r][n] = _mm512_loadu_ps(acc + r * width + x + 16 * n);
  for (int c = 0; 2 * c < cols; ++c)
#pragma GCC unroll 4
    for (int g = 0; g < kSources; ++g) {
      const std::uint16_t* v0 = V + g * hs + 2 * c * ld;
      __m512i lo[kBlocks], hi[kBlocks];
#pragma GCC unroll 2
      for (int b = 0; b < kBlocks; ++b) {
        const __m512i first = load_values(v0, x + 32 * b, D);
        const __m512i second = 2 * c + 1 < cols ? load_values(v0 + ld, x + 32 * b, D) : _mm512_setzero_si512();
        lo[b] = _mm512_unpacklo_epi16(first, second);
        hi[b] = _mm512_unpackhi_epi16(first, second);
      }
#pragma GCC unroll 4
      for (int r = kOwn ? g : 0; r < (kOwn ? g + 1 : kRows); ++r) {
        const __m512bh p = as_bf16(_mm512_set1_epi32(static_cast<int>(pairs[r][c])));
#pragma GCC unroll 2
        for (int b = 0; b < kBlocks; ++b) {
          a[r][2 * b] = _mm512_dpbf16_ps(a[r][2 * b], p, as_bf16(lo[b]));
          a[r][2 * b + 1] = _mm512_dpbf16_ps(a[r][2 * b + 1], p, as_bf16(hi[b]));
        }
      }
    }
#pragma GCC unroll 4
  for (int r = 0; r < kRows; ++r)
#pragma GCC unroll 4
    for (int n = 0; n < 2 * kBlocks; ++n) _mm512_storeu_ps(acc + r * width + x + 16 * n, a[r][n]);
}

// acc[r][:] += P[r] . V_r for r < kRows (V_r as value_block's): the rows' weights rounded to bf16
// pairs of keys, then the channels 64 at a time (4 rows x 4 vectors of sums in registers), then
// a last 32.
template <int kRows, bool kOwn>
POSENC_AVX512_BF16 void value_rows(const float* P, const std::uint16_t* V, std::int64_t ld, std::int64_t hs, int cols, int D, float* acc) {
  alignas(64) std::uint32_t pairs[kRows][kKeyTile / 2];
  for (int r = 0; r < kRows; ++r)
    for (int h = 0; h < kKeyTile; h += 32) {
      const float* p = P + r * kKeyTile + h;  // lanes of the second operand first: keys h .. h + 15
      const __m512bh bits = _mm512_cvtne2ps_pbh(_mm512_loadu_ps(p + 16), _mm512_loadu_ps(p));
      _mm512_store_si512(pairs[r] + h / 2, reinterpret_cast<__m512i>(bits));
    }
  const int width = value_width(D);
  int x = 0;
  for (; x + 64 <= width; x += 64) value_block<kRows, 2, kOwn>(pairs, V, ld, hs, cols, D, x, width, acc);
  if (x < width) value_block<kRows, 1, kOwn>(pairs, V, ld, hs, cols, D, x, width, acc);
}

// column[r kKeyTile + c] = Qp[r] . keys[c] for r < rows and c < count (count 4 or 1): the keys'
// rows of one kv head against its `rows` query heads.
POSENC_AVX512_BF16 inline void score_head_keys(const std::uint32_t* Qp, int rows, int D, const std::uint16_t* const* keys, int count, float* column) {
  const int words = query_words(D);
  int r = 0;
  if (count == 4) {
    for (; r + 4 <= rows; r += 4) rows4_keys4(Qp + r * words, words, D, keys, column + r * kKeyTile);
    for (; r < rows; ++r) {  // one query row against the 4 keys
      const std::uint32_t* q[4] = {Qp + r * words, Qp + r * words, Qp + r * words, Qp + r * words};
      _mm_storeu_ps(column + r * kKeyTile, dot4(q, keys, D));
    }
    return;
  }
  for (; r < rows; r += 4) {  // one key against up to 4 query rows
    const std::uint32_t* q[4];
    const std::uint16_t* k[4];
    const int n = std::min(4, rows - r);
    for (int i = 0; i < n; ++i) {
      q[i] = Qp + (r + i) * words;
      k[i] = keys[0];
    }
    dots_down_column(q, k, n, D, column + r * kKeyTile);
  }
}

}  // namespace

POSENC_AVX512_BF16 void score_keys(const std::uint32_t* Qp, int Hk, int G, int D, const std::uint16_t* key, std::int64_t token_stride,
                                   std::int64_t head_stride, int count, float* column) {
  const int words = query_words(D);
  for (int hk = 0; hk < Hk; ++hk) {
    const std::uint16_t* keys[4];
    for (int c = 0; c < count; ++c) keys[c] = key + c * token_stride + hk * head_stride;
    score_head_keys(Qp + hk * G * words, G, D, keys, count, column + hk * G * kKeyTile);
  }
}

POSENC_AVX512_BF16 void score_key_heads(const std::uint32_t* Qp, int Hq, int G, int D, const std::uint16_t* key, std::int64_t head_stride,
                                        float* column) {
  const int words = query_words(D);
  for (int h = 0; h < Hq; h += 4) {
    const std::uint32_t* q[4];
    const std::uint16_t* k[4];
    const int n = std::min(4, Hq - h);
    for (int i = 0; i < n; ++i) {
      q[i] = Qp + (h + i) * words;
      k[i] = key + (h + i) / G * head_stride;
    }
    dots_down_column(q, k, n, D, column + h * kKeyTile);
  }
}

POSENC_AVX512_BF16 void accumulate_rows(const float* P, const std::uint16_t* V, std::int64_t ld, int rows, int cols, int D, float* acc) {
  const int width = value_width(D);
  int r = 0;
  for (; r + 4 <= rows; r += 4) value_rows<4, false>(P + r * kKeyTile, V, ld, 0, cols, D, acc + r * width);
  for (; r + 2 <= rows; r += 2) value_rows<2, false>(P + r * kKeyTile, V, ld, 0, cols, D, acc + r * width);
  for (; r < rows; ++r) value_rows<1, false>(P + r * kKeyTile, V, ld, 0, cols, D, acc + r * width);
}

POSENC_AVX512_BF16 void accumulate_heads(const float* P, const std::uint16_t* V, std::int64_t ld, std::int64_t head_stride, int heads, int cols,
                                         int D, float* acc) {
  const int width = value_width(D);
  int h = 0;
  for (; h + 4 <= heads; h += 4) value_rows<4, true>(P + h * kKeyTile, V + h * head_stride, ld, head_stride, cols, D, acc + h * width);
  for (; h < heads; ++h) value_rows<1, false>(P + h * kKeyTile, V + h * head_stride, ld, 0, cols, D, acc + h * width);
}

void unpermute_rows(float* acc, int rows, int D) {
  const int width = value_width(D);
  float block[32];
  for (int r = 0; r < rows; ++r)
    for (int x = 0; x < D; x += 32) {
      std::memcpy(block, acc + r * width + x, sizeof block);
      // Channel 8L + i of the block: lane 4L + i of the low interleave (i < 4), else lane
      // 4L + i - 4 of the high one, 16 floats on.
      for (int n = 0; n < std::min(32, D - x); ++n) acc[r * D + x + n] = block[(n % 8 < 4 ? 0 : 16) + n / 8 * 4 + n % 4];
    }
}

}  // namespace posenc::attention_detail::decode_bf16

#endif  // x86 with GCC or Clang
