// Which heads of a trained sort model attend to the previous token, by measurement: the mean
// attention mass each head puts on each offset (query index - key index) over test sequences.
#include <torch/torch.h>

#include <algorithm>

#include "checkpoint.h"
#include "check_range.h"
#include "posenc/error.h"
#include "posenc_lab/sort_task.h"
#include "posenc_torch/model.h"

namespace posenc::lab {

std::vector<HeadOffsets> sort_head_offsets(const HeadOffsetsRequest& r) {
  check_range("--digits", r.digits, 1, kMaxSortTestLen);
  check_range("--sequences", r.sequences, 1, 256);  // one batch: the recorded weights of 256 x 257^2 per head and layer
  torch_layer::TransformerLM model = load_model_file(r.model_path);
  const auto& cfg = model->config();
  if (cfg.vocab_size != 11)
    throw Error(r.model_path + " is not a sort model (its vocabulary has " + std::to_string(cfg.vocab_size) +
                " ids; a sort model's has 11: ten digits and the separator)");
  const int n = r.digits, S = 2 * n + 1;
  if (cfg.scheme == Scheme::kLearned && S > cfg.learned_positions)
    throw Error("--digits " + std::to_string(n) + ": sequences of " + std::to_string(S) + " tokens are longer than this model's learned table (" +
                std::to_string(cfg.learned_positions) + " positions); give --digits <= " + std::to_string((cfg.learned_positions - 1) / 2));
  torch::Tensor tokens = torch::empty({r.sequences, S}, torch::kInt64);
  for (int b = 0; b < r.sequences; ++b) {
    const auto ex = sort_example(n, r.seed * 7919ull + static_cast<unsigned long long>(b));
    for (int i = 0; i < S; ++i) tokens[b][i] = ex[static_cast<std::size_t>(i)];
  }
  torch::NoGradGuard no_grad;
  model->eval();
  for (auto& block : model->blocks) block->attention->record = true;
  model->forward(tokens);
  std::vector<HeadOffsets> out;
  for (int layer = 0; layer < cfg.n_layers; ++layer) {
    // [B, H, S, S] -> mass[h][o]: the mean over sequences and over the queries i >= o of w[i][i - o].
    const torch::Tensor w = model->blocks[static_cast<std::size_t>(layer)]->attention->last_weights.to(torch::kFloat64).mean(0);
    for (int h = 0; h < cfg.n_heads; ++h) {
      HeadOffsets ho;
      ho.layer = layer;
      ho.head = h;
      ho.top_mass = -1;
      for (int o = 0; o < S; ++o) {
        const double mass = w[h].diagonal(-o).mean().item<double>();
        ho.mass.push_back(mass);
        if (mass > ho.top_mass) {
          ho.top_mass = mass;
          ho.top_offset = o;
        }
      }
      out.push_back(std::move(ho));
    }
  }
  return out;
}

}  // namespace posenc::lab
