// A 2-D picture of axial RoPE (posenc/axial_rope.h: rotary-embedding-torch's get_axial_freqs, EVA,
// timm): the score a query at one cell of an image grid gives every key of the grid, with q = k =
// ones, as the mean over the rotated pairs of cos(angle_query - angle_key). Each axis rotates its
// own channels, so the map is the mean of a row term and a column term: a cross of stripes around
// the query for lang frequencies (integer coordinates), broader bands for pixel frequencies
// (coordinates in [-1, 1]).
#pragma once

#include "posenc/axial_rope.h"
#include "posenc_plot/heatmap.h"

namespace posenc::plot {

struct AxialHeatmapRequest {
  AxialRopeParams rope;             // axes must be 2 (rows, columns); axis_dim the rotated channels per axis
  int rows = 16, cols = 16;         // the grid, each in [1, 512]
  int query_row = -1, query_col = -1;  // the query's cell; -1: the grid's centre (size / 2); other negatives refused
};

// [rows][cols] of mean_i cos(angle_query_i - angle_key_i) over the axes * axis_dim / 2 pairs, in
// double from the core's angles (axial_angles, one axis at a time: the mean of a row term and a
// column term). Throws posenc::Error naming a bad value.
HeatmapSpec axial_heatmap(const AxialHeatmapRequest& request);

}  // namespace posenc::plot
