// Whole-file writes for the pictures through the core's set writer: never half a file or half a
// pair left behind.
#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "posenc/error.h"
#include "posenc/file_io.h"
#include "posenc_plot/heatmap.h"

namespace posenc::plot {

// The core's set writer (file_io.h): temporary files fsync'ed, then renamed, a directory in the
// way refused before any byte is written.
void write_all(const std::vector<OutputFile>& files) {
  std::vector<std::pair<std::string, std::string>> set;
  for (const auto& f : files) set.emplace_back(f.path, std::string(f.bytes.begin(), f.bytes.end()));
  write_files_atomic(set);
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
  const int scale = heatmap_scale(spec);
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
