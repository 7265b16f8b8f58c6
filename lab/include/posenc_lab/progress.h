// A progress line on stderr: bar, step, ETA, the current loss and, for training, the throughput
// of the whole run (every rank's tokens). On a terminal it redraws in place; otherwise (CI, a
// pipe) it prints plain lines every tenth of the way:
//   train rope [2 ranks]: 120/600  loss 2.310  9,300 tok/s  ETA 12s
#pragma once

#include <chrono>
#include <string>

namespace posenc::lab {

// What one progress line shows; NaN loss and tokens_per_second <= 0 are left out, ranks 1 too.
struct ProgressLine {
  std::string label;
  int ranks = 1;
  long done = 0, total = 0;
  double loss = 0;
  double tokens_per_second = 0;  // all ranks together
  double eta_seconds = 0;
};
std::string format_progress_line(const ProgressLine& line);

// 9300 -> "9,300" (rounded to an integer).
std::string group_thousands(double value);

class Progress {
 public:
  // ranks: the world size shown beside the label (1: not shown).
  Progress(std::string label, long total, long start = 0, int ranks = 1);
  // loss NaN: not shown. tokens: tokens trained since `start` by all ranks (0: no throughput).
  void update(long done, double loss, double tokens = 0);
  void finish(const std::string& summary);

 private:
  std::string label_;
  long total_, start_, last_decile_ = -1;
  int ranks_;
  bool tty_;
  std::chrono::steady_clock::time_point began_;
};

}  // namespace posenc::lab
