#include "posenc/learned.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "posenc/error.h"
#include "posenc/numerics.h"

namespace posenc {
namespace {

// splitmix64: tiny, portable, and identical everywhere (std::normal_distribution is not).
std::uint64_t next(std::uint64_t& state) {
  std::uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

double uniform01(std::uint64_t& state) { return (static_cast<double>(next(state) >> 11) + 0.5) * 0x1.0p-53; }

void require_shape(int num_positions, int dim, int offset) {
  if (num_positions < 1 || dim < 1 || offset < 0 || static_cast<long long>(num_positions + offset) * dim > (1ll << 31))
    throw Error("learned table needs num_positions >= 1, dim >= 1, offset >= 0 and at most 2^31 values; got " +
                std::to_string(num_positions) + " x " + std::to_string(dim) + " (offset " + std::to_string(offset) + ")");
}

}  // namespace

LearnedTable learned_init(int num_positions, int dim, double std, std::uint64_t seed, int offset) {
  require_shape(num_positions, dim, offset);
  if (!(std >= 0 && std::isfinite(std))) throw Error("learned init std must be >= 0, got " + std::to_string(std));
  LearnedTable t{num_positions, dim, offset, {}};
  t.weight.resize(static_cast<std::size_t>(t.rows()) * dim);
  std::uint64_t state = seed;
  for (float& w : t.weight) {  // Box-Muller
    const double u1 = uniform01(state), u2 = uniform01(state);
    w = static_cast<float>(std * std::sqrt(-2 * std::log(u1)) * std::cos(2 * kPi * u2));
  }
  return t;
}

void learned_lookup(const LearnedTable& t, const std::int64_t* positions, int count, std::int64_t past, float* out) {
  const std::size_t d = static_cast<std::size_t>(t.dim);
  for (int i = 0; i < count; ++i) {
    const std::int64_t row = positions[i] + past + t.offset;
    if (row < 0 || row >= t.rows())
      throw Error("position " + std::to_string(positions[i] + past) + " is outside the learned table (positions " +
                  std::to_string(-t.offset) + " .. " + std::to_string(t.num_positions - 1) +
                  "); interpolate the table or use a scheme without a length limit");
    std::copy_n(t.weight.begin() + static_cast<std::ptrdiff_t>(static_cast<std::size_t>(row) * d), d,
                out + static_cast<std::size_t>(i) * d);
  }
}

LearnedTable learned_interpolate(const LearnedTable& t, int new_num_positions) {
  require_shape(new_num_positions, t.dim, t.offset);
  LearnedTable out{new_num_positions, t.dim, t.offset, {}};
  const std::size_t d = static_cast<std::size_t>(t.dim);
  out.weight.resize(static_cast<std::size_t>(out.rows()) * d);
  std::copy_n(t.weight.begin(), static_cast<std::size_t>(t.offset) * d, out.weight.begin());
  const double scale = static_cast<double>(t.num_positions) / new_num_positions;
  for (int p = 0; p < new_num_positions; ++p) {
    const double src = std::max((p + 0.5) * scale - 0.5, 0.0);  // half-pixel centres
    const int i0 = std::min(static_cast<int>(src), t.num_positions - 1);
    const int i1 = std::min(i0 + 1, t.num_positions - 1);
    const double w1 = src - i0;
    const float* a = &t.weight[static_cast<std::size_t>(i0 + t.offset) * d];
    const float* b = &t.weight[static_cast<std::size_t>(i1 + t.offset) * d];
    float* o = &out.weight[static_cast<std::size_t>(p + t.offset) * d];
    for (std::size_t c = 0; c < d; ++c) o[c] = static_cast<float>((1 - w1) * a[c] + w1 * b[c]);
  }
  return out;
}

}  // namespace posenc
