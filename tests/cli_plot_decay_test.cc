// `posenc plot decay` for the learned distance biases end to end (issue 24): the SVG is written
// with one curve per head, a user's table (.npy or CSV) is drawn, bad input is exit 2 naming it.
// Also `plot axial` end to end (its values: plot_axial_test.cc).
// The curves' numbers are checked against the core in plot_bias_curves_test.cc.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <fstream>

#include "cli_run.h"
#include "golden.h"

namespace {

using namespace posenc::testing;

int series_in(const std::string& svg) {
  int n = 0;
  for (std::size_t p = svg.find("class=\"series\""); p != std::string::npos; p = svg.find("class=\"series\"", p + 1)) ++n;
  return n;
}

std::string write_text(const std::string& suffix, const std::string& text) {
  const std::string path = temp_path(suffix);
  std::ofstream(path, std::ios::binary) << text;
  return path;
}

// A float32 .npy of the given shape text ("(2, 4)") holding `values`: NumPy's format version 1.
std::string write_npy(const std::string& shape, const std::vector<float>& values) {
  std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': " + shape + ", }";
  header.append(64 - (10 + header.size() + 1) % 64, ' ');  // 10-byte preamble + header + '\n': a multiple of 64
  header += '\n';
  std::string file = std::string("\x93NUMPY\x01\x00", 8);
  file += static_cast<char>(header.size() & 0xff);
  file += static_cast<char>(header.size() >> 8);
  file += header;
  file.append(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(float));
  return write_text(".npy", file);
}

TEST(CliPlotDecay, LearnedBiasesOneCurvePerHead) {
  const std::string out = temp_path(".svg");
  for (const std::string& args : {std::string("--scheme kerple --heads 8 --max-distance 1024"), std::string("--scheme kerple --kind power --heads 6"),
                                  std::string("--scheme sandwich --heads 8 --dim 64")}) {
    const CliRun r = run("plot decay " + args + " -o " + out);
    ASSERT_EQ(r.code, 0) << args << "\n" << r.err;
    const std::string svg = read_file(out);
    EXPECT_EQ(series_in(svg), args.find("--heads 6") != std::string::npos ? 6 : 8) << args;
    EXPECT_NE(svg.find("data-name=\"head 0 "), std::string::npos) << args;
  }
  ASSERT_EQ(run("plot decay --scheme sandwich --heads 16 -o " + out).code, 0);
  EXPECT_EQ(series_in(read_file(out)), 8);
  EXPECT_NE(read_file(out).find("8 of 16 heads drawn"), std::string::npos);
}

TEST(CliPlotDecay, AUsersTable) {
  const std::string out = temp_path(".svg");
  const std::string csv = write_text(".csv", "0,-1,-2,-3\n0,-0.5,-1,-1.5\n0,-2,-4,-8\n");
  const CliRun r = run("plot decay --table " + csv + " -o " + out);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(series_in(read_file(out)), 3);
  EXPECT_NE(read_file(out).find("3 heads x 4 distances"), std::string::npos);
  const std::string npy = write_npy("(2, 4)", {0, -1, -2, -3, 0, -0.25f, -0.5f, -0.75f});
  ASSERT_EQ(run("plot decay --table " + npy + " --max-distance 2 -o " + out).code, 0);
  EXPECT_EQ(series_in(read_file(out)), 2);
}

TEST(CliPlotDecay, BadInputIsExitTwoNamingIt) {
  const std::string out = temp_path(".svg");
  const std::string csv = write_text(".csv", "0,-1,-2\n0,-0.5,-1\n");
  const std::string nan_csv = write_text(".csv", "0,-1,-2\n0,nan,-1\n");
  const std::string one_column = write_text(".csv", "0\n0\n");
  const std::string flat = write_npy("(4,)", {0, -1, -2, -3});
  EXPECT_CLEAN_ERROR(run("plot decay --scheme kerple --kind cubic -o " + out), "--kind", "cubic");
  EXPECT_CLEAN_ERROR(run("plot decay --scheme rope --kind log -o " + out), "--kind", "rope");
  EXPECT_CLEAN_ERROR(run("plot decay --table " + nan_csv + " -o " + out), "line 2, column 2", "nan");
  EXPECT_CLEAN_ERROR(run("plot decay --table " + one_column + " -o " + out), "1 column");
  EXPECT_CLEAN_ERROR(run("plot decay --table " + flat + " -o " + out), "shape (4,)");
  EXPECT_CLEAN_ERROR(run("plot decay --table " + csv + " --max-distance 9 -o " + out), "--max-distance 9");
  EXPECT_CLEAN_ERROR(run("plot decay --table " + csv + " --scheme kerple -o " + out), "--table");
  EXPECT_CLEAN_ERROR(run("plot decay -o " + out), "--scheme", "--table");
  EXPECT_CLEAN_ERROR(run("plot decay --scheme kerple --heads 0 -o " + out), "--heads", "0");
  EXPECT_CLEAN_ERROR(run("plot decay --scheme sandwich --dim 3 -o " + out), "3");
}

// `plot axial` writes the heatmap's PNG and its labelled SVG; a query outside the grid is exit 2
// naming the cell.
TEST(CliPlotAxial, WritesTheHeatmapAndRefusesACellOutsideTheGrid) {
  const std::string out = temp_path(".png");
  const CliRun r = run("plot axial --rows 12 --cols 10 --query-row 3 --freqs-for pixel -o " + out);
  ASSERT_EQ(r.code, 0) << r.out;
  const std::string svg = read_file(out.substr(0, out.size() - 4) + ".svg");
  EXPECT_NE(svg.find("axial RoPE, pixel frequencies"), std::string::npos);
  EXPECT_NE(svg.find("at (3, 5)"), std::string::npos);
  EXPECT_EQ(read_file(out).substr(1, 3), "PNG");
  EXPECT_CLEAN_ERROR(run("plot axial --rows 4 --cols 4 --query-col 9 -o " + out), "query cell (2, 9)", "4 x 4 grid");
  EXPECT_CLEAN_ERROR(run("plot axial --freqs-for video -o " + out), "--freqs-for", "video");
}

}  // namespace
