#include "passkey_score.h"

#include <algorithm>

#include "posenc/error.h"

namespace posenc::lab {

PasskeyScore score_answers(const torch::Tensor& logits, const std::vector<PasskeyExample>& examples) {
  const auto n = static_cast<std::int64_t>(examples.size());
  if (logits.dim() != 3 || logits.size(0) != n) throw Error("score_answers: logits must be [examples, length, vocab]");
  PasskeyScore s;
  if (n == 0) return s;
  // [N, kPasskeyDigits] positions that predict the answer digits, and the digits themselves.
  torch::Tensor at = torch::empty({n, kPasskeyDigits}, torch::kInt64), target = torch::empty({n, kPasskeyDigits}, torch::kInt64);
  auto a = at.accessor<std::int64_t, 2>(), t = target.accessor<std::int64_t, 2>();
  for (std::int64_t i = 0; i < n; ++i) {
    const PasskeyExample& ex = examples[static_cast<std::size_t>(i)];
    if (ex.answer_at < 1 || ex.answer_at + kPasskeyDigits - 1 > logits.size(1))
      throw Error("score_answers: an answer at " + std::to_string(ex.answer_at) + " does not fit logits of length " + std::to_string(logits.size(1)));
    for (int j = 0; j < kPasskeyDigits; ++j) {
      a[i][j] = ex.answer_at + j - 1;
      t[i][j] = ex.tokens[static_cast<std::size_t>(ex.answer_at + j)];
    }
  }
  // float64 log-softmax over the whole vocabulary: a digit id competes with every character.
  const torch::Tensor rows = logits.gather(1, at.unsqueeze(-1).expand({n, kPasskeyDigits, logits.size(2)})).to(torch::kFloat64);
  const torch::Tensor logp = torch::log_softmax(rows, -1);
  s.logprob = logp.gather(2, target.unsqueeze(-1)).mean().item<double>();
  s.accuracy = logp.argmax(-1).eq(target).all(1).to(torch::kFloat64).mean().item<double>();
  s.samples = static_cast<int>(n);
  return s;
}

PasskeyScore score_cell(torch_layer::TransformerLM& model, const std::vector<PasskeyExample>& cell, torch_layer::RotaryEmbeddingImpl* rope,
                        const std::function<void(std::int64_t tokens)>& scored) {
  torch::NoGradGuard no_grad;
  model->eval();
  PasskeyScore total;
  if (cell.empty()) return total;
  const auto length = static_cast<std::int64_t>(cell.front().tokens.size()) - 1;
  const std::size_t group = static_cast<std::size_t>(std::max<std::int64_t>(1, 16384 / length));
  for (std::size_t g = 0; g < cell.size(); g += group) {
    const std::vector<PasskeyExample> part(cell.begin() + static_cast<std::ptrdiff_t>(g),
                                           cell.begin() + static_cast<std::ptrdiff_t>(std::min(cell.size(), g + group)));
    torch::Tensor ids = torch::empty({static_cast<std::int64_t>(part.size()), length}, torch::kInt64);
    for (std::size_t i = 0; i < part.size(); ++i)
      std::copy_n(part[i].tokens.begin(), length, ids.data_ptr<std::int64_t>() + static_cast<std::int64_t>(i) * length);
    const PasskeyScore s = score_answers(model->forward(ids, {}, nullptr, rope), part);
    total.accuracy += s.accuracy * s.samples;
    total.logprob += s.logprob * s.samples;
    total.samples += s.samples;
    if (scored) scored(static_cast<std::int64_t>(part.size()) * length);
  }
  total.accuracy /= total.samples;
  total.logprob /= total.samples;
  return total;
}

std::vector<double> position_bits(torch_layer::TransformerLM& model, const std::vector<std::int64_t>& text, int len, long max_tokens,
                                  torch_layer::RotaryEmbeddingImpl* rope) {
  torch::NoGradGuard no_grad;
  model->eval();
  const long windows = std::max<long>(1, std::min<long>(max_tokens, static_cast<long>(text.size()) - 1) / len);
  if (static_cast<long>(text.size()) < windows * len + 1)
    throw Error("the validation text (" + std::to_string(text.size()) + " tokens) is shorter than one window of " + std::to_string(len) + " + 1");
  // [windows, len + 1] consecutive windows: inputs [0, len), targets [1, len].
  const torch::Tensor all = torch::from_blob(const_cast<std::int64_t*>(text.data()), {windows * len + 1}, torch::kInt64);
  const torch::Tensor ids = all.narrow(0, 0, windows * len).view({windows, len});
  const torch::Tensor next = all.narrow(0, 1, windows * len).view({windows, len});
  torch::Tensor sum = torch::zeros({len}, torch::kFloat64);
  const long group = std::max<long>(1, 16384 / len);
  for (long w = 0; w < windows; w += group) {
    const long n = std::min(group, windows - w);
    const torch::Tensor logits = model->forward(ids.narrow(0, w, n).contiguous(), {}, nullptr, rope);
    const torch::Tensor logp = torch::log_softmax(logits.to(torch::kFloat64), -1).gather(2, next.narrow(0, w, n).unsqueeze(-1)).squeeze(-1);
    sum -= logp.sum(0);
  }
  sum /= static_cast<double>(windows) * kLn2;
  return std::vector<double>(sum.data_ptr<double>(), sum.data_ptr<double>() + len);
}

}  // namespace posenc::lab
