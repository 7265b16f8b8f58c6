// FIRE, functional interpolation for relative positions (Li et al. 2023, arXiv 2310.04418): a
// learned bias over the query-key pair that depends on the distance *and* the query position,
//
//   b_h(i, j) = f(psi(i - j) / (psi(max(L, i)) + eps))_h,   psi(x) = log(|c x| + 1),
//
// f an MLP 1 -> width -> H with ReLU, c (init 0.1) and the threshold L = |L_multiplier * init_L|
// (init_L 512, L_multiplier learned from 1) learned; eps 1e-6. For i <= L the normaliser is a
// constant, so the bias is translation invariant there; beyond, the input shrinks as i grows
// (progressive interpolation): a causal pair's input stays in [0, 1] at any length. As the
// reference implementation (mcleish7/arithmetic cramming/architectures/embeddings.py FIRE)
// takes |c (i - j)|, keys after the query get the bias of their mirror distance (causal models
// mask them). Not a function of i - j alone beyond L; but while every query position is below L
// the normaliser is psi(L) for all of them, and FIRE is a distance table over |i - j|
// (fire_table): that is how the fused kernel takes it (training below L, and inference until a
// query passes L); beyond, the materialising path computes it per query block.
//
// This header is the framework-free reference in double; libtorch's FireBias and Python's
// posenc.nn.FIRE compute the same in torch operations.
#pragma once

#include <cstdint>
#include <vector>

namespace posenc {

struct FireParams {
  int heads = 0;
  int width = 0;
  double c = 0.1;
  double threshold = 512.0;  // L = |L_multiplier * init_L|
  double eps = 1e-6;
  std::vector<double> w1, b1;  // Linear(1, width): [width], [width]
  std::vector<double> w2, b2;  // Linear(width, heads): [heads][width] row-major, [heads]
};

// Checks the shapes, that c, threshold and eps are finite and eps > 0; throws posenc::Error naming the field.
void validate(const FireParams& p);

// The MLP's input for query position i and key position j: psi(i - j) / (psi(max(L, i)) + eps).
double fire_input(const FireParams& p, std::int64_t i, std::int64_t j);

// b_h(i, j) for every head: [heads].
std::vector<double> fire_bias(const FireParams& p, std::int64_t i, std::int64_t j);

// Whether every query position up to `largest_query_position` is below L = |threshold| (strictly:
// at i = L autograd splits max(L, i)'s gradient between its two sides, which a table would not).
bool fire_table_covers(const FireParams& p, std::int64_t largest_query_position);

// FIRE as a distance table for queries below L: [heads][length] floats, entry [h][d] =
// b_h(i, i - d) for any query position i < L (attention.h's kDistanceTable, DistanceSide::kAbsolute).
std::vector<float> fire_table(const FireParams& p, std::int64_t length);

}  // namespace posenc
