#include "posenc_plot/bias_curves.h"

#include <cmath>
#include <cstdio>

#include "posenc/error.h"
#include "posenc/kerple.h"
#include "posenc/names.h"
#include "posenc/sandwich.h"

namespace posenc::plot {
namespace {

constexpr std::int64_t kMaxDecayDistance = std::int64_t{1} << 20;  // decay_data's own bound
constexpr std::int64_t kMaxCoreValues = std::int64_t{1} << 26;     // a core table: 256 MiB of float32

// "" when every head is drawn, else "; 8 of 32 heads drawn" (the legend names them).
std::string heads_note(int heads) {
  const int drawn = static_cast<int>(drawn_heads(heads).size());
  return drawn == heads ? "" : "; " + std::to_string(drawn) + " of " + std::to_string(heads) + " heads drawn";
}

// A legend's number: 3 significant digits (1/7 as 0.143, not 0.14285714285714285).
std::string short_number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3g", v);
  return buf;
}

// One Series per drawn head of `values` ([heads][length], row-major), sampled at `distances`.
// `name(h)` is the legend's text; `what` names the source in the error for a non-finite value.
template <typename T, typename Name>
std::vector<Series> curves(const std::vector<T>& values, int heads, std::int64_t length, const std::vector<std::int64_t>& distances,
                           const std::string& what, Name name) {
  std::vector<Series> out;
  for (int h : drawn_heads(heads)) {
    Series s{name(h), {}, {}};
    for (std::int64_t d : distances) {
      const double v = static_cast<double>(values[static_cast<std::size_t>(h) * static_cast<std::size_t>(length) + static_cast<std::size_t>(d)]);
      if (!std::isfinite(v))
        throw Error(what + ": value " + format_number(v) + " at head " + std::to_string(h) + ", distance " + std::to_string(d) +
                    "; a bias must be finite");
      s.x.push_back(static_cast<double>(d));
      s.y.push_back(v);
    }
    out.push_back(std::move(s));
  }
  return out;
}

// Heads and the table's length (max_distance + 1) before a core table of that size is built.
void check_core_size(const char* scheme, int heads, std::int64_t max_distance) {
  if (heads < 1) throw Error(std::string("plot decay --scheme ") + scheme + ": --heads must be >= 1, got " + std::to_string(heads));
  if (static_cast<double>(heads) * static_cast<double>(max_distance + 1) > static_cast<double>(kMaxCoreValues))
    throw Error(std::string("plot decay --scheme ") + scheme + ": --heads " + std::to_string(heads) + " x (--max-distance " +
                std::to_string(max_distance) + " + 1) is more than 2^26 values; draw fewer heads or a shorter range");
}

std::string table_name(const DecayRequest& r) { return r.table_name.empty() ? std::string("the table") : r.table_name; }

// The table's shape, before --max-distance is read against it.
void check_table(const DecayRequest& r) {
  if (!r.table) throw Error("plot decay: scheme 'table' needs a table (--table FILE)");
  const UserTable& t = *r.table;
  const std::string name = table_name(r);
  if (t.rows < 1 || t.rows > kMaxBiasTableHeads)
    throw Error(name + ": " + std::to_string(t.rows) + " rows (heads); expected 1 .. " + std::to_string(kMaxBiasTableHeads) +
                " (a [heads, distances] table: is it [distances, heads]? transpose it)");
  if (t.cols < 2)
    throw Error(name + ": " + std::to_string(t.cols) + " column (distance); a bias curve needs at least 2 (distances 0, 1, ...)");
  if (t.values.size() != static_cast<std::size_t>(t.rows) * static_cast<std::size_t>(t.cols))
    throw Error(name + ": " + std::to_string(t.values.size()) + " values for " + std::to_string(t.rows) + " x " + std::to_string(t.cols));
}

}  // namespace

bool is_bias_scheme(const std::string& scheme) { return scheme == "kerple" || scheme == "sandwich" || scheme == "table"; }

std::vector<int> drawn_heads(int heads) {
  std::vector<int> out;
  if (heads <= kMaxBiasCurves) {
    for (int h = 0; h < heads; ++h) out.push_back(h);
    return out;
  }
  // heads > 8, so consecutive picks differ by at least (heads - 1) / 7 > 1: no head twice.
  for (int i = 0; i < kMaxBiasCurves; ++i)
    out.push_back(static_cast<int>(std::lround(static_cast<double>(i) * (heads - 1) / (kMaxBiasCurves - 1))));
  return out;
}

std::vector<std::int64_t> bias_distances(std::int64_t max_distance) {
  std::vector<std::int64_t> out;
  if (max_distance + 1 <= kMaxBiasPoints) {
    for (std::int64_t d = 0; d <= max_distance; ++d) out.push_back(d);
    return out;
  }
  for (std::int64_t i = 0; i < kMaxBiasPoints; ++i)
    out.push_back(std::llround(static_cast<double>(i) * static_cast<double>(max_distance) / static_cast<double>(kMaxBiasPoints - 1)));
  return out;
}

BiasChart bias_chart(const DecayRequest& r) {
  if (r.scheme == "table") check_table(r);
  if (r.max_distance < 1 || r.max_distance > kMaxDecayDistance)
    throw Error("plot decay: --max-distance must be in [1, 2^20], got " + std::to_string(r.max_distance));
  const std::vector<std::int64_t> distances = bias_distances(r.max_distance);
  const std::int64_t length = r.max_distance + 1;  // distances 0 .. max_distance
  BiasChart c;
  if (r.scheme == "kerple") {
    const auto kind = try_from_name<KerpleKind>(r.kind);
    if (!kind) throw Error("plot decay: --kind must be " + enum_names_joined<KerpleKind>(" or ") + ", got '" + r.kind + "'");
    check_core_size("kerple", r.heads, r.max_distance);
    const KerpleParams p = kerple_init(r.heads, *kind);
    c.series = curves(kerple_table(p, length), r.heads, length, distances, "kerple", [&](int h) {
      const auto i = static_cast<std::size_t>(h);
      return "head " + std::to_string(h) + " (r1 " + short_number(p.r1[i]) + ", r2 " + short_number(p.r2[i]) + ")";
    });
    // Titles fit the chart's 800 px at 15 px type (about 90 characters).
    c.title = *kind == KerpleKind::kLog ? "Kerple (log) at init: -r1 log(1 + r2 d), r2 = ALiBi slope"
                                        : "Kerple (power) at init: -r1 d^r2, r1 = ALiBi slope, r2 = 1";
    c.title += heads_note(r.heads);
    c.y_label = "bias added to the score (learned r1, r2 move it)";
  } else if (r.scheme == "sandwich") {
    const SandwichParams p{r.heads, r.dim};
    validate(p);  // names heads or dim before the table is sized
    check_core_size("sandwich", r.heads, r.max_distance);
    c.series = curves(sandwich_table(p, length), r.heads, length, distances, "sandwich", [&](int h) {
      return "head " + std::to_string(h) + " (x H/8h = " + short_number(r.heads / (8.0 * (h + 1))) + ")";
    });
    c.title = "Sandwich (d' = " + std::to_string(r.dim) + "): H/8h sum_k (cos(d / 10000^(2k/d')) - 1)" + heads_note(r.heads);
    c.y_label = "bias added to the score (parameter-free)";
  } else if (r.scheme == "table") {
    const UserTable& t = *r.table;
    const std::string name = table_name(r);
    if (r.max_distance > t.cols - 1)
      throw Error(name + ": --max-distance " + std::to_string(r.max_distance) + " is past the table's last distance " +
                  std::to_string(t.cols - 1) + " (its " + std::to_string(t.cols) + " columns are distances 0 .. " +
                  std::to_string(t.cols - 1) + ")");
    c.series = curves(t.values, t.rows, t.cols, distances, name, [](int h) { return "head " + std::to_string(h); });
    c.title = name + ": " + std::to_string(t.rows) + " heads x " + std::to_string(t.cols) + " distances" + heads_note(t.rows);
    c.y_label = "bias added to the score";
  } else {
    throw Error("plot decay: '" + r.scheme + "' is not a distance-bias scheme (kerple, sandwich or a table)");
  }
  return c;
}

}  // namespace posenc::plot
