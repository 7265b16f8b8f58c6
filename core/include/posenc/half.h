// bfloat16 and float16 storage: scalar conversions, round-to-nearest-even both ways down.
// The SIMD kernels convert with the same rounding, so their results equal the scalar
// reference bit for bit.
#pragma once

#include <cstdint>
#include <cstring>

#include "posenc/names.h"

namespace posenc {

enum class DType { kF32, kBF16, kF16 };

POSENC_ENUM_NAMES(DType, "dtype", {DType::kF32, "f32"}, {DType::kBF16, "bf16"}, {DType::kF16, "f16"});

inline std::size_t dtype_size(DType t) { return t == DType::kF32 ? 4 : 2; }

inline std::uint32_t float_bits(float f) {
  std::uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
inline float bits_float(std::uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

inline float bf16_to_float(std::uint16_t h) { return bits_float(static_cast<std::uint32_t>(h) << 16); }

// Round to nearest even; NaN stays a (quiet) NaN with its sign.
inline std::uint16_t float_to_bf16(float f) {
  const std::uint32_t u = float_bits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>((u >> 16) | 0x40u);
  return static_cast<std::uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

float f16_to_float(std::uint16_t h);
std::uint16_t float_to_f16(float f);  // round to nearest even, overflow to inf, subnormals kept

}  // namespace posenc
