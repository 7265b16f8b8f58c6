// Golden's vectors of the vision tower's own 2-D RoPE (vision_rope.h): one image of patches at
// the tower's coordinates, q and k rotated as HF's tower rotates them.
#include <string>

#include "golden_mrope.h"
#include "posenc/error.h"
#include "posenc/vision_rope.h"

namespace posenc {

nlohmann::json golden_vision_tower_vectors(const VisionRope& v, const GoldenParams& params,
                                           const std::function<float()>& uniform, std::vector<F32Tensor>& out) {
  const VisionRopeParams& p = v.params;
  // Llama 4's tower always sees the whole tile; the others take the image grid's h x w patches.
  const bool whole_tile = p.family == VisionRopeFamily::kLlama4;
  const int rows = whole_tile ? p.patches_per_side : params.image_grid[1];
  const int cols = whole_tile ? p.patches_per_side : params.image_grid[2];
  const int D = p.head_dim, F = D / 2;
  // Six [N, D] float32 tensors and [2, N] ids, held twice while golden serialises them.
  if ((double(rows) * cols + 1) * (6.0 * D + 2) * 4 * 2 > double(1 << 30))
    throw Error("the vision tower's golden image of " + std::to_string(rows) + " x " + std::to_string(cols) +
                " patches of head_dim " + std::to_string(D) + " needs more than 1 GiB; " +
                (whole_tile ? "its vision_config's image_size / patch_size is too large" : "give a smaller --image-grid"));
  const std::vector<std::int64_t> ids = vision_rope_position_ids(v, rows, cols);
  const std::int64_t N = static_cast<std::int64_t>(ids.size() / 2);
  const std::vector<RopeApplyParams> ap = vision_rope_apply_params(v);  // one per block of channels
  const std::string name = "vision_tower.";
  F32Tensor position_ids{name + "position_ids", {2, N}, std::vector<float>(ids.begin(), ids.end())};
  F32Tensor q{name + "q", {N, D}, {}}, k{name + "k", {N, D}, {}};
  for (std::int64_t i = 0; i < N * D; ++i) q.data.push_back(uniform());
  for (std::int64_t i = 0; i < N * D; ++i) k.data.push_back(uniform());
  F32Tensor q_out{name + "q_out", {N, D}, std::vector<float>(N * D)}, k_out{name + "k_out", {N, D}, std::vector<float>(N * D)};
  F32Tensor cos{name + "cos", {N, D}, std::vector<float>(N * D)}, sin{name + "sin", {N, D}, std::vector<float>(N * D)};
  std::vector<float> c(static_cast<std::size_t>(F)), s(static_cast<std::size_t>(F));
  for (std::int64_t n = 0; n < N; ++n) {
    for (int f = 0; f < F; ++f) rope_cos_sin(v.inv_freq[f], ids[v.axis_of_freq[f] * N + n], ap[0], &c[f], &s[f]);
    for (const RopeApplyParams& b : ap) {  // each block: its channels, its frequencies
      const std::int64_t at = n * D + b.channel_offset;
      const int nf = b.num_freqs, f0 = static_cast<int>(b.inv_freq - v.inv_freq.data());
      for (int j = 0; j < nf; ++j) {  // cat(freqs, freqs) order in each block, as the text layers' cos/sin
        cos.data[at + j] = cos.data[at + nf + j] = c[f0 + j];
        sin.data[at + j] = sin.data[at + nf + j] = s[f0 + j];
      }
      rope_rotate_row(&q.data[at], &q_out.data[at], &c[f0], &s[f0], nf, b.layout, 1);
      rope_rotate_row(&k.data[at], &k_out.data[at], &c[f0], &s[f0], nf, b.layout, 1);
    }
  }
  nlohmann::json entry = {{"family", to_string(p.family)},
                          {"hf_function", v.hf_source},
                          {"summary", vision_rope_summary(v)},
                          {"grid", {rows, cols}},
                          {"tokens", N},
                          {"head_dim", D},
                          {"theta", p.theta},
                          {"pairing", pairing_name(v.layout)},
                          {"blocks", v.blocks},  // each block of head_dim / blocks channels is its own RoPE
                          {"inv_freq", std::vector<double>(v.inv_freq.begin(), v.inv_freq.end())},
                          {"axis_of_freq", std::vector<int>(v.axis_of_freq.begin(), v.axis_of_freq.end())},
                          {"angles", "float32(inv_freq[f] * float32(position_ids[axis_of_freq[f]][n]))"},
                          {"cos_sin_order", "per block of head_dim / blocks channels, cat(freqs, freqs): column j and j + "
                                            "F_b of the block hold its frequency j (F_b = head_dim / 2 / blocks); with "
                                            "interleaved pairs frequency j rotates the block's channels 2j, 2j + 1"},
                          {"position_ids", "[2, N]: the row, then the column coordinate each frequency multiplies"},
                          {"coordinates_from", p.family == VisionRopeFamily::kLlama4 ? 1 : 0},
                          {"tensors", nlohmann::json::array()}};
  if (whole_tile) {
    entry["grid_rule"] = "the whole image_size / patch_size tile (--image-grid not read)";
    entry["class_token"] = {{"index", N - 1}, {"position_ids", {0, 0}}, {"angle", 0}};
  }
  return with_tensors(std::move(entry), {&position_ids, &cos, &sin, &q, &k, &q_out, &k_out}, out);
}

}  // namespace posenc
