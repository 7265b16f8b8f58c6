// The error bound of bf16 dot products (posenc/attention_bf16.h), checked element by element
// against the double reference: shared by the bf16 prefill's tests (attention_bf16_test.cc) and
// decode's (attention_decode_bf16_test.cc).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "attention_plan.h"
#include "attention_test_support.h"
#include "posenc/attention.h"
#include "posenc/attention_bf16.h"

namespace posenc::attention_test {

constexpr double kU = 1.0 / 512;  // bf16's unit roundoff: 8 significant bits, round to nearest

// Restores the CPU check however a test ends.
struct Bf16Disabled {
  Bf16Disabled() { allow_attention_bf16_for_test(false); }
  ~Bf16Disabled() { allow_attention_bf16_for_test(true); }
};

struct Outcome {
  double worst_ratio = 0;  // max over elements of |out - ref| / bound
  double worst_error = 0;
  int elements = 0, empty_rows = 0;
};

// attention() (with bf16 dot products allowed) against attention_reference, each element within
// the bound of posenc/attention_bf16.h (with its terms from the reference's scores s_j, a_j and
// weights pi_j), each row's log-sum-exp within Delta + u / (1 - u) + e_f; rows that see no key
// exactly 0 and -inf. Which path the call takes is the caller's to check.
inline Outcome bf16_vs_reference(const Tensor4& q, const Tensor4& k, const Tensor4& v, const AttentionParams& p, DType out_dtype,
                          int threads) {
  const int B = q.view.batch, S = q.view.tokens, H = q.view.heads, D = q.view.head_dim, T = k.view.tokens;
  Tensor4 ref = make(DType::kF32, B, S, H, D, false, nullptr), fast = make(out_dtype, B, S, H, D, true, nullptr);
  std::vector<float> ref_lse(static_cast<std::size_t>(B) * H * S), fast_lse(ref_lse.size());
  AttentionOptions options;
  options.lse = ref_lse.data();
  attention_reference(q.view, k.view, v.view, ref.view, p, options);
  options.threads = threads;
  options.lse = fast_lse.data();
  attention(q.view, k.view, v.view, fast.view, p, options);

  const attention_detail::Plan plan = attention_detail::make_plan(q.view, k.view, v.view, ref.view, p, nullptr);
  const double eps_s = (1 + kU) * (1 + kU) * (1 + (D + 1) * 0x1p-24) - 1;
  const double e_f = (T + 2.0 * T / 64 + 16) * 0x1p-24;
  std::vector<float> qr(D), kr(D), tmp(D);
  std::vector<double> s(T), a(T);
  Outcome o;
  for (int b = 0; b < B; ++b)
    for (int h = 0; h < H; ++h)
      for (int i = 0; i < S; ++i) {
        plan.load_query(b, i, h, qr.data(), tmp.data());
        double best = -std::numeric_limits<double>::infinity(), delta = 0;
        for (int j = 0; j < T; ++j) {
          s[j] = -std::numeric_limits<double>::infinity();
          if (!plan.visible(b, plan.past + i, j)) continue;
          plan.load_key(b, j, h / plan.group, kr.data(), tmp.data());
          double dot = 0, mag = 0;
          for (int c = 0; c < D; ++c) {
            dot += double{qr[c]} * kr[c];
            mag += std::abs(double{qr[c]} * kr[c]);
          }
          s[j] = dot * plan.scale + plan.bias(b, h, i, j);
          a[j] = mag * plan.scale;
          delta = std::max(delta, eps_s * a[j] + 0x1p-22 * std::abs(s[j]));
          best = std::max(best, s[j]);
        }
        const std::size_t row_lse = (static_cast<std::size_t>(b) * H + h) * S + i;
        if (best == -std::numeric_limits<double>::infinity()) {  // sees no key
          ++o.empty_rows;
          EXPECT_EQ(fast_lse[row_lse], -std::numeric_limits<float>::infinity()) << "b " << b << " h " << h << " i " << i;
          for (int c = 0; c < D; ++c) EXPECT_EQ(at(fast.view, b, i, h, c), 0.0f);
          continue;
        }
        double total = 0;
        for (int j = 0; j < T; ++j) total += std::isinf(s[j]) ? 0.0 : std::exp(s[j] - best);
        const double factor = std::exp(2 * delta) * (1 + kU) / (1 - kU) * (1 + e_f) - 1;
        EXPECT_NEAR(fast_lse[row_lse], ref_lse[row_lse], delta + kU / (1 - kU) + e_f + 0x1p-22 * std::abs(ref_lse[row_lse]))
            << "b " << b << " h " << h << " i " << i;
        for (int c = 0; c < D; ++c) {
          double weighted = 0;  // sum_j pi_j |v_jc|
          for (int j = 0; j < T; ++j)
            if (!std::isinf(s[j])) weighted += std::exp(s[j] - best) / total * std::abs(at(v.view, b, j, h / plan.group, c));
          const double want = at(ref.view, b, i, h, c), got = at(fast.view, b, i, h, c);
          const double bound = factor * weighted + 0x1p-23 * std::abs(want) + (out_dtype == DType::kBF16 ? kU * std::abs(got) : 0.0);
          const double error = std::abs(got - want);
          EXPECT_LE(error, bound) << "b " << b << " h " << h << " i " << i << " c " << c;
          o.worst_ratio = std::max(o.worst_ratio, error / bound);
          o.worst_error = std::max(o.worst_error, error);
          ++o.elements;
        }
      }
  return o;
}

// attention() on 2 threads with the instruction forced off, with the option off, and with both
// on: the first two the same bits (the f32 kernel or decode path, which their tests check against
// the reference), the third, where the CPU has the instruction, other bits. while_off() runs
// with the instruction forced off (the caller's checks of which path is taken).
template <typename F>
void expect_f32_bits_without_the_instruction(const Tensor4& q, const Tensor4& k, const Tensor4& v, const AttentionParams& p, F&& while_off) {
  const int B = q.view.batch, S = q.view.tokens, H = q.view.heads, D = q.view.head_dim;
  Tensor4 forced = make(DType::kF32, B, S, H, D, false, nullptr), option_off = make(DType::kF32, B, S, H, D, false, nullptr),
          native = make(DType::kF32, B, S, H, D, false, nullptr);
  AttentionOptions options;
  options.threads = 2;
  {
    const Bf16Disabled no_instruction;
    EXPECT_FALSE(attention_bf16_available());
    while_off(options);
    attention(q.view, k.view, v.view, forced.view, p, options);
  }
  options.bf16_dot_products = false;
  attention(q.view, k.view, v.view, option_off.view, p, options);
  EXPECT_EQ(forced.bytes, option_off.bytes);
  if (!attention_bf16_available()) return;
  options.bf16_dot_products = true;
  attention(q.view, k.view, v.view, native.view, p, options);
  EXPECT_NE(native.bytes, option_off.bytes);
}

}  // namespace posenc::attention_test
