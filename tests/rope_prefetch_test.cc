// The RoPE walks' prefetch policy, measured per process (core/src/rope_prefetch_tuner.h): the
// trial schedule, the choice, the calls too small to measure, the environment override, and
// rope_rotate cutting its first large calls in two token ranges without changing a bit.
#include <gtest/gtest.h>

#include <array>
#include <cstring>
#include <random>
#include <vector>

#include "posenc/error.h"
#include "posenc/rope_apply.h"
#include "posenc/rope_kernels.h"
#include "posenc/rope_schedule.h"
#include "rope_kernels_test_support.h"
#include "rope_prefetch_tuner.h"

namespace posenc {
namespace {

using Tuner = RopePrefetchTuner;
constexpr int kTokenMajorF32 = 0, kHeadMajorBf16 = 4;
constexpr int kTrialCalls = Tuner::kRounds * 6;

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
    EXPECT_FALSE(tuner.settled(cls)) << "settled before every candidate was measured, call " << call;
    for (RopePrefetch p : {step.first, step.second})
      tuner.record(cls, p, seconds_per_byte[static_cast<std::size_t>(p)] * (1 + noise(rng)));
  }
}

TEST(RopePrefetch, EachPolicyIsTimedInBothHalvesThenTheFastestIsKept) {
  for (int fastest = 0; fastest < 3; ++fastest) {
    Tuner tuner;
    std::array<double, 3> cost = {3.0, 2.0, 2.5};
    cost[static_cast<std::size_t>(fastest)] = 1.0;
    std::array<std::array<int, 2>, 3> halves{};
    run_trials(tuner, kTokenMajorF32, cost, &halves);
    for (int p = 0; p < 3; ++p) {  // every policy first in as many calls as second
      EXPECT_EQ(halves[static_cast<std::size_t>(p)][0], 2 * Tuner::kRounds) << rope_prefetch_name(static_cast<RopePrefetch>(p));
      EXPECT_EQ(halves[static_cast<std::size_t>(p)][1], 2 * Tuner::kRounds) << rope_prefetch_name(static_cast<RopePrefetch>(p));
    }
    ASSERT_TRUE(tuner.settled(kTokenMajorF32));
    EXPECT_EQ(tuner.policy(kTokenMajorF32), static_cast<RopePrefetch>(fastest));
    const Tuner::Step after = tuner.next(kTokenMajorF32, std::size_t{1} << 30);
    EXPECT_FALSE(after.trial);
    EXPECT_EQ(after.policy, static_cast<RopePrefetch>(fastest));
    // Another class is measured apart: still on its default, still trialled.
    EXPECT_FALSE(tuner.settled(kHeadMajorBf16));
    EXPECT_TRUE(tuner.next(kHeadMajorBf16, std::size_t{1} << 30).trial);
  }
}

// One slow sample (the machine busy for one call) does not outvote the rest: the median decides.
TEST(RopePrefetch, OneSlowSampleDoesNotDecide) {
  Tuner tuner;
  bool spoiled = false;
  for (int call = 0; call < kTrialCalls; ++call) {
    const Tuner::Step step = tuner.next(kTokenMajorF32, std::size_t{1} << 30);
    for (RopePrefetch p : {step.first, step.second}) {
      double cost = p == RopePrefetch::kL2 ? 1.0 : 2.0;
      if (p == RopePrefetch::kL2 && !spoiled) cost = 100.0, spoiled = true;
      tuner.record(kTokenMajorF32, p, cost);
    }
  }
  EXPECT_EQ(tuner.policy(kTokenMajorF32), RopePrefetch::kL2);
}

TEST(RopePrefetch, SmallCallsAreNotTrialledAndTakeTheDefault) {
  Tuner tuner;
  for (int call = 0; call < 3 * kTrialCalls; ++call) {
    const Tuner::Step small = tuner.next(kHeadMajorBf16, Tuner::kMinTrialBytes - 1);
    EXPECT_FALSE(small.trial);
    EXPECT_EQ(small.policy, RopePrefetch::kL1);  // head-major rows: hints, as before any measurement
    EXPECT_EQ(tuner.next(kTokenMajorF32, Tuner::kMinTrialBytes - 1).policy, RopePrefetch::kNone);
  }
  EXPECT_FALSE(tuner.settled(kHeadMajorBf16));
  EXPECT_TRUE(tuner.next(kHeadMajorBf16, Tuner::kMinTrialBytes).trial);
}

TEST(RopePrefetch, AFixedPolicyIsNeverTrialled) {
  const RopePrefetch fixed = RopePrefetch::kL2;
  Tuner tuner(&fixed);
  for (int cls = 0; cls < Tuner::kClasses; ++cls) {
    EXPECT_TRUE(tuner.settled(cls));
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

// The process's own tuner cuts each of the first large calls of a class in two token ranges under
// two policies: every token is still rotated once, to the scalar reference's bits, and the class
// settles. q of 16 MiB and k of 4 MiB, in both memory orders (both walks) and two dtypes.
TEST(RopePrefetch, TrialCallsRotateEveryTokenOnceToTheReferencesBits) {
  RopeParams rp;
  rp.head_dim = 64;
  const RopeSchedule schedule = compute_schedule(rp);
  const RopeApplyParams p = rope_apply_params(schedule, RopeLayout::kHalfSplit);
  const RopeTable table(p, 16385);  // with a table, head-major q and k take the grouped walk
  RopeKernelOptions options;
  options.threads = 2;
  options.table = &table;
  std::mt19937 rng(11);
  {  // First one group of 4 head-major heads on 2 threads: the grouped walk cuts each of a
     // trial's two token ranges in slices.
    const int tokens = 16385;
    auto q = rope_kernels_test::random_buffer(DType::kF32, static_cast<std::size_t>(tokens) * 4 * 64, rng);
    const RopeTensor qv = bhsd(q.data(), DType::kF32, {1, tokens, 4, 64});
    ASSERT_GE(q.bytes.size(), Tuner::kMinTrialBytes);
    for (int call = 0; call < 2; ++call) {
      auto q_ref = q;
      rope_apply_reference(rope_kernels_test::with_data(qv, q_ref.data()), {}, p);
      rope_rotate(qv, nullptr, {}, p, options);
      ASSERT_EQ(q.bytes, q_ref.bytes) << "sliced, call " << call;
    }
  }
  for (DType dtype : {DType::kF32, DType::kBF16})
    for (bool head_major : {false, true}) {
      SCOPED_TRACE(std::string(to_string(dtype)) + (head_major ? " bhsd" : " bshd"));
      const int tokens = dtype == DType::kF32 ? 2049 : 4097, heads = 32, kv_heads = 8;  // odd: unequal halves
      const RopeShape qs{1, tokens, heads, 64}, ks{1, tokens, kv_heads, 64};
      auto q = rope_kernels_test::random_buffer(dtype, static_cast<std::size_t>(tokens) * heads * 64, rng);
      auto k = rope_kernels_test::random_buffer(dtype, static_cast<std::size_t>(tokens) * kv_heads * 64, rng);
      const RopeTensor qv = head_major ? bhsd(q.data(), dtype, qs) : bshd(q.data(), dtype, qs);
      const RopeTensor kv = head_major ? bhsd(k.data(), dtype, ks) : bshd(k.data(), dtype, ks);
      ASSERT_GE(q.bytes.size() + k.bytes.size(), Tuner::kMinTrialBytes);
      // Alone (as ctest runs each test) the class starts unmeasured; after other tests in one
      // process it may be settled already, and then the calls below are not trials.
      const bool measured_before = rope_prefetch_choice(qv).settled;
      for (int call = 0; call < kTrialCalls; ++call) {
        auto q_ref = q, k_ref = k;
        rope_apply_reference(rope_kernels_test::with_data(qv, q_ref.data()), {}, p);
        rope_apply_reference(rope_kernels_test::with_data(kv, k_ref.data()), {}, p);
        rope_rotate(qv, &kv, {}, p, options);
        ASSERT_EQ(q.bytes, q_ref.bytes) << "call " << call;
        ASSERT_EQ(k.bytes, k_ref.bytes) << "call " << call;
      }
      if (!measured_before) EXPECT_TRUE(rope_prefetch_choice(qv).settled) << "the trial calls were not recorded";
    }
}

}  // namespace
}  // namespace posenc
