// The posenc::rope and posenc::rope_qk torch operators (rope_op.h): registered with CPU and
// Autograd kernels, the C++ layer's rope() running through them, their backward differentiable
// again, and their refusals.
#include <ATen/core/dispatch/Dispatcher.h>
#include <gtest/gtest.h>

#include "posenc/error.h"
#include "posenc_torch/rope.h"
#include "posenc_torch/rope_op.h"

namespace posenc::torch_layer {
namespace {

RopeSpec spec() {
  RopeParams p;
  p.head_dim = 16;
  p.type = RopeType::kYarn;
  p.factor = 4.0;
  p.original_max_position_embeddings = 64;
  return RopeSpec(compute_schedule(p));
}

TEST(TorchRopeOp, RegisteredWithCpuAndAutogradKernels) {
  for (const char* name : {"posenc::rope", "posenc::rope_qk"}) {
    SCOPED_TRACE(name);
    const auto op = c10::Dispatcher::singleton().findSchema({name, ""});
    ASSERT_TRUE(op.has_value());
    EXPECT_TRUE(op->hasKernelForDispatchKey(c10::DispatchKey::CPU));
    EXPECT_TRUE(op->hasKernelForDispatchKey(c10::DispatchKey::Autograd));
  }
}

// y = R x in float32 through the operator; d/dw of sum(R^T w . v) is R v: the backward is the
// operator again, differentiable (the plain formula in double is the reference).
TEST(TorchRopeOp, BackwardIsDifferentiableAgain) {
  const RopeSpec s = spec();
  torch::manual_seed(4);
  const torch::Tensor positions = torch::randint(0, 500, {2, 5}, torch::kInt64);
  const torch::Tensor x = torch::randn({2, 3, 5, 16}, torch::requires_grad());
  const torch::Tensor w = torch::randn({2, 3, 5, 16}, torch::requires_grad()), v = torch::randn({2, 3, 5, 16});
  const torch::Tensor y = rope(x, positions, s);
  ASSERT_NE(y.grad_fn(), nullptr);
  const torch::Tensor g = torch::autograd::grad({(y * w).sum()}, {x}, {}, true, true)[0];
  const torch::Tensor rt_w = rope_formula(w.detach().to(torch::kFloat64), positions, s, true);
  EXPECT_LT((g.to(torch::kFloat64) - rt_w).abs().max().item<double>(), 1e-5);
  const torch::Tensor gw = torch::autograd::grad({(g * v).sum()}, {w})[0];
  const torch::Tensor r_v = rope_formula(v.to(torch::kFloat64), positions, s);
  EXPECT_LT((gw.to(torch::kFloat64) - r_v).abs().max().item<double>(), 1e-5);
}

// xPos through the C++ layer (RopeSpec::with_xpos): the kernels equal the formula in double for
// queries and for keys (for_keys), rope_qk gives q the query's scale and k the key's, and the
// scores depend on the distance only.
TEST(TorchRopeOp, XPosKernelsEqualTheFormulaInEachRole) {
  const RopeSpec query = spec().with_xpos({64, 0.4, 10}), key = query.for_keys();
  torch::manual_seed(6);
  const torch::Tensor positions = torch::arange(5, 45, torch::kInt64).view({2, 20});
  const torch::Tensor q = torch::randn({2, 3, 20, 16}), k = torch::randn({2, 3, 20, 16});
  for (const RopeSpec* s : {&query, &key}) {
    const torch::Tensor fast = rope(q, positions, *s), exact = rope(q.to(torch::kFloat64), positions, *s);
    EXPECT_LT((fast.to(torch::kFloat64) - exact).abs().max().item<double>(), 2e-5);
  }
  EXPECT_GT((rope(q, positions, query) - rope(q, positions, key)).abs().max().item<double>(), 1e-2);
  const auto [qr, kr] = rope_qk(q, k, positions, query);
  EXPECT_TRUE(torch::equal(qr, rope(q, positions, query)));
  EXPECT_TRUE(torch::equal(kr, rope(k, positions, key)));
  const auto [qd, kd] = rope_qk(q.to(torch::kFloat64), k.to(torch::kFloat64), positions, query);
  const auto [qs, ks] = rope_qk(q.to(torch::kFloat64), k.to(torch::kFloat64), positions + 300, query);
  const torch::Tensor scores = torch::matmul(qd, kd.transpose(-1, -2)), shifted = torch::matmul(qs, ks.transpose(-1, -2));
  EXPECT_LT((scores - shifted).abs().max().item<double>(), 1e-9);
}

// Rows of [B, S] positions that differ rotate each batch row by its own (the shortcut for
// equal rows must not take row 0 for all).
TEST(TorchRopeOp, EachBatchRowAtItsOwnPositions) {
  const RopeSpec s = spec();
  const torch::Tensor x = torch::randn({2, 3, 5, 16});
  RopeOpArgs a;
  a.inv_freq = torch::tensor(s.inv_freq(), torch::kFloat32);
  a.attention_factor = s.params().attention_factor;
  const torch::Tensor positions = torch::tensor({3, 9, 1, 40, 7, 2, 5, 100, 0, 6}, torch::kInt64).view({2, 5});
  a.positions = positions;
  const torch::Tensor both = rope_op(x, a);
  for (int b = 0; b < 2; ++b) {
    a.positions = positions.narrow(0, b, 1).contiguous();
    EXPECT_TRUE(torch::equal(both.narrow(0, b, 1), rope_op(x.narrow(0, b, 1), a))) << b;
  }
}

// [S] positions (one row for the batch) and implicit positions with an offset are the [B, S] ones.
TEST(TorchRopeOp, PositionFormsAgree) {
  const RopeSpec s = spec();
  const torch::Tensor x = torch::randn({2, 3, 5, 16});
  RopeOpArgs a;
  a.inv_freq = torch::tensor(s.inv_freq(), torch::kFloat32);
  a.attention_factor = s.params().attention_factor;
  a.positions = (torch::arange(5, torch::kInt64) + 9).expand({2, 5}).contiguous();
  const torch::Tensor rows = rope_op(x, a);
  a.positions = torch::arange(5, torch::kInt32) + 9;
  EXPECT_TRUE(torch::equal(rope_op(x, a), rows));
  a.positions = c10::nullopt;
  a.offset = 9;
  EXPECT_TRUE(torch::equal(rope_op(x, a), rows));
}

TEST(TorchRopeOp, RefusesWhatTheKernelsCannotTake) {
  const RopeSpec s = spec();
  RopeOpArgs a;
  a.inv_freq = torch::tensor(s.inv_freq(), torch::kFloat32);
  const torch::Tensor x = torch::randn({1, 2, 3, 16});
  auto refused = [&](const torch::Tensor& t, const RopeOpArgs& args, const std::string& part) {
    try {
      rope_op(t, args);
      ADD_FAILURE() << "accepted; expected: " << part;
    } catch (const std::exception& e) {
      EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
    }
  };
  refused(x.to(torch::kFloat64), a, "float64 takes the formula");
  RopeOpArgs axial = a;
  axial.positions = torch::zeros({3, 1, 3}, torch::kInt64);
  refused(x, axial, "need axis_of_freq");
  RopeOpArgs learned = a;
  learned.inv_freq = a.inv_freq.clone().requires_grad_();
  refused(x, learned, "gives no gradient to inv_freq");
  RopeOpArgs offset = a;
  offset.offset = -1;
  refused(x, offset, "offset must be >= 0, got -1");
}

}  // namespace
}  // namespace posenc::torch_layer
