// What mrope.cc's integer walk and mrope_omni.cc's Omni walks share (core internals): the checks on
// a sequence of runs, a vision run's temporal step, and Qwen2.5-Omni's video with audio.
#pragma once

#include <cstdint>
#include <vector>

#include "posenc/mrope.h"

namespace posenc::mrope_detail {

// Every check a walk makes before it allocates: merge_size >= 1; text lengths >= 0, audio >= 1
// (HF's walk takes the max of an empty piece and fails), images and videos 0 (the grid counts),
// videos with audio >= 1; grids positive and divisible by merge_size; times finite and >= 0 with
// T ids below 1e9; at most 2^24 tokens in all; videos all with audio or none. `chunked`: also the
// chunk of a video with audio (Qwen2.5-Omni's int(time_interval * seconds_per_chunk) >= 1).
void check_runs(const std::vector<TokenRun>& runs, int merge_size, bool chunked);

// Temporal patch f's T offset before any truncation: HF's float32 product
// (arange(t) * tensor(seconds_per_grid, float32) * time_interval), rounded at each step.
inline float vision_time(const TokenRun& run, int f) {
  return static_cast<float>(f) * static_cast<float>(run.seconds_per_grid) * static_cast<float>(run.time_interval);
}

// The three axes as the integer walk builds them, one id per token.
struct IdColumns {
  std::vector<std::int64_t> t, h, w;
  void push(std::int64_t a, std::int64_t b, std::int64_t c) {
    t.push_back(a);
    h.push_back(b);
    w.push_back(c);
  }
};

// Appends Qwen2.5-Omni's video with audio (its 4 + t h' w' + length tokens) whose first bos token is
// at `pos`; returns the id the next run starts at (the eos id + 1).
std::int64_t append_qwen25_video_with_audio(const TokenRun& run, int merge_size, std::int64_t pos, IdColumns& out);

}  // namespace posenc::mrope_detail
