#include "golden_remap.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <unordered_map>

#include "golden_mrope.h"
#include "posenc/error.h"
#include "posenc/rope_apply.h"

namespace posenc {
namespace {

// Whether query position qp sees key position kp: causal by position, then the layer's window.
bool sees(const LayerSpec& l, std::int64_t qp, std::int64_t kp) {
  if (kp > qp) return false;
  if (!l.window || *l.window <= 0) return true;
  if (l.attention == AttentionKind::kSliding) return qp - kp < *l.window;
  if (l.attention == AttentionKind::kChunked) return qp / *l.window == kp / *l.window;
  return true;
}

std::string mask_rule(const LayerSpec& l) {
  std::string rule = "key j seen by query i when positions[j] <= positions[i]";
  const bool windowed = l.window && *l.window > 0;
  const std::string w = windowed ? std::to_string(*l.window) : "";
  if (windowed && l.attention == AttentionKind::kSliding)
    rule += " and positions[i] - positions[j] < " + w + " (sliding window)";
  if (windowed && l.attention == AttentionKind::kChunked)
    rule += " and floor(positions[i] / " + w + ") = floor(positions[j] / " + w + ") (chunked attention)";
  return rule;
}

nlohmann::json remap_settings(const PositionRemap& r) {
  nlohmann::json s = {{"kind", to_string(r.kind)}};
  switch (r.kind) {
    case PositionRemapKind::kSelfExtend: s["group"] = r.group, s["window"] = r.window; break;
    case PositionRemapKind::kReRope: s["window"] = r.window; break;
    case PositionRemapKind::kLeakyReRope: s["window"] = r.window, s["leak"] = r.leak; break;
    case PositionRemapKind::kDualChunk: s["chunk_size"] = r.chunk_size, s["local_size"] = r.local_size; break;
    case PositionRemapKind::kNone: break;
  }
  return s;
}

const char* remap_formula(PositionRemapKind kind) {
  switch (kind) {
    case PositionRemapKind::kSelfExtend:
      return "p = positions[i] (query), r = positions[j] (key): D' = p - r for p - r < window, else floor(p / group) - "
             "floor(r / group) + window - floor(window / group)";
    case PositionRemapKind::kReRope: return "p = positions[i] (query), r = positions[j] (key): D' = min(p - r, window)";
    case PositionRemapKind::kLeakyReRope:
      return "p = positions[i] (query), r = positions[j] (key): D' = p - r for p - r < window, else window + (p - r - "
             "window) / leak";
    case PositionRemapKind::kDualChunk:
      return "p = positions[i] (query), r = positions[j] (key), c = chunk_size - local_size, n(x) = floor(x / c): D' = p - r "
             "for n(r) >= n(p); min(p mod c + c, chunk_size) - r mod c for n(r) = n(p) - 1; min(2c - 1, chunk_size) - r mod c "
             "for n(r) <= n(p) - 2";
    case PositionRemapKind::kNone: break;
  }
  return "D' = positions[i] - positions[j]";
}

// cos and sin of inv_freq[f] * D' for f < F, in double, kept per distinct D' (a sequence of
// consecutive positions has at most 2P of them) up to kMaxKept distances; past that, computed
// per pair. Without it a 4096-position golden took a minute of sincos.
class AngleCache {
 public:
  explicit AngleCache(const std::vector<float>& inv_freq) : inv_freq_(inv_freq) {}
  const double* at(double distance) {
    const auto it = index_.find(distance);
    if (it != index_.end()) return &kept_[it->second];
    const std::size_t F = inv_freq_.size();
    const bool keep = index_.size() < kMaxKept;
    std::vector<double>& to = keep ? kept_ : scratch_;
    const std::size_t at = keep ? kept_.size() : 0;
    to.resize(at + 2 * F);
    for (std::size_t f = 0; f < F; ++f) {
      const double angle = static_cast<double>(inv_freq_[f]) * distance;
      to[at + 2 * f] = std::cos(angle);
      to[at + 2 * f + 1] = std::sin(angle);
    }
    if (keep) index_.emplace(distance, at);
    return &to[at];
  }

 private:
  static constexpr std::size_t kMaxKept = 1 << 16;
  const std::vector<float>& inv_freq_;
  std::unordered_map<double, std::size_t> index_;
  std::vector<double> kept_, scratch_;
};

}  // namespace

nlohmann::json golden_remap_vectors(const GoldenRemapInput& in, const std::function<float()>& uniform,
                                    std::vector<F32Tensor>& out) {
  const LayerSpec& l = *in.layer;
  const RopeSchedule& s = *in.schedule;
  const std::vector<std::int64_t>& pos = *in.positions;
  const std::int64_t P = static_cast<std::int64_t>(pos.size());
  const int D = l.head_dim, F = l.rotary_dim / 2, off = l.rotary_offset;
  const bool half_split = l.layout == RopeLayout::kHalfSplit;  // else pairs (2f, 2f + 1): interleaved, deepseek_v3
  const double af2 = s.attention_factor * s.attention_factor;  // cos/sin carry it, on q and on k
  double widest = 0;
  for (float f : s.inv_freq) widest = std::max(widest, std::fabs(static_cast<double>(f)));

  const std::string name = l.layer_type + ".";
  F32Tensor v{name + "v", {P, D}, {}};
  for (std::int64_t i = 0; i < P * D; ++i) v.data.push_back(uniform());
  F32Tensor logits{name + "remap_logits", {P, P}, std::vector<float>(P * P)};
  F32Tensor attn{name + "remap_out", {P, D}, std::vector<float>(P * D)};
  // Every remapped distance lies between the plain ones and the far positions' (attention.h): the
  // far bound at the largest position keeps every angle within RoPE's range, checked before any work.
  const std::int64_t largest = *std::max_element(pos.begin(), pos.end());
  const double far = std::max(remap_far_bound(in.remap, largest), static_cast<double>(largest));
  if (!(far * widest <= kMaxRopeAngle))
    throw Error("golden: remap " + std::string(to_string(in.remap.kind)) + " " + remap_settings(in.remap).dump() +
                ": the far position reaches " + format_number(far) + " for positions up to " + std::to_string(largest) +
                ", angles beyond 2^31 radians; expected settings whose far positions stay below 2^31 / " +
                format_number(widest));
  AngleCache angles(s.inv_freq);
  std::vector<double> row(P);
  for (std::int64_t i = 0; i < P; ++i) {
    const float* q = &in.q->data[i * D];
    for (std::int64_t j = 0; j < P; ++j) {
      const float* k = &in.k->data[j * D];
      const double* cs = angles.at(remapped_distance(in.remap, pos[i], pos[j]));
      double plain = 0, rotated = 0;
      for (int d = 0; d < D; ++d)
        if (d < off || d >= off + 2 * F) plain += static_cast<double>(q[d]) * k[d];
      for (int f = 0; f < F; ++f) {
        const int a = off + (half_split ? f : 2 * f), b = off + (half_split ? f + F : 2 * f + 1);
        // <R(D') q, k> for the pair (a, b): cos (qa ka + qb kb) + sin (qa kb - qb ka)
        rotated += cs[2 * f] * (double(q[a]) * k[a] + double(q[b]) * k[b]) +
                   cs[2 * f + 1] * (double(q[a]) * k[b] - double(q[b]) * k[a]);
      }
      row[j] = l.softmax_scale * (*in.query_scales)[i] * (plain + af2 * rotated);
      logits.data[i * P + j] = static_cast<float>(row[j]);
    }
    double top = -std::numeric_limits<double>::infinity(), sum = 0;
    for (std::int64_t j = 0; j < P; ++j)
      if (sees(l, pos[i], pos[j])) top = std::max(top, row[j]);
    std::vector<double> acc(D, 0.0);
    for (std::int64_t j = 0; j < P; ++j) {
      if (!sees(l, pos[i], pos[j])) continue;
      const double w = std::exp(row[j] - top);
      sum += w;
      for (int d = 0; d < D; ++d) acc[d] += w * v.data[j * D + d];
    }
    for (int d = 0; d < D; ++d) attn.data[i * D + d] = static_cast<float>(acc[d] / sum);  // query i sees itself
  }
  nlohmann::json entry = {
      {"settings", remap_settings(in.remap)},
      {"distance", remap_formula(in.remap.kind)},
      {"logits", "softmax_scale * query_scales[i] * (q[i] . k[j] outside the rotary slice + attention_factor^2 * sum "
                 "over pairs (a, b) of cos(inv_freq[f] D') (q_a k_a + q_b k_b) + sin(inv_freq[f] D') (q_a k_b - q_b k_a)), "
                 "in double from the float32 q, k and inv_freq; the query scale at the query's own position"},
      {"mask", mask_rule(l)},
      {"out", "remap_out[i] = sum_j softmax_j(remap_logits[i, j] over the keys seen) v[j], in double; positions only: "
              "no logit softcap, attention sinks (gpt-oss) or top-k key selection (DeepSeek-V3.2's indexer)"},
      {"engine_tolerance", "an engine rotating q and k in float32 at positions whose difference is D' differs by about "
                           "position * 2^-24 radians per angle"},
      {"tensors", nlohmann::json::array()}};
  return with_tensors(std::move(entry), {&v, &logits, &attn}, out);
}

}  // namespace posenc
