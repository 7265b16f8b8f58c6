#include "posenc/mrope.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "posenc/error.h"
#include "posenc/rope_params.h"

namespace posenc {

std::vector<std::uint8_t> mrope_axis_map(const std::vector<int>& sections, bool interleaved) {
  if (sections.size() != 3)
    throw Error("mrope_section needs 3 entries (T, H, W), got " + std::to_string(sections.size()) +
                (sections.size() == 4 ? " (4 axes are HunYuan-VL's XD-RoPE, which has no per-frequency axis map: "
                                        "xdrope_column_axes)"
                                      : ""));
  int total = 0;
  for (int s : sections) {
    if (s < 0) throw Error("mrope_section entries must be >= 0, got " + std::to_string(s));
    total += s;
  }
  std::vector<std::uint8_t> axis(static_cast<std::size_t>(total), 0);
  if (!interleaved) {
    std::fill(axis.begin() + sections[0], axis.begin() + sections[0] + sections[1], 1);
    std::fill(axis.begin() + sections[0] + sections[1], axis.end(), 2);
    return axis;
  }
  for (int a = 1; a <= 2; ++a)
    for (int i = a; i < 3 * sections[static_cast<std::size_t>(a)] && i < total; i += 3) axis[static_cast<std::size_t>(i)] = static_cast<std::uint8_t>(a);
  return axis;
}

std::vector<std::int64_t> vision_2d_position_ids(int t, int h, int w, int m) {
  if (t < 1 || h < 1 || w < 1 || m < 1 || h % m != 0 || w % m != 0)
    throw Error("vision grid needs t, h, w >= 1 and h, w divisible by merge_size " + std::to_string(m) + "; got " +
                std::to_string(t) + "x" + std::to_string(h) + "x" + std::to_string(w));
  const std::size_t n = static_cast<std::size_t>(t) * h * w;
  std::vector<std::int64_t> ids(2 * n);
  std::size_t i = 0;
  for (int f = 0; f < t; ++f)
    for (int bh = 0; bh < h / m; ++bh)
      for (int bw = 0; bw < w / m; ++bw)
        for (int ih = 0; ih < m; ++ih)
          for (int iw = 0; iw < m; ++iw, ++i) {
            ids[i] = bh * m + ih;
            ids[n + i] = bw * m + iw;
          }
  return ids;
}

namespace {

// Every run's tokens summed before anything is allocated: at most kMaxIndexTokens (2^24, 400 MiB
// of ids for 3 axes), far past any context a model is given.
constexpr std::int64_t kMaxIndexTokens = std::int64_t{1} << 24;

void check_total_tokens(const std::vector<TokenRun>& runs, int m, bool newline_column) {
  double total = 0;
  for (const TokenRun& r : runs)
    total += r.kind == TokenRun::kText || r.kind == TokenRun::kAudio
                 ? std::max(0, r.length)
                 : double(std::max(1, r.t)) * std::max(0, r.h / m) * (std::max(0, r.w / m) + (newline_column ? 1 : 0)) +
                       (newline_column ? 2 : 0);
  if (total > double(kMaxIndexTokens))
    throw Error("the runs hold " + format_number(total) + " tokens; position ids are computed for at most 2^24 (16777216)");
}

}  // namespace

MropeIndex mrope_position_ids(const std::vector<TokenRun>& runs, int m, MropeIndexRule rule) {
  if (m < 1) throw Error("spatial_merge_size must be >= 1, got " + std::to_string(m));
  check_total_tokens(runs, m, false);
  std::vector<std::int64_t> T, H, W;
  std::int64_t pos = 0, max_id = -1;
  for (const TokenRun& run : runs) {
    if (run.kind == TokenRun::kText || run.kind == TokenRun::kAudio) {  // sequential on every axis
      if (run.length < 0) throw Error("text and audio run lengths must be >= 0, got " + std::to_string(run.length));
      for (int i = 0; i < run.length; ++i) {
        T.push_back(pos + i);
        H.push_back(pos + i);
        W.push_back(pos + i);
      }
      pos += run.length;
      max_id = std::max(max_id, pos - 1);
      continue;
    }
    if (!(run.time_interval >= 0 && run.seconds_per_grid >= 0 && run.time_interval * run.seconds_per_grid * run.t <= 1e9))
      throw Error("a vision run's time_interval " + format_number(run.time_interval) + " and seconds_per_grid " +
                  format_number(run.seconds_per_grid) + " must be finite, >= 0 and keep its T ids below 1e9");
    if (run.t < 1 || run.h < 1 || run.w < 1 || run.h % m != 0 || run.w % m != 0)
      throw Error("vision grid " + std::to_string(run.t) + "x" + std::to_string(run.h) + "x" + std::to_string(run.w) +
                  " must be positive with h and w divisible by spatial_merge_size " + std::to_string(m));
    const int hm = run.h / m, wm = run.w / m;
    if (std::int64_t{run.t} * hm * wm > kMaxPosition)
      throw Error("vision run of " + std::to_string(run.t) + "x" + std::to_string(hm) + "x" + std::to_string(wm) +
                  " merged patches exceeds 2^31-1 tokens");
    for (int f = 0; f < run.t; ++f)
      for (int y = 0; y < hm; ++y)
        for (int x = 0; x < wm; ++x) {
          const float step = static_cast<float>(f) * static_cast<float>(run.seconds_per_grid);  // HF: float32 tensors
          const std::int64_t tt = static_cast<std::int64_t>(step * static_cast<float>(run.time_interval)) + pos;
          T.push_back(tt);
          H.push_back(y + pos);
          W.push_back(x + pos);
          max_id = std::max({max_id, tt, y + pos, x + pos});
        }
    pos = rule == MropeIndexRule::kV5 ? pos + std::max(hm, wm) : max_id + 1;
  }
  MropeIndex out;
  out.seq_len = static_cast<std::int64_t>(T.size());
  out.ids.reserve(3 * T.size());
  for (const auto* axis : {&T, &H, &W}) out.ids.insert(out.ids.end(), axis->begin(), axis->end());
  out.rope_delta = max_id + 1 - out.seq_len;
  return out;
}

std::vector<std::uint8_t> xdrope_column_axes(const std::vector<int>& sections) {
  if (sections.size() < 3 || sections.size() > 4)
    throw Error("XD-RoPE needs 3 or 4 mrope_section entries, got " + std::to_string(sections.size()));
  std::vector<std::uint8_t> axis;
  for (std::size_t i = 0; i < sections.size(); ++i) {
    if (sections[i] < 0) throw Error("mrope_section entries must be >= 0, got " + std::to_string(sections[i]));
    axis.insert(axis.end(), 2 * static_cast<std::size_t>(sections[i]), static_cast<std::uint8_t>(i));
  }
  return axis;
}

MropeIndex xdrope_position_ids(const std::vector<TokenRun>& runs, int m, int axes) {
  if (m < 1) throw Error("spatial_merge_size must be >= 1, got " + std::to_string(m));
  if (axes < 3 || axes > 4) throw Error("XD-RoPE has 3 or 4 position axes, got " + std::to_string(axes));
  check_total_tokens(runs, m, true);
  std::int64_t seq = 0;
  for (const TokenRun& run : runs) {
    if (run.kind == TokenRun::kVideo || run.kind == TokenRun::kAudio)
      throw Error("HunYuan-VL's get_rope_index takes text and images, not video or audio");
    if (run.kind == TokenRun::kText) {
      if (run.length < 0) throw Error("text run length must be >= 0, got " + std::to_string(run.length));
      seq += run.length;
      continue;
    }
    if (run.t != 1 || run.h < 1 || run.w < 1 || run.h % m != 0 || run.w % m != 0)
      throw Error("image grid " + std::to_string(run.t) + "x" + std::to_string(run.h) + "x" + std::to_string(run.w) +
                  " must have t = 1 and h, w positive multiples of spatial_merge_size " + std::to_string(m));
    seq += std::int64_t{run.h / m} * (run.w / m + 1) + 2;
  }
  MropeIndex out;
  out.seq_len = seq;
  out.ids.resize(static_cast<std::size_t>(axes * seq));
  for (int a = 0; a < axes; ++a)
    for (std::int64_t i = 0; i < seq; ++i) out.ids[a * seq + i] = i;
  const int first = axes - 3;  // the (width, height, image index) axes
  std::int64_t pos = 0, image = 0;
  for (const TokenRun& run : runs) {
    if (run.kind == TokenRun::kText) {
      pos += run.length;
      continue;
    }
    const std::int64_t rows = run.h / m, cols = run.w / m + 1;  // + the newline column
    const std::int64_t grid = pos + 1;                            // after the image-begin token
    for (std::int64_t r = 0; r < rows; ++r)
      for (std::int64_t c = 0; c < cols; ++c) {
        const std::int64_t at = grid + r * cols + c;
        out.ids[first * seq + at] = c;
        out.ids[(first + 1) * seq + at] = r;
        out.ids[(first + 2) * seq + at] = image;
      }
    pos += rows * cols + 2;
    ++image;
  }
  const std::int64_t top = seq ? *std::max_element(out.ids.begin(), out.ids.end()) : -1;
  out.rope_delta = top + 1 - seq;
  return out;
}

std::int64_t qwen_omni_audio_tokens(std::int64_t L, bool qwen3) {
  if (L < 0 || L > (std::int64_t{1} << 40)) throw Error("mel frames must be in [0, 2^40], got " + std::to_string(L));
  const auto floor_div = [](std::int64_t a, std::int64_t b) { return a / b - ((a % b != 0) && ((a < 0) != (b < 0))); };
  if (!qwen3) return floor_div(floor_div(L - 1, 2) + 1 - 2, 2) + 1;
  const std::int64_t f = floor_div(L % 100 - 1, 2) + 1;
  return floor_div(floor_div(f - 1, 2) + 1 - 1, 2) + 1 + (L / 100) * 13;
}

}  // namespace posenc
