// A benchmark's --threads, one check for bench rope, bench attention and bench train.
#pragma once

namespace posenc::bench {

// This machine's hardware threads (std::thread::hardware_concurrency), in [1, kMaxThreads].
int machine_threads();

// `requested` in [0, machine_threads()], else an Error naming `what` ("bench rope"), the range
// and the value; `zero_means` says what 0 selects ("all", "torch's default"). More threads than
// the machine has only time the scheduler, and under an address-space limit libgomp fails to
// start them ("Thread creation failed", bench rope) or libtorch's pool waits forever (issue 33, F14).
void check_bench_threads(int requested, const char* what, const char* zero_means);

}  // namespace posenc::bench
