// Results of `lab extrapolate` as text, JSON, CSV and the SVG chart (no libtorch here).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "posenc/error.h"
#include "posenc_lab/extrapolate.h"
#include "posenc_lab/results_io.h"
#include "posenc_plot/svg_chart.h"

namespace posenc::lab {

nlohmann::json row_json(const ResultRow& r) {
  auto num = [](double v) { return std::isnan(v) ? nlohmann::json(nullptr) : nlohmann::json(v); };
  return {{"model", r.model}, {"scheme", r.scheme}, {"extension", r.extension}, {"seed", r.seed}, {"eval_len", r.eval_len},
          {"available", r.available}, {"bpc", num(r.bpc)}, {"bpc_beyond_train", num(r.bpc_beyond)}, {"tokens", r.tokens},
          {"tokens_beyond_train", r.tokens_beyond}, {"note", r.note}};
}

ResultRow row_from_json(const nlohmann::json& j, const std::string& path) {
  ResultRow r;
  try {
    r.model = j.at("model");
    r.scheme = j.at("scheme");
    r.extension = j.at("extension");
    r.seed = j.at("seed");
    r.eval_len = j.at("eval_len");
    r.available = j.at("available");
    r.bpc = j.at("bpc").is_null() ? std::nan("") : j.at("bpc").get<double>();
    r.bpc_beyond = j.at("bpc_beyond_train").is_null() ? std::nan("") : j.at("bpc_beyond_train").get<double>();
    r.tokens = j.at("tokens");
    r.tokens_beyond = j.at("tokens_beyond_train");
    r.note = j.at("note");
  } catch (const nlohmann::json::exception& e) {
    throw Error(path + " is corrupt (a row: " + e.what() + "); delete it to recompute");
  }
  if (r.available && !std::isfinite(r.bpc))
    throw Error(path + " is corrupt (row " + r.model + " " + r.extension + " " + std::to_string(r.eval_len) +
                " is marked available without a finite bpc); delete it to recompute");
  return r;
}

void add_world_fields(nlohmann::json* results, const LaunchConfig& launch) {
  const LaunchConfig l = resolve_launch(launch);
  (*results)["world_size"] = world_size_of(l);
  (*results)["distribute"] = distributes_models(l) ? "models" : "data";
}

std::string format_table(const ExtrapolateResult& r, const ExtrapolateConfig& c) {
  // mean over seeds (and std when there are several) per (model base name, extension, length)
  std::map<std::pair<std::string, std::string>, std::map<int, std::vector<double>>> cells;
  std::vector<std::pair<std::string, std::string>> order;
  for (const auto& row : r.rows) {
    std::string base = row.model;
    if (c.seeds.size() > 1) base = base.substr(0, base.rfind("-s"));
    const auto key = std::make_pair(base, row.extension);
    if (!cells.count(key)) order.push_back(key);
    cells[key][row.eval_len].push_back(row.available ? row.bpc : std::nan(""));
  }
  std::ostringstream out;
  char buf[96];
  int width = 20;  // the extension column: the longest label (a remap's or a stream's carries its settings)
  for (const auto& key : order) width = std::max(width, static_cast<int>(std::min<std::size_t>(key.second.size(), 48)));
  std::snprintf(buf, sizeof buf, "%-22s %-*s", "model", width, "extension");
  out << buf;
  for (int len : c.eval_lens) {
    std::snprintf(buf, sizeof buf, " %13d", len);
    out << buf;
  }
  out << "   (" << r.unit << "; trained at " << c.training.train_len << ")\n";
  for (const auto& key : order) {
    std::snprintf(buf, sizeof buf, "%-22s %-*s", key.first.c_str(), width, key.second.c_str());
    out << buf;
    for (int len : c.eval_lens) {
      const auto& v = cells[key][len];
      if (v.empty()) {
        out << "             -";
      } else if (std::isnan(v[0])) {
        out << "           n/a";
      } else {
        double mean = 0, var = 0;
        for (double x : v) mean += x / static_cast<double>(v.size());
        for (double x : v) var += (x - mean) * (x - mean) / std::max<double>(1, static_cast<double>(v.size()) - 1);
        if (v.size() > 1) std::snprintf(buf, sizeof buf, "  %5.2f±%.2f", mean, std::sqrt(var));
        else std::snprintf(buf, sizeof buf, " %13.2f", mean);
        out << buf;
      }
    }
    out << "\n";
  }
  for (const auto& n : r.notes) out << "note: " << n << "\n";
  const auto unavailable = std::find_if(r.rows.begin(), r.rows.end(), [](const ResultRow& row) { return !row.available; });
  if (unavailable != r.rows.end())
    out << "n/a: past the learned table's " << std::max(c.training.train_len, c.training.randomize_positions)
        << " positions (an absolute table cannot extrapolate)\n";
  return out.str();
}

std::string results_json(const ExtrapolateResult& r, const ExtrapolateConfig& c) {
  nlohmann::json j = {{"results", nlohmann::json::array()}, {"notes", r.notes}, {"complete", r.complete}, {"unit", r.unit},
                      {"config", {{"train_len", c.training.train_len}, {"eval_lens", c.eval_lens}, {"steps", c.training.steps},
                                  {"batch", c.training.batch}, {"layers", c.shape.layers}, {"d_model", c.shape.d_model},
                                  {"heads", c.shape.heads}, {"seeds", c.seeds}, {"corpus", c.corpus}, {"eval_chars", c.eval_chars},
                                  {"extensions", extension_names(c.extensions)},
                                  {"incremental_tokens", c.incremental_tokens}, {"pi_finetune_steps", c.pi_finetune_steps}}}};
  if (c.training.randomize_positions > 0) j["config"]["randomize_positions"] = c.training.randomize_positions;
  add_world_fields(&j, c.launch);
  for (const auto& row : r.rows) j["results"].push_back(row_json(row));
  return j.dump(1);
}

std::string results_csv(const ExtrapolateResult& r) {
  std::ostringstream out;
  out << "model,scheme,extension,seed,eval_len,available,bpc,bpc_beyond_train,tokens,tokens_beyond_train\n";
  for (const auto& row : r.rows) {
    out << row.model << "," << row.scheme << "," << row.extension << "," << row.seed << "," << row.eval_len << ","
        << (row.available ? "true" : "false") << ",";
    if (!std::isnan(row.bpc)) out << row.bpc;
    out << ",";
    if (!std::isnan(row.bpc_beyond)) out << row.bpc_beyond;
    out << "," << row.tokens << "," << row.tokens_beyond << "\n";
  }
  return out.str();
}

std::string results_svg(const ExtrapolateResult& r, const ExtrapolateConfig& c) {
  std::map<std::string, std::map<int, std::pair<double, int>>> sums;
  std::vector<std::string> order;
  for (const auto& row : r.rows) {
    if (row.extension == kIncrementalRow || !row.available || !std::isfinite(row.bpc)) continue;  // the chart gets finite points only
    std::string base = row.model;
    if (c.seeds.size() > 1) base = base.substr(0, base.rfind("-s"));
    const std::string name = row.extension == "none" ? base : base + " + " + row.extension;
    if (!sums.count(name)) order.push_back(name);
    auto& cell = sums[name][row.eval_len];
    cell.first += row.bpc;
    cell.second += 1;
  }
  std::vector<plot::Series> series;
  for (const auto& name : order) {
    plot::Series s{name, {}, {}};
    for (const auto& [len, sum] : sums[name]) {
      s.x.push_back(len);
      s.y.push_back(sum.first / sum.second);
    }
    series.push_back(s);
  }
  plot::ChartOptions o;
  o.title = "Train short, test long: " + r.unit.substr(0, r.unit.find(" ("));
  o.x_label = "evaluation length (characters, log scale)";
  o.y_label = r.unit.substr(0, r.unit.find(" ("));
  o.log_x = true;
  o.vlines.push_back({static_cast<double>(c.training.train_len), "training length"});
  return plot::svg_line_chart(series, o);
}

}  // namespace posenc::lab
