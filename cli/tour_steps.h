// `posenc tour` (issue 32): a learner's walk through positional encodings, in the order a
// tutorial teaches them. Each step says what it shows (English and Chinese; the numbers are the
// same), measures each claim live with the core's own functions (a number and a bound, pass or
// fail, as `posenc check` does; the checks `check` already runs are reused by name), and draws
// its picture with plot/ into the folder the user names.
//
// The steps live in files by subject: tour_steps_attention.cc (attention without positions, the
// position cross terms), tour_steps_absolute.cc (the raw integer position, sqrt(d_model)
// scaling, padding and positions from the mask), tour_steps_sinusoidal.cc (the sinusoidal table,
// its rotation, the base-10^8 erratum, the stripes of a wrong table, float32 angles),
// tour_steps_tables.cc (a learned table's length and its resizing, DeBERTa's buckets),
// tour_steps_rope.cc (RoPE's sine term, ALiBi, 2-D RoPE), tour_steps_lab.cc (the small training
// runs, through posenc lab). tour_coverage.cc maps issue 32's audit to the steps.
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "posenc/learned.h"
#include "posenc/properties.h"
#include "posenc_plot/heatmap.h"
#include "posenc_plot/svg_chart.h"

namespace posenc::cli::tour {

enum class Lang { kEn, kZh };

// One sentence in both languages (numbers formatted once, shared by both).
struct Text {
  std::string en, zh;
  const std::string& in(Lang lang) const { return lang == Lang::kZh ? zh : en; }
};

// A measured claim: pass when measured <= bound (at_most) or measured >= bound (!at_most).
struct Claim {
  std::string name;  // "permutation.no_positions"
  Text claim;
  double measured = 0;
  double bound = 0;
  bool at_most = true;
  bool pass() const { return at_most ? measured <= bound : measured >= bound; }
};

struct StepResult {
  std::vector<Text> lines;            // what the step shows, in order
  std::vector<Claim> claims;
  std::vector<std::string> pictures;  // file names written under the output folder
};

// The steps that train with posenc lab (tour_steps_lab.cc): at what size, on what text, and
// where the models are kept (a second tour reuses them; the lab checks they are the same models).
struct LabSettings {
  bool real = false;    // the lab's own size (minutes) instead of the tiny one (seconds)
  std::string corpus;   // "": the lab's default (data/kjv.txt, `make corpus`)
  std::string dir = "out/tour";
};

// Where pictures go ("" : none drawn), the checks of `posenc check`, run once per tour, and the
// lab steps' settings.
struct StepContext {
  std::string out_dir;
  const std::vector<PropertyCheck>* checks = nullptr;
  LabSettings lab;
};

struct Step {
  const char* id;
  Text title;
  StepResult (*run)(const StepContext&);  // null: a lab step in a posenc built without libtorch
  bool lab = false;                       // trains with posenc lab: its numbers are this machine's run
};

// The steps, in teaching order.
const std::vector<Step>& steps();

// ---- shared by the step files ----------------------------------------------------------------

// v with `digits` significant digits ("%.*g"): the text and the markdown print the same string.
std::string num(double v, int digits = 4);

// A small error as the power of ten above it ("< 1e-06"): the same words on every SIMD target
// and standard library, where the digits themselves may differ in the last places.
std::string under(double v);

// The `posenc check` claim of that name as a tour claim (its measured value and tolerance).
Claim from_check(const StepContext& context, const std::string& name, Text claim);

// Uniform values in [-1, 1) from mt19937_64's raw bits: the same numbers on every standard
// library (std::normal_distribution is implementation-defined), so the tour's text is stable.
std::vector<float> uniform_values(std::mt19937_64& rng, std::size_t n);

plot::ChartOptions chart_options(std::string title, std::string x_label, std::string y_label, bool log_x = false,
                                 bool log_y = false);

// A learned table's heatmap: positions down, dimensions across (tour_steps_tables.cc).
plot::HeatmapSpec table_heatmap(const LearnedTable& t, std::string title);

// Draws into context.out_dir (nothing when it is empty) and records the file name.
void draw_heatmap(const StepContext& context, StepResult& result, const std::string& name, const plot::HeatmapSpec& spec);
void draw_chart(const StepContext& context, StepResult& result, const std::string& name,
                const std::vector<plot::Series>& series, const plot::ChartOptions& options);

StepResult permutation_step(const StepContext& context);
StepResult cross_terms_step(const StepContext& context);
StepResult sinusoidal_step(const StepContext& context);
StepResult rotation_step(const StepContext& context);
StepResult erratum_base_step(const StepContext& context);
StepResult heatmap_debug_step(const StepContext& context);
StepResult float32_angles_step(const StepContext& context);
StepResult raw_integer_step(const StepContext& context);
StepResult embedding_scale_step(const StepContext& context);
StepResult padding_step(const StepContext& context);
StepResult learned_length_step(const StepContext& context);
StepResult deberta_buckets_step(const StepContext& context);
StepResult rope_sine_term_step(const StepContext& context);
StepResult alibi_step(const StepContext& context);
StepResult rope_2d_step(const StepContext& context);
// The lab steps (tour_steps_lab.cc, built with libtorch).
StepResult raw_integer_run_step(const StepContext& context);
StepResult sinusoidal_bases_step(const StepContext& context);
StepResult learned_vs_sinusoidal_step(const StepContext& context);
StepResult fusion_step(const StepContext& context);
StepResult sort_heads_step(const StepContext& context);

}  // namespace posenc::cli::tour
