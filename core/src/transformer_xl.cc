#include "posenc/transformer_xl.h"

#include <cmath>
#include <limits>
#include <string>

#include "posenc/error.h"
#include "posenc/sinusoidal.h"

namespace posenc {

std::vector<float> xl_relative_sinusoid(int dim, int klen, int clamp_len) {
  if (klen < 1) throw Error("Transformer-XL klen must be >= 1, got " + std::to_string(klen));
  SinusoidalParams p;
  p.dim = dim;
  p.layout = SinusoidalLayout::kHalves;
  std::vector<float> out(static_cast<std::size_t>(klen) * dim);
  for (int m = 0; m < klen; ++m) {
    double distance = klen - 1 - m;
    if (clamp_len > 0 && distance > clamp_len) distance = clamp_len;
    sinusoidal_row(p, distance, out.data() + static_cast<std::size_t>(m) * dim);
  }
  return out;
}

std::vector<float> xl_rel_shift(const std::vector<float>& x, int qlen, int klen) {
  if (qlen < 1 || klen < 1 || x.size() != static_cast<std::size_t>(qlen) * klen)
    throw Error("rel_shift needs x of size qlen*klen");
  // Padded [qlen][klen+1] (zero first column), read as flat, skip the first klen+1... exactly:
  // view as [klen+1][qlen], drop row 0, view back as [qlen][klen].
  const std::size_t width = static_cast<std::size_t>(klen) + 1;
  std::vector<float> padded(static_cast<std::size_t>(qlen) * width, 0.0f);
  for (int i = 0; i < qlen; ++i)
    for (int j = 0; j < klen; ++j) padded[i * width + j + 1] = x[static_cast<std::size_t>(i) * klen + j];
  return {padded.begin() + qlen, padded.end()};
}

std::vector<float> xl_scores(const XlHeadInputs& in) {
  if (in.qlen < 1 || in.mlen < 0 || in.d < 1) throw Error("Transformer-XL scores need qlen >= 1, mlen >= 0, d >= 1");
  const int klen = in.qlen + in.mlen;
  const double scale = 1.0 / std::sqrt(static_cast<double>(in.d));
  std::vector<float> out(static_cast<std::size_t>(in.qlen) * klen, -std::numeric_limits<float>::infinity());
  for (int i = 0; i < in.qlen; ++i) {
    const float* q = in.q + static_cast<std::size_t>(i) * in.d;
    for (int j = 0; j <= i + in.mlen; ++j) {
      const int distance = in.mlen + i - j;
      const float* k = in.k + static_cast<std::size_t>(j) * in.d;
      const float* r = in.r + static_cast<std::size_t>(klen - 1 - distance) * in.d;
      double ac = 0, bd = 0;
      for (int c = 0; c < in.d; ++c) {
        ac += (static_cast<double>(q[c]) + in.u[c]) * k[c];
        bd += (static_cast<double>(q[c]) + in.v[c]) * r[c];
      }
      out[static_cast<std::size_t>(i) * klen + j] = static_cast<float>((ac + bd) * scale);
    }
  }
  return out;
}

}  // namespace posenc
