// Tensors off the CPU: every torch entry point runs its torch-native path on the tensors' device
// (rope_native, attention_native) instead of handing device memory to the kernels, and reads
// nothing of their memory on the host. Meta tensors stand in for CUDA ones: they have a device
// other than the CPU and no memory at all, so a kernel reading one, or a host read (.item(),
// a copy to the CPU), would throw from libtorch; the native path gives meta results of the right
// shapes. (The values are tested on the CPU, where the native path is forced:
// torch_native_path_test.cc.) RoPE's positions, attention's small tensors (positions, padding,
// bias), the sinusoidal table and T5's buckets are checked or computed on the host from a copy:
// on a GPU that copy is made; a meta tensor has nothing to copy.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <memory>
#include <string>

#include "posenc/error.h"
#include "posenc/rope_schedule.h"
#include "posenc_torch/attention_op.h"
#include "posenc_torch/fused_attention.h"
#include "posenc_torch/rope.h"
#include "posenc_torch/rope_op.h"

namespace posenc::torch_layer {
namespace {

const auto kMeta = torch::TensorOptions().device(torch::kMeta);

RopeSpec spec_of(int head_dim) {
  RopeParams p;
  p.head_dim = head_dim;
  return RopeSpec(compute_schedule(p));
}

void expect_on_meta(const torch::Tensor& x, const std::vector<std::int64_t>& sizes, torch::ScalarType dtype) {
  EXPECT_TRUE(x.is_meta());
  EXPECT_EQ(x.sizes().vec(), sizes);
  EXPECT_EQ(x.scalar_type(), dtype);
}

TEST(TorchDevice, RopeAndRopeQkRunTheFormulaOnTheTensorsDevice) {
  const RopeSpec spec = spec_of(8);
  const torch::Tensor positions = torch::arange(4).view({1, 4});
  for (auto dtype : {torch::kFloat, torch::kDouble, torch::kBFloat16}) {
    SCOPED_TRACE(c10::toString(dtype));
    const torch::Tensor q = torch::empty({1, 2, 4, 8}, kMeta.dtype(dtype)), k = torch::empty({1, 1, 4, 8}, kMeta.dtype(dtype));
    expect_on_meta(rope(q, positions, spec), {1, 2, 4, 8}, dtype);
    // Positions are checked on the host as the kernels check them (a GPU's are copied there): a
    // meta tensor has nothing to copy.
    EXPECT_THROW(rope(q, positions.to(torch::kMeta), spec), c10::Error);
    const auto [qr, kr] = rope_qk(q, k, positions, spec);
    expect_on_meta(qr, {1, 2, 4, 8}, dtype);
    expect_on_meta(kr, {1, 1, 4, 8}, dtype);
    RopeOpArgs a;
    a.inv_freq = torch::tensor(spec.inv_freq(), torch::kFloat);
    expect_on_meta(rope_op(q, a), {1, 2, 4, 8}, dtype);
  }
}

TEST(TorchDevice, RotaryEmbeddingRunsOnTheTensorsDevice) {
  RopeParams p;
  p.head_dim = 8;
  RotaryEmbedding rotary(p);
  const torch::Tensor q = torch::empty({1, 2, 4, 8}, kMeta), k = torch::empty({1, 1, 4, 8}, kMeta);
  const torch::Tensor positions = torch::arange(4).view({1, 4});  // the runtime rule reads its largest on the host
  const auto [qr, kr] = rotary->forward(q, positions, k, positions);
  expect_on_meta(qr, {1, 2, 4, 8}, torch::kFloat);
  expect_on_meta(kr, {1, 1, 4, 8}, torch::kFloat);
}

TEST(TorchDevice, AttentionRunsTheNativePathOnTheTensorsDevice) {
  const torch::Tensor q = torch::empty({2, 4, 5, 8}, kMeta), kv = torch::empty({2, 2, 7, 8}, kMeta);
  for (const char* positions : {"none", "rope", "alibi", "forget-gate"}) {
    SCOPED_TRACE(positions);
    AttentionOpArgs a;
    a.positions = positions;
    if (a.positions == "rope") a.inv_freq = torch::tensor(spec_of(8).inv_freq(), torch::kFloat);  // on the CPU: it is copied
    if (a.positions == "alibi") a.alibi_slopes = {0.5, 0.25, 0.125, 0.0625};
    if (a.positions == "forget-gate") a.bias = torch::empty({2, 4, 7}, kMeta);
    a.window = 3;
    if (a.positions == "forget-gate") {  // its c is checked on the host: a meta c cannot be
      EXPECT_THROW(attention_op(q, kv, kv, a), c10::Error);
      continue;
    }
    const auto [out, lse] = attention_op(q, kv, kv, a);
    expect_on_meta(out, {2, 4, 5, 8}, torch::kFloat);
    expect_on_meta(lse, {2, 4, 5}, torch::kFloat);
  }
}

TEST(TorchDevice, AttentionRefusesTensorsOnTwoDevicesNamingThem) {
  const torch::Tensor on_cpu = torch::randn({1, 2, 4, 8}), on_meta = torch::empty({1, 2, 4, 8}, kMeta);
  try {
    attention_op(on_meta, on_cpu, on_cpu, {});
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("k is on cpu and q on meta"), std::string::npos) << e.what();
  }
}

TEST(TorchDevice, FusedAttentionRunsOnTheTensorsDevice) {
  AttentionParams p;
  p.positions = AttentionPositions::kRope;
  AttentionSpec::Data data;
  data.rope = spec_of(8);
  data.q_positions = data.k_positions = torch::arange(4).view({1, 4});
  const auto spec = std::make_shared<const AttentionSpec>(p, data);
  const torch::Tensor x = torch::randn({1, 2, 4, 8}), x_meta = torch::empty({1, 2, 4, 8}, kMeta);
  EXPECT_EQ(fused_attention({x, x, x, {}, {}, {}}, spec).sizes(), (std::vector<std::int64_t>{1, 4, 2, 8})) << "on the CPU: the kernel";
  expect_on_meta(fused_attention({x_meta, x_meta, x_meta, {}, {}, {}}, spec), {1, 4, 2, 8}, torch::kFloat);
}

}  // namespace
}  // namespace posenc::torch_layer
