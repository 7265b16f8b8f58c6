// PoPE, polar coordinate positional embeddings (Gopalakrishnan, Csordás, Schmidhuber, Mozer 2025,
// "Decoupling the 'What' and 'Where' With Polar Coordinate Positional Embeddings", arXiv
// 2509.10534), with the conventions of lucidrains' x-transformers (PolarEmbedding,
// apply_polar_pos_emb): the core's double-precision definition, which the libtorch module
// (posenc_torch/polar.h), Python's posenc.nn.PolarEmbedding (through the extension's pope_row) and
// `posenc check` are measured against.
//
// Channel j < dim of a head is one complex number: magnitude softplus(x_j), phase p w_j at position
// p, w_j = 1 / base^(j / dim) over all dim channels (no pairs: RoPE's d/2 frequencies, doubled), and
// on keys a learned phase bias delta_j, used clamped to [-2 pi, 0]. Written as real and imaginary
// parts (out[j] = softplus(x_j) cos(phase_j), out[dim + j] = softplus(x_j) sin(phase_j)), the dot
// product of a query's and a key's rows is
//     q'_m . k'_n = sum_j softplus(q_j) softplus(k_j) cos((m - n) w_j - delta_j),
// a function of m - n only.
#pragma once

#include <cstdint>
#include <vector>

namespace posenc {

struct PopeParams {
  int dim = 0;            // channels per head, >= 1 (odd works: every channel is a frequency)
  double base = 10000.0;  // w_j = 1 / base^(j / dim), a finite number > 0
};

// Throws posenc::Error naming the field: dim in [1, 65536], base finite > 0.
void validate(const PopeParams& params);

// w_j = 1 / base^(j / dim), j < dim, in double.
std::vector<double> pope_frequencies(const PopeParams& params);

// One head's row x [dim] at position p (in [0, 2^31 - 1]) to out [2 dim], in double: phase_j = p w_j
// reduced modulo 2 pi, plus delta_j clamped to [-2 pi, 0] when delta is not null (a key's row;
// null: a query's). Throws posenc::Error for a position out of range or a non-finite x or delta.
void pope_row(const PopeParams& params, const double* x, std::int64_t position, const double* delta, double* out);

// The closed form of a query row at m against a key row at n: sum_j softplus(q_j) softplus(k_j)
// cos((m - n) w_j - clamp(delta_j)) (delta null: 0), in double.
double pope_score(const PopeParams& params, const double* q, std::int64_t m, const double* k, std::int64_t n, const double* delta);

}  // namespace posenc
