// report.html: the leaderboard as one self-contained page — the tables (sortable by a click, in
// plain JavaScript), bits per character against length per scheme (inline SVG line charts),
// passkey heatmaps (inline SVG cells), the literature's claims, and the settings and commit.
// Nothing is fetched: no network, no framework.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

#include "leaderboard_files.h"
#include "posenc_plot/heatmap.h"
#include "posenc_plot/svg_chart.h"

namespace posenc::lab {
namespace {

using plot::xml_escape;

constexpr const char* kStyle = R"(body{font-family:DejaVu Sans,Helvetica,Arial,sans-serif;margin:2em auto;max-width:1200px;color:#222}
h1{font-size:1.6em}h2{margin-top:1.6em;border-bottom:1px solid #ccc}table{border-collapse:collapse;margin:1em 0;font-size:.9em}
th,td{border:1px solid #ccc;padding:.3em .6em;text-align:right;white-space:nowrap}table.text td,table.text th{text-align:left;white-space:normal}th{background:#f0f0f0;cursor:pointer}td:first-child,th:first-child{text-align:left}
.wide{overflow-x:auto}.charts{display:flex;flex-wrap:wrap;gap:1em}.charts svg{width:420px;height:auto}.heat{display:inline-block;margin:.5em}
.agrees{color:#1a7f37}.disagrees{color:#b42318}pre{background:#f6f6f6;padding:1em;overflow:auto;font-size:.8em}.note{color:#555})";

// Sorts a table by the clicked column: numbers by value (the cell's data-v), text by text.
constexpr const char* kScript = R"(document.querySelectorAll('table.board th').forEach(function(th){th.addEventListener('click',function(){
var i=th.cellIndex;var t=th.closest('table'),b=t.tBodies[0],rows=Array.from(b.rows),up=th.dataset.up!=='1';th.dataset.up=up?'1':'0';
rows.sort(function(x,y){var a=x.cells[i].dataset.v,c=y.cells[i].dataset.v;if(a===undefined||c===undefined){a=x.cells[i].textContent;c=y.cells[i].textContent;return up?a.localeCompare(c):c.localeCompare(a);}
a=parseFloat(a);c=parseFloat(c);if(isNaN(a))return 1;if(isNaN(c))return -1;return up?a-c:c-a;});rows.forEach(function(r){b.appendChild(r);});});});
document.body.dataset.ready='1';)";

std::string scalable(std::string svg) {  // the charts' fixed 800 x 480 scale with the page
  const auto at = svg.find("<svg ");
  if (at != std::string::npos) svg.insert(at + 5, "viewBox=\"0 0 800 480\" ");
  return svg;
}

std::string base_scheme(const std::string& row) { return row.substr(0, row.find('+')); }

std::string board_table(const LeaderboardResult& r, const std::string& corpus, bool all) {
  const std::vector<BoardColumn> cols = board_columns(r, all);
  std::ostringstream out;
  out << "<table class=\"board\"><thead><tr><th>scheme</th>";
  for (const BoardColumn& c : cols) out << "<th title=\"" << (c.lower_is_better ? "lower is better" : "higher is better") << "\">" << xml_escape(c.label) << "</th>";
  out << "</tr></thead><tbody>\n";
  for (const std::string& row : board_rows(r, corpus)) {
    out << "<tr><td>" << xml_escape(row) << "</td>";
    for (const BoardColumn& c : cols) {
      const Aggregate* a = find_aggregate(r, corpus, row, c.metric, c.multiple);
      out << "<td data-v=\"" << (a && a->seeds ? std::to_string(a->mean) : "NaN") << "\">" << xml_escape(cell_text(a)) << "</td>";
    }
    out << "</tr>\n";
  }
  out << "</tbody></table>\n";
  return out.str();
}

// bpc against length: one chart of every scheme's plain row, then one per scheme with its
// variants (RoPE's extensions), all on the board's y range so that they compare.
std::string bpc_charts(const LeaderboardResult& r, const std::string& corpus, const std::string& unit) {
  std::vector<std::string> groups = {""};  // "": the overview
  double lo = INFINITY, hi = -INFINITY;
  for (const Aggregate& a : r.aggregates) {
    if (a.corpus != corpus || a.metric != "bpc" || !a.seeds) continue;
    if (std::find(groups.begin(), groups.end(), base_scheme(a.row)) == groups.end()) groups.push_back(base_scheme(a.row));
    lo = std::min(lo, a.mean);
    hi = std::max(hi, a.mean);
  }
  std::ostringstream out;
  out << "<div class=\"charts\">\n";
  for (const std::string& g : groups) {
    std::vector<plot::Series> series;
    for (const Aggregate& a : r.aggregates) {
      if (a.corpus != corpus || a.metric != "bpc" || !a.seeds) continue;
      if (g.empty() ? a.row != base_scheme(a.row) : base_scheme(a.row) != g) continue;
      auto s = std::find_if(series.begin(), series.end(), [&](const plot::Series& x) { return x.name == a.row; });
      if (s == series.end()) s = series.insert(series.end(), plot::Series{a.row, {}, {}});
      s->x.push_back(a.multiple);
      s->y.push_back(a.mean);
    }
    plot::ChartOptions o;
    o.title = (g.empty() ? "every scheme" : g) + ": " + unit + " against length (mean over seeds)";
    o.y_from = lo;
    o.y_to = hi;
    o.x_label = "evaluation length / training length";
    o.y_label = unit;
    o.log_x = true;
    o.vlines = {{1, "trained"}};
    out << scalable(plot::svg_line_chart(series, o)) << "\n";
  }
  out << "</div>\n";
  return out.str();
}

// One passkey variant's grid: depth (rows) x length multiple (columns), exact match as a colour
// (viridis over [0, 1]) and a percentage.
std::string heatmap(const LeaderboardResult& r, const std::string& corpus, const std::string& metric, const std::string& row) {
  std::vector<double> depths, multiples;
  for (const Aggregate& a : r.aggregates) {
    if (a.corpus != corpus || a.metric != metric || a.row != row || a.depth < 0) continue;
    if (std::find(depths.begin(), depths.end(), a.depth) == depths.end()) depths.push_back(a.depth);
    if (std::find(multiples.begin(), multiples.end(), a.multiple) == multiples.end()) multiples.push_back(a.multiple);
  }
  std::sort(depths.begin(), depths.end());
  std::sort(multiples.begin(), multiples.end());
  const int cell = 44, left = 56, top = 34;
  const int W = left + cell * static_cast<int>(multiples.size()) + 8, H = top + cell * static_cast<int>(depths.size()) + 30;
  std::ostringstream out;
  out << "<svg class=\"heat\" xmlns=\"http://www.w3.org/2000/svg\" width=\"" << W << "\" height=\"" << H
      << "\" font-family=\"DejaVu Sans, sans-serif\" font-size=\"11\"><text x=\"4\" y=\"14\" font-weight=\"bold\">" << xml_escape(row)
      << "</text><text x=\"4\" y=\"28\" fill=\"#555\">depth \\ length</text>\n";
  char buf[64];
  for (std::size_t j = 0; j < multiples.size(); ++j) {
    std::snprintf(buf, sizeof buf, "%gx", multiples[j]);
    out << "<text x=\"" << left + cell * j + cell / 2 << "\" y=\"" << H - 12 << "\" text-anchor=\"middle\">" << buf << "</text>";
  }
  for (std::size_t i = 0; i < depths.size(); ++i) {
    std::snprintf(buf, sizeof buf, "%g", depths[i]);
    out << "<text x=\"" << left - 6 << "\" y=\"" << top + cell * i + cell / 2 + 4 << "\" text-anchor=\"end\">" << buf << "</text>";
    for (std::size_t j = 0; j < multiples.size(); ++j) {
      const Aggregate* a = find_aggregate(r, corpus, row, metric, multiples[j], depths[i]);
      const double v = a && a->seeds ? a->mean : NAN;
      const auto rgb = plot::viridis(std::isfinite(v) ? v : 0);
      std::snprintf(buf, sizeof buf, "#%02x%02x%02x", rgb[0], rgb[1], rgb[2]);
      out << "<rect x=\"" << left + cell * j << "\" y=\"" << top + cell * i << "\" width=\"" << cell - 1 << "\" height=\"" << cell - 1
          << "\" fill=\"" << (std::isfinite(v) ? buf : "#ddd") << "\"/>";
      std::snprintf(buf, sizeof buf, "%.0f%%", 100 * v);
      out << "<text x=\"" << left + cell * j + cell / 2 << "\" y=\"" << top + cell * i + cell / 2 + 4 << "\" text-anchor=\"middle\" fill=\""
          << (v > 0.6 ? "#000" : "#fff") << "\">" << (std::isfinite(v) ? buf : "—") << "</text>";
    }
  }
  out << "</svg>\n";
  return out.str();
}

std::string heatmaps(const LeaderboardResult& r, const std::string& corpus, const std::string& metric) {
  std::vector<std::string> rows;
  for (const Aggregate& a : r.aggregates)
    if (a.corpus == corpus && a.metric == metric && a.depth >= 0 && std::find(rows.begin(), rows.end(), a.row) == rows.end())
      rows.push_back(a.row);
  std::string out;
  for (const std::string& row : rows) out += heatmap(r, corpus, metric, row);
  return out;
}

std::string claims_table(const LeaderboardResult& r, const std::string& corpus) {
  std::ostringstream out;
  out << "<table class=\"text\"><thead><tr><th>claim</th><th>source</th><th>measured here</th><th>verdict</th></tr></thead><tbody>\n";
  for (const ClaimCheck& k : check_claims(r, corpus)) {
    const std::string css = k.verdict == "agrees" ? "agrees" : k.verdict == "disagrees" ? "disagrees" : "";
    out << "<tr><td>" << xml_escape(k.claim) << "</td><td>" << xml_escape(k.source) << "</td><td>" << xml_escape(k.measured)
        << "</td><td class=\"" << css << "\">" << xml_escape(k.verdict) << "</td></tr>\n";
  }
  out << "</tbody></table>\n";
  return out.str();
}

}  // namespace

std::string leaderboard_html(const LeaderboardResult& r, const LeaderboardConfig& c) {
  std::ostringstream out;
  out << "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>posenc scheme leaderboard</title><style>" << kStyle
      << "</style></head><body>\n<h1>posenc scheme leaderboard</h1>\n<p><code>" << xml_escape(c.command) << "</code><br>commit "
      << xml_escape(r.commit) << "; " << c.seeds.size() << " seed(s); this run took " << std::lround(r.seconds)
      << " s (models found cached cost nothing). Each cell: the mean over seeds ± their sample standard deviation (n − 1). "
      << "Click a column to sort.</p>\n";
  for (const std::string& corpus : board_corpora(r)) {
    const auto u = r.units.find(corpus);
    const std::string unit = u != r.units.end() ? u->second : "bits per character";
    out << "<h2>" << xml_escape(corpus) << "</h2>\n<div class=\"wide\">" << board_table(r, corpus, false) << "</div>\n";
    out << "<details><summary>every column (each length, sorting's whole sequences, training seconds)</summary><div class=\"wide\">"
        << board_table(r, corpus, true) << "</div></details>\n";
    out << "<h3>" << xml_escape(unit) << " against length</h3>\n" << bpc_charts(r, corpus, unit);
    const std::string pk = heatmaps(r, corpus, "passkey"), mk = heatmaps(r, corpus, "multikey");
    if (!pk.empty()) out << "<h3>Passkey retrieval, one key (exact match)</h3>\n<div>" << pk << "</div>\n";
    if (!mk.empty()) out << "<h3>Passkey retrieval among distractor keys (exact match)</h3>\n<div>" << mk << "</div>\n";
    out << "<h3>The literature beside it</h3>\n" << claims_table(r, corpus);
  }
  if (!r.notes.empty()) {
    out << "<h2>Notes</h2><ul>";
    for (const std::string& n : r.notes) out << "<li class=\"note\">" << xml_escape(n) << "</li>";
    out << "</ul>\n";
  }
  out << "<h2>Settings</h2>\n<details><summary>each experiment's settings (JSON)</summary><pre>" << xml_escape(leaderboard_config_json(c))
      << "</pre></details>\n<script>" << kScript << "</script>\n</body></html>\n";
  return out.str();
}

}  // namespace posenc::lab
