#include "posenc_plot/axial_heatmap.h"

#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "posenc/error.h"

namespace posenc::plot {

namespace {

// mean_i cos(angle_query_i - angle_key_i) over one axis's F frequencies, for keys 0 .. size - 1 of
// that axis against the query's coordinate index `query`: the angles from the core's table
// (axial_angles of one axis's coordinates, as axial_grid_coordinates forms them).
std::vector<double> axis_term(const AxialRopeParams& rope, int size, int query) {
  AxialRopeParams one = rope;
  one.axes = 1;
  const std::vector<double> angles = axial_angles(one, axial_grid_coordinates(one, {size}));
  const std::size_t F = static_cast<std::size_t>(rope.axis_dim / 2);
  std::vector<double> term(static_cast<std::size_t>(size));
  for (std::size_t key = 0; key < term.size(); ++key) {
    double sum = 0;
    for (std::size_t i = 0; i < F; ++i) sum += std::cos(angles[static_cast<std::size_t>(query) * F + i] - angles[key * F + i]);
    term[key] = sum / static_cast<double>(F);
  }
  return term;
}

}  // namespace

HeatmapSpec axial_heatmap(const AxialHeatmapRequest& r) {
  validate(r.rope);
  if (r.rope.axes != 2) throw Error("plot axial draws 2 axes (an image grid), got axes " + std::to_string(r.rope.axes));
  for (const auto& [name, size] : {std::pair<const char*, int>{"rows", r.rows}, {"columns", r.cols}})
    if (size < 1 || size > 512) throw Error(std::string("plot axial grid ") + name + " must be in [1, 512], got " + std::to_string(size));
  const int query_row = r.query_row == -1 ? r.rows / 2 : r.query_row, query_col = r.query_col == -1 ? r.cols / 2 : r.query_col;
  if (query_row < 0 || query_col < 0 || query_row >= r.rows || query_col >= r.cols)
    throw Error("plot axial query cell (" + std::to_string(query_row) + ", " + std::to_string(query_col) + ") is outside the " +
                std::to_string(r.rows) + " x " + std::to_string(r.cols) + " grid");
  // Each axis rotates its own pairs, so the mean over all pairs is the mean of the two axes' terms:
  // (rows + cols) F cosines, not rows cols 2F (and no rows x cols x 2F angle table).
  const std::vector<double> row_term = axis_term(r.rope, r.rows, query_row), col_term = axis_term(r.rope, r.cols, query_col);
  HeatmapSpec s;
  s.rows = r.rows;
  s.cols = r.cols;
  s.values.resize(static_cast<std::size_t>(r.rows) * static_cast<std::size_t>(r.cols));
  for (std::size_t y = 0; y < row_term.size(); ++y)
    for (std::size_t x = 0; x < col_term.size(); ++x) s.values[y * col_term.size() + x] = 0.5 * (row_term[y] + col_term[x]);
  s.value_min = -1;
  s.value_max = 1;
  const bool pixel = r.rope.freqs_for == AxialFrequencies::kPixel;
  s.title = std::string("axial RoPE, ") + (pixel ? "pixel" : "lang") + " frequencies (" + std::to_string(r.rope.axis_dim) +
            " channels per axis, " + (pixel ? "max_freq " + format_number(r.rope.max_freq) : "theta " + format_number(r.rope.theta)) +
            "): q = k = ones at (" + std::to_string(query_row) + ", " + std::to_string(query_col) + "), mean cos per pair";
  s.row_label = "key row";
  s.col_label = "key column";
  return s;
}

}  // namespace posenc::plot
