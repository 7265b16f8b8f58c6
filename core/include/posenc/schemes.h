// The positional schemes posenc implements, by name: what the CLI's --scheme and the lab's
// --schemes accept. NoPE is a scheme of its own: the baseline every comparison needs.
#pragma once

#include "posenc/names.h"

namespace posenc {

enum class Scheme { kNope, kSinusoidal, kLearned, kRope, kMrope, kAlibi, kT5, kXl, kDeberta, kKerple, kSandwich, kFox, kDpb, kShaw, kFire, kCope, kXpos, kRopeLearned, kPope };

// Where the scheme acts.
enum class SchemeKind {
  kNone,      // NoPE: order comes only from the causal mask
  kAbsolute,  // a vector per position, fused with the token embedding (add, concat, multiply)
  kRotary,    // rotates q and k; scores depend on the offset m - n
  kBias,      // adds a function of (query, key) positions to the attention scores
};

POSENC_ENUM_NAMES(Scheme, "scheme", {Scheme::kNope, "nope"}, {Scheme::kSinusoidal, "sinusoidal"}, {Scheme::kLearned, "learned"},
                  {Scheme::kRope, "rope"}, {Scheme::kMrope, "mrope"}, {Scheme::kAlibi, "alibi"}, {Scheme::kT5, "t5"},
                  {Scheme::kXl, "xl"}, {Scheme::kDeberta, "deberta"}, {Scheme::kKerple, "kerple"},
                  {Scheme::kSandwich, "sandwich"}, {Scheme::kFox, "fox"}, {Scheme::kDpb, "dpb"},
                  {Scheme::kShaw, "shaw"}, {Scheme::kFire, "fire"},
                  {Scheme::kCope, "cope"}, {Scheme::kXpos, "xpos"}, {Scheme::kRopeLearned, "rope-learned"},
                  {Scheme::kPope, "pope"});

struct SchemeInfo {
  Scheme scheme;
  SchemeKind kind;
  const char* summary;
};

const SchemeInfo& scheme_info(Scheme scheme);

}  // namespace posenc
