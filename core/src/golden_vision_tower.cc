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
  if (double(rows) * cols * D * 4 * 8 > double(1 << 30))
    throw Error("the vision tower's golden image of " + std::to_string(rows) + " x " + std::to_string(cols) +
                " patches of head_dim " + std::to_string(D) + " needs more than 1 GiB; give a smaller --image-grid");
  const std::vector<std::int64_t> ids = vision_rope_position_ids(v, rows, cols);
  const std::int64_t N = static_cast<std::int64_t>(ids.size() / 2);
  const std::vector<RopeApplyParams> ap = vision_rope_apply_params(v);  // one per block of channels
  const int B = v.blocks, per_block = F / B;
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
    for (int b = 0; b < B; ++b) {
      const std::int64_t at = n * D + 2 * b * per_block;  // the block's first channel
      for (int j = 0; j < per_block; ++j) {  // cat(freqs, freqs) order in each block, as HF's cos/sin
        cos.data[at + j] = cos.data[at + per_block + j] = c[b * per_block + j];
        sin.data[at + j] = sin.data[at + per_block + j] = s[b * per_block + j];
      }
      rope_rotate_row(&q.data[at], &q_out.data[at], &c[b * per_block], &s[b * per_block], per_block, v.layout, 1);
      rope_rotate_row(&k.data[at], &k_out.data[at], &c[b * per_block], &s[b * per_block], per_block, v.layout, 1);
    }
  }
  nlohmann::json entry = {{"family", to_string(p.family)},
                          {"hf_function", v.hf_source},
                          {"summary", vision_rope_summary(v)},
                          {"grid", {rows, cols}},
                          {"tokens", N},
                          {"pairing", pairing_name(v.layout)},
                          {"blocks", B},  // each block of head_dim / blocks channels is its own RoPE
                          {"axis_of_freq", std::vector<int>(v.axis_of_freq.begin(), v.axis_of_freq.end())},
                          {"position_ids", "[2, N]: the row, then the column coordinate each frequency multiplies"},
                          {"tensors", nlohmann::json::array()}};
  if (whole_tile) entry["grid_rule"] = "the whole image_size / patch_size tile and the class token last (--image-grid not read)";
  return with_tensors(std::move(entry), {&position_ids, &cos, &sin, &q, &k, &q_out, &k_out}, out);
}

}  // namespace posenc
