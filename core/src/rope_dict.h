// A config.json's rope dict (rope_parameters, or the legacy rope_scaling) into RopeParams,
// driven by the field table (rope_fields.h). Private to the core library; hf_config.cc calls it
// once per dict (once per layer type in HF v5's per-layer layout).
#pragma once

#include <string>

#include "json_fields.h"
#include "posenc/hf_config.h"
#include "posenc/rope_params.h"

namespace posenc {

// The model around a rope dict: the rules that look past the dict (a top-level rope_theta or
// original_max_position_embeddings, a family's spelling of the type).
struct RopeDictContext {
  const json_fields::json& model;  // the text model's config: text_config, or the top level
  std::string prefix;              // "" or "text_config.": a model key's path for messages
  bool yarn_means_longrope;        // Phi-3: rope type "yarn" is longrope (FamilyQuirks)
  bool xdrope;                     // HunYuan-VL: type "xdrope" is dynamic, xdrope_section is mrope_section
  // RU standardize_rope_params: a top-level partial_rotary_factor overwrites the dict's. Not for
  // a family that reads its own fraction key (FamilyQuirks::fraction_key: GPTNeoXConfig's
  // rotary_pct only fills a dict without one, and the mixin's key is never read).
  bool top_level_fraction_overrides;
  bool lenient;                    // unknown keys are warnings, not errors
  const char* ignored_keys;        // FamilyQuirks::ignored_rope_keys ('|'-bounded) or nullptr
  ModelRope& out;                  // warnings and notes are appended here
  // DeepSeek-V4: each dict's rope_theta is its own by design (compress_rope_theta), not a value
  // that overrides the top-level rope_theta, so no warning says it does.
  bool own_theta = false;
};

// Every key of the rope dict any RoPE type reads (HF's and posenc's own types), in table order:
// the names the unknown-key check accepts.
const std::vector<std::string>& rope_dict_keys();

// Reads `dict` (at path `where`, e.g. "rope_scaling") over p, which holds the model-level
// fields already (head_dim, rope_theta, max_position_embeddings, ...). Keys the type does not
// read are warned about and left; an unknown key is an Error (a warning with lenient).
void read_rope_dict(const json_fields::json& dict, const std::string& where, const RopeDictContext& context,
                    RopeParams& p);

}  // namespace posenc
