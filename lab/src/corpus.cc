#include "posenc_lab/corpus.h"

#include <array>
#include <filesystem>

#include "posenc/error.h"
#include "posenc_lab/file_io.h"
#include "posenc_lab/run_settings.h"

namespace posenc::lab {
namespace {

// The offset of the first byte that is not part of a well-formed UTF-8 sequence (RFC 3629: no
// overlong forms, no surrogates, nothing past U+10FFFF), or npos.
std::size_t first_invalid_utf8(const std::string& text) {
  const auto* s = reinterpret_cast<const unsigned char*>(text.data());
  const std::size_t n = text.size();
  for (std::size_t i = 0; i < n;) {
    const unsigned char b = s[i];
    int more = 0;
    unsigned char lo = 0x80, hi = 0xBF;  // the second byte's range (RFC 3629's table)
    if (b < 0x80) { ++i; continue; }
    if (b >= 0xC2 && b <= 0xDF) more = 1;
    else if (b == 0xE0) { more = 2; lo = 0xA0; }
    else if (b == 0xED) { more = 2; hi = 0x9F; }
    else if (b >= 0xE1 && b <= 0xEF) more = 2;
    else if (b == 0xF0) { more = 3; lo = 0x90; }
    else if (b == 0xF4) { more = 3; hi = 0x8F; }
    else if (b >= 0xF1 && b <= 0xF3) more = 3;
    else return i;
    if (n - i <= static_cast<std::size_t>(more)) return i;  // cut short by the end of the text
    if (s[i + 1] < lo || s[i + 1] > hi) return i;
    for (int k = 2; k <= more; ++k)
      if (s[i + static_cast<std::size_t>(k)] < 0x80 || s[i + static_cast<std::size_t>(k)] > 0xBF) return i;
    i += static_cast<std::size_t>(more) + 1;
  }
  return std::string::npos;
}

std::string hex_byte(char c) {
  static const char* digits = "0123456789abcdef";
  const auto b = static_cast<unsigned char>(c);
  return {digits[b >> 4], digits[b & 15]};
}

}  // namespace


Corpus corpus_from_text(const std::string& text, double valid_fraction) {
  if (!(valid_fraction > 0 && valid_fraction < 1)) throw Error("validation fraction must be in (0, 1)");
  if (text.size() < 100) throw Error("corpus too small: " + std::to_string(text.size()) + " bytes (need >= 100)");
  Corpus c;
  c.hash = fnv1a64(text.data(), text.size());
  const std::size_t split = text.size() - static_cast<std::size_t>(static_cast<double>(text.size()) * valid_fraction);
  std::array<bool, 256> seen{};
  for (std::size_t i = 0; i < split; ++i) seen[static_cast<unsigned char>(text[i])] = true;
  std::array<std::int64_t, 256> id{};
  id.fill(-1);
  for (int b = 0; b < 256; ++b)
    if (seen[static_cast<std::size_t>(b)]) {
      id[static_cast<std::size_t>(b)] = static_cast<std::int64_t>(c.vocab.size());
      c.vocab.push_back(static_cast<std::uint8_t>(b));
    }
  for (std::size_t i = 0; i < text.size(); ++i) {
    const auto ch = static_cast<unsigned char>(text[i]);
    if (ch >= 128) c.ascii = false;
    (i < split ? c.train : c.valid).push_back(id[ch] >= 0 ? id[ch] : c.unknown_id());
  }
  return c;
}

Corpus load_corpus(const std::string& path, double valid_fraction) {
  if (!std::filesystem::exists(path)) throw Error("corpus '" + path + "' not found; create the default one with: " + kCorpusCommand);
  // The text and one int64 id per byte stay in memory for the run: refused up front when they cannot fit.
  std::error_code ec;
  const auto bytes = std::filesystem::file_size(path, ec);
  const MemoryBudget memory = usable_memory();
  if (!ec && memory.bytes > 0 && 9.0 * double(bytes) > 0.5 * memory.bytes)
    throw Error("corpus '" + path + "' (" + format_number(double(bytes) / (1 << 20)) + " MiB) is held as one 8-byte id per byte: about " +
                format_number(9.0 * double(bytes) / 1e9) + " GB, more than half of the " + format_number(memory.bytes / 1e9) +
                " GB of " + memory.what + "; use a shorter text");
  const std::string text = read_file(path, kMaxCorpusBytes);
  if (const std::size_t bad = first_invalid_utf8(text); bad != std::string::npos)
    throw Error("corpus '" + path + "' is not UTF-8 text: byte " + std::to_string(bad) + " (0x" + hex_byte(text[bad]) +
                ") does not start or continue a valid UTF-8 character; give a text file");
  Corpus c = corpus_from_text(text, valid_fraction);
  c.source = path;
  return c;
}

}  // namespace posenc::lab
