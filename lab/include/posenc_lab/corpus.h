// A character-level corpus: bytes of a UTF-8 text (the King James Bible by default), a fixed
// train/validation split, and the vocabulary of the training part.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace posenc::lab {

struct Corpus {
  std::vector<std::uint8_t> vocab;        // distinct bytes of the text, sorted
  std::vector<std::int64_t> train, valid;  // token ids (index into vocab)
  std::string source;                      // path, for reports
};

// Reads path (throws posenc::Error with the command that creates it when missing), splits the
// last valid_fraction of the text off as validation.
Corpus load_corpus(const std::string& path, double valid_fraction = 0.1);
Corpus corpus_from_text(const std::string& text, double valid_fraction = 0.1);

// The default corpus and how it is made.
inline constexpr const char* kDefaultCorpus = "data/kjv.txt";
inline constexpr const char* kCorpusCommand = "make corpus   (Debian package bible-kjv, installed by scripts/install-deps.sh)";

}  // namespace posenc::lab
