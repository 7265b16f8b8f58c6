// The AVX512-BF16 tile steps of bf16 attention (attention_bf16.cc drives them): each is compiled
// for AVX-512 with the BF16 extension by a function attribute (attention_bf16_tiles.cc), so the
// rest of the core keeps its baseline code; call them only where attention_bf16_available().
//
// Layouts, one thread's workspace (uint32 = two bf16, the low half first: VDPBF16PS's pairs):
//   Qp  [rows4][pairs]       the query tile, q rotated and scaled in f32 then rounded to bf16;
//                            pairs = ceil(D / 2), an odd D's last pair padded with 0
//   Kp  [pairs][kKeyTile]    the key tile by channel pair: Kp[x][c] = k_c channels 2x, 2x + 1
//   Vp  [kKeyTile/2][Dv]     the value tile by key pair: Vp[c][x] = (v_2c[x], v_2c+1[x]);
//                            Dv = D rounded up to 16 (one vector of f32 sums), padded with 0
//   Sc  [rows4][kKeyTile]    f32 scores; softmax_tile overwrites each row's first half with its
//                            weights P as bf16 pairs of keys, [rows4][kKeyTile / 2] uint32 at
//                            row stride kKeyTile
//   acc [rows4][Dv]          f32 sums of P.V
#pragma once

#include <cstdint>
#include <vector>

#include "attention_plan.h"

// Where the tiles are compiled: x86 with GCC or Clang (the target attribute, the CPU check).
#if (defined(__x86_64__) || defined(__i386__)) && (defined(__GNUC__) || defined(__clang__))
#define POSENC_ATTENTION_BF16_X86 1
// The functions of the prefill's and decode's bf16 products are compiled for these features,
// the set attention_bf16_available() checks at run time.
#define POSENC_AVX512_BF16 __attribute__((target("avx2,fma,avx512f,avx512vl,avx512bw,avx512dq,avx512bf16")))
#else
#define POSENC_ATTENTION_BF16_X86 0
#endif

namespace posenc::attention_detail::bf16 {

// Channels of the value and accumulator rows: D rounded up to a vector of 16 f32 sums.
inline int value_width(int D) { return (D + 15) / 16 * 16; }
inline int channel_pairs(int D) { return (D + 1) / 2; }

// row[0 .. D) rounded to bf16 (round to nearest even; VCVTNE2PS2BF16 reads f32 subnormals as 0)
// into pairs[0 .. channel_pairs(D)).
void pack_row(const float* row, int D, std::uint32_t* pairs);

// Kp from `cols` bf16 rows of 2 pairs channels each, row c at rows + c * row_stride (bf16
// units: a stored key row with an even D, or pack_row's pairs); columns [cols, kKeyTile) zero.
void pack_key_tile(const std::uint16_t* rows, std::int64_t row_stride, int cols, int pairs, std::uint32_t* Kp);

// Vp from `cols` bf16 value rows, row c at rows + c * row_stride (bf16 units); keys [cols,
// kKeyTile) zero.
void pack_value_tile(const std::uint16_t* rows, std::int64_t row_stride, int cols, int D, std::uint32_t* Vp);

// Sc[r][c] = sum over pairs x of Qp[r][x] . Kp[x][c] (f32 sums of exact bf16 products), r < rows4
// (a multiple of 4), c < kKeyTile.
void score_tile(const std::uint32_t* Qp, int pairs, const std::uint32_t* Kp, int rows4, float* Sc);

// The online softmax of rows r < rows (masked scores -inf): the tile's weights
// w = exp(s - new max) rounded to bf16 into Sc's row as P, the running max and the sum of the
// rounded weights updated, acc's row (Dv floats) rescaled by exp(old max - new max). Rows
// [rows, rows4) get P = 0.
void softmax_tile(float* Sc, int rows, int rows4, float* row_max, float* row_sum, float* acc, int Dv);

// The plan's position term (when the scheme has one) and masks on Sc (attention_plan.h's
// add_bias_tile and mask_tile, the f32 kernel's code) compiled here for AVX-512 too: a tile's
// ALiBi distances then convert 8 int64 at once. pos, lut: add_bias_tile's scratch.
void bias_and_mask_tile(const Plan& plan, int b, int h, int i0, int rows, std::int64_t j0, int cols, float* Sc, std::int64_t* pos,
                        std::vector<int>& lut);

// acc[r][:] += sum over key pairs c < key_pairs of P[r][c] . Vp[c][:], r < rows4.
void value_tile(const float* Sc, const std::uint32_t* Vp, int rows4, int key_pairs, int Dv, float* acc);

}  // namespace posenc::attention_detail::bf16
