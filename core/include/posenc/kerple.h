// Kerple: kernelized relative positional embedding (Chi, Fan, Ramadge, Rudnicky 2022, "KERPLE:
// Kernelized Relative Positional Embedding for Length Extrapolation", NeurIPS; eqs. for the
// logarithmic and power variants, Sec. 3.3). Per head h, with r1_h, r2_h learned and positive:
//
//   log    b_h(Delta) = -r1_h * log(1 + r2_h * |Delta|)     r1 > 0, r2 > 0
//   power  b_h(Delta) = -r1_h * |Delta|^r2_h                r1 > 0, 0 < r2 <= 2
//
// Both depend only on |Delta|, are 0 at Delta = 0 and decrease with |Delta|; power with r2 = 1 is
// ALiBi with slope r1. Keeping r1, r2 positive while they train (e.g. a softplus or a clamp of
// raw parameters) is the trainer's part: here any other value is refused.
#pragma once

#include <cstdint>
#include <vector>

#include "posenc/names.h"

namespace posenc {

enum class KerpleKind { kLog, kPower };

POSENC_ENUM_NAMES(KerpleKind, "kerple kind", {KerpleKind::kLog, "log"}, {KerpleKind::kPower, "power"});

struct KerpleParams {
  KerpleKind kind = KerpleKind::kLog;
  std::vector<double> r1, r2;  // one per head, the same count
};

// Throws posenc::Error naming the head and value outside the ranges above (or unequal counts,
// or no heads).
void validate(const KerpleParams& params);

// The double reference: the formula above, term by term.
double kerple_bias_reference(const KerpleParams& params, int head, std::int64_t delta);

// The distance table (distance_bias.h, kAbsolute): [heads][length] floats, b_h(|Delta|) for
// Delta = 0 .. length - 1, each computed in double (log1p for the log variant) and rounded once.
std::vector<float> kerple_table(const KerpleParams& params, std::int64_t length);

}  // namespace posenc
