#include "posenc/rope_type.h"

namespace posenc {

const RopeTypeTraits& rope_type_traits(RopeType type) {
  static const std::vector<RopeTypeTraits> kTraits = {
      {RopeType::kDefault, false, false},
      {RopeType::kLinear, true, false},
      {RopeType::kNtk, true, false},
      {RopeType::kDynamic, true, false},
      // HF computes YaRN's factor from the context lengths when it is absent: not required.
      {RopeType::kYarn, false, true},
      {RopeType::kNtkByParts, true, true},
      {RopeType::kLlama3, true, true},
      {RopeType::kLongRope, false, true},
      {RopeType::kProportional, false, false},
  };
  for (const auto& t : kTraits)
    if (t.type == type) return t;
  return kTraits.front();
}

}  // namespace posenc
