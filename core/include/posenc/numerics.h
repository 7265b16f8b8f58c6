// posenc's one switch between its own arithmetic and Hugging Face's float32 arithmetic, for the
// schedule and the angles alike (the CLI's --hf-compatible, Python's hf_compatible=True).
#pragma once

#include "posenc/names.h"

namespace posenc {

inline constexpr double kPi = 3.14159265358979323846;

enum class Numerics {
  // Schedules computed in double and rounded once to float32 (within ~3e-7 relative of HF);
  // angles p * w reduced and evaluated in double (rope_sincos): max error 3e-8 for p <= 2^24,
  // 8e-8 up to 2^31-1 against long double (tests/limits_test.cc); posenc promises 1e-6.
  kAccurate,
  // HF's float32 operations step by step: the schedule in HF's order, the angle
  // float32(w * float32(p)) and cos/sin of that float (error ~6e-8 * p). HF's exact bits.
  kHfFloat32,
};

POSENC_ENUM_NAMES(Numerics, "numerics", {Numerics::kAccurate, "accurate"}, {Numerics::kHfFloat32, "hf_float32"});

}  // namespace posenc
