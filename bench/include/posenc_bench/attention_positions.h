// The position scheme of `posenc bench attention` (none, rope, alibi, t5) and the inputs it points
// to, built once for the prefill and the decode benchmarks alike.
#pragma once

#include <string>
#include <vector>

#include "posenc/attention.h"
#include "posenc/rope_schedule.h"
#include "posenc/t5_bias.h"

namespace posenc::bench {

struct BenchPositions {
  // scheme: none, rope (the default schedule of head_dim, half-split), alibi (the standard
  // slopes; causal or symmetric), t5 (32 buckets up to 128, a random N(0, 1) table, fixed seed;
  // bidirectional unless causal). Anything else is an Error naming it.
  BenchPositions(const std::string& scheme, bool causal, int heads, int head_dim);
  BenchPositions(const BenchPositions&) = delete;  // params points into this object
  BenchPositions& operator=(const BenchPositions&) = delete;

  std::vector<double> slopes;   // ALiBi's, [heads]
  RopeSchedule schedule;        // RoPE's
  T5BucketParams t5;
  std::vector<float> t5_table;  // [num_buckets][heads]
  AttentionParams params;       // mask.causal and the scheme's positions, pointing at the above
};

}  // namespace posenc::bench
