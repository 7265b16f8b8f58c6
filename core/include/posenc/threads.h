// How many threads a posenc kernel runs, and the options every kernel takes: one rule and one
// spelling for every kernel (RoPE, attention and its backward) and for the benchmarks' memory
// ceiling, so a benchmark's kernel and its ceiling run alike.
#pragma once

namespace posenc {

class RopeTable;  // rope_kernels.h

// The most threads any posenc call accepts: far above any machine's cores, far below what makes
// OpenMP's runtime fail (100 000 threads crash libgomp).
inline constexpr int kMaxThreads = 1024;

// requested in [1, kMaxThreads], or 0 for every hardware thread (OpenMP's default; 1 without
// OpenMP). Anything else is an Error naming `what` ("attention") and the range.
int kernel_threads(int requested, const char* what);

// What rope_rotate(), attention() and attention_backward() take besides their tensors.
struct KernelOptions {
  int threads = 0;  // 0: every hardware thread (OpenMP); at most kMaxThreads
  // RoPE's cos/sin by position, built once and shared (a RotaryEmbedding's, one forward's): must
  // have been built for the call's frequencies, attention factor and angle mode (an Error
  // otherwise); grows to the call's largest position. nullptr: rope_rotate computes cos/sin per
  // token on the fly; attention builds a table for the call (attention.h). The bits are the same.
  const RopeTable* table = nullptr;
};

}  // namespace posenc
