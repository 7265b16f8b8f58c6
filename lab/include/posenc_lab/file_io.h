// The lab's files on disk: every write goes to <path>.tmp and is renamed over <path> only when
// complete, so a failure (disk full, a read-only directory, a kill) leaves the previous file intact
// and no .tmp behind; every failure is a posenc::Error naming the file and the reason (errno).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "posenc/file_io.h"

namespace posenc::lab {

// Whole-file writes and bounded reads live in the core (posenc/file_io.h), shared with the
// torch layer's save_model.
using posenc::read_file;
using posenc::write_file_atomic;

// An exclusive lock on a directory for one run (flock on <dir>/.lock, released at exit or kill):
// a second run into the same directory waits (saying so on stderr), then reuses what the first
// one finished; never two writers of one file.
class DirLock {
 public:
  explicit DirLock(const std::string& dir);
  ~DirLock();
  DirLock(const DirLock&) = delete;
  DirLock& operator=(const DirLock&) = delete;

 private:
  int fd_ = -1;
};

// Removes <dir>/*.tmp (call it holding the DirLock: they are left by a killed run).
void remove_temp_files(const std::string& dir);

// out_dir made (with its parents) and checked to be a directory: else an Error naming --out,
// the path and the reason ('' included).
void make_out_dir(const std::string& out_dir);
// A run's own output directory: made (make_out_dir), locked (a second run into it waits) and
// cleaned of the .tmp files a killed run left.
std::unique_ptr<DirLock> open_out_dir(const std::string& out_dir);

// FNV-1a, 64 bits: the identity of a corpus, the checksum of a checkpoint.
std::uint64_t fnv1a64(const void* data, std::size_t size);
std::string hex64(std::uint64_t value);

}  // namespace posenc::lab
