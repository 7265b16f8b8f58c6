#include "posenc/rope_type.h"

namespace posenc {

const RopeTypeTraits& rope_type_traits(RopeType type) {
  static const std::vector<RopeTypeTraits> kTraits = {
      {RopeType::kDefault, false, false, {}},
      {RopeType::kLinear, true, false, {"factor"}},
      {RopeType::kNtk, true, false, {"factor"}},
      {RopeType::kDynamic, true, false, {"factor"}},
      // HF computes YaRN's factor from the context lengths when it is absent: not required.
      {RopeType::kYarn, false, true,
       {"factor", "original_max_position_embeddings", "attention_factor", "beta_fast", "beta_slow", "mscale",
        "mscale_all_dim", "truncate"}},
      {RopeType::kNtkByParts, true, true, {"factor", "original_max_position_embeddings", "beta_fast", "beta_slow", "truncate"}},
      {RopeType::kLlama3, true, true, {"factor", "original_max_position_embeddings", "low_freq_factor", "high_freq_factor"}},
      {RopeType::kLongRope, false, true,
       {"factor", "original_max_position_embeddings", "attention_factor", "short_factor", "long_factor"}},
      {RopeType::kProportional, false, false, {"factor"}},
  };
  for (const auto& t : kTraits)
    if (t.type == type) return t;
  return kTraits.front();
}

}  // namespace posenc
