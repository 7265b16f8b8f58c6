// A progress line on stderr: bar, step, ETA and the current loss. On a terminal it redraws in
// place; otherwise (CI, a pipe) it prints plain lines every tenth of the way.
#pragma once

#include <chrono>
#include <string>

namespace posenc::lab {

class Progress {
 public:
  Progress(std::string label, long total, long start = 0);
  void update(long done, double loss);  // loss NaN: not shown
  void finish(const std::string& summary);

 private:
  std::string label_;
  long total_, start_, last_decile_ = -1;
  bool tty_;
  std::chrono::steady_clock::time_point began_;
};

}  // namespace posenc::lab
