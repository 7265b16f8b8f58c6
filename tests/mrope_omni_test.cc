// Issue 26: the Omni models' position ids where they part from Qwen2-VL's. Qwen2.5-Omni's video with
// its audio (modeling_qwen2_5_omni.py get_rope_index's use_audio_in_video branch, get_chunked_index)
// against a second formulation (each token's chunk = floor(T offset / chunk)) and against sequences
// worked by hand; Qwen3-Omni-MoE's float walk (modeling_qwen3_omni_moe.py get_rope_index) by hand
// in float32. python/tests/test_mrope_omni.py runs HF's own code on the same kind of sequences.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <functional>
#include <limits>

#include "expect_error.h"
#include "posenc/mrope.h"

namespace posenc {
namespace {

using Ids = std::vector<std::int64_t>;

Ids axis(const MropeIndex& x, int a) { return Ids(x.ids.begin() + a * x.seq_len, x.ids.begin() + (a + 1) * x.seq_len); }
std::vector<double> axis(const MropeFloatIndex& x, int a) {
  return std::vector<double>(x.ids.begin() + a * x.seq_len, x.ids.begin() + (a + 1) * x.seq_len);
}

TokenRun video_with_audio(int audio_tokens, int t, int h, int w, double seconds_per_grid, double time_interval) {
  TokenRun r{TokenRun::kVideoWithAudio, audio_tokens, t, h, w, time_interval};
  r.seconds_per_grid = seconds_per_grid;
  return r;
}

// text `before`, the video with audio, text `after` the other way: every video token (f, y, x) and
// audio token j belongs to chunk floor(offset / C) with C = int(time_interval * seconds_per_chunk);
// chunks in order, video before audio in each; the bos pair at `before`, the eos pair at 1 + the
// max over the last group written (the last chunk's audio if it has any, else its video). Equal to
// HF's get_chunked_index when no frame's T offset jumps a whole chunk past the previous frame's.
std::array<Ids, 3> by_floor_chunks(int before, const TokenRun& v, int m, int after) {
  struct Token {
    std::int64_t chunk;
    int audio;
    std::array<std::int64_t, 3> id;
  };
  const std::int64_t s = before + 1, C = static_cast<std::int64_t>(v.time_interval * v.seconds_per_chunk);
  std::vector<Token> body;
  for (int f = 0; f < v.t; ++f) {
    const auto tt = static_cast<std::int64_t>(float(f) * float(v.seconds_per_grid) * float(v.time_interval));
    for (int y = 0; y < v.h / m; ++y)
      for (int x = 0; x < v.w / m; ++x) body.push_back({tt / C, 0, {s + tt, s + y, s + x}});
  }
  for (int j = 0; j < v.length; ++j) body.push_back({j / C, 1, {s + j, s + j, s + j}});
  std::stable_sort(body.begin(), body.end(), [](const Token& a, const Token& b) { return std::tie(a.chunk, a.audio) < std::tie(b.chunk, b.audio); });
  std::int64_t last = 0;
  for (const Token& k : body)
    if (k.chunk == body.back().chunk && k.audio == body.back().audio) last = std::max({last, k.id[0], k.id[1], k.id[2]});
  std::array<Ids, 3> out;
  auto text = [&](std::int64_t from, int n) {
    for (int i = 0; i < n; ++i)
      for (Ids& a : out) a.push_back(from + i);
  };
  text(0, before);
  text(before, 1);
  text(before, 1);  // the bos pair: one id
  for (const Token& k : body)
    for (int a = 0; a < 3; ++a) out[a].push_back(k.id[a]);
  text(last + 1, 1);
  text(last + 1, 1);  // the eos pair: one id
  text(last + 2, after);
  return out;
}

TEST(MropeOmni, Qwen25VideoWithAudioInterleavesChunks) {
  // 25 ids per second, 2 s chunks (50 ids): T offsets 0, 25, .., 100 against 130 audio tokens; the
  // audio's third chunk is last. Then 1 s chunks at 0.5 s per grid (T 0, 12, 25, 37, 50) with the
  // video's chunk last, and a 20 x 20 frame whose eos falls among its own rows and columns.
  TokenRun a = video_with_audio(130, 5, 4, 8, 1.0, 25);
  TokenRun b = video_with_audio(40, 5, 4, 4, 0.5, 25);
  b.seconds_per_chunk = 1;
  const TokenRun c = video_with_audio(12, 1, 40, 40, 1.0, 25);
  for (const TokenRun& v : {a, b, c}) {
    const MropeIndex x = mrope_position_ids({{TokenRun::kText, 2}, v, {TokenRun::kText, 3}}, 2, MropeIndexRule::kV4_49);
    const std::array<Ids, 3> want = by_floor_chunks(2, v, 2, 3);
    ASSERT_EQ(x.seq_len, static_cast<std::int64_t>(want[0].size()));
    for (int ax = 0; ax < 3; ++ax) EXPECT_EQ(axis(x, ax), want[static_cast<std::size_t>(ax)]) << "axis " << ax;
    EXPECT_EQ(x.rope_delta, *std::max_element(x.ids.begin(), x.ids.end()) + 1 - x.seq_len);
  }
  EXPECT_EQ(axis(mrope_position_ids({{TokenRun::kText, 2}, c}, 2, MropeIndexRule::kV4_49), 0).back(), 3 + 12)
      << "eos = the audio chunk's max + 1, below the frame's rows and columns (up to 22)";
}

// By hand, 4 s per grid: video T offsets 0 (4 tokens) and 100 (4), 70 audio tokens, chunks of 50.
// HF splits once per token: at the first 100 (>= 50, the next boundary 100) and again at the second
// (>= 100): video chunks [0, 4), [4, 5), [5, 8); audio [0, 50), [50, 70). Text 0, bos 1 1, s = 2:
// video (T 2), audio 2..51, video (T 102), audio 52..71, video (T 102) x 3, eos 103 103 (the last
// chunk is video: its max 102), text 104.
TEST(MropeOmni, Qwen25ChunksSplitOncePerToken) {
  const MropeIndex x = mrope_position_ids({{TokenRun::kText, 1}, video_with_audio(70, 2, 4, 4, 4.0, 25), {TokenRun::kText, 1}}, 2,
                                          MropeIndexRule::kV4_49);
  Ids T = {0, 1, 1, 2, 2, 2, 2}, H = {0, 1, 1, 2, 2, 3, 3}, W = {0, 1, 1, 2, 3, 2, 3};
  auto seq = [&](std::int64_t from, std::int64_t to) {
    for (std::int64_t i = from; i < to; ++i)
      for (Ids* a : {&T, &H, &W}) a->push_back(i);
  };
  seq(2, 52);
  T.push_back(102), H.push_back(2), W.push_back(2);
  seq(52, 72);
  T.insert(T.end(), {102, 102, 102}), H.insert(H.end(), {2, 3, 3}), W.insert(W.end(), {3, 2, 3});
  for (std::int64_t id : {103, 103, 104})
    for (Ids* a : {&T, &H, &W}) a->push_back(id);
  EXPECT_EQ(axis(x, 0), T);
  EXPECT_EQ(axis(x, 1), H);
  EXPECT_EQ(axis(x, 2), W);
  EXPECT_EQ(x.rope_delta, 105 - 84);
}

// After a video with audio the next piece starts at the LAST piece's max + 1. Text 0, bos 1 1, an
// 8 x 8 frame at 2 (rows, columns to 9) and audio 2, 3 (the last chunk): eos 4 4, text 5; an image
// at 6 (max 7), text 8, not 10 (the sequence's max 9 + 1). rope_delta from the sequence's max.
TEST(MropeOmni, Qwen25NextPieceFollowsTheLastPiece) {
  const TokenRun image{TokenRun::kImage, 0, 1, 4, 4, 25};
  const MropeIndex x = mrope_position_ids({{TokenRun::kText, 1}, video_with_audio(2, 1, 16, 16, 1.0, 25), {TokenRun::kText, 1}, image,
                                           {TokenRun::kText, 1}},
                                          2, MropeIndexRule::kV4_49);
  ASSERT_EQ(x.seq_len, 77);
  const Ids T = axis(x, 0), H = axis(x, 1);
  EXPECT_EQ(Ids(T.end() - 10, T.end()), (Ids{2, 3, 4, 4, 5, 6, 6, 6, 6, 8}));
  EXPECT_EQ(Ids(H.end() - 5, H.end()), (Ids{6, 6, 7, 7, 8}));
  EXPECT_EQ(*std::max_element(H.begin(), H.end()), 9);
  EXPECT_EQ(x.rope_delta, 10 - 77);
}

// Qwen3-Omni at 12.5 ids per second: text 0 1, bos 2 3, s = 4; video T 4 (x4) and 16.5 (x4), audio
// 4..17 (14 tokens). Merged on T, video first on a tie: 4 video, audio 4..16, 4 video at 16.5 (<= 17),
// the audio's tail 17 (the last piece); eos 18 19, text 20. Fractional ids stay fractional.
TEST(MropeOmni, Qwen3MergesOnTimeAndKeepsFractions) {
  const MropeFloatIndex x =
      qwen3_omni_position_ids({{TokenRun::kText, 2}, video_with_audio(14, 2, 4, 4, 1.0, 12.5), {TokenRun::kText, 1}}, 2);
  std::vector<double> T = {0, 1, 2, 3, 4, 4, 4, 4}, H = {0, 1, 2, 3, 4, 4, 5, 5}, W = {0, 1, 2, 3, 4, 5, 4, 5};
  for (int i = 4; i <= 16; ++i)
    for (auto* a : {&T, &H, &W}) a->push_back(i);
  T.insert(T.end(), {16.5, 16.5, 16.5, 16.5}), H.insert(H.end(), {4, 4, 5, 5}), W.insert(W.end(), {4, 5, 4, 5});
  for (double id : {17, 18, 19, 20})
    for (auto* a : {&T, &H, &W}) a->push_back(id);
  EXPECT_EQ(axis(x, 0), T);
  EXPECT_EQ(axis(x, 1), H);
  EXPECT_EQ(axis(x, 2), W);
  EXPECT_EQ(x.rope_delta, 21.0 - 29);
  // The audio's tail last, below an 8 x 8 frame's rows and columns (to 9): bos 0 1, s = 2, the
  // frame (T 2, all before audio 2 on the tie), audio 2 3, eos 4 5 from the tail's max.
  const MropeFloatIndex y = qwen3_omni_position_ids({video_with_audio(2, 1, 16, 16, 1.0, 13)}, 2);
  const std::vector<double> T2 = axis(y, 0), H2 = axis(y, 1);
  EXPECT_EQ(std::vector<double>(T2.end() - 4, T2.end()), (std::vector<double>{2, 3, 4, 5}));
  EXPECT_EQ(*std::max_element(H2.begin(), H2.end()), 9);
}

// Qwen3-Omni at 3 fps (2/3 s per grid, 13 ids per second), no audio: HF's float32 T offsets
// f32(f32(f * f32(2/3)) * 13) plus the start, the eos at the video's max + 1 and the text after
// at that + 1, each sum rounded to float32. Text 0 1, image at 2 (max 3), text 4 (eos) 5 6, video at 7.
TEST(MropeOmni, Qwen3RoundsAsFloat32) {
  TokenRun video{TokenRun::kVideo, 0, 6, 2, 2, 13};
  video.seconds_per_grid = 2.0 / 3;
  const MropeFloatIndex x = qwen3_omni_position_ids(
      {{TokenRun::kText, 2}, {TokenRun::kImage, 0, 1, 4, 4, 13}, {TokenRun::kText, 3}, video, {TokenRun::kText, 2}}, 2);
  std::vector<double> T = {0, 1, 2, 2, 2, 2, 4, 5, 6}, H = {0, 1, 2, 2, 3, 3, 4, 5, 6};
  const float spg = static_cast<float>(2.0 / 3);
  float top = 0;
  for (int f = 0; f < 6; ++f) {
    top = float(f) * spg * 13.0f + 7.0f;
    T.push_back(top);
    H.push_back(7);
  }
  EXPECT_EQ(T.back(), 7 + 43.333335876464844) << "frame 5: float32 products";
  EXPECT_NE(T.back(), double(float(7 + 5 * (2.0 / 3) * 13))) << "not the real 50.333.. rounded once";
  const float eos = top + 1.0f, text = eos + 1.0f;
  for (auto* a : {&T, &H}) a->insert(a->end(), {eos, text});
  EXPECT_EQ(axis(x, 0), T);
  EXPECT_EQ(axis(x, 1), H);
  EXPECT_EQ(x.rope_delta, double((text + 1.0f) - 17.0f));
}

TEST(MropeOmni, RefusesWhatHfCannotRead) {
  const TokenRun text{TokenRun::kText, 2}, video{TokenRun::kVideo, 0, 2, 4, 4, 25};
  const TokenRun aiv = video_with_audio(10, 2, 4, 4, 1.0, 25);
  using Walk = std::function<std::function<void()>(std::vector<TokenRun>)>;
  const Walk v25 = [](std::vector<TokenRun> runs) { return [runs] { mrope_position_ids(runs, 2, MropeIndexRule::kV4_49); }; };
  const Walk v3 = [](std::vector<TokenRun> runs) { return [runs] { qwen3_omni_position_ids(runs, 2); }; };
  for (double bad : {0.0, -2.0, std::nan(""), 0.01}) {  // int(25 * 0.01) = 0 ids per chunk
    TokenRun r = aiv;
    r.seconds_per_chunk = bad;
    expect_error(v25({text, r}), "seconds_per_chunk must be finite and > 0, got " + format_number(bad));
    EXPECT_NO_THROW(qwen3_omni_position_ids({text, r}, 2)) << "Qwen3-Omni does not chunk";
  }
  TokenRun no_time = aiv;
  no_time.time_interval = 0;
  expect_error(v25({no_time}), "int(time_interval * seconds_per_chunk) T ids");
  expect_error([&] { mrope_position_ids({aiv}, 2, MropeIndexRule::kV5); }, "rule v5 (Qwen2-VL) has none");
  expect_error([&] { xdrope_position_ids({aiv}, 2, 3); }, "not video or audio");
  for (const Walk& walk : {v25, v3}) {
    expect_error(walk({aiv, text, video}), "got 1 videos and 1 videos with audio");
    expect_error(walk({{TokenRun::kImage, 5, 1, 4, 4}}), "an image run's length must be 0 (its grid gives the token count), got 5");
    expect_error(walk({video_with_audio(0, 2, 4, 4, 1.0, 25)}), "audio's token count (qwen_omni_audio_tokens) >= 1, got 0");
    expect_error(walk({{TokenRun::kAudio, 0}}), "an audio run's length (its token count) must be >= 1, got 0");
    expect_error(walk({{TokenRun::kText, -1}}), "a text run's length must be >= 0, got -1");
    expect_error(walk({video_with_audio(3, 2, 3, 4, 1.0, 25)}), "must be positive with h and w divisible by spatial_merge_size 2");
    expect_error(walk({video_with_audio(3, 2, 4, 4, -1.0, 25)}), "seconds_per_grid -1 must be finite");
    expect_error(walk({video_with_audio(std::numeric_limits<int>::max(), 1, 2, 2, 1.0, 25)}), "at most 2^24");
  }
  expect_error([] { qwen3_omni_position_ids({{TokenRun::kText, 2}}, 0); }, "spatial_merge_size must be >= 1, got 0");
}

}  // namespace
}  // namespace posenc
