// The positional schemes posenc implements, by name: what the CLI's --scheme and the lab's
// --schemes accept. NoPE is a scheme of its own: the baseline every comparison needs.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace posenc {

enum class Scheme { kNope, kSinusoidal, kLearned, kRope, kMrope, kAlibi, kT5, kXl, kDeberta };

// Where the scheme acts.
enum class SchemeKind {
  kNone,      // NoPE: order comes only from the causal mask
  kAbsolute,  // a vector per position, fused with the token embedding (add, concat, multiply)
  kRotary,    // rotates q and k; scores depend on the offset m - n
  kBias,      // adds a function of (query, key) positions to the attention scores
};

struct SchemeInfo {
  Scheme scheme;
  const char* name;
  SchemeKind kind;
  const char* summary;
};

const SchemeInfo& scheme_info(Scheme scheme);
std::optional<Scheme> scheme_from_name(std::string_view name);
std::string scheme_names();  // "nope, sinusoidal, ..."

}  // namespace posenc
