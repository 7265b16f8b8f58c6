#include "posenc/deberta.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "posenc/error.h"

namespace posenc {
namespace {

int span_of(const DebertaRelativeParams& p) { return p.position_buckets > 0 ? p.position_buckets : p.max_relative_positions; }

void validate(const DebertaRelativeParams& p) {
  if (p.max_relative_positions < 1) throw Error("DeBERTa max_relative_positions must be >= 1, got " + std::to_string(p.max_relative_positions));
  if (p.position_buckets < 0 || p.position_buckets == 1 || p.position_buckets == 2 || p.position_buckets == 3)
    throw Error("DeBERTa position_buckets must be 0 (off) or >= 4, got " + std::to_string(p.position_buckets));
  if (p.position_buckets > 0 && p.max_relative_positions - 1 <= p.position_buckets / 2)
    throw Error("DeBERTa max_relative_positions must exceed position_buckets/2 + 1, got " + std::to_string(p.max_relative_positions));
}

}  // namespace

std::int64_t deberta_log_bucket(std::int64_t relative, int bucket_size, int max_position) {
  const std::int64_t mid = bucket_size / 2;
  const std::int64_t sign = relative > 0 ? 1 : relative < 0 ? -1 : 0;
  // |δ| < mid keeps δ; HF substitutes mid-1 there only to keep log() away from 0.
  const std::int64_t abs_pos = (relative < mid && relative > -mid) ? mid - 1 : (relative < 0 ? -relative : relative);
  if (abs_pos <= mid) return relative;
  const double log_pos = std::ceil(std::log(static_cast<double>(abs_pos) / mid) /
                                   std::log(static_cast<double>(max_position - 1) / mid) * (mid - 1)) + mid;
  return static_cast<std::int64_t>(log_pos) * sign;
}

std::vector<std::int64_t> deberta_relative_positions(int q, int k, const DebertaRelativeParams& p) {
  validate(p);
  if (q < 0 || k < 0) throw Error("DeBERTa lengths must be >= 0");
  std::vector<std::int64_t> rel(static_cast<std::size_t>(q) * k);
  for (int i = 0; i < q; ++i)
    for (int j = 0; j < k; ++j) {
      const std::int64_t d = i - j;
      rel[static_cast<std::size_t>(i) * k + j] =
          p.position_buckets > 0 ? deberta_log_bucket(d, p.position_buckets, p.max_relative_positions) : d;
    }
  return rel;
}

std::vector<float> deberta_scores(const DebertaHeadInputs& in, const DebertaRelativeParams& p) {
  const auto rel = deberta_relative_positions(in.query_length, in.key_length, p);
  const std::int64_t span = span_of(p);
  const double scale = 1.0 / std::sqrt(3.0 * in.d);
  auto dot = [d = in.d](const float* a, const float* b) {
    double s = 0;
    for (int c = 0; c < d; ++c) s += static_cast<double>(a[c]) * b[c];
    return s;
  };
  auto row = [span](std::int64_t delta) { return std::clamp<std::int64_t>(delta + span, 0, 2 * span - 1); };
  std::vector<float> out(static_cast<std::size_t>(in.query_length) * in.key_length);
  for (int i = 0; i < in.query_length; ++i) {
    const float* qc = in.qc + static_cast<std::size_t>(i) * in.d;
    for (int j = 0; j < in.key_length; ++j) {
      const float* kc = in.kc + static_cast<std::size_t>(j) * in.d;
      const std::int64_t delta = rel[static_cast<std::size_t>(i) * in.key_length + j];
      const double c2c = dot(qc, kc);
      const double c2p = dot(qc, in.kr + static_cast<std::size_t>(row(delta)) * in.d);
      const double p2c = dot(kc, in.qr + static_cast<std::size_t>(row(delta)) * in.d);
      out[static_cast<std::size_t>(i) * in.key_length + j] = static_cast<float>((c2c + c2p + p2c) * scale);
    }
  }
  return out;
}

}  // namespace posenc
