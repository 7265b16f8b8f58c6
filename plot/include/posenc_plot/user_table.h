// A learner's own table (issue 32: "plot the table you built to debug it"): read from a NumPy
// .npy file or a CSV file, and diagnosed for the bug a heatmap shows as all-horizontal or
// all-vertical stripes (one of the two indices never used).
#pragma once

#include <string>
#include <vector>

namespace posenc::plot {

struct UserTable {
  int rows = 0, cols = 0;
  std::vector<double> values;  // [rows][cols], finite
};

struct UserTableLimits {
  int max_rows = 4096, max_cols = 4096;  // a heatmap's size (one cell per value)
};

// .npy (NumPy format versions 1-3: dtype float32 or float64 little-endian, 2-D, C or Fortran
// order) by its magic bytes; otherwise CSV (one row per line, values separated by commas, empty
// lines skipped, every row as long as the first). Throws posenc::Error naming the file and what
// was expected: another dtype, a shape that is not 2-D or is over the limits, a truncated file, a
// cell that is not a number (its line and column), NaN or infinity.
UserTable read_user_table(const std::string& path, const UserTableLimits& limits = {});

// How a table's values vary along each index:
//   down_columns  mean over columns of the variance of a column (moving along the row index)
//   along_rows    mean over rows of the variance of a row (moving along the column index)
// A positional table (positions x dimensions) varies along both. When one share is below
// kStripeShare of their sum the heatmap shows only stripes, and `message` says which index is
// not used; otherwise `message` is empty.
struct AxisVariation {
  double down_columns = 0, along_rows = 0;
  std::string message;
};
inline constexpr double kStripeShare = 1e-3;
AxisVariation axis_variation(const UserTable& table);

}  // namespace posenc::plot
