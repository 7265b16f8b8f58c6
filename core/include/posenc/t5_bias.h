// T5 relative position bias (Raffel et al. 2020), as HF's T5Attention computes it.
//
// r = key_position - query_position. bucket(r):
//   bidirectional: half the buckets for r > 0, half for r <= 0, by n = |r|;
//   causal:        n = max(-r, 0), so every future key shares the bucket of r = 0;
//   n < N/2 (of the remaining N buckets): bucket n (exact);
//   otherwise:     N/2 + int(ln(n / (N/2)) / ln(D / (N/2)) * (N - N/2)), capped at N-1
//                  (float32 log and truncation toward zero, as HF; log(0) is never evaluated).
// bias[h][i][j] = table[bucket(j - (i + past))][h]; T5 adds it to raw q.k (no 1/sqrt(d)).
#pragma once

#include <cstdint>
#include <vector>

namespace posenc {

struct T5BucketParams {
  int num_buckets = 32;
  int max_distance = 128;
  bool bidirectional = true;  // encoders; decoders use causal buckets
};

// Throws posenc::Error unless every bucket is reachable without log(0): num_buckets >= 2
// (>= 4 bidirectional) and max_distance > the exact range.
void validate(const T5BucketParams& params);

int t5_bucket(std::int64_t relative_position, const T5BucketParams& params);

// Adds one query row of one head's bias into attention scores, without an S x S matrix:
// scores[j] += bias_of_bucket[bucket(key_start + j - query_pos)], j < count. bias_of_bucket is
// that head's column of the table, [num_buckets] contiguous. Exact-range buckets need no log.
void t5_add_bias_row(const float* bias_of_bucket, const T5BucketParams& params, std::int64_t query_pos,
                     std::int64_t key_start, int count, float* scores);

// table: [num_buckets][num_heads] row-major (HF's nn.Embedding weight). Returns
// [num_heads][query_length][key_length]; query i sits at position i + past.
std::vector<float> t5_compute_bias(const std::vector<float>& table, int num_heads, int query_length,
                                   int key_length, std::int64_t past, const T5BucketParams& params);

}  // namespace posenc
