#include "posenc_plot/svg_chart.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <sstream>

namespace posenc::plot {
namespace {

std::string fmt(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

// Colour-blind-safe palette (Okabe-Ito), then dashed repeats.
const char* kColours[] = {"#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#F0E442", "#000000"};

constexpr std::size_t kMaxTicks = 12;  // per axis, whatever the data

// What an axis can place: finite, and small enough that spans and paddings stay finite.
bool drawable(double v) { return std::isfinite(v) && std::fabs(v) <= 1e300; }

// At most kMaxTicks of v, evenly thinned.
std::vector<double> thinned(std::vector<double> v) {
  if (v.size() <= kMaxTicks) return v;
  std::vector<double> out;
  const std::size_t stride = (v.size() + kMaxTicks - 1) / kMaxTicks;
  for (std::size_t i = 0; i < v.size(); i += stride) out.push_back(v[i]);
  return out;
}

// Ticks: powers of ten (and 2, 5 multiples when few decades) on a log axis, ~6 round numbers
// otherwise. Loops run over integer counts that are bounded up front: a step below the
// values' own precision (a nearly constant series) or a range of 600 decades must not turn
// into an endless or memory-eating loop.
std::vector<double> ticks(double lo, double hi, bool log) {
  std::vector<double> t;
  if (!(drawable(lo) && drawable(hi) && hi > lo) || (log && !(lo > 0))) return t;
  if (log) {
    const int e0 = static_cast<int>(std::floor(std::log10(lo))), e1 = static_cast<int>(std::ceil(std::log10(hi)));
    const bool few = e1 - e0 <= 8;
    const int every = std::max(1, (e1 - e0 + static_cast<int>(kMaxTicks)) / static_cast<int>(kMaxTicks));
    for (int e = e0; e <= e1; e += every)
      for (double m : {1.0, 2.0, 5.0}) {
        if (m != 1.0 && !few) continue;
        const double v = m * std::pow(10.0, e);
        if (v >= lo * 0.999 && v <= hi * 1.001) t.push_back(v);
      }
    if (t.size() > kMaxTicks) t.erase(std::remove_if(t.begin(), t.end(), [](double v) { return std::fabs(std::log10(v) - std::round(std::log10(v))) > 1e-9; }), t.end());
    return thinned(t);
  }
  const double raw = (hi - lo) / 5, mag = std::pow(10.0, std::floor(std::log10(raw)));
  const double step = raw / mag < 1.5 ? mag : raw / mag < 3.5 ? 2 * mag : raw / mag < 7.5 ? 5 * mag : 10 * mag;
  const double first = std::ceil(lo / step), last = std::floor(hi / step + 1e-9);
  if (!(std::isfinite(first) && std::isfinite(last)) || last - first > 50) return t;
  for (double i = first; i <= last; ++i) {
    const double v = i * step;
    if (t.empty() || v > t.back()) t.push_back(std::fabs(v) < step * 1e-9 ? 0 : v);
  }
  return thinned(t);
}

}  // namespace

std::string xml_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '<') out += "&lt;";
    else if (c == '>') out += "&gt;";
    else if (c == '&') out += "&amp;";
    else if (c == '"') out += "&quot;";
    else out += c;
  }
  return out;
}

std::string svg_line_chart(const std::vector<Series>& series, const ChartOptions& o) {
  const double W = 800, H = 480, left = 80, right = 210, top = 44, bottom = 62;
  double x0 = std::numeric_limits<double>::infinity(), x1 = -x0, y0 = x0, y1 = -x0;
  // A point is drawn when both coordinates are drawable (and positive on a log axis); NaN,
  // infinities and absurd magnitudes are gaps.
  auto shown = [&](double x, double y) {
    return drawable(x) && drawable(y) && !(o.log_y && y <= 0) && !(o.log_x && x <= 0);
  };
  std::size_t points_shown = 0;
  for (const auto& s : series)
    for (std::size_t i = 0; i < s.x.size() && i < s.y.size(); ++i) {
      if (!shown(s.x[i], s.y[i])) continue;
      ++points_shown;
      x0 = std::min(x0, s.x[i]);
      x1 = std::max(x1, s.x[i]);
      y0 = std::min(y0, s.y[i]);
      y1 = std::max(y1, s.y[i]);
    }
  for (const auto& l : o.hlines) {
    if (!drawable(l.at) || (o.log_y && l.at <= 0)) continue;
    y0 = std::min(y0, l.at);
    y1 = std::max(y1, l.at);
  }
  for (double y : {o.y_from, o.y_to})
    if (drawable(y) && !(o.log_y && y <= 0)) y0 = std::min(y0, y), y1 = std::max(y1, y);
  if (!std::isfinite(x0)) x0 = o.log_x ? 1 : 0, x1 = o.log_x ? 10 : 1;
  if (!std::isfinite(y0)) y0 = o.log_y ? 1 : 0, y1 = o.log_y ? 10 : 1;
  // A span below the values' own precision (a constant series) gets a visible width.
  auto widen = [](double& lo, double& hi, bool log) {
    if (log) {
      if (!(hi > lo * (1 + 1e-9))) lo /= 2, hi *= 2;
    } else if (!(hi - lo > 1e-9 * std::max(std::fabs(lo), std::fabs(hi)))) {
      const double half = std::max(std::fabs(lo), std::fabs(hi)) > 0 ? 0.01 * std::fabs(hi) + 0.01 * std::fabs(lo) : 0.5;
      lo -= half;
      hi += half;
    }
  };
  widen(x0, x1, o.log_x);
  widen(y0, y1, o.log_y);
  if (o.log_y) {
    y0 = std::max(y0 / 1.5, std::numeric_limits<double>::min());
    y1 *= 1.5;
  } else {
    const double pad = (y1 - y0) * 0.05;
    y0 -= pad;
    y1 += pad;
  }
  auto scale = [](double v, double lo, double hi, bool log) {
    return log ? (std::log(v) - std::log(lo)) / (std::log(hi) - std::log(lo)) : (v - lo) / (hi - lo);
  };
  auto tx = [&](double x) { return left + scale(x, x0, x1, o.log_x) * (W - left - right); };
  auto ty = [&](double y) { return top + (1 - scale(y, y0, y1, o.log_y)) * (H - top - bottom); };
  std::ostringstream svg;
  svg << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << W << "\" height=\"" << H
      << "\" font-family=\"DejaVu Sans, sans-serif\" font-size=\"12\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  svg << "<text x=\"" << (left + W - right) / 2 << "\" y=\"24\" text-anchor=\"middle\" font-size=\"15\">" << xml_escape(o.title) << "</text>\n";
  for (const auto& b : o.vbands) {
    if (!(drawable(b.from) && drawable(b.to))) continue;
    const double a = tx(std::max(b.from, x0)), z = tx(std::min(b.to, x1));
    svg << "<rect x=\"" << a << "\" y=\"" << top << "\" width=\"" << std::max(0.0, z - a) << "\" height=\"" << H - top - bottom
        << "\" fill=\"#f3e5ab\" opacity=\"0.6\"/><text x=\"" << (a + z) / 2 << "\" y=\"" << H - bottom - 6
        << "\" text-anchor=\"middle\" fill=\"#7a6520\">" << xml_escape(b.label) << "</text>\n";
  }
  for (double y : ticks(y0, y1, o.log_y)) {
    svg << "<line x1=\"" << left - 5 << "\" y1=\"" << ty(y) << "\" x2=\"" << W - right << "\" y2=\"" << ty(y) << "\" stroke=\"#e4e4e4\"/>";
    svg << "<text x=\"" << left - 8 << "\" y=\"" << ty(y) + 4 << "\" text-anchor=\"end\">" << fmt(y) << "</text>\n";
  }
  std::vector<double> xt = ticks(x0, x1, o.log_x);
  if (o.log_x && xt.size() < 3) {  // few decades: the data's own x values
    xt.clear();
    for (const auto& s : series)
      for (std::size_t i = 0; i < s.x.size() && i < s.y.size(); ++i)
        if (shown(s.x[i], s.y[i])) xt.push_back(s.x[i]);
    std::sort(xt.begin(), xt.end());
    xt.erase(std::unique(xt.begin(), xt.end()), xt.end());
    xt = thinned(xt);
  }
  for (double x : xt) {
    svg << "<line x1=\"" << tx(x) << "\" y1=\"" << H - bottom << "\" x2=\"" << tx(x) << "\" y2=\"" << H - bottom + 5 << "\" stroke=\"black\"/>";
    svg << "<text x=\"" << tx(x) << "\" y=\"" << H - bottom + 18 << "\" text-anchor=\"middle\">" << fmt(x) << "</text>\n";
  }
  svg << "<line x1=\"" << left << "\" y1=\"" << H - bottom << "\" x2=\"" << W - right << "\" y2=\"" << H - bottom << "\" stroke=\"black\"/>\n";
  svg << "<line x1=\"" << left << "\" y1=\"" << top << "\" x2=\"" << left << "\" y2=\"" << H - bottom << "\" stroke=\"black\"/>\n";
  svg << "<text x=\"" << (left + W - right) / 2 << "\" y=\"" << H - 16 << "\" text-anchor=\"middle\">" << xml_escape(o.x_label) << "</text>\n";
  svg << "<text transform=\"translate(20," << (top + H - bottom) / 2 << ") rotate(-90)\" text-anchor=\"middle\">" << xml_escape(o.y_label) << "</text>\n";
  if (points_shown == 0)
    svg << "<text x=\"" << (left + W - right) / 2 << "\" y=\"" << (top + H - bottom) / 2
        << "\" text-anchor=\"middle\" fill=\"#a00\">no finite values to draw</text>\n";
  for (const auto& l : o.vlines) {
    if (!drawable(l.at) || (o.log_x && l.at <= 0)) continue;
    svg << "<line x1=\"" << tx(l.at) << "\" y1=\"" << top << "\" x2=\"" << tx(l.at) << "\" y2=\"" << H - bottom
        << "\" stroke=\"#777\" stroke-dasharray=\"4 3\"/><text x=\"" << tx(l.at) + 4 << "\" y=\"" << top + 12 << "\" fill=\"#555\">"
        << xml_escape(l.label) << "</text>\n";
  }
  for (const auto& l : o.hlines) {
    if (!drawable(l.at) || (o.log_y && l.at <= 0)) continue;
    svg << "<line x1=\"" << left << "\" y1=\"" << ty(l.at) << "\" x2=\"" << W - right << "\" y2=\"" << ty(l.at)
        << "\" stroke=\"#777\" stroke-dasharray=\"4 3\"/><text x=\"" << left + 4 << "\" y=\"" << ty(l.at) - 4 << "\" fill=\"#555\">"
        << xml_escape(l.label) << "</text>\n";
  }
  for (std::size_t k = 0; k < series.size(); ++k) {
    const auto& s = series[k];
    const char* colour = kColours[k % 8];
    const std::string dash = k >= 8 ? " stroke-dasharray=\"6 3\"" : "";
    std::string points;
    for (std::size_t i = 0; i < s.x.size() && i < s.y.size(); ++i) {
      if (!shown(s.x[i], s.y[i])) continue;
      points += fmt(tx(s.x[i])) + "," + fmt(ty(s.y[i])) + " ";
      if (s.x.size() <= 64) svg << "<circle cx=\"" << tx(s.x[i]) << "\" cy=\"" << ty(s.y[i]) << "\" r=\"2.5\" fill=\"" << colour << "\"/>";
    }
    svg << "\n<polyline class=\"series\" data-name=\"" << xml_escape(s.name) << "\" fill=\"none\" stroke=\"" << colour
        << "\" stroke-width=\"2\"" << dash << " points=\"" << points << "\"/>\n";
    const double ly = top + 10 + 18 * static_cast<double>(k);
    svg << "<line x1=\"" << W - right + 15 << "\" y1=\"" << ly << "\" x2=\"" << W - right + 40 << "\" y2=\"" << ly << "\" stroke=\""
        << colour << "\" stroke-width=\"2\"" << dash << "/><text x=\"" << W - right + 46 << "\" y=\"" << ly + 4 << "\">"
        << xml_escape(s.name) << "</text>\n";
  }
  svg << "</svg>\n";
  return svg.str();
}

}  // namespace posenc::plot
