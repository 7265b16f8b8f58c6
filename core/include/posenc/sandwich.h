// Sandwich (Chi, Fan, Rudnicky, Ramadge 2023, "Dissecting Transformer Length Extrapolation via the
// Lens of Receptive Field Analysis", ACL; arXiv 2212.10356): a parameter-free bias, the inner
// product of two sinusoidal position embeddings of dimension d' minus its value at Delta = 0,
// scaled per head. As NVIDIA NeMo computes it (sandwich_relative_position_embedding.py: k runs
// 1 .. d'/2, the scale divides by h * 8 / H), for heads h = 1 .. H:
//
//   b_h(Delta) = (sum_{k=1..d'/2} cos(Delta / 10000^(2k/d')) - d'/2) * H / (8 h)
//
// (The paper's sinusoids start at k = 0; NeMo's, followed here, at k = 1, so the fastest
// frequency is 10000^(-2/d'), not 1.) Depends only on |Delta|; b(0) = 0; every term is <= 0.
#pragma once

#include <cstdint>
#include <vector>

namespace posenc {

struct SandwichParams {
  int heads = 8;  // H >= 1
  int dim = 128;  // d', even, >= 2
};

// Throws posenc::Error naming heads or dim when out of range.
void validate(const SandwichParams& params);

// The double reference: the formula above, the cosines summed and d'/2 subtracted. head in
// [0, H): the paper's h is head + 1.
double sandwich_bias_reference(const SandwichParams& params, int head, std::int64_t delta);

// The distance table (distance_bias.h, kAbsolute): [H][length] floats. In double through
// cos x - 1 = -2 sin^2(x/2), which keeps the small distances exact where the reference's
// difference cancels, then rounded once.
std::vector<float> sandwich_table(const SandwichParams& params, std::int64_t length);

}  // namespace posenc
