#include "vision_model.h"

#include <cmath>
#include <string>

#include "posenc/axial_rope.h"
#include "posenc/error.h"
#include "posenc_torch/rope_op.h"

namespace posenc::lab {
namespace {

constexpr double kAxialTheta = 100.0;  // rope-vit's compute_axial_cis default
constexpr double kMixedTheta = 10.0;   // rope-vit's init_random_2d_freqs default
constexpr double kPixelMaxFreq = 10.0;  // rotary-embedding-torch's max_freq default (EVA, timm)

bool rotates(VisionScheme s) { return s == VisionScheme::kAxial || s == VisionScheme::kPixel || s == VisionScheme::kMixed; }

int head_dim(const VitConfig& c) { return c.shape.d_model / c.shape.heads; }

AxialRopeParams axial_params(const VitConfig& c) {
  AxialRopeParams p;
  p.axes = 2;
  p.axis_dim = head_dim(c) / 2;  // each axis rotates half the head: F = head_dim / 4 pairs
  p.freqs_for = c.scheme == VisionScheme::kPixel ? AxialFrequencies::kPixel : AxialFrequencies::kLang;
  p.theta = kAxialTheta;
  p.max_freq = kPixelMaxFreq;
  return p;
}

// The grid's coordinates [2, 1, S] (x = column, then y = row; S = g * g row-major): integers for
// lang, linspace(-1, 1, g) for pixel (axial_grid_coordinates, the core's builder, gives (row, col)).
torch::Tensor grid_coordinates(const VitConfig& c, int grid) {
  const std::vector<double> yx = axial_grid_coordinates(axial_params(c), {grid, grid});  // [S][2]
  const torch::Tensor t = torch::tensor(yx, torch::kFloat64).view({grid * grid, 2}).flip({1});
  return t.t().contiguous().view({2, 1, grid * grid});
}

// x [B, H, S, D] rotated by angles [H or 1, S, D / 2] on interleaved pairs (2j, 2j + 1), in float32.
torch::Tensor rotate_interleaved(const torch::Tensor& x, const torch::Tensor& angles) {
  const torch::Tensor a = x.slice(-1, 0, c10::nullopt, 2), b = x.slice(-1, 1, c10::nullopt, 2);
  const torch::Tensor cos = angles.cos(), sin = angles.sin();
  return torch::stack({a * cos - b * sin, b * cos + a * sin}, -1).flatten(-2);
}

}  // namespace

void validate(const VitConfig& c) {
  if (c.shape.heads < 1 || c.shape.d_model < 1 || c.shape.d_model % c.shape.heads != 0)
    throw Error("vision model: d_model " + std::to_string(c.shape.d_model) + " must split over " + std::to_string(c.shape.heads) + " heads");
  const int hd = head_dim(c);
  if (rotates(c.scheme) && hd % 4 != 0)
    throw Error("--d-model / --heads: the 2-D RoPE schemes rotate pairs on two axes, so the head width must be a multiple of 4, got " +
                std::to_string(hd) + " (scheme " + to_string(c.scheme) + ")");
  if (c.train_grid < 1 || c.train_grid > kMaxVisionGrid)
    throw Error("--train-grid must be in [1, " + std::to_string(kMaxVisionGrid) + "], got " + std::to_string(c.train_grid));
  if (c.channels < 1 || c.classes < 2) throw Error("vision model: channels >= 1 and classes >= 2 expected");
}

VisionBlockImpl::VisionBlockImpl(const VitConfig& c) : heads_(c.shape.heads), head_dim_(head_dim(c)) {
  const int d = c.shape.d_model;
  norm1_ = register_module("norm1", torch::nn::LayerNorm(torch::nn::LayerNormOptions({d})));
  norm2_ = register_module("norm2", torch::nn::LayerNorm(torch::nn::LayerNormOptions({d})));
  qkv_ = register_module("qkv", torch::nn::Linear(d, 3 * d));
  out_ = register_module("out", torch::nn::Linear(d, d));
  up_ = register_module("up", torch::nn::Linear(d, 4 * d));
  down_ = register_module("down", torch::nn::Linear(4 * d, d));
  if (c.scheme == VisionScheme::kMixed) {
    // init_random_2d_freqs: magnitudes 1 / theta^(4k / head_dim), k < head_dim / 4, at a random
    // angle phi per head for the first head_dim / 4 pairs and phi + pi / 2 for the rest.
    const torch::Tensor mag = 1.0 / torch::pow(kMixedTheta, torch::arange(0, head_dim_, 4, torch::kFloat64) / head_dim_);
    const torch::Tensor phi = torch::rand({heads_, 1}, torch::kFloat64) * (2 * M_PI);
    const torch::Tensor fx = torch::cat({mag * torch::cos(phi), mag * torch::cos(phi + M_PI / 2)}, -1);  // [H, head_dim / 2]
    const torch::Tensor fy = torch::cat({mag * torch::sin(phi), mag * torch::sin(phi + M_PI / 2)}, -1);
    mixed_freqs = register_parameter("mixed_freqs", torch::stack({fx, fy}).to(torch::kFloat32));
  }
}

torch::Tensor VisionBlockImpl::forward(const torch::Tensor& x, const std::function<torch::Tensor(const torch::Tensor&)>& rotate) {
  const std::int64_t B = x.size(0), S = x.size(1);
  const torch::Tensor qkv = qkv_(norm1_(x)).view({B, S, 3, heads_, head_dim_}).permute({2, 0, 3, 1, 4});  // [3, B, H, S, hd]
  const torch::Tensor q = rotate(qkv[0]), k = rotate(qkv[1]);
  const torch::Tensor weights = torch::softmax(q.matmul(k.transpose(-2, -1)) / std::sqrt(static_cast<double>(head_dim_)), -1);
  const torch::Tensor attended = weights.matmul(qkv[2]).transpose(1, 2).reshape({B, S, heads_ * head_dim_});
  const torch::Tensor h = x + out_(attended);
  return h + down_(torch::gelu(up_(norm2_(h))));
}

VisionTransformerImpl::VisionTransformerImpl(const VitConfig& c) : config_(c) {
  validate(c);
  const int d = c.shape.d_model;
  embed_ = register_module("embed", torch::nn::Linear(c.channels, d));
  for (int l = 0; l < c.shape.layers; ++l) blocks_.push_back(register_module("block" + std::to_string(l), VisionBlock(c)));
  final_norm_ = register_module("final_norm", torch::nn::LayerNorm(torch::nn::LayerNormOptions({d})));
  classify_ = register_module("classify", torch::nn::Linear(d, c.classes));
  if (c.scheme == VisionScheme::kLearned) table_ = register_parameter("table", torch::randn({1, d, c.train_grid, c.train_grid}) * 0.02);
  if (c.scheme == VisionScheme::kAxial || c.scheme == VisionScheme::kPixel) {
    // [x's F, y's F]: axis 0's block first, as axial_kernel_frequencies orders them.
    const std::vector<float> one = axial_axis_frequencies(axial_params(c));
    std::vector<float> both(one);
    both.insert(both.end(), one.begin(), one.end());
    inv_freq_ = register_buffer("inv_freq", torch::tensor(both, torch::kFloat32));
  }
}

torch::Tensor VisionTransformerImpl::rotate(const torch::Tensor& x, int layer, int grid) const {
  const int F = head_dim(config_) / 4;
  switch (config_.scheme) {
    case VisionScheme::kAxial:
    case VisionScheme::kPixel: {
      torch_layer::RopeOpArgs args;
      args.inv_freq = inv_freq_;
      args.layout = "interleaved";  // rotary-embedding-torch's and rope-vit's pairs
      for (int a = 0; a < 2; ++a) args.axis_of_freq.insert(args.axis_of_freq.end(), F, a);
      const torch::Tensor coords = grid_coordinates(config_, grid);
      if (config_.scheme == VisionScheme::kPixel) {  // real coordinates: the torch-native rotation
        args.positions = coords;
        return torch_layer::rope_native(x, args);
      }
      args.positions = coords.to(torch::kInt64).expand({2, x.size(0), grid * grid}).contiguous();  // the kernels' [axes, B, S]
      return torch_layer::rope_op(x, args);
    }
    case VisionScheme::kMixed: {
      const torch::Tensor coords = grid_coordinates(config_, grid).to(torch::kFloat32).view({2, grid * grid, 1, 1});  // x, y
      const torch::Tensor& f = blocks_[static_cast<std::size_t>(layer)]->mixed_freqs;  // [2 (x, y), H, hd / 2]
      const torch::Tensor angles = coords[0] * f[0] + coords[1] * f[1];  // [S, H, hd / 2]: f_x x + f_y y
      return rotate_interleaved(x, angles.transpose(0, 1));
    }
    default:
      return x;
  }
}

torch::Tensor VisionTransformerImpl::table_at(int grid) const {
  if (config_.scheme != VisionScheme::kLearned) throw Error("vision model: only the learned scheme has a table");
  const torch::Tensor table =
      grid == config_.train_grid
          ? table_
          : torch::nn::functional::interpolate(table_, torch::nn::functional::InterpolateFuncOptions()
                                                           .size(std::vector<std::int64_t>{grid, grid})
                                                           .mode(torch::kBicubic)
                                                           .align_corners(false));
  return table.flatten(2).transpose(1, 2);  // [1, S, d]
}

torch::Tensor VisionTransformerImpl::forward(const torch::Tensor& patches, int grid) {
  if (patches.dim() != 3 || patches.size(1) != static_cast<std::int64_t>(grid) * grid || patches.size(2) != config_.channels)
    throw Error("vision model: patches must be [B, " + std::to_string(grid * grid) + ", " + std::to_string(config_.channels) + "], got " +
                c10::str(patches.sizes()));
  torch::Tensor h = embed_(patches);
  if (config_.scheme == VisionScheme::kLearned) h = h + table_at(grid);
  for (std::size_t l = 0; l < blocks_.size(); ++l)
    h = blocks_[l]->forward(h, [&](const torch::Tensor& x) { return rotate(x, static_cast<int>(l), grid); });
  return classify_(final_norm_(h).mean(1));
}

}  // namespace posenc::lab
