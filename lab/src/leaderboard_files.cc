// The leaderboard's data files: results.json, results.csv, leaderboard.md (no libtorch here).
#include <cmath>
#include <nlohmann/json.hpp>
#include <sstream>

#include "leaderboard_files.h"
#include "posenc_plot/heatmap.h"

namespace posenc::lab {
namespace {

nlohmann::json number(double v) { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(nullptr); }

nlohmann::json training_json(const TrainSettings& t, const ModelShape& s) {
  return {{"train_len", t.train_len}, {"steps", t.steps},    {"batch", t.batch},     {"lr", t.lr},
          {"warmup", t.warmup},       {"layers", s.layers}, {"d_model", s.d_model}, {"heads", s.heads}};
}

std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string out = "\"";
  for (char ch : s) out += ch == '"' ? std::string("\"\"") : std::string(1, ch);
  return out + "\"";
}

std::string md_cell(const std::string& s) {
  std::string out;
  for (char ch : s) out += ch == '|' ? std::string("\\|") : std::string(1, ch);
  return out;
}

}  // namespace

std::string leaderboard_config_json(const LeaderboardConfig& c) {
  nlohmann::json j;
  j["schemes"] = c.schemes;
  j["corpora"] = c.corpora;
  j["seeds"] = c.seeds;
  j["spread"] = "sample standard deviation over seeds (n - 1)";
  nlohmann::json ex = training_json(c.extrapolate.training, c.extrapolate.shape);
  ex["eval_lens"] = c.extrapolate.eval_lens;
  ex["eval_chars"] = c.extrapolate.eval_chars;
  ex["extensions"] = extension_names(c.extrapolate.extensions);
  j["extrapolate"] = ex;
  nlohmann::json pk = training_json(c.passkey.training, c.passkey.shape);
  pk["schemes"] = c.passkey.schemes;
  pk["multiples"] = c.passkey.multiples;
  pk["depths"] = c.passkey.depths;
  pk["samples"] = c.passkey.samples;
  pk["extensions"] = extension_names(c.passkey.extensions);
  pk["finetune_steps"] = c.passkey.finetune_steps;
  pk["probe_every"] = c.passkey.probe_every;
  pk["distractors"] = c.passkey.distractors;
  pk["passkey_fraction"] = c.passkey.passkey_fraction;
  j["passkey"] = pk;
  nlohmann::json so = training_json(c.sort.training, c.sort.shape);
  so["schemes"] = c.sort.schemes;
  so["test_lens"] = c.sort.test_lens;
  so["test_sequences"] = c.sort.test_sequences;
  j["sort"] = so;
  return j.dump(2);
}

std::string leaderboard_json(const LeaderboardResult& r, const LeaderboardConfig& c) {
  nlohmann::json obs = nlohmann::json::array(), agg = nlohmann::json::array();
  for (const Observation& o : r.observations)
    obs.push_back({{"corpus", o.corpus}, {"row", o.row}, {"metric", o.metric}, {"multiple", o.multiple}, {"depth", number(o.depth < 0 ? NAN : o.depth)},
                   {"seed", o.seed}, {"value", number(o.value)}});
  for (const Aggregate& a : r.aggregates)
    agg.push_back({{"corpus", a.corpus}, {"row", a.row}, {"metric", a.metric}, {"multiple", a.multiple}, {"depth", number(a.depth < 0 ? NAN : a.depth)},
                   {"mean", number(a.mean)}, {"spread", number(a.spread)}, {"seeds", a.seeds}, {"missing", a.missing}});
  nlohmann::json claims = nlohmann::json::array();
  for (const std::string& corpus : board_corpora(r))
    for (const ClaimCheck& k : check_claims(r, corpus))
      claims.push_back({{"corpus", corpus}, {"claim", k.claim}, {"source", k.source}, {"measured", k.measured}, {"verdict", k.verdict}});
  return nlohmann::json{{"commit", r.commit},
                        {"command", c.command},
                        {"seconds", r.seconds},
                        {"config", nlohmann::json::parse(leaderboard_config_json(c))},
                        {"observations", obs},
                        {"aggregates", agg},
                        {"claims", claims},
                        {"notes", r.notes}}
      .dump(1);
}

std::string leaderboard_csv(const LeaderboardResult& r) {
  std::ostringstream out;
  out << "corpus,row,metric,multiple,depth,seeds,missing,mean,spread\n";
  for (const Aggregate& a : r.aggregates) {
    out << csv_field(a.corpus) << ',' << csv_field(a.row) << ',' << a.metric << ',' << a.multiple << ',';
    if (a.depth >= 0) out << a.depth;
    out << ',' << a.seeds << ',' << a.missing << ',';
    if (a.seeds) out << a.mean << ',' << a.spread;
    else out << ',';
    out << '\n';
  }
  return out.str();
}

std::string leaderboard_markdown(const LeaderboardResult& r, const LeaderboardConfig& c) {
  std::ostringstream out;
  out << "# posenc scheme leaderboard\n\n`" << c.command << "` — commit " << r.commit << ", " << c.seeds.size()
      << " seed(s); each cell is the mean ± the sample standard deviation over seeds.\n";
  const std::vector<BoardColumn> cols = board_columns(r, false);
  for (const std::string& corpus : board_corpora(r)) {
    out << "\n## " << corpus << "\n\n| scheme |";
    for (const BoardColumn& col : cols) out << ' ' << md_cell(col.label) << " |";
    out << "\n|---|";
    for (std::size_t i = 0; i < cols.size(); ++i) out << "---|";
    out << '\n';
    for (const std::string& row : board_rows(r, corpus)) {
      out << "| " << md_cell(row) << " |";
      for (const BoardColumn& col : cols) out << ' ' << md_cell(cell_text(find_aggregate(r, corpus, row, col.metric, col.multiple))) << " |";
      out << '\n';
    }
    out << "\n| claim | source | measured here | verdict |\n|---|---|---|---|\n";
    for (const ClaimCheck& k : check_claims(r, corpus))
      out << "| " << md_cell(k.claim) << " | " << md_cell(k.source) << " | " << md_cell(k.measured) << " | " << k.verdict << " |\n";
  }
  for (const std::string& note : r.notes) out << "\n- " << note;
  if (!r.notes.empty()) out << '\n';
  return out.str();
}

void write_leaderboard_files(const LeaderboardResult& r, const LeaderboardConfig& c) {
  auto file = [&](const std::string& name, const std::string& text) {
    return plot::OutputFile{c.out_dir + "/" + name, std::vector<std::uint8_t>(text.begin(), text.end())};
  };
  plot::write_all({file("results.json", leaderboard_json(r, c)), file("results.csv", leaderboard_csv(r)),
                   file("leaderboard.md", leaderboard_markdown(r, c)), file("report.html", leaderboard_html(r, c))});
}

}  // namespace posenc::lab
