#include "commands.h"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>

#include "posenc/error.h"
#include "posenc/hf_config.h"
#include "posenc/model_spec.h"
#ifdef POSENC_WITH_TORCH
#include "posenc_lab/saved_models.h"
#include "posenc_lab/sort_task.h"
#endif
#include "posenc_plot/axial_heatmap.h"
#include "posenc_plot/bias_curves.h"
#include "posenc_plot/explain.h"
#include "posenc_plot/figures.h"
#include "posenc_plot/user_table.h"
#include "options.h"
#include "ranges.h"

namespace posenc::cli {
namespace {

// Rows (and columns) of one heatmap: plot::heatmap_data's limit, and the attention map's.
constexpr std::size_t kMaxHeatmapPositions = 4096;

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

void write_heatmap(const plot::HeatmapSpec& spec, const std::string& out) {
  for (const std::string& path : plot::write_heatmap_files(spec, out)) std::cout << "wrote " << path << "\n";
}

void write_chart(const std::string& svg, const std::string& out) {
  if (!ends_with(out, ".svg")) throw Error("line charts are SVG: -o must end in .svg, got '" + out + "' (rsvg-convert turns SVG into PNG)");
  plot::write_text(out, svg);
  std::cout << "wrote " << out << "\n";
}

// The learner's own table, drawn with a diagnosis of the stripes a wrong index draws.
void write_user_heatmap(const std::string& from, const std::string& out) {
  const plot::UserTable table = plot::read_user_table(from, {static_cast<int>(kMaxHeatmapPositions), static_cast<int>(kMaxHeatmapPositions)});
  const plot::AxisVariation v = plot::axis_variation(table);
  char line[256];
  std::snprintf(line, sizeof line, "%d rows x %d columns; variance down the columns (along the row index) %.4g, along the rows "
                "(along the column index) %.4g", table.rows, table.cols, v.down_columns, v.along_rows);
  std::cout << from << ": " << line << "\n"
            << "diagnosis: " << (v.message.empty() ? "the values vary along both indices (no stripes from an unused index)" : v.message)
            << "\n";
  plot::HeatmapSpec spec;
  spec.rows = table.rows;
  spec.cols = table.cols;
  spec.values = table.values;
  spec.title = from.substr(from.find_last_of('/') + 1) + ": your table, one cell per value";
  spec.row_label = "row index (positions?)";
  spec.col_label = "column index (dimensions?)";
  write_heatmap(spec, out);
}

#ifdef POSENC_WITH_TORCH
// A character as an attention map's label: itself when printable ASCII, a space as '_', else
// its byte in hex ("\n" would be two labels' worth; a UTF-8 byte alone is not text).
std::string char_name(unsigned char c) {
  if (c == ' ') return "_";
  if (c > ' ' && c < 127) return std::string(1, static_cast<char>(c));
  char hex[8];
  std::snprintf(hex, sizeof hex, "\\x%02x", c);
  return hex;
}

// A trained learned table (the lab's model): positions down, dimensions across.
plot::HeatmapSpec learned_heatmap(const std::string& model_path) {
  const lab::LearnedPositions t = lab::learned_positions(model_path);
  plot::HeatmapSpec spec;
  spec.rows = t.rows;
  spec.cols = t.dim;
  spec.values = t.values;
  spec.title = "Learned positions after training (" + model_path.substr(model_path.find_last_of('/') + 1) + ")";
  spec.row_label = "position (table row)";
  spec.col_label = "dimension";
  return spec;
}
#endif

}  // namespace

void add_plot_command(CLI::App& app) {
  CLI::App* plot_cmd = app.add_subcommand("plot", "pictures: heatmaps (PNG + labelled SVG) and line charts (SVG)");
  plot_cmd->require_subcommand(1);

  struct HeatmapArgs {
    plot::HeatmapRequest request;
    std::string positions = "0:128", out, from, model;
    bool causal = false;
  };
  auto h = std::make_shared<HeatmapArgs>();
  CLI::App* heat = plot_cmd->add_subcommand("heatmap", "positions x dimensions, or query x key for biases");
  CLI::Option* scheme = add_scheme_option(heat, h->request.scheme, "sinusoidal, learned, rope, alibi, t5 or xl");
  heat->add_option("--from", h->from, "your own table instead of a scheme: .npy (float32/float64, 2-D) or CSV; "
                                      "prints how its values vary along each index")
      ->excludes(scheme);
#ifdef POSENC_WITH_TORCH
  heat->add_option("--model", h->model, "the trained table of a learned model the lab saved (<out>/learned.pt)")->excludes(scheme)->excludes("--from");
#endif
  add_dim_option(heat, h->request.dim, "dimension");
  add_positions_option(heat, h->positions, "positions A:B (half-open)")->capture_default_str();
  add_base_option(heat, h->request.base, "frequency base")->capture_default_str();
  add_heads_option(heat, h->request.heads, "ALiBi heads")->capture_default_str();
  add_head_option(heat, h->request.head, "which head")->capture_default_str();
  add_causal_flag(heat, h->causal, "T5: causal buckets (default bidirectional)");
  add_out_option(heat, h->out, "output .png (plus a labelled .svg) or .svg")->required();
  heat->callback([h] {
    if (!h->from.empty()) return write_user_heatmap(h->from, h->out);
#ifdef POSENC_WITH_TORCH
    if (!h->model.empty()) return write_heatmap(learned_heatmap(h->model), h->out);
#endif
#ifdef POSENC_WITH_TORCH
    if (h->request.scheme.empty()) throw Error("plot heatmap needs --scheme NAME, --from FILE or --model FILE");
#else
    if (h->request.scheme.empty()) throw Error("plot heatmap needs --scheme NAME or --from FILE");
#endif
    const auto p = parse_int_list(h->positions, "--positions", 0, kMaxPosition, kMaxHeatmapPositions);
    plot::HeatmapRequest r = h->request;
    r.first = p.front();
    r.count = static_cast<std::int64_t>(p.size());
    r.t5.bidirectional = !h->causal;
    write_heatmap(plot::heatmap_data(r), h->out);
  });

  struct WaveArgs {
    ConfigArgs source;
    std::string out;
  };
  auto w = std::make_shared<WaveArgs>();
  CLI::App* wave = plot_cmd->add_subcommand("wavelengths", "per-frequency wavelength before and after scaling, against the training context");
  add_config_options(wave, w->source, true);
  add_out_option(wave, w->out, "output .svg")->required();
  wave->callback([w] {
    const ModelRope model = w->source.load();
    const RopeParams& p = model.select(w->source.layer_type).params;
    const std::string title = (model.model_type.empty() ? std::string("RoPE") : model.model_type) + ": " + to_string(p.type) +
                              " wavelengths (theta " + format_number(p.theta) + ")";
    write_chart(plot::wavelength_svg(plot::wavelength_data(p, title)), w->out);
  });

  struct DecayArgs {
    plot::DecayRequest request;
    std::string out, table;
  };
  auto d = std::make_shared<DecayArgs>();
  CLI::App* decay = plot_cmd->add_subcommand("decay", "expected attention score, or a learned bias per head, against relative distance");
  CLI::Option* decay_scheme = add_scheme_option(decay, d->request.scheme, "rope, xpos, alibi, t5, sinusoidal, kerple or sandwich");
  decay->add_option("--table", d->table, "your own bias table instead of a scheme: .npy or CSV, [heads, distances] (column d is "
                                         "distance d), e.g. a trained DynamicPositionBias or FIRE evaluated in Python")
      ->excludes(decay_scheme);
  CLI::Option* kind = decay->add_option("--kind", d->request.kind, "Kerple: log or power")->capture_default_str();
  add_dim_option(decay, d->request.dim, "head (RoPE), model (sinusoidal) or sinusoid (Sandwich's d') dimension");
  add_heads_option(decay, d->request.heads, "ALiBi, Kerple or Sandwich heads")->capture_default_str();
  CLI::Option* max_distance =
      add_max_distance_option(decay, d->request.max_distance, "largest distance (--table: its last column unless given)")->capture_default_str();
  add_base_option(decay, d->request.base, "frequency base")->capture_default_str();
  add_out_option(decay, d->out, "output .svg")->required();
  decay->callback([d, kind, max_distance] {
    plot::DecayRequest r = d->request;
    if (r.scheme.empty() && d->table.empty()) throw Error("plot decay needs --scheme NAME or --table FILE");
    if (kind->count() > 0 && r.scheme != "kerple")
      throw Error("--kind '" + r.kind + "' is Kerple's (log or power); it does not apply to " +
                  (r.scheme.empty() ? std::string("--table") : "--scheme " + r.scheme));
    if (!d->table.empty()) {
      // Rows are heads, columns distances: at most kMaxBiasTableHeads heads, distances 0 .. 2^20.
      r.scheme = "table";
      r.table = plot::read_user_table(d->table, {plot::kMaxBiasTableHeads, (1 << 20) + 1});
      r.table_name = d->table.substr(d->table.find_last_of('/') + 1);
      if (max_distance->count() == 0) r.max_distance = r.table->cols - 1;
    }
    write_chart(plot::decay_svg(r), d->out);
  });

  struct AxialArgs {
    plot::AxialHeatmapRequest request;
    std::string out;
  };
  auto x = std::make_shared<AxialArgs>();
  x->request.rope.axis_dim = 32;
  CLI::App* axial = plot_cmd->add_subcommand("axial", "2-D axial RoPE: the score of a query at one cell of an image grid against every key");
  axial->add_option("--rows", x->request.rows, "grid rows, in [1, 512]")->capture_default_str();
  axial->add_option("--cols", x->request.cols, "grid columns, in [1, 512]")->capture_default_str();
  axial->add_option("--query-row", x->request.query_row, "the query's row (default: rows / 2)");
  axial->add_option("--query-col", x->request.query_col, "the query's column (default: cols / 2)");
  add_enum_option(axial, "--freqs-for", x->request.rope.freqs_for, "lang (integer coordinates, 1/theta^(2i/axis_dim)) or pixel (coordinates in [-1, 1])");
  axial->add_option("--axis-dim", x->request.rope.axis_dim, "rotated channels per axis (even)")->capture_default_str();
  add_base_option(axial, x->request.rope.theta, "lang: frequency base theta")->capture_default_str();
  axial->add_option("--max-freq", x->request.rope.max_freq, "pixel: the highest frequency is max_freq / 2 * pi")->capture_default_str();
  add_out_option(axial, x->out, "output .png (plus a labelled .svg) or .svg")->required();
  axial->callback([x] { write_heatmap(plot::axial_heatmap(x->request), x->out); });

#ifdef POSENC_WITH_TORCH
  struct AttentionArgs {
    lab::HeatmapRequestAttention request;
    std::string tokens, digits, text, vocab, out;
  };
  auto a = std::make_shared<AttentionArgs>();
  CLI::App* att = plot_cmd->add_subcommand("attention", "attention map of one head of a saved lab model");
  att->add_option("--model", a->request.model_path, "a model saved by the lab (e.g. out/lab-sort/sort-rope.pt)")->required();
  add_tokens_option(att, a->tokens, "input token ids, comma-separated");
  att->add_option("--digits", a->digits, "sort models: digits to sort, e.g. 31415926 (builds digits, separator, sorted)");
  att->add_option("--text", a->text, "character models of `lab extrapolate`: the text to look at");
  att->add_option("--vocab", a->vocab, "the model's vocab.json (default: beside the model)");
  att->add_option("--layer", a->request.layer, "layer")->capture_default_str();
  add_head_option(att, a->request.head, "head")->capture_default_str();
  add_out_option(att, a->out, "output .png (plus a labelled .svg) or .svg")->required();
  att->callback([a] {
    lab::HeatmapRequestAttention r = a->request;
    if ((!a->tokens.empty()) + (!a->digits.empty()) + (!a->text.empty()) != 1)
      throw Error("give exactly one of --tokens, --digits or --text");
    // The map is tokens x tokens doubles, and the model runs the whole sequence at once.
    const auto too_long = [](const char* what, std::size_t n) {
      return Error(std::string(what) + " gives " + std::to_string(n) + " tokens; the attention map takes at most " +
                   std::to_string(kMaxHeatmapPositions) + " (a query x key picture of that size)");
    };
    if (a->text.size() > kMaxHeatmapPositions) throw too_long("--text", a->text.size());
    if (a->digits.size() > kMaxHeatmapPositions / 2) throw too_long("--digits", 2 * a->digits.size());
    if (!a->text.empty()) {  // characters -> ids through the lab's vocabulary (byte values)
      const std::string& model = r.model_path;
      const std::string vocab_path = !a->vocab.empty() ? a->vocab
                                     : (model.find('/') == std::string::npos ? std::string(".") : model.substr(0, model.rfind('/'))) + "/vocab.json";
      std::ifstream in(vocab_path);
      if (!in) throw Error("cannot read the vocabulary '" + vocab_path + "' (give --vocab)");
      // A vocabulary is at most 256 byte values (~1 KB of JSON). Reading a bounded prefix keeps
      // /dev/zero or a huge file from being read whole, and deep nesting from the parser.
      constexpr std::size_t kMaxVocabBytes = 64 * 1024;
      std::string text(kMaxVocabBytes + 1, '\0');
      in.read(&text[0], static_cast<std::streamsize>(text.size()));
      text.resize(static_cast<std::size_t>(in.gcount()));
      if (text.size() > kMaxVocabBytes)
        throw Error(vocab_path + " is not a vocabulary: more than " + std::to_string(kMaxVocabBytes) +
                    " bytes (a vocabulary is a JSON array of at most 256 byte values)");
      std::vector<int> vocab;
      try {
        vocab = nlohmann::json::parse(text).get<std::vector<int>>();
      } catch (const nlohmann::json::exception& e) {
        throw Error(vocab_path + " is not a vocabulary (a JSON array of byte values): " + e.what());
      }
      for (unsigned char ch : a->text) {
        const auto it = std::find(vocab.begin(), vocab.end(), static_cast<int>(ch));
        if (it == vocab.end()) throw Error(std::string("character '") + static_cast<char>(ch) + "' is not in the model's vocabulary");
        r.tokens.push_back(static_cast<long>(it - vocab.begin()));
      }
    }
    if (!a->tokens.empty())
      for (auto t : parse_int_list(a->tokens, "--tokens", 0, 1 << 20, kMaxHeatmapPositions)) r.tokens.push_back(static_cast<long>(t));
    for (char ch : a->digits) {
      if (ch < '0' || ch > '9') throw Error("--digits takes digits 0-9, got '" + a->digits + "'");
      r.tokens.push_back(ch - '0');
    }
    if (!a->digits.empty()) {  // the sort task's sequence, without its last token
      std::vector<long> sorted(r.tokens);
      std::sort(sorted.begin(), sorted.end());
      r.tokens.push_back(10);
      r.tokens.insert(r.tokens.end(), sorted.begin(), sorted.end() - 1);
    }
    plot::HeatmapSpec spec;
    spec.values = lab::attention_weights(r, &spec.rows);
    spec.cols = spec.rows;
    // Each row and column named by its token where there is room to read them: digits with '|' for
    // the sort separator, characters (char_name), else the ids.
    constexpr std::size_t kMostNamed = 64;
    if (r.tokens.size() <= kMostNamed) {
      for (std::size_t i = 0; i < r.tokens.size(); ++i) {
        const long t = r.tokens[i];
        if (!a->digits.empty()) spec.row_names.push_back(t == 10 ? "|" : std::to_string(t));
        else if (!a->text.empty()) spec.row_names.push_back(char_name(static_cast<unsigned char>(a->text[i])));
        else spec.row_names.push_back(std::to_string(t));
      }
      spec.col_names = spec.row_names;
    }
    spec.value_min = 0;  // attention probabilities: one colour scale for every map
    spec.value_max = 1;
    const std::string name = r.model_path.substr(r.model_path.find_last_of('/') + 1);
    spec.title = "attention, layer " + std::to_string(r.layer) + " head " + std::to_string(r.head) + " of " + name;
    spec.row_label = "query position";
    spec.col_label = "key position";
    write_heatmap(spec, a->out);
  });
#endif  // POSENC_WITH_TORCH
}

void add_explain_command(CLI::App& app) {
  struct Args {
    ConfigArgs source;
    std::optional<std::int64_t> context;
    bool json = false;
  };
  auto a = std::make_shared<Args>();
  CLI::App* cmd = app.add_subcommand("explain", "what a model's positional encoding does, in words and numbers");
  add_config_options(cmd, a->source, true);
  cmd->add_option("--context", a->context, "a context length to reason about");
  add_json_flag(cmd, a->json);
  cmd->callback([a] {
    // The spec's reading: a model without RoPE is explained as what it is (issue 32).
    const ModelSpec spec = load_model_spec(a->source.config, ConfigOptions{a->source.lenient, a->source.hf_compatible});
    for (const auto& w : spec.rope.warnings) std::cerr << "posenc: warning: " << w << "\n";
    plot::ExplainReport r = spec.positions.is_rope() ? plot::explain(spec.rope, a->source.layer_type, a->context)
                                                     : plot::explain_positions(spec.positions);
    // What spec says beside the schedule: the M-RoPE axes, the vision tower's own 2-D RoPE.
    if (!spec.mrope_section.empty()) {
      std::string sections;
      for (int v : spec.mrope_section) sections += (sections.empty() ? "" : ", ") + std::to_string(v);
      r.lines.push_back("M-RoPE (" + std::string(spec.mrope_style ? to_string(*spec.mrope_style) : "") + ", sections " +
                        sections + "): the frequencies read the ids of " + std::to_string(spec.mrope_section.size()) +
                        " position axes of a token (temporal, height, width...); text tokens carry one id on every "
                        "axis, so text alone is the 1-D RoPE above.");
    }
    if (spec.vision_rope) r.lines.push_back("The vision tower: " + vision_rope_summary(*spec.vision_rope) + ".");
    std::cout << (a->json ? plot::explain_json(r) + "\n" : plot::explain_text(r));
  });
}

}  // namespace posenc::cli
