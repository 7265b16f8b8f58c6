#include "lm_stream.h"

#include "posenc/error.h"

namespace posenc::lab {

std::vector<std::pair<std::string, torch_layer::SinkCacheOptions>> stream_variants(const StreamSettings& s, int train_len) {
  const int window = s.window > 0 ? s.window : train_len - s.sinks;
  const std::string label = "stream-s" + std::to_string(s.sinks) + "-w" + std::to_string(window);
  return {{label, {s.sinks, window, true}},
          {label + "-no-rerotate", {s.sinks, window, false}},
          {"stream-s0-w" + std::to_string(s.sinks + window), {0, s.sinks + window, true}}};
}

Score score_stream(torch_layer::TransformerLM& model, const Corpus& corpus, int len, int train_len, long max_tokens,
                   const torch_layer::SinkCacheOptions& options) {
  if (!model->rotary) throw Error("the streaming run needs a RoPE model, got scheme " + std::string(to_string(model->config().scheme)));
  torch::NoGradGuard no_grad;
  model->eval();
  const long streams = std::max<long>(1, std::min<long>(max_tokens / len, (static_cast<long>(corpus.valid.size()) - 1) / len));
  if (static_cast<long>(corpus.valid.size()) < streams * len + 1)
    throw Error("the validation text (" + std::to_string(corpus.valid.size()) + " tokens) is shorter than one stream of " +
                std::to_string(len) + " + 1");
  // [streams, len + 1]: inputs [0, len), targets [1, len] (consecutive streams of the text).
  torch::Tensor ids = torch::empty({streams, len + 1}, torch::kInt64);
  auto acc = ids.accessor<std::int64_t, 2>();
  for (long w = 0; w < streams; ++w)
    for (int i = 0; i <= len; ++i) acc[w][i] = corpus.valid[static_cast<std::size_t>(w * len + i)];
  // The schedule the model rotates its keys with (its own: no extension), for the shifts.
  const torch_layer::RopeSpec rope(model->rotary->schedule());
  torch_layer::SinkCache sink(options);
  Score s;
  for (int t = 0; t < len; ++t) {
    const torch::Tensor logits = model->forward(ids.narrow(1, t, 1), {}, &sink.cache()).view({streams, -1});
    const double nll = torch::nn::functional::cross_entropy(logits, ids.select(1, t + 1),
                                                            torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kSum))
                           .item<double>();
    s.nll += nll;
    s.tokens += streams;
    if (t >= train_len) {
      s.nll_beyond += nll;
      s.tokens_beyond += streams;
    }
    sink.evict(rope);
  }
  return s;
}

}  // namespace posenc::lab
