// The leaderboard's tables and files (no libtorch here): which columns the board shows, each cell
// as text, the literature's claims checked against the measured numbers, and the files written
// into out_dir: results.json, results.csv, leaderboard.md, report.html.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "posenc_lab/leaderboard.h"

namespace posenc::lab {

// One column of the board: a metric at one length multiple (0: none).
struct BoardColumn {
  std::string metric;
  double multiple = 0;
  std::string label;         // "bpc 4x", "passkey 2x", "sort 1.5x", ...
  bool lower_is_better = false;
};

// The corpora of the text experiments, in the order first observed (the sorting task's
// kSortCorpus excluded: its columns join every corpus's table).
std::vector<std::string> board_corpora(const LeaderboardResult& result);
// The columns that have numbers, in reading order: bpc, passkey, multikey, retrieval step, sort,
// speed. all = false keeps the main table's: bpc at 1x, 4x, 16x and the longest, the rest whole.
std::vector<BoardColumn> board_columns(const LeaderboardResult& result, bool all);
// A corpus's rows: by bpc at the longest length measured (lower first), then the rows without.
std::vector<std::string> board_rows(const LeaderboardResult& result, const std::string& corpus);
// The aggregate of (corpus, row, metric, multiple, mean over depths); sort metrics are read from
// kSortCorpus whatever corpus is asked. nullptr when there is none.
const Aggregate* find_aggregate(const LeaderboardResult& result, const std::string& corpus, const std::string& row,
                                const std::string& metric, double multiple, double depth = -1);
// "2.18 ± 0.02", "97% ± 3", "600 ± 100 (1 never)", "—" for none.
std::string cell_text(const Aggregate* cell);

// A claim of the literature and what this run measured.
struct ClaimCheck {
  std::string claim, source, measured;
  std::string verdict;  // "agrees", "disagrees", "within the seeds' spread", "not measured"
};
std::vector<ClaimCheck> check_claims(const LeaderboardResult& result, const std::string& corpus);

std::string leaderboard_json(const LeaderboardResult& result, const LeaderboardConfig& config);
std::string leaderboard_csv(const LeaderboardResult& result);
// One self-contained HTML file: inline CSS, inline SVG charts, a few lines of plain JavaScript
// that sort the tables (no network, no framework).
std::string leaderboard_html(const LeaderboardResult& result, const LeaderboardConfig& config);
// The config as JSON (the report's settings, results.json's "config").
std::string leaderboard_config_json(const LeaderboardConfig& config);

// Writes the four files into config.out_dir, all or none (posenc_plot's write_all).
void write_leaderboard_files(const LeaderboardResult& result, const LeaderboardConfig& config);

}  // namespace posenc::lab
