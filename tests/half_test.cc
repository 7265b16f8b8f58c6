// bf16 / f16 conversions: round to nearest even, specials, and agreement with the exact value.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "posenc/half.h"

namespace posenc {
namespace {

TEST(Half, F16RoundTripsEveryHalf) {
  for (std::uint32_t h = 0; h < 0x10000; ++h) {
    const std::uint16_t bits = static_cast<std::uint16_t>(h);
    const float f = f16_to_float(bits);
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(f16_to_float(float_to_f16(f))));
      continue;
    }
    EXPECT_EQ(float_to_f16(f), bits) << std::hex << h;
  }
}

TEST(Half, F16RoundsToNearestEven) {
  EXPECT_EQ(float_to_f16(1.0f + 0x1p-11f), 0x3c00);          // tie: to even (1.0)
  EXPECT_EQ(float_to_f16(1.0f + 3 * 0x1p-11f), 0x3c02);      // tie: to even (1 + 2^-9)
  EXPECT_EQ(float_to_f16(1.0f + 0x1p-11f + 0x1p-20f), 0x3c01);
  EXPECT_EQ(float_to_f16(65504.0f), 0x7bff);
  EXPECT_EQ(float_to_f16(65519.0f), 0x7bff);
  EXPECT_EQ(float_to_f16(65520.0f), 0x7c00);  // overflow to inf
  EXPECT_EQ(float_to_f16(-std::numeric_limits<float>::infinity()), 0xfc00);
  EXPECT_EQ(float_to_f16(0x1p-25f), 0x0000);  // tie below the smallest subnormal: to even (0)
  EXPECT_EQ(float_to_f16(0x1p-24f), 0x0001);
  EXPECT_EQ(float_to_f16(3 * 0x1p-25f), 0x0002);  // 1.5 ulp: tie to even
  EXPECT_EQ(float_to_f16(-0.0f), 0x8000);
}

TEST(Half, Bf16RoundsToNearestEvenAndKeepsNaN) {
  EXPECT_EQ(float_to_bf16(1.0f), 0x3f80);
  EXPECT_EQ(float_to_bf16(bits_float(0x3f808000u)), 0x3f80);  // tie: to even
  EXPECT_EQ(float_to_bf16(bits_float(0x3f818000u)), 0x3f82);  // tie: to even (up)
  EXPECT_EQ(float_to_bf16(bits_float(0x3f808001u)), 0x3f81);
  EXPECT_TRUE(std::isnan(bf16_to_float(float_to_bf16(bits_float(0x7fffffffu)))));
  EXPECT_TRUE(std::isnan(bf16_to_float(float_to_bf16(bits_float(0xffffffffu)))));
  EXPECT_EQ(bf16_to_float(float_to_bf16(3.0f)), 3.0f);
}

}  // namespace
}  // namespace posenc
