// cos/sin rows computed on the fly with accurate angles: rope_sincos (rope_apply.h) lane by lane,
// per Highway target (included by rope_kernels.cc, the one foreach_target unit).
// Per-target include guard, as Highway requires:
#if defined(POSENC_ROPE_SINCOS_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef POSENC_ROPE_SINCOS_INL_H_
#undef POSENC_ROPE_SINCOS_INL_H_
#else
#define POSENC_ROPE_SINCOS_INL_H_
#endif

#include <hwy/highway.h>

#include "posenc/rope_apply.h"

HWY_BEFORE_NAMESPACE();
namespace posenc {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// ---- cos/sin rows on the fly (accurate angles): rope_sincos, lane by lane ------------------
using DD = hn::ScalableTag<double>;

// cos[j], sin[j] (attention factor included, direction +1) for positions pos[j], j < half.
void CosSinRowAccurate(const float* inv_freq, const double* pos, double factor, int half, float* cos_out, float* sin_out) {
  namespace k = rope_sincos_constants;
  const DD dd;
  const hn::Rebind<float, DD> df_half;
  const int n = static_cast<int>(hn::Lanes(dd));
  int j = 0;
  for (; j + n <= half; j += n) {
    const auto angle = hn::Mul(hn::LoadU(dd, pos + j), hn::PromoteTo(dd, hn::LoadU(df_half, inv_freq + j)));
    const auto kq = hn::Round(hn::Mul(angle, hn::Set(dd, k::kTwoOverPi)));
    const auto r = hn::Sub(hn::Sub(hn::Sub(angle, hn::Mul(kq, hn::Set(dd, k::kPio2Hi))), hn::Mul(kq, hn::Set(dd, k::kPio2Mid))),
                           hn::Mul(kq, hn::Set(dd, k::kPio2Lo)));
    const auto r2 = hn::Mul(r, r);
    auto ps = hn::Set(dd, k::kS[4]);
    ps = hn::Add(hn::Mul(ps, r2), hn::Set(dd, k::kS[3]));
    ps = hn::Add(hn::Mul(ps, r2), hn::Set(dd, k::kS[2]));
    ps = hn::Add(hn::Mul(ps, r2), hn::Set(dd, k::kS[1]));
    ps = hn::Add(hn::Mul(ps, r2), hn::Set(dd, k::kS[0]));
    const auto sin_r = hn::Add(r, hn::Mul(hn::Mul(r, r2), ps));
    auto pc = hn::Set(dd, k::kC[5]);
    pc = hn::Add(hn::Mul(pc, r2), hn::Set(dd, k::kC[4]));
    pc = hn::Add(hn::Mul(pc, r2), hn::Set(dd, k::kC[3]));
    pc = hn::Add(hn::Mul(pc, r2), hn::Set(dd, k::kC[2]));
    pc = hn::Add(hn::Mul(pc, r2), hn::Set(dd, k::kC[1]));
    pc = hn::Add(hn::Mul(pc, r2), hn::Set(dd, k::kC[0]));
    const auto cos_r = hn::Add(hn::Set(dd, 1.0), hn::Mul(r2, pc));
    const auto q = hn::Sub(kq, hn::Mul(hn::Set(dd, 4.0), hn::Floor(hn::Mul(kq, hn::Set(dd, 0.25)))));
    const auto is1 = hn::Eq(q, hn::Set(dd, 1.0)), is2 = hn::Eq(q, hn::Set(dd, 2.0)), is3 = hn::Eq(q, hn::Set(dd, 3.0));
    const auto swap = hn::Or(is1, is3);
    const auto sv = hn::IfThenElse(swap, cos_r, sin_r), cv = hn::IfThenElse(swap, sin_r, cos_r);
    const auto s_out = hn::IfThenElse(hn::Or(is2, is3), hn::Neg(sv), sv);
    const auto c_out = hn::IfThenElse(hn::Or(is1, is2), hn::Neg(cv), cv);
    const auto f = hn::Set(dd, factor);
    hn::StoreU(hn::DemoteTo(df_half, hn::Mul(c_out, f)), df_half, cos_out + j);
    hn::StoreU(hn::DemoteTo(df_half, hn::Mul(s_out, f)), df_half, sin_out + j);
  }
  for (; j < half; ++j) {
    double sn, cs;
    rope_sincos(pos[j] * static_cast<double>(inv_freq[j]), &sn, &cs);
    cos_out[j] = static_cast<float>(cs * factor);
    sin_out[j] = static_cast<float>(sn * factor);
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace posenc
HWY_AFTER_NAMESPACE();

#endif  // per-target include guard
