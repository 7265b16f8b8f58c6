// What the attention backward tests share: the masks they walk through, one forward problem
// with what its backward reads, the gradients it writes, the error measure and the
// finite-difference stencil.
#pragma once

#include <algorithm>
#include <cmath>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "posenc/attention.h"
#include "posenc/attention_backward.h"
#include "posenc/rope_schedule.h"

#include "attention_test_support.h"

namespace posenc::attention_test {

// The masks every test walks through, on top of a position scheme.
enum class MaskCase { kCausal, kBidirectional, kPadding, kSlidingWindow, kChunk, kPast };
constexpr MaskCase kMasks[] = {MaskCase::kCausal, MaskCase::kBidirectional, MaskCase::kPadding,
                               MaskCase::kSlidingWindow, MaskCase::kChunk, MaskCase::kPast};
inline const char* name(MaskCase m) {
  static const char* names[] = {"causal", "bidirectional", "padding", "sliding window", "chunk", "past"};
  return names[static_cast<int>(m)];
}

// One forward (float32) with everything its backward reads, and the gradients it writes.
struct Problem {
  Problem(int B, int S, int T, int Hq, int Hk, int D, std::mt19937& rng)
      : q(make(DType::kF32, B, S, Hq, D, false, &rng)),
        k(make(DType::kF32, B, T, Hk, D, true, &rng)),
        v(make(DType::kF32, B, T, Hk, D, false, &rng)),
        out(make(DType::kF32, B, S, Hq, D, true, nullptr)),
        dout(make(DType::kF32, B, S, Hq, D, false, &rng)),
        lse(static_cast<std::size_t>(B) * Hq * S) {}
  Tensor4 q, k, v, out, dout;
  std::vector<float> lse;
  AttentionBackwardInputs inputs() const { return {q.view, k.view, v.view, out.view, dout.view, lse.data()}; }
};

struct Gradients {
  Gradients(const Problem& pr, int table_size)
      : dq(make(DType::kF32, pr.q.view.batch, pr.q.view.tokens, pr.q.view.heads, pr.q.view.head_dim, true, nullptr)),
        dk(make(DType::kF32, pr.k.view.batch, pr.k.view.tokens, pr.k.view.heads, pr.k.view.head_dim, false, nullptr)),
        dv(make(DType::kF32, pr.k.view.batch, pr.k.view.tokens, pr.k.view.heads, pr.k.view.head_dim, true, nullptr)),
        table(static_cast<std::size_t>(table_size), 0.5f) {  // not zero: the gradient is added to it
    for (Tensor4* g : {&dq, &dk, &dv}) std::fill(g->bytes.begin(), g->bytes.end(), 0xFF);  // NaN: must be overwritten
  }
  Tensor4 dq, dk, dv;
  std::vector<float> table;
  AttentionGradients view(bool with_table) { return {dq.view, dk.view, dv.view, with_table ? table.data() : nullptr}; }
};

// Scheme and mask on a [B, S] x [B, T] problem; setup owns what the params point to.
inline AttentionParams params_for_case(AttentionPositions positions, MaskCase mask, BiasInputs& setup, const RopeSchedule& sched, int Hq,
                                int B, int S, int T, std::mt19937& rng) {
  AttentionParams p = params_for(positions, setup, Hq, B, T, rng);
  p.rope = rope_apply_params(sched, RopeLayout::kInterleaved);
  p.mask.causal = mask != MaskCase::kBidirectional;
  p.t5.bidirectional = !p.mask.causal;
  p.alibi_mode = p.mask.causal ? AlibiMode::kCausal : AlibiMode::kSymmetric;
  if (mask == MaskCase::kPadding) {
    const int left = std::min(T, std::max(1, T / 4));  // batch row 0: left padding (its first queries see nothing when S == T)
    for (int j = 0; j < left; ++j) setup.padding[j] = 0;
    for (int j = 0; j < T && B > 1; ++j) setup.padding[T + j] = j % 3 != 1;  // row 1: holes
    p.mask.key_padding = setup.padding.data();
  }
  if (mask == MaskCase::kSlidingWindow) p.mask.sliding_window = std::max(2, T / 6);
  if (mask == MaskCase::kChunk) p.mask.chunk = std::max(2, T * 2 / 5);
  if (mask == MaskCase::kPast) p.mask.past = (T - S) / 2 + 1;  // a cache longer than the queries see
  p.q_positions.offset = 7 + T - S;
  p.k_positions.offset = 7;
  return p;
}

// max |a - b| over max(|b|, 1e-30): the error relative to the gradient's scale.
inline double relative_error(const RopeTensor& a, const RopeTensor& b) {
  double worst = 0, scale = 1e-30;
  for (int n = 0; n < a.batch; ++n)
    for (int t = 0; t < a.tokens; ++t)
      for (int h = 0; h < a.heads; ++h)
        for (int c = 0; c < a.head_dim; ++c) {
          const double x = at(a, n, t, h, c), y = at(b, n, t, h, c);
          if (!(std::abs(x - y) <= worst)) worst = std::isnan(x - y) ? INFINITY : std::abs(x - y);
          scale = std::max(scale, std::abs(y));
        }
  return worst / scale;
}

// d f / d *x by a 4-point stencil (error O(e^4)); e a power of two, so x +- e is exact.
inline double numeric_derivative(float* x, const std::function<double()>& f) {
  const float saved = *x, e = 1.0f / 128;
  double value[4];
  const float steps[4] = {2 * e, e, -e, -2 * e};
  for (int s = 0; s < 4; ++s) {
    *x = saved + steps[s];
    value[s] = f();
  }
  *x = saved;
  return (-value[0] + 8 * value[1] - 8 * value[2] + value[3]) / (12.0 * e);
}

// The loss sum(dout * out) of the forward reference, in double.
inline double loss(Problem& pr, const AttentionParams& p) {
  attention_reference(pr.q.view, pr.k.view, pr.v.view, pr.out.view, p);
  const RopeTensor& o = pr.out.view;
  double sum = 0;
  for (int b = 0; b < o.batch; ++b)
    for (int i = 0; i < o.tokens; ++i)
      for (int h = 0; h < o.heads; ++h)
        for (int c = 0; c < o.head_dim; ++c) sum += static_cast<double>(at(pr.dout.view, b, i, h, c)) * at(o, b, i, h, c);
  return sum;
}

}  // namespace posenc::attention_test
