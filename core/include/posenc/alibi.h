// ALiBi: attention with linear biases (Press et al. 2022, "Train Short, Test Long").
//
// Head h adds -slope_h * (i - j) to the score of query i and key j (causal), or
// -slope_h * |i - j| (the symmetric variant for encoders). Slopes for H heads:
//   H a power of two: slope_h = 2^(-8 (h+1) / H),          h = 0 .. H-1
//   otherwise, c = 2^floor(log2 H): the c slopes for c heads, then the odd-indexed terms
//   (1st, 3rd, 5th, ...) of the 2c sequence for the remaining H - c heads (the paper's rule;
//   equal to Bloom's build_alibi_tensor and, mathematically, MPT's).
#pragma once

#include <cstdint>
#include <vector>

namespace posenc {

// The paper's slopes in double. Throws posenc::Error for num_heads < 1.
std::vector<double> alibi_slopes(int num_heads);

// Slopes of heads [first_head, first_head + count) of a model with total_heads heads: what one
// tensor-parallel shard needs.
std::vector<double> alibi_slopes_for_heads(int total_heads, int first_head, int count);

// Bloom's float32 arithmetic: pow(float32 base, k) (within 5e-7 relative of the exact slopes).
std::vector<float> alibi_slopes_bloom_f32(int num_heads);

// MPT's float32 arithmetic (HF modeling_mpt.py build_mpt_alibi_tensor with alibi_bias_max 8,
// from MosaicML's gen_slopes): H2 = 2^ceil(log2 H), slope_k = 1 / 2^(k * 8 / H2) for k = 1..H2 in
// float32, then for H != H2 the odd-indexed slopes followed by the even-indexed ones, cut to H.
// Mathematically the paper's slopes, in another order of rounding than Bloom's (alibi_slopes()).
std::vector<float> alibi_slopes_mpt_f32(int num_heads);

enum class AlibiMode { kCausal, kSymmetric };

// Adds the bias of one query row to scores[0 .. count-1], keys key_start .. key_start+count-1:
// causal: -slope * (query_pos - key)  (future keys, masked anyway, get a positive value)
// symmetric: -slope * |query_pos - key|
void alibi_add_bias_row(double slope, std::int64_t query_pos, std::int64_t key_start, int count, AlibiMode mode,
                        float* scores);

}  // namespace posenc
