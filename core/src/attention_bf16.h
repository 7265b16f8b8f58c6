// The bf16 path of attention() (posenc/attention_bf16.h), private to the core.
#pragma once

#include <cstddef>

#include "attention_plan.h"

namespace posenc::attention_detail {

// Runs the plan on the bf16 path and returns true when attention_runs_bf16() says so; false
// (nothing written) otherwise. threads: kernel_threads' count.
bool run_attention_bf16(const Plan& plan, int threads, const AttentionOptions& options);

// Floats of one thread's bf16 tiles (attention_bf16_tiles.h), each region 64-byte aligned.
std::size_t bf16_tile_floats(int D);

}  // namespace posenc::attention_detail
