// Heatmaps: a PNG of the values in a perceptual colour map (viridis), and a labelled SVG figure
// around it (title, axis labels and ticks, colour bar) that embeds the PNG, so the picture is
// one self-contained file a paper can use.
#pragma once

#include <array>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

namespace posenc::plot {

// viridis(t), t in [0, 1] (clamped): 8-bit RGB.
std::array<std::uint8_t, 3> viridis(double t);

// width x height RGB pixels (row-major, top row first) to PNG bytes; throws posenc::Error.
std::vector<std::uint8_t> encode_png(int width, int height, const std::vector<std::uint8_t>& rgb);
// Decodes PNG bytes: width, height and RGB pixels (for tests and tools).
void decode_png(const std::vector<std::uint8_t>& png, int* width, int* height, std::vector<std::uint8_t>* rgb);

struct HeatmapSpec {
  int rows = 0, cols = 0;
  std::vector<double> values;  // [rows][cols]
  std::string title, row_label, col_label;
  double row_first = 0, col_first = 0;  // the coordinate of row 0 / column 0 (tick labels)
  double row_step = 1, col_step = 1;
  // The values the colour map spans; NaN (default): the finite values' own min and max. Pin it
  // when figures must compare (accuracy: [0, 1], so an all-right grid is not drawn as all-wrong).
  double value_min = std::nan(""), value_max = std::nan("");
  // One name per row / per column (the tokens of an attention map), drawn beside every cell in
  // place of the five numeric ticks; empty: numeric ticks. Otherwise as many as rows / columns.
  std::vector<std::string> row_names, col_names;
};

// Pixels per cell of the written figure: up to 8 (a table of up to 512 cells across fits 512
// pixels), up to 24 where cells carry names (room for a token's label).
int heatmap_scale(const HeatmapSpec& spec);

// PNG of the cells, scale pixels per cell (nearest), colours spanning [min, max] of the values.
std::vector<std::uint8_t> heatmap_png(const HeatmapSpec& spec, int scale);
// The labelled figure: axes, ticks, colour bar, and the PNG embedded as a data URI.
std::string heatmap_svg(const HeatmapSpec& spec, int scale);

// Write a file whole: to a temporary name, then renamed over the target. A failure throws
// posenc::Error naming the file and the reason, and leaves neither a .tmp nor a partial target.
void write_bytes(const std::string& path, const std::vector<std::uint8_t>& bytes);
void write_text(const std::string& path, const std::string& text);

// Several files that belong together (a PNG and the SVG that embeds it): all are written or
// none is. Targets that cannot be replaced (a directory in the way) are refused before any
// byte is written.
struct OutputFile {
  std::string path;
  std::vector<std::uint8_t> bytes;
};
void write_all(const std::vector<OutputFile>& files);

// A heatmap to files: name.png gets the pixels and name.svg the labelled figure (axes, colour
// bar) that embeds them, both or neither; name.svg alone gets just the figure. Returns the
// paths written; throws posenc::Error for another suffix.
std::vector<std::string> write_heatmap_files(const HeatmapSpec& spec, const std::string& out);

}  // namespace posenc::plot
