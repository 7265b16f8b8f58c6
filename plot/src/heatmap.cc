#include "posenc_plot/heatmap.h"

#include <png.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <sstream>
#include <tuple>

#include "posenc/error.h"
#include "posenc_plot/svg_chart.h"

namespace posenc::plot {
namespace {

// viridis sampled at 11 points (matplotlib's map); linear interpolation between them stays
// within 1/255 of the full 256-entry table for display purposes.
constexpr double kViridis[11][3] = {{0.267004, 0.004874, 0.329415}, {0.282623, 0.140926, 0.457517}, {0.253935, 0.265254, 0.529983},
                                    {0.206756, 0.371758, 0.553117}, {0.163625, 0.471133, 0.558148}, {0.127568, 0.566949, 0.550556},
                                    {0.134692, 0.658636, 0.517649}, {0.266941, 0.748751, 0.440573}, {0.477504, 0.821444, 0.318195},
                                    {0.741388, 0.873449, 0.149561}, {0.993248, 0.906157, 0.143936}};

void write_to_vector(png_structp png, png_bytep data, png_size_t length) {
  auto* out = static_cast<std::vector<std::uint8_t>*>(png_get_io_ptr(png));
  out->insert(out->end(), data, data + length);
}

struct Reader {
  const std::vector<std::uint8_t>* data;
  std::size_t at = 0;
};

void read_from_vector(png_structp png, png_bytep out, png_size_t length) {
  auto* r = static_cast<Reader*>(png_get_io_ptr(png));
  if (r->at + length > r->data->size()) png_error(png, "truncated PNG");
  std::memcpy(out, r->data->data() + r->at, length);
  r->at += length;
}

std::string base64(const std::vector<std::uint8_t>& bytes) {
  static const char* table = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  for (std::size_t i = 0; i < bytes.size(); i += 3) {
    const std::uint32_t n = (static_cast<std::uint32_t>(bytes[i]) << 16) | (i + 1 < bytes.size() ? bytes[i + 1] << 8 : 0) |
                            (i + 2 < bytes.size() ? bytes[i + 2] : 0);
    out += table[(n >> 18) & 63];
    out += table[(n >> 12) & 63];
    out += i + 1 < bytes.size() ? table[(n >> 6) & 63] : '=';
    out += i + 2 < bytes.size() ? table[n & 63] : '=';
  }
  return out;
}

std::string fmt(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", std::fabs(v) < 1e-12 ? 0.0 : v);
  return buf;
}

// The colour range: the spec's pinned one, else [min, max] over the finite values (NaN cells
// are drawn white).
std::pair<double, double> finite_range(const HeatmapSpec& spec) {
  if (std::isfinite(spec.value_min) && std::isfinite(spec.value_max)) return {spec.value_min, spec.value_max};
  const std::vector<double>& values = spec.values;
  double lo = INFINITY, hi = -INFINITY;
  for (double v : values)
    if (std::isfinite(v)) {
      lo = std::min(lo, v);
      hi = std::max(hi, v);
    }
  return std::isfinite(lo) ? std::make_pair(lo, hi) : std::make_pair(0.0, 1.0);
}

}  // namespace

std::array<std::uint8_t, 3> viridis(double t) {
  t = std::clamp(std::isnan(t) ? 0.0 : t, 0.0, 1.0) * 10;
  const int i = std::min(9, static_cast<int>(t));
  const double f = t - i;
  std::array<std::uint8_t, 3> rgb{};
  for (int c = 0; c < 3; ++c)
    rgb[static_cast<std::size_t>(c)] = static_cast<std::uint8_t>(std::lround(255 * ((1 - f) * kViridis[i][c] + f * kViridis[i + 1][c])));
  return rgb;
}

std::vector<std::uint8_t> encode_png(int width, int height, const std::vector<std::uint8_t>& rgb) {
  if (width < 1 || height < 1 || rgb.size() != static_cast<std::size_t>(width) * height * 3)
    throw Error("PNG needs width, height >= 1 and width*height*3 bytes");
  png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, nullptr, nullptr, nullptr);
  png_infop info = png ? png_create_info_struct(png) : nullptr;
  if (!png || !info) throw Error("libpng: out of memory");
  std::vector<std::uint8_t> out;
  if (setjmp(png_jmpbuf(png))) {
    png_destroy_write_struct(&png, &info);
    throw Error("libpng failed to encode the image");
  }
  png_set_write_fn(png, &out, write_to_vector, nullptr);
  png_set_IHDR(png, info, static_cast<png_uint_32>(width), static_cast<png_uint_32>(height), 8, PNG_COLOR_TYPE_RGB,
               PNG_INTERLACE_NONE, PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
  png_write_info(png, info);
  for (int y = 0; y < height; ++y) png_write_row(png, const_cast<png_bytep>(rgb.data() + static_cast<std::size_t>(y) * width * 3));
  png_write_end(png, nullptr);
  png_destroy_write_struct(&png, &info);
  return out;
}

void decode_png(const std::vector<std::uint8_t>& bytes, int* width, int* height, std::vector<std::uint8_t>* rgb) {
  png_structp png = png_create_read_struct(PNG_LIBPNG_VER_STRING, nullptr, nullptr, nullptr);
  png_infop info = png ? png_create_info_struct(png) : nullptr;
  if (!png || !info) throw Error("libpng: out of memory");
  if (setjmp(png_jmpbuf(png))) {
    png_destroy_read_struct(&png, &info, nullptr);
    throw Error("not a valid PNG");
  }
  Reader reader{&bytes};
  png_set_read_fn(png, &reader, read_from_vector);
  png_read_info(png, info);
  *width = static_cast<int>(png_get_image_width(png, info));
  *height = static_cast<int>(png_get_image_height(png, info));
  if (png_get_color_type(png, info) != PNG_COLOR_TYPE_RGB || png_get_bit_depth(png, info) != 8) png_error(png, "not 8-bit RGB");
  rgb->resize(static_cast<std::size_t>(*width) * *height * 3);
  for (int y = 0; y < *height; ++y) png_read_row(png, rgb->data() + static_cast<std::size_t>(y) * *width * 3, nullptr);
  png_destroy_read_struct(&png, &info, nullptr);
}

std::vector<std::uint8_t> heatmap_png(const HeatmapSpec& s, int scale) {
  if (s.rows < 1 || s.cols < 1 || s.values.size() != static_cast<std::size_t>(s.rows) * s.cols)
    throw Error("heatmap needs rows, cols >= 1 and rows*cols values");
  if (scale < 1 || static_cast<long>(s.rows) * scale * s.cols * scale > 64l * 1024 * 1024)
    throw Error("heatmap too large (over 64 million pixels)");
  const auto [lo, hi] = finite_range(s);
  const double span = hi > lo ? hi - lo : 1.0;
  const int w = s.cols * scale, h = s.rows * scale;
  std::vector<std::uint8_t> rgb(static_cast<std::size_t>(w) * h * 3);
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x) {
      const double v = s.values[static_cast<std::size_t>(y / scale) * s.cols + x / scale];
      const std::array<std::uint8_t, 3> c = std::isnan(v) ? std::array<std::uint8_t, 3>{255, 255, 255} : viridis((v - lo) / span);
      std::copy(c.begin(), c.end(), rgb.begin() + (static_cast<std::ptrdiff_t>(y) * w + x) * 3);
    }
  return encode_png(w, h, rgb);
}

int heatmap_scale(const HeatmapSpec& s) {
  const int most = s.row_names.empty() && s.col_names.empty() ? 8 : 24;
  return std::max(1, std::min(most, 512 / std::max(1, std::max(s.rows, s.cols))));
}

std::string heatmap_svg(const HeatmapSpec& s, int scale) {
  for (const auto& [names, n, what] : {std::tuple{&s.row_names, s.rows, "row"}, std::tuple{&s.col_names, s.cols, "column"}})
    if (!names->empty() && static_cast<int>(names->size()) != n)
      throw Error(std::string("heatmap: ") + std::to_string(names->size()) + " " + what + " names for " + std::to_string(n) + " " + what + "s");
  const std::vector<std::uint8_t> png = heatmap_png(s, scale);
  const double w = s.cols * scale, h = s.rows * scale, left = 80, top = 44, bar = 18;
  const double W = std::max(left + w + 110, 560.0), H = top + h + 60;
  const auto [lo, hi] = finite_range(s);
  std::ostringstream svg;
  svg << "<svg xmlns=\"http://www.w3.org/2000/svg\" xmlns:xlink=\"http://www.w3.org/1999/xlink\" width=\"" << W << "\" height=\"" << H
      << "\" font-family=\"DejaVu Sans, sans-serif\" font-size=\"12\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  svg << "<text x=\"" << W / 2 << "\" y=\"24\" text-anchor=\"middle\" font-size=\"" << (s.title.size() > 60 ? 12 : 15) << "\">"
      << xml_escape(s.title) << "</text>\n";
  svg << "<image x=\"" << left << "\" y=\"" << top << "\" width=\"" << w << "\" height=\"" << h
      << "\" style=\"image-rendering:pixelated\" xlink:href=\"data:image/png;base64," << base64(png) << "\"/>\n";
  svg << "<rect x=\"" << left << "\" y=\"" << top << "\" width=\"" << w << "\" height=\"" << h << "\" fill=\"none\" stroke=\"black\"/>\n";
  // Ticks at cell centres: one per named column / row, else five per axis with coordinates.
  const int col_ticks = s.col_names.empty() ? 5 : s.cols, row_ticks = s.row_names.empty() ? 5 : s.rows;
  const int name_size = std::max(6, std::min(12, scale - 4));
  for (int k = 0; k < col_ticks; ++k) {
    const int col = s.col_names.empty() ? (s.cols - 1) * k / 4 : k;
    const double x = left + (col + 0.5) * scale;
    svg << "<line x1=\"" << x << "\" y1=\"" << top + h << "\" x2=\"" << x << "\" y2=\"" << top + h + 5 << "\" stroke=\"black\"/><text x=\"" << x
        << "\" y=\"" << top + h + 18 << "\" text-anchor=\"middle\"";
    if (!s.col_names.empty()) svg << " font-size=\"" << name_size << "\"";
    svg << ">" << (s.col_names.empty() ? fmt(s.col_first + col * s.col_step) : xml_escape(s.col_names[static_cast<std::size_t>(col)])) << "</text>\n";
  }
  for (int k = 0; k < row_ticks; ++k) {
    const int row = s.row_names.empty() ? (s.rows - 1) * k / 4 : k;
    const double y = top + (row + 0.5) * scale;
    svg << "<line x1=\"" << left - 5 << "\" y1=\"" << y << "\" x2=\"" << left << "\" y2=\"" << y << "\" stroke=\"black\"/><text x=\""
        << left - 8 << "\" y=\"" << y + 4 << "\" text-anchor=\"end\"";
    if (!s.row_names.empty()) svg << " font-size=\"" << name_size << "\"";
    svg << ">" << (s.row_names.empty() ? fmt(s.row_first + row * s.row_step) : xml_escape(s.row_names[static_cast<std::size_t>(row)])) << "</text>\n";
  }
  svg << "<text x=\"" << left + w / 2 << "\" y=\"" << top + h + 40 << "\" text-anchor=\"middle\">" << xml_escape(s.col_label) << "</text>\n";
  svg << "<text transform=\"translate(22," << top + h / 2 << ") rotate(-90)\" text-anchor=\"middle\">" << xml_escape(s.row_label) << "</text>\n";
  // colour bar
  const double bx = left + w + 24;
  svg << "<defs><linearGradient id=\"viridis\" x1=\"0\" y1=\"1\" x2=\"0\" y2=\"0\">";
  for (int k = 0; k <= 10; ++k) {
    const auto c = viridis(k / 10.0);
    char stop[96];
    std::snprintf(stop, sizeof stop, "<stop offset=\"%d%%\" stop-color=\"#%02x%02x%02x\"/>", k * 10, c[0], c[1], c[2]);
    svg << stop;
  }
  svg << "</linearGradient></defs>\n<rect x=\"" << bx << "\" y=\"" << top << "\" width=\"" << bar << "\" height=\"" << h
      << "\" fill=\"url(#viridis)\" stroke=\"black\"/>\n";
  svg << "<text x=\"" << bx + bar + 4 << "\" y=\"" << top + 10 << "\">" << fmt(hi) << "</text>\n";
  svg << "<text x=\"" << bx + bar + 4 << "\" y=\"" << top + h << "\">" << fmt(lo) << "</text>\n";
  svg << "</svg>\n";
  return svg.str();
}

}  // namespace posenc::plot
