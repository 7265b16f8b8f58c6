// TransformerLM::forward_at: tokens at positions of the caller's (Ruoss et al. 2023's randomized
// positions train this way). At 0 .. S-1 it is forward itself, for every scheme that reads
// positions; shifted by a constant, the relative schemes give the same logits and the absolute
// ones do not; bad positions are Errors naming what was expected.
#include <gtest/gtest.h>

#include <string>

#include "posenc/error.h"
#include "torch_support.h"

namespace posenc::torch_layer {
namespace {

using testing::eval_model;
using testing::small_model;

const std::vector<Scheme> kReadPositions = {Scheme::kSinusoidal, Scheme::kLearned, Scheme::kRope,  Scheme::kAlibi, Scheme::kT5,
                                            Scheme::kKerple,     Scheme::kSandwich, Scheme::kDpb,  Scheme::kFire,  Scheme::kShaw,
                                            Scheme::kDeberta,    Scheme::kXl,       Scheme::kXpos};

torch::Tensor tokens() { return torch::randint(0, 50, {2, 12}, torch::TensorOptions().dtype(torch::kInt64)); }

TEST(GivenPositions, ZeroToSMinusOneIsForwardItself) {
  torch::manual_seed(1);
  const torch::Tensor x = tokens();
  const torch::Tensor positions = torch::arange(12, torch::kInt64).expand({2, 12}).contiguous();
  for (const Scheme s : kReadPositions) {
    for (const bool fused : {true, false}) {
      TransformerLM model = eval_model(small_model(s), 3);
      model->use_fused_attention = fused;
      torch::NoGradGuard no_grad;
      EXPECT_TRUE(torch::equal(model->forward_at(x, positions), model->forward(x))) << to_string(s) << (fused ? " fused" : "");
    }
  }
}

// q.k (and the biases) read i - j only: a shift by 20 changes no logit (float rounding of RoPE's
// larger angles aside). Absolute tables read p itself.
TEST(GivenPositions, AShiftMovesAbsoluteSchemesOnly) {
  torch::manual_seed(2);
  const torch::Tensor x = tokens();
  const torch::Tensor at0 = torch::arange(12, torch::kInt64).expand({2, 12}).contiguous();
  const torch::Tensor at20 = at0 + 20;
  for (const Scheme s : kReadPositions) {
    if (s == Scheme::kFire) continue;  // FIRE normalises by the query's position: not shift-invariant by design
    TransformerLM model = eval_model(small_model(s), 4);
    torch::NoGradGuard no_grad;
    const double moved = (model->forward_at(x, at20) - model->forward_at(x, at0)).abs().max().item<double>();
    if (s == Scheme::kSinusoidal || s == Scheme::kLearned) EXPECT_GT(moved, 1e-3) << to_string(s);
    else EXPECT_LT(moved, 1e-4) << to_string(s);
  }
}

// Positions with gaps are what a model sees: logits at {0, 2, 4, ...} differ from 0 .. S-1 under
// RoPE and ALiBi, and gradients flow through forward_at (training).
TEST(GivenPositions, GapsChangeTheLogitsAndTrain) {
  torch::manual_seed(5);
  const torch::Tensor x = tokens();
  const torch::Tensor dense = torch::arange(12, torch::kInt64).expand({2, 12}).contiguous();
  for (const Scheme s : {Scheme::kRope, Scheme::kAlibi}) {
    TransformerLM model = eval_model(small_model(s), 6);
    model->train();
    const torch::Tensor logits = model->forward_at(x, dense * 2);
    EXPECT_GT((logits - model->forward_at(x, dense)).abs().max().item<double>(), 1e-4) << to_string(s);
    logits.sum().backward();
    EXPECT_TRUE(model->parameters().front().grad().defined()) << to_string(s);
  }
}

TEST(GivenPositions, BadPositionsAreErrorsNamingWhatWasExpected) {
  const torch::Tensor x = tokens();
  TransformerLM learned = eval_model(small_model(Scheme::kLearned), 1);  // 64 rows
  const auto error_of = [&](const torch::Tensor& p) {
    try {
      learned->forward_at(x, p);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  const torch::Tensor good = torch::arange(12, torch::kInt64).expand({2, 12}).contiguous();
  EXPECT_NE(error_of(good.to(torch::kInt32)).find("positions must be int64 of the tokens' shape [2, 12]"), std::string::npos);
  EXPECT_NE(error_of(good.narrow(1, 0, 5)).find("tokens' shape"), std::string::npos);
  EXPECT_NE(error_of(good - 1).find("positions must be >= 0, got -1"), std::string::npos);
  EXPECT_NE(error_of(good.flip(1).contiguous()).find("increase strictly"), std::string::npos);
  EXPECT_NE(error_of(good + 60).find("position 71 is past the learned table's 64 rows"), std::string::npos);
  // The model is left as it was: the next forward reads its own positions.
  torch::NoGradGuard no_grad;
  EXPECT_TRUE(torch::equal(learned->forward_at(x, good), learned->forward(x)));
}

}  // namespace
}  // namespace posenc::torch_layer
