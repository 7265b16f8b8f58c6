// The learner's own table (plot/src/user_table.cc): .npy files as NumPy writes them (built here
// byte by byte from the format's specification, numpy.lib.format), CSV, the refusals, and the
// stripe diagnosis against variances computed by hand.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <limits>

#include "posenc/error.h"
#include "posenc_plot/user_table.h"

namespace posenc::plot {
namespace {

struct NpySpec {
  std::string descr = "<f4";
  bool fortran = false;
  std::string shape;  // "": (rows, cols)
  int major = 1;
  std::size_t cut = 0;  // bytes dropped from the end
};

NpySpec npy(std::string descr, bool fortran = false, std::string shape = "", int major = 1, std::size_t cut = 0) {
  return {std::move(descr), fortran, std::move(shape), major, cut};
}

// [rows][cols] values as a .npy file: magic, version, header length (uint16 for version 1,
// uint32 for 2 and 3), the header dict padded with spaces to a multiple of 64 and a newline,
// then the data in C or Fortran order.
std::string write_npy(const std::string& name, const std::vector<std::vector<double>>& rows, const NpySpec& spec = npy("<f4")) {
  const std::size_t r = rows.size(), c = rows[0].size();
  const std::string shape = spec.shape.empty() ? "(" + std::to_string(r) + ", " + std::to_string(c) + ")" : spec.shape;
  std::string header = "{'descr': '" + spec.descr + "', 'fortran_order': " + (spec.fortran ? "True" : "False") +
                       ", 'shape': " + shape + ", }";
  const std::size_t preamble = spec.major == 1 ? 10 : 12;
  header += std::string(64 - (preamble + header.size() + 1) % 64, ' ') + "\n";
  std::string bytes = std::string("\x93NUMPY", 6) + static_cast<char>(spec.major) + '\0';
  const std::uint32_t len = static_cast<std::uint32_t>(header.size());
  bytes.append(reinterpret_cast<const char*>(&len), spec.major == 1 ? 2 : 4);  // little-endian host
  bytes += header;
  for (std::size_t k = 0; k < r * c; ++k) {
    const double v = spec.fortran ? rows[k % r][k / r] : rows[k / c][k % c];
    if (spec.descr == "<f8") {
      bytes.append(reinterpret_cast<const char*>(&v), 8);
    } else {
      const float f = static_cast<float>(v);
      bytes.append(reinterpret_cast<const char*>(&f), 4);
    }
  }
  bytes.resize(bytes.size() - spec.cut);
  const std::string path = ::testing::TempDir() + name;
  std::ofstream(path, std::ios::binary) << bytes;
  return path;
}

std::string write_text(const std::string& name, const std::string& text) {
  const std::string path = ::testing::TempDir() + name;
  std::ofstream(path, std::ios::binary) << text;
  return path;
}

const std::vector<std::vector<double>> kTable = {{0.5, -1.25, 2}, {3, 4.5, -6}};

void expect_table(const UserTable& t) {
  ASSERT_EQ(t.rows, 2);
  ASSERT_EQ(t.cols, 3);
  for (int r = 0; r < 2; ++r)
    for (int c = 0; c < 3; ++c) EXPECT_EQ(t.values[r * 3 + c], kTable[r][c]) << r << "," << c;
}

// The error names the file and contains `what`.
void expect_refused(const std::string& path, const std::string& what) {
  try {
    read_user_table(path);
    ADD_FAILURE() << path << " was read";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
  }
}

TEST(UserTable, ReadsNpyInEveryLayoutAndCsv) {
  expect_table(read_user_table(write_npy("ut_f4.npy", kTable)));
  expect_table(read_user_table(write_npy("ut_f8_fortran.npy", kTable, npy("<f8", true))));
  expect_table(read_user_table(write_npy("ut_v2.npy", kTable, npy("<f4", false, "", 2))));
  expect_table(read_user_table(write_text("ut.csv", "0.5, -1.25,2\r\n\n3,4.5e0,-6\n")));
}

TEST(UserTable, RefusesWhatIsNotATable) {
  expect_refused(write_npy("ut_i4.npy", kTable, npy("<i4")), "dtype '<i4'; expected float32 or float64");
  expect_refused(write_npy("ut_be.npy", kTable, npy(">f4")), "expected float32 or float64 little-endian");
  expect_refused(write_npy("ut_1d.npy", {{1, 2, 3}}, npy("<f4", false, "(3,)")), "shape (3,); expected a 2-D table");
  expect_refused(write_npy("ut_3d.npy", kTable, npy("<f4", false, "(1, 2, 3)")), "expected a 2-D table");
  expect_refused(write_npy("ut_cut.npy", kTable, npy("<f4", false, "", 1, 2)), "22 bytes of data; shape (2, 3) of float32 needs 24");
  expect_refused(write_npy("ut_huge.npy", kTable, npy("<f4", false, "(5000, 2)")), "5000 x 2 table; expected 1 .. 4096 rows");
  expect_refused(write_npy("ut_negative.npy", kTable, npy("<f4", false, "(-2, 3)")), "-2 x 3 table");
  expect_refused(write_npy("ut_v9.npy", kTable, npy("<f4", false, "", 9)), "version 9");
  expect_refused(write_npy("ut_nan.npy", {{1, std::numeric_limits<double>::quiet_NaN()}}), "at row 0, column 1; expected finite");
  expect_refused(write_text("ut_word.csv", "1,2\n3,abc\n"), "line 2, column 2 is 'abc'; expected a number");
  expect_refused(write_text("ut_empty_cell.csv", "1,,2\n"), "line 1, column 2");
  expect_refused(write_text("ut_ragged.csv", "1,2\n3\n"), "line 2 has 1 values; the first row has 2");
  expect_refused(write_text("ut_inf.csv", "1,inf\n"), "expected finite numbers");
  expect_refused(write_text("ut_blank.csv", "\n \n"), "no rows");
  expect_refused(::testing::TempDir() + "ut_missing.csv", "cannot open it");
  try {
    read_user_table(write_text("ut_wide.csv", "1,2,3\n"), {4, 2});
    ADD_FAILURE() << "a 3-column table read under a 2-column limit";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("1 x 3 table; expected 1 .. 4 rows and 1 .. 2 columns"), std::string::npos) << e.what();
  }
}

TEST(UserTable, VariationAlongEachIndex) {
  // [[1, 2, 3], [3, 4, 5]]: columns (1, 3), (2, 4), (3, 5) have variance 1 (population); rows
  // (1, 2, 3) and (3, 4, 5) have 2/3. Not square, so a mean over the wrong count shows.
  const AxisVariation v = axis_variation({2, 3, {1, 2, 3, 3, 4, 5}});
  EXPECT_DOUBLE_EQ(v.down_columns, 1.0);
  EXPECT_DOUBLE_EQ(v.along_rows, 2.0 / 3);
  EXPECT_TRUE(v.message.empty()) << v.message;
  // Every position given the same row: vertical stripes, the row index unused.
  const AxisVariation stuck = axis_variation({3, 2, {1, 5, 1, 5, 1, 5}});
  EXPECT_EQ(stuck.down_columns, 0);
  EXPECT_NE(stuck.message.find("vertical stripes. The row index is not used"), std::string::npos) << stuck.message;
  // Every dimension given the same value (e.g. the raw position): horizontal stripes.
  const AxisVariation flat = axis_variation({3, 2, {0, 0, 1, 1, 2, 2}});
  EXPECT_NE(flat.message.find("horizontal stripes. The column index is not used"), std::string::npos) << flat.message;
  // A little variation along the rows, under kStripeShare of the total, is still stripes; a
  // table with both indices used (share above it) is not.
  const double tiny = std::sqrt(kStripeShare) / 4;  // variance tiny^2 / 4 per row, well under the share
  EXPECT_FALSE(axis_variation({2, 2, {0, tiny, 1, 1 + tiny}}).message.empty());
  EXPECT_TRUE(axis_variation({2, 2, {0, 0.2, 1, 1.2}}).message.empty());
  EXPECT_NE(axis_variation({1, 1, {7}}).message.find("neither index is used"), std::string::npos);
}

}  // namespace
}  // namespace posenc::plot
