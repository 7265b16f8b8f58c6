// A character-level corpus: bytes of a UTF-8 text (the King James Bible by default), a fixed
// train/validation split, and the vocabulary of the training part. A byte that never occurs in
// the training part maps to one "unknown" id (the last id), so validation text cannot leak
// symbols into the vocabulary. Tokens are bytes: the unit is "bits per character" only when the
// text is ASCII; otherwise scores are bits per byte, and unit() says so.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace posenc::lab {

// ln 2: a loss in nats divided by it is in bits (bits per character, per byte).
inline constexpr double kLn2 = 0.69314718055994530942;

struct Corpus {
  std::vector<std::uint8_t> vocab;        // distinct bytes of the training part, sorted; id = index
  std::vector<std::int64_t> train, valid;  // token ids (index into vocab; unknown_id() for unseen bytes)
  std::string source;                      // path, for reports
  std::uint64_t hash = 0;                  // FNV-1a 64 of the text's bytes: the corpus's identity
  bool ascii = true;                       // every byte < 128

  std::int64_t unknown_id() const { return static_cast<std::int64_t>(vocab.size()); }
  int vocab_size() const { return static_cast<int>(vocab.size()) + 1; }  // with the unknown id
  const char* unit() const { return ascii ? "bits per character" : "bits per byte (UTF-8; the corpus is not ASCII)"; }
};

// Reads path (throws posenc::Error with the command that creates it when missing), splits the
// last valid_fraction of the text off as validation.
Corpus load_corpus(const std::string& path, double valid_fraction = 0.1);
Corpus corpus_from_text(const std::string& text, double valid_fraction = 0.1);

// The default corpus and how it is made.
inline constexpr const char* kDefaultCorpus = "data/kjv.txt";
inline constexpr const char* kCorpusCommand = "make corpus   (Debian package bible-kjv, installed by scripts/install-deps.sh)";
inline constexpr std::uint64_t kMaxCorpusBytes = 256ull << 20;

}  // namespace posenc::lab
