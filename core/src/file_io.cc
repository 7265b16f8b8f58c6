#include "posenc/file_io.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "posenc/error.h"

namespace posenc {
namespace {

[[noreturn]] void fail(const std::string& path, const std::string& what, int err) {
  throw Error("cannot write " + path + ": " + what + (err ? std::string(" (") + std::strerror(err) + ")" : std::string()));
}

void rename_over(const std::string& tmp, const std::string& path) {
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    fail(path, "rename from " + tmp + " failed", err);
  }
}

// This process's part of a temp file's name, "<host>.<pid>": two processes that write the same
// file (the ranks of one lab run, on one host or several sharing a directory) never share one.
// The pid is read at each write, not kept: a child forked after a write (a test's, a Python
// worker's) took its parent's name, and the two then renamed each other's temp file away.
std::string writer_name() {
  static const std::string host_name = [] {
    char host[256] = {};
    if (::gethostname(host, sizeof host - 1) != 0 || host[0] == '\0') std::strcpy(host, "host");
    for (char* c = host; *c; ++c)
      if (*c == '/') *c = '_';
    return std::string(host);
  }();
  return host_name + "." + std::to_string(::getpid());
}

// Writes <path>.<host>.<pid>.tmp whole and fsync'ed; on failure removes it and throws naming path
// and errno. Each writer renames its own temp file: the last one wins whole.
std::string write_temp(const std::string& path, const std::string& bytes) {
  const std::string tmp = path + "." + writer_name() + ".tmp";
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) fail(path, "cannot create " + tmp, errno);
  std::size_t done = 0;
  int err = 0;
  while (done < bytes.size() && err == 0) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) err = n < 0 ? errno : EIO;
    else done += static_cast<std::size_t>(n);
  }
  if (err == 0 && ::fsync(fd) != 0 && errno != EINVAL && errno != EROFS) err = errno;
  if (::close(fd) != 0 && err == 0) err = errno;
  if (err != 0) {
    ::unlink(tmp.c_str());
    fail(path, "wrote " + std::to_string(done) + " of " + std::to_string(bytes.size()) + " bytes", err);
  }
  return tmp;
}

}  // namespace

void write_file_atomic(const std::string& path, const std::string& bytes) { rename_over(write_temp(path, bytes), path); }

void write_files_atomic(const std::vector<std::pair<std::string, std::string>>& files) {
  // A target that is a directory would fail its rename after the others were in place: refuse
  // it before any byte is written.
  for (const auto& [path, bytes] : files) {
    struct stat st {};
    if (::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) fail(path, "it is a directory", 0);
  }
  std::vector<std::string> tmps;
  try {
    for (const auto& [path, bytes] : files) tmps.push_back(write_temp(path, bytes));
  } catch (...) {
    for (const auto& t : tmps) ::unlink(t.c_str());
    throw;
  }
  for (std::size_t i = 0; i < files.size(); ++i) {
    try {
      rename_over(tmps[i], files[i].first);
    } catch (...) {
      for (std::size_t j = i + 1; j < tmps.size(); ++j) ::unlink(tmps[j].c_str());
      throw;
    }
  }
}

std::string read_file(const std::string& path, std::uint64_t max_bytes) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) throw Error("cannot read " + path + ": " + std::strerror(errno));
  if (!S_ISREG(st.st_mode)) throw Error("cannot read " + path + ": not a regular file");
  if (static_cast<std::uint64_t>(st.st_size) > max_bytes)
    throw Error(path + " is " + std::to_string(st.st_size) + " bytes, more than the limit of " + std::to_string(max_bytes));
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) throw Error("cannot read " + path + ": " + std::strerror(errno));
  std::string out(static_cast<std::size_t>(st.st_size), '\0');
  const std::size_t n = std::fread(out.data(), 1, out.size(), f);
  const bool bad = std::ferror(f) != 0;
  std::fclose(f);
  if (bad) throw Error("cannot read " + path + ": read error");
  out.resize(n);
  return out;
}

}  // namespace posenc
