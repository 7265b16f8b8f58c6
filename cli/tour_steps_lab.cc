// The tour's steps that train small models (issue 32's experiments), each through posenc lab's
// own runs: run_extrapolate (the raw-index pitfall, the sinusoidal base sweep, learned against
// sinusoidal, the fusion modes), run_sort and sort_head_offsets (the previous-token head), the
// training curves kept in the checkpoints and a learned model's trained table (saved_models.h).
// Nothing here trains or scores a model itself. Built with libtorch only (tour_steps.cc lists the
// steps either way and says when they cannot run).
#include <algorithm>
#include <cmath>
#include <limits>
#include <tuple>

#include "posenc/learned.h"
#include "posenc_lab/corpus.h"
#include "posenc_lab/extrapolate.h"
#include "posenc_lab/saved_models.h"
#include "posenc_lab/sort_task.h"
#include "tour_steps.h"

namespace posenc::cli::tour {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// One extrapolate run per size, shared by the steps (the same training settings and eval lengths:
// a model two steps use, the sinusoidal one, trains once, and a second tour reuses every model).
// Tiny (make test, seconds): 1 layer 32 wide, 80 steps of 8 rows at length 32. Real: the lab's own
// defaults (3 layers 128 wide, 600 steps of 32 rows at length 64), as the README's runs.
lab::ExtrapolateConfig lab_config(const LabSettings& s) {
  lab::ExtrapolateConfig c;
  if (!s.corpus.empty()) c.corpus = s.corpus;
  c.schemes.clear();
  c.extensions = {lab::RopeExtension::kNone};
  c.incremental_tokens = 0;
  c.training.out_dir = s.dir + (s.real ? "/real" : "/tiny");
  if (s.real) {
    c.eval_lens = {64, 128, 256, 512, 1024};
  } else {
    c.training.train_len = 32;
    c.training.steps = 80;
    c.training.batch = 8;
    c.training.warmup = 10;
    c.shape = {1, 32, 2};
    c.eval_lens = {32, 64, 128, 512, 1024};
    c.eval_chars = 1024;
  }
  return c;
}

double bpc_of(const lab::ExtrapolateResult& r, const std::string& model, int len) {
  for (const auto& row : r.rows)
    if (row.model == model && row.eval_len == len) return row.available ? row.bpc : kNaN;
  return kNaN;
}

// "2.18 (64), 4.14 (256), n/a (1024)": a model's row of the table.
std::string bpc_row(const lab::ExtrapolateResult& r, const lab::ExtrapolateConfig& c, const std::string& model) {
  std::string s;
  for (int len : c.eval_lens) {
    const double v = bpc_of(r, model, len);
    s += (s.empty() ? "" : ", ") + (std::isnan(v) ? std::string("n/a") : num(v, 3)) + " (" + std::to_string(len) + ")";
  }
  return s;
}

Text size_line(const lab::ExtrapolateConfig& c, const LabSettings& s) {
  const std::string what = std::to_string(c.shape.layers) + " x " + std::to_string(c.shape.d_model) + ", " +
                           std::to_string(c.training.steps) + " steps of " + std::to_string(c.training.batch) + " x " +
                           std::to_string(c.training.train_len) + " characters of " + c.corpus;
  return {"Trained by posenc lab (" + std::string(s.real ? "--real" : "tiny; --real for the lab's own size") + "): " + what +
              "; bits per character at each eval length in brackets.",
          "由 posenc lab 训练（" + std::string(s.real ? "--real" : "微型；--real 为 lab 的正式规模") + "）：" + what +
              "；括号中为评估长度，数值为每字符比特数。"};
}

lab::ExtrapolateResult run(lab::ExtrapolateConfig c, std::vector<std::string> schemes) {
  c.schemes = std::move(schemes);
  return lab::run_extrapolate(c);
}

// The mean of the last tenth of a loss curve (the end of training, steadied).
double final_loss(const std::vector<double>& losses) {
  const std::size_t n = std::max<std::size_t>(1, losses.size() / 10);
  double s = 0;
  for (std::size_t i = losses.size() - n; i < losses.size(); ++i) s += losses[i];
  return s / static_cast<double>(n);
}

plot::Series loss_series(const std::string& name, const std::vector<double>& losses) {
  plot::Series s{name, {}, {}};
  constexpr std::size_t kWindow = 10;  // a running mean: single steps are noisy
  for (std::size_t i = kWindow; i <= losses.size(); ++i) {
    double m = 0;
    for (std::size_t j = i - kWindow; j < i; ++j) m += losses[j];
    s.x.push_back(static_cast<double>(i));
    s.y.push_back(m / kWindow);
  }
  return s;
}

}  // namespace

// x = e + p with p the raw index in every channel (ModelConfig::raw_index). In posenc's pre-LN
// transformer every LayerNorm subtracts the mean over channels, which removes p * (1, ..., 1)
// exactly: the model cannot see it, and trains as NoPE does. Concatenated instead (its own
// channels), no norm removes it: it swamps the token's channels in each LayerNorm's variance.
StepResult raw_integer_run_step(const StepContext& context) {
  StepResult r;
  lab::ExtrapolateConfig c = lab_config(context.lab);
  c.raw_index = {"add", "concat"};
  const auto result = run(c, {"nope", "sinusoidal"});
  const std::string dir = c.training.out_dir + "/";
  std::vector<plot::Series> curves;
  double last[4];
  const char* models[] = {"nope", "sinusoidal", "raw-index", "raw-index-concat"};
  std::vector<double> first(4);
  for (int i = 0; i < 4; ++i) {
    const auto losses = lab::training_losses(dir + models[i] + ".ckpt");
    last[i] = final_loss(losses);
    first[i] = losses.front();
    curves.push_back(loss_series(models[i], losses));
  }
  r.lines.push_back(size_line(c, context.lab));
  r.lines.push_back({"Final training loss (nats per character, mean of the last tenth of the steps): NoPE " + num(last[0], 3) +
                         ", sinusoidal " + num(last[1], 3) + ", raw index added " + num(last[2], 3) + ", raw index concatenated " +
                         num(last[3], 3) + ".",
                     "训练结束时的损失（每字符奈特，最后十分之一步的平均）：NoPE " + num(last[0], 3) + "，正弦 " + num(last[1], 3) +
                         "，原始下标相加 " + num(last[2], 3) + "，原始下标拼接 " + num(last[3], 3) + "。"});
  r.lines.push_back({"Added to every channel, p is a multiple of (1, ..., 1), and each LayerNorm of this pre-LN model "
                     "subtracts the mean over the channels: the raw index never reaches attention. The run is NoPE's "
                     "(its first loss " + num(first[2], 6) + " against NoPE's " + num(first[0], 6) + "): the index neither "
                     "helps nor visibly hurts, it is simply lost. Concatenated as channels of its own (x = [e | p]), no norm "
                     "removes it: it dominates each LayerNorm's variance and pushes the token's channels towards zero.",
                     "加到每个通道上时，p 是 (1, ..., 1) 的倍数，而这个 pre-LN 模型的每个 LayerNorm 都会减去各通道的均值："
                     "原始下标根本到不了注意力层。这次训练就是 NoPE 的训练（首步损失 " + num(first[2], 6) + "，NoPE 为 " +
                     num(first[0], 6) + "）：下标既没帮忙也没有明显的害处，只是丢失了。若作为单独的通道拼接（x = [e | p]），"
                     "没有任何归一化能去掉它：它主导了每个 LayerNorm 的方差，把词元的通道压向零。"});
  for (const char* m : models) r.lines.push_back({std::string(m) + ": " + bpc_row(result, c, m), std::string(m) + "：" + bpc_row(result, c, m)});
  r.claims.push_back({"raw_integer.added_is_nope",
                      {"added to every channel, the raw index is removed by LayerNorm: the first loss is NoPE's",
                       "加到每个通道时原始下标被 LayerNorm 去掉：首步损失与 NoPE 相同"},
                      std::fabs(first[2] - first[0]), 1e-4, true});
  r.claims.push_back({"raw_integer.concat_worse",
                      {"concatenated, the raw index ends with a higher loss than the sinusoid (difference in nats)",
                       "拼接时原始下标的最终损失高于正弦编码（差值，单位奈特）"},
                      last[3] - last[1], 0.02, false});
  draw_chart(context, r, "raw-integer-loss.svg", curves,
             chart_options("training loss (mean of 10 steps): raw index, NoPE, sinusoid", "step",
                           "loss (nats per character)"));
  return r;
}

// Vaswani et al.'s base 10^4 against 100 and 10^6 (ModelConfig::sinusoidal_base), scored to 1024
// characters, 16x (real) or 32x (tiny) the training length: a run at 512 costs too much here.
StepResult sinusoidal_bases_step(const StepContext& context) {
  StepResult r;
  lab::ExtrapolateConfig c = lab_config(context.lab);
  c.sinusoidal_bases = {100, 1e6};
  const auto result = run(c, {"sinusoidal"});
  const int train = c.training.train_len, longest = c.eval_lens.back();
  r.lines.push_back(size_line(c, context.lab));
  const std::string from = std::to_string(512 / train), to = std::to_string(longest / train);
  r.lines.push_back({"Trained at " + std::to_string(train) + " and scored to " + std::to_string(longest) +
                         " characters: training at 512 costs too much on this machine, so past 512 is " + from + "x to " + to +
                         "x the training length here.",
                     "在 " + std::to_string(train) + " 上训练，评估到 " + std::to_string(longest) +
                         " 个字符：在本机上以 512 训练代价太大，所以这里 512 之后是训练长度的 " + from + " 到 " + to + " 倍。"});
  const char* models[] = {"sinusoidal-base100", "sinusoidal", "sinusoidal-base1000000"};
  const char* bases[] = {"100", "10^4", "10^6"};
  std::string best;
  double best_bpc = kNaN, worst_growth = kNaN;
  for (int i = 0; i < 3; ++i) {
    r.lines.push_back({std::string("base ") + bases[i] + ": " + bpc_row(result, c, models[i]),
                       std::string("底数 ") + bases[i] + "：" + bpc_row(result, c, models[i])});
    const double at_longest = bpc_of(result, models[i], longest);
    if (std::isnan(best_bpc) || at_longest < best_bpc) best_bpc = at_longest, best = bases[i];
    const double growth = at_longest - bpc_of(result, models[i], train);
    worst_growth = std::isnan(worst_growth) ? growth : std::min(worst_growth, growth);
  }
  r.lines.push_back({"At " + std::to_string(longest) + " the lowest is base " + best + " (" + num(best_bpc, 3) +
                         "). Tutorials say 10^4 is chosen so that long sequences stay distinct; a model trained this short "
                         "does not reward it: every base degrades past its training length.",
                     "在 " + std::to_string(longest) + " 处最低的是底数 " + best + "（" + num(best_bpc, 3) +
                         "）。教程说选 10^4 是为了让长序列保持可区分；如此短的训练并不体现这一点：每个底数超出训练长度后都会变差。"});
  r.claims.push_back({"sinusoidal_bases.all_degrade",
                      {"every base scores worse at the longest length than at the training length (the smallest rise, bits)",
                       "每个底数在最长长度上都比在训练长度上差（最小的上升，比特）"},
                      worst_growth, 0.02, false});
  return r;
}

// A learned table has train_len rows: the lab reports n/a past it (no row to look up); the
// trained table drawn, and stretched to twice its length by the core's learned_interpolate.
StepResult learned_vs_sinusoidal_step(const StepContext& context) {
  StepResult r;
  const lab::ExtrapolateConfig c = lab_config(context.lab);
  const auto result = run(c, {"learned", "sinusoidal"});
  const int train = c.training.train_len;
  int missing = 0, past = 0;
  for (int len : c.eval_lens) past += len > train, missing += len > train && std::isnan(bpc_of(result, "learned", len));
  r.lines.push_back(size_line(c, context.lab));
  for (const char* m : {"learned", "sinusoidal"})
    r.lines.push_back({std::string(m) + ": " + bpc_row(result, c, m), std::string(m == std::string("learned") ? "可学习" : "正弦") + "：" + bpc_row(result, c, m)});
  r.lines.push_back({"Within the training length both are scored (" + num(bpc_of(result, "learned", train), 3) + " learned, " +
                         num(bpc_of(result, "sinusoidal", train), 3) + " sinusoidal at " + std::to_string(train) +
                         "). Past it the learned model is n/a: its table has " + std::to_string(train) +
                         " rows and position " + std::to_string(train) + " has none to look up (the learned-length step). "
                         "The sinusoid has a row everywhere and is scored, however badly.",
                     "在训练长度以内两者都能评估（在 " + std::to_string(train) + " 处可学习为 " +
                         num(bpc_of(result, "learned", train), 3) + "，正弦为 " + num(bpc_of(result, "sinusoidal", train), 3) +
                         "）。超出之后可学习模型为 n/a：它的表只有 " + std::to_string(train) + " 行，位置 " + std::to_string(train) +
                         " 无行可查（见 learned-length 一步）。正弦编码处处有行，因而能被评估，无论好坏。"});
  const lab::LearnedPositions t = lab::learned_positions(c.training.out_dir + "/learned.pt");
  LearnedTable table{t.rows, t.dim, 0, std::vector<float>(t.values.begin(), t.values.end())};
  const LearnedTable stretched = learned_interpolate(table, 2 * t.rows);
  r.lines.push_back({"The trained table is drawn below, and stretched to " + std::to_string(2 * t.rows) +
                         " rows as ViT resizes its grid (linear, half-pixel centres): the interpolated table gives every "
                         "position up to twice the length a row, made of the trained ones; a model needs fine-tuning to use it.",
                     "下面画出训练后的表，以及像 ViT 缩放网格那样把它拉伸到 " + std::to_string(2 * t.rows) +
                         " 行（线性，半像素中心）：插值后的表让两倍长度以内的每个位置都有一行，由训练过的行组成；模型需要微调才能用好它。"});
  r.claims.push_back({"learned_vs_sinusoidal.na_past_length",
                      {"every eval length past the training length is n/a for the learned model (lengths that are)",
                       "超出训练长度的每个评估长度上可学习模型都是 n/a（满足的长度数）"},
                      static_cast<double>(missing), static_cast<double>(past), false});
  draw_heatmap(context, r, "learned-trained.svg", table_heatmap(table, "The learned table after training (" + std::to_string(t.rows) + " positions)"));
  draw_heatmap(context, r, "learned-trained-interpolated.svg",
               table_heatmap(stretched, "The trained table stretched to " + std::to_string(2 * t.rows) + " positions (linear, half-pixel centres)"));
  return r;
}

// Vaswani's add against concat and multiply (ModelConfig::fusion, `lab extrapolate --fusion`).
StepResult fusion_step(const StepContext& context) {
  StepResult r;
  lab::ExtrapolateConfig c = lab_config(context.lab);
  c.fusions = {"concat", "multiply"};
  const auto result = run(c, {"sinusoidal"});
  const int train = c.training.train_len;
  r.lines.push_back(size_line(c, context.lab));
  // A model that learned nothing scores log2(vocabulary) bits per character.
  const double uniform = std::log2(static_cast<double>(lab::load_corpus(c.corpus).vocab_size()));
  double worst = kNaN;
  for (const auto& [model, en, zh] : {std::tuple{"sinusoidal", "add (x + PE)", "相加（x + PE）"},
                                      std::tuple{"sinusoidal-concat", "concat ([x | PE], a quarter of the width)", "拼接（[x | PE]，占四分之一宽度）"},
                                      std::tuple{"sinusoidal-multiply", "multiply (x * (1 + PE))", "相乘（x * (1 + PE)）"}}) {
    r.lines.push_back({std::string(en) + ": " + bpc_row(result, c, model), std::string(zh) + "：" + bpc_row(result, c, model)});
    const double v = bpc_of(result, model, train);
    worst = std::isnan(worst) ? v : std::max(worst, v);
  }
  r.lines.push_back({"Each is one command: posenc lab extrapolate --schemes sinusoidal --fusion concat,multiply.",
                     "每种都是一条命令：posenc lab extrapolate --schemes sinusoidal --fusion concat,multiply。"});
  r.claims.push_back({"fusion.all_learn",
                      {"every fusion learns: at the training length each scores a bit per character below a uniform guess "
                       "over the corpus's symbols (the worst)",
                       "每种融合方式都能学到东西：在训练长度上，每种都比对语料符号的均匀猜测至少低 1 比特每字符（取最差者）"},
                      worst, uniform - 1, true});
  return r;
}

// Olsson et al. 2022's previous-token head, looked for by measurement (lab heads): the head with
// the most attention mass on offset -1 of a trained sort model, and its map with the digits.
StepResult sort_heads_step(const StepContext& context) {
  StepResult r;
  const LabSettings& s = context.lab;
  lab::SortConfig c;
  c.schemes = {"rope"};
  c.training.out_dir = s.dir + (s.real ? "/real-sort" : "/tiny-sort");
  if (!s.real) {
    c.training.train_len = 8;
    c.training.steps = 150;
    c.training.batch = 32;
    c.shape = {2, 32, 4};
    c.test_lens = {8};
    c.test_sequences = 64;
  } else {
    c.test_lens = {16};
  }
  const auto rows = lab::run_sort(c);
  const std::string model = c.training.out_dir + "/sort-rope.pt";
  lab::HeadOffsetsRequest request;
  request.model_path = model;
  request.digits = c.training.train_len;
  const auto heads = lab::sort_head_offsets(request);
  const lab::HeadOffsets* top = &heads.front();
  for (const auto& h : heads)
    if (h.previous() > top->previous()) top = &h;
  r.lines.push_back({"A RoPE model trained to sort " + std::to_string(c.training.train_len) + " digits (" + std::to_string(c.shape.layers) +
                         " layers, " + std::to_string(c.shape.heads) + " heads, " + std::to_string(c.training.steps) +
                         " steps; token accuracy " + num(100 * rows.front().token_accuracy, 3) + "%), then posenc lab heads: "
                         "the mean attention mass of each head on each offset over 64 test sequences.",
                     "训练一个 RoPE 模型对 " + std::to_string(c.training.train_len) + " 个数字排序（" + std::to_string(c.shape.layers) +
                         " 层，" + std::to_string(c.shape.heads) + " 个头，" + std::to_string(c.training.steps) + " 步；词元准确率 " +
                         num(100 * rows.front().token_accuracy, 3) + "%），然后运行 posenc lab heads：每个头在每个偏移上的平均注意力质量（64 个测试序列）。"});
  for (const auto& h : heads)
    r.lines.push_back({"layer " + std::to_string(h.layer) + " head " + std::to_string(h.head) + ": self " + num(h.mass[0], 2) +
                           ", previous token " + num(h.previous(), 2) + ", most at offset " + (h.top_offset ? "-" : "") + std::to_string(h.top_offset) + " (" +
                           num(h.top_mass, 2) + ")",
                       "第 " + std::to_string(h.layer) + " 层第 " + std::to_string(h.head) + " 个头：自身 " + num(h.mass[0], 2) +
                           "，前一词元 " + num(h.previous(), 2) + "，最多在偏移 " + (h.top_offset ? "-" : "") + std::to_string(h.top_offset) + "（" +
                           num(h.top_mass, 2) + "）"});
  r.lines.push_back({"The most mass any head puts on the previous token is " + num(top->previous(), 2) + " (layer " +
                         std::to_string(top->layer) + " head " + std::to_string(top->head) + "): below the 0.5 that would name a "
                         "previous-token head. Sorting finds the next digit by its value, not by its place, so no head needs to "
                         "look one back; a picture alone might have suggested one.",
                     "任何头放在前一词元上的最大质量是 " + num(top->previous(), 2) + "（第 " + std::to_string(top->layer) + " 层第 " +
                         std::to_string(top->head) + " 个头）：低于称其为前一词元头所需的 0.5。排序按数值而不是按位置找下一个数字，"
                         "所以没有哪个头需要往回看一个位置；只看图可能会让人以为有。"});
  r.claims.push_back({"sort_heads.no_previous_token_head",
                      {"no head puts half its attention on the previous token (the largest mass on offset -1)",
                       "没有哪个头把一半注意力放在前一词元上（偏移 -1 上的最大质量）"},
                      top->previous(), 0.5, true});
  // The map of that head on one sequence, every row and column named by its token.
  lab::HeatmapRequestAttention a{model, lab::sort_example(c.training.train_len, 2026), top->layer, top->head};
  a.tokens.pop_back();  // the model reads all but the last token
  plot::HeatmapSpec h;
  h.values = lab::attention_weights(a, &h.rows);
  h.cols = h.rows;
  for (long t : a.tokens) h.row_names.push_back(t == 10 ? "|" : std::to_string(t));
  h.col_names = h.row_names;
  h.value_min = 0;
  h.value_max = 1;
  h.title = "attention of layer " + std::to_string(top->layer) + " head " + std::to_string(top->head) +
            " (the most on the previous token), sort model; '|' is the separator";
  h.row_label = "query token";
  h.col_label = "key token";
  draw_heatmap(context, r, "sort-heads-attention.svg", h);
  return r;
}

}  // namespace posenc::cli::tour
