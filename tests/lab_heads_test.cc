// `lab heads`: the attention mass a sort model's heads put on each offset, against the weights
// of one head read one sequence at a time (attention_weights, the picture's path).
#include <gtest/gtest.h>

#include <cmath>

#include "lab_support.h"
#include "posenc_lab/sort_task.h"

namespace posenc::lab {
namespace {

TEST(LabHeads, MassByOffsetIsTheMeanOfEachDiagonalOfTheHeadsWeights) {
  SortConfig c = test::tiny_sort("lab-heads");
  c.schemes = {"rope"};
  run_sort(c);
  HeadOffsetsRequest r;
  r.model_path = c.training.out_dir + "/sort-rope.pt";
  r.digits = 5;
  r.sequences = 1;
  const std::vector<HeadOffsets> heads = sort_head_offsets(r);
  ASSERT_EQ(heads.size(), 2u);  // 1 layer x 2 heads
  const std::vector<long> tokens = sort_example(r.digits, r.seed * 7919ull);
  for (const HeadOffsets& h : heads) {
    int size = 0;
    const std::vector<double> w = attention_weights({r.model_path, tokens, h.layer, h.head}, &size);
    ASSERT_EQ(size, 2 * r.digits + 1);
    ASSERT_EQ(h.mass.size(), static_cast<std::size_t>(size));
    for (int o = 0; o < size; ++o) {
      double sum = 0;
      for (int i = o; i < size; ++i) sum += w[static_cast<std::size_t>(i * size + i - o)];
      EXPECT_NEAR(h.mass[static_cast<std::size_t>(o)], sum / (size - o), 1e-6) << "head " << h.head << " offset " << o;
    }
    EXPECT_DOUBLE_EQ(h.previous(), h.mass[1]);
    EXPECT_DOUBLE_EQ(h.top_mass, *std::max_element(h.mass.begin(), h.mass.end()));
    EXPECT_DOUBLE_EQ(h.mass[static_cast<std::size_t>(h.top_offset)], h.top_mass);
  }
  // The first query sees only itself: all of its mass is on offset 0, so mass[0] >= 1 / size.
  EXPECT_GE(heads[0].mass[0], 1.0 / (2 * r.digits + 1));
}

TEST(LabHeads, AModelOfAnotherTaskAndBadSizesNameTheValue) {
  ExtrapolateConfig e = test::tiny("lab-heads-lm", {"alibi"});
  e.training.steps = 2;
  run_extrapolate(e);
  HeadOffsetsRequest r;
  r.model_path = e.training.out_dir + "/alibi.pt";
  EXPECT_HAS(test::error_of([&] { sort_head_offsets(r); }), "is not a sort model");
  r.digits = 0;
  EXPECT_HAS(test::error_of([&] { sort_head_offsets(r); }), "--digits must be in [1,");
}

}  // namespace
}  // namespace posenc::lab
