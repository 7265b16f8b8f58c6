// The libtorch layer: gradients, the fused RoPE path, KV-cache decoding, padding, order, and the
// classic pitfalls of positional encodings, each made a test.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>

#include "posenc/error.h"
#include "posenc_torch/model.h"
#include "posenc_torch/rope.h"
#include "torch_support.h"

namespace posenc::torch_layer {
namespace {

double max_abs(const torch::Tensor& a, const torch::Tensor& b) {
  return (a.to(torch::kFloat64) - b.to(torch::kFloat64)).abs().max().item<double>();
}

RopeParams params_of(int head_dim, double prf = 1.0) {
  RopeParams p;
  p.head_dim = head_dim;
  p.partial_rotary_factor = prf;
  return p;
}

RopeSpec spec_of(int head_dim, double prf = 1.0, RopeLayout layout = RopeLayout::kHalfSplit) {
  return RopeSpec(compute_schedule(params_of(head_dim, prf)), layout);
}

TEST(TorchRope, GradientMatchesFiniteDifferencesInDouble) {
  torch::manual_seed(0);
  for (RopeLayout layout : {RopeLayout::kHalfSplit, RopeLayout::kInterleaved}) {
    for (double prf : {1.0, 0.5}) {
      const RopeSpec spec = spec_of(8, prf, layout);
      const torch::Tensor x = torch::randn({2, 3, 5, 8}, torch::kFloat64).requires_grad_(true);
      const torch::Tensor positions = torch::randint(0, 1000, {2, 5}, torch::kInt64);
      const torch::Tensor w = torch::randn({2, 3, 5, 8}, torch::kFloat64);
      const torch::Tensor loss = (rope(x, positions, spec) * w).sum();
      loss.backward();
      const torch::Tensor grad = x.grad();
      const double eps = 1e-6;
      for (std::int64_t flat : {0, 7, 33, 101, 239}) {
        torch::NoGradGuard no_grad;
        torch::Tensor xp = x.detach().clone(), xm = x.detach().clone();
        xp.view(-1)[flat] += eps;
        xm.view(-1)[flat] -= eps;
        const double numeric = (((rope(xp, positions, spec) - rope(xm, positions, spec)) * w).sum() / (2 * eps)).item<double>();
        EXPECT_NEAR(grad.view(-1)[flat].item<double>(), numeric, 1e-7) << static_cast<int>(layout) << " " << prf;
      }
    }
  }
}

TEST(TorchRope, FusedEqualsThePlainFormulaForwardAndBackward) {
  torch::manual_seed(1);
  for (RopeLayout layout : {RopeLayout::kHalfSplit, RopeLayout::kInterleaved}) {
    const RopeSpec spec = spec_of(64, 1.0, layout);
    const torch::Tensor x = torch::randn({2, 4, 7, 64});
    const torch::Tensor positions = torch::randint(0, 5000, {2, 7}, torch::kInt64);
    EXPECT_LE(max_abs(rope(x, positions, spec), rope_formula(x.to(torch::kFloat64), positions, spec)), 1e-6);
    const torch::Tensor a = x.clone().requires_grad_(true), b = x.clone().requires_grad_(true);
    const torch::Tensor g = torch::randn({2, 4, 7, 64});
    (rope(a, positions, spec) * g).sum().backward();
    (rope_formula(b, positions, spec) * g).sum().backward();
    EXPECT_LE(max_abs(a.grad(), b.grad()), 1e-6);
  }
  // bf16 storage: the kernel's float math, one bf16 rounding on the way out.
  const RopeSpec spec = spec_of(64);
  const torch::Tensor x = torch::randn({1, 2, 5, 64});
  const torch::Tensor positions = torch::arange(5, torch::kInt64).view({1, 5});
  EXPECT_LE(max_abs(rope(x.to(torch::kBFloat16), positions, spec), rope_formula(x.to(torch::kBFloat16).to(torch::kFloat64), positions, spec)), 2e-2);
}

TEST(TorchRope, StridedViewsNeedNoCopy) {
  // [B, S, H, D] storage viewed as [B, H, S, D].
  const RopeSpec spec = spec_of(16);
  const torch::Tensor bshd = torch::randn({2, 6, 3, 16});
  const torch::Tensor positions = torch::arange(6, torch::kInt64).repeat({2, 1});
  const torch::Tensor view = bshd.transpose(1, 2);
  EXPECT_LE(max_abs(rope(view, positions, spec), rope_formula(view.to(torch::kFloat64), positions, spec)), 1e-6);
}

ModelConfig small(Scheme scheme) { return testing::small_model(scheme); }

struct Case {
  const char* name;
  ModelConfig config;
};

std::vector<Case> cache_cases() {
  std::vector<Case> cases;
  for (Scheme s : {Scheme::kNope, Scheme::kSinusoidal, Scheme::kLearned, Scheme::kRope, Scheme::kAlibi, Scheme::kT5,
                   Scheme::kXl, Scheme::kDeberta, Scheme::kKerple, Scheme::kSandwich, Scheme::kFox, Scheme::kDpb, Scheme::kShaw, Scheme::kFire, Scheme::kCope, Scheme::kXpos,
                   Scheme::kRopeLearned, Scheme::kPope})
    cases.push_back({to_string(s), small(s)});
  ModelConfig dynamic = small(Scheme::kRope);
  dynamic.rope.type = RopeType::kDynamic;
  dynamic.rope.factor = 2.0;
  dynamic.rope.max_position_embeddings = 8;
  cases.push_back({"rope-dynamic", dynamic});
  ModelConfig longrope = small(Scheme::kRope);
  longrope.rope.type = RopeType::kLongRope;
  longrope.rope.max_position_embeddings = 64;
  longrope.rope.original_max_position_embeddings = 8;
  longrope.rope.short_factor = {1, 1, 1, 1};
  longrope.rope.long_factor = {1, 2, 4, 8};
  cases.push_back({"rope-longrope", longrope});
  ModelConfig concat = small(Scheme::kSinusoidal);
  concat.fusion = Fusion::kConcat;
  cases.push_back({"sinusoidal-concat", concat});
  ModelConfig multiply = small(Scheme::kLearned);
  multiply.fusion = Fusion::kMultiply;
  cases.push_back({"learned-multiply", multiply});
  return cases;
}

// f(case, model) for every cache case: the model seeded with `seed`, in eval mode, without autograd.
template <class F>
void for_each_cache_model(std::uint64_t seed, F f) {
  for (const Case& c : cache_cases()) {
    SCOPED_TRACE(c.name);
    TransformerLM model = testing::eval_model(c.config, seed);
    torch::NoGradGuard no_grad;
    f(c, model);
  }
}

TEST(TorchModel, DecodeEqualsPrefill) {
  for_each_cache_model(2, [](const Case& c, TransformerLM& model) {
    const torch::Tensor tokens = torch::randint(0, 50, {2, 20}, torch::kInt64);
    const bool static_schedule = c.config.rope.type == RopeType::kDefault;
    const torch::Tensor full = model->forward(tokens);
    KVCache cache;
    for (std::int64_t t = 0; t < 20; ++t) {
      const torch::Tensor step = model->forward(tokens.narrow(1, t, 1), {}, &cache).select(1, 0);
      const torch::Tensor prefix = model->forward(tokens.narrow(1, 0, t + 1)).select(1, t);
      ASSERT_LE(max_abs(step, prefix), 1e-5) << "step " << t;
      if (static_schedule) {
        ASSERT_LE(max_abs(step, full.select(1, t)), 1e-5) << "step " << t;
      }
    }
    // Static schedules never rebuild; LongRoPE once (at the switch); dynamic NTK past max_pos.
    const int expected = std::string(c.name) == "rope-longrope" ? 1 : std::string(c.name) == "rope-dynamic" ? 12 : 0;
    EXPECT_EQ(cache.rebuilds, expected);
  });
}

TEST(TorchModel, LeftPaddingLeavesRealTokensUnchanged) {
  for_each_cache_model(3, [](const Case&, TransformerLM& model) {
    const torch::Tensor real = torch::randint(1, 50, {1, 6}, torch::kInt64);
    const torch::Tensor padded = torch::cat({torch::zeros({1, 4}, torch::kInt64), real}, 1);
    const torch::Tensor mask = torch::cat({torch::zeros({1, 4}, torch::kInt64), torch::ones({1, 6}, torch::kInt64)}, 1);
    const torch::Tensor alone = model->forward(real);
    const torch::Tensor batched = model->forward(padded, mask).narrow(1, 4, 6);
    EXPECT_LE(max_abs(alone, batched), 1e-5);
  });
}

TEST(TorchModel, OnlyNopeIsPermutationEquivariant) {
  torch::NoGradGuard no_grad;
  const torch::Tensor tokens = torch::randint(0, 50, {1, 12}, torch::kInt64);
  const torch::Tensor perm = torch::randperm(12, torch::kInt64);
  for (Scheme s : {Scheme::kNope, Scheme::kSinusoidal, Scheme::kLearned, Scheme::kRope, Scheme::kAlibi, Scheme::kT5,
                   Scheme::kXl, Scheme::kDeberta}) {
    SCOPED_TRACE(to_string(s));
    torch::manual_seed(4);
    ModelConfig c = small(s);
    c.causal = false;  // an encoder: no mask to break the symmetry
    c.t5.bidirectional = true;
    TransformerLM model(c);
    model->eval();
    const torch::Tensor out = model->forward(tokens);
    const torch::Tensor shuffled = model->forward(tokens.index_select(1, perm));
    const double gap = max_abs(out.index_select(1, perm), shuffled);
    if (s == Scheme::kNope)
      EXPECT_LE(gap, 1e-5) << "shuffle in, shuffled out";
    else
      EXPECT_GT(gap, 1e-3) << "a positional scheme must see order";
  }
}

// Fixed positional numbers are never trainable: RoPE's frequencies and ALiBi's slopes are buffers
// (saved in the state); the sinusoidal table is the core's, computed from the config, with no
// state at all.
TEST(TorchPitfalls, FixedTablesAreBuffersAndSavedInTheState) {
  EXPECT_TRUE(SinusoidalPositionalEncoding(16)->parameters().empty());
  EXPECT_TRUE(SinusoidalPositionalEncoding(16)->buffers().empty());
  for (Scheme s : {Scheme::kRope, Scheme::kAlibi}) {
    SCOPED_TRACE(to_string(s));
    TransformerLM model(small(s));
    bool in_parameters = false, in_buffers = false;
    for (const auto& p : model->named_parameters())
      in_parameters = in_parameters || p.key().find("frequencies") != std::string::npos ||
                      p.key().find("inv_freq") != std::string::npos || p.key().find("slopes") != std::string::npos;
    for (const auto& b : model->named_buffers())
      in_buffers = in_buffers || b.key().find("frequencies") != std::string::npos ||
                   b.key().find("inv_freq") != std::string::npos || b.key().find("slopes") != std::string::npos;
    EXPECT_FALSE(in_parameters);
    EXPECT_TRUE(in_buffers);
  }
}

TEST(TorchPitfalls, PositionsPastAnyPrecomputedLengthWork) {
  SinusoidalPositionalEncoding sin(16);
  const torch::Tensor far = torch::tensor({{100000, 2000000000}}, torch::kInt64);
  const torch::Tensor pe = sin->forward(far);
  EXPECT_TRUE(torch::isfinite(pe).all().item<bool>());
  EXPECT_NEAR(pe[0][1][0].item<float>(), std::sin(2e9), 1e-6);
  const RopeSpec spec = spec_of(16);
  const torch::Tensor x = torch::randn({1, 1, 2, 16});
  EXPECT_LE(max_abs(rope(x, far, spec), rope_formula(x.to(torch::kFloat64), far, spec)), 1e-5);
}

TEST(TorchPitfalls, EvalMakesTwoForwardsIdentical) {
  ModelConfig c = small(Scheme::kSinusoidal);
  c.dropout = 0.5;
  TransformerLM model(c);
  const torch::Tensor tokens = torch::randint(0, 50, {1, 10}, torch::kInt64);
  model->train();
  EXPECT_GT(max_abs(model->forward(tokens), model->forward(tokens)), 1e-4) << "dropout is on in training";
  model->eval();
  EXPECT_EQ(max_abs(model->forward(tokens), model->forward(tokens)), 0.0);
}

TEST(TorchPitfalls, IntegerPositionsNeverTruncateFrequencies) {
  RopeParams p;
  p.head_dim = 64;
  RotaryEmbedding rotary(p);
  EXPECT_EQ(rotary->inv_freq.scalar_type(), torch::kFloat32);
  EXPECT_GT(rotary->inv_freq.min().item<float>(), 0.0f);
  SinusoidalPositionalEncoding sin(64);
  const torch::Tensor row = sin->forward(torch::tensor({{1}}, torch::kInt64));
  // Every sin column of position 1 is sin(w_k) > 0: no frequency became 0 through integer math.
  EXPECT_GT(row.index({0, 0, torch::indexing::Slice(0, 64, 2)}).min().item<float>(), 0.0f);
}

TEST(TorchPitfalls, LearnedTableEndIsAnErrorNamingThePosition) {
  LearnedPositionalEmbedding learned(16, 8);
  try {
    learned->forward(torch::tensor({{3, 16}}, torch::kInt64));
    ADD_FAILURE() << "no error past the table";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("position 16"), std::string::npos) << e.what();
  }
}

// The xpos scheme is RoPE with each pair's score times zeta_i^((m - n)/B): the same weights give
// other logits than rope at B = 512 and rope's as B grows without bound; B must be finite > 0.
// The tokens are seeded: drawn from the unseeded generator, the largest difference at B = 512
// ranged 0.0008-0.0019 run to run (24 tokens: the decay is at most a few percent), and a bound
// of 1e-3 failed one run in a clean clone's make test. It is now 1e-4: ten times the 1e-5 that
// rope's own logits stay within, far below any seed's difference.
TEST(TorchModel, XPosIsRopeTimesItsDecay) {
  ModelConfig c = testing::small_model(Scheme::kXpos);
  ModelConfig plain = c;
  plain.scheme = Scheme::kRope;
  torch::manual_seed(1);
  const torch::Tensor tokens = torch::randint(50, {2, 24}, torch::kInt64);
  torch::NoGradGuard no_grad;
  const torch::Tensor rope = testing::eval_model(plain, 3)->forward(tokens);
  EXPECT_GT((testing::eval_model(c, 3)->forward(tokens) - rope).abs().max().item<double>(), 1e-4);
  c.xpos_scale_base = 1e12;  // zeta^(Delta/B) = 1 to float precision
  EXPECT_LT((testing::eval_model(c, 3)->forward(tokens) - rope).abs().max().item<double>(), 1e-5);
  for (const double bad : {0.0, -1.0, std::nan("")}) {
    c.xpos_scale_base = bad;
    EXPECT_THROW(c.validate(), Error) << bad;
  }
}

TEST(TorchModel, SaveLoadRoundTrip) {
  torch::manual_seed(5);
  ModelConfig c = small(Scheme::kT5);
  TransformerLM model(c);
  model->eval();
  const std::string path = ::testing::TempDir() + "posenc_model.pt";
  save_model(model, path);
  TransformerLM loaded = load_model(path);
  loaded->eval();
  const torch::Tensor tokens = torch::randint(0, 50, {1, 9}, torch::kInt64);
  EXPECT_EQ(max_abs(model->forward(tokens), loaded->forward(tokens)), 0.0);
  EXPECT_EQ(loaded->config().scheme, Scheme::kT5);
  std::remove(path.c_str());
}

// The tutorials' raw index (PE(p) = p in every channel, issue 32). Added, it is p * (1, ..., 1),
// which every LayerNorm of this pre-LN model subtracts as the channel mean: the model is NoPE's
// (same seed, same weights: the sinusoidal scheme has none), to float32 rounding. Concatenated, no
// norm removes it, and the model sees order.
TEST(TorchModel, RawIndexAddedIsErasedConcatenatedIsSeen) {
  torch::NoGradGuard no_grad;
  const torch::Tensor tokens = torch::randint(0, 50, {2, 12}, torch::kInt64);
  ModelConfig raw = small(Scheme::kSinusoidal);
  raw.raw_index = true;
  const torch::Tensor nope = testing::eval_model(small(Scheme::kNope), 9)->forward(tokens);
  const torch::Tensor added = testing::eval_model(raw, 9)->forward(tokens);
  EXPECT_LE(max_abs(added, nope), 1e-4);
  EXPECT_GT(max_abs(testing::eval_model(small(Scheme::kSinusoidal), 9)->forward(tokens), nope), 1e-2) << "the sinusoid is seen";
  raw.fusion = Fusion::kConcat;
  raw.causal = false;
  TransformerLM concat = testing::eval_model(raw, 9);
  const torch::Tensor perm = torch::randperm(12, torch::kInt64);
  EXPECT_GT(max_abs(concat->forward(tokens).index_select(1, perm), concat->forward(tokens.index_select(1, perm))), 1e-3);
  raw.scheme = Scheme::kRope;
  try {
    TransformerLM{raw};
    ADD_FAILURE() << "raw_index on a RoPE model";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("raw_index replaces the sinusoidal table, got scheme 'rope'"), std::string::npos) << e.what();
  }
}

TEST(TorchModel, ConfigErrors) {
  ModelConfig c = small(Scheme::kRope);
  c.n_heads = 3;
  EXPECT_THROW(TransformerLM{c}, Error);
  c = small(Scheme::kRope);
  c.n_kv_heads = 3;
  EXPECT_THROW(TransformerLM{c}, Error);
}

}  // namespace
}  // namespace posenc::torch_layer

namespace posenc::torch_layer {
namespace {

// The spec (and with it the cos/sin table attention reads) lives as long as the schedule: a new
// one only when the runtime rule changes the frequencies (dynamic NTK past its length).
TEST(TorchRope, RotaryEmbeddingKeepsItsSpecAndTableWhileTheScheduleHolds) {
  RopeParams p = params_of(16);
  p.type = RopeType::kDynamic;  // the NTK base grows past max_position_embeddings
  p.factor = 2.0;
  p.max_position_embeddings = 64;
  RotaryEmbedding rotary(p);
  const RopeSpec first = rotary->spec_for(10);
  ASSERT_NE(first.table(), nullptr);
  EXPECT_EQ(rotary->spec_for(63).table(), first.table()) << "within the reference length: the same schedule and table";
  const RopeSpec grown = rotary->spec_for(200);
  EXPECT_NE(grown.table(), first.table()) << "dynamic NTK past 64 positions: new frequencies, a new table";
  EXPECT_NE(grown.inv_freq(), first.inv_freq());
  EXPECT_EQ(grown.params().inv_freq, grown.inv_freq().data()) << "params point into the spec's own storage";
}

// The fused kernel adds ALiBi's slopes from the module's buffer (as the libtorch path does), not
// a copy of its own: changing the buffer changes both paths alike.
TEST(TorchModel, FusedAlibiReadsTheModulesSlopes) {
  ModelConfig c = testing::small_model(Scheme::kAlibi);
  c.n_heads = 4;
  TransformerLM model = testing::eval_model(c, 11);
  torch::NoGradGuard no_grad;
  const torch::Tensor tokens = torch::randint(0, c.vocab_size, {2, 24}, torch::kInt64);
  const torch::Tensor before = model->forward(tokens);
  for (auto& buffer : model->named_buffers())
    if (buffer.key() == "alibi.slopes") buffer.value().mul_(3.0);
  const torch::Tensor fused = model->forward(tokens);
  model->use_fused_attention = false;
  const torch::Tensor plain = model->forward(tokens);
  EXPECT_GT((fused - before).abs().max().item<double>(), 1e-3) << "the buffer reached the fused kernel";
  EXPECT_LE((fused - plain).abs().max().item<double>(), 1e-4);
}

}  // namespace
}  // namespace posenc::torch_layer
