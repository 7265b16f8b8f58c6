// Transformer-XL relative attention (Dai et al. 2019), per head, as HF v4.49's transfo_xl.
//
// With mlen cached tokens before qlen new ones (klen = mlen + qlen), query i sits at absolute
// position mlen + i and key j at j. The score of (i, j), for j <= i + mlen, is
//   ( (q_i + u) . k_j  +  (q_i + v) . r_{mlen+i-j} ) / sqrt(d)          (AC + BD)
// where r_δ is the projected relative sinusoid of distance δ (clamped to clamp_len when > 0)
// and u, v are the learned global content and position biases. Keys j > i + mlen are masked.
// HF computes BD for all distances and aligns it with rel_shift; posenc indexes the distance
// directly and keeps rel_shift for reference and tests (they agree on every unmasked entry).
#pragma once

#include <cstdint>
#include <vector>

namespace posenc {

// The relative sinusoid for distances klen-1 .. 0 (HF's pos_seq, descending): [klen][dim] in
// halves layout [sin | cos] with Vaswani frequencies. Distances beyond clamp_len (> 0) are
// clamped. Odd dim: ceil(d/2) sin and floor(d/2) cos columns (HF returns d+1 columns).
std::vector<float> xl_relative_sinusoid(int dim, int klen, int clamp_len = 0);

// HF's _rel_shift on x[qlen][klen] (pad a zero column, reshape, drop a row): entry (i, j) of
// the result is x[i][j + qlen-1-i] where that exists; the other entries are what the reshape
// leaves there (a pad zero or the next row), reproduced exactly.
std::vector<float> xl_rel_shift(const std::vector<float>& x, int qlen, int klen);

struct XlHeadInputs {
  const float* q;  // [qlen][d]
  const float* k;  // [klen][d]
  const float* r;  // [klen][d]: row m encodes distance klen-1-m (projected, as HF's r_head_k)
  const float* u;  // [d] r_w_bias
  const float* v;  // [d] r_r_bias
  int qlen, mlen, d;
};

// Scores [qlen][klen], (AC + BD)/sqrt(d); masked entries (j > i + mlen) are -infinity.
std::vector<float> xl_scores(const XlHeadInputs& in);

}  // namespace posenc
