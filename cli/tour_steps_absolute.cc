// The tour's steps about absolute positions added to the token embeddings: the raw integer
// position that swamps the embedding, the sqrt(d_model) scaling that balances the two, and
// padding (positions counted from the attention mask, as Hugging Face does).
#include <algorithm>
#include <cmath>

#include "posenc/attention.h"
#include "posenc/learned.h"
#include "posenc/rope_schedule.h"
#include "posenc/sinusoidal.h"
#include "tour_steps.h"

namespace posenc::cli::tour {
namespace {

double norm(const float* x, int n) {
  double s = 0;
  for (int i = 0; i < n; ++i) s += static_cast<double>(x[i]) * x[i];
  return std::sqrt(s);
}

// Mean L2 norm of the rows of a [rows][dim] table.
double mean_row_norm(const std::vector<float>& table, int dim) {
  const int rows = static_cast<int>(table.size() / dim);
  double s = 0;
  for (int r = 0; r < rows; ++r) s += norm(&table[static_cast<std::size_t>(r) * dim], dim);
  return s / rows;
}

// Token embeddings drawn as nn.Embedding or fairseq draw them: vocab rows of N(0, std^2), the
// core's deterministic generator (the same rows on every machine).
std::vector<float> token_embeddings(int vocab, int dim, double std, std::uint64_t seed) {
  return learned_init(vocab, dim, std, seed).weight;
}

std::vector<std::int64_t> positions_upto(std::int64_t n) {
  std::vector<std::int64_t> p(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) p[static_cast<std::size_t>(i)] = i;
  return p;
}

}  // namespace

// The first encoding people write: x = e + p, the position index itself added to every channel.
// nn.Embedding draws e from N(0, 1), so |e| ~ sqrt(d) while |p * 1| = p sqrt(d): the ratio is ~p,
// and two different tokens at the same large position point the same way (cosine -> 1).
StepResult raw_integer_step(const StepContext& context) {
  StepResult r;
  constexpr int d = 64, kVocab = 256;
  const auto e = token_embeddings(kVocab, d, 1.0, 11);
  const double e_norm = mean_row_norm(e, d);
  const double pe_norm = mean_row_norm(sinusoidal_table({d}, positions_upto(1001)), d);  // sqrt(d/2) at every p
  auto ratio_at = [&](double p) { return p * std::sqrt(static_cast<double>(d)) / e_norm; };
  // Mean cosine between tokens 2t and 2t + 1 when both sit at position p.
  auto cosine_at = [&](double p) {
    double s = 0;
    for (int t = 0; t + 1 < kVocab; t += 2) {
      double ab = 0, aa = 0, bb = 0;
      for (int c = 0; c < d; ++c) {
        const double a = e[t * d + c] + p, b = e[(t + 1) * d + c] + p;
        ab += a * b, aa += a * a, bb += b * b;
      }
      s += ab / std::sqrt(aa * bb);
    }
    return s / (kVocab / 2);
  };
  std::vector<double> ps, raw, sinus;
  for (int half_decade = 0; half_decade <= 6; ++half_decade) {  // p = 1, 3, 10, ..., 1000
    const double p = std::round(std::pow(10.0, half_decade / 2.0));
    ps.push_back(p), raw.push_back(ratio_at(p)), sinus.push_back(pe_norm / e_norm);
  }
  r.lines.push_back({"Add the raw index p to every channel of a token embedding drawn as nn.Embedding draws it (N(0, 1), "
                     "d = 64, mean norm " + num(e_norm, 3) + "): |position| / |embedding| is " + num(ratio_at(10), 3) +
                     " at p = 10, " + num(ratio_at(100), 3) + " at p = 100 and " + num(ratio_at(1000), 4) + " at p = 1000.",
                     "把原始下标 p 加到词嵌入的每个通道上（嵌入按 nn.Embedding 的方式取自 N(0, 1)，d = 64，平均范数 " +
                     num(e_norm, 3) + "）：|位置| / |嵌入| 在 p = 10 时为 " + num(ratio_at(10), 3) + "，p = 100 时为 " +
                     num(ratio_at(100), 3) + "，p = 1000 时为 " + num(ratio_at(1000), 4) + "。"});
  r.lines.push_back({"The content is swamped: two different tokens at the same position have cosine " + num(cosine_at(0), 2) +
                     " at p = 0, " + num(cosine_at(10), 3) + " at p = 10 and " + num(cosine_at(1000), 6) +
                     " at p = 1000: to the next layer every late token looks alike. The sinusoid keeps |PE(p)| = sqrt(d/2) = " +
                     num(pe_norm, 3) + " at every p.",
                     "内容被淹没了：同一位置上的两个不同词元，余弦相似度在 p = 0 时为 " + num(cosine_at(0), 2) + "，p = 10 时为 " +
                     num(cosine_at(10), 3) + "，p = 1000 时为 " + num(cosine_at(1000), 6) +
                     "：对下一层来说，靠后的词元看起来都一样。正弦编码在每个 p 上都保持 |PE(p)| = sqrt(d/2) = " + num(pe_norm, 3) + "。"});
  r.lines.push_back({"Whether a model trains worse with it is measured in the next step (raw-integer-run): in posenc's pre-LN "
                     "model each LayerNorm erases the added index, and concatenated it hurts.",
                     "模型是否因此训练得更差，由下一步（raw-integer-run）测量：在 posenc 的 pre-LN 模型中，每个 LayerNorm "
                     "都会抹去相加的下标，而拼接时它会造成损害。"});
  r.claims.push_back({"raw_integer.swamps",
                      {"at p = 1000 the raw position is over 100 times the embedding's norm", "p = 1000 时原始位置的范数超过嵌入的 100 倍"},
                      ratio_at(1000), 100, false});
  r.claims.push_back({"raw_integer.tokens_alike",
                      {"at p = 1000 two different tokens have cosine above 0.999", "p = 1000 时两个不同词元的余弦超过 0.999"},
                      cosine_at(1000), 0.999, false});
  r.claims.push_back({"raw_integer.sinusoid_bounded",
                      {"the sinusoid's norm stays sqrt(d/2) at every position (relative error)",
                       "正弦编码的范数在每个位置都是 sqrt(d/2)（相对误差）"},
                      std::fabs(pe_norm / std::sqrt(d / 2.0) - 1), 1e-6, true});
  draw_chart(context, r, "raw-integer.svg", {{"raw index p", ps, raw}, {"sinusoidal PE(p)", ps, sinus}},
             chart_options("|position| / |token embedding| at position p (d = 64, embeddings N(0, 1))", "position p",
                           "norm ratio", true, true));
  return r;
}

// Vaswani et al. 2017, section 3.4: "In the embedding layers, we multiply those weights by
// sqrt(d_model)". fairseq draws its embeddings from N(0, d^-1) (Embedding(): std embed_dim**-0.5)
// and multiplies by embed_scale = sqrt(embed_dim) (TransformerEncoder): each channel then has
// size ~1, the sinusoid's amplitude. The scale belongs to that init: with nn.Embedding's N(0, 1)
// it shrinks the position instead.
StepResult embedding_scale_step(const StepContext&) {
  StepResult r;
  constexpr int d = 512, kVocab = 512;
  const double sqrt_d = std::sqrt(static_cast<double>(d));
  const double pe = mean_row_norm(sinusoidal_table({d}, positions_upto(kVocab)), d);
  const double fairseq_e = mean_row_norm(token_embeddings(kVocab, d, 1 / sqrt_d, 3), d);
  const double torch_e = mean_row_norm(token_embeddings(kVocab, d, 1.0, 3), d);
  const double unscaled = pe / fairseq_e, scaled = pe / (fairseq_e * sqrt_d), torch_scaled = pe / (torch_e * sqrt_d);
  r.lines.push_back({"d_model = 512. Embeddings drawn with std 1/sqrt(d) (fairseq, the shared input/output matrix of "
                     "Vaswani et al.) have norm " + num(fairseq_e, 3) + "; a sinusoidal row has norm sqrt(d/2) = " + num(pe, 4) +
                     ". Added as they are, position outweighs content " + num(unscaled, 3) + " to 1.",
                     "d_model = 512。按标准差 1/sqrt(d) 初始化的嵌入（fairseq，Vaswani 等人共享的输入/输出矩阵）范数为 " +
                     num(fairseq_e, 3) + "；正弦位置行的范数为 sqrt(d/2) = " + num(pe, 4) + "。直接相加时，位置与内容之比为 " +
                     num(unscaled, 3) + " 比 1。"});
  r.lines.push_back({"Multiplied by sqrt(d_model) = " + num(sqrt_d, 4) + " the embedding's channels have size ~1 like the "
                     "sinusoid's, and |PE| / |e sqrt(d)| = " + num(scaled, 3) + ": neither drowns the other.",
                     "乘以 sqrt(d_model) = " + num(sqrt_d, 4) + " 后，嵌入每个通道的大小约为 1，与正弦编码相当，"
                     "|PE| / |e sqrt(d)| = " + num(scaled, 3) + "：谁也不淹没谁。"});
  r.lines.push_back({"The scale goes with that init: embeddings from nn.Embedding's N(0, 1) already have size ~1, and "
                     "multiplying them by sqrt(d) leaves the position " + num(torch_scaled, 2) + " of the content.",
                     "这个缩放与那种初始化配套：nn.Embedding 的 N(0, 1) 嵌入本来就约为 1，再乘 sqrt(d) 会让位置只剩内容的 " +
                     num(torch_scaled, 2) + "。"});
  r.lines.push_back({"In Python, posenc.nn.TokenPositionEmbedding(vocab, dim, scale=True) is this input layer: "
                     "E drawn with std 1/sqrt(dim), multiplied by sqrt(dim), the sinusoid added.",
                     "在 Python 中，posenc.nn.TokenPositionEmbedding(vocab, dim, scale=True) 就是这样的输入层："
                     "E 按标准差 1/sqrt(dim) 初始化，乘以 sqrt(dim)，再加上正弦编码。"});
  r.claims.push_back({"embedding_scale.unscaled_swamped",
                      {"unscaled, the position's norm is over 10 times the embedding's", "不缩放时位置范数超过嵌入的 10 倍"},
                      unscaled, 10, false});
  r.claims.push_back({"embedding_scale.balanced",
                      {"scaled by sqrt(d), |PE| / |e| is within 5% of sqrt(1/2)", "乘以 sqrt(d) 后 |PE| / |e| 与 sqrt(1/2) 相差不到 5%"},
                      std::fabs(scaled / std::sqrt(0.5) - 1), 0.05, true});
  return r;
}

// Hugging Face builds position ids from the attention mask for padded batches:
// position_ids = attention_mask.long().cumsum(-1) - 1; position_ids.masked_fill_(attention_mask
// == 0, 1) (GenerationMixin.prepare_inputs_for_generation, transformers/generation/utils.py).
// Five real tokens left-padded to eight: with sinusoidal positions added to the embeddings, the
// naive ids 0..7 move the real tokens to 3..7 and change their outputs; the ids from the mask
// and the key padding mask reproduce the unpadded run.
StepResult padding_step(const StepContext&) {
  StepResult r;
  constexpr int kHeads = 2, kHeadDim = 16, d = kHeads * kHeadDim, kReal = 5, kPadded = 8, kPads = kPadded - kReal;
  std::mt19937_64 rng(8);
  const auto real = uniform_values(rng, static_cast<std::size_t>(kReal) * d), pad = uniform_values(rng, d);
  const std::vector<std::uint8_t> mask = {0, 0, 0, 1, 1, 1, 1, 1};
  std::vector<std::int64_t> from_mask(kPadded);  // cumsum(mask) - 1, pads set to 1 (HF)
  for (int i = 0, sum = 0; i < kPadded; ++i) sum += mask[i], from_mask[i] = mask[i] ? sum - 1 : 1;
  // Causal self-attention of tokens (q = k = v = embedding + positions), [1, T, 2, 16].
  auto attend = [&](const std::vector<float>& tokens, const std::vector<std::int64_t>& ids, const std::uint8_t* padding,
                    AttentionPositions rope) {
    const int t = static_cast<int>(ids.size());
    std::vector<float> x = tokens, out(tokens.size());
    if (rope == AttentionPositions::kNone) {
      const auto pe = sinusoidal_table({d}, ids);
      for (std::size_t i = 0; i < x.size(); ++i) x[i] += pe[i];
    }
    const RopeShape shape{1, t, kHeads, kHeadDim};
    AttentionParams params;
    params.mask.key_padding = padding;
    params.positions = rope;
    RopeParams rp;
    rp.head_dim = kHeadDim;
    const RopeSchedule schedule = compute_schedule(rp);
    if (rope == AttentionPositions::kRope) {
      params.q_positions = params.k_positions = PositionIds::explicit_ids(ids.data(), 1, 1);
      params.rope = rope_apply_params(schedule);
    }
    std::vector<float> k = x, v = x;
    // The core's reference attention (scores in double, the one the fused kernel is tested
    // against): differences of a few float ulps come out the same on every SIMD target, so
    // docs/tour.md does too.
    attention_reference(bshd(x.data(), shape), bshd(k.data(), shape), bshd(v.data(), shape), bshd(out.data(), shape), params);
    return out;
  };
  std::vector<float> padded;
  for (int i = 0; i < kPads; ++i) padded.insert(padded.end(), pad.begin(), pad.end());
  padded.insert(padded.end(), real.begin(), real.end());
  // Largest difference between the real tokens' rows of a padded run and the unpadded run.
  auto real_rows_diff = [&](const std::vector<float>& padded_out, const std::vector<float>& plain) {
    double m = 0;
    for (std::size_t i = 0; i < plain.size(); ++i)
      m = std::max(m, std::fabs(static_cast<double>(padded_out[kPads * d + i]) - plain[i]));
    return m;
  };
  const auto none = AttentionPositions::kNone, rope = AttentionPositions::kRope;
  const auto plain = attend(real, positions_upto(kReal), nullptr, none);
  const double good = real_rows_diff(attend(padded, from_mask, mask.data(), none), plain);
  const double naive = real_rows_diff(attend(padded, positions_upto(kPadded), mask.data(), none), plain);
  const double unmasked = real_rows_diff(attend(padded, from_mask, nullptr, none), plain);
  const double rope_naive = real_rows_diff(attend(padded, positions_upto(kPadded), mask.data(), rope),
                                           attend(real, positions_upto(kReal), nullptr, rope));
  std::string mask_text, ids_text;
  for (int i = 0; i < kPadded; ++i)
    mask_text += (i ? " " : "") + std::to_string(mask[i]), ids_text += (i ? " " : "") + std::to_string(from_mask[i]);
  r.lines.push_back({"A batch pads a 5-token sentence on the left to 8 (attention mask " + mask_text + "). Positions from "
                     "the mask, cumsum(mask) - 1 with the pads set to 1 as Hugging Face does: " + ids_text + ". Sinusoidal "
                     "positions are added to the embeddings; causal attention with a key padding mask (posenc's attention_reference()).",
                     "一个批次把 5 个词元的句子在左侧填充到 8（注意力掩码 " + mask_text + "）。由掩码计算位置：cumsum(mask) - 1，"
                     "填充位置设为 1（与 Hugging Face 相同）：" + ids_text + "。正弦位置加到嵌入上；带键填充掩码的因果注意力（posenc 的 "
                     "attention_reference()）。"});
  r.lines.push_back({"The real tokens' outputs against the unpadded sentence: positions from the mask and the padding mask "
                     "give the same outputs (largest difference " + under(good) + "); the naive positions 0..7 put the real "
                     "tokens at 3..7 and change them by " + num(naive, 3) + "; forgetting the padding mask lets them attend "
                     "to the pads, a change of " + num(unmasked, 3) + ".",
                     "真实词元的输出与不填充时相比：由掩码得到的位置加上填充掩码，输出相同（最大差 " + under(good) +
                     "）；朴素的位置 0..7 把真实词元放到 3..7，输出改变 " + num(naive, 3) + "；忘了填充掩码则它们会关注填充，"
                     "改变 " + num(unmasked, 3) + "。"});
  r.lines.push_back({"With RoPE instead, the naive ids shift every real token by the same 3, and a relative scheme does not "
                     "see a common shift (difference " + under(rope_naive) + "): the mask's positions matter for absolute "
                     "tables, and keep a cache's positions right when sequences are generated further.",
                     "若改用 RoPE，朴素位置让每个真实词元都平移 3，而相对方案看不到共同的平移（差 " + under(rope_naive) +
                     "）：由掩码得到的位置对绝对位置表至关重要，并在继续生成时保持缓存中的位置正确。"});
  r.claims.push_back({"padding.positions_from_mask",
                      {"positions from the mask + the padding mask reproduce the unpadded outputs",
                       "由掩码得到的位置加填充掩码，复现不填充时的输出"},
                      good, 1e-5, true});
  r.claims.push_back({"padding.naive_positions_differ",
                      {"naive positions 0..7 change the real tokens' outputs", "朴素位置 0..7 改变真实词元的输出"}, naive, 1e-2, false});
  r.claims.push_back({"padding.mask_needed",
                      {"without the padding mask the outputs change", "没有填充掩码时输出改变"}, unmasked, 1e-2, false});
  r.claims.push_back({"padding.rope_shift_invariant",
                      {"with RoPE a common shift of the real tokens changes nothing", "RoPE 下真实词元的共同平移不改变任何输出"},
                      rope_naive, 1e-5, true});
  return r;
}

}  // namespace posenc::cli::tour
