#include "posenc_lab/corpus.h"

#include <array>
#include <filesystem>

#include "posenc/error.h"
#include "posenc_lab/file_io.h"

namespace posenc::lab {

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
  Corpus c = corpus_from_text(read_file(path, kMaxCorpusBytes), valid_fraction);
  c.source = path;
  return c;
}

}  // namespace posenc::lab
