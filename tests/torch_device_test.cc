// Every torch entry point that reads tensor memory on the host refuses a tensor on another
// device with a posenc::Error that names the device, before any of its memory is read
// (kernel_view.h: the one check). Meta tensors stand in for CUDA ones: they have a device other
// than the CPU and no memory at all, so reading one would crash or throw from libtorch. (ALiBi's,
// T5's, the learned, XL and DeBERTa modules compute with libtorch operations on the tensors' own
// device and read no memory on the host: they need no refusal.)
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <functional>
#include <memory>
#include <string>

#include "posenc/error.h"
#include "posenc/rope_schedule.h"
#include "posenc_torch/fused_attention.h"
#include "posenc_torch/positional.h"
#include "posenc_torch/rope.h"

namespace posenc::torch_layer {
namespace {

const auto kMeta = torch::TensorOptions().device(torch::kMeta);

// f must throw posenc::Error naming the device ("meta") and what was on it.
void expect_refused(const std::function<void()>& f, const std::string& what) {
  SCOPED_TRACE(what);
  try {
    f();
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("on meta"), std::string::npos) << message;
    EXPECT_NE(message.find(what), std::string::npos) << message;
  } catch (const std::exception& e) {
    ADD_FAILURE() << "not a posenc::Error: " << e.what();
  }
}

RopeSpec spec_of(int head_dim) {
  RopeParams p;
  p.head_dim = head_dim;
  return RopeSpec(compute_schedule(p));
}

TEST(TorchDevice, RopeAndRopeQkRefuseTensorsOffTheCpu) {
  const RopeSpec spec = spec_of(8);
  const torch::Tensor x = torch::randn({1, 2, 4, 8}), positions = torch::arange(4).view({1, 4});
  for (auto dtype : {torch::kFloat, torch::kDouble, torch::kBFloat16}) {
    SCOPED_TRACE(c10::toString(dtype));
    const torch::Tensor on_meta = torch::empty({1, 2, 4, 8}, kMeta.dtype(dtype));
    expect_refused([&] { rope(on_meta, positions, spec); }, "rope: x");
    expect_refused([&] { rope(x.to(dtype), torch::empty({1, 4}, kMeta.dtype(torch::kLong)), spec); }, "rope: positions");
    expect_refused([&] { rope_qk(x.to(dtype), on_meta, positions, spec); }, "rope: k");
    expect_refused([&] { rope_qk(on_meta, x.to(dtype), positions, spec); }, "rope: x");
  }
}

TEST(TorchDevice, RotaryEmbeddingRefusesTensorsOffTheCpu) {
  RopeParams p;
  p.head_dim = 8;
  RotaryEmbedding rotary(p);
  const torch::Tensor x = torch::randn({1, 2, 4, 8}), positions = torch::arange(4).view({1, 4});
  const torch::Tensor x_meta = torch::empty({1, 2, 4, 8}, kMeta), positions_meta = torch::empty({1, 4}, kMeta.dtype(torch::kLong));
  expect_refused([&] { rotary->forward(x_meta, positions, x, positions); }, "RotaryEmbedding: q");
  expect_refused([&] { rotary->forward(x, positions, x_meta, positions); }, "RotaryEmbedding: k");
  expect_refused([&] { rotary->forward(x, positions_meta, x, positions); }, "RotaryEmbedding: q_positions");
  expect_refused([&] { rotary->forward(x, positions, x, positions_meta); }, "RotaryEmbedding: k_positions");
}

TEST(TorchDevice, SinusoidalEncodingRefusesPositionsOffTheCpu) {
  SinusoidalPositionalEncoding sinusoidal(16);
  expect_refused([&] { sinusoidal->forward(torch::empty({2, 4}, kMeta.dtype(torch::kLong))); },
                 "SinusoidalPositionalEncoding: positions");
}

TEST(TorchDevice, FusedAttentionRefusesTensorsOffTheCpu) {
  AttentionParams p;
  p.positions = AttentionPositions::kRope;
  AttentionSpec::Data data;
  data.rope = spec_of(8);
  data.q_positions = data.k_positions = torch::arange(4).view({1, 4});
  data.key_padding = torch::ones({1, 4});
  const auto spec = std::make_shared<const AttentionSpec>(p, data);
  const torch::Tensor x = torch::randn({1, 2, 4, 8}), x_meta = torch::empty({1, 2, 4, 8}, kMeta);
  EXPECT_EQ(fused_attention({x, x, x, {}}, spec).sizes(), (std::vector<std::int64_t>{1, 4, 2, 8})) << "on the CPU it runs";
  expect_refused([&] { fused_attention({x_meta, x, x, {}}, spec); }, "fused_attention: q");
  expect_refused([&] { fused_attention({x, x_meta, x, {}}, spec); }, "fused_attention: k");
  expect_refused([&] { fused_attention({x, x, x_meta, {}}, spec); }, "fused_attention: v");
  expect_refused([&] { fused_attention({x, x, x, torch::empty({32, 2}, kMeta)}, spec); }, "fused_attention: t5_table");
  for (auto [field, what] : {std::pair{&AttentionSpec::Data::q_positions, "fused_attention: q_positions"},
                             std::pair{&AttentionSpec::Data::k_positions, "fused_attention: k_positions"},
                             std::pair{&AttentionSpec::Data::key_padding, "fused_attention: key_padding"}}) {
    AttentionSpec::Data on_meta = data;
    on_meta.*field = torch::empty({1, 4}, kMeta.dtype(torch::kLong));
    expect_refused([&] { AttentionSpec(p, on_meta); }, what);
  }
}

}  // namespace
}  // namespace posenc::torch_layer
