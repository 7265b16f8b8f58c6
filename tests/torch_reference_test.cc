// The torch modules against the core's references (themselves checked against HF's golden
// values): ALiBi, T5, Transformer-XL and DeBERTa give the same numbers in the same directions,
// causal and bidirectional, with queries offset from the keys so that a flipped distance sign
// shows. And Transformer-XL's segment recurrence: exact against a full forward, memory without
// gradients, reach that grows with depth.
#include <gtest/gtest.h>

#include <cmath>

#include "posenc/alibi.h"
#include "posenc/deberta.h"
#include "posenc/error.h"
#include "posenc/t5_bias.h"
#include "posenc/transformer_xl.h"
#include "posenc_torch/model.h"
#include "torch_support.h"

namespace posenc::torch_layer {
namespace {

std::vector<float> values(const torch::Tensor& t) {
  const torch::Tensor c = t.detach().to(torch::kFloat32).contiguous();
  return std::vector<float>(c.data_ptr<float>(), c.data_ptr<float>() + c.numel());
}

// Queries at past + i, keys at j: distances run both ways.
constexpr int kPast = 5, kQ = 6, kK = 11;
torch::Tensor q_positions() { return (torch::arange(kQ, torch::kInt64) + kPast).view({1, kQ}); }
torch::Tensor k_positions() { return torch::arange(kK, torch::kInt64).view({1, kK}); }

TEST(TorchAgainstCore, AlibiCausalAndSymmetric) {
  for (bool symmetric : {false, true}) {
    const int heads = 6;  // not a power of two: the interleaved slope rule
    ALiBiBias alibi(heads, symmetric);
    const auto bias = values(alibi->forward(q_positions(), k_positions()));  // [1, H, Q, K]
    const auto slopes = alibi_slopes(heads);
    for (int h = 0; h < heads; ++h)
      for (int i = 0; i < kQ; ++i) {
        std::vector<float> row(kK, 0.0f);
        alibi_add_bias_row(slopes[h], kPast + i, 0, kK, symmetric ? AlibiMode::kSymmetric : AlibiMode::kCausal, row.data());
        for (int j = 0; j < kK; ++j)
          ASSERT_NEAR(bias[(h * kQ + i) * kK + j], row[j], 1e-5) << "symmetric " << symmetric << " h " << h << " i " << i << " j " << j;
      }
  }
}

TEST(TorchAgainstCore, T5BidirectionalAndCausal) {
  for (bool bidirectional : {true, false}) {
    const int heads = 3;
    const T5BucketParams params{8, 20, bidirectional};
    torch::manual_seed(1);
    T5RelativeBias t5(heads, params);
    const auto bias = values(t5->forward(q_positions(), k_positions()));
    const auto expected = t5_compute_bias(values(t5->table), heads, kQ, kK, kPast, params);
    ASSERT_EQ(bias.size(), expected.size());
    for (std::size_t n = 0; n < bias.size(); ++n) ASSERT_EQ(bias[n], expected[n]) << "bidirectional " << bidirectional << " at " << n;
  }
}

TEST(TorchAgainstCore, TransformerXlScoresWithMemory) {
  const int d_model = 16, heads = 2, dh = 8, mlen = kPast, qlen = kQ, klen = mlen + qlen;
  torch::manual_seed(2);
  XLRelativePosition xl(d_model, heads, dh);
  {
    torch::NoGradGuard no_grad;
    xl->u.normal_();
    xl->v.normal_();
  }
  const torch::Tensor q = torch::randn({1, heads, qlen, dh}), k = torch::randn({1, heads, klen, dh});
  const torch::Tensor qpos = (torch::arange(qlen, torch::kInt64) + mlen).view({1, qlen});
  const torch::Tensor kpos = torch::arange(klen, torch::kInt64).view({1, klen});
  const torch::Tensor ac = torch::matmul(q + xl->u.view({1, heads, 1, dh}), k.transpose(-1, -2));
  const auto scores = values((ac + xl->position_scores(q, qpos, kpos)) / std::sqrt(static_cast<double>(dh)));
  // The core's inputs: r rows for distances klen-1 .. 0, projected; per head.
  const auto sinusoid = xl_relative_sinusoid(d_model, klen);
  const torch::Tensor r = xl->r_net->forward(torch::from_blob(const_cast<float*>(sinusoid.data()), {klen, d_model}))
                              .view({klen, heads, dh});
  for (int h = 0; h < heads; ++h) {
    const auto qh = values(q[0][h]), kh = values(k[0][h]), rh = values(r.select(1, h)), uh = values(xl->u[h]), vh = values(xl->v[h]);
    const auto expected = xl_scores({qh.data(), kh.data(), rh.data(), uh.data(), vh.data(), qlen, mlen, dh});
    for (int i = 0; i < qlen; ++i)
      for (int j = 0; j <= i + mlen; ++j)
        ASSERT_NEAR(scores[(h * qlen + i) * klen + j], expected[i * klen + j], 1e-4) << "h " << h << " i " << i << " j " << j;
  }
}

TEST(TorchAgainstCore, TransformerXlBidirectionalTellsFutureDistancesApart) {
  torch::manual_seed(3);
  for (bool bidirectional : {false, true}) {
    XLRelativePosition xl(16, 2, 8, 0, bidirectional);
    {
      torch::NoGradGuard no_grad;
      xl->v.normal_();
    }
    const torch::Tensor q = torch::randn({1, 2, 1, 8});
    const auto s = values(xl->position_scores(q, torch::tensor({{0}}, torch::kInt64), torch::tensor({{1, 2}}, torch::kInt64)));
    if (bidirectional)
      EXPECT_GT(std::abs(s[0] - s[1]), 1e-4) << "keys 1 and 2 ahead must differ";
    else
      EXPECT_EQ(s[0], s[1]) << "causal: future keys (masked) share distance 0";
  }
}

TEST(TorchAgainstCore, DebertaDisentangledScores) {
  const int d_model = 16, heads = 2, dh = 8;
  const DebertaRelativeParams params{8, 32};
  torch::manual_seed(4);
  DebertaRelative deberta(d_model, heads, dh, params.position_buckets, params.max_relative_positions);
  // Long enough that some distances fall in the log buckets (|d| > 4).
  const torch::Tensor qpos = (torch::arange(kQ, torch::kInt64) + 12).view({1, kQ});
  const torch::Tensor kpos = torch::arange(20, torch::kInt64).view({1, 20});
  const torch::Tensor q = torch::randn({1, heads, kQ, dh}), k = torch::randn({1, heads, 20, dh});
  const auto scores = values((torch::matmul(q, k.transpose(-1, -2)) + deberta->forward(q, k, qpos, kpos)) / std::sqrt(3.0 * dh));
  const torch::Tensor kr = deberta->pos_key->forward(deberta->rel_embeddings).view({-1, heads, dh});
  const torch::Tensor qr = deberta->pos_query->forward(deberta->rel_embeddings).view({-1, heads, dh});
  for (int h = 0; h < heads; ++h) {
    const auto qh = values(q[0][h]), kh = values(k[0][h]), krh = values(kr.select(1, h)), qrh = values(qr.select(1, h));
    // The core indexes queries and keys from 0; shift the keys so query i sits at 12 + i.
    std::vector<float> expected_rows;
    for (int i = 0; i < kQ; ++i) {
      // One query at a time, with the keys: query i at relative offset 12 + i from key 0.
      std::vector<float> qi(qh.begin() + i * dh, qh.begin() + (i + 1) * dh);
      std::vector<float> padded_q(static_cast<std::size_t>(12 + i + 1) * dh, 0.0f);
      std::copy(qi.begin(), qi.end(), padded_q.end() - dh);
      const auto all = deberta_scores({padded_q.data(), kh.data(), krh.data(), qrh.data(), 12 + i + 1, 20, dh}, params);
      for (int j = 0; j < 20; ++j)
        ASSERT_NEAR(scores[(h * kQ + i) * 20 + j], all[static_cast<std::size_t>(12 + i) * 20 + j], 1e-5) << "h " << h << " i " << i << " j " << j;
    }
  }
}

// ---- Transformer-XL segment recurrence ---------------------------------------------------

ModelConfig xl_model(int layers, int mem_len) {
  ModelConfig c;
  c.vocab_size = 30;
  c.d_model = 32;
  c.n_layers = layers;
  c.n_heads = 4;
  c.scheme = Scheme::kXl;
  c.xl_mem_len = mem_len;
  return c;
}

TEST(TorchXlMemory, TwoSegmentsEqualOneFullForward) {
  TransformerLM model = testing::eval_model(xl_model(2, 8), 5);
  torch::NoGradGuard no_grad;
  const torch::Tensor tokens = torch::randint(0, 30, {2, 16}, torch::kInt64);
  const torch::Tensor full = model->forward(tokens);
  XLMemory memory;
  const torch::Tensor first = model->forward_segment(tokens.narrow(1, 0, 8), memory);
  EXPECT_EQ(memory.length(), 8);
  const torch::Tensor second = model->forward_segment(tokens.narrow(1, 8, 8), memory);
  EXPECT_LE((first - full.narrow(1, 0, 8)).abs().max().item<double>(), 1e-5);
  EXPECT_LE((second - full.narrow(1, 8, 8)).abs().max().item<double>(), 1e-5);
}

TEST(TorchXlMemory, MemoryCarriesNoGradient) {
  torch::manual_seed(6);
  TransformerLM model(xl_model(2, 8));
  XLMemory memory;
  model->forward_segment(torch::randint(0, 30, {1, 8}, torch::kInt64), memory);
  ASSERT_EQ(memory.layers.size(), 2u);
  for (const auto& m : memory.layers) EXPECT_FALSE(m.requires_grad());
  const torch::Tensor out = model->forward_segment(torch::randint(0, 30, {1, 8}, torch::kInt64), memory);
  EXPECT_TRUE(out.requires_grad());
}

// Logits of segment `target` after changing token 0 of segment 0 (segments of 8, memory 8):
// whether the change reaches it.
bool reaches(int layers, int target) {
  TransformerLM model = testing::eval_model(xl_model(layers, 8), 7);
  torch::NoGradGuard no_grad;
  torch::Tensor tokens = torch::randint(1, 30, {1, 8 * (target + 1)}, torch::kInt64);
  torch::Tensor changed = tokens.clone();
  changed[0][0] = 0;
  XLMemory a, b;
  torch::Tensor la, lb;
  for (int s = 0; s <= target; ++s) {
    la = model->forward_segment(tokens.narrow(1, 8 * s, 8), a);
    lb = model->forward_segment(changed.narrow(1, 8 * s, 8), b);
  }
  return !torch::equal(la, lb);
}

TEST(TorchXlMemory, ReachGrowsWithDepthTimesMemory) {
  EXPECT_TRUE(reaches(1, 1));   // one layer sees the previous segment
  EXPECT_FALSE(reaches(1, 2));  // ... and no further
  EXPECT_TRUE(reaches(2, 2));   // two layers: two segments back
  EXPECT_FALSE(reaches(2, 3));
  EXPECT_TRUE(reaches(3, 3));
}

TEST(TorchXlMemory, OnlyForXlWithMemory) {
  ModelConfig c = xl_model(1, 8);
  c.scheme = Scheme::kRope;
  EXPECT_THROW(TransformerLM{c}, Error);
  TransformerLM model(xl_model(1, 0));
  XLMemory memory;
  EXPECT_THROW(model->forward_segment(torch::zeros({1, 4}, torch::kInt64), memory), Error);
}

}  // namespace
}  // namespace posenc::torch_layer

namespace posenc::torch_layer {
namespace {

// Inference through the fused kernel equals the materialising path: every scheme it covers,
// causal and bidirectional, GQA, left padding, and decode steps with a KV cache.
TEST(TorchFusedAttention, EqualsTheMaterialisingPath) {
  for (Scheme s : {Scheme::kNope, Scheme::kSinusoidal, Scheme::kLearned, Scheme::kRope, Scheme::kAlibi, Scheme::kT5,
                   Scheme::kKerple, Scheme::kSandwich, Scheme::kFox, Scheme::kDpb, Scheme::kFire, Scheme::kXpos})
    for (bool causal : {true, false}) {
      if (s == Scheme::kFox && !causal) continue;  // FoX is causal (its config refuses otherwise)
      SCOPED_TRACE(std::string(to_string(s)) + (causal ? " causal" : " bidirectional"));
      ModelConfig c = testing::small_model(s, 30);
      c.causal = causal;
      c.t5 = {8, 32, !causal};
      TransformerLM model = testing::eval_model(c, 8);
      torch::NoGradGuard no_grad;
      const torch::Tensor tokens = torch::randint(0, 30, {2, 40}, torch::kInt64);
      torch::Tensor mask = torch::ones({2, 40}, torch::kInt64);
      mask[0].narrow(0, 0, 5).zero_();  // row 0 left-padded
      model->use_fused_attention = false;
      const torch::Tensor plain = model->forward(tokens, mask);
      model->use_fused_attention = true;
      const torch::Tensor fused = model->forward(tokens, mask);
      // Pad queries (row 0, first 5) see no key: the kernel gives zeros there, libtorch a
      // uniform average; every other token is compared.
      EXPECT_LE((fused[0].narrow(0, 5, 35) - plain[0].narrow(0, 5, 35)).abs().max().item<double>(), 1e-4);
      EXPECT_LE((fused[1] - plain[1]).abs().max().item<double>(), 1e-4);
      if (causal) {
        KVCache cache;
        model->forward(tokens.narrow(1, 0, 30), mask.narrow(1, 0, 30), &cache);
        const torch::Tensor step = model->forward(tokens.narrow(1, 30, 1), mask.narrow(1, 30, 1), &cache);
        EXPECT_LE((step.select(1, 0) - plain.select(1, 30)).abs().max().item<double>(), 1e-4);
      }
    }
}

// Training through the fused kernel (fused_training: its backward pass) gives the loss and every
// parameter's gradient that autograd through the materialising path gives: each scheme it
// covers, causal and bidirectional, GQA, left padding; T5's table, RoPE's rotation, Kerple's r1, r2,
// FoX's gates (through the kernel's gradient of c), FIRE's MLP, c and L (through its table,
// every query below L) and xPos's scales included.
TEST(TorchFusedAttention, TrainingGradientsEqualTheMaterialisingPath) {
  for (Scheme s : {Scheme::kNope, Scheme::kLearned, Scheme::kRope, Scheme::kAlibi, Scheme::kT5, Scheme::kKerple,
                   Scheme::kSandwich, Scheme::kFox, Scheme::kDpb, Scheme::kFire, Scheme::kXpos})
    for (bool causal : {true, false}) {
      if (s == Scheme::kFox && !causal) continue;
      SCOPED_TRACE(std::string(to_string(s)) + (causal ? " causal" : " bidirectional"));
      ModelConfig c = testing::small_model(s, 30);
      c.causal = causal;
      c.t5 = {8, 32, !causal};
      c.n_kv_heads = c.n_heads / 2;
      c.dropout = 0;
      torch::manual_seed(21);
      TransformerLM model(c);
      model->train();
      const torch::Tensor tokens = torch::randint(0, 30, {2, 24}, torch::kInt64);
      torch::Tensor mask = torch::ones({2, 24}, torch::kInt64);
      mask[0].narrow(0, 0, 3).zero_();  // row 0 left-padded: its pad queries are not in the loss
      const auto loss_and_grads = [&](bool fused) {
        model->fused_training = fused;
        model->zero_grad();
        const torch::Tensor logits = model->forward(tokens, mask);
        const torch::Tensor loss = torch::nn::functional::cross_entropy(
            logits.narrow(1, 3, 20).reshape({-1, 30}), tokens.narrow(1, 4, 20).reshape({-1}));
        loss.backward();
        // [0]: the loss; [1]: the pad queries' logits, which tell the paths apart when causal (the
        // kernel gives a query that sees no key zeros, libtorch an average of the values).
        std::vector<torch::Tensor> grads{loss.detach().reshape({1}), logits.detach()[0].narrow(0, 0, 3)};
        for (const auto& p : model->parameters()) grads.push_back(p.grad().defined() ? p.grad().clone() : torch::zeros_like(p));
        return grads;
      };
      const auto plain = loss_and_grads(false), fused = loss_and_grads(true);
      ASSERT_EQ(plain.size(), fused.size());
      double worst = 0;
      if (causal) {
        EXPECT_GT((fused[1] - plain[1]).abs().max().item<double>(), 1e-3) << "fused_training took the fused kernel";
      }
      for (std::size_t i = 0; i < plain.size(); ++i) {
        if (i == 1) continue;
        const double scale = std::max(1e-3, plain[i].abs().max().item<double>());
        worst = std::max(worst, (fused[i] - plain[i]).abs().max().item<double>() / scale);
      }
      EXPECT_LE(worst, 1e-4) << "worst gradient difference relative to its tensor's largest entry";
      EXPECT_GT(fused[0].item<double>(), 0);
    }
}

}  // namespace
}  // namespace posenc::torch_layer

namespace posenc::torch_layer {
namespace {

// The materialising path at inference scores queries in blocks (model.cc's kQueryBlockScores)
// so that DeBERTa and XL reach 16384 tokens; blocks of a few rows must give what one block
// gives: every token, causal (with its keys cut at the block's last query) and bidirectional,
// GQA, left padding, decode steps after a cached prefix (queries offset from keys), and XL's
// segment memory. Pad queries (row 0, first 5) see no key when causal: their outputs average
// whatever keys they are given and are read by nothing, so real tokens are compared.
TEST(TorchBlockedAttention, QueryBlocksEqualOneBlock) {
  struct Case {
    const char* name;
    Scheme scheme;
    int xl_clamp_len;
  };
  for (const Case& k : {Case{"deberta", Scheme::kDeberta, 0}, Case{"xl", Scheme::kXl, 0}, Case{"xl clamp 6", Scheme::kXl, 6},
                        Case{"shaw", Scheme::kShaw, 0}, Case{"fire", Scheme::kFire, 0},
                        Case{"cope", Scheme::kCope, 0}, Case{"pope", Scheme::kPope, 0}})
    for (bool causal : {true, false}) {
      SCOPED_TRACE(std::string(k.name) + (causal ? " causal" : " bidirectional"));
      ModelConfig c = testing::small_model(k.scheme, 30);
      c.causal = causal;
      c.xl_clamp_len = k.xl_clamp_len;
      TransformerLM model = testing::eval_model(c, 9);
      model->use_fused_attention = false;  // the materialising path's blocks (FIRE below L takes the kernel)
      torch::NoGradGuard no_grad;
      const torch::Tensor tokens = torch::randint(0, 30, {2, 40}, torch::kInt64);
      torch::Tensor mask = torch::ones({2, 40}, torch::kInt64);
      mask[0].narrow(0, 0, 5).zero_();
      const auto real_diff = [](const torch::Tensor& a, const torch::Tensor& b, std::int64_t pad) {
        return std::max((a[0].narrow(0, pad, a.size(1) - pad) - b[0].narrow(0, pad, b.size(1) - pad)).abs().max().item<double>(),
                        (a[1] - b[1]).abs().max().item<double>());
      };
      model->attention_query_rows = 1 << 30;  // one block: the path training takes
      const torch::Tensor whole = model->forward(tokens, mask);
      for (int rows : {1, 7, 16}) {
        SCOPED_TRACE("rows " + std::to_string(rows));
        model->attention_query_rows = rows;
        EXPECT_LE(real_diff(model->forward(tokens, mask), whole, 5), 1e-6);
        if (causal) {  // 30 tokens into a cache, then 10 more in blocks: queries at past + i
          KVCache cache;
          model->forward(tokens.narrow(1, 0, 30), mask.narrow(1, 0, 30), &cache);
          const torch::Tensor next = model->forward(tokens.narrow(1, 30, 10), mask.narrow(1, 30, 10), &cache);
          EXPECT_LE(real_diff(next, whole.narrow(1, 30, 10), 0), 1e-5);  // decode vs prefill: other sums
          model->attention_query_rows = 1 << 30;
          KVCache one_block;
          model->forward(tokens.narrow(1, 0, 30), mask.narrow(1, 0, 30), &one_block);
          EXPECT_LE(real_diff(next, model->forward(tokens.narrow(1, 30, 10), mask.narrow(1, 30, 10), &one_block), 0), 1e-6);
          model->attention_query_rows = rows;
        }
      }
      // Autograd on: one block whatever attention_query_rows says (training's path).
      torch::GradMode::set_enabled(true);
      model->attention_query_rows = 7;
      const torch::Tensor trained_path = model->forward(tokens, mask);
      torch::GradMode::set_enabled(false);
      EXPECT_TRUE(torch::equal(trained_path.detach(), whole));
    }
  // XL's segment recurrence: memory keys before the segment's queries.
  ModelConfig c = xl_model(2, 8);
  TransformerLM model = testing::eval_model(c, 10);
  torch::NoGradGuard no_grad;
  const torch::Tensor tokens = torch::randint(0, 30, {2, 24}, torch::kInt64);
  std::vector<torch::Tensor> logits[2];
  for (int blocked = 0; blocked < 2; ++blocked) {
    model->attention_query_rows = blocked ? 3 : 1 << 30;
    XLMemory memory;
    for (int s = 0; s < 3; ++s) logits[blocked].push_back(model->forward_segment(tokens.narrow(1, 8 * s, 8), memory));
  }
  for (int s = 0; s < 3; ++s) EXPECT_LE((logits[0][s] - logits[1][s]).abs().max().item<double>(), 1e-6) << "segment " << s;
}

// Without attention_query_rows the block follows the memory bound: at 2048 tokens (B 1, H 4)
// 1024 queries per block, two blocks, the second over every key.
TEST(TorchBlockedAttention, DefaultBlocksFollowTheMemoryBound) {
  ModelConfig c = testing::small_model(Scheme::kDeberta, 30);
  TransformerLM model = testing::eval_model(c, 11);
  torch::NoGradGuard no_grad;
  const torch::Tensor tokens = torch::randint(0, 30, {1, 2048}, torch::kInt64);
  const torch::Tensor blocked = model->forward(tokens);
  model->attention_query_rows = 1 << 30;
  EXPECT_LE((blocked - model->forward(tokens)).abs().max().item<double>(), 1e-6);
}

}  // namespace
}  // namespace posenc::torch_layer
