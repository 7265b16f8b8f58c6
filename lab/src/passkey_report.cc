// Results of `lab passkey` as the stdout table, JSON and figures (no libtorch here).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <sstream>

#include "posenc_lab/file_io.h"
#include "posenc_lab/passkey.h"
#include "posenc_lab/results_io.h"
#include "posenc_plot/heatmap.h"
#include "posenc_plot/svg_chart.h"

namespace posenc::lab {
namespace {

// A variant and its grid: one key, or with distractor keys ("+dN" after its name).
struct Variant {
  std::string model, extension;
  bool finetune;
  int distractors;
  bool operator==(const Variant& o) const {
    return model == o.model && extension == o.extension && finetune == o.finetune && distractors == o.distractors;
  }
  std::string name() const { return variant_name(model, extension, finetune) + (distractors ? "+d" + std::to_string(distractors) : ""); }
};
Variant variant_of(const PasskeyRow& row) { return {row.model, row.extension, row.finetune, row.distractors}; }

std::vector<Variant> variants(const PasskeyResult& r) {
  std::vector<Variant> out;
  for (const PasskeyRow& row : r.rows) {
    const Variant v = variant_of(row);
    if (std::find(out.begin(), out.end(), v) == out.end()) out.push_back(v);
  }
  return out;
}

// Mean accuracy and log-probability of a variant at one length over the depths (NaN: no row).
std::pair<double, double> mean_at(const PasskeyResult& r, const Variant& v, int length) {
  double acc = 0, logp = 0;
  int n = 0;
  for (const PasskeyRow& row : r.rows)
    if (variant_of(row) == v && row.length == length) {
      acc += row.accuracy;
      logp += row.logprob;
      ++n;
    }
  return n ? std::make_pair(acc / n, logp / n) : std::make_pair(std::nan(""), std::nan(""));
}

// Mean of bits[from, to).
double mean_bits(const std::vector<double>& bits, std::size_t from, std::size_t to) {
  to = std::min(to, bits.size());
  if (from >= to) return std::nan("");
  double s = 0;
  for (std::size_t i = from; i < to; ++i) s += bits[i];
  return s / static_cast<double>(to - from);
}

bool powers_of_two(const std::vector<int>& m) {
  for (std::size_t i = 0; i < m.size(); ++i)
    if (m[i] != (1 << (static_cast<int>(std::log2(m.front())) + static_cast<int>(i)))) return false;
  return true;
}

}  // namespace

std::string variant_name(const std::string& model, const std::string& extension, bool finetune) {
  return model + (extension == "none" ? "" : "+" + extension) + (finetune ? "+ft" : "");
}

std::string passkey_table(const PasskeyResult& r, const PasskeyConfig& c) {
  std::ostringstream out;
  char buf[128];
  int width = 18;  // the model column: the longest variant name (a remap's carries its settings)
  for (const Variant& v : variants(r)) width = std::max(width, static_cast<int>(v.name().size()));
  std::snprintf(buf, sizeof buf, "%-*s", width, "model");
  out << buf;
  for (int m : c.multiples) {
    const std::string label = std::to_string(m) + "x (" + std::to_string(m * c.training.train_len) + ")";
    std::snprintf(buf, sizeof buf, "  %15s", label.c_str());
    out << buf;
  }
  out << "\n" << std::string(static_cast<std::size_t>(width), ' ');
  for (std::size_t i = 0; i < c.multiples.size(); ++i) out << "     exact  log p";
  out << "   (mean over depths; " << c.samples << " sequences per depth; trained at " << c.training.train_len
      << (c.distractors ? "; +d" + std::to_string(c.distractors) + ": among " + std::to_string(c.distractors) + " distractor keys" : "") << ")\n";
  for (const Variant& v : variants(r)) {
    std::snprintf(buf, sizeof buf, "%-*s", width, v.name().c_str());
    out << buf;
    for (int m : c.multiples) {
      const auto [acc, logp] = mean_at(r, v, m * c.training.train_len);
      if (std::isnan(acc)) std::snprintf(buf, sizeof buf, "  %15s", "-");
      else std::snprintf(buf, sizeof buf, "  %7.0f%% %6.2f", 100 * acc, logp);
      out << buf;
    }
    out << "\n";
  }
  // The probe: exact match at the training length as training went (one line per model).
  std::string model;
  for (const ProbePoint& p : r.probes) {
    if (p.model != model) out << (model.empty() ? "" : "\n") << "exact match at " << c.training.train_len << " during training, " << p.model << ":";
    model = p.model;
    std::snprintf(buf, sizeof buf, " %ld:%.0f%%", p.step, 100 * p.accuracy);
    out << buf;
  }
  if (!model.empty()) out << "\n";
  return out.str();
}

std::string passkey_json(const PasskeyResult& r, const PasskeyConfig& c) {
  std::vector<int> lengths;
  for (int m : c.multiples) lengths.push_back(m * c.training.train_len);
  nlohmann::json j = {{"train_len", c.training.train_len}, {"lengths", lengths}, {"depths", c.depths}, {"complete", r.complete},
                      {"results", nlohmann::json::array()}, {"curves", nlohmann::json::array()}, {"probes", nlohmann::json::array()},
                      {"notes", r.notes}};
  for (const ProbePoint& p : r.probes)
    j["probes"].push_back({{"model", p.model}, {"step", p.step}, {"accuracy", p.accuracy}, {"logprob", p.logprob}});
  for (const PasskeyRow& row : r.rows) {
    j["results"].push_back({{"model", row.model}, {"scheme", row.scheme}, {"extension", row.extension}, {"finetune", row.finetune},
                            {"length", row.length}, {"depth", row.depth}, {"accuracy", row.accuracy}, {"logprob", row.logprob},
                            {"samples", row.samples}});
    if (row.distractors > 0) j["results"].back()["distractors"] = row.distractors;
  }
  const auto train = static_cast<std::size_t>(c.training.train_len);
  for (const PositionCurve& cv : r.curves)
    j["curves"].push_back({{"model", cv.model}, {"extension", cv.extension}, {"finetune", cv.finetune}, {"length", cv.bits.size()},
                           {"bits_within_train_len", mean_bits(cv.bits, 0, train)},
                           {"bits_beyond_train_len", mean_bits(cv.bits, train, cv.bits.size())}});
  if (c.training.randomize_positions > 0) j["randomize_positions"] = c.training.randomize_positions;
  add_world_fields(&j, c.launch);
  return j.dump(1);
}

std::vector<std::string> write_passkey_figures(const PasskeyResult& r, const PasskeyConfig& c) {
  std::vector<std::string> written;
  const bool log_axis = powers_of_two(c.multiples);
  std::string lengths;
  for (int m : c.multiples) lengths += (lengths.empty() ? "" : ", ") + std::to_string(m * c.training.train_len);
  constexpr int kCell = 48;  // pixels per grid cell: the grid is small, the figure should not be
  for (const Variant& v : variants(r)) {
    plot::HeatmapSpec s;
    s.rows = static_cast<int>(c.depths.size());
    s.cols = static_cast<int>(c.multiples.size());
    for (double d : c.depths)
      for (int m : c.multiples) {
        double acc = std::nan("");
        for (const PasskeyRow& row : r.rows)
          if (variant_of(row) == v && row.length == m * c.training.train_len && row.depth == d) acc = row.accuracy;
        s.values.push_back(acc);
      }
    s.value_min = 0;
    s.value_max = 1;
    const std::string name = v.name();
    s.title = "passkey exact match: " + name + (v.distractors ? " (" + std::to_string(v.distractors) + " distractor keys)" : "") + " (trained at " + std::to_string(c.training.train_len) + ")";
    s.row_label = "depth of the key";
    s.col_label = (log_axis ? "log2 length; lengths " : "column; lengths ") + lengths;
    s.row_first = c.depths.front();
    s.row_step = c.depths.size() > 1 ? (c.depths.back() - c.depths.front()) / static_cast<double>(c.depths.size() - 1) : 1;
    s.col_first = log_axis ? std::log2(c.multiples.front() * c.training.train_len) : 0;
    const std::string base = c.training.out_dir + "/heatmap-" + name;
    const std::string figure = plot::heatmap_svg(s, kCell);
    plot::write_all({{base + ".png", plot::heatmap_png(s, kCell)}, {base + ".svg", std::vector<std::uint8_t>(figure.begin(), figure.end())}});
    written.push_back(base + ".svg");
  }
  // Per-position loss on plain text, in bins (a few hundred points per line), zero-shot variants.
  std::vector<plot::Series> series;
  std::ostringstream csv;
  csv << "model,extension,finetune,position,bits\n";
  for (const PositionCurve& cv : r.curves) {
    for (std::size_t i = 0; i < cv.bits.size(); ++i)
      csv << cv.model << "," << cv.extension << "," << (cv.finetune ? "true" : "false") << "," << i << "," << cv.bits[i] << "\n";
    if (cv.finetune) continue;
    const std::size_t bin = std::max<std::size_t>(1, cv.bits.size() / 128);
    plot::Series line{variant_name(cv.model, cv.extension, false), {}, {}};
    for (std::size_t i = 0; i < cv.bits.size(); i += bin) {
      line.x.push_back(static_cast<double>(i) + 0.5 * static_cast<double>(bin - 1));
      line.y.push_back(mean_bits(cv.bits, i, i + bin));
    }
    series.push_back(line);
  }
  plot::ChartOptions o;
  o.title = "Loss by position on plain text (passkey-trained models, zero-shot)";
  o.x_label = "position in the window (characters)";
  o.y_label = "bits per character";
  o.vlines.push_back({static_cast<double>(c.training.train_len), "training length"});
  write_file_atomic(c.training.out_dir + "/position-loss.svg", plot::svg_line_chart(series, o));
  write_file_atomic(c.training.out_dir + "/position-loss.csv", csv.str());
  written.push_back(c.training.out_dir + "/position-loss.svg");
  return written;
}

}  // namespace posenc::lab
