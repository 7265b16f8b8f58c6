// The RoPE walks' prefetch policy, measured per process (core/src/rope_prefetch_tuner.h): the
// trial schedule, the choice, the calls too small to measure, the environment override, and
// rope_rotate and rope_shift cutting their first calls in two token ranges without changing a bit
// (the RopeKernels suites check every layout, dtype, walk and position mode so: their fixture has
// every call of two or more tokens measured).
#include <gtest/gtest.h>

#include <array>
#include <cstring>
#include <random>
#include <vector>

#include "posenc/error.h"
#include "posenc/rope_apply.h"
#include "posenc/rope_kernels.h"
#include "posenc/rope_schedule.h"
#include "posenc/rope_shift.h"
#include "rope_kernels_test_support.h"
#include "rope_params_fixtures.h"
#include "posenc/host_cache.h"
#include "rope_prefetch_tuner.h"

namespace posenc {
namespace {

using Tuner = RopePrefetchTuner;
using rope_kernels_test::RopeKernels;
const int kTokenMajorF32 = rope_prefetch_class(RopeWalk::kTokenMajor, DType::kF32);
const int kHeadMajorBf16 = rope_prefetch_class(RopeWalk::kHeadMajorGroups, DType::kBF16);
constexpr int kTrialCalls = Tuner::kTrialCalls;
constexpr std::size_t kMinBytes = std::size_t{1} << 20;

// Runs the trial calls of class cls, recording seconds_per_byte[policy] (times 1 + noise).
void run_trials(Tuner& tuner, int cls, const std::array<double, 3>& seconds_per_byte, std::array<std::array<int, 2>, 3>* halves) {
  std::mt19937 rng(3);
  std::uniform_real_distribution<double> noise(0.0, 0.05);
  for (int call = 0; call < kTrialCalls; ++call) {
    const Tuner::Step step = tuner.next(cls, std::size_t{1} << 30);
    ASSERT_TRUE(step.trial) << "call " << call;
    ASSERT_NE(step.first, step.second) << "call " << call;
    ++(*halves)[static_cast<std::size_t>(step.first)][0];
    ++(*halves)[static_cast<std::size_t>(step.second)][1];
    EXPECT_FALSE(tuner.choice(cls).settled) << "settled before every candidate was measured, call " << call;
    for (RopePrefetch p : {step.first, step.second})
      tuner.record(cls, p, seconds_per_byte[static_cast<std::size_t>(p)] * (1 + noise(rng)));
  }
}

TEST(RopePrefetch, EachPolicyIsTimedInBothHalvesThenTheFastestIsKept) {
  for (int fastest = 0; fastest < 3; ++fastest) {
    Tuner tuner(nullptr, kMinBytes);
    std::array<double, 3> cost = {3.0, 2.0, 2.5};
    cost[static_cast<std::size_t>(fastest)] = 1.0;
    std::array<std::array<int, 2>, 3> halves{};
    run_trials(tuner, kTokenMajorF32, cost, &halves);
    for (int p = 0; p < 3; ++p) {  // every policy first in as many calls as second
      EXPECT_EQ(halves[static_cast<std::size_t>(p)][0], 2 * Tuner::kRounds) << rope_prefetch_name(static_cast<RopePrefetch>(p));
      EXPECT_EQ(halves[static_cast<std::size_t>(p)][1], 2 * Tuner::kRounds) << rope_prefetch_name(static_cast<RopePrefetch>(p));
    }
    ASSERT_TRUE(tuner.choice(kTokenMajorF32).settled);
    EXPECT_EQ(tuner.choice(kTokenMajorF32).policy, static_cast<RopePrefetch>(fastest));
    const Tuner::Step after = tuner.next(kTokenMajorF32, std::size_t{1} << 30);
    EXPECT_FALSE(after.trial);
    EXPECT_EQ(after.policy, static_cast<RopePrefetch>(fastest));
    // Another class is measured apart: still on its default, still trialled.
    EXPECT_FALSE(tuner.choice(kHeadMajorBf16).settled);
    EXPECT_TRUE(tuner.next(kHeadMajorBf16, std::size_t{1} << 30).trial);
  }
}

// The policy a fresh tuner keeps when each sample of policy p is sample(p, n), n counting p's
// samples from 0.
template <typename Sample>
RopePrefetch kept_for(Sample sample) {
  Tuner tuner(nullptr, kMinBytes);
  std::array<int, 3> used{};
  for (int call = 0; call < kTrialCalls; ++call) {
    const Tuner::Step step = tuner.next(kTokenMajorF32, std::size_t{1} << 30);
    for (RopePrefetch p : {step.first, step.second}) tuner.record(kTokenMajorF32, p, sample(p, used[static_cast<std::size_t>(p)]++));
  }
  EXPECT_TRUE(tuner.choice(kTokenMajorF32).settled);
  return tuner.choice(kTokenMajorF32).policy;
}

// One slow sample (the machine busy for one call) does not outvote the rest: the lower quartile
// of each policy's samples decides.
TEST(RopePrefetch, OneSlowSampleDoesNotDecide) {
  EXPECT_EQ(kept_for([](RopePrefetch p, int n) { return p != RopePrefetch::kL2 ? 2.0 : n == 0 ? 100.0 : 1.0; }), RopePrefetch::kL2);
}

// Samples as one run on a shared Zen 4 host recorded them (ns a byte, float32 [B, S, H, D], one
// thread): "none" slowed by other work in half its calls, "l2" steady and slower. The median
// chose l2 (0.87 of the ceiling where none reaches 0.90-1.00); the lower quartile chooses none.
TEST(RopePrefetch, APolicySlowedByOtherWorkInHalfItsCallsStillWins) {
  const std::array<std::array<double, 8>, 3> samples = {{{0.060, 0.066, 0.072, 0.048, 0.083, 0.066, 0.049, 0.051},    // none
                                                         {0.084, 0.076, 0.098, 0.059, 0.094, 0.097, 0.061, 0.068},    // l1
                                                         {0.067, 0.066, 0.064, 0.068, 0.064, 0.062, 0.053, 0.060}}};  // l2
  const auto recorded = [&](RopePrefetch p, int n) { return samples[static_cast<std::size_t>(p)][static_cast<std::size_t>(n)] * 1e-9; };
  EXPECT_EQ(kept_for(recorded), RopePrefetch::kNone);
}

// Nor one fast sample: a policy slower in most of its samples is not kept for one lucky half.
TEST(RopePrefetch, OneFastSampleDoesNotDecide) {
  EXPECT_EQ(kept_for([](RopePrefetch p, int n) { return p == RopePrefetch::kNone ? 1.0 : p == RopePrefetch::kL1 && n == 0 ? 0.1 : 2.0; }),
            RopePrefetch::kNone);
}

TEST(RopePrefetch, SmallCallsAreNotTrialledAndTakeTheDefault) {
  Tuner tuner(nullptr, kMinBytes);
  for (int call = 0; call < 3 * kTrialCalls; ++call) {
    const Tuner::Step small = tuner.next(kHeadMajorBf16, kMinBytes - 1);
    EXPECT_FALSE(small.trial);
    EXPECT_EQ(small.policy, RopePrefetch::kL1);  // head-major rows: hints, as before any measurement
    EXPECT_EQ(tuner.next(kTokenMajorF32, kMinBytes - 1).policy, RopePrefetch::kNone);
  }
  EXPECT_FALSE(tuner.choice(kHeadMajorBf16).settled);
  EXPECT_TRUE(tuner.next(kHeadMajorBf16, kMinBytes).trial);
  // The process's threshold: the last-level cache's size, at least 16 MiB.
  EXPECT_GE(rope_prefetch_trial_bytes(), std::size_t{16} << 20);
  EXPECT_GE(rope_prefetch_trial_bytes(), last_level_cache_bytes());
}

TEST(RopePrefetch, AFixedPolicyIsNeverTrialled) {
  const RopePrefetch fixed = RopePrefetch::kL2;
  Tuner tuner(&fixed, kMinBytes);
  for (int cls = 0; cls < Tuner::kClasses; ++cls) {
    EXPECT_TRUE(tuner.choice(cls).settled);
    const Tuner::Step step = tuner.next(cls, std::size_t{1} << 30);
    EXPECT_FALSE(step.trial);
    EXPECT_EQ(step.policy, RopePrefetch::kL2);
  }
}

TEST(RopePrefetch, TheEnvironmentVariableIsAutoOrAPolicyElseAnErrorNamingIt) {
  RopePrefetch fixed = RopePrefetch::kNone;
  EXPECT_FALSE(parse_rope_prefetch(nullptr, &fixed));
  EXPECT_FALSE(parse_rope_prefetch("auto", &fixed));
  for (const char* name : {"none", "l1", "l2"}) {
    ASSERT_TRUE(parse_rope_prefetch(name, &fixed)) << name;
    EXPECT_STREQ(rope_prefetch_name(fixed), name);
  }
  for (const char* bad : {"", "L1", "l3", "auto "}) {
    try {
      parse_rope_prefetch(bad, &fixed);
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(std::string("got '") + bad + "'"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("auto, none, l1 or l2"), std::string::npos) << e.what();
    }
  }
}

// rope_rotate: a class settles on exactly its twelfth measured call (two halves recorded per
// call, each policy in four of them), with every token rotated once to the reference's bits;
// rope_prefetch_choice reports that class's choice, not another's.
TEST_F(RopeKernels, ACallsClassSettlesOnItsTwelfthMeasuredCall) {
  const RopeSchedule schedule = testing::plain_schedule(64);
  const RopeApplyParams p = rope_apply_params(schedule, RopeLayout::kHalfSplit);
  std::mt19937 rng(11);
  const int batch = 2, tokens = 33, heads = 3;
  auto q = rope_kernels_test::random_buffer(DType::kBF16, std::size_t{batch} * tokens * heads * 64, rng);
  const RopeTensor qv = bshd(q.data(), DType::kBF16, {batch, tokens, heads, 64});
  const RopeTensor head_major = bhsd(q.data(), DType::kBF16, {batch, tokens, heads, 64});
  RopeKernelOptions options;
  options.threads = 2;
  for (int call = 0; call < kTrialCalls; ++call) {
    EXPECT_FALSE(rope_prefetch_choice(qv, p, options).settled) << "call " << call;
    auto q_ref = q;
    rope_apply_reference(rope_kernels_test::with_data(qv, q_ref.data()), {}, p);
    rope_rotate(qv, nullptr, {}, p, options);
    ASSERT_EQ(q.bytes, q_ref.bytes) << "call " << call;
  }
  EXPECT_TRUE(rope_prefetch_choice(qv, p, options).settled);
  EXPECT_FALSE(rope_prefetch_choice(head_major, p, options).settled);
}

// rope_shift goes through the same dispatch: its first calls are split too.
TEST_F(RopeKernels, ShiftsCutInTwoTokenRangesEqualTheReference) {
  const RopeSchedule schedule = testing::plain_schedule(64);
  std::mt19937 rng(12);
  for (DType dtype : {DType::kF32, DType::kBF16})
    for (bool head_major : {false, true}) {
      const int batch = 2, tokens = 41, heads = 2;
      auto k = rope_kernels_test::random_buffer(dtype, std::size_t{batch} * tokens * heads * 64, rng), k_ref = k;
      const RopeShape shape{batch, tokens, heads, 64};
      const RopeTensor kv = head_major ? bhsd(k.data(), dtype, shape) : bshd(k.data(), dtype, shape);
      RopeShiftParams shift;
      shift.rope = rope_apply_params(schedule, RopeLayout::kHalfSplit);
      shift.delta = -7;
      shift.begin = 3;
      shift.end = tokens - 2;
      for (int call = 0; call < 3; ++call) {
        rope_shift_reference(rope_kernels_test::with_data(kv, k_ref.data()), shift);
        rope_shift(kv, shift, {2, nullptr});
        ASSERT_EQ(k.bytes, k_ref.bytes) << to_string(dtype) << (head_major ? " bhsd" : " bshd") << " call " << call;
      }
    }
}

}  // namespace
}  // namespace posenc
