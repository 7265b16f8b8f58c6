// TransformerLM's rotary variants of issue 25 beyond xPos: rope-learned (RoPE whose frequencies
// are a parameter, rotated by rope_native so the gradient reaches them, attended without
// positions on either path) and pope (PoPE, polar.h: softplus magnitudes at phases p w_j, keys
// with a learned phase; the materialising path). Decoding with a cache, save and load and the
// materialising path's query blocks are tested with every scheme (torch_test.cc,
// torch_serialize_test.cc, torch_reference_test.cc).
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <vector>

#include "posenc/error.h"
#include "posenc/pope.h"
#include "posenc_torch/model.h"
#include "posenc_torch/polar.h"
#include "torch_support.h"

namespace posenc::torch_layer {
namespace {

double max_abs(const torch::Tensor& a, const torch::Tensor& b) { return (a - b).abs().max().item<double>(); }

// At initialisation rope-learned is rope (the same weights: neither draws from the generator for
// its frequencies), on the fused kernel and on the materialising path; its frequencies then get
// a gradient, and a step on them changes the logits.
TEST(TorchRotarySchemes, RopeLearnedStartsAsRopeAndTrainsItsFrequencies) {
  const ModelConfig learned_config = testing::small_model(Scheme::kRopeLearned);
  ModelConfig rope_config = learned_config;
  rope_config.scheme = Scheme::kRope;
  const torch::Tensor tokens = torch::randint(50, {2, 24}, torch::kInt64);
  TransformerLM learned = testing::eval_model(learned_config, 4), rope = testing::eval_model(rope_config, 4);
  for (const bool fused : {true, false}) {
    SCOPED_TRACE(fused ? "fused kernel" : "materialising path");
    torch::NoGradGuard no_grad;
    learned->use_fused_attention = rope->use_fused_attention = fused;
    EXPECT_LT(max_abs(learned->forward(tokens), rope->forward(tokens)), 2e-5);
  }
  learned->train();
  const torch::Tensor logits = learned->forward(tokens);
  const torch::Tensor loss = torch::nn::functional::cross_entropy(logits.view({-1, 50}), tokens.view({-1}));
  const torch::Tensor grad = torch::autograd::grad({loss}, {learned->named_parameters()["rope_inv_freq"]})[0];
  EXPECT_EQ(grad.sizes(), (std::vector<std::int64_t>{learned_config.head_dim() / 2}));
  EXPECT_GT(grad.abs().max().item<double>(), 0.0);
  torch::NoGradGuard no_grad;
  learned->eval();
  const torch::Tensor before = learned->forward(tokens);
  learned->named_parameters()["rope_inv_freq"].sub_(grad * 10);
  EXPECT_GT(max_abs(learned->forward(tokens), before), 1e-4);
}

// PoPE's scores depend on the distance only: the same tokens at positions shifted by 1000 give
// the same logits (the pope model has no absolute positions anywhere else), also after its key
// phases are moved off zero; its phases get a gradient.
TEST(TorchRotarySchemes, PopeLogitsDependOnDistancesOnlyAndItsPhasesTrain) {
  TransformerLM model = testing::eval_model(testing::small_model(Scheme::kPope), 5);
  {
    torch::NoGradGuard no_grad;
    model->named_parameters()["polar.delta"].uniform_(-6.0, 0.0);
  }
  const torch::Tensor tokens = torch::randint(50, {2, 20}, torch::kInt64);
  const torch::Tensor positions = torch::arange(20, torch::kInt64).repeat({2, 1});
  {
    torch::NoGradGuard no_grad;
    const torch::Tensor here = model->forward_at(tokens, positions), far = model->forward_at(tokens, positions + 1000);
    EXPECT_LT(max_abs(here, far), 2e-4);
    ModelConfig nope = testing::small_model(Scheme::kNope);
    EXPECT_GT(max_abs(here, testing::eval_model(nope, 5)->forward(tokens)), 1e-3) << "positions change the logits";
  }
  const torch::Tensor loss = model->forward(tokens).square().mean();
  const torch::Tensor grad = torch::autograd::grad({loss}, {model->named_parameters()["polar.delta"]})[0];
  EXPECT_GT(grad.abs().max().item<double>(), 0.0);
}

// PolarEmbedding equals the core's PoPE (pope.h) in double: each row as pope_row maps it, and the
// scores as the closed form pope_score, q'.k' = sum_j softplus(q_j) softplus(k_j) cos((m - n) w_j
// - delta_j); a delta outside [-2 pi, 0] is used clamped.
TEST(TorchRotarySchemes, PolarEmbeddingEqualsTheCoresPope) {
  torch::manual_seed(6);
  PolarEmbedding polar(6, 2, 100.0);
  {
    torch::NoGradGuard no_grad;
    polar->delta.copy_(torch::tensor({-1.0, -2.0, 0.5, -7.0, -3.0, 0.0, -0.1, -6.0, -5.0, -4.0, -0.5, -1.5}).view({2, 6}));
  }
  const PopeParams core{6, 100.0};
  const torch::Tensor q = torch::randn({1, 2, 3, 6}, torch::kFloat64), k = torch::randn({1, 2, 4, 6}, torch::kFloat64);
  const torch::Tensor qp = torch::tensor({7, 9, 30}, torch::kInt64).view({1, 3}), kp = torch::tensor({0, 3, 8, 29}, torch::kInt64).view({1, 4});
  const torch::Tensor q2 = polar->queries(q, qp), k2 = polar->keys(k, kp);
  const torch::Tensor scores = torch::matmul(q2, k2.transpose(-1, -2));
  const torch::Tensor delta = polar->delta.detach().to(torch::kFloat64).contiguous();
  const auto row_of = [](const torch::Tensor& x, int h, int t) {
    const torch::Tensor r = x[0][h][t].contiguous();
    return std::vector<double>(r.data_ptr<double>(), r.data_ptr<double>() + r.numel());
  };
  for (int h = 0; h < 2; ++h) {
    const double* delta_h = delta[h].data_ptr<double>();
    for (int i = 0; i < 3; ++i) {
      std::vector<double> want(12);
      pope_row(core, row_of(q, h, i).data(), qp[0][i].item<std::int64_t>(), nullptr, want.data());
      const std::vector<double> got = row_of(q2, h, i);
      for (int c = 0; c < 12; ++c) EXPECT_NEAR(got[static_cast<std::size_t>(c)], want[static_cast<std::size_t>(c)], 1e-12) << "query " << h << " " << i;
    }
    for (int j = 0; j < 4; ++j) {
      std::vector<double> want(12);
      pope_row(core, row_of(k, h, j).data(), kp[0][j].item<std::int64_t>(), delta_h, want.data());
      const std::vector<double> got = row_of(k2, h, j);
      for (int c = 0; c < 12; ++c) EXPECT_NEAR(got[static_cast<std::size_t>(c)], want[static_cast<std::size_t>(c)], 1e-12) << "key " << h << " " << j;
    }
    for (int i = 0; i < 3; ++i)
      for (int j = 0; j < 4; ++j) {
        const double expected = pope_score(core, row_of(q, h, i).data(), qp[0][i].item<std::int64_t>(), row_of(k, h, j).data(),
                                           kp[0][j].item<std::int64_t>(), delta_h);
        EXPECT_NEAR(scores[0][h][i][j].item<double>(), expected, 1e-9) << h << " " << i << " " << j;
      }
  }
  EXPECT_THROW(polar->queries(torch::randn({1, 3, 3, 6}), qp), Error) << "three heads, the module has two";
}

}  // namespace
}  // namespace posenc::torch_layer
