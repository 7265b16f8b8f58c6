// `posenc explain`: a readable report of a model's positional encoding from its config.json.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "posenc/hf_config.h"
#include "posenc/model_positions.h"

namespace posenc::plot {

struct ExplainReport {
  std::string model_type, layer_type, rope_type;
  // "rope", or the summary of the scheme a model has instead (ModelPositions::summary); then the
  // RoPE fields below stay unset and only lines and notes are reported.
  std::string scheme = "rope";
  int head_dim = 0, rotary_dim = 0, frequencies = 0;
  double theta = 0, factor = 1, attention_factor = 1;
  double training_context = 0;  // original_max_position_embeddings, else max_position_embeddings (0: unknown)
  std::int64_t context = 0;     // the context asked about (0: none)
  int full_turn = 0;            // frequencies whose (unscaled) wavelength fits in the training context
  int never_turn = 0;           // frequencies that never complete a turn in it
  int unchanged = 0, interpolated_fully = 0, blended = 0;  // what the scaling does, per frequency
  int out_of_range_at_context = 0;  // slow frequencies whose angle at `context` exceeds training's
  // Frequencies meant to rotate that are 0 in float32 (rope_theta so large, or a scale factor
  // so large, that theta^(-2i/d) or its scaled value underflows): they rotate nothing, and
  // rotary_dim above counts only the channels that do rotate.
  int zero_frequencies = 0;
  std::vector<std::string> lines;   // the report in words
  std::vector<std::string> notes;   // from the config reading
};

ExplainReport explain(const ModelRope& model, const std::string& layer_type = "", std::optional<std::int64_t> context = std::nullopt);
// A model without RoPE (learned or sinusoidal tables, ALiBi, T5 buckets), in words and numbers
// computed from its own parameters (explain_positions.cc).
ExplainReport explain_positions(const ModelPositions& positions);
std::string explain_text(const ExplainReport& report);
std::string explain_json(const ExplainReport& report);

}  // namespace posenc::plot
