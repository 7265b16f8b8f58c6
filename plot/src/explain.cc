#include "posenc_plot/explain.h"

#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <sstream>

#include "posenc/error.h"
#include "posenc/rope_schedule.h"
#include "posenc/seq_len.h"

namespace posenc::plot {
namespace {


std::string f(const char* format, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, format, v);
  return buf;
}

}  // namespace

ExplainReport explain(const ModelRope& model, const std::string& layer_type, std::optional<std::int64_t> context) {
  const LayerRope& layer = model.select(layer_type);
  const RopeParams& p = layer.params;
  if (context) check_seq_len(*context, "--context");  // a length, as freqs' --seq-len (issue 33, spec-107)
  const RopeSchedule s = compute_schedule(p, context);
  ExplainReport r;
  r.model_type = model.model_type;
  r.layer_type = layer.layer_type;
  r.rope_type = to_string(p.type);
  r.head_dim = p.head_dim;
  // Channels that really rotate: a frequency that underflowed to 0 in float32 rotates nothing
  // (proportional's deliberate zeros lie beyond rotated_dim and are not counted either way).
  for (int i = 0; i < s.rotated_dim / 2; ++i)
    if (!(s.inv_freq[static_cast<std::size_t>(i)] > 0)) ++r.zero_frequencies;
  r.rotary_dim = s.rotated_dim - 2 * r.zero_frequencies;
  r.frequencies = static_cast<int>(s.inv_freq.size());
  r.theta = p.theta;
  r.factor = p.type == RopeType::kDefault ? 1.0 : resolved_factor(p);
  r.attention_factor = s.attention_factor;
  r.training_context = p.original_max_position_embeddings ? static_cast<double>(*p.original_max_position_embeddings)
                       : p.max_position_embeddings        ? static_cast<double>(*p.max_position_embeddings)
                                                          : 0;
  r.context = context.value_or(0);
  r.notes = model.notes;
  int first_never = -1;
  for (std::size_t i = 0; i < s.inv_freq.size(); ++i) {
    if (s.base_inv_freq[i] <= 0) continue;
    const double wl = wavelength(s.base_inv_freq[i]);
    if (r.training_context > 0) {
      if (wl <= r.training_context) ++r.full_turn;
      else {
        ++r.never_turn;
        if (first_never < 0) first_never = static_cast<int>(i);
      }
    }
    if (!(s.inv_freq[i] > 0)) continue;  // stopped by the scaling: counted in zero_frequencies
    const double ratio = s.base_inv_freq[i] / s.inv_freq[i];
    if (std::fabs(ratio - 1) < 1e-5) ++r.unchanged;
    else if (std::fabs(ratio - r.factor) < 1e-4 * r.factor) ++r.interpolated_fully;
    else ++r.blended;
    // The slowest angle the model met in training is C * w_base; at N it reaches N * w_scaled.
    if (context && r.training_context > 0 && wl > r.training_context &&
        static_cast<double>(*context) * s.inv_freq[i] > r.training_context * s.base_inv_freq[i] * (1 + 1e-6))
      ++r.out_of_range_at_context;
  }
  auto& L = r.lines;
  L.push_back("RoPE (" + r.rope_type + ") rotates " + std::to_string(r.rotary_dim) + " of " + std::to_string(r.head_dim) +
              " channels per head as " + std::to_string(r.frequencies) + " frequency pairs, base theta = " + format_number(r.theta) +
              (r.rotary_dim < r.head_dim ? "; the other channels carry no position." : "."));
  if (r.zero_frequencies > 0)
    L.push_back(std::to_string(r.zero_frequencies) + " of the " + std::to_string(s.rotated_dim / 2) +
                " frequencies are 0 in float32 (" +
                (p.type == RopeType::kDefault ? "rope_theta " + format_number(r.theta) + " is so large that theta^(-2i/d) underflows"
                                              : std::string("underflow after scaling")) +
                "): their " + std::to_string(2 * r.zero_frequencies) + " channels never rotate and carry no position.");
  if (r.training_context > 0) {
    L.push_back("Training context: " + format_number(r.training_context) + " tokens. " + std::to_string(r.full_turn) +
                " frequencies complete a full turn within it (wavelength <= context: they repeat, and encode local, relative "
                "order); " + std::to_string(r.never_turn) + " never do (the model only saw an arc of their circle" +
                (first_never >= 0 ? ", from pair " + std::to_string(first_never) + " on" : "") + ").");
  } else {
    L.push_back("No training context in the config (max_position_embeddings): the turn analysis is skipped.");
  }
  if (p.type != RopeType::kDefault) {
    L.push_back("Scaling " + r.rope_type + " with factor " + format_number(r.factor) + ": " + std::to_string(r.unchanged) +
                " frequencies unchanged, " + std::to_string(r.interpolated_fully) + " divided by the factor (interpolated), " +
                std::to_string(r.blended) + " in between" +
                (s.correction_range ? " (ramp over pairs " + format_number((*s.correction_range)[0]) + ".." +
                                          format_number((*s.correction_range)[1]) + ")"
                                    : "") +
                ".");
  }
  if (std::fabs(r.attention_factor - 1) > 1e-12)
    L.push_back("Attention factor " + f("%.6g", r.attention_factor) + " multiplies cos and sin, so logits scale by its square (" +
                f("%.6g", r.attention_factor * r.attention_factor) + ").");
  if (context && r.training_context > 0) {
    const double x = static_cast<double>(*context) / r.training_context;
    L.push_back("At " + std::to_string(*context) + " tokens (" + f("%.3g", x) + "x the training context): " +
                std::to_string(r.out_of_range_at_context) + " of the " + std::to_string(r.never_turn) +
                " slow frequencies reach angles never seen in training" +
                (r.out_of_range_at_context == 0 && r.zero_frequencies > 0
                     ? " -- the angles that rotate stay inside the trained range, but " + std::to_string(r.zero_frequencies) +
                           " frequencies are 0 and do not rotate at all: those channels carry no position."
                 : r.out_of_range_at_context == 0 ? " -- every angle stays inside the trained range."
                                                : (p.type == RopeType::kDefault ? "; expect degradation without a scaling method (PI, NTK, YaRN)."
                                                                                : "; the scaling does not cover this length fully.")));
  }
  return r;
}

std::string explain_text(const ExplainReport& r) {
  std::ostringstream out;
  if (!r.model_type.empty()) out << "model_type " << r.model_type << (r.layer_type.empty() ? "" : ", layer type " + r.layer_type) << "\n";
  for (const auto& line : r.lines) out << "- " << line << "\n";
  for (const auto& n : r.notes) out << "note: " << n << "\n";
  return out.str();
}

std::string explain_json(const ExplainReport& r) {
  if (r.scheme != "rope")
    return nlohmann::json{{"model_type", r.model_type}, {"scheme", r.scheme}, {"rope", false}, {"report", r.lines},
                          {"notes", r.notes}}.dump(1);
  nlohmann::json j = {{"model_type", r.model_type}, {"layer_type", r.layer_type}, {"rope_type", r.rope_type},
                      {"head_dim", r.head_dim}, {"rotary_dim", r.rotary_dim}, {"frequencies", r.frequencies},
                      {"rope_theta", r.theta}, {"factor", r.factor}, {"attention_factor", r.attention_factor},
                      {"training_context", r.training_context}, {"context", r.context},
                      {"frequencies_full_turn_in_training", r.full_turn}, {"frequencies_never_turn_in_training", r.never_turn},
                      {"frequencies_unchanged", r.unchanged}, {"frequencies_interpolated", r.interpolated_fully},
                      {"frequencies_blended", r.blended}, {"frequencies_out_of_range_at_context", r.out_of_range_at_context},
                      {"frequencies_zero", r.zero_frequencies},
                      {"report", r.lines}, {"notes", r.notes}};
  return j.dump(1);
}

}  // namespace posenc::plot
