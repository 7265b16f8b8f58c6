// The libtorch layer's resize_position_grid: the core's numbers (position_grid.h) as a tensor,
// equal to torch's own interpolate for bicubic, Idefics3's rows gathered for bucket.
#include <gtest/gtest.h>

#include "posenc/error.h"
#include "posenc_torch/positional.h"

namespace posenc::torch_layer {
namespace {

TEST(TorchPositionGrid, BicubicIsTorchsInterpolateAndBucketGathersRows) {
  torch::manual_seed(4);
  const torch::Tensor table = torch::randn({16, 16, 8});
  const torch::Tensor got = resize_position_grid(table, 24, 37, GridResize::kBicubic);
  namespace F = torch::nn::functional;
  const torch::Tensor want = F::interpolate(table.permute({2, 0, 1}).unsqueeze(0),
                                            F::InterpolateFuncOptions()
                                                .size(std::vector<std::int64_t>{24, 37})
                                                .mode(torch::kBicubic)
                                                .align_corners(false))
                                 .squeeze(0)
                                 .permute({1, 2, 0});
  ASSERT_EQ(got.sizes(), want.sizes());
  EXPECT_LE((got - want).abs().max().item<double>(), 1e-5);
  const torch::Tensor rows = resize_position_grid(table, 8, 5, GridResize::kBucket);
  const std::vector<int> r = bucket_rows(16, 8, DType::kF32), c = bucket_rows(16, 5, DType::kF32);
  for (int i = 0; i < 8; ++i)
    for (int j = 0; j < 5; ++j) EXPECT_TRUE(torch::equal(rows[i][j], table[r[i]][c[j]]));
}

TEST(TorchPositionGrid, BadTablesAreErrors) {
  EXPECT_THROW(resize_position_grid(torch::zeros({4, 4}), 2, 2, GridResize::kBicubic), Error);
  EXPECT_THROW(resize_position_grid(torch::zeros({4, 4, 2}, torch::kInt64), 2, 2, GridResize::kBicubic), Error);
  EXPECT_THROW(resize_position_grid(torch::zeros({4, 4, 2}).requires_grad_(), 2, 2, GridResize::kBicubic), Error);
  EXPECT_THROW(resize_position_grid(torch::zeros({4, 4, 2}), 0, 2, GridResize::kBicubic), Error);
}

}  // namespace
}  // namespace posenc::torch_layer
