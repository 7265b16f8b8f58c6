// The torch-native paths (rope_op.h rope_native, attention_op.h attention_native), forced on the
// CPU and compared with the kernels they stand in for off the CPU: values and gradients, for every
// layout and direction of RoPE and every positions kind, remap and mask of attention. Float32
// inputs: both compute in float32 (the kernels with FMA and a vector exp, the native path in
// torch's order), so they agree to float rounding of sums over D and T (tolerances below).
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "posenc/error.h"
#include "posenc/rope_schedule.h"
#include "posenc_torch/attention_op.h"
#include "posenc_torch/rope_op.h"

namespace posenc::torch_layer {
namespace {

torch::Tensor inv_freq(int head_dim, double theta = 10000.0) {
  RopeParams p;
  p.head_dim = head_dim;
  p.theta = theta;
  const std::vector<float> f = compute_schedule(p).inv_freq;
  return torch::tensor(f, torch::kFloat32);
}

double max_diff(const torch::Tensor& a, const torch::Tensor& b) { return (a.to(torch::kDouble) - b.to(torch::kDouble)).abs().max().item<double>(); }

// Gradients of sum(out * weights) in x's of `inputs`, through f.
std::vector<torch::Tensor> gradients(const std::function<torch::Tensor(const std::vector<torch::Tensor>&)>& f,
                                     const std::vector<torch::Tensor>& inputs, const torch::Tensor& weights) {
  std::vector<torch::Tensor> leaves;
  for (const torch::Tensor& x : inputs) leaves.push_back(x.detach().requires_grad_(true));
  const torch::Tensor out = f(leaves);
  const std::vector<torch::Tensor> g = torch::autograd::grad({(out.to(torch::kFloat) * weights).sum()}, leaves);
  return g;
}

TEST(TorchNativePath, RopeEqualsTheKernelsForEveryLayoutDirectionAndPositionsKind) {
  torch::manual_seed(3);
  const torch::Tensor x = torch::randn({2, 3, 5, 16});
  struct Positions {
    const char* name;
    c10::optional<torch::Tensor> ids;
    std::vector<std::int64_t> axes;
    std::int64_t offset;
  };
  const std::vector<std::int64_t> mrope = {0, 0, 1, 1, 2, 2};  // 6 frequencies over 3 axes
  const Positions kinds[] = {
      {"none + offset", c10::nullopt, {}, 7},
      {"[S]", torch::tensor({4, 0, 9, 2, 30}), {}, 0},
      {"[B, S] + offset", torch::randint(0, 1000, {2, 5}), {}, 3},
      {"[axes, B, S] (M-RoPE)", torch::randint(0, 50, {3, 2, 5}), mrope, 0},
  };
  for (const Positions& kind : kinds)
    for (const char* layout : {"half_split", "interleaved", "deepseek_v3"})
      for (const std::int64_t direction : {1, -1})
        for (const double xpos : {0.0, 64.0}) {
          if (xpos != 0 && !kind.axes.empty()) continue;
          SCOPED_TRACE(std::string(kind.name) + " " + layout + " direction " + std::to_string(direction) + " xpos " +
                       std::to_string(xpos));
          RopeOpArgs a;
          a.positions = kind.ids;
          a.inv_freq = inv_freq(12);  // rotary 12 of 16 channels: 4 pass through
          a.axis_of_freq = kind.axes;
          a.attention_factor = 1.25;
          a.layout = layout;
          a.offset = kind.offset;
          a.direction = direction;
          a.xpos_scale_base = xpos;
          a.xpos_role = direction > 0 ? "query" : "key";
          const torch::Tensor kernel = rope_op(x, a), native = rope_native(x, a);
          EXPECT_LE(max_diff(kernel, native), 2e-6);
          EXPECT_EQ(max_diff(native.narrow(-1, 12, 4), x.narrow(-1, 12, 4)), 0.0) << "channels past the rotary dim";
          const torch::Tensor w = torch::randn(x.sizes());
          const auto gk = gradients([&](const auto& in) { return rope_op(in[0], a); }, {x}, w);
          const auto gn = gradients([&](const auto& in) { return rope_native(in[0], a); }, {x}, w);
          EXPECT_LE(max_diff(gk[0], gn[0]), 2e-6);
          const torch::Tensor half = x.to(torch::kBFloat16);  // bf16 storage, float32 math in both
          EXPECT_LE(max_diff(rope_op(half, a), rope_native(half, a)), 0.02) << "bf16: within its rounding (8 bits)";
          EXPECT_EQ(rope_native(half, a).scalar_type(), torch::kBFloat16);
        }
}

TEST(TorchNativePath, RopeGivesLearnedFrequenciesTheirGradient) {
  torch::manual_seed(4);
  const torch::Tensor x = torch::randn({1, 2, 6, 8}, torch::kFloat64);
  RopeOpArgs a;
  a.positions = torch::arange(6) * 3;
  a.inv_freq = inv_freq(8).to(torch::kFloat64).requires_grad_(true);
  const torch::Tensor w = torch::randn(x.sizes(), torch::kFloat64);
  const torch::Tensor g = torch::autograd::grad({(rope_native(x, a) * w).sum()}, {a.inv_freq})[0];
  for (int i = 0; i < 4; ++i) {  // central differences in double
    const double h = 1e-6;
    RopeOpArgs up = a, down = a;
    up.inv_freq = a.inv_freq.detach().clone();
    down.inv_freq = a.inv_freq.detach().clone();
    up.inv_freq[i] += h;
    down.inv_freq[i] -= h;
    const double numeric = ((rope_native(x, up) * w).sum() - (rope_native(x, down) * w).sum()).item<double>() / (2 * h);
    EXPECT_NEAR(g[i].item<double>(), numeric, 1e-6 * (1 + std::abs(numeric))) << "frequency " << i;
  }
}

// What the kernels refuse, the native path refuses (their own checks, rope_apply.h validate, on
// a host copy of the positions), with posenc::Error.
TEST(TorchNativePath, RopeRefusesWhatTheKernelsRefuse) {
  const torch::Tensor x = torch::randn({1, 2, 3, 16});
  const auto bad = [&](const std::string& what, const std::function<void(RopeOpArgs&)>& set) {
    SCOPED_TRACE(what);
    RopeOpArgs a;
    a.inv_freq = inv_freq(16);
    set(a);
    EXPECT_THROW(rope_op(x, a), Error);
    EXPECT_THROW(rope_native(x, a), Error);
  };
  bad("a negative position", [](RopeOpArgs& a) { a.positions = torch::tensor({0, -5, 2}); });
  bad("a negative offset", [](RopeOpArgs& a) { a.offset = -3; });
  bad("a position past 2^31 - 1", [](RopeOpArgs& a) { a.positions = torch::tensor({std::int64_t{0}, std::int64_t{1}, std::int64_t{1} << 40}); });
  bad("an attention factor that is not finite", [](RopeOpArgs& a) { a.attention_factor = std::nan(""); });
  bad("xPos past its exponent bound", [](RopeOpArgs& a) {
    a.xpos_scale_base = 1;
    a.positions = torch::tensor({0, 1, 1000000});
  });
}

// One attention configuration: the op's arguments and the shapes.
struct Case {
  std::string name;
  AttentionOpArgs args;
  std::int64_t heads = 4, kv_heads = 2, q_tokens = 6, k_tokens = 9, head_dim = 16;
};

std::vector<Case> cases() {
  std::vector<Case> all;
  const auto add = [&](const std::string& name, const std::function<void(Case&)>& set) {
    Case c;
    c.name = name;
    set(c);
    all.push_back(c);
  };
  const auto rope = [](Case& c) {
    c.args.positions = "rope";
    c.args.inv_freq = inv_freq(static_cast<int>(c.head_dim));
  };
  add("none, causal", [](Case&) {});
  add("none, bidirectional, padding", [](Case& c) {
    c.args.causal = false;
    c.args.key_padding = torch::tensor({1, 1, 0, 1, 1, 1, 0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0}).view({2, 9});
  });
  add("none, window 3, chunk 4, past 1", [](Case& c) {
    c.args.window = 3;
    c.args.chunk = 4;
    c.args.past = 1;
  });
  add("rope, explicit [B, S] ids", [&](Case& c) {
    rope(c);
    c.args.q_positions = torch::tensor({20, 21, 22, 23, 24, 25, 3, 4, 5, 6, 7, 8}).view({2, 6});
    c.args.k_positions = torch::arange(17, 26).repeat({2, 1}) - torch::tensor({0, 17}).view({2, 1});
  });
  add("rope, interleaved, offsets, [1, S] ids", [&](Case& c) {
    rope(c);
    c.args.rope_layout = "interleaved";
    c.args.q_positions = torch::arange(6).view({1, 6});
    c.args.k_positions = torch::arange(9).view({1, 9});
    c.args.q_offset = 100;
    c.args.k_offset = 97;
    c.args.attention_factor = 1.1;
  });
  add("rope + xPos, channel offset 4, rotated heads 2", [&](Case& c) {
    c.args.positions = "rope";
    c.args.inv_freq = inv_freq(8);
    c.args.xpos_scale_base = 32;
    c.args.xpos_center = 3;
    c.args.rope_channel_offset = 4;
    c.args.rope_rotated_heads = 2;
  });
  for (const char* remap : {"self-extend", "rerope", "leaky-rerope", "dual-chunk"})
    add(std::string("rope, remap ") + remap, [&](Case& c) {
      rope(c);
      c.q_tokens = c.k_tokens = 24;
      c.args.remap = remap;
      c.args.remap_window = 5;
      c.args.remap_group = 3;
      c.args.remap_leak = 2.5;
      c.args.remap_chunk_size = 8;
      c.args.remap_local_size = 3;
    });
  add("alibi, causal", [](Case& c) {
    c.args.positions = "alibi";
    c.args.alibi_slopes = {0.5, 0.25, 0.125, 0.0625};
  });
  add("alibi, symmetric, bidirectional", [](Case& c) {
    c.args.positions = "alibi";
    c.args.causal = false;
    c.args.alibi_symmetric = true;
    c.args.alibi_slopes = {0.5, 0.25, 0.125, 0.0625};
  });
  for (const bool bidirectional : {true, false})
    add(std::string("t5, ") + (bidirectional ? "bidirectional" : "causal") + ", far ids", [&](Case& c) {
      c.args.positions = "t5";
      c.args.causal = !bidirectional;
      c.args.scale = 1;
      c.args.t5_num_buckets = 8;
      c.args.t5_max_distance = 20;
      c.args.t5_bidirectional = bidirectional;
      c.args.bias = torch::randn({8, 4});
      c.args.q_positions = torch::tensor({0, 1, 2, 30, 31, 60}).view({1, 6});
      c.args.k_positions = torch::tensor({0, 1, 2, 3, 10, 29, 30, 45, 61}).view({1, 9});
    });
  add("t5, max_distance 2^31 - 1, ids 4e7 apart", [](Case& c) {
    c.args.positions = "t5";
    c.args.causal = false;
    c.args.scale = 1;
    c.args.t5_num_buckets = 32;
    c.args.t5_max_distance = 2147483647;
    c.args.t5_bidirectional = true;
    c.args.bias = torch::randn({32, 4});
    c.args.q_positions = torch::tensor({0, 5, 17, 300, 40000000, 40000001}).view({1, 6});
    c.args.k_positions = torch::tensor({0, 1, 9, 100, 5000, 70000, 1000000, 39999999, 40000000}).view({1, 9});
  });
  for (const char* side : {"absolute", "signed"})
    add(std::string("distance-table, ") + side, [&](Case& c) {
      c.args.positions = "distance-table";
      c.args.causal = false;
      c.args.distance_length = 16;
      c.args.distance_side = side;
      c.args.bias = torch::randn({4, std::string(side) == "signed" ? 31 : 16});
    });
  add("forget-gate", [](Case& c) {
    c.args.positions = "forget-gate";
    c.args.bias = torch::randn({2, 4, 9}).cumsum(2) * 0.3;
  });
  add("decode: one query, GQA 4:1", [&](Case& c) {
    rope(c);
    c.kv_heads = 1;
    c.q_tokens = 1;
  });
  return all;
}

TEST(TorchNativePath, AttentionEqualsTheKernelForEveryPositionsKindRemapAndMask) {
  for (const Case& c : cases()) {
    SCOPED_TRACE(c.name);
    torch::manual_seed(11);
    const torch::Tensor q = torch::randn({2, c.heads, c.q_tokens, c.head_dim});
    const torch::Tensor k = torch::randn({2, c.kv_heads, c.k_tokens, c.head_dim}), v = torch::randn(k.sizes());
    const auto [out_k, lse_k] = attention_op(q, k, v, c.args);
    const auto [out_n, lse_n] = attention_native(q, k, v, c.args);
    EXPECT_LE(max_diff(out_k, out_n), 2e-5);
    EXPECT_LE(max_diff(lse_k, lse_n), 2e-5);
    // Gradients in q, k, v and the bias input (T5's table, the distance table, FoX's c).
    const bool has_bias = c.args.bias.has_value();
    std::vector<torch::Tensor> inputs = {q, k, v};
    if (has_bias) inputs.push_back(*c.args.bias);
    const auto run = [&](bool native) {
      return [&, native](const std::vector<torch::Tensor>& in) {
        AttentionOpArgs a = c.args;
        if (has_bias) a.bias = in[3];
        return (native ? attention_native(in[0], in[1], in[2], a) : attention_op(in[0], in[1], in[2], a)).first;
      };
    };
    const torch::Tensor w = torch::randn(out_k.sizes());
    const auto gk = gradients(run(false), inputs, w), gn = gradients(run(true), inputs, w);
    for (std::size_t i = 0; i < gk.size(); ++i) EXPECT_LE(max_diff(gk[i], gn[i]), 5e-5) << "gradient " << i;
  }
}

TEST(TorchNativePath, AttentionRowsThatSeeNoKeyGetZerosMinusInfinityAndFiniteGradients) {
  AttentionOpArgs a;
  a.key_padding = torch::tensor({0, 0, 0, 1, 1, 1, 1, 1}).view({1, 8});  // queries 0 .. 2 see only padding
  a.past = 0;
  const torch::Tensor q = torch::randn({1, 2, 8, 8}, torch::requires_grad()), k = torch::randn({1, 2, 8, 8}), v = torch::randn({1, 2, 8, 8});
  const auto [out, lse] = attention_native(q, k, v, a);
  EXPECT_EQ(out.narrow(2, 0, 3).abs().max().item<float>(), 0.0f);
  EXPECT_TRUE(torch::isinf(lse.narrow(2, 0, 3)).all().item<bool>());
  EXPECT_FALSE(torch::isinf(lse.narrow(2, 3, 5)).any().item<bool>());
  out.sum().backward();
  EXPECT_TRUE(torch::isfinite(q.grad()).all().item<bool>());
}

TEST(TorchNativePath, AttentionChecksItsArgumentsAsTheKernelDoes) {
  const torch::Tensor x = torch::randn({1, 4, 5, 8});
  AttentionOpArgs a;
  a.positions = "alibi";
  a.alibi_slopes = {0.5, 0.25};  // 2 slopes for 4 heads
  std::string kernel_message, native_message;
  try {
    attention_op(x, x, x, a);
  } catch (const Error& e) {
    kernel_message = e.what();
  }
  try {
    attention_native(x, x, x, a);
  } catch (const Error& e) {
    native_message = e.what();
  }
  EXPECT_NE(kernel_message.find("one slope per query head"), std::string::npos) << kernel_message;
  EXPECT_EQ(native_message, kernel_message);
  AttentionOpArgs rope;
  rope.positions = "rope";
  rope.inv_freq = inv_freq(8);
  rope.remap = "rerope";
  rope.remap_window = 2;
  rope.xpos_scale_base = 16;  // a remap takes plain RoPE: validate_attention's refusal
  try {
    attention_native(x, x, x, rope);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("a distance remap takes plain RoPE"), std::string::npos) << e.what();
  }
  // Learned frequencies: the kernel gives them no gradient and says so; the native path differentiates them.
  rope.remap = "none";
  rope.xpos_scale_base = 0;
  rope.inv_freq = inv_freq(8).requires_grad_(true);
  EXPECT_THROW(attention_op(x, x, x, rope), Error);
  attention_native(x, x, x, rope).first.sum().backward();
  EXPECT_TRUE(rope.inv_freq->grad().defined());
}

}  // namespace
}  // namespace posenc::torch_layer
