// The passkey task generator and its scoring: where the key and the answer sit, which tokens are
// scored, and what counts as an exact match (no training; milliseconds).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <set>

#include "passkey_score.h"
#include "torch_support.h"
#include "posenc/error.h"
#include "posenc_lab/passkey_task.h"

namespace posenc::lab {
namespace {

// A corpus without digits, like the King James Bible.
Corpus filler_corpus() {
  std::string text;
  for (int i = 0; i < 400; ++i) text += (i % 7 == 0) ? "and the lord spake. " : "unto moses saying ";
  return corpus_from_text(text);
}

std::string digits_at(const PasskeyVocab& v, const PasskeyExample& ex, int at) {
  std::string s;
  for (int i = 0; i < kPasskeyDigits; ++i)
    for (int d = 0; d < 10; ++d)
      if (ex.tokens[static_cast<std::size_t>(at + i)] == v.digit(d)) s += static_cast<char>('0' + d);
  return s;
}

std::vector<std::int64_t> ids(const PasskeyVocab& v, const std::string& s) {
  std::vector<std::int64_t> out;
  for (char c : s) out.push_back(v.id(c));
  return out;
}

TEST(PasskeyTask, DigitsExtendTheCorpusVocabulary) {
  const Corpus c = filler_corpus();
  const PasskeyVocab v(c);
  std::set<std::int64_t> digit_ids;
  for (int d = 0; d < 10; ++d) {
    EXPECT_GE(v.digit(d), c.vocab_size()) << "a digit must not reuse a corpus id or the unknown id";
    digit_ids.insert(v.digit(d));
  }
  EXPECT_EQ(digit_ids.size(), 10u);
  for (std::size_t i = 0; i < c.vocab.size(); ++i) EXPECT_EQ(v.id(static_cast<char>(c.vocab[i])), static_cast<std::int64_t>(i));
  EXPECT_GE(v.id('='), c.vocab_size()) << "the corpus has no '=': the format adds it";
  EXPECT_LT(v.id('='), v.size());
  EXPECT_THROW(v.id('#'), Error);
}

TEST(PasskeyTask, KeyAndAnswerSitWhereTheDepthPutsThem) {
  const Corpus c = filler_corpus();
  const PasskeyVocab v(c);
  const int length = 100, filler = length + 1 - kPasskeyOverhead;
  const int prefix = static_cast<int>(kKeyPrefix.size()), suffix = static_cast<int>(kKeySuffix.size());
  const int question = static_cast<int>(kQuestion.size());
  for (double depth : {0.0, 0.25, 0.5, 1.0}) {
    const PasskeyExample ex = passkey_example(v, c.train, length, depth, 42);
    ASSERT_EQ(ex.tokens.size(), static_cast<std::size_t>(length) + 1);
    const int split = static_cast<int>(std::lround(depth * filler));
    EXPECT_EQ(ex.key_at, split + prefix) << "the key's digits follow 'key=' at filler position round(depth * filler)";
    EXPECT_EQ(std::vector<std::int64_t>(ex.tokens.begin() + split, ex.tokens.begin() + split + prefix), ids(v, "key="));
    EXPECT_EQ(ex.answer_at, length + 1 - kPasskeyDigits);
    EXPECT_EQ(std::vector<std::int64_t>(ex.tokens.begin() + ex.answer_at - question, ex.tokens.begin() + ex.answer_at), ids(v, " key="));
    EXPECT_EQ(digits_at(v, ex, ex.key_at), ex.key);
    EXPECT_EQ(digits_at(v, ex, ex.answer_at), ex.key) << "the answer repeats the key";
    // Without the key sentence and the question, the rest is one contiguous window of the text.
    std::vector<std::int64_t> rest(ex.tokens.begin(), ex.tokens.begin() + split);
    rest.insert(rest.end(), ex.tokens.begin() + ex.key_at + kPasskeyDigits + suffix, ex.tokens.begin() + ex.answer_at - question);
    ASSERT_EQ(rest.size(), static_cast<std::size_t>(filler));
    EXPECT_NE(std::search(c.train.begin(), c.train.end(), rest.begin(), rest.end()), c.train.end());
  }
  // depth 1: the key sentence ends right where the question starts
  const PasskeyExample last = passkey_example(v, c.train, length, 1.0, 7);
  EXPECT_EQ(last.key_at + kPasskeyDigits + suffix, last.answer_at - question);
}

// The question ends with the key sentence's marker, and the marker occurs nowhere else: the
// token before the key's first digit is unique, so one induction step finds the key.
TEST(PasskeyTask, TheMarkerBeforeTheKeyOccursOnlyThereAndInTheQuestion) {
  const Corpus c = filler_corpus();
  const PasskeyVocab v(c);
  for (double depth : {0.0, 0.5, 1.0}) {
    const PasskeyExample ex = passkey_example(v, c.train, 80, depth, 3);
    const std::int64_t marker = ex.tokens[static_cast<std::size_t>(ex.key_at - 1)];
    EXPECT_EQ(marker, ex.tokens[static_cast<std::size_t>(ex.answer_at - 1)]);
    EXPECT_EQ(std::count(ex.tokens.begin(), ex.tokens.end(), marker), 2) << "depth " << depth;
  }
}

TEST(PasskeyTask, BadDepthsAndLengthsNameTheValue) {
  const Corpus c = filler_corpus();
  const PasskeyVocab v(c);
  for (double bad : {-0.1, 1.5, std::nan("")}) {
    try {
      passkey_example(v, c.train, 64, bad, 1);
      ADD_FAILURE() << "depth " << bad << " accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("must be in [0, 1], got"), std::string::npos) << e.what();
    }
  }
  EXPECT_THROW(passkey_example(v, c.train, kMinPasskeyLen - 1, 0.5, 1), Error);
  EXPECT_THROW(passkey_example(v, std::vector<std::int64_t>(10, 0), 64, 0.5, 1), Error);
}

TEST(PasskeyTask, MixedBatchesArePureFunctionsOfTheStep) {
  const Corpus c = filler_corpus();
  const PasskeyVocab v(c);
  const int len = 48, batch = 10;
  const auto a = passkey_mixed_batch(v, c.train, len, batch, 0.7, 3, 5);
  EXPECT_EQ(a, passkey_mixed_batch(v, c.train, len, batch, 0.7, 3, 5));
  EXPECT_NE(a, passkey_mixed_batch(v, c.train, len, batch, 0.7, 3, 6));
  EXPECT_NE(a, passkey_mixed_batch(v, c.train, len, batch, 0.7, 4, 5));
  ASSERT_EQ(a.size(), static_cast<std::size_t>(batch) * (len + 1));
  int with_digits = 0;
  for (int b = 0; b < batch; ++b)
    with_digits += std::any_of(a.begin() + b * (len + 1), a.begin() + (b + 1) * (len + 1),
                               [&](std::int64_t t) { return t >= v.digit(0) && t <= v.digit(9); });
  EXPECT_EQ(with_digits, 7) << "round(0.7 * 10) rows are passkey sequences, the rest plain text";
}

TEST(PasskeyTask, CellsAreTheSameForEveryModelAndKeysVary) {
  const Corpus c = filler_corpus();
  const PasskeyVocab v(c);
  const auto a = passkey_cell(v, c.valid, 64, 0.5, 16), b = passkey_cell(v, c.valid, 64, 0.5, 16);
  std::set<std::string> keys;
  for (std::size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].tokens, b[i].tokens);
    keys.insert(a[i].key);
  }
  EXPECT_GT(keys.size(), 12u);
  EXPECT_NE(passkey_cell(v, c.valid, 64, 0.75, 1)[0].tokens, a[0].tokens);
}

// Logits [N, L, V] that put `margin` on token `want[i][j]` at position `at[i][j]`.
torch::Tensor logits_with(const std::vector<PasskeyExample>& exs, int vocab, int shift, double margin) {
  const auto len = static_cast<std::int64_t>(exs[0].tokens.size()) - 1;
  torch::Tensor l = torch::zeros({static_cast<std::int64_t>(exs.size()), len, vocab});
  for (std::size_t i = 0; i < exs.size(); ++i)
    for (int j = 0; j < kPasskeyDigits; ++j)
      l[static_cast<std::int64_t>(i)][exs[i].answer_at + j - 1 + shift][exs[i].tokens[static_cast<std::size_t>(exs[i].answer_at + j)]] = margin;
  return l;
}

TEST(PasskeyScore, TheAnswerDigitsAreScoredAtTheirOwnPositions) {
  const Corpus c = filler_corpus();
  const PasskeyVocab v(c);
  const auto exs = passkey_cell(v, c.valid, 40, 0.5, 4);
  const PasskeyScore right = score_answers(logits_with(exs, v.size(), 0, 10.0), exs);
  EXPECT_DOUBLE_EQ(right.accuracy, 1.0);
  const double expected = 10.0 - std::log(std::exp(10.0) + v.size() - 1);
  EXPECT_NEAR(right.logprob, expected, 1e-6);
  EXPECT_EQ(right.samples, 4);
  // One position early (each digit put where the one before it is predicted): the last digit's
  // position holds nothing, so no answer is whole, and the log-probabilities fall.
  const PasskeyScore early = score_answers(logits_with(exs, v.size(), -1, 10.0), exs);
  EXPECT_DOUBLE_EQ(early.accuracy, 0.0);
  EXPECT_LT(early.logprob, expected - 1.0);
}

TEST(PasskeyScore, ExactMatchNeedsEveryDigit) {
  const Corpus c = filler_corpus();
  const PasskeyVocab v(c);
  const auto exs = passkey_cell(v, c.valid, 40, 0.0, 2);
  torch::Tensor l = logits_with(exs, v.size(), 0, 10.0);
  // Example 1's last digit: a wrong digit now wins, the first four stay right.
  const int pos = exs[1].answer_at + kPasskeyDigits - 2;
  const std::int64_t wrong = exs[1].tokens.back() == v.digit(0) ? v.digit(1) : v.digit(0);
  l[1][pos][wrong] = 20.0;
  const PasskeyScore s = score_answers(l, exs);
  EXPECT_DOUBLE_EQ(s.accuracy, 0.5);
  EXPECT_THROW(score_answers(l.narrow(1, 0, 10), exs), Error) << "an answer beyond the logits is an error, not a silent score";
}

}  // namespace
}  // namespace posenc::lab

namespace posenc::lab {
namespace {

// The token ids of a name ("pin=") sit just before index at.
bool named_at(const PasskeyVocab& v, const PasskeyExample& ex, std::string_view name, int at) {
  for (std::size_t i = 0; i < name.size(); ++i)
    if (ex.tokens[static_cast<std::size_t>(at) - name.size() + i] != v.id(name[i])) return false;
  return true;
}

// A cell is scored in groups of about 16k tokens, each reported as it ends (the progress inside a
// long cell): 200 examples of 100 tokens are two groups, every token counted once.
TEST(PasskeyScore, ACellReportsEachGroupItScores) {
  const Corpus c = filler_corpus();
  const PasskeyVocab v(c);
  torch_layer::TransformerLM model =
      torch_layer::testing::eval_model(torch_layer::testing::small_model(Scheme::kRope, static_cast<int>(v.size())), 1);
  const std::vector<PasskeyExample> cell = passkey_cell(v, c.valid, 100, 0.5, 200);
  std::vector<std::int64_t> groups;
  const PasskeyScore s = score_cell(model, cell, nullptr, [&](std::int64_t tokens) { groups.push_back(tokens); });
  EXPECT_EQ(s.samples, 200);
  ASSERT_EQ(groups.size(), 2u);
  EXPECT_EQ(groups[0] + groups[1], 200 * 100);
}

TEST(PasskeyTask, DistractorsAreOtherNamedKeysAndTheKeyStaysWhereItsDepthPutsIt) {
  const Corpus c = filler_corpus();
  const PasskeyVocab plain(c), v(c, true);
  EXPECT_EQ(PasskeyVocab(c, false).size(), plain.size());
  EXPECT_GT(v.size(), plain.size()) << "the corpus lacks some of the names' letters ('x' of box)";
  const int length = 120;
  for (double depth : {0.0, 0.5, 1.0})
    for (int n : {1, 3, kMaxDistractors}) {
      const PasskeyExample ex = passkey_example(v, c.train, length, depth, 7 + n, n);
      ASSERT_EQ(ex.tokens.size(), static_cast<std::size_t>(length) + 1);
      ASSERT_EQ(ex.distractor_at.size(), static_cast<std::size_t>(n));
      EXPECT_TRUE(named_at(v, ex, kKeyPrefix, ex.key_at));
      EXPECT_EQ(digits_at(v, ex, ex.key_at), ex.key);
      EXPECT_EQ(digits_at(v, ex, ex.answer_at), ex.key);
      std::set<std::string_view> names;
      for (int at : ex.distractor_at) {
        EXPECT_NE(digits_at(v, ex, at), ex.key) << "a distractor never repeats the key";
        for (std::string_view name : kDistractorNames)
          if (named_at(v, ex, name, at)) names.insert(name);
      }
      EXPECT_EQ(names.size(), static_cast<std::size_t>(n)) << "each distractor has its own name";
      // The key sits after round(depth * filler) filler characters and the distractors before it.
      const int filler = length + 1 - kPasskeyOverhead - n * kDistractorLen;
      int before = 0;
      for (int at : ex.distractor_at) before += at < ex.key_at;
      EXPECT_EQ(ex.key_at - static_cast<int>(kKeyPrefix.size()) - before * kDistractorLen, static_cast<int>(std::lround(depth * filler)));
    }
}

std::uint64_t fnv(const std::vector<std::int64_t>& ids) {
  std::uint64_t h = 1469598103934665603ull;
  for (std::int64_t x : ids) h = (h ^ static_cast<std::uint64_t>(x)) * 1099511628211ull;
  return h;
}

TEST(PasskeyTask, WithoutDistractorsTheTaskIsAsItWas) {
  const Corpus c = filler_corpus();
  const PasskeyVocab v(c);
  // The tokens the generator gave before distractors existed (commit c3705af, printed by a
  // program built from its passkey_task.cc): zero distractors draw nothing more.
  EXPECT_EQ(fnv(passkey_mixed_batch(v, c.train, 80, 6, 0.5, 3, 11, 0)), 15560628515159395661ull);
  std::vector<std::int64_t> cell;
  for (const PasskeyExample& ex : passkey_cell(v, c.valid, 80, 0.5, 3, 0)) cell.insert(cell.end(), ex.tokens.begin(), ex.tokens.end());
  EXPECT_EQ(fnv(cell), 8544264884050678829ull);
  EXPECT_TRUE(passkey_example(v, c.train, 80, 0.3, 99).distractor_at.empty());
  // With them, a batch's passkey rows carry 0 .. n distractors, and the grid's cells differ.
  const PasskeyVocab vd(c, true);
  EXPECT_NE(passkey_cell(vd, c.valid, 80, 0.5, 2, 2)[0].tokens, passkey_cell(vd, c.valid, 80, 0.5, 2, 0)[0].tokens);
  EXPECT_NE(passkey_mixed_batch(vd, c.train, 80, 6, 1.0, 3, 11, 2), passkey_mixed_batch(vd, c.train, 80, 6, 1.0, 3, 11, 0));
}

TEST(PasskeyTask, BadDistractorCountsNameTheValue) {
  const Corpus c = filler_corpus();
  const PasskeyVocab v(c, true);
  EXPECT_THROW(passkey_example(v, c.train, 120, 0.5, 1, kMaxDistractors + 1), Error);
  EXPECT_THROW(passkey_example(v, c.train, 120, 0.5, 1, -1), Error);
  try {
    passkey_example(v, c.train, min_passkey_len(3) - 1, 0.5, 1, 3);
    ADD_FAILURE() << "a sequence too short for its distractors";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("with 3 distractors needs length >= " + std::to_string(min_passkey_len(3))), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace posenc::lab
