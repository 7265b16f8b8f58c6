// `posenc table`'s arguments and the helpers its schemes share (table_command.cc, table_learned.cc).
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "options.h"
#include "posenc/deberta.h"
#include "posenc/learned.h"
#include "posenc/position_grid.h"
#include "posenc/sinusoidal.h"
#include "posenc/t5_bias.h"

namespace posenc::cli {

// Each default is written once: here, or in the library struct it lives in.
struct TableArgs {
  std::string scheme;
  bool json = false;
  int dim = 64;
  std::string positions = "0:8";
  std::string relative = "-8:9";
  SinusoidalParams sinusoidal;  // layout, freqs, base (also RoPE's base)
  ConfigArgs source;            // RoPE: the schedule of a config.json
  int num_positions = 1024, offset = 0;
  double std = kLearnedInitStd;
  std::uint64_t seed = 0;
  std::optional<int> heads;
  T5BucketParams t5;
  int klen = 8, clamp_len = 0;
  DebertaRelativeParams deberta;
  std::optional<std::string> mrope_section, grid;
  std::optional<std::string> table_grid, resize;  // learned: a 2-D table H,W resized to H',W'
  GridResize resize_mode = GridResize::kBicubic;
  int merge = 2, text_before = 0, text_after = 0;
  double time_interval = 1, seconds_per_grid = 1;  // the grid run's T ids (mrope.h TokenRun)
  bool bidirectional = false, causal = false, symmetric = false, interleaved = false, v4_rule = false, qwen3_omni = false;
  // flag name -> the option, and the schemes it applies to
  std::map<std::string, std::pair<CLI::Option*, std::set<std::string>>> applies;
  bool given(const std::string& flag) const { return applies.at(flag).first->count() > 0; }
};

// What one `posenc table` may print: a readable table, not a dump that exhausts memory.
constexpr std::size_t kMaxRows = 100000;       // positions, relative positions
constexpr std::size_t kMaxValues = 1u << 24;   // rows x columns

std::vector<std::int64_t> positions_of(const TableArgs& a);
// Throws when rows x cols values would pass kMaxValues, naming `what`.
void require_values(std::size_t rows, std::size_t cols, const char* what);
// Prints rows of numbers: "label  v0 v1 ..." (text).
void print_rows(const std::string& label, const std::vector<std::int64_t>& keys, const std::vector<float>& values,
                std::size_t width);
nlohmann::json rows_json(const std::vector<float>& values, std::size_t width);

// --scheme learned: rows of a seeded table at --positions, or a 2-D table resized (--table-grid, --resize).
nlohmann::json table_learned(const TableArgs& a);

}  // namespace posenc::cli
