// Learned distance biases against distance, one curve per head (issue 24): Kerple at posenc's
// initialisation (kerple.h), Sandwich (sandwich.h, parameter-free), or a [heads][distances] table
// the user computed (e.g. a trained DynamicPositionBias or FIRE evaluated in Python). FIRE and
// DPB are not drawn at a seeded initialisation: an untrained MLP's curve says nothing.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "posenc_plot/figures.h"

namespace posenc::plot {

// At most this many heads are drawn (the palette's 8 colours; the legend keeps one line each).
inline constexpr int kMaxBiasCurves = 8;
// At most this many distances per curve: every integer up to 512, then evenly spread integers
// (a 1024-distance chart is 513 points a head, ~60 KB of SVG for 8 heads).
inline constexpr std::int64_t kMaxBiasPoints = 513;
// A user's table: at most this many heads (rows); more is most likely [distances, heads].
inline constexpr int kMaxBiasTableHeads = 1024;

// The schemes this file draws: kerple, sandwich, table.
bool is_bias_scheme(const std::string& scheme);

// Which heads a chart draws: all of them up to kMaxBiasCurves, else kMaxBiasCurves spread
// evenly from the first to the last (round(i (H-1) / 7)), so both ends of the range are seen.
std::vector<int> drawn_heads(int heads);

// The distances sampled: every integer 0 .. max_distance when that is at most kMaxBiasPoints
// values, else kMaxBiasPoints integers round(i * max / (kMaxBiasPoints - 1)), 0 and max included.
std::vector<std::int64_t> bias_distances(std::int64_t max_distance);

struct BiasChart {
  std::vector<Series> series;  // one per drawn head, named "head h (...)"; y = the table's value
  std::string title, y_label;
};

// Kerple (request.kind log|power, request.heads), Sandwich (request.heads, d' = request.dim) or
// request.table (scheme "table"). Values are the core's tables (kerple_table, sandwich_table:
// float32, widened) or the user's values, unchanged. Throws posenc::Error naming the value: an
// unknown kind, heads < 1, heads x (max_distance + 1) over 2^26 values, a table with fewer than
// 2 distances or more than kMaxBiasTableHeads heads, max_distance past the table's last column,
// a value that is not finite (its head and distance).
BiasChart bias_chart(const DecayRequest& request);

}  // namespace posenc::plot
