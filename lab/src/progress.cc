#include "posenc_lab/progress.h"

#include <cmath>
#include <cstdio>
#include <unistd.h>

namespace posenc::lab {

Progress::Progress(std::string label, long total, long start)
    : label_(std::move(label)), total_(total), start_(start), tty_(isatty(2) != 0), began_(std::chrono::steady_clock::now()) {}

void Progress::update(long done, double loss) {
  const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - began_).count();
  const double rate = done > start_ ? elapsed / static_cast<double>(done - start_) : 0;
  const double eta = rate * static_cast<double>(total_ - done);
  const double fraction = total_ > 0 ? static_cast<double>(done) / static_cast<double>(total_) : 1;
  if (tty_) {
    const int width = 24, filled = static_cast<int>(fraction * width);
    std::fprintf(stderr, "\r%-22s [%.*s%*s] %5ld/%ld", label_.c_str(), filled, "########################", width - filled, "",
                 done, total_);
    if (!std::isnan(loss)) std::fprintf(stderr, "  loss %.3f", loss);
    std::fprintf(stderr, "  ETA %4.0fs ", eta);
  } else {
    const long decile = static_cast<long>(fraction * 10);
    if (decile == last_decile_) return;
    last_decile_ = decile;
    std::fprintf(stderr, "%s: %ld/%ld", label_.c_str(), done, total_);
    if (!std::isnan(loss)) std::fprintf(stderr, "  loss %.3f", loss);
    std::fprintf(stderr, "  ETA %.0fs\n", eta);
  }
  std::fflush(stderr);
}

void Progress::finish(const std::string& summary) {
  const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - began_).count();
  std::fprintf(stderr, "%s%s: %s (%.0fs)\n", tty_ ? "\r\033[K" : "", label_.c_str(), summary.c_str(), elapsed);
}

}  // namespace posenc::lab
