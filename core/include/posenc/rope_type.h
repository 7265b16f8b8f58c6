// The RoPE frequency-schedule families posenc knows, with Hugging Face's names.
#pragma once

#include <optional>
#include <string>
#include <string_view>

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

// "default", "linear", "ntk", "dynamic", "yarn", "ntk_by_parts", "llama3", "longrope",
// "proportional".
const char* to_string(RopeType type);

// The inverse of to_string; nullopt for a name posenc does not know.
std::optional<RopeType> rope_type_from_name(std::string_view name);

// Every name rope_type_from_name accepts, comma-separated, for error messages and --help.
std::string rope_type_names();

}  // namespace posenc
