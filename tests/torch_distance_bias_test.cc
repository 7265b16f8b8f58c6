// The trainable biases of issue 24 in libtorch: each module's table or gate equals the core's
// double-rounded-once function, Kerple's parameters stay positive and get the analytic gradient,
// and the materialising bias reads the table at |q - k|.
#include <gtest/gtest.h>

#include <cmath>

#include "posenc/error.h"
#include "posenc/fire.h"
#include "posenc/forget_gate.h"
#include "posenc/kerple.h"
#include "posenc/sandwich.h"
#include "posenc_torch/distance_bias.h"
#include "posenc_torch/model.h"
#include "posenc_torch/positional.h"
#include "torch_support.h"

namespace posenc::torch_layer {
namespace {

double max_rel(const torch::Tensor& a, const torch::Tensor& b) {
  return ((a.to(torch::kFloat64) - b.to(torch::kFloat64)).abs().max() / b.to(torch::kFloat64).abs().max().clamp_min(1e-30))
      .item<double>();
}

TEST(TorchDistanceBias, KerpleTablesAreTheCoresAtInitialisation) {
  for (KerpleKind kind : {KerpleKind::kLog, KerpleKind::kPower}) {
    KerpleBias m(6, kind);
    const std::vector<float> core = kerple_table(kerple_init(6, kind), 300);
    EXPECT_LE(max_rel(m->table(300), torch::tensor(core).view({6, 300})), 1e-6) << to_string(kind);
    EXPECT_TRUE((m->r1() > 0).all().item<bool>() && (m->r2() > 0).all().item<bool>());
  }
  // Power at initialisation is ALiBi: r2 = 1, r1 = the slopes.
  KerpleBias power(4, KerpleKind::kPower);
  EXPECT_LE((power->r2() - 1).abs().max().item<double>(), 1e-12);
}

TEST(TorchDistanceBias, KerpleStaysPositiveWhereverItsRawParametersGo) {
  KerpleBias m(3, KerpleKind::kPower);
  torch::NoGradGuard no_grad;
  m->raw_r1.fill_(-40);
  m->raw_r2.fill_(40);
  EXPECT_TRUE((m->r1() > 0).all().item<bool>());
  EXPECT_TRUE((m->r2() <= 2).all().item<bool>() && (m->r2() > 0).all().item<bool>());
  EXPECT_TRUE(torch::isfinite(m->table(100)).all().item<bool>());
}

// d/d raw_r1 of sum_d w_d b(d) = -sigmoid(raw_r1) sum_d w_d log1p(r2 d) (log); the power variant's
// r2 gradient is finite at d = 0 (where 0^r2's log 0 would make it NaN).
TEST(TorchDistanceBias, KerpleGradientIsTheAnalyticOne) {
  KerpleBias m(2, KerpleKind::kLog);
  const torch::Tensor w = torch::rand({2, 50}, torch::kFloat64);
  (m->table(50).to(torch::kFloat64) * w).sum().backward();
  const torch::Tensor d = torch::arange(50, torch::kFloat64);
  const torch::Tensor r2 = m->r2().detach().view({2, 1});
  const torch::Tensor want = -torch::sigmoid(m->raw_r1.detach()) * (w * torch::log1p(r2 * d)).sum(1);
  EXPECT_LE(max_rel(m->raw_r1.grad(), want), 1e-6);
  KerpleBias power(2, KerpleKind::kPower);
  power->table(50).sum().backward();
  EXPECT_TRUE(torch::isfinite(power->raw_r2.grad()).all().item<bool>());
}

TEST(TorchDistanceBias, SandwichTableIsTheCores) {
  SandwichBias m(8, 64);
  const std::vector<float> core = sandwich_table(SandwichParams{8, 64}, 200);
  EXPECT_EQ(max_rel(m->table(200), torch::tensor(core).view({8, 200})), 0.0);
  EXPECT_EQ(m->parameters().size(), 0u) << "parameter-free";
}

TEST(TorchDistanceBias, ForgetGateCumulativeIsTheCores) {
  torch::manual_seed(4);
  ForgetGate gate(16, 3);
  const torch::Tensor x = torch::randn({2, 40, 16});
  const torch::Tensor c = gate->cumulative(x);
  const torch::Tensor logits = gate->proj->forward(x).detach().transpose(1, 2).contiguous();  // [B, H, S]
  std::vector<float> core(static_cast<std::size_t>(logits.numel()));
  forget_gate_cumulative(logits.data_ptr<float>(), ForgetGateShape{2, 3, 40}, core.data());
  EXPECT_LE(max_rel(c, torch::tensor(core).view({2, 3, 40})), 1e-6);
  // A start continues the sum: the last 10 tokens from the first 30's last value.
  const torch::Tensor rest = gate->cumulative(x.narrow(1, 30, 10), c.select(2, 29));
  EXPECT_LE(max_rel(rest, c.narrow(2, 30, 10)), 1e-6);
}

TEST(TorchDistanceBias, MaterialisedBiasReadsTheTableAtTheDistance) {
  const torch::Tensor table = torch::arange(20, torch::kFloat32).view({2, 10});
  const torch::Tensor q = torch::tensor({{3, 7}}, torch::kInt64), k = torch::tensor({{0, 5, 9}}, torch::kInt64);
  const torch::Tensor bias = distance_bias_scores(table, q, k);  // [1, 2, 2, 3]
  EXPECT_EQ(bias[0][1][0][2].item<float>(), 10 + 6);  // head 1, |3 - 9| = 6
  EXPECT_EQ(bias[0][0][1][0].item<float>(), 7);       // head 0, |7 - 0|
  EXPECT_THROW(distance_bias_scores(table, torch::tensor({{12}}, torch::kInt64), k), Error);
  // A signed table [H, 2L - 1] (L = 5) reads column q - k + 4: 3 - 0 -> 7, 3 - 5 -> 2.
  const torch::Tensor signed_bias = distance_bias_scores(table.narrow(1, 0, 9).contiguous(), q.narrow(1, 0, 1),
                                                         k.narrow(1, 0, 2), DistanceSide::kSigned);
  EXPECT_EQ(signed_bias[0][1][0][0].item<float>(), 10 + 7);
  EXPECT_EQ(signed_bias[0][0][0][1].item<float>(), 2);
  EXPECT_THROW(distance_bias_scores(table.narrow(1, 0, 9).contiguous(), q, k, DistanceSide::kSigned), Error);  // |7 - 0| > 4
}

// x-transformers' DynamicPositionBias (norm off): the MLP of sign(d) log(1 + |d|), layer by layer.
TEST(TorchDistanceBias, DynamicPositionBiasIsTheMlpOfTheSignedLogDistance) {
  torch::manual_seed(9);
  DynamicPositionBias m(3, 6, 3);
  const torch::Tensor table = m->table(5);  // d = -4 .. 4
  ASSERT_EQ(table.sizes(), (std::vector<std::int64_t>{3, 9}));
  std::vector<torch::nn::Linear> linears;
  for (const auto& child : m->mlp->children())
    if (auto l = std::dynamic_pointer_cast<torch::nn::LinearImpl>(child)) linears.emplace_back(l);
  ASSERT_EQ(linears.size(), 4u);  // 1 -> 6, 6 -> 6 twice, 6 -> 3
  for (int d = -4; d <= 4; ++d) {
    torch::Tensor x = torch::full({1}, std::copysign(std::log1p(std::abs(d)), d), torch::kFloat64);
    for (std::size_t i = 0; i < linears.size(); ++i) {
      x = torch::matmul(linears[i]->weight.to(torch::kFloat64), x) + linears[i]->bias.to(torch::kFloat64);
      if (i + 1 < linears.size()) x = x * torch::sigmoid(x);  // SiLU
    }
    EXPECT_LE((table.select(1, d + 4).to(torch::kFloat64) - x).abs().max().item<double>(), 1e-5) << "d = " << d;
  }
  table.sum().backward();
  EXPECT_GT(linears[0]->weight.grad().abs().sum().item<double>(), 0) << "trainable through its table";
  EXPECT_THROW(DynamicPositionBias(3, 0), Error);
  EXPECT_THROW(m->table(0), Error);
  m->to(torch::kFloat64);  // the table follows the parameters' dtype
  EXPECT_EQ(m->table(3).scalar_type(), torch::kFloat64);
}

// FIRE's scores equal the core's double reference (fire.h) with the module's weights, at query
// positions below and beyond the threshold (where the normaliser starts to grow) and at keys after
// the query (the mirror distance, as the reference); c and L_multiplier are trained through them.
TEST(TorchDistanceBias, FireIsTheCoresReferenceWithTheModulesWeights) {
  torch::manual_seed(4);
  FireBias m(3, 5);
  m->to(torch::kFloat64);
  {
    torch::NoGradGuard no_grad;
    m->L_multiplier.fill_(1.0 / 64);  // threshold 8: positions past it take the growing normaliser
    m->c.fill_(0.3);
  }
  FireParams p;
  p.heads = 3, p.width = 5, p.c = 0.3, p.threshold = 8.0;
  const auto linear = [&](int i) { return std::dynamic_pointer_cast<torch::nn::LinearImpl>(m->mlp->children()[i]); };
  const auto values = [](const torch::Tensor& t) {
    const torch::Tensor c = t.contiguous();
    return std::vector<double>(c.data_ptr<double>(), c.data_ptr<double>() + c.numel());
  };
  p.w1 = values(linear(0)->weight), p.b1 = values(linear(0)->bias), p.w2 = values(linear(2)->weight), p.b2 = values(linear(2)->bias);
  const torch::Tensor q = torch::tensor({0, 3, 8, 9, 40, 1000}, torch::kInt64).view({1, 6});
  const torch::Tensor k = torch::tensor({0, 1, 7, 9, 39, 41}, torch::kInt64).view({1, 6});
  const torch::Tensor s = m->scores(q, k);  // [1, 3, 6, 6]
  ASSERT_EQ(s.sizes(), (std::vector<std::int64_t>{1, 3, 6, 6}));
  double worst = 0;
  for (int a = 0; a < 6; ++a)
    for (int b = 0; b < 6; ++b) {
      const std::vector<double> want = fire_bias(p, q[0][a].item<std::int64_t>(), k[0][b].item<std::int64_t>());
      for (int h = 0; h < 3; ++h) worst = std::max(worst, std::fabs(s[0][h][a][b].item<double>() - want[h]));
    }
  EXPECT_LE(worst, 1e-12);
  EXPECT_NEAR(fire_input(p, 3, 1), std::log(0.3 * 2 + 1) / (std::log(0.3 * 8 + 1) + 1e-6), 1e-15);  // below L: fixed normaliser
  EXPECT_NEAR(fire_input(p, 40, 0), std::log(0.3 * 40 + 1) / (std::log(0.3 * 40 + 1) + 1e-6), 1e-15);  // the farthest key: ~1
  s.sum().backward();
  EXPECT_NE(m->c.grad().item<double>(), 0);
  EXPECT_NE(m->L_multiplier.grad().item<double>(), 0);  // through the rows past the threshold
  EXPECT_THROW(FireBias(0), Error);
  p.w2.pop_back();
  EXPECT_THROW(fire_bias(p, 1, 0), Error);
}

// FIRE takes the fused kernel as a distance table only while every query is below L: the table
// is scores() at such queries, table_covers is strict at L, and a model whose L falls mid-sequence
// gives the materialising path's output (a table would give the queries past L a wrong bias).
TEST(TorchDistanceBias, FireIsATableForQueriesBelowItsThresholdOnly) {
  torch::manual_seed(5);
  FireBias m(3, 8);
  {
    torch::NoGradGuard no_grad;
    m->L_multiplier.fill_(20.0 / 512);  // L = 20
    m->c.fill_(0.2);
  }
  const torch::Tensor below = torch::arange(20, torch::kInt64).view({1, 20}), keys = torch::arange(30, torch::kInt64).view({1, 30});
  EXPECT_LE(max_rel(distance_bias_scores(m->table(30), below, keys), m->scores(below, keys)), 1e-6);
  EXPECT_TRUE(m->table_covers(below));
  EXPECT_FALSE(m->table_covers(torch::tensor({3, 20}, torch::kInt64).view({1, 2})));
  EXPECT_THROW(m->table(0), Error);

  ModelConfig c = testing::small_model(Scheme::kFire, 30);
  TransformerLM model = testing::eval_model(c, 6);
  torch::NoGradGuard no_grad;
  model->named_parameters()["fire.L_multiplier"].fill_(20.0 / 512);
  model->named_parameters()["fire.c"].fill_(0.5);
  const torch::Tensor tokens = torch::randint(0, 30, {2, 40}, torch::kInt64);
  model->use_fused_attention = false;
  const torch::Tensor plain = model->forward(tokens);
  model->use_fused_attention = true;
  EXPECT_LE((model->forward(tokens) - plain).abs().max().item<double>(), 1e-5);
  // Below L the kernel (equal within rounding), and not the same bits: it did run.
  const torch::Tensor short_tokens = tokens.narrow(1, 0, 20);
  const torch::Tensor fused = model->forward(short_tokens);
  model->use_fused_attention = false;
  const torch::Tensor short_plain = model->forward(short_tokens);
  EXPECT_LE((fused - short_plain).abs().max().item<double>(), 1e-5);
  EXPECT_FALSE(torch::equal(fused, short_plain));
}

}  // namespace
}  // namespace posenc::torch_layer

namespace posenc::torch_layer {
namespace {

// Shaw's terms through the 2M + 1 rows equal the direct form over [Sq, Sk, Dh] (HF BERT's
// einsum "bhld,lrd->bhlr" over distance_embedding[q - k + M]), with clipping past +-M.
TEST(TorchShawRelative, KeyScoresAndValueTermAreTheDirectGather) {
  torch::manual_seed(6);
  ShawRelative shaw(4, 3);
  const torch::Tensor qpos = (torch::arange(5, torch::kInt64) + 6).view({1, 5}), kpos = torch::arange(11, torch::kInt64).view({1, 11});
  const torch::Tensor rows = shaw->rows(qpos, kpos);  // [1, 5, 11]
  EXPECT_EQ(rows[0][0][0].item<std::int64_t>(), 6) << "6 - 0 = 6 clipped to 3, row 3 + 3";
  EXPECT_EQ(rows[0][4][10].item<std::int64_t>(), 3) << "10 - 10 = 0, row 3";
  EXPECT_EQ(rows[0][0][10].item<std::int64_t>(), 0) << "6 - 10 = -4 clipped to -3, row 0";
  const torch::Tensor q = torch::randn({1, 2, 5, 4}, torch::kFloat64), w = torch::softmax(torch::randn({1, 2, 5, 11}, torch::kFloat64), -1);
  const torch::Tensor rel_k = shaw->rel_k.to(torch::kFloat64), rel_v = shaw->rel_v.to(torch::kFloat64);
  const torch::Tensor a_k = rel_k.index({rows[0]}), a_v = rel_v.index({rows[0]});  // [5, 11, 4]
  const torch::Tensor direct_k = torch::einsum("bhsd,std->bhst", {q, a_k});
  const torch::Tensor direct_v = torch::einsum("bhst,std->bhsd", {w, a_v});
  EXPECT_LE((shaw->key_scores(q.to(torch::kFloat32), rows).to(torch::kFloat64) - direct_k).abs().max().item<double>(), 1e-6);
  EXPECT_LE((shaw->value_term(w.to(torch::kFloat32), rows).to(torch::kFloat64) - direct_v).abs().max().item<double>(), 1e-6);
  shaw->value_term(w.to(torch::kFloat32), rows).sum().backward();
  EXPECT_GT(shaw->rel_v.grad().abs().sum().item<double>(), 0) << "trainable";
  EXPECT_THROW(ShawRelative(4, -1), Error);
}

// CoPE's term equals the paper's formula written out per element in double: gates sigmoid(e) (0 on
// blocked keys), p_ij = min(sum_{t >= j} g_it, max_pos - 1), z_i[p] = q_i . pos_emb[p], linear
// between floor p and ceil p; pos_emb is trained through it (and q through z and the gates).
TEST(TorchCope, TermIsThePapersInterpolatedContextualPosition) {
  torch::manual_seed(6);
  Cope m(4, 3);
  m->to(torch::kFloat64);
  {
    torch::NoGradGuard no_grad;
    m->pos_emb.normal_();
  }
  const torch::Tensor q = torch::randn({1, 2, 3, 4}, torch::kFloat64).requires_grad_(true);
  const torch::Tensor e = torch::randn({1, 2, 3, 5}, torch::kFloat64) * 3;
  const torch::Tensor blocked = (torch::arange(5).view({1, 5}) > torch::arange(3).view({3, 1}) + 2).view({1, 1, 3, 5});
  const torch::Tensor got = m->term(q, e, blocked);
  double worst = 0;
  for (int h = 0; h < 2; ++h)
    for (int i = 0; i < 3; ++i)
      for (int j = 0; j < 5; ++j) {
        double p = 0;
        for (int t = j; t < 5; ++t) p += t > i + 2 ? 0.0 : 1.0 / (1.0 + std::exp(-e[0][h][i][t].item<double>()));
        p = std::min(p, 2.0);
        const auto z = [&](int row) { return (q[0][h][i] * m->pos_emb[row]).sum().item<double>(); };
        const double want = z(static_cast<int>(std::ceil(p))) * (p - std::floor(p)) + z(static_cast<int>(std::floor(p))) * (1 - p + std::floor(p));
        worst = std::max(worst, std::fabs(got[0][h][i][j].item<double>() - want));
      }
  EXPECT_LE(worst, 1e-12);
  got.sum().backward();
  EXPECT_GT(m->pos_emb.grad().abs().sum().item<double>(), 0);
  EXPECT_GT(q.grad().abs().sum().item<double>(), 0);  // through z and the gates
  EXPECT_THROW(Cope(4, 0), Error);
}

}  // namespace
}  // namespace posenc::torch_layer
