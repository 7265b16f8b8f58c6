// --scheme learned: a seeded table's rows at positions, or a vision tower's 2-D table resized to an
// image's grid as its HF code resizes it (position_grid.h).
#include <algorithm>
#include <cstdio>

#include "posenc/error.h"
#include "ranges.h"
#include "table_support.h"

namespace posenc::cli {
namespace {

using nlohmann::json;

std::array<int, 2> grid_arg(const std::string& text, const char* flag) {
  const auto g = parse_int_list(text, flag, 1, 65536, 2);
  if (g.size() != 2) throw Error(std::string(flag) + " takes H,W, got '" + text + "'");
  return {static_cast<int>(g[0]), static_cast<int>(g[1])};
}

json table_learned_rows(const TableArgs& a) {
  const int dim = a.dim;
  const auto positions = parse_int_list(a.positions, "--positions", -2, kMaxPosition, kMaxRows);
  require_values(static_cast<std::size_t>(std::max(0, a.num_positions)) + static_cast<std::size_t>(std::max(0, a.offset)),
                 static_cast<std::size_t>(std::max(0, dim)), "learned table");
  require_values(positions.size(), static_cast<std::size_t>(std::max(0, dim)), "learned rows");
  const LearnedTable t = learned_init(a.num_positions, dim, a.std, a.seed, a.offset);
  std::vector<float> values(positions.size() * static_cast<std::size_t>(dim));
  learned_lookup(t, positions.data(), static_cast<int>(positions.size()), 0, values.data());
  if (!a.json) print_rows("pos", positions, values, static_cast<std::size_t>(dim));
  return {{"positions", positions}, {"values", rows_json(values, static_cast<std::size_t>(dim))}};
}

// A table of H x W positions (learned_init over H W rows) resized to H' x W'; rows printed per
// patch (r, c) of the resized grid, row-major.
json table_learned_grid(const TableArgs& a) {
  if (!a.resize) throw Error("--table-grid needs --resize H,W (the image's grid of patches)");
  for (const char* flag : {"--positions", "--num-positions", "--offset"})
    if (a.given(flag)) throw Error(std::string(flag) + " does not apply with --table-grid (the table is H x W patches)");
  const auto [H, W] = grid_arg(*a.table_grid, "--table-grid");
  const auto [h, w] = grid_arg(*a.resize, "--resize");
  if (a.dim < 1) throw Error("--dim must be >= 1, got " + std::to_string(a.dim));
  require_values(static_cast<std::size_t>(H) * W, static_cast<std::size_t>(a.dim), "learned grid");
  require_values(static_cast<std::size_t>(h) * w, static_cast<std::size_t>(a.dim), "resized grid");
  const LearnedTable t = learned_init(H * W, a.dim, a.std, a.seed);
  const PositionGrid out = resize_position_grid(PositionGrid{H, W, a.dim, t.weight}, h, w, a.resize_mode);
  const std::size_t width = static_cast<std::size_t>(a.dim);
  if (!a.json)
    for (int r = 0; r < h; ++r)
      for (int c = 0; c < w; ++c) {
        std::printf("patch %d,%d", r, c);
        for (std::size_t k = 0; k < width; ++k) std::printf(" % .6f", out.values[(static_cast<std::size_t>(r) * w + c) * width + k]);
        std::printf("\n");
      }
  return {{"table_grid", {H, W}}, {"resize", {h, w}}, {"mode", to_string(a.resize_mode)}, {"values", rows_json(out.values, width)}};
}

}  // namespace

json table_learned(const TableArgs& a) {
  if (a.given("--resize-mode") && !a.table_grid) throw Error("--resize-mode needs --table-grid H,W and --resize H,W");
  if (a.table_grid) return table_learned_grid(a);
  if (a.resize) throw Error("--resize needs --table-grid H,W (the grid the table was trained for)");
  return table_learned_rows(a);
}

}  // namespace posenc::cli
