// The AVX512-BF16 tile steps (layouts in attention_bf16_tiles.h). Highway 1.0.3 (Debian's) has no
// target with AVX512-BF16 and does not emit VDPBF16PS, so these are intrinsics in functions
// compiled for that extension by attribute (never by per-file flags: inline functions and
// templates of other headers instantiated here must stay baseline code for the linker to share).
//
// VDPBF16PS (Intel SDM, "VDPBF16PS"): per f32 lane i, acc[i] += a[2i] b[2i] + a[2i+1] b[2i+1]
// over bf16 pairs, products exact in f32, the sum rounded to nearest even, bf16 subnormal inputs
// read as 0 and subnormal results flushed. The register blocking follows the f32 kernel's
// (attention_tiles-inl.h): 4 query rows x 4 vectors, 16 sums in registers.
#include "attention_bf16_tiles.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "attention_plan.h"

#if POSENC_ATTENTION_BF16_X86
#include <immintrin.h>

// GCC 12's _mm512_undefined_ps (`__m512 __Y = __Y;`, behind _mm512_max_ps and others) warns
// at every inlined use: GCC bug 105593, fixed in 12.3 and 13.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

namespace posenc::attention_detail::bf16 {
namespace {

static_assert(kKeyTile == 64, "the tiles hold 64 keys: 4 vectors of 16 f32 scores, 32 key pairs");
constexpr int kKeyPairs = kKeyTile / 2;

POSENC_AVX512_BF16 inline __m512bh as_bf16(__m512i x) { return reinterpret_cast<__m512bh>(x); }

// 16 bf16 weights back to f32 (exact: bf16 is the high half of an f32).
POSENC_AVX512_BF16 inline __m512 widen(__m256i bits) {
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(bits), 16));
}

// exp(x) for x <= 0 (scores minus their row maximum), 0 below -87 (and for -inf: a masked key).
// Cephes expf (S. Moshier, cephes/single/expf.c): x = n ln2 + r with n = round(x / ln2), ln2 split
// in C1 + C2 so n C1 is exact, e^r = 1 + r + r^2 P(r) on |r| <= ln2 / 2 (relative error ~1e-7),
// then 2^n by VSCALEFPS.
POSENC_AVX512_BF16 inline __m512 exp_nonpositive(__m512 x) {
  const __mmask16 live = _mm512_cmp_ps_mask(x, _mm512_set1_ps(-87.0f), _CMP_GE_OQ);
  x = _mm512_max_ps(x, _mm512_set1_ps(-87.0f));
  const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)), _MM_FROUND_TO_NEAREST_INT);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
  __m512 p = _mm512_set1_ps(1.9875691500e-4f);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
  p = _mm512_fmadd_ps(p, _mm512_mul_ps(r, r), _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
  return _mm512_maskz_mov_ps(live, _mm512_scalef_ps(p, n));
}

// acc[r .. r+4)[x .. x + 16 NV) += P[r .. r+4) . Vp[:][x .. x + 16 NV) over the key pairs.
template <int NV>
POSENC_AVX512_BF16 void value_block(const float* Sc, const std::uint32_t* Vp, int r, int x, int key_pairs, int Dv, float* acc) {
  __m512 a[4][NV];
#pragma GCC unroll 4
  for (int i = 0; i < 4; ++i)
#pragma GCC unroll 4
    for (int n = 0; n < NV; ++n) a[i][n] = _mm512_loadu_ps(acc + (r + i) * Dv + x + 16 * n);
  std::uint32_t p[4];
  for (int c = 0; c < key_pairs; ++c) {
    __m512i v[NV];
#pragma GCC unroll 4
    for (int n = 0; n < NV; ++n) v[n] = _mm512_loadu_si512(Vp + c * Dv + x + 16 * n);
#pragma GCC unroll 4
    for (int i = 0; i < 4; ++i) {
      std::memcpy(&p[i], Sc + (r + i) * kKeyTile + c, 4);  // the bf16 pair of keys 2c, 2c + 1
      const __m512bh pi = as_bf16(_mm512_set1_epi32(static_cast<int>(p[i])));
#pragma GCC unroll 4
      for (int n = 0; n < NV; ++n) a[i][n] = _mm512_dpbf16_ps(a[i][n], pi, as_bf16(v[n]));
    }
  }
#pragma GCC unroll 4
  for (int i = 0; i < 4; ++i)
#pragma GCC unroll 4
    for (int n = 0; n < NV; ++n) _mm512_storeu_ps(acc + (r + i) * Dv + x + 16 * n, a[i][n]);
}

}  // namespace

POSENC_AVX512_BF16 void pack_row(const float* row, int D, std::uint32_t* pairs) {
  for (int x = 0; x < D; x += 32) {
    const int left = std::min(32, D - x);
    const __mmask16 lo_mask = static_cast<__mmask16>(left >= 16 ? 0xFFFF : (1u << left) - 1);
    const __mmask16 hi_mask = static_cast<__mmask16>(left >= 32 ? 0xFFFF : left <= 16 ? 0 : (1u << (left - 16)) - 1);
    const __m512 lo = _mm512_maskz_loadu_ps(lo_mask, row + x), hi = _mm512_maskz_loadu_ps(hi_mask, row + x + 16);
    const __m512i bits = reinterpret_cast<__m512i>(_mm512_cvtne2ps_pbh(hi, lo));  // lo's 16 values first
    const int whole_pairs = (left + 1) / 2;
    _mm512_mask_storeu_epi32(pairs + x / 2, static_cast<__mmask16>(whole_pairs >= 16 ? 0xFFFF : (1u << whole_pairs) - 1), bits);
  }
}

POSENC_AVX512_BF16 void pack_key_tile(const std::uint16_t* rows, std::int64_t row_stride, int cols, int pairs, std::uint32_t* Kp) {
  for (int x = 0; x < pairs; ++x) {
    std::uint32_t* out = Kp + x * kKeyTile;
    for (int c = 0; c < cols; ++c) std::memcpy(out + c, rows + c * row_stride + 2 * x, 4);
    std::fill(out + cols, out + kKeyTile, 0u);
  }
}

POSENC_AVX512_BF16 void pack_value_tile(const std::uint16_t* rows, std::int64_t row_stride, int cols, int D, std::uint32_t* Vp) {
  const int Dv = value_width(D);
  // Interleave two rows' bf16 by channel: output lane 2i from the first row's channel i, lane
  // 2i + 1 from the second's (permutex2var: index 32 + i reads the second operand).
  alignas(64) std::uint16_t first[32], second[32];
  for (int i = 0; i < 16; ++i) {
    first[2 * i] = static_cast<std::uint16_t>(i);
    first[2 * i + 1] = static_cast<std::uint16_t>(32 + i);
    second[2 * i] = static_cast<std::uint16_t>(16 + i);
    second[2 * i + 1] = static_cast<std::uint16_t>(48 + i);
  }
  const __m512i low_channels = _mm512_load_si512(first), high_channels = _mm512_load_si512(second);
  for (int c = 0; c < kKeyPairs; ++c) {
    const std::uint16_t* a = rows + 2 * c * row_stride;
    const std::uint16_t* b = a + row_stride;
    const bool has_a = 2 * c < cols, has_b = 2 * c + 1 < cols;
    std::uint32_t* out = Vp + c * Dv;
    for (int x = 0; x < Dv; x += 32) {
      const int left = std::max(0, std::min(32, D - x));
      const __mmask32 mask = left >= 32 ? 0xFFFFFFFFu : (1u << left) - 1;
      const __m512i va = has_a ? _mm512_maskz_loadu_epi16(mask, a + x) : _mm512_setzero_si512();
      const __m512i vb = has_b ? _mm512_maskz_loadu_epi16(mask, b + x) : _mm512_setzero_si512();
      _mm512_storeu_si512(out + x, _mm512_permutex2var_epi16(va, low_channels, vb));
      if (x + 16 < Dv) _mm512_storeu_si512(out + x + 16, _mm512_permutex2var_epi16(va, high_channels, vb));
    }
  }
}

POSENC_AVX512_BF16 void score_tile(const std::uint32_t* Qp, int pairs, const std::uint32_t* Kp, int rows4, float* Sc) {
  for (int r = 0; r < rows4; r += kRowBlock) {
    __m512 s[4][4];
#pragma GCC unroll 4
    for (int i = 0; i < 4; ++i)
#pragma GCC unroll 4
      for (int n = 0; n < 4; ++n) s[i][n] = _mm512_setzero_ps();
    for (int x = 0; x < pairs; ++x) {
      const std::uint32_t* kx = Kp + x * kKeyTile;
      const __m512bh k0 = as_bf16(_mm512_loadu_si512(kx)), k1 = as_bf16(_mm512_loadu_si512(kx + 16));
      const __m512bh k2 = as_bf16(_mm512_loadu_si512(kx + 32)), k3 = as_bf16(_mm512_loadu_si512(kx + 48));
#pragma GCC unroll 4
      for (int i = 0; i < 4; ++i) {
        const __m512bh q = as_bf16(_mm512_set1_epi32(static_cast<int>(Qp[(r + i) * pairs + x])));
        s[i][0] = _mm512_dpbf16_ps(s[i][0], q, k0);
        s[i][1] = _mm512_dpbf16_ps(s[i][1], q, k1);
        s[i][2] = _mm512_dpbf16_ps(s[i][2], q, k2);
        s[i][3] = _mm512_dpbf16_ps(s[i][3], q, k3);
      }
    }
#pragma GCC unroll 4
    for (int i = 0; i < 4; ++i)
#pragma GCC unroll 4
      for (int n = 0; n < 4; ++n) _mm512_storeu_ps(Sc + (r + i) * kKeyTile + 16 * n, s[i][n]);
  }
}

POSENC_AVX512_BF16 void softmax_tile(float* Sc, int rows, int rows4, float* row_max, float* row_sum, float* acc, int Dv) {
  const float neg_inf = -std::numeric_limits<float>::infinity();
  for (int r = 0; r < rows4; ++r) {
    float* s = Sc + r * kKeyTile;
    __m512 v[4];
#pragma GCC unroll 4
    for (int n = 0; n < 4; ++n) v[n] = _mm512_loadu_ps(s + 16 * n);
    const float tile_max = r < rows ? _mm512_reduce_max_ps(_mm512_max_ps(_mm512_max_ps(v[0], v[1]), _mm512_max_ps(v[2], v[3]))) : neg_inf;
    if (tile_max == neg_inf) {  // a padding row, or nothing visible in this tile for this row
      _mm512_storeu_si512(s, _mm512_setzero_si512());
      _mm512_storeu_si512(s + 16, _mm512_setzero_si512());
      continue;
    }
    const float new_max = std::max(row_max[r], tile_max);
    // Online softmax (Milakov & Gimelshein 2018; FlashAttention-2): rescale what was accumulated
    // under the old maximum (none when it stands: most rows of most tiles after the first).
    const float correction = row_max[r] == neg_inf ? 0.0f : row_max[r] == new_max ? 1.0f : std::exp(row_max[r] - new_max);
    const __m512 m = _mm512_set1_ps(new_max);
    __m512i bits[2];
    __m512 sum = _mm512_setzero_ps();
#pragma GCC unroll 2
    for (int h = 0; h < 2; ++h) {
      const __m512 w0 = exp_nonpositive(_mm512_sub_ps(v[2 * h], m)), w1 = exp_nonpositive(_mm512_sub_ps(v[2 * h + 1], m));
      bits[h] = reinterpret_cast<__m512i>(_mm512_cvtne2ps_pbh(w1, w0));
      // The sum of the weights as rounded, so the output is sum P v / sum P with one P.
      sum = _mm512_add_ps(sum, widen(_mm512_castsi512_si256(bits[h])));
      sum = _mm512_add_ps(sum, widen(_mm512_extracti64x4_epi64(bits[h], 1)));
    }
    _mm512_storeu_si512(s, bits[0]);
    _mm512_storeu_si512(s + 16, bits[1]);
    row_sum[r] = row_sum[r] * correction + _mm512_reduce_add_ps(sum);
    row_max[r] = new_max;
    if (correction != 1.0f) {
      const __m512 f = _mm512_set1_ps(correction);
      for (int x = 0; x < Dv; x += 16) _mm512_storeu_ps(acc + r * Dv + x, _mm512_mul_ps(f, _mm512_loadu_ps(acc + r * Dv + x)));
    }
  }
}

// flatten: the plan's functions inlined, so this copy of them is AVX-512 code.
POSENC_AVX512_BF16 __attribute__((flatten)) void bias_and_mask_tile(const Plan& plan, int b, int h, int i0, int rows, std::int64_t j0, int cols,
                                                                     float* Sc, std::int64_t* pos, std::vector<int>& lut) {
  if (plan.has_bias()) plan.add_bias_tile(b, h, i0, rows, j0, cols, Sc, kKeyTile, pos, lut);
  plan.mask_tile(b, i0, rows, j0, cols, Sc);
}

POSENC_AVX512_BF16 void value_tile(const float* Sc, const std::uint32_t* Vp, int rows4, int key_pairs, int Dv, float* acc) {
  for (int r = 0; r < rows4; r += kRowBlock) {
    int x = 0;
    for (; x + 64 <= Dv; x += 64) value_block<4>(Sc, Vp, r, x, key_pairs, Dv, acc);
    switch ((Dv - x) / 16) {
      case 3: value_block<3>(Sc, Vp, r, x, key_pairs, Dv, acc); break;
      case 2: value_block<2>(Sc, Vp, r, x, key_pairs, Dv, acc); break;
      case 1: value_block<1>(Sc, Vp, r, x, key_pairs, Dv, acc); break;
      default: break;
    }
  }
}

}  // namespace posenc::attention_detail::bf16

#endif  // x86 with GCC or Clang
