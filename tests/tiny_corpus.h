// A tiny generated corpus (no libtorch needed): the lab tests' text, and the tour test's, so a
// run trains in about a second.
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <utility>

namespace posenc::lab::test {

// ~30 kB of words from a 12-word vocabulary; shuffled != 0 gives another text of the same size.
inline std::string tiny_corpus(unsigned shuffled = 0) {
  const std::string p = ::testing::TempDir() + "posenc_tiny_corpus" + std::to_string(shuffled) + ".txt";
  if (std::filesystem::exists(p)) return p;
  std::string text;
  const char* words[] = {"the", "lord", "said", "unto", "moses", "and", "they", "went", "forth", "into", "land", "of"};
  unsigned state = 12345;
  for (int i = 0; i < 6000; ++i) {
    state = state * 1103515245u + 12345u;
    text += words[(state >> 16) % 12];
    text += (state >> 8) % 9 == 0 ? ".\n" : " ";
  }
  if (shuffled) {
    for (std::size_t i = text.size() - 1; i > 0; --i) {
      state = state * 1103515245u + shuffled;
      std::swap(text[i], text[(state >> 8) % (i + 1)]);
    }
  }
  std::ofstream(p + ".tmp") << text;
  std::filesystem::rename(p + ".tmp", p);
  return p;
}

}  // namespace posenc::lab::test
