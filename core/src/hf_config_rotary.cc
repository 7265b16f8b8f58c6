// The rotated channels of a config (config_doc.h read_rotary_channels): the rotary fraction under the
// family's key, the rotary_dim key HF's generic code ignores, and GPT-J's and CodeGen's own rotary_dim.
#include <string>

#include "config_doc.h"
#include "json_fields.h"
#include "posenc/error.h"

namespace posenc {

namespace jf = json_fields;

void read_rotary_channels(const ConfigDoc& doc, const ConfigOptions& options, const char* fraction_key, RopeParams& p,
                          ModelRope& out) {
  const nlohmann::json& model = doc.model();
  const std::string& w = doc.where();
  const FamilyQuirks& q = doc.quirks();
  if (q.own_rotary_dim) {
    // GPTJAttention / CodeGenAttention: rotary_dim channels of each head (GPTJConfig's default 64).
    // A null rotary_dim makes HF's `rotary_dim or embed_dim` span the whole model width, not a head.
    if (model.contains("rotary_dim") && model["rotary_dim"].is_null())
      throw Error(doc.at("rotary_dim") + " is null: HF's " + doc.model_type() + " then builds sinusoids over the whole "
                  "n_embd (`rotary_dim or embed_dim`), wider than a head; expected an even number of channels");
    const auto rd = jf::integer_in(model, "rotary_dim", w, 2, kMaxHeadDim);
    p.rotary_dim = static_cast<int>(rd.value_or(q.own_rotary_dim));
    if (*p.rotary_dim % 2 != 0)
      throw Error(doc.at("rotary_dim") + " must be even (GPT-J pairs channels 2i, 2i + 1), got " + std::to_string(*p.rotary_dim));
    if (!rd) out.notes.push_back("rotary_dim absent: the family's default " + std::to_string(*p.rotary_dim));
    for (const char* key : {"partial_rotary_factor", "rotary_pct", "rope_pct"})
      if (model.contains(key))
        out.warnings.push_back(doc.at(key) + " ignored: model_type '" + doc.model_type() + "' reads " + doc.at("rotary_dim"));
    return;
  }
  bool fraction_given = true;
  if (auto prf = jf::number(model, fraction_key, w)) {
    p.partial_rotary_factor = *prf;
    if (q.fraction_key)
      out.notes.push_back("partial_rotary_factor = " + doc.at(fraction_key) + " = " + format_number(*prf) +
                          " (the key model_type '" + doc.model_type() + "' reads)");
  } else if (q.default_partial_rotary > 0) {
    p.partial_rotary_factor = q.default_partial_rotary;
    out.notes.push_back(std::string("no ") + fraction_key + ": the family's default " +
                        format_number(p.partial_rotary_factor) + " (" + q.hf_source + ")");
  } else {
    fraction_given = false;
  }
  if (auto rd = jf::integer(model, "rotary_dim", w)) {
    const int derived = static_cast<int>(p.head_dim * p.partial_rotary_factor);
    if (fraction_given) {
      if (*rd != derived)
        out.warnings.push_back(doc.at("rotary_dim") + " = " + std::to_string(*rd) +
                               " disagrees with int(head_dim * partial_rotary_factor) = " +
                               std::to_string(derived) + "; using the latter, as HF does");
    } else if (options.hf_compatible) {
      out.notes.push_back(doc.at("rotary_dim") + " = " + std::to_string(*rd) +
                          " ignored as HF does (--hf-compatible): all head_dim channels rotate");
    } else if (*rd != p.head_dim) {
      p.rotary_dim = static_cast<int>(*jf::integer_in(model, "rotary_dim", w, 1, kMaxHeadDim));
      out.notes.push_back(doc.at("rotary_dim") + " = " + std::to_string(*rd) +
                          " honoured: HF ignores this key and would rotate all " +
                          std::to_string(p.head_dim) +
                          " channels (a known HF bug); --hf-compatible restores HF");
    }
  }
}

}  // namespace posenc
