#include "rope_prefetch_tuner.h"

#include <algorithm>
#include <cstdlib>
#include <string>

#include "posenc/error.h"
#include "posenc/host_cache.h"

namespace posenc {
namespace {

// Ordered pairs of candidates, one per trial call: each candidate first in two and second in two
// of a round, so a half's position (the second half reads the table's later rows, the first starts
// the thread team) does not favour one policy.
constexpr int kPairs[6][2] = {{0, 1}, {1, 2}, {2, 0}, {1, 0}, {2, 1}, {0, 2}};

// Before a class is measured (and for calls too small to measure): about what was fixed before the
// tuner, hints for head-major rows (one stream per head), none for token-major ones (the fixed
// rule also skipped single-head tensors and prefetched token-major rows of partial rotary).
RopePrefetch default_policy(int cls) { return cls >= 3 ? RopePrefetch::kL1 : RopePrefetch::kNone; }

// A candidate's time: the lower quartile of its samples. Other work on the machine only adds time,
// so the lower samples are nearer the policy's own cost: with the median, one host's neighbours
// made "none" (0.043-0.083 ns a byte) tie "l2" (0.053-0.068) in one run of three, and l2 was
// kept at 0.87 of the ceiling where none reaches 0.90-1.00 (float32 [B, S, H, D], one thread). One
// fast sample (a half whose rows were still in cache) does not decide either.
double lower_quartile(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 4];
}

}  // namespace

const char* rope_prefetch_name(RopePrefetch p) {
  switch (p) {
    case RopePrefetch::kNone: return "none";
    case RopePrefetch::kL1: return "l1";
    case RopePrefetch::kL2: return "l2";
  }
  return "none";
}

int rope_prefetch_class(RopeWalk walk, DType dtype) { return 3 * static_cast<int>(walk) + static_cast<int>(dtype); }

std::size_t rope_prefetch_trial_bytes() { return std::max(std::size_t{16} << 20, last_level_cache_bytes()); }

RopePrefetchTuner::RopePrefetchTuner(const RopePrefetch* fixed, std::size_t min_trial_bytes)
    : fixed_(fixed != nullptr), fixed_policy_(fixed ? *fixed : RopePrefetch::kNone), min_trial_bytes_(min_trial_bytes) {}

void RopePrefetchTuner::reset(const RopePrefetch* fixed, std::size_t min_trial_bytes) {
  std::lock_guard<std::mutex> lock(mutex_);
  states_ = {};
  fixed_ = fixed != nullptr;
  fixed_policy_ = fixed ? *fixed : RopePrefetch::kNone;
  min_trial_bytes_ = min_trial_bytes;
}

RopePrefetch RopePrefetchTuner::policy_locked(int cls) const {
  return fixed_ ? fixed_policy_ : states_[cls].settled ? states_[cls].chosen : default_policy(cls);
}

RopePrefetchTuner::Step RopePrefetchTuner::next(int cls, std::size_t bytes) {
  std::lock_guard<std::mutex> lock(mutex_);
  Step step;
  step.policy = policy_locked(cls);
  if (fixed_ || states_[cls].settled || bytes < min_trial_bytes_ || states_[cls].trials >= kTrialCalls) return step;
  const int pair = states_[cls].trials++ % 6;
  step.trial = true;
  step.first = static_cast<RopePrefetch>(kPairs[pair][0]);
  step.second = static_cast<RopePrefetch>(kPairs[pair][1]);
  return step;
}

void RopePrefetchTuner::record(int cls, RopePrefetch policy, double seconds_per_byte) {
  std::lock_guard<std::mutex> lock(mutex_);
  State& s = states_[cls];
  if (s.settled) return;
  s.samples[static_cast<std::size_t>(policy)].push_back(seconds_per_byte);
  const std::size_t wanted = static_cast<std::size_t>(kRounds) * 4;  // samples a candidate
  for (const auto& samples : s.samples)
    if (samples.size() < wanted) return;
  int best = 0;
  for (int c = 1; c < kCandidates; ++c)
    if (lower_quartile(s.samples[static_cast<std::size_t>(c)]) < lower_quartile(s.samples[static_cast<std::size_t>(best)])) best = c;
  s.chosen = static_cast<RopePrefetch>(best);
  s.settled = true;
}

RopePrefetchTuner::Choice RopePrefetchTuner::choice(int cls) const {
  std::lock_guard<std::mutex> lock(mutex_);
  return {policy_locked(cls), fixed_ || states_[cls].settled};
}

bool parse_rope_prefetch(const char* value, RopePrefetch* fixed) {
  const std::string v = value ? value : "auto";
  if (v == "auto") return false;
  for (RopePrefetch p : {RopePrefetch::kNone, RopePrefetch::kL1, RopePrefetch::kL2})
    if (v == rope_prefetch_name(p)) {
      *fixed = p;
      return true;
    }
  throw Error("POSENC_ROPE_PREFETCH must be auto, none, l1 or l2, got '" + v + "'");
}

RopePrefetchTuner& rope_prefetch_tuner() {
  static RopePrefetchTuner tuner = [] {
    RopePrefetch fixed = RopePrefetch::kNone;
    const bool is_fixed = parse_rope_prefetch(std::getenv("POSENC_ROPE_PREFETCH"), &fixed);
    return RopePrefetchTuner(is_fixed ? &fixed : nullptr, rope_prefetch_trial_bytes());
  }();
  return tuner;
}

}  // namespace posenc
