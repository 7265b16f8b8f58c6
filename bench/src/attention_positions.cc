#include "posenc_bench/attention_positions.h"

#include <random>

#include "posenc/alibi.h"
#include "posenc/error.h"

namespace posenc::bench {

namespace {
RopeSchedule default_schedule(int head_dim) {
  RopeParams rp;
  rp.head_dim = head_dim;
  return compute_schedule(rp);
}
}  // namespace

BenchPositions::BenchPositions(const std::string& scheme, bool causal, int heads, int head_dim)
    : slopes(alibi_slopes(heads)), schedule(default_schedule(head_dim)), t5{32, 128, !causal},
      t5_table(static_cast<std::size_t>(t5.num_buckets) * heads) {
  std::mt19937 rng(0);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (float& x : t5_table) x = normal(rng);
  params.mask.causal = causal;
  if (scheme == "rope") {
    params.positions = AttentionPositions::kRope;
    params.rope = rope_apply_params(schedule);
  } else if (scheme == "alibi") {
    params.positions = AttentionPositions::kAlibi;
    params.alibi_slopes = slopes.data();
    params.alibi_mode = causal ? AlibiMode::kCausal : AlibiMode::kSymmetric;
  } else if (scheme == "t5") {
    params.positions = AttentionPositions::kT5;
    params.t5_table = t5_table.data();
    params.t5 = t5;
  } else if (scheme != "none") {
    throw Error("bench attention: --scheme must be none, rope, alibi or t5, got '" + scheme + "'");
  }
}

}  // namespace posenc::bench
