// The lab's long-context rows (issue 27): the distance remaps as RoPE extensions of `lab
// extrapolate` and `lab passkey` (named with their settings, zero-shot only, leaky ReRoPE the
// identity up to the training length), and `lab extrapolate --stream` (StreamingLLM's sink cache:
// without an eviction it scores what one pass scores; with evictions re-rotation changes it).
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <string>

#include "lab_support.h"
#include "posenc_lab/passkey.h"

namespace posenc::lab {
namespace {

// bpc of the rope model's row (extension, eval_len); NaN when absent.
double bpc_of(const ExtrapolateResult& r, const std::string& extension, int len) {
  for (const ResultRow& row : r.rows)
    if (row.scheme == "rope" && row.extension == extension && row.eval_len == len) return row.bpc;
  return std::nan("");
}

TEST(LabLongContext, RemapsAndStreamsAreRowsOfTheRopeModel) {
  ExtrapolateConfig c = test::tiny("lab_long_context", {"rope"});
  c.extensions = {RopeExtension::kNone, RopeExtension::kSelfExtend, RopeExtension::kLeakyReRope, RopeExtension::kDualChunk};
  c.remaps.groups = {2};
  c.remaps.windows = {4};
  c.stream = {true, 2, 0, 2};  // 2 sinks + 14 recent tokens over streams of 32
  const ExtrapolateResult r = run_extrapolate(c);
  ASSERT_TRUE(r.complete);
  // Leaky ReRoPE's slope is 1 up to the training length: plain RoPE's bits; Self-Extend with
  // w = 4 < 16 is not.
  EXPECT_DOUBLE_EQ(bpc_of(r, "leaky-rerope-w4", 16), bpc_of(r, "none", 16));
  EXPECT_GT(std::fabs(bpc_of(r, "self-extend-g2-w4", 16) - bpc_of(r, "none", 16)), 1e-4);
  EXPECT_GT(std::fabs(bpc_of(r, "leaky-rerope-w4", 32) - bpc_of(r, "none", 32)), 1e-4);
  // Dual Chunk Attention with chunk_size 16, local_size 4 (c = 12): within the training length a
  // key one chunk back keeps its distance (min(q mod c + c, 16) = q), so plain RoPE's numbers;
  // at 32 the earlier chunks' distances are clamped.
  EXPECT_NEAR(bpc_of(r, "dual-chunk-c16-l4", 16), bpc_of(r, "none", 16), 1e-6);
  EXPECT_GT(std::fabs(bpc_of(r, "dual-chunk-c16-l4", 32) - bpc_of(r, "none", 32)), 1e-4);
  const double rerotated = bpc_of(r, "stream-s2-w14", 32), kept = bpc_of(r, "stream-s2-w14-no-rerotate", 32);
  ASSERT_TRUE(std::isfinite(rerotated) && std::isfinite(kept) && std::isfinite(bpc_of(r, "stream-s0-w16", 32)));
  EXPECT_NE(rerotated, kept) << "after evictions the positions differ (a model of 24 steps barely reads them: 3e-5 bits)";
  for (const ResultRow& row : r.rows) {
    if (row.extension.rfind("stream", 0) == 0) {
      EXPECT_EQ(row.tokens, (512 / 32) * 32) << row.extension;
    }
  }
  // A cache as long as the stream evicts nothing: token by token, it is the one-pass score.
  c.stream.window = 30;
  const ExtrapolateResult whole = run_extrapolate(c);  // the trained weights, re-evaluated
  for (const char* label : {"stream-s2-w30", "stream-s2-w30-no-rerotate", "stream-s0-w32"})
    EXPECT_NEAR(bpc_of(whole, label, 32), bpc_of(whole, "none", 32), 1e-5) << label;
  // Settings out of range name the flag.
  c.remaps.groups = {1};
  EXPECT_EQ(test::error_of([&] { run_extrapolate(c); }), "--remap-groups must be in [2, 16384], got 1");
  c.remaps.groups = {2};
  c.remaps.windows = {15};
  EXPECT_EQ(test::error_of([&] { run_extrapolate(c); }), "--remap-windows must be in [1, 14], got 15");
  c.remaps.windows = {};
  c.stream.sinks = 16;
  EXPECT_EQ(test::error_of([&] { run_extrapolate(c); }), "--stream-sinks must be in [0, 15], got 16");
}

TEST(LabLongContext, PasskeyScoresEachRemapSettingZeroShot) {
  PasskeyConfig c;
  c.corpus = test::tiny_corpus();
  c.schemes = {"rope"};
  c.extensions = {RopeExtension::kNone, RopeExtension::kSelfExtend, RopeExtension::kLeakyReRope};
  c.remaps.groups = {2, 4};
  c.remaps.windows = {8};
  c.training = {32, 6, 4, 3e-3, 2, 2, test::fresh_dir("passkey_remaps")};  // train_len, steps, batch, lr, warm-up, checkpoints, out
  c.multiples = {1, 2};
  c.depths = {0, 1};
  c.shape = {1, 32, 2};
  c.finetune_steps = 2;
  c.samples = 3;
  c.curve_chars = 256;
  c.probe_every = 0;
  const PasskeyResult r = run_passkey(c);
  std::map<std::string, int> cells;
  std::map<std::string, double> logp_1x, logp_2x;
  for (const PasskeyRow& row : r.rows) {
    EXPECT_FALSE(row.finetune) << row.extension << ": nothing to fine-tune (no extension but remaps)";
    ++cells[row.extension];
    (row.length == 32 ? logp_1x : logp_2x)[row.extension] += row.logprob;
  }
  EXPECT_EQ(cells, (std::map<std::string, int>{{"none", 4}, {"self-extend-g2-w8", 4}, {"self-extend-g4-w8", 4}, {"leaky-rerope-w8", 4}}));
  EXPECT_EQ(r.curves.size(), 4u);
  EXPECT_EQ(logp_1x["leaky-rerope-w8"], logp_1x["none"]) << "k = 1 at the training length";
  EXPECT_NE(logp_2x["leaky-rerope-w8"], logp_2x["none"]);
  EXPECT_NE(logp_1x["self-extend-g2-w8"], logp_1x["self-extend-g4-w8"]);
  EXPECT_NE(passkey_table(r, c).find("rope+self-extend-g4-w8"), std::string::npos);
}

}  // namespace
}  // namespace posenc::lab
