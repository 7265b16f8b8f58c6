// `posenc tour` (issue 32): a learner's walk through positional encodings, in the order a
// tutorial teaches them. Each step says what it shows (English and Chinese; the numbers are the
// same), measures each claim live with the core's own functions (a number and a bound, pass or
// fail, as `posenc check` does; the checks `check` already runs are reused by name), and draws
// its picture with plot/ into the folder the user names.
//
// The steps live in three files by subject: tour_steps_attention.cc (attention without
// positions, the position cross terms), tour_steps_sinusoidal.cc (the sinusoidal table, its
// rotation, the base-10^8 erratum, float32 angles), tour_steps_rope.cc (RoPE's sine term, ALiBi,
// 2-D RoPE).
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <vector>

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

// Where pictures go ("" : none drawn) and the checks of `posenc check`, run once per tour.
struct StepContext {
  std::string out_dir;
  const std::vector<PropertyCheck>* checks = nullptr;
};

struct Step {
  const char* id;
  Text title;
  StepResult (*run)(const StepContext&);
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

// Draws into context.out_dir (nothing when it is empty) and records the file name.
void draw_heatmap(const StepContext& context, StepResult& result, const std::string& name, const plot::HeatmapSpec& spec);
void draw_chart(const StepContext& context, StepResult& result, const std::string& name,
                const std::vector<plot::Series>& series, const plot::ChartOptions& options);

StepResult permutation_step(const StepContext& context);
StepResult cross_terms_step(const StepContext& context);
StepResult sinusoidal_step(const StepContext& context);
StepResult rotation_step(const StepContext& context);
StepResult erratum_base_step(const StepContext& context);
StepResult float32_angles_step(const StepContext& context);
StepResult rope_sine_term_step(const StepContext& context);
StepResult alibi_step(const StepContext& context);
StepResult rope_2d_step(const StepContext& context);

}  // namespace posenc::cli::tour
