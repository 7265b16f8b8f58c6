// The position scheme of `posenc bench attention` and the inputs it points to, built once for the
// prefill and the decode benchmarks alike.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "posenc/attention.h"
#include "posenc/rope_schedule.h"
#include "posenc/t5_bias.h"

namespace posenc::bench {

// The schemes a bias-free kernel is compared with (ALiBi's time in the same run, rate_vs_alibi).
bool is_learned_bias_scheme(const std::string& scheme);

struct BenchPositions {
  // scheme: none, rope (the default schedule of head_dim, half-split), alibi (the standard
  // slopes; causal or symmetric), t5 (32 buckets up to 128, a random N(0, 1) table, fixed seed;
  // bidirectional unless causal), and the learned biases of issue 24 over `tokens` positions:
  // kerple (the log variant at its initial r1, r2: kerple_init), sandwich (d' = head_dim), dpb (a
  // random N(0, 1) signed table, as an MLP's output would be), fire (the table of a FIRE whose
  // threshold L is `tokens`, its MLP at a random Linear initialisation), fox (c from random N(3, 1) gate
  // logits, one sequence; causal only). Anything else is an Error naming it.
  BenchPositions(const std::string& scheme, bool causal, int heads, int head_dim, std::int64_t tokens);
  BenchPositions(const BenchPositions&) = delete;  // params points into this object
  BenchPositions& operator=(const BenchPositions&) = delete;

  std::vector<double> slopes;   // ALiBi's, [heads]
  RopeSchedule schedule;        // RoPE's
  T5BucketParams t5;
  std::vector<float> t5_table;  // [num_buckets][heads]
  std::vector<float> table;     // kerple, sandwich, fire: [heads][tokens]; dpb: [heads][2 tokens - 1]
  std::vector<float> gate;      // fox: c [1][heads][tokens]
  AttentionParams params;       // mask.causal and the scheme's positions, pointing at the above
};

}  // namespace posenc::bench
