#include "posenc/schemes.h"

#include <array>

namespace posenc {
namespace {

constexpr std::array<SchemeInfo, 9> kSchemes = {{
    {Scheme::kNope, "nope", SchemeKind::kNone, "no positional encoding (Kazemnejad et al. 2023)"},
    {Scheme::kSinusoidal, "sinusoidal", SchemeKind::kAbsolute, "fixed sin/cos table (Vaswani et al. 2017)"},
    {Scheme::kLearned, "learned", SchemeKind::kAbsolute, "trainable table (GPT-2, BERT)"},
    {Scheme::kRope, "rope", SchemeKind::kRotary, "rotary embedding (Su et al. 2021)"},
    {Scheme::kMrope, "mrope", SchemeKind::kRotary, "multimodal 3-D rotary embedding (Qwen2-VL)"},
    {Scheme::kAlibi, "alibi", SchemeKind::kBias, "linear distance bias (Press et al. 2022)"},
    {Scheme::kT5, "t5", SchemeKind::kBias, "bucketed learned bias (Raffel et al. 2020)"},
    {Scheme::kXl, "xl", SchemeKind::kBias, "relative sinusoid with u, v biases (Dai et al. 2019)"},
    {Scheme::kDeberta, "deberta", SchemeKind::kBias, "disentangled attention (He et al. 2021)"},
}};

}  // namespace

const SchemeInfo& scheme_info(Scheme scheme) {
  for (const auto& s : kSchemes)
    if (s.scheme == scheme) return s;
  return kSchemes[0];
}

std::optional<Scheme> scheme_from_name(std::string_view name) {
  for (const auto& s : kSchemes)
    if (name == s.name) return s.scheme;
  return std::nullopt;
}

std::string scheme_names() {
  std::string out;
  for (const auto& s : kSchemes) out += (out.empty() ? "" : ", ") + std::string(s.name);
  return out;
}

}  // namespace posenc
