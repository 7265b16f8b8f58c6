// The float kernels' backward pass (direction -1) against the double formula's transpose, for
// every layout (DeepSeek-V3 included), partial rotary, M-RoPE and an attention factor != 1
// (YaRN): the path a float32 model trains through. The double path alone would not catch a
// kernel bug: double tensors take the libtorch formula both ways.
#include <gtest/gtest.h>

#include "posenc/mrope.h"
#include "posenc_torch/rope.h"

namespace posenc::torch_layer {
namespace {

double max_abs(const torch::Tensor& a, const torch::Tensor& b) {
  return (a.to(torch::kFloat64) - b.to(torch::kFloat64)).abs().max().item<double>();
}

RopeSpec yarn_spec(double prf, RopeLayout layout, bool mrope) {
  RopeParams p;
  p.type = RopeType::kYarn;
  p.head_dim = 32;
  p.partial_rotary_factor = prf;
  p.factor = 4.0;
  p.original_max_position_embeddings = 64;
  const RopeSchedule schedule = compute_schedule(p);
  EXPECT_GT(schedule.attention_factor, 1.1);  // the YaRN temperature scales cos and sin
  if (!mrope) return RopeSpec(schedule, layout);
  const int half = static_cast<int>(schedule.inv_freq.size());
  return RopeSpec(schedule, layout, mrope_axis_map({half / 2, half / 4, half - half / 2 - half / 4}, false));
}

struct Case {
  RopeLayout layout;
  double prf;
  bool mrope;
};

std::vector<Case> cases() {
  std::vector<Case> out;
  for (RopeLayout layout : {RopeLayout::kHalfSplit, RopeLayout::kInterleaved, RopeLayout::kDeepSeekV3})
    for (double prf : {1.0, 0.5})
      for (bool mrope : {false, true}) out.push_back({layout, prf, mrope});
  return out;
}

torch::Tensor positions_for(bool mrope) {
  return mrope ? torch::randint(0, 3000, {3, 2, 5}, torch::kInt64) : torch::randint(0, 3000, {2, 5}, torch::kInt64);
}

TEST(TorchRopeBackward, FloatKernelGradientEqualsTheDoubleTranspose) {
  torch::manual_seed(11);
  for (const Case& c : cases()) {
    SCOPED_TRACE("layout " + std::to_string(static_cast<int>(c.layout)) + " prf " + std::to_string(c.prf) +
                 " mrope " + std::to_string(c.mrope));
    const RopeSpec spec = yarn_spec(c.prf, c.layout, c.mrope);
    const torch::Tensor positions = positions_for(c.mrope);
    const torch::Tensor x = torch::randn({2, 3, 5, 32}).requires_grad_(true);
    const torch::Tensor g = torch::randn({2, 3, 5, 32});
    const torch::Tensor y = rope(x, positions, spec);
    EXPECT_LE(max_abs(y, rope_formula(x.detach().to(torch::kFloat64), positions, spec)), 2e-6);
    y.backward(g);
    EXPECT_LE(max_abs(x.grad(), rope_formula(g.to(torch::kFloat64), positions, spec, /*transpose=*/true)), 2e-6);
  }
}

// The reference itself: its transpose satisfies <R x, y> = <x, R^T y> in double, and autograd
// through the double path agrees with finite differences (DeepSeek-V3 included).
TEST(TorchRopeBackward, DoubleTransposeIsTheAdjointAndMatchesFiniteDifferences) {
  torch::manual_seed(12);
  for (const Case& c : cases()) {
    SCOPED_TRACE("layout " + std::to_string(static_cast<int>(c.layout)) + " prf " + std::to_string(c.prf));
    const RopeSpec spec = yarn_spec(c.prf, c.layout, c.mrope);
    const torch::Tensor positions = positions_for(c.mrope);
    const torch::Tensor x = torch::randn({2, 3, 5, 32}, torch::kFloat64), y = torch::randn({2, 3, 5, 32}, torch::kFloat64);
    const double lhs = (rope_formula(x, positions, spec) * y).sum().item<double>();
    const double rhs = (x * rope_formula(y, positions, spec, true)).sum().item<double>();
    EXPECT_NEAR(lhs, rhs, 1e-10 * (1 + std::abs(lhs)));
    const torch::Tensor xr = x.clone().requires_grad_(true);
    (rope(xr, positions, spec) * y).sum().backward();
    const double eps = 1e-6;
    for (std::int64_t flat : {0, 17, 95, 200, 479}) {
      torch::NoGradGuard no_grad;
      torch::Tensor xp = x.clone(), xm = x.clone();
      xp.view(-1)[flat] += eps;
      xm.view(-1)[flat] -= eps;
      const double numeric =
          (((rope_formula(xp, positions, spec) - rope_formula(xm, positions, spec)) * y).sum() / (2 * eps)).item<double>();
      EXPECT_NEAR(xr.grad().view(-1)[flat].item<double>(), numeric, 1e-7);
    }
  }
}


// q and k at the same positions in one kernel call: the same bits as two calls, forward and
// backward, for every layout, GQA (4 query heads, 2 key heads), bf16, and a gradient that reaches
// only one of them.
TEST(TorchRopeQK, OneCallEqualsTwoForwardAndBackward) {
  RopeSchedule s;
  s.inv_freq = {1.0f, 0.25f, 0.0625f};
  s.attention_factor = 1.1;
  const torch::Tensor positions = torch::tensor({3, 9, 1, 40, 7, 2, 5, 100, 0, 6}, torch::kInt64).view({2, 5});
  for (RopeLayout layout : {RopeLayout::kHalfSplit, RopeLayout::kInterleaved, RopeLayout::kDeepSeekV3})
    for (auto dtype : {torch::kFloat32, torch::kBFloat16}) {
      SCOPED_TRACE(to_string(layout));
      const RopeSpec spec(s, layout);
      torch::manual_seed(3);
      const torch::Tensor q0 = torch::randn({2, 4, 5, 8}).to(dtype), k0 = torch::randn({2, 2, 5, 8}).to(dtype);
      const torch::Tensor wq = torch::randn({2, 4, 5, 8}).to(dtype), wk = torch::randn({2, 2, 5, 8}).to(dtype);
      for (bool use_k : {true, false}) {
        torch::Tensor q1 = q0.clone().requires_grad_(), k1 = k0.clone().requires_grad_();
        torch::Tensor q2 = q0.clone().requires_grad_(), k2 = k0.clone().requires_grad_();
        const auto [qo, ko] = rope_qk(q1, k1, positions, spec);
        const torch::Tensor qr = rope(q2, positions, spec), kr = rope(k2, positions, spec);
        EXPECT_TRUE(torch::equal(qo, qr));
        EXPECT_TRUE(torch::equal(ko, kr));
        ((qo * wq).sum() + (use_k ? (ko * wk).sum() : torch::zeros({}, dtype))).backward();
        ((qr * wq).sum() + (use_k ? (kr * wk).sum() : torch::zeros({}, dtype))).backward();
        EXPECT_TRUE(torch::equal(q1.grad(), q2.grad()));
        if (use_k) {
          EXPECT_TRUE(torch::equal(k1.grad(), k2.grad()));
        }
      }
    }
}

}  // namespace
}  // namespace posenc::torch_layer
