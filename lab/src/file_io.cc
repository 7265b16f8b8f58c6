#include "posenc_lab/file_io.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "posenc/error.h"

namespace posenc::lab {

DirLock::DirLock(const std::string& dir) {
  const std::string path = dir + "/.lock";
  fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd_ < 0) throw Error("cannot create " + path + ": " + std::strerror(errno));
  if (::flock(fd_, LOCK_EX | LOCK_NB) == 0) return;
  int err = errno;
  if (err == EWOULDBLOCK) {
    std::fprintf(stderr, "another posenc lab run is writing to %s: waiting for it to finish\n", dir.c_str());
    while ((err = ::flock(fd_, LOCK_EX) == 0 ? 0 : errno) == EINTR) {
    }
    if (err == 0) return;
  }
  ::close(fd_);
  fd_ = -1;
  throw Error("cannot lock " + path + ": " + std::strerror(err));
}

DirLock::~DirLock() {
  if (fd_ >= 0) ::close(fd_);
}

void remove_temp_files(const std::string& dir) {
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec))
    if (e.path().extension() == ".tmp") std::filesystem::remove(e.path(), ec);
}

void make_out_dir(const std::string& out_dir) {
  std::error_code made;
  std::filesystem::create_directories(out_dir, made);
  if (made || !std::filesystem::is_directory(out_dir))
    throw Error("--out: cannot use '" + out_dir + "' as the output directory (" + (made ? made.message() : "not a directory") +
                "); expected a writable directory");
}

std::unique_ptr<DirLock> open_out_dir(const std::string& out_dir) {
  make_out_dir(out_dir);
  auto lock = std::make_unique<DirLock>(out_dir);
  remove_temp_files(out_dir);  // left by a run that was killed mid-write
  return lock;
}

std::uint64_t fnv1a64(const void* data, std::size_t size) {
  std::uint64_t h = 1469598103934665603ull;
  const auto* p = static_cast<const unsigned char*>(data);
  for (std::size_t i = 0; i < size; ++i) h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

std::string hex64(std::uint64_t value) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(value));
  return buf;
}

}  // namespace posenc::lab
