// The field table of RopeParams: one row per field, the one place a field is declared beyond
// the struct itself (gemma.cpp's ForEach(visitor), util/args.h). Each row carries
//   - the field's name: Hugging Face's key (`rope_theta`, `rope_type`), which is also the key
//     in posenc's JSON record (rope_params_json.h), the Python keyword and, in CLI form, the
//     `posenc freqs` flag (`--rope-theta`);
//   - the spellings accepted beside it: HF's legacy rope-dict key (`type`), posenc's record
//     and keyword name before this table (`theta`, `type`), older flags (`--max-pos`);
//   - whether HF keeps it in the rope dict (rope_parameters / rope_scaling) or elsewhere in
//     the model's config (head size, context length: read by hf_config's model-level rules);
//   - the RoPE types that read it (a key a type does not read is warned about, not applied);
//   - one line of help; the default is the member's initial value in RopeParams.
// Everything that reads or writes RopeParams field by field iterates this table: the JSON
// record, the config reader's rope dict and unknown-key check, the CLI flags, the Python
// keywords and the round-trip tests. Adding a field is one member and one row.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <limits>
#include <string>
#include <type_traits>

#include "posenc/rope_params.h"

namespace posenc {

// A set of RopeTypes (a bit per enumerator; RopeType has fewer than 32).
class RopeTypeSet {
 public:
  constexpr RopeTypeSet(std::initializer_list<RopeType> types) {
    for (RopeType t : types) bits_ |= bit(t);
  }
  static constexpr RopeTypeSet every() { return RopeTypeSet(~0u); }
  static constexpr RopeTypeSet every_but(RopeType t) { return RopeTypeSet(~bit(t)); }
  constexpr bool has(RopeType t) const { return (bits_ & bit(t)) != 0; }
  constexpr bool is_every() const { return bits_ == ~0u; }

 private:
  constexpr explicit RopeTypeSet(unsigned bits) : bits_(bits) {}
  static constexpr unsigned bit(RopeType t) { return 1u << static_cast<unsigned>(t); }
  unsigned bits_ = 0;
};

// Where a model's config.json keeps a field.
enum class FieldHome {
  kRopeDict,     // a key of rope_parameters / rope_scaling (rope_theta and partial_rotary_factor
                 // may also sit at the top level: hf_config reads both; the dict's rope_theta
                 // wins, the top level's partial_rotary_factor wins, as RU's
                 // standardize_rope_params)
  kModelConfig,  // outside the rope dict, derived by hf_config's model-level rules
};

struct RopeField {
  const char* name;  // HF's key; the JSON record key, the Python keyword, the flag --name
  const char* help;
  RopeTypeSet read_by = RopeTypeSet::every();
  FieldHome home = FieldHome::kRopeDict;
  const char* hf_legacy = nullptr;      // HF's older rope-dict key for the same value
  const char* record_legacy = nullptr;  // posenc's record / keyword name before this table
  const char* flag_legacy = nullptr;    // an older `posenc freqs` spelling ("--max-pos")
  // int fields and the entries of int lists: the range a reader accepts (validate() checks
  // the rest; 64-bit integers are left to it).
  std::int64_t min = std::numeric_limits<int>::min() + 1;
  std::int64_t max = std::numeric_limits<int>::max();
};

// Calls visit(row, member) for every field of p, in the table's order (the order of HF's
// rope-dict keys first). P is RopeParams or const RopeParams.
template <class P, class V, std::enable_if_t<std::is_same_v<std::remove_const_t<P>, RopeParams>, int> = 0>
void for_each_field(P& p, V&& visit) {
  using T = RopeType;
  visit(RopeField{"rope_type", "rope type", RopeTypeSet::every(), FieldHome::kRopeDict, "type", "type"}, p.type);
  visit(RopeField{"head_dim", "channels per attention head", RopeTypeSet::every(), FieldHome::kModelConfig, nullptr, nullptr,
                  nullptr, 0, kMaxHeadDim},  // 0: not set (a record of default params); validate() wants >= 1
        p.head_dim);
  visit(RopeField{"rope_theta", "the base of the frequencies", RopeTypeSet::every(), FieldHome::kRopeDict, nullptr,
                  "theta", "--theta"},
        p.theta);
  visit(RopeField{"partial_rotary_factor", "fraction of head_dim that rotates, in (0, 1]"}, p.partial_rotary_factor);
  visit(RopeField{"rotary_dim", "rotated channels (default: int(head_dim * partial_rotary_factor))",
                  RopeTypeSet::every(), FieldHome::kModelConfig},
        p.rotary_dim);
  visit(RopeField{"factor", "scale factor s (yarn, longrope: derived from the context lengths when absent)",
                  RopeTypeSet::every_but(T::kDefault)},
        p.factor);
  visit(RopeField{"max_position_embeddings", "the model's context length (dynamic's reference length)",
                  RopeTypeSet::every(), FieldHome::kModelConfig, nullptr, nullptr, "--max-pos"},
        p.max_position_embeddings);
  visit(RopeField{"original_max_position_embeddings",
                  "the pre-extension training context (default: max_position_embeddings)",
                  {T::kYarn, T::kNtkByParts, T::kLlama3, T::kLongRope}, FieldHome::kRopeDict, nullptr, nullptr,
                  "--original-max"},
        p.original_max_position_embeddings);
  visit(RopeField{"attention_factor", "explicit attention factor on cos and sin", {T::kYarn, T::kLongRope}},
        p.attention_factor);
  visit(RopeField{"beta_fast", "correction range, high-frequency end, in rotations", {T::kYarn, T::kNtkByParts}},
        p.beta_fast);
  visit(RopeField{"beta_slow", "correction range, low-frequency end, in rotations", {T::kYarn, T::kNtkByParts}},
        p.beta_slow);
  visit(RopeField{"mscale", "attention temperature numerator (used only with mscale_all_dim)", {T::kYarn}}, p.mscale);
  visit(RopeField{"mscale_all_dim", "attention temperature denominator", {T::kYarn}}, p.mscale_all_dim);
  visit(RopeField{"truncate", "floor/ceil the correction range (gpt-oss: false)", {T::kYarn, T::kNtkByParts}},
        p.truncate);
  visit(RopeField{"low_freq_factor", "wavelengths above original_max / this are divided by factor", {T::kLlama3}},
        p.low_freq_factor);
  visit(RopeField{"high_freq_factor", "wavelengths below original_max / this are kept", {T::kLlama3}},
        p.high_freq_factor);
  visit(RopeField{"short_factor", "one rescale factor per frequency within the original context", {T::kLongRope}},
        p.short_factor);
  visit(RopeField{"long_factor", "one rescale factor per frequency beyond the original context", {T::kLongRope}},
        p.long_factor);
  visit(RopeField{"mrope_section", "M-RoPE frequency sections taken from the T, H, W position axes",
                  RopeTypeSet::every(), FieldHome::kRopeDict, nullptr, nullptr, nullptr, 0, kMaxHeadDim},
        p.mrope_section);
  visit(RopeField{"mrope_interleaved", "M-RoPE axes interleaved over the frequencies (Qwen3-VL)"},
        p.mrope_interleaved);
  visit(RopeField{"mrope_xdrope",
                  "XD-RoPE (HunYuan-VL): mrope_section (3 or 4 axes) doubled over the full rotate_half width; "
                  "from the model family, not a rope dict key",
                  RopeTypeSet::every(), FieldHome::kModelConfig},
        p.mrope_xdrope);
  visit(RopeField{"alpha", "HunYuan NTK-alpha: static base rope_theta * alpha^(d/(d-2)) up to max_position_embeddings",
                  {T::kDynamic}},
        p.alpha);
  visit(RopeField{"llama_4_scaling_beta", "Ministral-3 / Llama-4 query scaling beta (attention side)"},
        p.llama_4_scaling_beta);
  // Not HF keys: posenc's clipped-RoPE option (Li et al. 2026), read from a rope dict all the same.
  visit(RopeField{"clip_low",
                  "Clipped RoPE: taper the lowest n frequencies by (1 + cos(pi k/(n-1)))/2 to 0 (soft, n >= 2), "
                  "or zero them (clip_hard); 0: off",
                  RopeTypeSet::every(), FieldHome::kRopeDict, nullptr, nullptr, nullptr, 0, kMaxHeadDim / 2},
        p.clip_low);
  visit(RopeField{"clip_hard", "Clipped RoPE: zero the clip_low lowest frequencies instead of tapering them"},
        p.clip_hard);
}

// A name in CLI form: "rope_theta" -> "--rope-theta".
inline std::string flag_of(const char* name) {
  std::string flag = std::string("--") + name;
  for (char& c : flag)
    if (c == '_') c = '-';
  return flag;
}

}  // namespace posenc
