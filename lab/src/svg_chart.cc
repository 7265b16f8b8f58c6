#include "posenc_lab/svg_chart.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <sstream>

namespace posenc::lab {
namespace {

std::string escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '<') out += "&lt;";
    else if (c == '>') out += "&gt;";
    else if (c == '&') out += "&amp;";
    else out += c;
  }
  return out;
}

std::string fmt(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

// Colour-blind-safe palette (Okabe-Ito).
const char* kColours[] = {"#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#F0E442", "#000000"};

}  // namespace

std::string svg_line_chart(const std::vector<Series>& series, const ChartOptions& o) {
  const double W = 760, H = 460, left = 70, right = 200, top = 40, bottom = 60;
  double x0 = std::numeric_limits<double>::infinity(), x1 = -x0, y0 = x0, y1 = -x0;
  for (const auto& s : series)
    for (std::size_t i = 0; i < s.x.size(); ++i) {
      if (std::isnan(s.y[i])) continue;
      x0 = std::min(x0, s.x[i]);
      x1 = std::max(x1, s.x[i]);
      y0 = std::min(y0, s.y[i]);
      y1 = std::max(y1, s.y[i]);
    }
  if (!(x1 > x0)) x1 = x0 + 1;
  if (!(y1 > y0)) y1 = y0 + 1;
  const double pad = (y1 - y0) * 0.05;
  y0 = std::max(0.0, y0 - pad);
  y1 += pad;
  auto tx = [&](double x) {
    const double f = o.log_x ? (std::log(x) - std::log(x0)) / (std::log(x1) - std::log(x0)) : (x - x0) / (x1 - x0);
    return left + f * (W - left - right);
  };
  auto ty = [&](double y) { return top + (1 - (y - y0) / (y1 - y0)) * (H - top - bottom); };
  std::ostringstream svg;
  svg << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << W << "\" height=\"" << H << "\" font-family=\"sans-serif\" font-size=\"12\">\n";
  svg << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  svg << "<text x=\"" << W / 2 - right / 2 << "\" y=\"22\" text-anchor=\"middle\" font-size=\"15\">" << escape(o.title) << "</text>\n";
  // axes
  svg << "<line x1=\"" << left << "\" y1=\"" << H - bottom << "\" x2=\"" << W - right << "\" y2=\"" << H - bottom << "\" stroke=\"black\"/>\n";
  svg << "<line x1=\"" << left << "\" y1=\"" << top << "\" x2=\"" << left << "\" y2=\"" << H - bottom << "\" stroke=\"black\"/>\n";
  // x ticks: the data's x values (log scale) or 6 even ticks
  std::vector<double> xt;
  if (o.log_x) {
    for (const auto& s : series) xt.insert(xt.end(), s.x.begin(), s.x.end());
    std::sort(xt.begin(), xt.end());
    xt.erase(std::unique(xt.begin(), xt.end()), xt.end());
  } else {
    for (int i = 0; i <= 5; ++i) xt.push_back(x0 + (x1 - x0) * i / 5);
  }
  for (double x : xt) {
    svg << "<line x1=\"" << tx(x) << "\" y1=\"" << H - bottom << "\" x2=\"" << tx(x) << "\" y2=\"" << H - bottom + 5 << "\" stroke=\"black\"/>";
    svg << "<text x=\"" << tx(x) << "\" y=\"" << H - bottom + 18 << "\" text-anchor=\"middle\">" << fmt(x) << "</text>\n";
  }
  for (int i = 0; i <= 5; ++i) {
    const double y = y0 + (y1 - y0) * i / 5;
    svg << "<line x1=\"" << left - 5 << "\" y1=\"" << ty(y) << "\" x2=\"" << W - right << "\" y2=\"" << ty(y) << "\" stroke=\"#ddd\"/>";
    svg << "<text x=\"" << left - 8 << "\" y=\"" << ty(y) + 4 << "\" text-anchor=\"end\">" << fmt(std::round(y * 100) / 100) << "</text>\n";
  }
  svg << "<text x=\"" << (left + W - right) / 2 << "\" y=\"" << H - 15 << "\" text-anchor=\"middle\">" << escape(o.x_label) << "</text>\n";
  svg << "<text transform=\"translate(18," << (top + H - bottom) / 2 << ") rotate(-90)\" text-anchor=\"middle\">" << escape(o.y_label) << "</text>\n";
  if (o.mark_x > 0) {
    svg << "<line x1=\"" << tx(o.mark_x) << "\" y1=\"" << top << "\" x2=\"" << tx(o.mark_x) << "\" y2=\"" << H - bottom
        << "\" stroke=\"#888\" stroke-dasharray=\"4 3\"/>";
    svg << "<text x=\"" << tx(o.mark_x) + 4 << "\" y=\"" << top + 12 << "\" fill=\"#555\">" << escape(o.mark_label) << "</text>\n";
  }
  for (std::size_t k = 0; k < series.size(); ++k) {
    const auto& s = series[k];
    const char* colour = kColours[k % 8];
    const char* dash = k >= 8 ? " stroke-dasharray=\"6 3\"" : "";
    std::string points;
    for (std::size_t i = 0; i < s.x.size(); ++i) {
      if (std::isnan(s.y[i])) continue;
      points += fmt(tx(s.x[i])) + "," + fmt(ty(s.y[i])) + " ";
      svg << "<circle cx=\"" << tx(s.x[i]) << "\" cy=\"" << ty(s.y[i]) << "\" r=\"3\" fill=\"" << colour << "\"/>";
    }
    svg << "<polyline class=\"series\" data-name=\"" << escape(s.name) << "\" fill=\"none\" stroke=\"" << colour
        << "\" stroke-width=\"2\"" << dash << " points=\"" << points << "\"/>\n";
    const double ly = top + 10 + 18 * static_cast<double>(k);
    svg << "<line x1=\"" << W - right + 15 << "\" y1=\"" << ly << "\" x2=\"" << W - right + 40 << "\" y2=\"" << ly
        << "\" stroke=\"" << colour << "\" stroke-width=\"2\"" << dash << "/>";
    svg << "<text x=\"" << W - right + 46 << "\" y=\"" << ly + 4 << "\">" << escape(s.name) << "</text>\n";
  }
  svg << "</svg>\n";
  return svg.str();
}

}  // namespace posenc::lab
