// Whole-file writes for the pictures: temporary name, then rename, never half a file or half a
// pair left behind.
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>

#include "posenc/error.h"
#include "posenc_plot/heatmap.h"

namespace posenc::plot {
namespace {

[[noreturn]] void fail(const std::string& path, const std::string& why) {
  throw Error("cannot write " + path + ": " + why);
}

// A target that exists and is a directory would make the final rename fail after the other
// files of the set were already in place: refuse it up front.
void check_replaceable(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) fail(path, "it is a directory");
}

std::string write_tmp(const OutputFile& f) {
  const std::string tmp = f.path + ".tmp";
  std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
  if (!out) fail(f.path, std::strerror(errno));
  out.write(reinterpret_cast<const char*>(f.bytes.data()), static_cast<std::streamsize>(f.bytes.size()));
  out.close();  // flushes: a full disk shows here
  if (!out) {
    const int err = errno;
    std::remove(tmp.c_str());
    fail(f.path, err ? std::strerror(err) : "write error");
  }
  return tmp;
}

}  // namespace

void write_all(const std::vector<OutputFile>& files) {
  for (const auto& f : files) check_replaceable(f.path);
  std::vector<std::string> tmps;
  try {
    for (const auto& f : files) tmps.push_back(write_tmp(f));
  } catch (...) {
    for (const auto& t : tmps) std::remove(t.c_str());
    throw;
  }
  for (std::size_t i = 0; i < files.size(); ++i) {
    if (std::rename(tmps[i].c_str(), files[i].path.c_str()) != 0) {
      const int err = errno;
      for (std::size_t j = i; j < tmps.size(); ++j) std::remove(tmps[j].c_str());
      fail(files[i].path, std::strerror(err));
    }
  }
}

void write_bytes(const std::string& path, const std::vector<std::uint8_t>& bytes) { write_all({{path, bytes}}); }

void write_text(const std::string& path, const std::string& text) {
  write_all({{path, std::vector<std::uint8_t>(text.begin(), text.end())}});
}

std::vector<std::string> write_heatmap_files(const HeatmapSpec& spec, const std::string& out) {
  const auto ends_with = [&](const char* suffix) {
    const std::string sx(suffix);
    return out.size() >= sx.size() && out.compare(out.size() - sx.size(), sx.size(), sx) == 0;
  };
  const int scale = std::max(1, std::min(8, 512 / std::max(spec.rows, spec.cols)));
  if (ends_with(".png")) {
    const std::string svg = out.substr(0, out.size() - 4) + ".svg";
    const std::string figure = heatmap_svg(spec, scale);
    // Both or neither: a PNG without its labelled figure (or the reverse) is a half result.
    write_all({{out, heatmap_png(spec, scale)}, {svg, std::vector<std::uint8_t>(figure.begin(), figure.end())}});
    return {out, svg};
  }
  if (ends_with(".svg")) {
    write_text(out, heatmap_svg(spec, scale));
    return {out};
  }
  throw Error("-o must end in .png or .svg, got '" + out + "'");
}

}  // namespace posenc::plot
