// The properties each scheme claims, measured live: what `posenc check` prints and the tests
// assert. Each check returns the largest deviation it measured and the tolerance it allows.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace posenc {

struct PropertyCheck {
  std::string name;   // short id, e.g. "rope.relative"
  std::string claim;  // the claim in words
  double measured = 0;
  double tolerance = 0;  // pass when measured <= tolerance
  bool pass() const { return measured <= tolerance; }
};

// positions x dim of the sinusoidal checks at most: their time grows with it (memory does not:
// the rows are streamed).
inline constexpr std::int64_t kMaxCheckValues = std::int64_t{1} << 28;

struct CheckOptions {
  int dim = 64;                        // model / head dimension used by the checks
  std::int64_t positions = 100000;     // sinusoidal uniqueness and boundedness range
  std::uint64_t seed = 1234;           // random q, k
};

// RoFormer §3.4.3: the relative upper bound (2/d) * sum_j |S_j(r)|, S_j = sum_{i<j} e^{i r w_i},
// of the score between positions r apart; it decays with the distance r.
double rope_decay_bound(const std::vector<float>& inv_freq, double distance);

std::vector<PropertyCheck> run_property_checks(const CheckOptions& options = {});

}  // namespace posenc
