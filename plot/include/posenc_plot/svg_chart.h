// SVG line charts: axes with ticks (linear or log on either axis), labels, a polyline per
// series, dashed reference lines, shaded bands, and a legend. Text is real SVG text.
#pragma once

#include <cmath>
#include <string>
#include <vector>

namespace posenc::plot {

struct Series {
  std::string name;
  std::vector<double> x, y;  // NaN y values are gaps
};

struct Line {
  double at = 0;
  std::string label;
};

struct Band {
  double from = 0, to = 0;
  std::string label;
};

struct ChartOptions {
  std::string title, x_label, y_label;
  bool log_x = false, log_y = false;
  std::vector<Line> vlines, hlines;  // dashed reference lines
  std::vector<Band> vbands;          // shaded x ranges
  // A y range the axis covers at least (NaN: the data's own): charts meant to be compared side
  // by side share one, so a flat line is not stretched across the height.
  double y_from = std::nan(""), y_to = std::nan("");
};

std::string svg_line_chart(const std::vector<Series>& series, const ChartOptions& options);

// Escapes text for SVG/XML.
std::string xml_escape(const std::string& text);

}  // namespace posenc::plot
