// DeBERTa disentangled attention (He et al. 2021), per head, as HF's DeBERTa-v2/v3.
//
// Relative position δ(i, j) = i - j (query minus key), log-bucketed when position_buckets > 0:
//   |δ| <= mid (= buckets/2): δ itself;
//   otherwise sign(δ) * (mid + ceil(ln(|δ|/mid) / ln((max_position-1)/mid) * (mid-1))).
// With span = position_buckets (or max_relative_positions when not bucketed), the relative
// embedding rows are 0 .. 2*span-1 and δ maps to row clamp(δ + span, 0, 2 span - 1).
//   score(i, j) = [ Qc_i.Kc_j  +  Qc_i.Kr_row  (c2p)  +  Kc_j.Qr_row  (p2c) ] / sqrt(3 d)
// with row = clamp(δ(i, j) + span) in both terms: HF gathers p2c at -δ(j, i), and the buckets
// are odd-symmetric, so -δ(j, i) = δ(i, j).
#pragma once

#include <cstdint>
#include <vector>

namespace posenc {

struct DebertaRelativeParams {
  int position_buckets = 256;       // 0: no log buckets
  int max_relative_positions = 512;  // max_position for the log buckets / the span without them
};

// δ(i, j) after bucketing, [query_length][key_length].
std::vector<std::int64_t> deberta_relative_positions(int query_length, int key_length,
                                                     const DebertaRelativeParams& params);

// Bucketed value of one relative position.
std::int64_t deberta_log_bucket(std::int64_t relative, int bucket_size, int max_position);

struct DebertaHeadInputs {
  const float* qc;  // [q][d] content query
  const float* kc;  // [k][d] content key
  const float* kr;  // [2 span][d] position key  (key projection of the relative embeddings)
  const float* qr;  // [2 span][d] position query (query projection of the relative embeddings)
  int query_length, key_length, d;
};

// [q][k] scores: c2c + c2p + p2c, each over sqrt(3 d) (HF's scale_factor 1 + 2).
std::vector<float> deberta_scores(const DebertaHeadInputs& in, const DebertaRelativeParams& params);

}  // namespace posenc
