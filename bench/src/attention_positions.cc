#include "posenc_bench/attention_positions.h"

#include <cmath>
#include <random>

#include "posenc/alibi.h"
#include "posenc/error.h"
#include "posenc/fire.h"
#include "posenc/forget_gate.h"
#include "posenc/kerple.h"
#include "posenc/sandwich.h"

namespace posenc::bench {

namespace {
RopeSchedule default_schedule(int head_dim) {
  RopeParams rp;
  rp.head_dim = head_dim;
  return compute_schedule(rp);
}
}  // namespace

bool is_learned_bias_scheme(const std::string& scheme) {
  return scheme == "kerple" || scheme == "sandwich" || scheme == "dpb" || scheme == "fire" || scheme == "fox";
}

BenchPositions::BenchPositions(const std::string& scheme, bool causal, int heads, int head_dim, std::int64_t tokens)
    : slopes(alibi_slopes(heads)), schedule(default_schedule(head_dim)), t5{32, 128, !causal},
      t5_table(static_cast<std::size_t>(t5.num_buckets) * heads) {
  std::mt19937 rng(0);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (float& x : t5_table) x = normal(rng);
  params.mask.causal = causal;
  const auto use_table = [&](std::vector<float> values, DistanceSide side) {
    table = std::move(values);
    params.positions = AttentionPositions::kDistanceTable;
    params.distance_table = {table.data(), tokens, side};
  };
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
  } else if (scheme == "kerple") {
    use_table(kerple_table(kerple_init(heads, KerpleKind::kLog), tokens), DistanceSide::kAbsolute);
  } else if (scheme == "sandwich") {
    use_table(sandwich_table(SandwichParams{heads, head_dim}, tokens), DistanceSide::kAbsolute);
  } else if (scheme == "dpb") {
    std::vector<float> values(static_cast<std::size_t>(heads) * (2 * tokens - 1));
    for (float& x : values) x = normal(rng);
    use_table(std::move(values), DistanceSide::kSigned);
  } else if (scheme == "fire") {
    // A FIRE whose threshold L has reached the sequence (every query below it: a distance table,
    // fire.h), its MLP (width 32) at PyTorch's Linear initialisation, U(-1/sqrt(fan_in), ..).
    FireParams fire;
    fire.heads = heads, fire.width = 32, fire.threshold = static_cast<double>(tokens);
    std::uniform_real_distribution<double> first(-1.0, 1.0), second(-1.0 / std::sqrt(32.0), 1.0 / std::sqrt(32.0));
    for (int x = 0; x < fire.width; ++x) fire.w1.push_back(first(rng)), fire.b1.push_back(first(rng));
    for (int x = 0; x < heads * fire.width; ++x) fire.w2.push_back(second(rng));
    for (int x = 0; x < heads; ++x) fire.b2.push_back(second(rng));
    use_table(fire_table(fire, tokens), DistanceSide::kAbsolute);
  } else if (scheme == "fox") {
    if (!causal) throw Error("bench attention: --scheme fox is causal (a forget gate over the tokens before): add --causal");
    std::normal_distribution<float> logit(3.0f, 1.0f);  // gates near 0.95: a little forgetting per token
    std::vector<float> logits(static_cast<std::size_t>(heads) * tokens);
    for (float& x : logits) x = logit(rng);
    gate.resize(logits.size());
    forget_gate_cumulative(logits.data(), ForgetGateShape{1, heads, static_cast<int>(tokens)}, gate.data());
    params.positions = AttentionPositions::kForgetGate;
    params.gate_cumulative = gate.data();
  } else if (scheme != "none") {
    throw Error("bench attention: --scheme must be none, rope, alibi, t5, kerple, sandwich, dpb, fire or fox, got '" + scheme + "'");
  }
}

}  // namespace posenc::bench
