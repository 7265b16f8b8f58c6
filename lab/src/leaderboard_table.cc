// The leaderboard's aggregation over seeds, its columns, rows and cells (no libtorch here).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <tuple>

#include "leaderboard_files.h"
#include "posenc_lab/leaderboard.h"

namespace posenc::lab {
namespace {

using GroupKey = std::tuple<std::string, std::string, std::string, double, double>;  // corpus, row, metric, multiple, depth

// The order metrics are read in, and whether lower is better.
struct MetricInfo {
  const char* name;
  const char* label;
  bool lower_is_better;
};
constexpr MetricInfo kMetrics[] = {{"bpc", "bpc", true},
                                   {"passkey", "passkey", false},
                                   {"multikey", "multi-key", false},
                                   {"retrieval_step", "retrieval from step", true},
                                   {"sort_tokens", "sort tokens", false},
                                   {"sort_sequences", "sort sequences", false},
                                   {"train_tokens_per_s", "train tokens/s", false},
                                   {"train_s", "train s", true}};

bool is_sort(const std::string& metric) { return metric.rfind("sort_", 0) == 0; }

std::string multiple_text(double m) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%gx", m);
  return buf;
}

}  // namespace

std::vector<Aggregate> aggregate(const std::vector<Observation>& observations) {
  std::map<GroupKey, std::vector<double>> groups;
  std::vector<GroupKey> order;
  for (const Observation& o : observations) {
    const GroupKey k{o.corpus, o.row, o.metric, o.multiple, o.depth};
    if (!groups.count(k)) order.push_back(k);
    groups[k].push_back(o.value);
  }
  std::vector<Aggregate> out;
  for (const GroupKey& k : order) {
    Aggregate a{std::get<0>(k), std::get<1>(k), std::get<2>(k), std::get<3>(k), std::get<4>(k)};
    double sum = 0;
    for (double v : groups[k]) {
      if (std::isfinite(v)) {
        sum += v;
        ++a.seeds;
      } else {
        ++a.missing;
      }
    }
    a.mean = a.seeds ? sum / a.seeds : std::nan("");
    double squares = 0;
    for (double v : groups[k])
      if (std::isfinite(v)) squares += (v - a.mean) * (v - a.mean);
    a.spread = a.seeds > 1 ? std::sqrt(squares / (a.seeds - 1)) : 0;  // sample standard deviation
    out.push_back(a);
  }
  return out;
}

std::vector<std::string> board_corpora(const LeaderboardResult& r) {
  std::vector<std::string> out;
  for (const Aggregate& a : r.aggregates)
    if (a.corpus != kSortCorpus && std::find(out.begin(), out.end(), a.corpus) == out.end()) out.push_back(a.corpus);
  if (out.empty() && !r.aggregates.empty()) out.push_back(kSortCorpus);  // a board of the sorting task alone
  return out;
}

std::vector<BoardColumn> board_columns(const LeaderboardResult& r, bool all) {
  std::vector<BoardColumn> out;
  for (const MetricInfo& m : kMetrics) {
    std::vector<double> multiples;
    for (const Aggregate& a : r.aggregates)
      if (a.metric == m.name && a.depth < 0 && std::find(multiples.begin(), multiples.end(), a.multiple) == multiples.end())
        multiples.push_back(a.multiple);
    std::sort(multiples.begin(), multiples.end());
    for (double x : multiples) {
      const std::string name = m.name;
      const bool shown = all || (name == "bpc" ? x == 1 || x == 4 || x == 16 || x == multiples.back() : name != "sort_sequences" && name != "train_s");
      if (!shown) continue;
      out.push_back({m.name, x, std::string(m.label) + (x > 0 ? " " + multiple_text(x) : ""), m.lower_is_better});
    }
  }
  return out;
}

const Aggregate* find_aggregate(const LeaderboardResult& r, const std::string& corpus, const std::string& row, const std::string& metric,
                                double multiple, double depth) {
  const std::string& from = is_sort(metric) ? std::string(kSortCorpus) : corpus;
  for (const Aggregate& a : r.aggregates)
    if (a.corpus == from && a.row == row && a.metric == metric && a.multiple == multiple && a.depth == depth) return &a;
  return nullptr;
}

std::vector<std::string> board_rows(const LeaderboardResult& r, const std::string& corpus) {
  std::vector<std::string> rows;
  double longest = 0;
  for (const Aggregate& a : r.aggregates) {
    if (a.corpus != corpus && a.corpus != kSortCorpus) continue;
    if (std::find(rows.begin(), rows.end(), a.row) == rows.end()) rows.push_back(a.row);
    if (a.metric == "bpc" && a.corpus == corpus) longest = std::max(longest, a.multiple);
  }
  auto key = [&](const std::string& row) {
    const Aggregate* a = find_aggregate(r, corpus, row, "bpc", longest);
    return a && a->seeds ? a->mean : INFINITY;
  };
  std::stable_sort(rows.begin(), rows.end(), [&](const std::string& x, const std::string& y) { return key(x) < key(y); });
  return rows;
}

std::string cell_text(const Aggregate* a) {
  if (!a) return "—";
  char buf[96];
  const std::string never = a->missing ? " (" + std::to_string(a->missing) + " never)" : "";
  if (!a->seeds) return a->metric == "retrieval_step" ? "never" : "—";
  const bool fraction = a->metric == "passkey" || a->metric == "multikey" || is_sort(a->metric);
  if (fraction)
    std::snprintf(buf, sizeof buf, a->seeds > 1 ? "%.0f%% ± %.0f" : "%.0f%%", 100 * a->mean, 100 * a->spread);
  else if (a->metric == "bpc" || a->metric == "train_s")
    std::snprintf(buf, sizeof buf, a->seeds > 1 ? "%.2f ± %.2f" : "%.2f", a->mean, a->spread);
  else
    std::snprintf(buf, sizeof buf, a->seeds > 1 ? "%.0f ± %.0f" : "%.0f", a->mean, a->spread);
  return buf + never;
}

}  // namespace posenc::lab
