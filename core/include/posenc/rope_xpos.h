// xPos (Sun et al. 2022, "A Length-Extrapolatable Transformer", arXiv 2212.10554, §3.2): RoPE
// times a per-pair decay that q and k take with opposite powers, so that the scores fall off with
// the distance m - n and depend on it only.
//
//   zeta_i = (2i/d + gamma) / (1 + gamma)   pair i of d/2 (d = the rotary dim, 2 * num_freqs)
//   q at position m:  zeta_i^((m - c)/B) R(m) q        B = scale_base (512), c = centre
//   k at position n:  zeta_i^(-(n - c)/B) R(n) k       q.k = sum_i zeta_i^((m - n)/B) (...)
//
// Both channels of pair i take zeta_i, in every layout (the paper; torchscale's XPOS
// duplicate_interleave; x-transformers and rotary-embedding-torch in half-split order, whose
// torch.cat((scale, scale)) gives channels j and j + d/2 the same zeta_j). rotary-embedding-torch
// pairs channels (2j, 2j+1) but still concatenates, so there channel j takes zeta_(j mod d/2):
// the two channels of a pair differ and its scores are not a function of m - n alone; posenc does
// not copy that. The centre c cancels in q.k; x-transformers and rotary-embedding-torch use
// floor(L/2) of the sequence length L (with cached keys, the queries' c must be the keys'). The
// scale multiplies cos and sin (as the attention factor does), so the backward pass (direction
// -1) multiplies by the same power and rotates back: the transpose of the forward.
#pragma once

#include <cstdint>
#include <vector>

namespace posenc {

// Which power a tensor takes: queries +(m - c)/B, keys -(n - c)/B.
enum class XPosRole { kQuery, kKey };

struct XPosParams {
  double scale_base = 0;  // B; 0: no xPos (plain RoPE)
  double gamma = 0.4;     // the paper's gamma
  double center = 0;      // c, the position whose scale is 1 (the caller's: floor(L/2), a cache's)
  // The role of rope_rotate's first tensor (q; kKey to rotate cached keys alone). Its second
  // tensor is always a key.
  XPosRole first = XPosRole::kQuery;

  bool enabled() const { return scale_base != 0; }
};

// The largest |exponent| ln(zeta) (m - c)/B allowed: e^80 and e^-80 are normal float32 numbers,
// so neither the query's nor the key's scale overflows or flushes to zero.
inline constexpr double kMaxXPosExponent = 80;

// Per-position xPos scales of num_freqs pairs. zeta_i^((m - c)/B) is formed as three factors in
// double, zeta_i^(-frac(c)/B) * zeta_i^(64 a/B) * zeta_i^(r/B) with m - floor(c) = 64 a + r,
// 0 <= r < 64: the first and last from tables built once, the middle one exp per pair for each
// block of 64 positions (a Block remembers the last), so consecutive positions cost two products
// per pair instead of an exp (measured: exp per pair and token made xPos 1.7x RoPE's time).
class XPosScales {
 public:
  XPosScales(const XPosParams& xpos, int num_freqs);

  // One caller's (one thread's) last block of 64 positions: a cache, not a result.
  struct Block {
    std::int64_t index = 0;
    bool valid = false;
    std::vector<double> query, key;  // zeta_i^(+-(64 a - frac(c))/B)
  };
  // query[i] = zeta_i^((m - c)/B), key[i] = zeta_i^(-(m - c)/B), each the product above in
  // double, rounded once to float32: the same bits for the scalar reference and every SIMD walk
  // (both call this), whatever the Block held before.
  void at(std::int64_t position, float* query, float* key, Block& block) const;
  // The two factors at() multiplies, for a caller that forms the products itself (the SIMD walk,
  // rope_walk-inl.h: one double product per lane, rounded once to float32, at()'s bits):
  // query[i] = float(block_query[i] * within_query[i]), key[i] = float(block_key[i] * within_key[i]).
  struct Factors {
    const double *block_query, *block_key, *within_query, *within_key;
  };
  Factors factors(std::int64_t position, Block& block) const;

 private:
  static constexpr int kBlock = 64;
  int half_ = 0;
  std::vector<double> log_zeta_;                   // [half] ln zeta_i / B
  std::vector<double> query_within_, key_within_;  // [kBlock][half] zeta_i^(+-r/B)
  double center_floor_ = 0, center_fraction_ = 0;
};

// Throws posenc::Error unless scale_base is 0 or finite > 0, gamma finite > 0, the centre finite,
// and every position in [smallest, largest] keeps |ln zeta_0 (m - c)/B| <= kMaxXPosExponent
// (the error names the position and the range of m - c that works); smallest > largest: no
// positions to check.
void validate_xpos(const XPosParams& xpos, std::int64_t smallest, std::int64_t largest);

}  // namespace posenc
