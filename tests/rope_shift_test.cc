// rope_shift: re-rotating post-RoPE keys by a position delta. The SIMD shift equals its scalar
// reference bit for bit on every target; a shift by delta equals rotating the raw keys at
// p + delta from scratch within a measured bound (f32: float rounding; bf16 / f16: one more
// rounding to the dtype); only the range moves; a sink + window cache after a run of evictions
// equals one rebuilt from the survivors at their slot positions.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "posenc/error.h"
#include "posenc/mrope.h"
#include "posenc/rope_kernels.h"
#include "posenc/rope_shift.h"

#include "attention_test_support.h"
#include "rope_params_fixtures.h"

namespace posenc {
namespace {

using attention_test::at;
using attention_test::make;
using attention_test::on_every_target;
using attention_test::Tensor4;

// A copy of t (its own bytes, the same memory order).
Tensor4 copy_of(const Tensor4& t, bool head_major) {
  const RopeTensor& v = t.view;
  Tensor4 c = make(t.dtype, v.batch, v.tokens, v.heads, v.head_dim, head_major, nullptr);
  std::copy(t.bytes.begin(), t.bytes.end(), c.bytes.begin());
  return c;
}

// The unit a dtype rounds to, relative: half an ulp at 1 (f32 2^-24, bf16 2^-8, f16 2^-11).
double unit_of(DType dtype) { return dtype == DType::kF32 ? 0x1p-24 : dtype == DType::kBF16 ? 0x1p-8 : 0x1p-11; }

// The largest |a - b| over tokens [begin, end), in units of unit_of(dtype) times the norm of the
// element's rotation pair in b (pairs as stored: interleaved (2j, 2j+1), else (j, j + r/2)).
double worst_in_units(const Tensor4& a, const Tensor4& b, int begin, int end, int rotary, bool interleaved) {
  const RopeTensor& x = b.view;
  double worst = 0;
  for (int n = 0; n < x.batch; ++n)
    for (int t = begin; t < end; ++t)
      for (int h = 0; h < x.heads; ++h)
        for (int c = 0; c < rotary; ++c) {
          const int mate = interleaved ? (c ^ 1) : c < rotary / 2 ? c + rotary / 2 : c - rotary / 2;
          const double norm = std::hypot(double{at(x, n, t, h, c)}, double{at(x, n, t, h, mate)});
          const double diff = std::abs(double{at(a.view, n, t, h, c)} - at(x, n, t, h, c));
          worst = std::max(worst, diff / (std::max(norm, 1e-30) * unit_of(x.dtype)));
        }
  return worst;
}

RopeTensor tokens_of(const RopeTensor& x, int begin, int end) {
  RopeTensor r = x;
  r.data = static_cast<std::uint8_t*>(x.data) + begin * x.token_stride * dtype_size(x.dtype);
  r.tokens = end - begin;
  return r;
}

TEST(RopeShift, EqualsRotatingAtTheShiftedPositionInEveryLayoutAndDtype) {
  std::mt19937 rng(11);
  const int B = 2, T = 37, H = 3, D = 40;  // D 40, rotary 32 with YaRN's partial: tails and pass-through
  RopeParams rp = testing::yarn_params(4.0, 64);  // attention factor 1.1386: must not be applied twice
  rp.head_dim = D;
  rp.partial_rotary_factor = 0.8;
  const RopeSchedule sched = compute_schedule(rp);
  ASSERT_GT(sched.attention_factor, 1.1);
  const std::vector<std::uint8_t> axes = mrope_axis_map({6, 5, 5}, false), one_axis;
  double worst[3] = {0, 0, 0};
  int cases = 0;
  const std::size_t targets = on_every_target([&] {
    for (RopeLayout layout : {RopeLayout::kHalfSplit, RopeLayout::kInterleaved, RopeLayout::kDeepSeekV3})
      for (DType dtype : {DType::kF32, DType::kBF16, DType::kF16})
        for (const std::int64_t delta : {std::int64_t{300}, std::int64_t{-257}, std::int64_t{1000}, std::int64_t{1}})
          for (const bool mrope : {false, true}) {
            SCOPED_TRACE(std::string(to_string(layout)) + " " + to_string(dtype) + " delta " + std::to_string(delta) +
                         (mrope ? " M-RoPE" : ""));
            const bool head_major = cases % 2;
            RopeApplyParams p = rope_apply_params(sched.inv_freq, sched.attention_factor, layout,
                                                  mrope ? axes : one_axis);
            PositionIds at_p = PositionIds::implicit(1000);  // token t at 1000 + t, on every axis
            at_p.axes = mrope ? 3 : 1;
            PositionIds moved = at_p;
            moved.offset += delta;
            const int begin = 3, end = T - 2;
            const Tensor4 raw = make(dtype, B, T, H, D, head_major, &rng);
            Tensor4 fast = copy_of(raw, head_major), scratch = copy_of(raw, head_major);
            rope_rotate(fast.view, nullptr, at_p, p);
            Tensor4 slow = copy_of(fast, head_major), before = copy_of(fast, head_major);
            const RopeShiftParams shift{p, delta, begin, end};
            KernelOptions options;
            options.threads = 2;
            rope_shift(fast.view, shift, options);
            rope_shift_reference(slow.view, shift);
            EXPECT_EQ(fast.bytes, slow.bytes) << "SIMD and reference differ";
            rope_apply_reference(tokens_of(scratch.view, begin, end), [&] {
              PositionIds m = moved;
              m.offset += begin;  // the view starts at token `begin`
              return m;
            }(), p);
            const bool interleaved = layout == RopeLayout::kInterleaved;
            const double units = worst_in_units(fast, scratch, begin, end, 2 * p.num_freqs, interleaved);
            double& w = worst[dtype == DType::kF32 ? 0 : dtype == DType::kBF16 ? 1 : 2];
            w = std::max(w, units);
            // Outside the range: untouched, bit for bit.
            for (int n = 0; n < B; ++n)
              for (int t : {0, 1, 2, T - 2, T - 1})
                for (int h = 0; h < H; ++h)
                  for (int c = 0; c < D; ++c) ASSERT_EQ(at(fast.view, n, t, h, c), at(before.view, n, t, h, c));
            ++cases;
          }
  });
  EXPECT_EQ(cases, static_cast<int>(targets) * 3 * 3 * 4 * 2);
  // Measured on the 5 targets of a Zen 4 host: f32 at most 5.6 units of 2^-24 x the pair's norm
  // (2.8 ulp); bf16 and f16 at most 2.0 units of their half-ulp, one ulp of the pair's magnitude
  // (the shifted value is rounded to the dtype twice where the fresh one is rounded once).
  std::printf("rope_shift: %d cases on %zu targets; worst vs a fresh rotation at p + delta: f32 %.2f x 2^-24, bf16 %.2f x 2^-8, "
              "f16 %.2f x 2^-11 (of the pair's norm)\n", cases, targets, worst[0], worst[1], worst[2]);
  EXPECT_LE(worst[0], 8.0);
  EXPECT_LE(worst[1], 2.5);
  EXPECT_LE(worst[2], 2.5);
}

// A StreamingLLM cache: `sinks` first tokens kept, the rest a window of slots. Tokens arrive, and
// when the cache is full the oldest non-sink tokens are evicted: the survivors move down to close
// the gap (a row copy) and are re-rotated by the gap (rope_shift), so every cached key sits at its
// slot's position. Raw keys stay known to the test, which rebuilds the cache from scratch.
TEST(RopeShift, ACacheAfterEvictionsEqualsOneRebuiltFromTheSurvivors) {
  std::mt19937 rng(12);
  const int H = 2, D = 64, capacity = 48, sinks = 4, evict = 10, arrivals = 200;
  const RopeSchedule sched = testing::plain_schedule(D);
  for (DType dtype : {DType::kF32, DType::kBF16})
    for (const bool head_major : {false, true}) {
      SCOPED_TRACE(std::string(to_string(dtype)) + (head_major ? " bhsd" : " bshd"));
      const RopeApplyParams p = rope_apply_params(sched);
      const Tensor4 stream = make(dtype, 1, arrivals, H, D, false, &rng);  // the raw keys, in arrival order
      Tensor4 cache = make(dtype, 1, capacity, H, D, head_major, nullptr);
      std::vector<int> slot_token;  // which arrival each slot holds
      const std::size_t es = dtype_size(dtype);
      const auto copy_token = [&](const RopeTensor& from, int ft, const RopeTensor& to, int tt) {
        for (int h = 0; h < H; ++h)
          std::memcpy(static_cast<std::uint8_t*>(to.data) + (tt * to.token_stride + h * to.head_stride) * es,
                      static_cast<const std::uint8_t*>(from.data) + (ft * from.token_stride + h * from.head_stride) * es, D * es);
      };
      int shifts = 0;
      for (int a = 0; a < arrivals; ++a) {
        if (static_cast<int>(slot_token.size()) == capacity) {  // evict slots [sinks, sinks + evict)
          for (int s = sinks + evict; s < capacity; ++s) copy_token(cache.view, s, cache.view, s - evict);
          slot_token.erase(slot_token.begin() + sinks, slot_token.begin() + sinks + evict);
          rope_shift(cache.view, {p, -evict, sinks, capacity - evict});
          ++shifts;
        }
        const int slot = static_cast<int>(slot_token.size());
        copy_token(stream.view, a, cache.view, slot);
        RopeTensor one = tokens_of(cache.view, slot, slot + 1);
        rope_rotate(one, nullptr, PositionIds::implicit(slot), p);  // a new key at its slot's position
        slot_token.push_back(a);
      }
      ASSERT_GT(shifts, 10);
      Tensor4 rebuilt = make(dtype, 1, capacity, H, D, head_major, nullptr);
      for (int s = 0; s < capacity; ++s) copy_token(stream.view, slot_token[static_cast<std::size_t>(s)], rebuilt.view, s);
      rope_rotate(rebuilt.view, nullptr, PositionIds::implicit(0), p);
      for (int s = 0; s < sinks; ++s)  // never shifted: the same bits
        for (int h = 0; h < H; ++h)
          for (int c = 0; c < D; ++c) ASSERT_EQ(at(cache.view, 0, s, h, c), at(rebuilt.view, 0, s, h, c));
      // A slot shifted k times carries k more roundings: the oldest window slot here about
      // (capacity - sinks) / evict = 4 shifts. Measured: f32 5.2 units of 2^-24, bf16 3.8 of 2^-8.
      const double units = worst_in_units(cache, rebuilt, 0, capacity, D, false);
      std::printf("rope_shift: cache after %d evictions (%s): worst %.2f units\n", shifts, to_string(dtype), units);
      EXPECT_LE(units, dtype == DType::kF32 ? 12.0 : 6.0);
    }
}

TEST(RopeShift, ZeroDeltaAndAnEmptyRangeLeaveTheKeys) {
  std::mt19937 rng(13);
  const RopeSchedule sched = testing::plain_schedule(16);
  const RopeApplyParams p = rope_apply_params(sched);
  Tensor4 k = make(DType::kF32, 1, 5, 2, 16, false, &rng);
  const std::vector<std::uint8_t> before = k.bytes;
  rope_shift(k.view, {p, 0, 0, -1});
  rope_shift(k.view, {p, 99, 2, 2});
  EXPECT_EQ(k.bytes, before);
}

TEST(RopeShift, BadInputIsAnErrorNamingIt) {
  std::mt19937 rng(14);
  const RopeSchedule sched = testing::plain_schedule(16);
  RopeApplyParams p = rope_apply_params(sched);
  Tensor4 k = make(DType::kF32, 1, 5, 2, 16, false, &rng);
  const auto expect_message = [&](const RopeShiftParams& s, const std::string& fragment, const KernelOptions& o = {}) {
    try {
      rope_shift(k.view, s, o);
      ADD_FAILURE() << "no error for " << fragment;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
    }
  };
  expect_message({p, std::int64_t{1} << 31, 0, -1}, "delta 2147483648 must be in");
  expect_message({p, std::numeric_limits<std::int64_t>::min(), 0, -1}, "delta -9223372036854775808");
  expect_message({p, 3, 4, 2}, "token range [4, 2)");
  expect_message({p, 3, 0, 6}, "[0, 5]");
  expect_message({p, 3, -1, 2}, "token range [-1, 2)");
  const RopeTable table(p);
  KernelOptions with_table;
  with_table.table = &table;
  expect_message({p, 3, 0, -1}, "options.table must be null", with_table);
  p.direction = -1;
  expect_message({p, 3, 0, -1}, "rope.direction must be +1");
  p.direction = 1;
  std::vector<float> fast(8, 1e6f);  // 2^31 radians reached at |delta| ~ 2147
  expect_message({rope_apply_params(fast, 1.0, RopeLayout::kHalfSplit), 5000, 0, -1}, "beyond 2^31");
}

}  // namespace
}  // namespace posenc
