#include "commands.h"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>

#include "posenc/alibi.h"
#include "posenc/deberta.h"
#include "posenc/error.h"
#include "posenc/hf_config.h"
#include "posenc/kerple.h"
#include "posenc/mrope.h"
#include "posenc/rope_apply.h"
#include "posenc/sandwich.h"
#include "posenc/schemes.h"
#include "posenc/sinusoidal.h"
#include "posenc/t5_bias.h"
#include "posenc/transformer_xl.h"
#include "options.h"
#include "ranges.h"
#include "table_support.h"

namespace posenc::cli {
namespace {

using nlohmann::json;

json table_sinusoidal(const TableArgs& a) {
  SinusoidalParams p = a.sinusoidal;
  p.dim = a.dim;
  validate(p);
  const auto positions = positions_of(a);
  require_values(positions.size(), static_cast<std::size_t>(p.dim), "sinusoidal table");
  const auto values = sinusoidal_table(p, positions);
  if (!a.json) print_rows("pos", positions, values, static_cast<std::size_t>(p.dim));
  return {{"positions", positions}, {"values", rows_json(values, static_cast<std::size_t>(p.dim))}};
}

json table_rope(const TableArgs& a) {
  RopeParams params;
  if (!a.source.config.empty()) {
    params = a.source.load().select(a.source.layer_type).params;
  } else {
    params.head_dim = a.dim;
    params.theta = a.sinusoidal.base;
  }
  if (params.head_dim % 2 != 0) throw Error("--dim must be even for RoPE (channel pairs), got " + std::to_string(params.head_dim));
  const RopeSchedule s = compute_schedule(params, std::nullopt, a.source.numerics());
  RopeApplyParams p = rope_apply_params(s);
  p.angles = a.source.numerics();
  const auto positions = positions_of(a);
  const std::size_t half = s.inv_freq.size(), width = 2 * half;
  require_values(positions.size(), 2 * width, "rope cos/sin table (cos and sin)");  // both tables count
  check_angle_range(s, *std::max_element(positions.begin(), positions.end()));
  std::vector<float> cos(positions.size() * width), sin(positions.size() * width);
  for (std::size_t r = 0; r < positions.size(); ++r)
    for (std::size_t j = 0; j < width; ++j)  // HF's concat(freqs, freqs) layout
      rope_cos_sin(s.inv_freq[j % half], positions[r], p, &cos[r * width + j], &sin[r * width + j]);
  if (!a.json) {
    print_rows("cos", positions, cos, width);
    print_rows("sin", positions, sin, width);
  }
  return {{"positions", positions}, {"rotary_dim", width}, {"cos", rows_json(cos, width)}, {"sin", rows_json(sin, width)}};
}

// A position id as text: integers whole, Qwen3-Omni's float32 ids with the 9 digits that give them back.
std::string id_text(double v) {
  char buf[32];
  if (v == std::floor(v) && std::fabs(v) < 9007199254740992.0) std::snprintf(buf, sizeof buf, "%lld", static_cast<long long>(v));
  else std::snprintf(buf, sizeof buf, "%.9g", v);
  return buf;
}

json table_mrope(const TableArgs& a) {
  json out;
  if (a.mrope_section) {
    std::vector<int> sections;
    for (auto v : parse_int_list(*a.mrope_section, "--mrope-section", 0, 65536, 3)) sections.push_back(static_cast<int>(v));
    out["axis_of_freq"] = mrope_axis_map(sections, a.interleaved);
  }
  if (a.grid) {
    const auto g = parse_int_list(*a.grid, "--grid", 1, 1 << 20, 3);
    if (g.size() != 3) throw Error("--grid takes T,H,W, got '" + *a.grid + "'");
    const std::int64_t m = std::max(1, a.merge);
    if (g[0] * (g[1] / m) * (g[2] / m) + a.text_before + a.text_after > static_cast<std::int64_t>(kMaxRows) ||
        a.text_before < 0 || a.text_after < 0)
      throw Error("--grid and --text-before/--text-after: at most " + std::to_string(kMaxRows) + " tokens, none negative");
    TokenRun grid{TokenRun::kImage, 0, static_cast<int>(g[0]), static_cast<int>(g[1]), static_cast<int>(g[2]), a.time_interval};
    grid.seconds_per_grid = a.seconds_per_grid;
    std::vector<TokenRun> runs = {{TokenRun::kText, a.text_before}, grid, {TokenRun::kText, a.text_after}};
    json ids = json::array();
    if (a.qwen3_omni) {  // Qwen3-Omni-MoE: the grid as a video, its float32 T ids kept (12.5 per frame at 0.5 s x 25)
      if (a.v4_rule) throw Error("--qwen3-omni has its own rule (each piece at the last piece's max + 1); drop --v4");
      runs[1].kind = TokenRun::kVideo;
      const MropeFloatIndex idx = qwen3_omni_position_ids(runs, a.merge);
      const auto n = static_cast<std::ptrdiff_t>(idx.seq_len);
      for (int axis = 0; axis < 3; ++axis)
        ids.push_back(std::vector<double>(idx.ids.begin() + axis * n, idx.ids.begin() + (axis + 1) * n));
      out["rope_delta"] = idx.rope_delta;
    } else {
      const MropeIndex idx = mrope_position_ids(runs, a.merge, a.v4_rule ? MropeIndexRule::kV4_49 : MropeIndexRule::kV5);
      const auto n = static_cast<std::ptrdiff_t>(idx.seq_len);
      for (int axis = 0; axis < 3; ++axis)
        ids.push_back(std::vector<std::int64_t>(idx.ids.begin() + axis * n, idx.ids.begin() + (axis + 1) * n));
      out["rope_delta"] = idx.rope_delta;
    }
    out["position_ids"] = ids;
  }
  if (!a.mrope_section && !a.grid) throw Error("--scheme mrope needs --mrope-section T,H,W and/or --grid T,H,W");
  // Printed only once both parts are computed: an error in --grid leaves no half output.
  if (!a.json && out.contains("axis_of_freq")) {
    std::printf("frequency -> axis (0 T, 1 H, 2 W):");
    for (const auto& x : out["axis_of_freq"]) std::printf(" %d", x.get<int>());
    std::printf("\n");
  }
  if (!a.json && out.contains("position_ids")) {
    const char* names[3] = {"T", "H", "W"};
    for (int axis = 0; axis < 3; ++axis) {
      std::printf("%s:", names[axis]);
      for (const auto& v : out["position_ids"][static_cast<std::size_t>(axis)])
        std::printf(" %s", id_text(v.get<double>()).c_str());
      std::printf("\n");
    }
    std::printf("rope_delta: %s\n", id_text(out["rope_delta"].get<double>()).c_str());
  }
  return out;
}

json table_alibi(const TableArgs& a) {
  if (!a.heads) throw Error("--scheme alibi needs --heads H");
  const auto slopes = alibi_slopes(*a.heads);
  // Every input is checked before the first line is printed: no half output before an error.
  std::vector<std::int64_t> positions;
  if (a.given("--positions")) {
    positions = positions_of(a);
    const std::size_t n = positions.size();
    require_values(n * n, slopes.size(), "alibi bias (heads x positions x positions)");
  }
  json out = {{"slopes", slopes}};
  if (!a.json)
    for (std::size_t h = 0; h < slopes.size(); ++h) std::printf("head %-4zu slope %.9g\n", h, slopes[h]);
  if (!positions.empty()) {
    const std::size_t n = positions.size();
    json bias = json::array();
    for (double slope : slopes) {
      std::vector<float> rows(n * n, 0.0f);
      for (std::size_t i = 0; i < n; ++i)
        for (std::size_t j = 0; j < n; ++j)
          alibi_add_bias_row(slope, positions[i], positions[j], 1, a.symmetric ? AlibiMode::kSymmetric : AlibiMode::kCausal,
                             &rows[i * n + j]);
      bias.push_back(rows_json(rows, n));
      if (!a.json) print_rows("query", positions, rows, n);
    }
    out["positions"] = positions;
    out["bias"] = bias;
  }
  return out;
}

json table_t5(const TableArgs& a) {
  if (a.bidirectional == a.causal) throw Error("--scheme t5 needs exactly one of --bidirectional or --causal");
  const T5BucketParams p{a.t5.num_buckets, a.t5.max_distance, a.bidirectional};
  validate(p);
  const auto rel = parse_int_list(a.relative, "--relative", -kMaxPosition, kMaxPosition, kMaxRows);
  std::vector<int> buckets;
  for (auto r : rel) buckets.push_back(t5_bucket(r, p));
  if (!a.json)
    for (std::size_t i = 0; i < rel.size(); ++i) std::printf("key-query %-8lld bucket %d\n", static_cast<long long>(rel[i]), buckets[i]);
  return {{"relative", rel}, {"buckets", buckets}};
}

json table_xl(const TableArgs& a) {
  const int dim = a.dim, klen = a.klen;
  if (klen < 1 || static_cast<std::size_t>(klen) > kMaxRows) throw Error("--klen must be in [1, " + std::to_string(kMaxRows) + "], got " + std::to_string(klen));
  if (dim < 1) throw Error("--dim must be >= 1, got " + std::to_string(dim));
  require_values(static_cast<std::size_t>(klen), static_cast<std::size_t>(dim), "xl relative sinusoid");
  const auto r = xl_relative_sinusoid(dim, klen, a.clamp_len);
  std::vector<std::int64_t> distances;
  for (int m = 0; m < klen; ++m) distances.push_back(klen - 1 - m);
  if (!a.json) print_rows("dist", distances, r, static_cast<std::size_t>(dim));
  return {{"distances", distances}, {"values", rows_json(r, static_cast<std::size_t>(dim))}};
}

json table_deberta(const TableArgs& a) {
  const DebertaRelativeParams& p = a.deberta;
  deberta_relative_positions(1, 1, p);  // validates
  const auto rel = parse_int_list(a.relative, "--relative", -kMaxPosition, kMaxPosition, kMaxRows);
  std::vector<std::int64_t> buckets;
  for (auto r : rel) buckets.push_back(p.position_buckets > 0 ? deberta_log_bucket(r, p.position_buckets, p.max_relative_positions) : r);
  if (!a.json)
    for (std::size_t i = 0; i < rel.size(); ++i)
      std::printf("query-key %-8lld bucket %lld\n", static_cast<long long>(rel[i]), static_cast<long long>(buckets[i]));
  return {{"relative", rel}, {"buckets", buckets}};
}

// A distance bias's table (distance_bias.h) at the distances of --relative (|query - key|): Kerple
// at posenc's initial parameters (kerple_init), Sandwich (parameter-free).
json table_distance(const TableArgs& a, Scheme scheme) {
  if (!a.heads) throw Error("--scheme " + a.scheme + " needs --heads H");
  const auto rel = parse_int_list(a.relative, "--relative", -kMaxPosition, kMaxPosition, kMaxRows);
  std::int64_t longest = 0;
  for (auto r : rel) longest = std::max<std::int64_t>(longest, std::llabs(r));
  require_values(static_cast<std::size_t>(longest) + 1, static_cast<std::size_t>(*a.heads), "distance table (heads x distances)");
  std::vector<float> table;
  json out = json::object();
  if (scheme == Scheme::kKerple) {
    const KerpleParams p = kerple_init(*a.heads, KerpleKind::kLog);
    table = kerple_table(p, longest + 1);
    out = {{"kind", "log"}, {"r1", p.r1}, {"r2", p.r2}};
  } else {
    const SandwichParams p{*a.heads, a.dim};
    table = sandwich_table(p, longest + 1);
    out = {{"dim", a.dim}};
  }
  json bias = json::array();
  for (int h = 0; h < *a.heads; ++h) {
    std::vector<float> row;
    for (auto r : rel) row.push_back(table[static_cast<std::size_t>(h) * (longest + 1) + std::llabs(r)]);
    if (!a.json) {
      std::printf("head %-4d", h);
      for (std::size_t i = 0; i < rel.size(); ++i) std::printf(" %lld:%.6g", static_cast<long long>(rel[i]), row[i]);
      std::printf("\n");
    }
    bias.push_back(row);
  }
  out["relative"] = rel;
  out["bias"] = bias;
  return out;
}

void run_table(const TableArgs& a) {
  const Scheme scheme = from_name<Scheme>(a.scheme);
  for (const auto& [flag, entry] : a.applies)
    if (entry.first->count() > 0 && !entry.second.count(a.scheme))
      throw Error(flag + " does not apply to --scheme " + a.scheme);
  json out;
  switch (scheme) {
    case Scheme::kNope:
      out = json::object();
      if (!a.json) std::printf("nope: no positional encoding; order reaches the model only through the causal mask\n");
      break;
    case Scheme::kSinusoidal: out = table_sinusoidal(a); break;
    case Scheme::kLearned: out = table_learned(a); break;
    case Scheme::kRope: out = table_rope(a); break;
    case Scheme::kMrope: out = table_mrope(a); break;
    case Scheme::kAlibi: out = table_alibi(a); break;
    case Scheme::kT5: out = table_t5(a); break;
    case Scheme::kXl: out = table_xl(a); break;
    case Scheme::kDeberta: out = table_deberta(a); break;
    case Scheme::kKerple:
    case Scheme::kSandwich: out = table_distance(a, scheme); break;
    case Scheme::kFox:
      throw Error("--scheme fox has no table: its bias comes from the tokens (a forget gate per token and head; "
                  "with a constant gate gamma it is ALiBi with slope -log gamma: posenc table alibi)");
    case Scheme::kDpb:
      throw Error("--scheme dpb has no fixed table: its bias is an MLP whose weights are learned "
                  "(posenc.nn.DynamicPositionBias in Python, the lab's dpb scheme)");
    case Scheme::kXpos:
      throw Error("--scheme xpos has no table here: it is RoPE's rotation times zeta_i^(+-(m - c)/B), a scale on q and "
                  "k (posenc.nn.XPos in Python, posenc bench rope --xpos, the lab's xpos scheme)");
    case Scheme::kRopeLearned:
      throw Error("--scheme rope-learned has no fixed table: its frequencies are trained (the lab's rope-learned scheme; "
                  "posenc table rope shows its starting point)");
    case Scheme::kPope:
      throw Error("--scheme pope has no table here: it maps q and k to softplus magnitudes at phases p w_j, keys with a "
                  "learned phase (posenc.nn.PolarEmbedding in Python, the lab's pope scheme)");
    case Scheme::kCope:
      throw Error("--scheme cope has no table: its positions count the keys whose gates sigmoid(q.k) open, so they "
                  "come from the content (posenc.nn.CoPE in Python, the lab's cope scheme)");
    case Scheme::kFire:
      throw Error("--scheme fire has no fixed table: its bias is an MLP whose weights are learned, over the distance "
                  "normalised by the query position (posenc.nn.FIRE in Python, the lab's fire scheme)");
    case Scheme::kShaw:
      throw Error("--scheme shaw has no fixed table: its relative key and value tables are learned, per layer "
                  "(posenc.nn.ShawRelative in Python, the lab's shaw scheme)");
  }
  if (a.json) {
    out["scheme"] = a.scheme;
    std::cout << out.dump() << "\n";
  }
}

}  // namespace

void add_table_command(CLI::App& app) {
  auto a = std::make_shared<TableArgs>();
  CLI::App* cmd = app.add_subcommand("table", "the numbers of a positional scheme (ranges A:B are half-open)");
  add_scheme_option(cmd, a->scheme, "scheme")->type_name(enum_names_joined<Scheme>())->required();
  add_json_flag(cmd, a->json);
  // Options that apply to some schemes only: giving one to another scheme is an error.
  auto opt = [&](CLI::Option* o, std::set<std::string> schemes) { a->applies[o->get_name()] = {o, std::move(schemes)}; };
  opt(add_dim_option(cmd, a->dim, "model or head dimension (sandwich: the sinusoids' d')"),
      {"sinusoidal", "learned", "rope", "xl", "sandwich"});
  opt(add_positions_option(cmd, a->positions, "positions: 0,1,2,10 or A:B")->capture_default_str(),
      {"sinusoidal", "learned", "rope", "alibi"});
  opt(add_enum_option(cmd, "--layout", a->sinusoidal.layout, "interleaved (Vaswani) or half_split (Marian, fairseq)"), {"sinusoidal"});
  opt(add_enum_option(cmd, "--freq", a->sinusoidal.freqs, "vaswani (base^-2k/d) or fairseq (exp(-k ln base/(d/2-1)))"), {"sinusoidal"});
  opt(add_base_option(cmd, a->sinusoidal.base, "frequency base")->capture_default_str(), {"sinusoidal", "rope"});
  const ConfigGroup config = add_config_options(cmd, a->source, false, "layer type whose schedule to use (default: full attention)");
  for (CLI::Option* o : {config.config, config.layer_type, config.lenient, config.hf_compatible}) opt(o, {"rope"});
  opt(cmd->add_option("--num-positions", a->num_positions, "rows of the learned table")->capture_default_str(), {"learned"});
  opt(cmd->add_option("--offset", a->offset, "extra leading rows (BART/OPT: 2)")->capture_default_str(), {"learned"});
  opt(cmd->add_option("--std", a->std, "init standard deviation")->capture_default_str(), {"learned"});
  opt(add_seed_option(cmd, a->seed, "init seed"), {"learned"});
  opt(cmd->add_option("--table-grid", a->table_grid, "a 2-D table of H,W patches (a vision tower's), resized with --resize"),
      {"learned"});
  opt(cmd->add_option("--resize", a->resize, "the image's grid H,W the 2-D table is resized to"), {"learned"});
  opt(add_enum_option(cmd, "--resize-mode", a->resize_mode,
                      "bicubic (ViT, CLIP, DINOv2, MoonViT) or bilinear_antialias (SigLIP2), align_corners=False"),
      {"learned"});
  opt(add_heads_option(cmd, a->heads, "number of heads"), {"alibi", "kerple", "sandwich"});
  opt(cmd->add_flag("--symmetric", a->symmetric, "encoder bias -slope*|i-j| (with --positions)"), {"alibi"});
  opt(cmd->add_option("--num-buckets", a->t5.num_buckets, "T5 buckets")->capture_default_str(), {"t5"});
  opt(add_max_distance_option(cmd, a->t5.max_distance, "T5 max distance")->capture_default_str(), {"t5"});
  opt(cmd->add_flag("--bidirectional", a->bidirectional, "encoder buckets"), {"t5"});
  opt(add_causal_flag(cmd, a->causal, "decoder buckets"), {"t5"});
  opt(cmd->add_option("--relative", a->relative,
                      "relative positions A:B (T5: key - query; DeBERTa, kerple, sandwich: query - key)")->capture_default_str(),
      {"t5", "deberta", "kerple", "sandwich"});
  opt(cmd->add_option("--klen", a->klen, "Transformer-XL key length (memory + segment)")->capture_default_str(), {"xl"});
  opt(cmd->add_option("--clamp-len", a->clamp_len, "Transformer-XL clamp_len (0: none)")->capture_default_str(), {"xl"});
  opt(cmd->add_option("--position-buckets", a->deberta.position_buckets, "DeBERTa position_buckets (0: none)")->capture_default_str(),
      {"deberta"});
  opt(cmd->add_option("--max-relative-positions", a->deberta.max_relative_positions, "DeBERTa max_relative_positions")
          ->capture_default_str(),
      {"deberta"});
  opt(add_mrope_section_option(cmd, a->mrope_section, "M-RoPE sections T,H,W"), {"mrope"});
  opt(cmd->add_flag("--interleaved", a->interleaved, "Qwen3-VL interleaved axis map"), {"mrope"});
  opt(cmd->add_option("--grid", a->grid, "image grid T,H,W in patches: position ids of text, image, text"), {"mrope"});
  opt(cmd->add_option("--merge", a->merge, "spatial_merge_size")->capture_default_str(), {"mrope"});
  opt(cmd->add_option("--text-before", a->text_before, "text tokens before the image")->capture_default_str(), {"mrope"});
  opt(cmd->add_option("--text-after", a->text_after, "text tokens after the image")->capture_default_str(), {"mrope"});
  opt(cmd->add_flag("--v4", a->v4_rule, "HF <= 4.49 rule for the text after a vision run (also Qwen2.5-Omni's)"), {"mrope"});
  opt(cmd->add_flag("--qwen3-omni", a->qwen3_omni,
                    "Qwen3-Omni-MoE's get_rope_index: the grid as a video, float T ids (float32, never truncated)"),
      {"mrope"});
  opt(cmd->add_option("--time-interval", a->time_interval,
                      "T ids per second of the grid (Qwen2.5-VL tokens_per_second, Qwen2.5-Omni position_id_per_seconds 25)")
          ->check(CLI::Range(0.0, 1e9))
          ->capture_default_str(),
      {"mrope"});
  opt(cmd->add_option("--seconds-per-grid", a->seconds_per_grid,
                      "seconds per temporal patch: frame f's T id is trunc(float32(f x this) x --time-interval)")
          ->check(CLI::Range(0.0, 1e9))
          ->capture_default_str(),
      {"mrope"});
  cmd->callback([a] { run_table(*a); });
}

}  // namespace posenc::cli
