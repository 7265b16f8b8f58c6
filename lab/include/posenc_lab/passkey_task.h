// The passkey task (Mohtashami & Jaggi 2023; the retrieval test of the PI paper, Chen et al.
// 2023, and of YaRN, Peng et al. 2023): a key sentence hidden at a depth of filler text, the
// question at the end, and the answer digits the model must copy from the key:
//
//   <filler[0, a)> key=48213. <filler[a, n)> key=48213
//   |------------ depth = a / n ---------->|
//
// The question ends as the key sentence begins ("key="), as in the original test, whose question
// ends "The pass key is". '=' occurs nowhere in the corpus, so the token before the key is
// unique: an induction head (Olsson et al. 2022: a previous-token head in one layer, a head in a
// later layer that attends to the token after an earlier copy of the current one) finds the key
// from the question and copies it digit by digit. That is the mechanism this probe asks for; a
// blank or common character before the key would need a match over several characters, which
// models of this size learn far later.
//
// One example of length L is L + 1 tokens: the model reads tokens [0, L) and predicts [1, L];
// the last kDigits tokens are the answer. The key sentence starts at token round(depth * n) of
// the filler (n = L + 1 - kOverhead filler characters): depth 0 puts it first, depth 1 right
// before the question. Filler is a contiguous window of the corpus (the training part for
// training batches, the validation part for the grid). Plain C++: no <torch/torch.h>.
//
// Distractors (RULER's multi-key needle, Hsieh et al. 2024): other sentences of the same shape
// with another name before '=' and other digits ("pin=30517. "), at random places in the filler.
// The question still asks for "key=", so '=' alone no longer finds the answer: the model must
// match the two tokens "y=" (an induction head over a longer prefix). The names' letters join
// the vocabulary only when a run asks for distractors, so runs without keep their ids.
//
// Digits never occur in the King James Bible, so the token ids extend the corpus's vocabulary:
// corpus ids and its unknown id first (so plain text keeps its ids), then the ten digits, then
// any character of the key and question sentences that the corpus lacks.
#pragma once

#include <array>
#include <iterator>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "posenc_lab/corpus.h"

namespace posenc::lab {

inline constexpr int kPasskeyDigits = 5;
inline constexpr std::string_view kKeyPrefix = "key=";  // then the digits, then kKeySuffix
inline constexpr std::string_view kKeySuffix = ". ";
inline constexpr std::string_view kQuestion = " key=";  // then the answer digits
// Characters of one example that are not filler: the key sentence, the question and the answer.
inline constexpr int kPasskeyOverhead =
    static_cast<int>(kKeyPrefix.size() + kKeySuffix.size() + kQuestion.size()) + 2 * kPasskeyDigits;
inline constexpr int kMinPasskeyLen = kPasskeyOverhead + 3;  // at least 4 filler characters
// The distractors' names, one per distractor of an example (so at most this many).
inline constexpr std::string_view kDistractorNames[] = {"pin=", "tag=", "lot=", "cod=", "map=", "box=", "cup=", "jar="};
inline constexpr int kMaxDistractors = static_cast<int>(std::size(kDistractorNames));
// Characters of one distractor sentence: its name, its digits, kKeySuffix.
inline constexpr int kDistractorLen = static_cast<int>(kKeyPrefix.size()) + kPasskeyDigits + static_cast<int>(kKeySuffix.size());
static_assert([] {
  for (std::string_view name : kDistractorNames)
    if (name.size() != kKeyPrefix.size() || name.back() != '=') return false;
  return true;
}(), "every distractor's name is as long as the key's prefix and ends in '='");
// The shortest example with n distractors.
constexpr int min_passkey_len(int distractors) { return kMinPasskeyLen + distractors * kDistractorLen; }

class PasskeyVocab {
 public:
  // with_distractors: also the distractors' names (ids after the key's characters).
  explicit PasskeyVocab(const Corpus& corpus, bool with_distractors = false);
  int size() const { return size_; }
  std::int64_t id(char c) const;  // throws Error naming c when it has no id
  std::int64_t digit(int d) const { return id(static_cast<char>('0' + d)); }

 private:
  std::array<std::int64_t, 256> ids_{};
  int size_ = 0;
};

struct PasskeyExample {
  std::vector<std::int64_t> tokens;  // length + 1 ids
  std::string key;                   // kPasskeyDigits characters '0'..'9'
  int key_at = 0;                    // index in tokens of the key's first digit
  int answer_at = 0;                 // index of the answer's first digit (= length + 1 - kPasskeyDigits)
  std::vector<int> distractor_at;    // index of each distractor's first digit
};

// One example of `length` (>= min_passkey_len(distractors)) with the key at `depth` (in [0, 1])
// and `distractors` other sentences (in [0, kMaxDistractors]; a vocabulary made with them) at
// uniform places of the filler, each with its own name and digits other than the key's: filler
// from `text` (token ids of the corpus, longer than length), digits, offset and places drawn from
// seed. Without distractors the draws and the example are as they were before distractors
// existed. Errors name the value and the range expected.
PasskeyExample passkey_example(const PasskeyVocab& vocab, const std::vector<std::int64_t>& text, int length, double depth,
                               std::uint64_t seed, int distractors = 0);

// Training tokens of one step, [batch][length + 1] row-major: the first round(fraction * batch)
// rows are passkey examples at uniform random depths (each with a uniform 0 .. distractors
// distractors), the rest plain windows of text. A pure function of (seed, step), so a resumed
// run trains on the same batches.
std::vector<std::int64_t> passkey_mixed_batch(const PasskeyVocab& vocab, const std::vector<std::int64_t>& text, int length,
                                              int batch, double fraction, int seed, long step, int distractors = 0);

// The evaluation set of one grid cell: count examples from the validation text, the same for
// every model (seeded by length and depth only).
std::vector<PasskeyExample> passkey_cell(const PasskeyVocab& vocab, const std::vector<std::int64_t>& text, int length,
                                         double depth, int count, int distractors = 0);

// Throws Error ("--depths: ... must be in [0, 1], got ...") for a depth outside [0, 1] or NaN.
void check_depth(double depth);

}  // namespace posenc::lab
