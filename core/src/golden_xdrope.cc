// Golden's vision vectors for HunYuan-VL's XD-RoPE (golden_mrope.h).
#include <string>

#include "golden_mrope.h"
#include "posenc/error.h"

namespace posenc {

nlohmann::json golden_xdrope_vectors(const ModelSpec& spec, const LayerSpec& l, const RopeSchedule& s,
                                     const RopeApplyParams& ap, const GoldenParams& params,
                                     const std::function<float()>& uniform, std::vector<F32Tensor>& out) {
  const MropeVision& vision = *spec.mrope_vision;
  const std::array<int, 3>& g = params.image_grid;
  if (g[0] != 1 || g[1] < 1 || g[2] < 1 || g[1] > 4096 || g[2] > 4096)
    throw Error("HunYuan-VL's image grid needs t = 1 and h, w in [1, 4096]; got " + std::to_string(g[0]) + "x" +
                std::to_string(g[1]) + "x" + std::to_string(g[2]));
  const int D = l.head_dim, R = l.rotary_dim, F = R / 2, m = vision.merge_size;
  const double tokens = 4.0 + double(g[1] / m) * (g[2] / m + 1) + 2;
  if (tokens > 16384 || tokens * (4.0 * D + 2.0 * R) * 4 > double(1 << 30))
    throw Error("the vision sequence of --image-grid has " + format_number(tokens) + " tokens of head_dim " +
                std::to_string(D) + "; at most 16384 tokens and 1 GiB: give a smaller grid");
  const TokenRun text{TokenRun::kText, 2};
  const std::vector<TokenRun> runs{text, {TokenRun::kImage, 0, g[0], g[1], g[2], 1}, text};
  const int A = static_cast<int>(spec.mrope_section.size());
  const MropeIndex index = xdrope_position_ids(runs, m, A);
  const std::int64_t N = index.seq_len;
  const std::vector<std::uint8_t> column_axis = xdrope_column_axes(spec.mrope_section);
  if (static_cast<int>(column_axis.size()) != R || l.rotary_offset != 0)
    throw Error("mrope_section sums to " + std::to_string(column_axis.size() / 2) + " but the layer rotates " +
                std::to_string(F) + " frequencies from channel " + std::to_string(l.rotary_offset));
  const std::string name = l.layer_type + ".vision.";
  F32Tensor ids{name + "position_ids", {A, N}, std::vector<float>(index.ids.begin(), index.ids.end())};
  F32Tensor q{name + "q", {N, D}, {}}, k{name + "k", {N, D}, {}};
  for (std::int64_t i = 0; i < N * D; ++i) q.data.push_back(uniform());
  for (std::int64_t i = 0; i < N * D; ++i) k.data.push_back(uniform());
  F32Tensor q_out{name + "q_out", {N, D}, q.data}, k_out{name + "k_out", {N, D}, k.data};
  F32Tensor cos{name + "cos", {N, R}, std::vector<float>(N * R)}, sin{name + "sin", {N, R}, std::vector<float>(N * R)};
  for (std::int64_t n = 0; n < N; ++n) {
    float* c = &cos.data[n * R];
    float* sn = &sin.data[n * R];
    for (int col = 0; col < R; ++col)  // column col: frequency col mod F at its own axis' position
      rope_cos_sin(s.inv_freq[col % F], index.ids[column_axis[col] * N + n], ap, &c[col], &sn[col]);
    for (F32Tensor* t : {&q_out, &k_out}) {
      const float* in = (t == &q_out ? q : k).data.data() + n * D;
      float* o = t->data.data() + n * D;
      for (int col = 0; col < R; ++col) {
        // HF: x * cos + rotate_half(x) * sin, rotate_half(x) = cat(-x2, x1), in float32; here each
        // product and the sum in double, rounded once.
        const double half = col < F ? -static_cast<double>(in[col + F]) : in[col - F];
        o[col] = static_cast<float>(static_cast<double>(in[col]) * c[col] + half * sn[col]);
      }
    }
  }
  nlohmann::json entry = {{"hf_function", "hunyuan_vl get_rope_index / get_vision_position_ids (image: begin, h' rows of "
                                          "w' + 1 tokens, end); apply_multimodal_rotary_pos_emb (XD-RoPE)"},
                          {"spatial_merge_size", m},
                          {"runs", {{{"kind", "text"}, {"length", 2}},
                                    {{"kind", "image"}, {"grid_thw", {g[0], g[1], g[2]}}},
                                    {{"kind", "text"}, {"length", 2}}}},
                          {"seq_len", N},
                          {"rope_delta", index.rope_delta},
                          {"mrope_section", spec.mrope_section},
                          {"mrope_style", to_string(MropeStyle::kXdrope)},
                          {"axis_of_column", std::vector<int>(column_axis.begin(), column_axis.end())},
                          {"tensors", nlohmann::json::array()}};
  return with_tensors(std::move(entry), {&ids, &cos, &sin, &q, &k, &q_out, &k_out}, out);
}

}  // namespace posenc
