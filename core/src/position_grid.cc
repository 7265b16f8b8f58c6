#include "posenc/position_grid.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>

#include "posenc/error.h"

namespace posenc {
namespace {

// The input indices and weights one output index reads along one axis.
struct Taps {
  std::vector<int> index;
  std::vector<double> weight;
};

// Keys' cubic convolution kernel with A = -0.75 (torch's upsample_bicubic2d): |x| <= 1 and 1 < |x| < 2.
constexpr double kCubicA = -0.75;
double cubic_near(double x) { return ((kCubicA + 2) * x - (kCubicA + 3)) * x * x + 1; }
double cubic_far(double x) { return ((kCubicA * x - 5 * kCubicA) * x + 8 * kCubicA) * x - 4 * kCubicA; }

// upsample_bicubic2d, align_corners=False: source x = scale (i + 0.5) - 0.5 (not clamped), the four
// taps floor(x) - 1 .. floor(x) + 2 clamped to the border.
std::vector<Taps> bicubic_taps(int in, int out) {
  const double scale = static_cast<double>(in) / out;
  std::vector<Taps> taps(static_cast<std::size_t>(out));
  for (int i = 0; i < out; ++i) {
    const double x = scale * (i + 0.5) - 0.5;
    const double base = std::floor(x), t = x - base;
    const double w[4] = {cubic_far(t + 1), cubic_near(t), cubic_near(1 - t), cubic_far(2 - t)};
    for (int k = 0; k < 4; ++k) {
      taps[i].index.push_back(std::clamp(static_cast<int>(base) - 1 + k, 0, in - 1));
      taps[i].weight.push_back(w[k]);
    }
  }
  return taps;
}

// F.grid_sample(mode="bicubic", align_corners=False, padding_mode="border") at GLM-4V's grid: the
// normalised coordinate and the source index in float32, as HF's torch ops and grid_sample's
// unnormalize compute them (no clipping before floor); Keys' weights of the fraction, taps clamped.
std::vector<Taps> grid_sample_bicubic_taps(int in, int out) {
  std::vector<Taps> taps(static_cast<std::size_t>(out));
  for (int i = 0; i < out; ++i) {
    const float norm = ((static_cast<float>(i) + 0.5f) / static_cast<float>(out)) * 2.0f - 1.0f;
    const float x = ((norm + 1.0f) * static_cast<float>(in) - 1.0f) / 2.0f;
    const float base = std::floor(x);
    const double t = static_cast<double>(x - base);
    const double w[4] = {cubic_far(t + 1), cubic_near(t), cubic_near(1 - t), cubic_far(2 - t)};
    for (int k = 0; k < 4; ++k) {
      taps[i].index.push_back(std::clamp(static_cast<int>(base) - 1 + k, 0, in - 1));
      taps[i].weight.push_back(w[k]);
    }
  }
  return taps;
}

// _upsample_bilinear2d_aa (PIL's filter): the triangle 1 - |x| stretched by scale = in / out when
// shrinking, centred at scale (i + 0.5), over the taps inside [0, in), normalised to sum 1.
std::vector<Taps> bilinear_antialias_taps(int in, int out) {
  const double scale = static_cast<double>(in) / out;
  const double support = scale >= 1 ? scale : 1.0, invscale = scale >= 1 ? 1 / scale : 1.0;
  std::vector<Taps> taps(static_cast<std::size_t>(out));
  for (int i = 0; i < out; ++i) {
    const double center = scale * (i + 0.5);
    // torch truncates toward zero, then clamps to the table.
    const std::int64_t lo = std::max<std::int64_t>(static_cast<std::int64_t>(center - support + 0.5), 0);
    const std::int64_t hi = std::min<std::int64_t>(static_cast<std::int64_t>(center + support + 0.5), in);
    double total = 0;
    for (std::int64_t j = lo; j < hi; ++j) {
      const double w = std::max(0.0, 1 - std::fabs((static_cast<double>(j) - center + 0.5) * invscale));
      taps[i].index.push_back(static_cast<int>(j));
      taps[i].weight.push_back(w);
      total += w;
    }
    if (total != 0)
      for (double& w : taps[i].weight) w /= total;
  }
  return taps;
}

// Idefics3: one tap of weight 1 per output index, at its bucket (bucket_rows).
std::vector<Taps> taps_of(GridResize mode, int in, int out) {
  if (mode == GridResize::kBicubic) return bicubic_taps(in, out);
  if (mode == GridResize::kBilinearAntialias) return bilinear_antialias_taps(in, out);
  if (mode == GridResize::kGridSampleBicubic) return grid_sample_bicubic_taps(in, out);
  const DType dtype = mode == GridResize::kBucketBf16 ? DType::kBF16 : mode == GridResize::kBucketF16 ? DType::kF16 : DType::kF32;
  std::vector<Taps> taps(static_cast<std::size_t>(out));
  const std::vector<int> rows = bucket_rows(in, out, dtype);
  for (int i = 0; i < out; ++i) taps[i] = Taps{{rows[i]}, {1.0}};
  return taps;
}

void check_size(int value, const char* what) {
  if (value < 1 || value > 65536)
    throw Error(std::string("position grid ") + what + " must be in [1, 65536], got " + std::to_string(value));
}

}  // namespace

PositionGrid resize_position_grid(const PositionGrid& grid, int rows, int cols, GridResize mode) {
  check_size(grid.rows, "rows");
  check_size(grid.cols, "columns");
  check_size(rows, "rows asked for");
  check_size(cols, "columns asked for");
  if (grid.dim < 1 || grid.dim > (1 << 20))
    throw Error("position grid dim must be in [1, 2^20], got " + std::to_string(grid.dim));
  const std::size_t in_values = static_cast<std::size_t>(grid.rows) * grid.cols * grid.dim;
  if (grid.values.size() != in_values)
    throw Error("position grid of " + std::to_string(grid.rows) + " x " + std::to_string(grid.cols) + " x " +
                std::to_string(grid.dim) + " needs " + std::to_string(in_values) + " values, got " +
                std::to_string(grid.values.size()));
  if (static_cast<double>(rows) * cols * grid.dim > double(1 << 28))
    throw Error("resizing to " + std::to_string(rows) + " x " + std::to_string(cols) + " x " + std::to_string(grid.dim) +
                " is more than 2^28 values");
  for (std::size_t i = 0; i < in_values; ++i)
    if (!std::isfinite(grid.values[i]))
      throw Error("position grid value " + std::to_string(i) + " is " + format_number(grid.values[i]) + "; expected finite values");
  const std::vector<Taps> row_taps = taps_of(mode, grid.rows, rows), col_taps = taps_of(mode, grid.cols, cols);
  PositionGrid out{rows, cols, grid.dim, std::vector<float>(static_cast<std::size_t>(rows) * cols * grid.dim)};
  std::vector<double> acc(static_cast<std::size_t>(grid.dim));
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < cols; ++c) {
      std::fill(acc.begin(), acc.end(), 0.0);
      const Taps& tr = row_taps[r];
      const Taps& tc = col_taps[c];
      for (std::size_t i = 0; i < tr.index.size(); ++i)
        for (std::size_t j = 0; j < tc.index.size(); ++j) {
          const double w = tr.weight[i] * tc.weight[j];
          const float* v = &grid.values[(static_cast<std::size_t>(tr.index[i]) * grid.cols + tc.index[j]) * grid.dim];
          for (int k = 0; k < grid.dim; ++k) acc[k] += w * v[k];
        }
      float* o = &out.values[(static_cast<std::size_t>(r) * cols + c) * grid.dim];
      for (int k = 0; k < grid.dim; ++k) o[k] = static_cast<float>(acc[k]);
    }
  return out;
}

}  // namespace posenc
