#include "posenc/alibi.h"

#include <cmath>
#include <string>

#include "posenc/error.h"

namespace posenc {
namespace {

void require_heads(int num_heads) {
  if (num_heads < 1 || num_heads > 1 << 20)
    throw Error("ALiBi needs num_heads in [1, 2^20], got " + std::to_string(num_heads));
}

int floor_pow2(int n) {
  int c = 1;
  while (c * 2 <= n) c *= 2;
  return c;
}

}  // namespace

std::vector<double> alibi_slopes(int num_heads) {
  require_heads(num_heads);
  const int c = floor_pow2(num_heads);
  std::vector<double> slopes;
  slopes.reserve(static_cast<std::size_t>(num_heads));
  for (int h = 1; h <= c; ++h) slopes.push_back(std::exp2(-8.0 * h / c));
  for (int h = 1; static_cast<int>(slopes.size()) < num_heads; h += 2)  // odd terms of the 2c sequence
    slopes.push_back(std::exp2(-8.0 * h / (2 * c)));
  return slopes;
}

std::vector<double> alibi_slopes_for_heads(int total_heads, int first_head, int count) {
  const auto all = alibi_slopes(total_heads);
  if (first_head < 0 || count < 0 || first_head + count > total_heads)
    throw Error("ALiBi head range [" + std::to_string(first_head) + ", " + std::to_string(first_head + count) +
                ") is outside [0, " + std::to_string(total_heads) + ")");
  return {all.begin() + first_head, all.begin() + first_head + count};
}

std::vector<float> alibi_slopes_bloom_f32(int num_heads) {
  require_heads(num_heads);
  const int c = floor_pow2(num_heads);
  // base = 2^(-(2^-(log2 c - 3))) = 2^(-8/c), rounded to float32, then raised in float32.
  const float base = static_cast<float>(std::pow(2.0, -std::pow(2.0, -(std::log2(c) - 3))));
  std::vector<float> slopes;
  for (int k = 1; k <= c; ++k) slopes.push_back(std::pow(base, static_cast<float>(k)));
  if (c != num_heads) {
    const float extra = static_cast<float>(std::pow(2.0, -std::pow(2.0, -(std::log2(2 * c) - 3))));
    for (int k = 1; static_cast<int>(slopes.size()) < num_heads; k += 2)
      slopes.push_back(std::pow(extra, static_cast<float>(k)));
  }
  return slopes;
}

std::vector<float> alibi_slopes_mpt_f32(int num_heads) {
  require_heads(num_heads);
  int h2 = 1;
  while (h2 < num_heads) h2 *= 2;
  std::vector<float> all;  // slope_k, k = 1..H2: m = float(k) * (8 / H2), 1 / pow(2, m), float32
  for (int k = 1; k <= h2; ++k) all.push_back(1.0f / std::pow(2.0f, static_cast<float>(k) * (8.0f / h2)));
  if (h2 == num_heads) return all;
  std::vector<float> slopes;  // concat(slopes[1::2], slopes[::2])[:H]
  for (int i = 1; i < h2; i += 2) slopes.push_back(all[i]);
  for (int i = 0; i < h2; i += 2) slopes.push_back(all[i]);
  slopes.resize(static_cast<std::size_t>(num_heads));
  return slopes;
}

void alibi_add_bias_row(double slope, std::int64_t query_pos, std::int64_t key_start, int count, AlibiMode mode,
                        float* scores) {
  for (int j = 0; j < count; ++j) {
    const double distance = static_cast<double>(query_pos - (key_start + j));
    scores[j] += static_cast<float>(-slope * (mode == AlibiMode::kSymmetric ? std::fabs(distance) : distance));
  }
}

}  // namespace posenc
