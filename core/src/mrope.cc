#include "posenc/mrope.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "mrope_omni.h"
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
  for (const TokenRun& r : runs) {
    if (r.kind == TokenRun::kText || r.kind == TokenRun::kAudio) {
      total += std::max(0, r.length);
      continue;
    }
    total += double(std::max(1, r.t)) * std::max(0, r.h / m) * (std::max(0, r.w / m) + (newline_column ? 1 : 0)) +
             (newline_column ? 2 : 0);
    if (r.kind == TokenRun::kVideoWithAudio) total += 4 + double(std::max(0, r.length));  // + its bos, eos pairs
  }
  if (total > double(kMaxIndexTokens))
    throw Error("the runs hold " + format_number(total) + " tokens; position ids are computed for at most 2^24 (16777216)");
}

const char* kind_name(TokenRun::Kind k) {
  switch (k) {
    case TokenRun::kText: return "text";
    case TokenRun::kImage: return "image";
    case TokenRun::kVideo: return "video";
    case TokenRun::kAudio: return "audio";
    case TokenRun::kVideoWithAudio: return "video-with-audio";
  }
  return "?";
}

void check_length(const TokenRun& run) {
  const std::string got = std::to_string(run.length);
  switch (run.kind) {
    case TokenRun::kText:
      if (run.length < 0) throw Error("a text run's length must be >= 0, got " + got);
      return;
    case TokenRun::kAudio:  // HF's walk takes the max of the empty piece and fails
      if (run.length < 1) throw Error("an audio run's length (its token count) must be >= 1, got " + got);
      return;
    case TokenRun::kVideoWithAudio:
      if (run.length < 1)
        throw Error("a video with audio needs its audio's token count (qwen_omni_audio_tokens) >= 1, got " + got);
      return;
    default:
      if (run.length != 0)
        throw Error(std::string("an ") + kind_name(run.kind) + " run's length must be 0 (its grid gives the token count), got " +
                    got + "; a video's audio travels with it as a video-with-audio run, an image has none");
  }
}

void check_vision(const TokenRun& run, int m, bool chunked) {
  if (!(run.time_interval >= 0 && run.seconds_per_grid >= 0 && run.time_interval * run.seconds_per_grid * run.t <= 1e9))
    throw Error("a vision run's time_interval " + format_number(run.time_interval) + " and seconds_per_grid " +
                format_number(run.seconds_per_grid) + " must be finite, >= 0 and keep its T ids below 1e9");
  if (run.t < 1 || run.h < 1 || run.w < 1 || run.h % m != 0 || run.w % m != 0)
    throw Error("vision grid " + std::to_string(run.t) + "x" + std::to_string(run.h) + "x" + std::to_string(run.w) +
                " must be positive with h and w divisible by spatial_merge_size " + std::to_string(m));
  if (std::int64_t{run.t} * (run.h / m) * (run.w / m) > kMaxPosition)
    throw Error("vision run of " + std::to_string(run.t) + "x" + std::to_string(run.h / m) + "x" + std::to_string(run.w / m) +
                " merged patches exceeds 2^31-1 tokens");
  if (!chunked || run.kind != TokenRun::kVideoWithAudio) return;
  // HF: t_ntoken_per_chunk = int(position_id_per_seconds * seconds_per_chunk), Python floats.
  const double ids = run.time_interval * run.seconds_per_chunk;
  if (!(run.seconds_per_chunk > 0 && ids >= 1 && ids <= 9007199254740992.0))
    throw Error("a video with audio is cut into chunks of int(time_interval * seconds_per_chunk) T ids, which must be in "
                "[1, 2^53]: seconds_per_chunk must be finite and > 0, got " + format_number(run.seconds_per_chunk) +
                " (time_interval " + format_number(run.time_interval) + ")");
}

}  // namespace

namespace mrope_detail {

void check_runs(const std::vector<TokenRun>& runs, int m, bool chunked) {
  if (m < 1) throw Error("spatial_merge_size must be >= 1, got " + std::to_string(m));
  std::size_t videos = 0, with_audio = 0;
  for (const TokenRun& run : runs) {
    check_length(run);
    if (run.kind == TokenRun::kImage || run.kind == TokenRun::kVideo || run.kind == TokenRun::kVideoWithAudio)
      check_vision(run, m, chunked);
    videos += run.kind == TokenRun::kVideo;
    with_audio += run.kind == TokenRun::kVideoWithAudio;
  }
  // HF's get_rope_index counts and finds videos by one use_audio_in_video flag per call: a plain
  // video among videos with audio (or the reverse) is read at the wrong tokens.
  if (videos && with_audio)
    throw Error("a sequence's videos all carry their audio or none does (HF's use_audio_in_video is one flag per call); "
                "got " + std::to_string(videos) + " videos and " + std::to_string(with_audio) + " videos with audio");
  check_total_tokens(runs, m, false);
}

}  // namespace mrope_detail

MropeIndex mrope_position_ids(const std::vector<TokenRun>& runs, int m, MropeIndexRule rule) {
  mrope_detail::check_runs(runs, m, rule == MropeIndexRule::kV4_49);
  mrope_detail::IdColumns ids;
  std::int64_t pos = 0;
  for (const TokenRun& run : runs) {
    if (run.kind == TokenRun::kText || run.kind == TokenRun::kAudio) {  // sequential on every axis
      for (int i = 0; i < run.length; ++i) ids.push(pos + i, pos + i, pos + i);
      pos += run.length;
      continue;
    }
    if (run.kind == TokenRun::kVideoWithAudio) {
      if (rule != MropeIndexRule::kV4_49)
        throw Error("a video with audio is Qwen2.5-Omni's (rule v4.49) or Qwen3-Omni's (qwen3_omni_position_ids); "
                    "rule v5 (Qwen2-VL) has none");
      pos = mrope_detail::append_qwen25_video_with_audio(run, m, pos, ids);
      continue;
    }
    const int hm = run.h / m, wm = run.w / m;
    std::int64_t block_max = pos;  // HF's llm_pos_ids_list[-1].max(): this piece's, not the sequence's
    for (int f = 0; f < run.t; ++f) {
      const std::int64_t tt = static_cast<std::int64_t>(mrope_detail::vision_time(run, f)) + pos;  // .long(): trunc
      for (int y = 0; y < hm; ++y)
        for (int x = 0; x < wm; ++x) {
          ids.push(tt, y + pos, x + pos);
          block_max = std::max({block_max, tt, y + pos, x + pos});
        }
    }
    pos = rule == MropeIndexRule::kV5 ? pos + std::max(hm, wm) : block_max + 1;
  }
  MropeIndex out;
  out.seq_len = static_cast<std::int64_t>(ids.t.size());
  out.ids.reserve(3 * ids.t.size());
  for (const auto* axis : {&ids.t, &ids.h, &ids.w}) out.ids.insert(out.ids.end(), axis->begin(), axis->end());
  const std::int64_t top = out.ids.empty() ? -1 : *std::max_element(out.ids.begin(), out.ids.end());
  out.rope_delta = top + 1 - out.seq_len;
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
    if (run.kind != TokenRun::kText && run.kind != TokenRun::kImage)
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
