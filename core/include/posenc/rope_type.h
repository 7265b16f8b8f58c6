// The RoPE frequency-schedule families posenc knows, with Hugging Face's names, and what each
// reads from a rope dict and requires.
#pragma once

#include <vector>

#include "posenc/names.h"

namespace posenc {

enum class RopeType {
  kDefault,       // 1 / theta^(2i/d)                                    (RoFormer, Su et al. 2021)
  kLinear,        // Position Interpolation: inv_freq / factor            (Chen et al. 2023)
  kNtk,           // static NTK-aware: theta * factor^(d/(d-2))          (bloc97, 2023; no HF name)
  kDynamic,       // dynamic NTK: the NTK base grows with the sequence length
  kYarn,          // NTK-by-parts ramp + attention temperature           (Peng et al. 2023)
  kNtkByParts,    // the YaRN ramp alone, attention factor 1             (no HF name)
  kLlama3,        // Llama 3.1 low/high frequency bands
  kLongRope,      // per-frequency short/long rescale factors           (Ding et al. 2024; Phi-3)
  kProportional,  // Gemma-4: exponent over head_dim, zero frequencies beyond the rotary part
};

POSENC_ENUM_NAMES(RopeType, "rope_type", {RopeType::kDefault, "default"}, {RopeType::kLinear, "linear"},
                  {RopeType::kNtk, "ntk"}, {RopeType::kDynamic, "dynamic"}, {RopeType::kYarn, "yarn"},
                  {RopeType::kNtkByParts, "ntk_by_parts"}, {RopeType::kLlama3, "llama3"},
                  {RopeType::kLongRope, "longrope"}, {RopeType::kProportional, "proportional"},
                  // Older spellings configs still carry: Qwen2-VL's "mrope" (M-RoPE over default
                  // frequencies), early Phi-3's "su".
                  {RopeType::kDefault, "mrope"}, {RopeType::kLongRope, "su"},
                  // p-RoPE (Barbero et al. 2024, "Round and round we go! What makes Rotary
                  // Positional Encodings useful?", arXiv 2410.06205): keep the fastest fraction p
                  // of the frequencies, zero the rest -- Gemma-4's proportional rope.
                  {RopeType::kProportional, "p-rope"});

// What a family requires, after HF's modeling_rope_utils.py (_compute_*_parameters and
// _validate_*_parameters): one row per RopeType, read by validate(RopeParams) and by the config
// reader. Which keys a type reads is a column of the field table (RopeField::read_by,
// rope_fields.h).
struct RopeTypeTraits {
  RopeType type;
  bool needs_factor;        // `factor` is required
  bool needs_original_max;  // original_max_position_embeddings (the config's own when absent)
};
const RopeTypeTraits& rope_type_traits(RopeType type);

}  // namespace posenc
