// Transformer-XL's position term in training: the weight gradient of its projection of R.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <numeric>
#include <vector>

#include "posenc_torch/positional.h"

namespace posenc::torch_layer {
namespace {

// r_net keeps its input (R's rows) for the weight's gradient: the rows must be the layer's own
// copy. Memory freed after the forward and filled with other values before the backward leaves
// the gradient as it is (position_scores once gave r_net a view of a vector that died with the
// call: a CPU model's XL gradients were read from freed memory).
TEST(TorchAgainstCore, TransformerXlWeightGradientReadsItsOwnRows) {
  torch::manual_seed(4);
  XLRelativePosition xl(64, 2, 8);
  const torch::Tensor q = torch::randn({1, 2, 40, 8});
  const torch::Tensor qpos = torch::arange(40, torch::kInt64).view({1, 40}), kpos = qpos;
  const auto weight_gradient = [&](bool clobber) {
    xl->zero_grad();
    const torch::Tensor y = xl->position_scores(q, qpos, kpos).sum();
    if (clobber)
      for (int i = 0; i < 8; ++i) {  // the size of the rows' vector: 40 distances x 64 floats
        std::vector<float> other(40 * 64, 1e20f + static_cast<float>(i));
        EXPECT_GT(std::accumulate(other.begin(), other.end(), 0.0), 0.0);
      }
    y.backward();
    return xl->r_net->weight.grad().clone();
  };
  const torch::Tensor at_once = weight_gradient(false);
  EXPECT_TRUE(torch::equal(weight_gradient(true), at_once));
  EXPECT_GT(at_once.abs().max().item<double>(), 0.0);
}

}  // namespace
}  // namespace posenc::torch_layer
