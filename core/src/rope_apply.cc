#include "posenc/rope_apply.h"

#include <cmath>
#include <string>
#include <vector>

#include "posenc/error.h"

namespace posenc {

RopeApplyParams rope_apply_params(const RopeSchedule& s, RopeLayout layout) {
  RopeApplyParams p;
  p.inv_freq = s.inv_freq.data();
  p.num_freqs = static_cast<int>(s.inv_freq.size());
  p.attention_factor = s.attention_factor;
  p.layout = layout;
  return p;
}

void validate(const HeadsView<float>& x, const PositionIds& pos, const RopeApplyParams& p) {
  if (!x.data || x.batch < 0 || x.tokens < 0 || x.heads < 0 || x.head_dim < 1)
    throw Error("RoPE view needs data, batch/tokens/heads >= 0 and head_dim >= 1");
  if (p.num_freqs < 1 || 2 * p.num_freqs > x.head_dim)
    throw Error("rotary dim 2*" + std::to_string(p.num_freqs) + " must be in [2, head_dim=" + std::to_string(x.head_dim) + "]");
  if (p.direction != 1 && p.direction != -1) throw Error("direction must be +1 or -1, got " + std::to_string(p.direction));
  if (pos.axes < 1 || pos.axes > 3) throw Error("position ids need 1, 2 or 3 axes, got " + std::to_string(pos.axes));
  for (int j = 0; p.axis_of_freq && j < p.num_freqs; ++j)
    if (p.axis_of_freq[j] >= pos.axes)
      throw Error("frequency " + std::to_string(j) + " reads position axis " + std::to_string(p.axis_of_freq[j]) +
                  " but the ids have " + std::to_string(pos.axes));
  const std::int64_t n = std::int64_t{x.batch} * x.tokens;
  for (int a = 0; a < pos.axes; ++a)
    for (std::int64_t i = 0; i < n; ++i) {
      const std::int64_t v = pos.ids[a * pos.axis_stride + i];
      if (v < 0 || v > kMaxPosition)
        throw Error("position id " + std::to_string(v) + " (axis " + std::to_string(a) + ", index " + std::to_string(i) +
                    ") must be in [0, 2^31-1]");
    }
}

void rope_cos_sin(double inv_freq, std::int64_t position, const RopeApplyParams& p, float* c, float* s) {
  if (p.angles == AngleMode::kHfFloat32) {
    const float angle = static_cast<float>(inv_freq) * static_cast<float>(position);
    const float factor = static_cast<float>(p.attention_factor);
    *c = std::cos(angle) * factor;
    *s = std::sin(angle) * factor * static_cast<float>(p.direction);
  } else {
    // p < 2^31 and w a float32: the double product carries ~2^-53 relative error, i.e. < 3e-7
    // radians even at p = 2^31, and cos/sin in double are then exact to float precision.
    const double angle = static_cast<double>(position) * inv_freq;
    *c = static_cast<float>(std::cos(angle) * p.attention_factor);
    *s = static_cast<float>(std::sin(angle) * p.attention_factor * p.direction);
  }
}

void rope_apply_reference(const HeadsView<float>& x, const PositionIds& pos, const RopeApplyParams& p) {
  validate(x, pos, p);
  const int half = p.num_freqs;
  std::vector<float> in(static_cast<std::size_t>(2 * half));
  for (int b = 0; b < x.batch; ++b)
    for (int t = 0; t < x.tokens; ++t)
      for (int h = 0; h < x.heads; ++h) {
        float* row = x.row(b, t, h);
        in.assign(row, row + 2 * half);
        for (int j = 0; j < half; ++j) {
          const int axis = p.axis_of_freq ? p.axis_of_freq[j] : 0;
          const std::int64_t position = pos.ids[axis * pos.axis_stride + std::int64_t{b} * x.tokens + t];
          float c, s;
          rope_cos_sin(p.inv_freq[j], position, p, &c, &s);
          const bool split = p.layout == RopeLayout::kHalfSplit;
          const float xa = split ? in[j] : in[2 * j];
          const float xb = split ? in[j + half] : in[2 * j + 1];
          const float oa = xa * c - xb * s;
          const float ob = xb * c + xa * s;
          if (p.layout == RopeLayout::kInterleaved) {
            row[2 * j] = oa;
            row[2 * j + 1] = ob;
          } else {  // half-split, and DeepSeek-V3's de-interleaved output
            row[j] = oa;
            row[j + half] = ob;
          }
        }
      }
}

}  // namespace posenc
