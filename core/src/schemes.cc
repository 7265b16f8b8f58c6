#include "posenc/schemes.h"

#include <array>

namespace posenc {
namespace {

constexpr std::array<SchemeInfo, 19> kSchemes = {{
    {Scheme::kNope, SchemeKind::kNone, "no positional encoding (Kazemnejad et al. 2023)"},
    {Scheme::kSinusoidal, SchemeKind::kAbsolute, "fixed sin/cos table (Vaswani et al. 2017)"},
    {Scheme::kLearned, SchemeKind::kAbsolute, "trainable table (GPT-2, BERT)"},
    {Scheme::kRope, SchemeKind::kRotary, "rotary embedding (Su et al. 2021)"},
    {Scheme::kMrope, SchemeKind::kRotary, "multimodal 3-D rotary embedding (Qwen2-VL)"},
    {Scheme::kAlibi, SchemeKind::kBias, "linear distance bias (Press et al. 2022)"},
    {Scheme::kT5, SchemeKind::kBias, "bucketed learned bias (Raffel et al. 2020)"},
    {Scheme::kXl, SchemeKind::kBias, "relative sinusoid with u, v biases (Dai et al. 2019)"},
    {Scheme::kDeberta, SchemeKind::kBias, "disentangled attention (He et al. 2021)"},
    {Scheme::kKerple, SchemeKind::kBias, "learned logarithmic distance bias (Chi et al. 2022)"},
    {Scheme::kSandwich, SchemeKind::kBias, "parameter-free sinusoidal distance bias (Chi et al. 2023)"},
    {Scheme::kFox, SchemeKind::kBias, "data-dependent forget-gate bias (Lin et al. 2025)"},
    {Scheme::kDpb, SchemeKind::kBias, "learned MLP over the signed log-distance (dynamic position bias: x-transformers, SwinV2)"},
    {Scheme::kShaw, SchemeKind::kBias, "learned relative keys and values (Shaw et al. 2018; HF BERT's relative_key)"},
    {Scheme::kCope, SchemeKind::kBias, "contextual positions: keys counted by sigmoid(q.k) gates (CoPE, Golovneva et al. 2024)"},
    {Scheme::kFire, SchemeKind::kBias, "learned MLP over the log-distance normalised by the query position (FIRE, Li et al. 2023)"},
    {Scheme::kXpos, SchemeKind::kRotary, "rotary embedding with a per-pair decay over the distance (xPos, Sun et al. 2022)"},
    {Scheme::kRopeLearned, SchemeKind::kRotary, "rotary embedding whose frequencies are trained (rotary-embedding-torch's learned_freq)"},
    {Scheme::kPope, SchemeKind::kRotary,
     "polar coordinates: softplus magnitudes, phases p w_j over every channel, a learned key phase (PoPE, Gopalakrishnan et al. 2025)"},
}};

}  // namespace

const SchemeInfo& scheme_info(Scheme scheme) {
  for (const auto& s : kSchemes)
    if (s.scheme == scheme) return s;
  return kSchemes[0];
}

}  // namespace posenc
