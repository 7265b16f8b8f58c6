// posenc_torch::fused_attention: its gradients (the core's attention_backward through a
// torch::autograd::Function) equal libtorch autograd through the materialising computation
// (RoPE's plain formula, scores, bias + mask, softmax, weighted sum), in double, for every
// position scheme, causal and not, padding and GQA.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "posenc/alibi.h"
#include "posenc/error.h"
#include "posenc/rope_schedule.h"
#include "posenc/t5_bias.h"
#include "posenc_torch/fused_attention.h"

namespace posenc::torch_layer {
namespace {

// libtorch's way, differentiable in every input: [B, S, Hq, D].
torch::Tensor materialised(const FusedAttentionTensors& t, const AttentionSpec& spec) {
  const AttentionParams& p = spec.params();
  const AttentionSpec::Data& data = spec.data();
  torch::Tensor q = t.q, k = t.k, v = t.v;
  const std::int64_t B = q.size(0), H = q.size(1), S = q.size(2), T = k.size(2), D = q.size(3);
  if (p.positions == AttentionPositions::kRope) {
    q = rope_formula(q, data.q_positions, data.rope);
    k = rope_formula(k, data.k_positions, data.rope);
  }
  k = k.repeat_interleave(H / k.size(1), 1);
  v = v.repeat_interleave(H / v.size(1), 1);
  const double scale = p.scale > 0 ? p.scale : 1.0 / std::sqrt(static_cast<double>(D));
  torch::Tensor scores = torch::matmul(q, k.transpose(-1, -2)) * scale;  // [B, H, S, T]
  torch::Tensor distance;  // [B, S, T] kpos - qpos
  if (p.positions != AttentionPositions::kNone) distance = data.k_positions.unsqueeze(1) - data.q_positions.unsqueeze(2);
  if (p.positions == AttentionPositions::kAlibi) {
    const torch::Tensor d = -distance.to(torch::kDouble);  // qpos - kpos
    const torch::Tensor slopes = torch::tensor(data.alibi_slopes, torch::kDouble).view({1, H, 1, 1});
    scores = scores - slopes * (p.alibi_mode == AlibiMode::kSymmetric ? d.abs() : d).unsqueeze(1);
  }
  if (p.positions == AttentionPositions::kT5) {
    std::vector<std::int64_t> buckets;
    const torch::Tensor flat = distance.flatten().contiguous();
    for (std::int64_t x = 0; x < flat.numel(); ++x) buckets.push_back(t5_bucket(flat[x].item<std::int64_t>(), p.t5));
    const torch::Tensor index = torch::tensor(buckets, torch::kInt64);
    scores = scores + t.t5_table.to(torch::kDouble).index_select(0, index).view({B, S, T, H}).permute({0, 3, 1, 2});
  }
  const std::int64_t past = p.mask.past >= 0 ? p.mask.past : T - S;
  const torch::Tensor qi = torch::arange(S, torch::kInt64).view({S, 1}) + past, kj = torch::arange(T, torch::kInt64).view({1, T});
  torch::Tensor hidden = torch::zeros({B, 1, S, T}, torch::kBool);
  if (p.mask.causal) hidden = hidden | (kj > qi);
  if (data.key_padding.defined()) hidden = hidden | data.key_padding.eq(0).view({B, 1, 1, T});
  scores = scores.masked_fill(hidden, -std::numeric_limits<double>::infinity());
  return torch::matmul(torch::softmax(scores, -1), v).transpose(1, 2);
}

// max |a - b| / max |b|.
double relative_error(const torch::Tensor& a, const torch::Tensor& b) {
  return (a.to(torch::kDouble) - b).abs().max().item<double>() / std::max(b.abs().max().item<double>(), 1e-30);
}

TEST(TorchFusedAttentionBackward, GradientsEqualAutogradThroughTheMaterialisedSoftmax) {
  torch::manual_seed(21);
  const std::int64_t B = 2, S = 37, T = 45, Hq = 4, D = 16;
  RopeParams rp;
  rp.head_dim = static_cast<int>(D);
  const RopeSpec rope(compute_schedule(rp));
  int cases = 0;
  for (std::int64_t Hk : {Hq, Hq / 2})
    for (auto positions : {AttentionPositions::kNone, AttentionPositions::kRope, AttentionPositions::kAlibi, AttentionPositions::kT5})
      for (bool causal : {true, false})
        for (bool padded : {false, true}) {
          SCOPED_TRACE(std::string(to_string(positions)) + (causal ? " causal" : " bidirectional") + (padded ? " padded" : "") +
                       " Hk " + std::to_string(Hk));
          AttentionParams p;
          p.mask.causal = causal;
          p.positions = positions;
          p.alibi_mode = causal ? AlibiMode::kCausal : AlibiMode::kSymmetric;
          p.t5 = {8, 24, !causal};
          AttentionSpec::Data data;
          data.rope = rope;
          data.alibi_slopes = alibi_slopes(static_cast<int>(Hq));
          // Positions: a cache of T - S keys before the queries, from 3; row 1 shifted by 5.
          data.k_positions = (torch::arange(T, torch::kInt64) + 3).repeat({B, 1}) + torch::tensor({0, 5}, torch::kInt64).view({B, 1});
          data.q_positions = data.k_positions.narrow(1, T - S, S).clone();
          if (padded) {  // holes: no query loses every key
            data.key_padding = torch::ones({B, T}, torch::kBool);
            data.key_padding.index_put_({1, torch::indexing::Slice(1, torch::indexing::None, 3)}, false);
            data.key_padding.index_put_({0, torch::indexing::Slice(T - 4, torch::indexing::None)}, false);
          }
          const auto spec = std::make_shared<const AttentionSpec>(p, std::move(data));
          FusedAttentionTensors t;
          const auto f32 = torch::TensorOptions().dtype(torch::kFloat).requires_grad(true);
          t.q = torch::randn({B, Hq, S, D}, f32);
          t.k = torch::randn({B, Hk, T, D}, f32);
          t.v = torch::randn({B, Hk, T, D}, f32);
          t.t5_table = torch::randn({8, Hq}, f32);
          const torch::Tensor dout = torch::randn({B, S, Hq, D});
          const torch::Tensor out = fused_attention(t, spec);
          const std::vector<torch::Tensor> inputs = {t.q, t.k, t.v, t.t5_table};
          const auto fused = torch::autograd::grad({(out * dout).sum()}, inputs, {}, false, false, true);
          FusedAttentionTensors d = t;
          for (torch::Tensor* x : {&d.q, &d.k, &d.v, &d.t5_table}) *x = x->detach().to(torch::kDouble).requires_grad_(true);
          const torch::Tensor expected = materialised(d, *spec);
          const auto reference = torch::autograd::grad({(expected * dout.to(torch::kDouble)).sum()}, {d.q, d.k, d.v, d.t5_table},
                                                       {}, false, false, true);
          EXPECT_LE(relative_error(out.detach(), expected.detach()), 1e-5) << "out";
          const char* names[] = {"dq", "dk", "dv", "d t5_table"};
          for (int x = 0; x < 3; ++x) EXPECT_LE(relative_error(fused[x], reference[x]), 1e-5) << names[x];
          if (positions == AttentionPositions::kT5) {
            ASSERT_TRUE(fused[3].defined());
            // a bucket's sum can cancel to ~0 (softmax ignores a constant): measured against max(1, |grad|)
            EXPECT_LE((fused[3].to(torch::kDouble) - reference[3]).abs().max().item<double>() /
                          std::max(1.0, reference[3].abs().max().item<double>()),
                      1e-5)
                << names[3];
          } else {
            EXPECT_FALSE(fused[3].defined()) << "only T5 reads the table";
          }
          ++cases;
        }
  EXPECT_EQ(cases, 2 * 4 * 2 * 2);
}

TEST(TorchFusedAttentionBackward, BadInputIsAnErrorNamingIt) {
  FusedAttentionTensors t;
  t.q = torch::randn({1, 2, 4, 8}, torch::kDouble);
  t.k = t.v = torch::randn({1, 1, 4, 8}, torch::kDouble);
  AttentionParams p;
  AttentionSpec::Data data;
  const auto expect_message = [&](const std::string& fragment) {
    try {
      fused_attention(t, std::make_shared<const AttentionSpec>(p, data));
      ADD_FAILURE() << "no error";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
    }
  };
  expect_message("q must be float32, got Double");
  t.q = t.q.to(torch::kFloat);
  t.k = t.v = t.k.to(torch::kFloat);
  p.positions = AttentionPositions::kT5;
  data.q_positions = data.k_positions = torch::arange(4).view({1, 4});
  expect_message("positions 't5' need their bias input [32, 2]");
  p.t5.num_buckets = 32;
  t.t5_table = torch::zeros({32, 1});  // one column, two query heads: the kernel would read past it
  expect_message("the bias input of positions 't5' must be a floating tensor [32, 2], got Float [32, 1]");
  t.t5_table = torch::zeros({16, 2});
  expect_message("the bias input of positions 't5' must be a floating tensor [32, 2], got Float [16, 2]");
  t.t5_table = torch::Tensor();
  p.positions = AttentionPositions::kAlibi;
  data.alibi_slopes = {1.0};
  expect_message("alibi needs one slope per query head: 1 slopes, 2 heads");
  data.q_positions = data.k_positions = torch::Tensor();
  expect_message("need q_positions and k_positions");
  p.positions = AttentionPositions::kRope;
  data.q_positions = data.k_positions = torch::arange(4).view({1, 4});
  expect_message("need a RopeSpec with frequencies");
  data.k_positions = torch::arange(5).view({1, 5});
  data.rope = RopeSpec(compute_schedule([] {
    RopeParams rp;
    rp.head_dim = 8;
    return rp;
  }()));
  expect_message("k_positions must be [1, 4], got [1, 5]");
  p.positions = AttentionPositions::kNone;
  data.key_padding = torch::ones({1, 5});
  expect_message("key_padding must be [B, T] = [1, 4], got [1, 5]");
}

}  // namespace
}  // namespace posenc::torch_layer
