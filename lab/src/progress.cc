#include "posenc_lab/progress.h"

#include <cmath>
#include <cstdio>
#include <unistd.h>

namespace posenc::lab {

std::string group_thousands(double value) {
  const bool negative = value < 0;
  std::string digits = std::to_string(static_cast<long long>(std::llround(std::fabs(value))));
  for (int at = static_cast<int>(digits.size()) - 3; at > 0; at -= 3) digits.insert(static_cast<std::size_t>(at), ",");
  return negative ? "-" + digits : digits;
}

std::string format_progress_line(const ProgressLine& l) {
  std::string text = l.label + (l.ranks > 1 ? " [" + std::to_string(l.ranks) + " ranks]" : "") + ": " + std::to_string(l.done) + "/" +
                     std::to_string(l.total);
  char buf[64];
  if (!std::isnan(l.loss)) {
    std::snprintf(buf, sizeof buf, "  loss %.3f", l.loss);
    text += buf;
  }
  if (l.tokens_per_second > 0) text += "  " + group_thousands(l.tokens_per_second) + " tok/s";
  std::snprintf(buf, sizeof buf, "  ETA %.0fs", l.eta_seconds);
  return text + buf;
}

Progress::Progress(std::string label, long total, long start, int ranks)
    : label_(std::move(label)), total_(total), start_(start), ranks_(ranks), tty_(isatty(2) != 0), began_(std::chrono::steady_clock::now()) {}

void Progress::update(long done, double loss, double tokens) {
  const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - began_).count();
  const double rate = done > start_ ? elapsed / static_cast<double>(done - start_) : 0;
  const double fraction = total_ > 0 ? static_cast<double>(done) / static_cast<double>(total_) : 1;
  const std::string line = format_progress_line(
      {label_, ranks_, done, total_, loss, elapsed > 0 ? tokens / elapsed : 0, rate * static_cast<double>(total_ - done)});
  if (tty_) {
    const int width = 24, filled = static_cast<int>(fraction * width);
    std::fprintf(stderr, "\r[%.*s%*s] %s \033[K", filled, "########################", width - filled, "", line.c_str());
  } else {
    const long decile = static_cast<long>(fraction * 10);
    if (decile == last_decile_) return;
    last_decile_ = decile;
    std::fprintf(stderr, "%s\n", line.c_str());
  }
  std::fflush(stderr);
}

void Progress::finish(const std::string& summary) {
  const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - began_).count();
  std::fprintf(stderr, "%s%s%s: %s (%.0fs)\n", tty_ ? "\r\033[K" : "", label_.c_str(),
               ranks_ > 1 ? (" [" + std::to_string(ranks_) + " ranks]").c_str() : "", summary.c_str(), elapsed);
}

}  // namespace posenc::lab
