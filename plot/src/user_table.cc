#include "posenc_plot/user_table.h"

#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "posenc/error.h"

namespace posenc::plot {
namespace {

constexpr char kNpyMagic[] = "\x93NUMPY";
constexpr std::size_t kMaxNpyHeader = 1 << 20;       // NumPy's own headers are a few hundred bytes
constexpr std::size_t kMaxCsvBytes = 128ull << 20;   // ~8 characters per value of 4096 x 4096: larger tables as .npy
constexpr std::size_t kMaxCsvCell = 64;             // characters of one value, for the line-length bound

Error bad(const std::string& path, const std::string& what) {
  return Error(path + ": " + what + " (posenc plot heatmap --from and plot decay --table read a 2-D table: .npy float32/float64, or CSV "
                                    "with one row of numbers per line)");
}

// At most `limit` bytes of the file; `*more` says whether it had more.
std::string read_prefix(std::ifstream& in, std::size_t limit, bool* more) {
  std::string text;
  char buf[1 << 16];
  while (text.size() <= limit) {
    in.read(buf, sizeof buf);
    if (in.gcount() <= 0) break;
    text.append(buf, static_cast<std::size_t>(in.gcount()));
  }
  *more = text.size() > limit;
  if (*more) text.resize(limit);
  return text;
}

void check_shape(const std::string& path, long long rows, long long cols, const UserTableLimits& limits) {
  if (rows < 1 || cols < 1 || rows > limits.max_rows || cols > limits.max_cols)
    throw bad(path, "a " + std::to_string(rows) + " x " + std::to_string(cols) + " table; expected 1 .. " +
                        std::to_string(limits.max_rows) + " rows and 1 .. " + std::to_string(limits.max_cols) + " columns");
}

// The value of `key` in the header dict {'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }.
std::string header_field(const std::string& path, const std::string& header, const std::string& key) {
  const std::size_t at = header.find("'" + key + "'");
  const std::size_t colon = at == std::string::npos ? at : header.find(':', at);
  if (colon == std::string::npos) throw bad(path, "the .npy header has no '" + key + "'");
  const std::size_t start = header.find_first_not_of(' ', colon + 1);
  if (start == std::string::npos) throw bad(path, "the .npy header's '" + key + "' is unreadable");
  const std::size_t end = header[start] == '(' ? header.find(')', start) + 1
                    : header[start] == '\'' ? header.find('\'', start + 1) + 1
                                            : header.find_first_of(",}", start);
  if (end == std::string::npos || end <= start) throw bad(path, "the .npy header's '" + key + "' is unreadable");
  return header.substr(start, end - start);
}

UserTable read_npy(const std::string& path, std::ifstream& in, const UserTableLimits& limits) {
  unsigned char pre[10];
  in.read(reinterpret_cast<char*>(pre), sizeof pre);
  if (in.gcount() != sizeof pre) throw bad(path, "a truncated .npy header");
  const int major = pre[6];
  std::size_t header_len = pre[8] | (static_cast<std::size_t>(pre[9]) << 8);
  if (major == 2 || major == 3) {
    unsigned char more[2];
    in.read(reinterpret_cast<char*>(more), 2);
    if (in.gcount() != 2) throw bad(path, "a truncated .npy header");
    header_len |= (static_cast<std::size_t>(more[0]) << 16) | (static_cast<std::size_t>(more[1]) << 24);
  } else if (major != 1) {
    throw bad(path, ".npy format version " + std::to_string(major) + "; expected 1, 2 or 3");
  }
  if (header_len > kMaxNpyHeader) throw bad(path, "a .npy header of " + std::to_string(header_len) + " bytes");
  std::string header(header_len, '\0');
  in.read(&header[0], static_cast<std::streamsize>(header_len));
  if (static_cast<std::size_t>(in.gcount()) != header_len) throw bad(path, "a truncated .npy header");
  const std::string descr = header_field(path, header, "descr");
  const bool is_f4 = descr == "'<f4'", is_f8 = descr == "'<f8'";
  if (!is_f4 && !is_f8) throw bad(path, "dtype " + descr + "; expected float32 or float64 little-endian ('<f4' or '<f8')");
  const std::string order = header_field(path, header, "fortran_order");
  if (order != "False" && order != "True") throw bad(path, "fortran_order " + order + "; expected True or False");
  const std::string shape = header_field(path, header, "shape");  // "(3, 4)"
  long long dims[3] = {0, 0, 0};
  int ndim = 0;
  for (const char* p = shape.c_str() + 1; *p && *p != ')' && ndim < 3;) {
    char* end = nullptr;
    errno = 0;
    const long long v = std::strtoll(p, &end, 10);
    if (end == p || errno) break;
    dims[ndim++] = v;
    p = end;
    while (*p == ',' || *p == ' ') ++p;
  }
  if (ndim != 2) throw bad(path, "shape " + shape + "; expected a 2-D table (rows, columns)");
  check_shape(path, dims[0], dims[1], limits);
  const std::size_t count = static_cast<std::size_t>(dims[0] * dims[1]), item = is_f4 ? 4 : 8;
  bool more = false;
  const std::string data = read_prefix(in, count * item, &more);
  if (data.size() != count * item || more)
    throw bad(path, std::to_string(data.size()) + (more ? "+" : "") + " bytes of data; shape " + shape + " of " +
                        (is_f4 ? "float32" : "float64") + " needs " + std::to_string(count * item));
  UserTable t{static_cast<int>(dims[0]), static_cast<int>(dims[1]), std::vector<double>(count)};
  for (std::size_t i = 0; i < count; ++i) {
    double v;
    if (is_f4) {
      float f;
      std::memcpy(&f, data.data() + i * 4, 4);  // little-endian hosts only (posenc's targets)
      v = f;
    } else {
      std::memcpy(&v, data.data() + i * 8, 8);
    }
    // Fortran order stores column by column: element i is (i % rows, i / rows).
    const std::size_t r = order == "True" ? i % t.rows : i / t.cols, c = order == "True" ? i / t.rows : i % t.cols;
    if (!std::isfinite(v))
      throw bad(path, "value " + std::to_string(v) + " at row " + std::to_string(r) + ", column " + std::to_string(c) + "; expected finite numbers");
    t.values[r * t.cols + c] = v;
  }
  return t;
}

UserTable read_csv(const std::string& path, std::ifstream& in, const UserTableLimits& limits) {
  bool more = false;
  const std::string text = read_prefix(in, kMaxCsvBytes, &more);
  if (more) throw bad(path, "more than " + std::to_string(kMaxCsvBytes >> 20) + " MiB of CSV; save a table that large as .npy");
  const std::size_t max_line = kMaxCsvCell * static_cast<std::size_t>(limits.max_cols);
  UserTable t;
  std::size_t line_start = 0;
  for (int line = 1; line_start < text.size(); ++line) {
    std::size_t line_end = text.find('\n', line_start);
    if (line_end == std::string::npos) line_end = text.size();
    if (line_end - line_start > max_line)
      throw bad(path, "line " + std::to_string(line) + " is longer than " + std::to_string(max_line) + " characters (" +
                          std::to_string(limits.max_cols) + " values of at most " + std::to_string(kMaxCsvCell) + ")");
    std::string row = text.substr(line_start, line_end - line_start);
    line_start = line_end + 1;
    if (!row.empty() && row.back() == '\r') row.pop_back();
    if (row.find_first_not_of(" \t") == std::string::npos) continue;
    int cols = 0;
    for (std::size_t cell_start = 0;;) {
      std::size_t cell_end = row.find(',', cell_start);
      if (cell_end == std::string::npos) cell_end = row.size();
      const std::string cell = row.substr(cell_start, cell_end - cell_start);
      char* end = nullptr;
      const double v = std::strtod(cell.c_str(), &end);
      const bool rest_blank = end && std::string(end).find_first_not_of(" \t") == std::string::npos;
      if (end == cell.c_str() || !rest_blank || cell.find_first_not_of(" \t") == std::string::npos)
        throw bad(path, "line " + std::to_string(line) + ", column " + std::to_string(cols + 1) + " is '" + cell.substr(0, 40) +
                            "'; expected a number");
      if (!std::isfinite(v))
        throw bad(path, "line " + std::to_string(line) + ", column " + std::to_string(cols + 1) + " is " + cell + "; expected finite numbers");
      t.values.push_back(v);
      ++cols;
      if (cell_end == row.size()) break;
      cell_start = cell_end + 1;
    }
    if (t.rows == 0) t.cols = cols;
    if (cols != t.cols)
      throw bad(path, "line " + std::to_string(line) + " has " + std::to_string(cols) + " values; the first row has " + std::to_string(t.cols));
    ++t.rows;
    check_shape(path, t.rows, t.cols, limits);
  }
  if (t.rows == 0) throw bad(path, "no rows");
  return t;
}

}  // namespace

UserTable read_user_table(const std::string& path, const UserTableLimits& limits) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) throw bad(path, "a folder, not a file");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(path + ": cannot open it for reading (" + std::strerror(errno) + ")");
  char magic[6] = {};
  in.read(magic, sizeof magic);
  const bool npy = in.gcount() == 6 && std::memcmp(magic, kNpyMagic, 6) == 0;
  in.clear();
  in.seekg(0);  // read_npy reads the whole 10-byte preamble itself
  return npy ? read_npy(path, in, limits) : read_csv(path, in, limits);
}

AxisVariation axis_variation(const UserTable& t) {
  AxisVariation a;
  auto variance = [&](int n, auto at) {
    double mean = 0, m2 = 0;
    for (int i = 0; i < n; ++i) mean += at(i);
    mean /= n;
    for (int i = 0; i < n; ++i) m2 += (at(i) - mean) * (at(i) - mean);
    return m2 / n;
  };
  for (int c = 0; c < t.cols; ++c) a.down_columns += variance(t.rows, [&](int r) { return t.values[static_cast<std::size_t>(r) * t.cols + c]; });
  for (int r = 0; r < t.rows; ++r) a.along_rows += variance(t.cols, [&](int c) { return t.values[static_cast<std::size_t>(r) * t.cols + c]; });
  a.down_columns /= t.cols;
  a.along_rows /= t.rows;
  const double total = a.down_columns + a.along_rows;
  if (total == 0) {
    a.message = "every value is the same: neither index is used";
  } else if (a.down_columns <= kStripeShare * total) {
    a.message = "every row is the same (the values change only from column to column): the heatmap shows vertical "
                "stripes. The row index is not used: if rows are positions, every position got the same encoding (a "
                "position stuck at 0, or a vector broadcast along the wrong axis)";
  } else if (a.along_rows <= kStripeShare * total) {
    a.message = "every row is constant (the values change only from row to row): the heatmap shows horizontal stripes. "
                "The column index is not used: if columns are dimensions, every dimension got the same value (the "
                "frequency index stuck, the position used where i was meant, or the raw position itself)";
  }
  return a;
}

}  // namespace posenc::plot
