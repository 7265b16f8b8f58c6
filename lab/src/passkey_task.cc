#include "posenc_lab/passkey_task.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <string_view>

#include "posenc/error.h"

namespace posenc::lab {
namespace {

void append(const PasskeyVocab& vocab, std::string_view text, std::vector<std::int64_t>* out) {
  for (char c : text) out->push_back(vocab.id(c));
}

}  // namespace

PasskeyVocab::PasskeyVocab(const Corpus& corpus, bool with_distractors) {
  ids_.fill(-1);
  for (std::size_t i = 0; i < corpus.vocab.size(); ++i) ids_[corpus.vocab[i]] = static_cast<std::int64_t>(i);
  size_ = corpus.vocab_size();  // the corpus's ids and its unknown id keep their values
  std::string extra = "0123456789";
  extra.append(kKeyPrefix).append(kKeySuffix).append(kQuestion);
  if (with_distractors)
    for (std::string_view name : kDistractorNames) extra.append(name);
  for (char c : extra)
    if (ids_[static_cast<unsigned char>(c)] < 0) ids_[static_cast<unsigned char>(c)] = size_++;
}

std::int64_t PasskeyVocab::id(char c) const {
  const std::int64_t v = ids_[static_cast<unsigned char>(c)];
  if (v < 0) throw Error(std::string("the passkey vocabulary has no id for the character '") + c + "'");
  return v;
}

void check_depth(double depth) {
  if (!(depth >= 0 && depth <= 1)) throw Error("--depths: a depth must be in [0, 1], got " + std::to_string(depth));
}

PasskeyExample passkey_example(const PasskeyVocab& vocab, const std::vector<std::int64_t>& text, int length, double depth,
                               std::uint64_t seed, int distractors) {
  check_depth(depth);
  if (distractors < 0 || distractors > kMaxDistractors)
    throw Error("--distractors must be in [0, " + std::to_string(kMaxDistractors) + "], got " + std::to_string(distractors));
  if (length < min_passkey_len(distractors))
    throw Error("a passkey sequence" + (distractors ? " with " + std::to_string(distractors) + " distractors" : std::string()) +
                " needs length >= " + std::to_string(min_passkey_len(distractors)) + ", got " + std::to_string(length));
  const int filler = length + 1 - kPasskeyOverhead - distractors * kDistractorLen;
  if (text.size() <= static_cast<std::size_t>(filler))
    throw Error("the filler text (" + std::to_string(text.size()) + " tokens) is shorter than the " + std::to_string(filler) +
                " characters a passkey sequence of length " + std::to_string(length) + " needs");
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int> digit(0, 9);
  std::uniform_int_distribution<std::size_t> offset(0, text.size() - static_cast<std::size_t>(filler) - 1);
  PasskeyExample ex;
  for (int i = 0; i < kPasskeyDigits; ++i) ex.key += static_cast<char>('0' + digit(rng));
  const std::size_t from = offset(rng);
  const int split = static_cast<int>(std::lround(depth * filler));
  // The distractors, drawn after all an example without them draws: distinct names, digits
  // other than the key's, each at a uniform point of the filler.
  struct Sentence {
    int at;  // filler characters before it
    std::string_view name;
    std::string digits;
  };
  std::vector<Sentence> others;
  if (distractors > 0) {
    std::vector<int> names(kMaxDistractors);
    std::iota(names.begin(), names.end(), 0);
    std::shuffle(names.begin(), names.end(), rng);
    std::uniform_int_distribution<int> place(0, filler);
    for (int i = 0; i < distractors; ++i) {
      std::string d;
      do {
        d.clear();
        for (int k = 0; k < kPasskeyDigits; ++k) d += static_cast<char>('0' + digit(rng));
      } while (d == ex.key);
      others.push_back({place(rng), kDistractorNames[names[static_cast<std::size_t>(i)]], d});
    }
    std::stable_sort(others.begin(), others.end(), [](const Sentence& a, const Sentence& b) { return a.at < b.at; });
  }
  ex.tokens.reserve(static_cast<std::size_t>(length) + 1);
  int emitted = 0;  // filler characters written so far
  auto filler_to = [&](int to) {
    ex.tokens.insert(ex.tokens.end(), text.begin() + static_cast<std::ptrdiff_t>(from) + emitted, text.begin() + static_cast<std::ptrdiff_t>(from) + to);
    emitted = to;
  };
  auto key_sentence = [&] {
    filler_to(split);
    append(vocab, kKeyPrefix, &ex.tokens);
    ex.key_at = static_cast<int>(ex.tokens.size());
    append(vocab, ex.key, &ex.tokens);
    append(vocab, kKeySuffix, &ex.tokens);
  };
  bool key_written = false;
  for (const Sentence& o : others) {
    if (!key_written && split <= o.at) {  // at the same point, the key first
      key_sentence();
      key_written = true;
    }
    filler_to(o.at);
    append(vocab, o.name, &ex.tokens);
    ex.distractor_at.push_back(static_cast<int>(ex.tokens.size()));
    append(vocab, o.digits, &ex.tokens);
    append(vocab, kKeySuffix, &ex.tokens);
  }
  if (!key_written) key_sentence();
  filler_to(filler);
  append(vocab, kQuestion, &ex.tokens);
  ex.answer_at = static_cast<int>(ex.tokens.size());
  append(vocab, ex.key, &ex.tokens);
  return ex;
}

std::vector<std::int64_t> passkey_mixed_batch(const PasskeyVocab& vocab, const std::vector<std::int64_t>& text, int length,
                                              int batch, double fraction, int seed, long step, int distractors) {
  if (!(fraction >= 0 && fraction <= 1)) throw Error("the passkey fraction must be in [0, 1], got " + std::to_string(fraction));
  if (text.size() < static_cast<std::size_t>(length) + 2)
    throw Error("the training text (" + std::to_string(text.size()) + " tokens) is shorter than the training length + 2");
  std::mt19937_64 rng(static_cast<std::uint64_t>(seed) * 1000003ull + static_cast<std::uint64_t>(step));
  std::uniform_real_distribution<double> depth(0.0, 1.0);
  std::uniform_int_distribution<std::size_t> offset(0, text.size() - static_cast<std::size_t>(length) - 2);
  const int passkeys = static_cast<int>(std::lround(fraction * batch));
  std::vector<std::int64_t> out;
  out.reserve(static_cast<std::size_t>(batch) * (length + 1));
  for (int b = 0; b < batch; ++b) {
    if (b < passkeys) {
      const double d = depth(rng);
      // Drawn only with distractors, so batches without them are as they were.
      const int n = distractors > 0 ? std::uniform_int_distribution<int>(0, distractors)(rng) : 0;
      const PasskeyExample ex = passkey_example(vocab, text, length, d, rng(), n);
      out.insert(out.end(), ex.tokens.begin(), ex.tokens.end());
    } else {
      const std::size_t o = offset(rng);
      out.insert(out.end(), text.begin() + static_cast<std::ptrdiff_t>(o), text.begin() + static_cast<std::ptrdiff_t>(o) + length + 1);
    }
  }
  return out;
}

std::vector<PasskeyExample> passkey_cell(const PasskeyVocab& vocab, const std::vector<std::int64_t>& text, int length,
                                         double depth, int count, int distractors) {
  std::vector<PasskeyExample> cell;
  const auto base = 0x9E3779B97F4A7C15ull ^ (static_cast<std::uint64_t>(length) << 20) ^ static_cast<std::uint64_t>(std::lround(depth * 1000)) ^
                    (static_cast<std::uint64_t>(distractors) << 40);
  for (int i = 0; i < count; ++i)
    cell.push_back(passkey_example(vocab, text, length, depth, base + static_cast<std::uint64_t>(i) * 7919ull, distractors));
  return cell;
}

}  // namespace posenc::lab
