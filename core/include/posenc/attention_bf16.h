// bf16 attention on the CPU's own bf16 dot products: when q, k and v are all bf16 and the CPU
// has AVX512-BF16 (VDPBF16PS; Cooper Lake, Sapphire Rapids, AMD Zen 4), attention() computes
//   S = q.k^T   q rotated by RoPE (when that is the scheme) and scaled in f32, then rounded to
//               bf16; k as stored, or rotated in f32 and rounded to bf16; bf16 products summed
//               in f32 pairs by VDPBF16PS
//   softmax     in f32 (online, per key tile of 64), masks and position terms as the f32 kernel
//               adds them (attention_plan.h)
//   P.V         P = exp(s - running max) rounded to bf16, v as stored, summed in f32 by VDPBF16PS;
//               divided by the sum of the rounded P
//   out         in out's own dtype
// Everything else, and these calls when AttentionOptions::bf16_dot_products is false, takes the
// f32 kernel (bf16 read into f32): another dtype for any of q, k, v; a RoPE position remap;
// fewer (batch x heads x query tiles of 256) than threads, where the f32 kernel splits the keys
// across threads (decode); a CPU without AVX512-BF16 (or whose OS does not save the AVX-512
// state: the compiler's __builtin_cpu_supports checks XCR0). No AMX tiles: the hosts this was
// built and measured on have none.
//
// Error, per output channel c of a query row, against attention_reference (double) on the same
// bf16 inputs (u = 2^-9, bf16's unit roundoff with 8 significant bits; pi_j the exact softmax
// weights; a_j = scale sum_x |q_x| |k_jx| over the rotated rows):
//   |out_c - ref_c| <= (exp(2 Delta) (1 + u) / (1 - u) (1 + e_f) - 1) sum_j pi_j |v_jc|
//   Delta = max_j (eps_s a_j + 2^-22 |s_j|),  eps_s = (1 + u)^2 (1 + (D + 1) 2^-24) - 1
// from: rounding q (and k under RoPE) each moves a score by at most u a_j, the f32 sum of D
// exact products (D + 1) 2^-24 a_j (Higham, Accuracy and Stability of Numerical Algorithms,
// 2nd ed., sec. 3.1: gamma_n for a sum of n terms), the bias' f32 add 2^-22 |s_j|; scores moved by at most Delta
// move each softmax weight by a factor within exp(+-2 Delta); rounding P to bf16 (relative u)
// and dividing by the sum of the rounded P moves it by a factor within (1 +- u) / (1 -+ u);
// e_f = (T + 2 T / 64 + 16) 2^-24 bounds the f32 sums over keys, the rescales and the vector exp.
// A bf16 out adds u |out_c|, and the reference's own f32 output 2^-23 |ref_c|. Left out: the
// instructions read subnormal bf16 and f32 inputs as 0 (an absolute 2^-126 per term).
// tests/attention_bf16_test.cc checks it element by element.
//
// Decode (one query per sequence, no position remap: the decode path of attention()) takes the
// products operand by operand, whatever q's dtype: q.k on VDPBF16PS when k is stored bf16 and the
// scheme is not RoPE (q scaled in f32 and rounded to bf16 once per step; RoPE rotates each key
// in f32, so its scores stay f32), P.V when v is stored bf16 (P rounded to bf16, the output
// divided by the f32 sum of the unrounded P: at most u sum_j pi_j |v_jc| apart, inside the
// bound's (1 + u) / (1 - u)). The same bound holds; tests/attention_decode_bf16_test.cc checks
// it. attention_runs_bf16 speaks of the prefill path only.
#pragma once

#include "posenc/attention.h"

namespace posenc {

// Whether this CPU (and OS) runs VDPBF16PS, and no test has turned the path off.
bool attention_bf16_available();

// Tests only: false makes attention_bf16_available() false, as on a CPU without AVX512-BF16.
void allow_attention_bf16_for_test(bool allowed);

// Whether attention() with these arguments takes the bf16 path (the rules above).
bool attention_runs_bf16(const RopeTensor& q, const RopeTensor& k, const RopeTensor& v, const AttentionParams& params,
                         const AttentionOptions& options);

}  // namespace posenc
