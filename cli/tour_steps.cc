#include "tour_steps.h"

#include <cmath>
#include <cstdio>

#include "posenc/error.h"

namespace posenc::cli::tour {

// A lab step's function, or none where posenc is built without libtorch (the tour says so).
#ifdef POSENC_WITH_TORCH
#define POSENC_LAB_STEP(f) f, true
#else
#define POSENC_LAB_STEP(f) nullptr, true
#endif

const std::vector<Step>& steps() {
  static const std::vector<Step> all = {
      {"permutation", {"Attention without positions sees a set", "没有位置的注意力看到的是集合"}, permutation_step},
      {"raw-integer", {"Pitfall: the raw index as the position", "陷阱：把原始下标当作位置"}, raw_integer_step},
      {"raw-integer-run", {"The raw index, trained: loss curves side by side", "原始下标的训练：并排的损失曲线"},
       POSENC_LAB_STEP(raw_integer_run_step)},
      {"sinusoidal", {"The sinusoidal table and its dot products", "正弦位置表及其点积"}, sinusoidal_step},
      {"embedding-scale", {"Why embeddings are multiplied by sqrt(d_model)", "为什么嵌入要乘以 sqrt(d_model)"}, embedding_scale_step},
      {"rotation", {"PE(p + k) is a rotation of PE(p)", "PE(p + k) 是 PE(p) 的旋转"}, rotation_step},
      {"erratum-base", {"Erratum: i stepping by two means base 10^8", "勘误：i 以 2 为步长意味着底数 10^8"}, erratum_base_step},
      {"heatmap-debug", {"Debugging a heatmap: stripes mean an unused index", "调试热图：条纹意味着某个下标没被用上"}, heatmap_debug_step},
      {"sinusoidal-bases", {"The sinusoidal base 100, 10^4, 10^6, trained and scored long", "正弦底数 100、10^4、10^6：训练后在长序列上评估"},
       POSENC_LAB_STEP(sinusoidal_bases_step)},
      {"fusion", {"Adding, concatenating or multiplying the positions in", "位置编码的相加、拼接与相乘"}, POSENC_LAB_STEP(fusion_step)},
      {"float32-angles", {"div_term and float32 angles", "div_term 与 float32 角度"}, float32_angles_step},
      {"cross-terms", {"Position cross terms, and W_Q W_K", "位置交叉项与 W_Q W_K"}, cross_terms_step},
      {"padding", {"Padding: positions from the attention mask", "填充：由注意力掩码计算位置"}, padding_step},
      {"learned-length", {"A learned table past its length, and resizing it", "超出长度的可学习位置表及其缩放"}, learned_length_step},
      {"learned-vs-sinusoidal", {"Learned against sinusoidal, short and long, trained", "可学习与正弦位置的对比：短序列与长序列（训练后）"},
       POSENC_LAB_STEP(learned_vs_sinusoidal_step)},
      {"rope-sine-term", {"RoPE's score and the sine term tutorials drop", "RoPE 的分数与教程漏掉的正弦项"}, rope_sine_term_step},
      {"alibi", {"ALiBi slopes", "ALiBi 斜率"}, alibi_step},
      {"deberta-buckets", {"DeBERTa's log-bucketed relative positions", "DeBERTa 的对数分桶相对位置"}, deberta_buckets_step},
      {"rope-2d", {"RoPE over two axes: image patches", "二维 RoPE：图像块"}, rope_2d_step},
      {"sort-heads", {"The sorting task's previous-token head, looked for by measurement", "排序任务中的前一词元注意力头：用测量来寻找"},
       POSENC_LAB_STEP(sort_heads_step)},
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
