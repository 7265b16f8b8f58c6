// How many threads a posenc kernel runs: one rule for every kernel (RoPE, attention) and for the
// benchmarks' memory ceiling, so a benchmark's kernel and its ceiling run alike.
#pragma once

namespace posenc {

// The most threads any posenc call accepts: far above any machine's cores, far below what makes
// OpenMP's runtime fail (100 000 threads crash libgomp).
inline constexpr int kMaxThreads = 1024;

// requested in [1, kMaxThreads], or 0 for every hardware thread (OpenMP's default; 1 without
// OpenMP). Anything else is an Error naming `what` ("attention") and the range.
int kernel_threads(int requested, const char* what);

}  // namespace posenc
