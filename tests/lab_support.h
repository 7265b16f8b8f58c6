// Shared set-up of the lab tests: a tiny generated corpus and tiny models, so each test runs in
// about a second.
#pragma once

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <filesystem>
#include <functional>
#include <fstream>
#include <string>
#include <vector>

#include "posenc/error.h"
#include "posenc_lab/extrapolate.h"
#include "posenc_lab/sort_task.h"
#include "tiny_corpus.h"

namespace posenc::lab::test {

// A TCP port on 127.0.0.1 that was free a moment ago (for a run's store).
inline int free_port() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  socklen_t n = sizeof a;
  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &n);
  close(fd);
  return ntohs(a.sin_port);
}

// TempDir()/name, emptied: a run's output directory.
inline std::string fresh_dir(const std::string& name) {
  const std::string dir = ::testing::TempDir() + name;
  std::filesystem::remove_all(dir);
  return dir;
}

inline ExtrapolateConfig tiny(const std::string& out, std::vector<std::string> schemes) {
  ExtrapolateConfig c;
  c.corpus = tiny_corpus();
  c.schemes = std::move(schemes);
  c.extensions = {RopeExtension::kNone, RopeExtension::kPi, RopeExtension::kDynamic};
  c.training = {16, 24, 8, 2e-3, 4, 5, fresh_dir(out)};  // train_len, steps, batch, lr, warm-up, checkpoints, out
  c.eval_lens = {16, 32};
  c.shape = {1, 32, 2};  // layers, d_model, heads
  c.eval_chars = 512;
  c.incremental_tokens = 64;
  return c;
}

// A tiny sort run (1 layer, 10 steps, 16 test sequences) writing to a fresh TempDir()/out.
inline SortConfig tiny_sort(const std::string& out) {
  SortConfig c;
  c.schemes = {"alibi", "learned"};
  c.training.train_len = 4;
  c.test_lens = {4, 8};
  c.training.steps = 10;
  c.training.batch = 8;
  c.shape = {1, 16, 2};  // layers, d_model, heads
  c.test_sequences = 16;
  c.training.out_dir = fresh_dir(out);
  return c;
}

// The message of the posenc::Error f throws, or "(no error)".
inline std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

#define EXPECT_HAS(text, part) EXPECT_NE(std::string(text).find(part), std::string::npos) << (text)

inline std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// Fails when out_dir holds a .tmp file.
inline void expect_no_tmp(const std::string& dir) {
  for (const auto& e : std::filesystem::directory_iterator(dir))
    EXPECT_NE(e.path().extension(), ".tmp") << e.path();
}

}  // namespace posenc::lab::test
