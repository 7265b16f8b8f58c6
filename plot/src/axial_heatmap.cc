#include "posenc_plot/axial_heatmap.h"

#include <cmath>
#include <string>
#include <vector>

#include "posenc/error.h"

namespace posenc::plot {

HeatmapSpec axial_heatmap(const AxialHeatmapRequest& r) {
  validate(r.rope);
  if (r.rope.axes != 2) throw Error("plot axial draws 2 axes (an image grid), got axes " + std::to_string(r.rope.axes));
  for (const auto& [name, size] : {std::pair<const char*, int>{"rows", r.rows}, {"columns", r.cols}})
    if (size < 1 || size > 512) throw Error(std::string("plot axial grid ") + name + " must be in [1, 512], got " + std::to_string(size));
  const int query_row = r.query_row < 0 ? r.rows / 2 : r.query_row, query_col = r.query_col < 0 ? r.cols / 2 : r.query_col;
  if (query_row >= r.rows || query_col >= r.cols)
    throw Error("plot axial query cell (" + std::to_string(query_row) + ", " + std::to_string(query_col) + ") is outside the " +
                std::to_string(r.rows) + " x " + std::to_string(r.cols) + " grid");
  const std::vector<double> angles = axial_angles(r.rope, axial_grid_coordinates(r.rope, {r.rows, r.cols}));
  const std::size_t pairs = static_cast<std::size_t>(r.rope.axes) * static_cast<std::size_t>(r.rope.axis_dim / 2);
  const double* query = angles.data() + (static_cast<std::size_t>(query_row) * static_cast<std::size_t>(r.cols) + static_cast<std::size_t>(query_col)) * pairs;
  HeatmapSpec s;
  s.rows = r.rows;
  s.cols = r.cols;
  s.values.resize(static_cast<std::size_t>(r.rows) * static_cast<std::size_t>(r.cols));
  for (std::size_t cell = 0; cell < s.values.size(); ++cell) {
    double sum = 0;
    for (std::size_t i = 0; i < pairs; ++i) sum += std::cos(query[i] - angles[cell * pairs + i]);
    s.values[cell] = sum / static_cast<double>(pairs);
  }
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
