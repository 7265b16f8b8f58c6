// A small SVG line chart: axes with ticks (log or linear x), labels, one polyline per series and
// a legend. Enough for the lab's bits-per-character curves; text is real SVG text.
#pragma once

#include <string>
#include <vector>

namespace posenc::lab {

struct Series {
  std::string name;
  std::vector<double> x, y;  // NaN y values are gaps
};

struct ChartOptions {
  std::string title, x_label, y_label;
  bool log_x = false;
  double mark_x = 0;  // a vertical dashed line (e.g. the training length); 0: none
  std::string mark_label;
};

std::string svg_line_chart(const std::vector<Series>& series, const ChartOptions& options);

}  // namespace posenc::lab
