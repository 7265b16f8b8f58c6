// `posenc explain` for a model without RoPE: what its positions are, in words, with numbers
// computed by the core's own scheme functions from the model's parameters (issue 32).
#include <cmath>
#include <iomanip>
#include <sstream>

#include "posenc/alibi.h"
#include "posenc/error.h"
#include "posenc/numerics.h"
#include "posenc/sinusoidal.h"
#include "posenc/t5_bias.h"
#include "posenc_plot/explain.h"

namespace posenc::plot {
namespace {

// Four significant digits: enough to read a slope or a dot product, short enough for a sentence.
std::string g(double v) { return (std::ostringstream() << std::setprecision(4) << v).str(); }

std::string prefix(const ModelPositions& m, const PositionStack& s) { return m.stacks.size() > 1 ? s.stack + ": " : ""; }

void learned_lines(const PositionStack& s, std::vector<std::string>& L, const std::string& at) {
  L.push_back(at + "a learned table of " + std::to_string(s.rows) + " rows, one vector of " + std::to_string(s.width) +
              " numbers per position, added to the token embedding before the first layer (" + s.hf_source + ").");
  L.push_back(at + "Each row was trained on its own: nothing ties row p to row p + 1, and position " +
              std::to_string(s.rows) + " has no row at all, so the model cannot read a longer input (no extrapolation).");
}

// PE(p).PE(p + k) depends on k only (Vaswani et al. 2017, section 3.5): measured on the model's table.
void sinusoidal_lines(const PositionStack& s, std::vector<std::string>& L, const std::string& at) {
  const auto w = sinusoidal_frequencies(s.sinusoidal);
  const double k = 5;
  const std::int64_t far = s.rows > 6 ? s.rows - 6 : 0;
  const auto rows = sinusoidal_table(s.sinusoidal, {0, 5, far, far + 5});
  double near_dot = 0, far_dot = 0;
  for (int c = 0; c < s.width; ++c) {
    near_dot += static_cast<double>(rows[c]) * rows[s.width + c];
    far_dot += static_cast<double>(rows[2 * s.width + c]) * rows[3 * s.width + c];
  }
  L.push_back(at + "a fixed sinusoidal table of " + std::to_string(s.rows) + " rows of " + std::to_string(s.width) +
              " (not trained; " + s.hf_source + "), " + std::to_string(w.size()) + " frequencies from " + g(w.front()) +
              " to " + g(w.back()) + " radians per position (wavelengths " + g(2 * kPi / w.front()) + " to " +
              g(2 * kPi / w.back()) + " positions).");
  L.push_back(at + "The dot product of two rows depends only on their distance: PE(0).PE(" + g(k) + ") = " + g(near_dot) +
              ", PE(" + std::to_string(far) + ").PE(" + std::to_string(far + 5) + ") = " + g(far_dot) + ".");
}

void alibi_lines(const PositionStack& s, std::vector<std::string>& L, const std::string& at) {
  // The slope the softmax sees: Falcon scales the bias by 1/sqrt(head_dim) with q.k.
  double min_slope = s.alibi_slopes.front() * s.alibi_bias_scale, max_slope = min_slope;
  for (double v : s.alibi_slopes)
    min_slope = std::fmin(min_slope, v * s.alibi_bias_scale), max_slope = std::fmax(max_slope, v * s.alibi_bias_scale);
  L.push_back(at + "no position embedding: each of the " + std::to_string(s.heads) + " heads subtracts slope * distance "
              "from its attention scores (ALiBi, Press et al. 2022; " + s.hf_source + ").");
  if (s.alibi_bias_scale != 1)
    L.push_back(at + "The bias is scaled with q.k by " + g(s.alibi_bias_scale) + " (1/sqrt(head_dim)) before the softmax, so "
                "the slopes below are the paper's times " + g(s.alibi_bias_scale) + ".");
  L.push_back(at + "Slopes from " + g(max_slope) + " (head 0) to " + g(min_slope) + ": a key 100 tokens back loses " +
              g(100 * max_slope) + " in the steepest head (weight x e^-" + g(100 * max_slope) + "), " +
              g(100 * min_slope) + " in the gentlest, so some heads look locally and some far.");
  L.push_back(at + "The bias is a rule, not a table: any length is accepted, and distances past training get the same "
              "straight-line penalty (this is why ALiBi extrapolates).");
}

void t5_lines(const PositionStack& s, std::vector<std::string>& L, const std::string& at) {
  const T5BucketParams& b = s.buckets;
  const int exact = (b.bidirectional ? b.num_buckets / 2 : b.num_buckets) / 2;
  const int last = t5_bucket(-4 * static_cast<std::int64_t>(b.max_distance), b);
  std::int64_t first_in_last = 0;
  while (t5_bucket(-first_in_last, b) != last) ++first_in_last;
  L.push_back(at + "no position embedding: a learned bias per (head, bucket of the distance key - query) is added to "
              "the scores (T5, Raffel et al. 2020; " + s.hf_source + "), " + std::to_string(s.heads) + " heads, " +
              std::to_string(b.num_buckets) + " buckets" +
              (b.bidirectional ? ", half for keys before the query and half for keys after." : ", keys before the query only (causal)."));
  L.push_back(at + "Distances 0 to " + std::to_string(exact - 1) + " each have their own bucket; from " +
              std::to_string(exact) + " on the buckets grow logarithmically, and every key " +
              std::to_string(first_in_last) + " or more tokens back shares bucket " + std::to_string(last) +
              " (HF's logarithm, scaled by max_distance " + std::to_string(b.max_distance) +
              ", reaches the last bucket before it): far tokens are told apart by content only.");
}

}  // namespace

ExplainReport explain_positions(const ModelPositions& m) {
  if (m.is_rope()) throw Error("explain_positions: model_type '" + m.model_type + "' is a RoPE model; use explain()");
  ExplainReport r;
  r.model_type = m.model_type;
  r.scheme = m.summary();
  r.rope_type = "none";
  r.lines.push_back("No RoPE: " + m.summary() + ".");
  for (const PositionStack& s : m.stacks) {
    const std::string at = prefix(m, s);
    switch (s.scheme) {
      case PositionScheme::kLearnedAbsolute: learned_lines(s, r.lines, at); break;
      case PositionScheme::kSinusoidal: sinusoidal_lines(s, r.lines, at); break;
      case PositionScheme::kAlibi: alibi_lines(s, r.lines, at); break;
      case PositionScheme::kT5Buckets: t5_lines(s, r.lines, at); break;
      case PositionScheme::kRope: break;
    }
  }
  r.notes = m.notes;
  return r;
}

}  // namespace posenc::plot
