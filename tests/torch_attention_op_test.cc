// The posenc::attention torch operator (attention_op.h): registered with CPU and Autograd kernels,
// and RoPE's cos/sin read from the per-process tables it keeps: a decode step far out (a table
// row) and beyond the tables' reach (computed on the fly) both equal the formula in double, and
// calls that alternate between two schedules each read their own; the tables are kept for plain
// RoPE at positions the call vouches for, never grown by a remap's window or a far position.
#include <ATen/core/dispatch/Dispatcher.h>
#include <gtest/gtest.h>

#include <cmath>

#include "posenc_torch/attention_op.h"
#include "posenc_torch/rope.h"

namespace posenc::torch_layer {
namespace {

RopeSpec spec_with_theta(double theta) {
  RopeParams p;
  p.head_dim = 16;
  p.theta = theta;
  return RopeSpec(compute_schedule(p));
}

// softmax(R q . R k / sqrt(D)) v in double, every key visible (the query is the last position).
torch::Tensor reference(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v, const torch::Tensor& q_pos,
                        const torch::Tensor& k_pos, const RopeSpec& s) {
  const torch::Tensor qr = rope_formula(q.to(torch::kDouble), q_pos, s), kr = rope_formula(k.to(torch::kDouble), k_pos, s);
  const torch::Tensor scores = torch::matmul(qr, kr.transpose(-1, -2)) / std::sqrt(static_cast<double>(q.size(3)));
  return torch::matmul(torch::softmax(scores, -1), v.to(torch::kDouble));
}

TEST(TorchAttentionOp, RegisteredWithCpuAndAutogradKernels) {
  const auto op = c10::Dispatcher::singleton().findSchema({"posenc::attention", ""});
  ASSERT_TRUE(op.has_value());
  EXPECT_TRUE(op->hasKernelForDispatchKey(c10::DispatchKey::CPU));
  EXPECT_TRUE(op->hasKernelForDispatchKey(c10::DispatchKey::Autograd));
  EXPECT_EQ(op->schema().returns().size(), 2u);
}

TEST(TorchAttentionOp, DecodeFarOutEqualsTheFormulaWithTwoSchedulesInTurn) {
  torch::manual_seed(7);
  const RopeSpec specs[] = {spec_with_theta(10000.0), spec_with_theta(500000.0)};
  const torch::Tensor q = torch::randn({1, 2, 1, 16}), k = torch::randn({1, 2, 8, 16}), v = torch::randn({1, 2, 8, 16});
  // 100 000: inside the shared tables' reach (2^17 positions); 300 000: beyond it, computed per call.
  for (const std::int64_t last : {std::int64_t{100000}, std::int64_t{300000}}) {
    SCOPED_TRACE(last);
    const torch::Tensor k_pos = torch::arange(last - 7, last + 1, torch::kInt64).view({1, 8});
    const torch::Tensor q_pos = k_pos.narrow(1, 7, 1);
    torch::Tensor first[2];
    for (int round = 0; round < 2; ++round)
      for (int which = 0; which < 2; ++which) {
        const RopeSpec& s = specs[which];
        AttentionOpArgs a;
        a.q_positions = q_pos;
        a.k_positions = k_pos;
        a.positions = "rope";
        a.inv_freq = torch::tensor(at::ArrayRef<float>(s.inv_freq()), torch::kFloat);
        const torch::Tensor out = attention_op(q, k, v, a).first;
        const torch::Tensor expected = reference(q, k, v, q_pos, k_pos, s);
        EXPECT_LE((out.to(torch::kDouble) - expected).abs().max().item<double>(), 1e-5) << "theta " << which;
        if (round == 0) first[which] = out;
        if (round == 1) EXPECT_TRUE(torch::equal(out, first[which])) << "the second call reads the same rows";
      }
    EXPECT_FALSE(torch::allclose(first[0], first[1])) << "the two schedules differ this far out";
  }
}

AttentionOpArgs rope_args(const RopeSpec& s) {
  AttentionOpArgs a;
  a.positions = "rope";
  a.inv_freq = torch::tensor(at::ArrayRef<float>(s.inv_freq()), torch::kFloat);
  return a;
}

TEST(TorchAttentionOp, KeepsAFewTablesForPlainRopeAtPositionsTheCallVouchesFor) {
  const torch::Tensor q = torch::randn({1, 2, 4, 16}), k = torch::randn({1, 2, 4, 16});
  const auto call = [&](const AttentionOpArgs& a) { return attention_op(q, k, k, a).first; };
  attention_op_clear_rope_tables();
  EXPECT_EQ(attention_op_cached_rope_tables(), 0u);
  const torch::Tensor first = call(rope_args(spec_with_theta(10000.0)));
  EXPECT_EQ(attention_op_cached_rope_tables(), 1u) << "plain RoPE at positions 0..3 keeps its table";
  EXPECT_TRUE(torch::equal(call(rope_args(spec_with_theta(10000.0))), first));
  EXPECT_EQ(attention_op_cached_rope_tables(), 1u) << "the same frequencies find it again";
  AttentionOpArgs remapped = rope_args(spec_with_theta(20000.0));
  remapped.remap = "rerope";
  remapped.remap_window = 1 << 24;  // far positions up to the window: no shared table grows to it
  EXPECT_TRUE(torch::isfinite(call(remapped)).all().item<bool>());
  AttentionOpArgs far = rope_args(spec_with_theta(30000.0));
  far.q_offset = far.k_offset = 1000000;  // beyond max(2^17, 2 (S + T) + 4096)
  EXPECT_TRUE(torch::isfinite(call(far)).all().item<bool>());
  EXPECT_EQ(attention_op_cached_rope_tables(), 1u) << "neither the remap nor the far call keeps a table";
  for (int i = 0; i < 6; ++i) call(rope_args(spec_with_theta(40000.0 + i)));
  EXPECT_EQ(attention_op_cached_rope_tables(), 4u) << "at most four kept";
  attention_op_clear_rope_tables();
  EXPECT_EQ(attention_op_cached_rope_tables(), 0u);
}

}  // namespace
}  // namespace posenc::torch_layer
