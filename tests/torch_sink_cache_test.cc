// StreamingLLM's sink cache (posenc_torch/sink_cache.h): after any sequence of evictions its keys
// equal the surviving tokens' keys rotated from scratch at their slot positions (re-rotating), or
// at their stream positions (not re-rotating); a TransformerLM streamed through it keeps layer 0's
// cache equal to one rebuilt from the surviving tokens, and equals its own prefill until the first
// eviction.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cstdio>
#include <string>
#include <vector>

#include "posenc/error.h"
#include "posenc/rope_schedule.h"
#include "posenc_torch/sink_cache.h"
#include "torch_support.h"

namespace posenc::torch_layer {
namespace {

// The token indices a sinks + window cache keeps of a stream of n tokens.
torch::Tensor survivors(std::int64_t n, std::int64_t sinks, std::int64_t window) {
  if (n <= sinks + window) return torch::arange(n, torch::kInt64);
  return torch::cat({torch::arange(sinks, torch::kInt64), torch::arange(n - window, n, torch::kInt64)});
}

// Appends raw keys [B, Hk, c, D] (rotated here at the cache's next positions, as the model
// does) and values to layer 0 of the cache, then evicts.
void append(SinkCache& sink, const torch::Tensor& raw_k, const torch::Tensor& raw_v, const RopeSpec& rope) {
  KVCache& c = sink.cache();
  const std::int64_t B = raw_k.size(0), n = raw_k.size(2), T = c.length();
  const torch::Tensor positions = (torch::arange(T, T + n, torch::kInt64) + c.position_offset).expand({B, n}).contiguous();
  const torch::Tensor k = torch_layer::rope(raw_k, positions, rope);
  c.k.resize(1);
  c.v.resize(1);
  c.k[0] = c.k[0].defined() ? torch::cat({c.k[0], k}, 2) : k;
  c.v[0] = c.v[0].defined() ? torch::cat({c.v[0], raw_v}, 2) : raw_v;
  const torch::Tensor ones = torch::ones({B, n}, torch::kBool);
  c.mask = c.mask.defined() ? torch::cat({c.mask, ones}, 1) : ones;
  sink.evict(rope);
}

TEST(SinkCache, AfterEvictionsItEqualsTheSurvivorsRotatedAtTheirSlots) {
  torch::manual_seed(11);
  const std::int64_t B = 2, Hk = 2, D = 32, sinks = 4, window = 12;
  RopeParams rp;
  rp.head_dim = static_cast<int>(D);
  const RopeSpec rope(compute_schedule(rp));
  const std::vector<std::int64_t> chunks = {7, 1, 1, 5, 13, 1, 9, 1, 1, 1, 30, 2, 1, 40, 1, 1, 3};  // 117 tokens, 15 evictions
  std::int64_t n = 0;
  for (std::int64_t c : chunks) n += c;
  const torch::Tensor raw_k = torch::randn({B, Hk, n, D}), raw_v = torch::randn({B, Hk, n, D});
  for (bool rerotate : {true, false}) {
    SCOPED_TRACE(rerotate ? "re-rotating" : "not re-rotating");
    SinkCache sink({sinks, window, rerotate});
    std::int64_t at = 0;
    for (std::int64_t c : chunks) {
      append(sink, raw_k.narrow(2, at, c), raw_v.narrow(2, at, c), rope);
      at += c;
      ASSERT_EQ(sink.cache().length(), std::min(at, sinks + window));
    }
    EXPECT_EQ(sink.evicted(), n - sinks - window);
    const torch::Tensor kept = survivors(n, sinks, window);
    // Slots 0 .. sinks + window - 1, or the tokens' own places in the stream.
    const torch::Tensor at_positions = (rerotate ? torch::arange(kept.numel(), torch::kInt64) : kept).expand({B, kept.numel()}).contiguous();
    const torch::Tensor expected = torch_layer::rope(raw_k.index_select(2, kept), at_positions, rope);
    EXPECT_TRUE(torch::equal(sink.cache().v[0], raw_v.index_select(2, kept)));
    const double error = (sink.cache().k[0] - expected).abs().max().item<double>();
    std::printf("%s: max |k - k rotated from scratch| = %.3g (max |k| %.3g) after %zu appends\n", rerotate ? "re-rotated" : "not re-rotated",
                error, expected.abs().max().item<double>(), chunks.size());
    if (rerotate) {
      EXPECT_LE(error, 4e-6);  // f32: each shift rounds once more (rope_shift.h)
      EXPECT_GT(error, 0);     // the shift is real arithmetic, not a fresh rotation
    } else {
      EXPECT_EQ(error, 0) << "without re-rotation the keys are the ones rotated on entry";
    }
  }
}

TEST(SinkCache, AModelStreamKeepsLayerZerosCacheEqualToTheSurvivorsRebuilt) {
  ModelConfig c = testing::small_model(Scheme::kRope);
  TransformerLM model = testing::eval_model(c, 7);
  torch::NoGradGuard no_grad;
  const std::int64_t n = 70, sinks = 3, window = 17;
  const torch::Tensor tokens = torch::randint(c.vocab_size, {2, n}, torch::kInt64);
  const torch::Tensor prefill = model->forward(tokens);
  SinkCache sink({sinks, window, true});
  for (std::int64_t t = 0; t < n; ++t) {
    const torch::Tensor logits = model->forward(tokens.narrow(1, t, 1), {}, &sink.cache());
    if (t < sinks + window)  // nothing evicted yet: the stream is the prefill
      ASSERT_LE((logits.select(1, 0) - prefill.select(1, t)).abs().max().item<double>(), 2e-5) << "token " << t;
    sink.evict(model->rotary->spec_for(sinks + window));
  }
  // Layer 0's keys depend on the token alone: a fresh cache over the survivors, at slots 0 ...
  KVCache rebuilt;
  rebuilt.hf_stale_keys = true;
  model->forward(tokens.index_select(1, survivors(n, sinks, window)), {}, &rebuilt);
  EXPECT_LE((sink.cache().k[0] - rebuilt.k[0]).abs().max().item<double>(), 4e-6);
  EXPECT_LE((sink.cache().v[0] - rebuilt.v[0]).abs().max().item<double>(), 1e-6);  // the same projection, other batch shapes
  EXPECT_TRUE(torch::equal(sink.cache().tokens, tokens.index_select(1, survivors(n, sinks, window))));
}

// xPos's keys are cached with their position's scale: re-rotating them to another slot would
// keep the old scale (a silently wrong key), so eviction with rerotate refuses, leaving the cache
// as it was; without re-rotation every key keeps its position and the stream runs.
TEST(SinkCache, XPosKeysAreNotReRotated) {
  TransformerLM model = testing::eval_model(testing::small_model(Scheme::kXpos), 7);
  torch::NoGradGuard no_grad;
  const torch::Tensor tokens = torch::randint(30, {1, 12}, torch::kInt64);
  for (const bool rerotate : {true, false}) {
    SinkCache sink({2, 6, rerotate});
    model->forward(tokens, {}, &sink.cache());
    if (rerotate) {
      try {
        sink.evict(model->rotary->spec_for(8));
        ADD_FAILURE() << "xPos keys re-rotated";
      } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("cannot be re-rotated"), std::string::npos) << e.what();
      }
      EXPECT_EQ(sink.cache().length(), 12) << "nothing evicted";
    } else {
      sink.evict(model->rotary->spec_for(8));
      EXPECT_EQ(sink.cache().length(), 8);
      EXPECT_EQ(model->forward(tokens.narrow(1, 0, 1), {}, &sink.cache()).size(1), 1);
    }
  }
}

TEST(SinkCache, SettingsOutOfRangeAreErrorsNamingThem) {
  for (const auto& [options, fragment] : std::vector<std::pair<SinkCacheOptions, std::string>>{
           {{-1, 8, true}, "sinks = -1 must be in [0, 2^31-1]"}, {{4, 0, true}, "window = 0 must be in [1, 2^31-1 - sinks]"}}) {
    try {
      SinkCache sink(options);
      ADD_FAILURE() << "no error for " << fragment;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace posenc::torch_layer
