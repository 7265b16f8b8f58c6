// `posenc bench attention`: the fused kernel (core attention.h) against the materialising
// libtorch path (scores, bias + mask, softmax, weighted sum: model.cc's training path) and
// against a matrix product of equal FLOPs and a square one through the BLAS libtorch uses (each
// on the run's threads), all in one run; in bf16/f16, beside the f32 kernel too; with
// backward, also forward + backward (training's step) of posenc's autograd op
// (posenc_torch/fused_attention.h) against libtorch autograd through the materialising path.
// Plain C++ types: callers need not include <torch/torch.h>.
#pragma once

#include <cstdint>
#include <string>

#include "posenc/rope_apply.h"

namespace posenc::bench {

struct AttentionBenchConfig {
  int seq = 4096;         // S = T (prefill)
  int heads = 8, kv_heads = 0, head_dim = 64;  // kv_heads 0: heads
  std::string scheme = "alibi";                // none, rope, alibi, t5; kerple, sandwich, dpb, fire, fox
  bool causal = false;  // --causal
  int threads = 0;  // 0: torch's default (posenc and libtorch alike)
  int repeats = 3;  // timed runs each (median), after one warm-up
  bool backward = false;  // also time forward + backward (gradients of q, k, v and the bias's table or c)
  DType dtype = DType::kF32;  // posenc's q, k, v and out (libtorch's paths stay float32)
};

// Forward + backward of both paths, timed in the same run (AttentionBenchConfig::backward).
struct AttentionBackwardResult {
  double posenc_seconds = 0, torch_seconds = 0, speedup = 0;  // torch 0: not run (torch_skipped says why)
  std::string torch_skipped;
  double max_rel_error = 0;  // posenc's dq, dk, dv (and the bias's gradient) against libtorch's (max |diff| / max |torch|), 0 if not run
  // The backward alone: forward + backward less the f32 forward's time, over FlashAttention-2's
  // count of its FLOPs (five products of the forward's size: 2.5x the forward's FLOPs); and that
  // rate over the square gemm's (issue 29's goal: 0.4).
  double backward_gflops = 0, fraction_of_square_gemm = 0;
  // A learned bias: ALiBi's forward + backward on the same tensors, same run; its time / this one's.
  double alibi_seconds = 0, rate_vs_alibi = 0;
};

struct AttentionBenchResult {
  double posenc_seconds = 0, torch_seconds = 0, speedup = 0;  // torch 0: not run (torch_skipped says why)
  std::string torch_skipped;
  double posenc_gflops = 0;      // the FLOPs attention needs (half of S x T when causal) / time
  double gemm_gflops = 0;        // q k^T and p v as full batched matrix products, same run
  double fraction_of_gemm = 0;   // posenc_gflops / gemm_gflops
  double square_gemm_gflops = 0;       // a 2048^3 float32 product through libtorch, same threads, same run
  double fraction_of_square_gemm = 0;  // posenc_gflops / square_gemm_gflops
  double f32_seconds = 0, rate_vs_f32 = 0;  // posenc on float32 q, k, v, same shape and run (dtype != f32 only)
  // kerple, sandwich, dpb, fox: ALiBi's kernel on the same tensors, same run; rate = alibi / this
  double alibi_seconds = 0, rate_vs_alibi = 0;
  std::int64_t extra_bytes = 0;  // posenc's memory beyond q, k, v and out
  std::int64_t torch_extra_bytes = 0;  // the libtorch path's [H, S, T] scores, bias and weights
  double max_rel_error = 0;      // against attention_reference, the last 8 queries
  std::string target;            // the SIMD target
  int threads = 0;
  int blas_threads = 0;  // OpenBLAS's threads for the gemm ceilings (set to `threads`); 0: no OpenBLAS
  AttentionBackwardResult backward;  // when config.backward
};

AttentionBenchResult run_attention_bench(const AttentionBenchConfig& config);

}  // namespace posenc::bench
