// The engine kit's reports as JSON text: what `posenc spec --json` and `posenc gguf --json` print
// and what Python's posenc.spec() and posenc.gguf() return (json.loads of the same text), so the
// CLI and Python give one structure.
#pragma once

#include <string>
#include <vector>

#include "posenc/gguf.h"
#include "posenc/model_spec.h"

namespace posenc {

// A model's positional semantics: model_type, positions (the scheme per stack when not RoPE),
// schedules per layer type (inv_freq, attention factor, ...), layers (one entry per layer),
// every_layer, mrope_section/style, warnings, notes. The per-layer keys engines' tests read
// (index ... softmax_scale_multiplier) are fixed; the rest may grow.
std::string model_spec_json(const ModelSpec& spec);

// A vision tower's 2-D RoPE: the object model_spec_json gives as "vision_rope" (freqs --vision --json).
std::string vision_rope_json_text(const VisionRope& rope);

// A GGUF file's positional keys and the schedule llama.cpp computes from them; with `hf` (the
// comparison with a config's schedule, compare_with_hf) also agrees_with_hf and mismatches.
struct GgufReport {
  const GgufFile* file = nullptr;
  const GgufRope* rope = nullptr;
  const std::vector<GgufMismatch>* mismatches = nullptr;  // null: no config given
};
std::string gguf_report_json(const GgufReport& report);

}  // namespace posenc
