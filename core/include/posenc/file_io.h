// Files written whole and read bounded, for every layer that saves something (saved models, the
// lab's checkpoints and results): a write goes to <path>.<host>.<pid>.tmp, is fsync'ed and renamed over <path>
// only when complete, so a failure (disk full, a read-only directory, a kill) leaves the previous
// file intact and no .tmp behind; every failure is a posenc::Error naming the file and the reason
// (errno).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace posenc {

// Writes bytes to path atomically (temp file, fsync, rename).
void write_file_atomic(const std::string& path, const std::string& bytes);

// A set of files that belong together (golden.safetensors and its manifest): every temp file is
// written first, and only when all are complete are they renamed; a failure removes every temp
// file and replaces none, so the old set stays whole rather than half new. A target that is a
// directory is refused before anything is written.
void write_files_atomic(const std::vector<std::pair<std::string, std::string>>& files);

// The whole file (a regular file of at most max_bytes; more is an Error naming the limit).
std::string read_file(const std::string& path, std::uint64_t max_bytes);

}  // namespace posenc
