// The machine's own memory ceiling, measured beside a kernel: what a memory-bound kernel's GB/s
// is compared against in the same run.
#pragma once

#include <cstddef>

namespace posenc::bench {

// An in-place read-modify-write pass over n floats (x *= factor; pass factors that do not fold
// away, e.g. 1 + 2^-20 and its inverse on alternate calls), with the kernels' threads rule
// (threads.h) and the SIMD target they dispatch to: the ceiling a memory-bound kernel can reach.
// Returns the threads the pass ran on (the OpenMP team), so a benchmark can show its ceiling used
// the kernel's thread count.
int memory_rmw_pass(float* data, std::size_t n, int threads, float factor);

// A streaming read of n floats (their sum, which the caller keeps so the loads stay), split in
// one contiguous run per thread, same threads rule and target: the ceiling of a kernel that only
// reads its big operands (decode attention's K and V).
double memory_read_pass(const float* data, std::size_t n, int threads);

// The SIMD target the pass runs on ("AVX3", "AVX2", ...): the same as the kernels'.
const char* memory_pass_target();

}  // namespace posenc::bench
