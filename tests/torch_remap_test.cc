// RoPE's distance remaps (Self-Extend, ReRoPE, leaky ReRoPE: core attention.h's PositionRemap) in
// the libtorch layer: fused_attention with a remap equals an explicit materialising reference at
// the remapped distances in double, and TransformerLM's inference with a remap decodes with a KV
// cache to its own prefill, with the gradients of that reference, refusing every path the remap
// cannot take.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <limits>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "posenc/error.h"
#include "posenc/rope_schedule.h"
#include "posenc_torch/fused_attention.h"
#include "torch_support.h"

namespace posenc::torch_layer {
namespace {

// The remap by its definition, in double: every (query, key) distance from the core's
// remapped_distance(), and q rotated by it against k unrotated ((R(a) q).(R(b) k) = (R(a - b) q).k
// for RoPE's half-split rotations, attention factor 1), causal softmax, weighted sum:
// [B, S, Hq, D]. Memory [B, Hq, S, T, D] doubles: for test sizes only.
torch::Tensor remapped_reference(const torch::Tensor& q32, const torch::Tensor& k32, const torch::Tensor& v32, const AttentionSpec& spec) {
  const AttentionParams& p = spec.params();
  const torch::Tensor q = q32.to(torch::kDouble), k = k32.to(torch::kDouble), v = v32.to(torch::kDouble);
  const std::int64_t B = q.size(0), H = q.size(1), S = q.size(2), T = k.size(2), D = q.size(3), half = D / 2;
  const torch::Tensor qpos = spec.data().q_positions.expand({B, S}).contiguous(), kpos = spec.data().k_positions.expand({B, T}).contiguous();
  torch::Tensor distance = torch::empty({B, 1, S, T, 1}, torch::kDouble);
  auto d = distance.accessor<double, 5>();
  auto qa = qpos.accessor<std::int64_t, 2>(), ka = kpos.accessor<std::int64_t, 2>();
  for (std::int64_t b = 0; b < B; ++b)
    for (std::int64_t i = 0; i < S; ++i)
      for (std::int64_t j = 0; j < T; ++j) d[b][0][i][j][0] = remapped_distance(p.remap, qa[b][i], ka[b][j]);
  const std::vector<float>& inv = spec.data().rope.inv_freq();
  const torch::Tensor freq = torch::tensor(std::vector<double>(inv.begin(), inv.end()), torch::kDouble);
  const torch::Tensor angle = distance * freq, cos = angle.cos(), sin = angle.sin();  // [B, 1, S, T, D/2]
  const torch::Tensor q1 = q.narrow(3, 0, half).unsqueeze(3), q2 = q.narrow(3, half, half).unsqueeze(3);  // [B, H, S, 1, D/2]
  const torch::Tensor kk = k.repeat_interleave(H / k.size(1), 1).unsqueeze(2);                            // [B, H, 1, T, D]
  const torch::Tensor k1 = kk.narrow(4, 0, half), k2 = kk.narrow(4, half, half);
  const double scale = p.scale > 0 ? p.scale : 1.0 / std::sqrt(static_cast<double>(D));
  torch::Tensor scores = ((q1 * cos - q2 * sin) * k1 + (q2 * cos + q1 * sin) * k2).sum(-1) * scale;  // [B, H, S, T]
  const std::int64_t past = p.mask.past >= 0 ? p.mask.past : T - S;
  const torch::Tensor qi = torch::arange(S, torch::kInt64).view({S, 1}) + past, kj = torch::arange(T, torch::kInt64).view({1, T});
  if (p.mask.causal) scores = scores.masked_fill(kj > qi, -std::numeric_limits<double>::infinity());
  return torch::matmul(torch::softmax(scores, -1), v.repeat_interleave(H / v.size(1), 1)).transpose(1, 2);
}

double relative_error(const torch::Tensor& a, const torch::Tensor& b) {
  return (a.to(torch::kDouble) - b).abs().max().item<double>() / std::max(b.abs().max().item<double>(), 1e-30);
}

std::vector<std::pair<std::string, PositionRemap>> remaps() {
  return {{"self-extend G3 w8", {PositionRemapKind::kSelfExtend, 8, 3, 0}},
          {"rerope w8", {PositionRemapKind::kReRope, 8, 1, 0}},
          {"leaky-rerope w8 k2.5", {PositionRemapKind::kLeakyReRope, 8, 1, 2.5}}};
}

TEST(TorchRemap, FusedAttentionEqualsTheMaterialisedRemappedDistancesInDouble) {
  torch::manual_seed(5);
  const std::int64_t B = 2, Hq = 4, Hk = 2, T = 45, D = 16;
  RopeParams rp;
  rp.head_dim = static_cast<int>(D);
  const RopeSpec rope(compute_schedule(rp));
  for (const auto& [name, remap] : remaps())
    for (std::int64_t S : {T, std::int64_t{3}}) {  // prefill, and the last queries after a cache
      SCOPED_TRACE(name + ", S " + std::to_string(S));
      AttentionParams p;
      p.positions = AttentionPositions::kRope;
      p.remap = remap;
      AttentionSpec::Data data;
      data.rope = rope;
      // Positions from 2, row 1 shifted by 7: the far branches depend on positions, not indices.
      data.k_positions = (torch::arange(T, torch::kInt64) + 2).repeat({B, 1}) + torch::tensor({0, 7}, torch::kInt64).view({B, 1});
      data.q_positions = data.k_positions.narrow(1, T - S, S).clone();
      const auto spec = std::make_shared<const AttentionSpec>(p, std::move(data));
      const torch::Tensor q = torch::randn({B, Hq, S, D}), k = torch::randn({B, Hk, T, D}), v = torch::randn({B, Hk, T, D});
      const torch::Tensor out = fused_attention({q, k, v, {}, {}, {}}, spec);
      const torch::Tensor expected = remapped_reference(q, k, v, *spec);
      EXPECT_LE(relative_error(out, expected), 2e-6);
      // The remap matters at these distances (up to 51 > w = 8): plain RoPE is far from it.
      AttentionParams plain = spec->params();
      plain.remap = {};
      AttentionSpec::Data same = spec->data();
      EXPECT_GT(relative_error(remapped_reference(q, k, v, AttentionSpec(plain, same)), expected), 1e-2);
    }
}

TEST(TorchRemap, FusedAttentionWithARemapHasTheGradientsOfTheRemappedReference) {
  // The core's backward under a remap (each branch rotated back by its own transpose) through
  // the torch layer's autograd: dq, dk, dv equal autograd through the double reference.
  torch::manual_seed(6);
  RopeParams rp;
  rp.head_dim = 8;
  for (const auto& [name, remap] : remaps()) {
    SCOPED_TRACE(name);
    AttentionParams p;
    p.positions = AttentionPositions::kRope;
    p.remap = remap;
    AttentionSpec::Data data;
    data.rope = RopeSpec(compute_schedule(rp));
    data.q_positions = data.k_positions = torch::arange(20).view({1, 20});
    const auto spec = std::make_shared<const AttentionSpec>(p, std::move(data));
    const torch::Tensor q = torch::randn({1, 2, 20, 8}, torch::requires_grad()), k = torch::randn({1, 2, 20, 8}, torch::requires_grad()),
                        v = torch::randn({1, 2, 20, 8}, torch::requires_grad());
    const torch::Tensor out = fused_attention({q, k, v, {}, {}, {}}, spec);
    const torch::Tensor w = torch::randn(out.sizes());
    (out * w).sum().backward();
    const std::vector<torch::Tensor> fused = {q.grad().clone(), k.grad().clone(), v.grad().clone()};
    for (const auto& t : {q, k, v}) t.mutable_grad().zero_();
    (remapped_reference(q, k, v, *spec) * w.to(torch::kDouble)).sum().backward();
    const std::vector<torch::Tensor> expected = {q.grad(), k.grad(), v.grad()};
    for (std::size_t i = 0; i < 3; ++i) EXPECT_LE(relative_error(fused[i], expected[i].to(torch::kDouble)), 1e-4) << "dq dk dv"[i * 3];
  }
}

TEST(TorchRemap, ModelDecodesWithACacheToItsRemappedPrefill) {
  ModelConfig c = testing::small_model(Scheme::kRope);
  TransformerLM model = testing::eval_model(c, 3);
  torch::NoGradGuard no_grad;
  const std::int64_t L = 40;
  const torch::Tensor tokens = torch::randint(c.vocab_size, {1, L}, torch::kInt64);
  const torch::Tensor plain = model->forward(tokens);
  for (const auto& [name, remap] : remaps()) {
    SCOPED_TRACE(name);
    model->remap = remap;
    const torch::Tensor prefill = model->forward(tokens);
    EXPECT_GT((prefill - plain).abs().max().item<double>(), 1e-3) << "distances up to 39 > w = 8 are remapped";
    KVCache cache;
    model->forward(tokens.narrow(1, 0, 10), {}, &cache);  // a prompt, then one token at a time
    for (std::int64_t t = 10; t < L; ++t) {
      const torch::Tensor step = model->forward(tokens.narrow(1, t, 1), {}, &cache);
      ASSERT_LE((step[0][0] - prefill[0][t]).abs().max().item<double>(), 2e-5) << "token " << t;
    }
    // A window beyond every distance is plain RoPE, bit for bit.
    model->remap.window = L;
    EXPECT_TRUE(torch::equal(model->forward(tokens), plain));
  }
  model->remap = {};
}

TEST(TorchRemap, ModelRefusesEveryPathTheRemapCannotTake) {
  const auto expect_message = [](TransformerLM& model, const std::string& fragment, KVCache* cache = nullptr) {
    try {
      model->forward(torch::zeros({1, 5}, torch::kInt64), {}, cache);
      ADD_FAILURE() << "no error";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
    }
  };
  TransformerLM rope = testing::eval_model(testing::small_model(Scheme::kRope), 1);
  rope->remap = {PositionRemapKind::kSelfExtend, 2, 2, 0};
  expect_message(rope, "remap self-extend needs a RoPE model on the fused kernel at inference (eval mode, no gradients");  // gradients on
  torch::NoGradGuard no_grad;
  KVCache stale;
  stale.hf_stale_keys = true;
  expect_message(rope, "keys cached unrotated", &stale);
  rope->use_fused_attention = false;
  expect_message(rope, "needs a RoPE model on the fused kernel");
  TransformerLM alibi = testing::eval_model(testing::small_model(Scheme::kAlibi), 1);
  alibi->remap = {PositionRemapKind::kReRope, 2, 1, 0};
  expect_message(alibi, "remap rerope needs a RoPE model on the fused kernel at inference; the scheme is alibi");
}

}  // namespace
}  // namespace posenc::torch_layer
