#include "golden_mrope.h"

#include <string>

#include "posenc/error.h"

namespace posenc {

nlohmann::json with_tensors(nlohmann::json entry, std::initializer_list<F32Tensor*> tensors, std::vector<F32Tensor>& out) {
  for (F32Tensor* t : tensors) {
    entry["tensors"].push_back(t->name);
    out.push_back(std::move(*t));
  }
  return entry;
}

std::vector<TokenRun> golden_vision_runs(const MropeVision& vision, const std::array<int, 3>& image,
                                         const std::array<int, 3>& video) {
  const TokenRun text{TokenRun::kText, 2};
  std::vector<TokenRun> runs{text, {TokenRun::kImage, 0, image[0], image[1], image[2], vision.image_time_interval}, text};
  if (vision.frames_split) {
    // modeling_qwen3_vl.py get_rope_index: video_grid_thw repeat_interleave'd by t, t set to 1.
    for (int f = 0; f < video[0]; ++f) {
      if (f > 0) runs.push_back(text);  // <t seconds> of the next frame
      runs.push_back({TokenRun::kVideo, 0, 1, video[1], video[2], 1});
    }
  } else {
    runs.push_back({TokenRun::kVideo, 0, video[0], video[1], video[2], vision.time_interval});
  }
  runs.push_back(text);
  return runs;
}

nlohmann::json golden_vision_vectors(const ModelSpec& spec, const LayerSpec& l, const RopeSchedule& s,
                                     const RopeApplyParams& ap, const GoldenParams& params,
                                     const std::function<float()>& uniform, std::vector<F32Tensor>& out) {
  if (spec.mrope_style == MropeStyle::kXdrope) return golden_xdrope_vectors(spec, l, s, ap, params, uniform, out);
  const MropeVision& vision = *spec.mrope_vision;
  for (int i = 0; i < 3; ++i)
    if (params.image_grid[i] < 1 || params.video_grid[i] < 1 || params.image_grid[i] > 4096 || params.video_grid[i] > 4096)
      throw Error("vision grids need t, h, w in [1, 4096]; got image " + std::to_string(params.image_grid[i]) +
                  " and video " + std::to_string(params.video_grid[i]) + " at index " + std::to_string(i));
  const std::vector<TokenRun> runs = golden_vision_runs(vision, params.image_grid, params.video_grid);
  // Sized before anything is allocated: tokens, and q, k, their outputs, cos and sin in float32.
  const int D = l.head_dim, R = l.rotary_dim, F = R / 2, m = vision.merge_size;
  double tokens = 0;
  for (const TokenRun& r : runs) tokens += r.kind == TokenRun::kText ? r.length : double(r.t) * (r.h / m) * (r.w / m);
  if (tokens > 16384 || tokens * (4.0 * D + 2.0 * R) * 4 > double(1 << 30))
    throw Error("the vision sequence of --image-grid and --video-grid has " + format_number(tokens) +
                " tokens of head_dim " + std::to_string(D) + "; at most 16384 tokens and 1 GiB: give smaller grids");
  const MropeIndex index = mrope_position_ids(runs, m, vision.rule);
  const std::int64_t N = index.seq_len;
  const std::vector<std::uint8_t> axis =
      mrope_axis_map(spec.mrope_section, spec.mrope_style == MropeStyle::kInterleaved);
  if (static_cast<int>(axis.size()) != F)
    throw Error("mrope_section sums to " + std::to_string(axis.size()) + " but the layer rotates " + std::to_string(F) +
                " frequencies");
  const std::string name = l.layer_type + ".vision.";
  F32Tensor ids{name + "position_ids", {3, N}, std::vector<float>(index.ids.begin(), index.ids.end())};
  F32Tensor q{name + "q", {N, D}, {}}, k{name + "k", {N, D}, {}};
  for (std::int64_t i = 0; i < N * D; ++i) q.data.push_back(uniform());
  for (std::int64_t i = 0; i < N * D; ++i) k.data.push_back(uniform());
  F32Tensor q_out{name + "q_out", {N, D}, q.data}, k_out{name + "k_out", {N, D}, k.data};
  F32Tensor cos{name + "cos", {N, R}, std::vector<float>(N * R)}, sin{name + "sin", {N, R}, std::vector<float>(N * R)};
  std::vector<float> c(F), sn(F);
  for (std::int64_t n = 0; n < N; ++n) {
    for (int j = 0; j < F; ++j) {
      rope_cos_sin(s.inv_freq[j], index.ids[axis[j] * N + n], ap, &c[j], &sn[j]);
      cos.data[n * R + j] = cos.data[n * R + j + F] = c[j];
      sin.data[n * R + j] = sin.data[n * R + j + F] = sn[j];
    }
    const std::size_t at = n * D + l.rotary_offset;
    rope_rotate_row(&q.data[at], &q_out.data[at], c.data(), sn.data(), F, ap.layout, +1);
    rope_rotate_row(&k.data[at], &k_out.data[at], c.data(), sn.data(), F, ap.layout, +1);
  }
  nlohmann::json jruns = nlohmann::json::array();
  for (const TokenRun& r : runs) {
    if (r.kind == TokenRun::kText) jruns.push_back({{"kind", "text"}, {"length", r.length}});
    else
      jruns.push_back({{"kind", r.kind == TokenRun::kImage ? "image" : "video"}, {"grid_thw", {r.t, r.h, r.w}},
                       {"time_interval", r.time_interval}});
  }
  const char* rule = vision.rule == MropeIndexRule::kV5 ? " (transformers v5: the next run starts at pos + max(h', w'))"
                                                        : " (each piece starts at the last piece's max + 1)";
  nlohmann::json entry = {{"hf_function", vision.family + " get_rope_index" + rule},
                          {"spatial_merge_size", vision.merge_size},
                          {"runs", jruns},
                          {"seq_len", N},
                          {"rope_delta", index.rope_delta},
                          {"mrope_section", spec.mrope_section},
                          {"mrope_style", to_string(*spec.mrope_style)},
                          {"axis_of_freq", std::vector<int>(axis.begin(), axis.end())},
                          {"tensors", nlohmann::json::array()}};
  return with_tensors(std::move(entry), {&ids, &cos, &sin, &q, &k, &q_out, &k_out}, out);
}

}  // namespace posenc
