// The threads of the BLAS libtorch calls for float32 matrix products. libtorch 1.13's
// set_num_threads sets OpenMP's (and MKL's) threads, not OpenBLAS's: Debian's libtorch calls
// OpenBLAS (pthreads build), whose pool keeps its own count, every core by default. So
// `bench attention --threads 1` timed its "gemm" ceiling on two threads and `--threads 2` read the
// same rate (issue 29): the ceiling was not measured with the benchmark's threads; and a lab run
// "on one thread" ran its matrix products on every core.
#pragma once

namespace posenc::torch_layer {

// Sets libtorch's threads and, where the process has OpenBLAS, OpenBLAS's (found at run time:
// no link-time dependency on one BLAS). threads >= 1. Returns OpenBLAS's count afterwards, or 0
// when the process has no OpenBLAS (then libtorch's setting is the one that applies).
int set_torch_and_blas_threads(int threads);

}  // namespace posenc::torch_layer
