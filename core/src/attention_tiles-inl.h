// The register-blocked tile products that the forward (attention_kernels-inl.h) and the
// backward (attention_backward_kernels-inl.h) share, compiled per Highway target inside each of
// their foreach_target units (static: each unit keeps its own copy).
#if defined(POSENC_ATTENTION_TILES_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef POSENC_ATTENTION_TILES_INL_H_
#undef POSENC_ATTENTION_TILES_INL_H_
#else
#define POSENC_ATTENTION_TILES_INL_H_
#endif

#include <hwy/highway.h>

#include "attention_plan.h"

HWY_BEFORE_NAMESPACE();
namespace posenc {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

using DA = hn::ScalableTag<float>;

using attention_detail::kRowBlock;

// S[r][c] = sum_x Q[r][x] Kt[x][c] for r < rows4 (a multiple of 4), c < kKeyTile: Q [rows4][D],
// Kt [D][kKeyTile], S [rows4][kKeyTile]. The forward's scores; the backward's scores and dP = dO V^T.
static HWY_NOINLINE void ScoreTile(const float* HWY_RESTRICT Q, const float* HWY_RESTRICT Kt, int rows4, int D, float* HWY_RESTRICT S) {
  const DA d;
  const int N = static_cast<int>(hn::Lanes(d));
  for (int r = 0; r < rows4; r += kRowBlock) {
    int c = 0;
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX3
    // 32 vector registers: 4 rows x 4 vectors of keys, 16 accumulators; per channel 4 loads and 4
    // broadcasts for 16 FMAs (the 2-vector block's 2 + 4 for 8 left the FMA units waiting on loads).
    for (; c + 4 * N <= attention_detail::kKeyTile; c += 4 * N) {
      auto s00 = hn::Zero(d), s01 = hn::Zero(d), s02 = hn::Zero(d), s03 = hn::Zero(d);
      auto s10 = hn::Zero(d), s11 = hn::Zero(d), s12 = hn::Zero(d), s13 = hn::Zero(d);
      auto s20 = hn::Zero(d), s21 = hn::Zero(d), s22 = hn::Zero(d), s23 = hn::Zero(d);
      auto s30 = hn::Zero(d), s31 = hn::Zero(d), s32 = hn::Zero(d), s33 = hn::Zero(d);
      for (int x = 0; x < D; ++x) {
        const float* kx = Kt + x * attention_detail::kKeyTile + c;
        const auto k0 = hn::LoadU(d, kx), k1 = hn::LoadU(d, kx + N), k2 = hn::LoadU(d, kx + 2 * N), k3 = hn::LoadU(d, kx + 3 * N);
        auto q = hn::Set(d, Q[(r + 0) * D + x]);
        s00 = hn::MulAdd(q, k0, s00), s01 = hn::MulAdd(q, k1, s01), s02 = hn::MulAdd(q, k2, s02), s03 = hn::MulAdd(q, k3, s03);
        q = hn::Set(d, Q[(r + 1) * D + x]);
        s10 = hn::MulAdd(q, k0, s10), s11 = hn::MulAdd(q, k1, s11), s12 = hn::MulAdd(q, k2, s12), s13 = hn::MulAdd(q, k3, s13);
        q = hn::Set(d, Q[(r + 2) * D + x]);
        s20 = hn::MulAdd(q, k0, s20), s21 = hn::MulAdd(q, k1, s21), s22 = hn::MulAdd(q, k2, s22), s23 = hn::MulAdd(q, k3, s23);
        q = hn::Set(d, Q[(r + 3) * D + x]);
        s30 = hn::MulAdd(q, k0, s30), s31 = hn::MulAdd(q, k1, s31), s32 = hn::MulAdd(q, k2, s32), s33 = hn::MulAdd(q, k3, s33);
      }
      float* row = S + r * attention_detail::kKeyTile + c;
      constexpr int L = attention_detail::kKeyTile;
      hn::StoreU(s00, d, row), hn::StoreU(s01, d, row + N), hn::StoreU(s02, d, row + 2 * N), hn::StoreU(s03, d, row + 3 * N);
      hn::StoreU(s10, d, row + L), hn::StoreU(s11, d, row + L + N), hn::StoreU(s12, d, row + L + 2 * N), hn::StoreU(s13, d, row + L + 3 * N);
      row += 2 * L;
      hn::StoreU(s20, d, row), hn::StoreU(s21, d, row + N), hn::StoreU(s22, d, row + 2 * N), hn::StoreU(s23, d, row + 3 * N);
      hn::StoreU(s30, d, row + L), hn::StoreU(s31, d, row + L + N), hn::StoreU(s32, d, row + L + 2 * N), hn::StoreU(s33, d, row + L + 3 * N);
    }
#endif
    for (; c + 2 * N <= attention_detail::kKeyTile; c += 2 * N) {
      auto s00 = hn::Zero(d), s01 = hn::Zero(d), s10 = hn::Zero(d), s11 = hn::Zero(d);
      auto s20 = hn::Zero(d), s21 = hn::Zero(d), s30 = hn::Zero(d), s31 = hn::Zero(d);
      for (int x = 0; x < D; ++x) {
        const float* kx = Kt + x * attention_detail::kKeyTile + c;
        const auto k0 = hn::LoadU(d, kx), k1 = hn::LoadU(d, kx + N);
        const auto q0 = hn::Set(d, Q[(r + 0) * D + x]), q1 = hn::Set(d, Q[(r + 1) * D + x]);
        const auto q2 = hn::Set(d, Q[(r + 2) * D + x]), q3 = hn::Set(d, Q[(r + 3) * D + x]);
        s00 = hn::MulAdd(q0, k0, s00);
        s01 = hn::MulAdd(q0, k1, s01);
        s10 = hn::MulAdd(q1, k0, s10);
        s11 = hn::MulAdd(q1, k1, s11);
        s20 = hn::MulAdd(q2, k0, s20);
        s21 = hn::MulAdd(q2, k1, s21);
        s30 = hn::MulAdd(q3, k0, s30);
        s31 = hn::MulAdd(q3, k1, s31);
      }
      float* row = S + r * attention_detail::kKeyTile + c;
      hn::StoreU(s00, d, row);
      hn::StoreU(s01, d, row + N);
      hn::StoreU(s10, d, row + attention_detail::kKeyTile);
      hn::StoreU(s11, d, row + attention_detail::kKeyTile + N);
      hn::StoreU(s20, d, row + 2 * attention_detail::kKeyTile);
      hn::StoreU(s21, d, row + 2 * attention_detail::kKeyTile + N);
      hn::StoreU(s30, d, row + 3 * attention_detail::kKeyTile);
      hn::StoreU(s31, d, row + 3 * attention_detail::kKeyTile + N);
    }
    for (; c < attention_detail::kKeyTile; ++c)  // key tiles narrower than 2 vectors (scalar target)
      for (int rr = r; rr < r + kRowBlock; ++rr) {
        float sum = 0;
        for (int x = 0; x < D; ++x) sum += Q[rr * D + x] * Kt[x * attention_detail::kKeyTile + c];
        S[rr * attention_detail::kKeyTile + c] = sum;
      }
  }
}

// acc[r][:] += sum_c P(r, c) * V[c][:] for r < rows4, c < cols, with P(r, c) = P[r * ldp + c *
// step]: V [cols][D], acc [rows4][D]. The forward's P is [queries][kKeyTile] (ldp kKeyTile, step
// 1); the backward's dV += P^T dO and dK += dS^T Q read its [queries][kKeyTile] tiles transposed
// in place (ldp 1, step kKeyTile): the broadcasts of one step are 4 neighbouring floats.
static HWY_NOINLINE void AccumulateTile(const float* HWY_RESTRICT P, int ldp, const float* HWY_RESTRICT V, int rows4, int cols, int D,
                                        float* HWY_RESTRICT acc, int step = 1) {
  const DA d;
  const int N = static_cast<int>(hn::Lanes(d));
  for (int r = 0; r < rows4; r += kRowBlock) {
    int x = 0;
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX3
    // 4 rows x 4 vectors of channels, as ScoreTile's wide block: 4 loads and 4 broadcasts for 16 FMAs.
    for (; x + 4 * N <= D; x += 4 * N) {
      float* a = acc + r * D + x;
      auto a00 = hn::LoadU(d, a), a01 = hn::LoadU(d, a + N), a02 = hn::LoadU(d, a + 2 * N), a03 = hn::LoadU(d, a + 3 * N);
      auto a10 = hn::LoadU(d, a + D), a11 = hn::LoadU(d, a + D + N), a12 = hn::LoadU(d, a + D + 2 * N), a13 = hn::LoadU(d, a + D + 3 * N);
      float* a2 = a + 2 * D;
      float* a3 = a + 3 * D;
      auto a20 = hn::LoadU(d, a2), a21 = hn::LoadU(d, a2 + N), a22 = hn::LoadU(d, a2 + 2 * N), a23 = hn::LoadU(d, a2 + 3 * N);
      auto a30 = hn::LoadU(d, a3), a31 = hn::LoadU(d, a3 + N), a32 = hn::LoadU(d, a3 + 2 * N), a33 = hn::LoadU(d, a3 + 3 * N);
      for (int c = 0; c < cols; ++c) {
        const float* vc = V + c * D + x;
        const auto v0 = hn::LoadU(d, vc), v1 = hn::LoadU(d, vc + N), v2 = hn::LoadU(d, vc + 2 * N), v3 = hn::LoadU(d, vc + 3 * N);
        const float* pc = P + r * ldp + c * step;
        auto p = hn::Set(d, pc[0]);
        a00 = hn::MulAdd(p, v0, a00), a01 = hn::MulAdd(p, v1, a01), a02 = hn::MulAdd(p, v2, a02), a03 = hn::MulAdd(p, v3, a03);
        p = hn::Set(d, pc[ldp]);
        a10 = hn::MulAdd(p, v0, a10), a11 = hn::MulAdd(p, v1, a11), a12 = hn::MulAdd(p, v2, a12), a13 = hn::MulAdd(p, v3, a13);
        p = hn::Set(d, pc[2 * ldp]);
        a20 = hn::MulAdd(p, v0, a20), a21 = hn::MulAdd(p, v1, a21), a22 = hn::MulAdd(p, v2, a22), a23 = hn::MulAdd(p, v3, a23);
        p = hn::Set(d, pc[3 * ldp]);
        a30 = hn::MulAdd(p, v0, a30), a31 = hn::MulAdd(p, v1, a31), a32 = hn::MulAdd(p, v2, a32), a33 = hn::MulAdd(p, v3, a33);
      }
      hn::StoreU(a00, d, a), hn::StoreU(a01, d, a + N), hn::StoreU(a02, d, a + 2 * N), hn::StoreU(a03, d, a + 3 * N);
      hn::StoreU(a10, d, a + D), hn::StoreU(a11, d, a + D + N), hn::StoreU(a12, d, a + D + 2 * N), hn::StoreU(a13, d, a + D + 3 * N);
      hn::StoreU(a20, d, a2), hn::StoreU(a21, d, a2 + N), hn::StoreU(a22, d, a2 + 2 * N), hn::StoreU(a23, d, a2 + 3 * N);
      hn::StoreU(a30, d, a3), hn::StoreU(a31, d, a3 + N), hn::StoreU(a32, d, a3 + 2 * N), hn::StoreU(a33, d, a3 + 3 * N);
    }
#endif
    for (; x + 2 * N <= D; x += 2 * N) {
      float* a = acc + r * D + x;
      auto a00 = hn::LoadU(d, a), a01 = hn::LoadU(d, a + N), a10 = hn::LoadU(d, a + D), a11 = hn::LoadU(d, a + D + N);
      auto a20 = hn::LoadU(d, a + 2 * D), a21 = hn::LoadU(d, a + 2 * D + N);
      auto a30 = hn::LoadU(d, a + 3 * D), a31 = hn::LoadU(d, a + 3 * D + N);
      for (int c = 0; c < cols; ++c) {
        const auto v0 = hn::LoadU(d, V + c * D + x), v1 = hn::LoadU(d, V + c * D + x + N);
        const float* pc = P + r * ldp + c * step;
        const auto p0 = hn::Set(d, pc[0]), p1 = hn::Set(d, pc[ldp]);
        const auto p2 = hn::Set(d, pc[2 * ldp]), p3 = hn::Set(d, pc[3 * ldp]);
        a00 = hn::MulAdd(p0, v0, a00);
        a01 = hn::MulAdd(p0, v1, a01);
        a10 = hn::MulAdd(p1, v0, a10);
        a11 = hn::MulAdd(p1, v1, a11);
        a20 = hn::MulAdd(p2, v0, a20);
        a21 = hn::MulAdd(p2, v1, a21);
        a30 = hn::MulAdd(p3, v0, a30);
        a31 = hn::MulAdd(p3, v1, a31);
      }
      hn::StoreU(a00, d, a);
      hn::StoreU(a01, d, a + N);
      hn::StoreU(a10, d, a + D);
      hn::StoreU(a11, d, a + D + N);
      hn::StoreU(a20, d, a + 2 * D);
      hn::StoreU(a21, d, a + 2 * D + N);
      hn::StoreU(a30, d, a + 3 * D);
      hn::StoreU(a31, d, a + 3 * D + N);
    }
    for (; x < D; ++x)  // channels past the last pair of vectors
      for (int rr = r; rr < r + kRowBlock; ++rr) {
        float sum = acc[rr * D + x];
        for (int c = 0; c < cols; ++c) sum += P[rr * ldp + c * step] * V[c * D + x];
        acc[rr * D + x] = sum;
      }
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace posenc
HWY_AFTER_NAMESPACE();

#endif  // per-target include guard
