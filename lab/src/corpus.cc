#include "posenc_lab/corpus.h"

#include <algorithm>
#include <array>
#include <fstream>
#include <sstream>

#include "posenc/error.h"

namespace posenc::lab {

Corpus corpus_from_text(const std::string& text, double valid_fraction) {
  if (!(valid_fraction > 0 && valid_fraction < 1)) throw Error("validation fraction must be in (0, 1)");
  if (text.size() < 100) throw Error("corpus too small: " + std::to_string(text.size()) + " bytes (need >= 100)");
  Corpus c;
  std::array<bool, 256> seen{};
  for (unsigned char ch : text) seen[ch] = true;
  std::array<std::int64_t, 256> id{};
  for (int b = 0; b < 256; ++b)
    if (seen[static_cast<std::size_t>(b)]) {
      id[static_cast<std::size_t>(b)] = static_cast<std::int64_t>(c.vocab.size());
      c.vocab.push_back(static_cast<std::uint8_t>(b));
    }
  const std::size_t split = text.size() - static_cast<std::size_t>(static_cast<double>(text.size()) * valid_fraction);
  for (std::size_t i = 0; i < text.size(); ++i)
    (i < split ? c.train : c.valid).push_back(id[static_cast<unsigned char>(text[i])]);
  return c;
}

Corpus load_corpus(const std::string& path, double valid_fraction) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error("corpus '" + path + "' not found; create the default one with: " + kCorpusCommand);
  std::ostringstream s;
  s << in.rdbuf();
  Corpus c = corpus_from_text(s.str(), valid_fraction);
  c.source = path;
  return c;
}

}  // namespace posenc::lab
