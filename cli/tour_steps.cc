#include "tour_steps.h"

#include <cmath>
#include <cstdio>

#include "posenc/error.h"

namespace posenc::cli::tour {

const std::vector<Step>& steps() {
  static const std::vector<Step> all = {
      {"permutation", {"Attention without positions sees a set", "没有位置的注意力看到的是集合"}, permutation_step},
      {"sinusoidal", {"The sinusoidal table and its dot products", "正弦位置表及其点积"}, sinusoidal_step},
      {"rotation", {"PE(p + k) is a rotation of PE(p)", "PE(p + k) 是 PE(p) 的旋转"}, rotation_step},
      {"erratum-base", {"Erratum: i stepping by two means base 10^8", "勘误：i 以 2 为步长意味着底数 10^8"}, erratum_base_step},
      {"float32-angles", {"div_term and float32 angles", "div_term 与 float32 角度"}, float32_angles_step},
      {"cross-terms", {"Position cross terms, and W_Q W_K", "位置交叉项与 W_Q W_K"}, cross_terms_step},
      {"rope-sine-term", {"RoPE's score and the sine term tutorials drop", "RoPE 的分数与教程漏掉的正弦项"}, rope_sine_term_step},
      {"alibi", {"ALiBi slopes", "ALiBi 斜率"}, alibi_step},
      {"rope-2d", {"RoPE over two axes: image patches", "二维 RoPE：图像块"}, rope_2d_step},
  };
  return all;
}

std::string num(double v, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*g", digits, v);
  return buf;
}

std::string under(double v) {
  if (v == 0) return "0";
  return "< " + num(std::pow(10.0, std::ceil(std::log10(v))), 1);
}

Claim from_check(const StepContext& context, const std::string& name, Text claim) {
  if (context.checks)
    for (const PropertyCheck& c : *context.checks)
      if (c.name == name) return {name, std::move(claim), c.measured, c.tolerance, true};
  throw Error("posenc check has no claim named '" + name + "'");
}

std::vector<float> uniform_values(std::mt19937_64& rng, std::size_t n) {
  std::vector<float> v(n);
  for (float& x : v) x = static_cast<float>(static_cast<double>(rng() >> 11) * 0x1.0p-52 - 1.0);  // [-1, 1)
  return v;
}

plot::ChartOptions chart_options(std::string title, std::string x_label, std::string y_label, bool log_x, bool log_y) {
  plot::ChartOptions o;
  o.title = std::move(title);
  o.x_label = std::move(x_label);
  o.y_label = std::move(y_label);
  o.log_x = log_x;
  o.log_y = log_y;
  return o;
}

void draw_heatmap(const StepContext& context, StepResult& result, const std::string& name, const plot::HeatmapSpec& spec) {
  result.pictures.push_back(name);
  if (!context.out_dir.empty()) plot::write_heatmap_files(spec, context.out_dir + "/" + name);
}

void draw_chart(const StepContext& context, StepResult& result, const std::string& name,
                const std::vector<plot::Series>& series, const plot::ChartOptions& options) {
  result.pictures.push_back(name);
  if (!context.out_dir.empty()) plot::write_text(context.out_dir + "/" + name, plot::svg_line_chart(series, options));
}

}  // namespace posenc::cli::tour
