#include "posenc/t5_bias.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <string>

#include "posenc/error.h"

namespace posenc {

void validate(const T5BucketParams& p) {
  const int min_buckets = p.bidirectional ? 4 : 2;
  if (p.num_buckets < min_buckets || p.num_buckets > 1 << 20)
    throw Error("T5 num_buckets must be in [" + std::to_string(min_buckets) + ", 2^20] (" +
                (p.bidirectional ? "bidirectional" : "causal") + "), got " + std::to_string(p.num_buckets));
  const int exact = (p.bidirectional ? p.num_buckets / 2 : p.num_buckets) / 2;
  if (p.max_distance <= exact)
    throw Error("T5 max_distance must exceed the exact range " + std::to_string(exact) + ", got " +
                std::to_string(p.max_distance));
}

int t5_bucket(std::int64_t r, const T5BucketParams& p) {
  int buckets = p.num_buckets;
  int bucket = 0;
  // |r|, with -2^63 (whose negation overflows) taken as 2^63 - 1: both are far past max_distance.
  const std::int64_t magnitude = r == std::numeric_limits<std::int64_t>::min() ? std::numeric_limits<std::int64_t>::max()
                                                                               : (r < 0 ? -r : r);
  std::int64_t n;
  if (p.bidirectional) {
    buckets /= 2;
    if (r > 0) bucket += buckets;
    n = magnitude;
  } else {
    n = r < 0 ? magnitude : 0;
  }
  const int exact = buckets / 2;
  if (n < exact) return bucket + static_cast<int>(n);
  // float32 as HF: log(n/exact) / log(D/exact) * (N - exact), truncated toward zero.
  const float scaled = std::log(static_cast<float>(n) / static_cast<float>(exact)) /
                       static_cast<float>(std::log(static_cast<double>(p.max_distance) / exact)) *
                       static_cast<float>(buckets - exact);
  const float capped = std::fmin(scaled, static_cast<float>(buckets));  // no overflow in the cast
  return bucket + std::min(exact + static_cast<int>(capped), buckets - 1);
}

void t5_add_bias_row(const float* bias_of_bucket, const T5BucketParams& p, std::int64_t query_pos,
                     std::int64_t key_start, int count, float* scores) {
  for (int j = 0; j < count; ++j) scores[j] += bias_of_bucket[t5_bucket(key_start + j - query_pos, p)];
}

std::vector<float> t5_compute_bias(const std::vector<float>& table, int num_heads, int query_length,
                                   int key_length, std::int64_t past, const T5BucketParams& p) {
  validate(p);
  if (num_heads < 1) throw Error("T5 bias needs num_heads >= 1, got " + std::to_string(num_heads));
  if (table.size() != static_cast<std::size_t>(p.num_buckets) * num_heads)
    throw Error("T5 bias table must be [num_buckets=" + std::to_string(p.num_buckets) + "][num_heads=" +
                std::to_string(num_heads) + "], got " + std::to_string(table.size()) + " values");
  if (query_length < 0 || key_length < 0 || past < 0)
    throw Error("T5 bias lengths and past must be >= 0");
  const std::size_t q = static_cast<std::size_t>(query_length), k = static_cast<std::size_t>(key_length);
  std::vector<float> bias(static_cast<std::size_t>(num_heads) * q * k);
  for (std::size_t i = 0; i < q; ++i) {
    for (std::size_t j = 0; j < k; ++j) {
      const int b = t5_bucket(static_cast<std::int64_t>(j) - (static_cast<std::int64_t>(i) + past), p);
      for (int h = 0; h < num_heads; ++h)
        bias[(static_cast<std::size_t>(h) * q + i) * k + j] = table[static_cast<std::size_t>(b) * num_heads + h];
    }
  }
  return bias;
}

}  // namespace posenc
