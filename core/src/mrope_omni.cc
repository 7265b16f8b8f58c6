// The Omni models' get_rope_index where it parts from Qwen2-VL's: Qwen2.5-Omni's video with audio
// (modeling_qwen2_5_omni.py get_rope_index, use_audio_in_video branch, and get_chunked_index), read
// at transformers c49429ed (5.16.0.dev0).
#include <algorithm>
#include <utility>

#include "mrope_omni.h"

namespace posenc {
namespace mrope_detail {
namespace {

// get_chunked_index(token_indices, tokens_per_chunk, remove_index) on offsets already less
// remove_index: [begin, end) of each chunk. A chunk closes before the first element >= c * chunk
// (c = 1, 2, ..), and c grows by one per split only, so a jump over two boundaries splits once and
// the next element is held to the next boundary (t = 0, 0, 100, 100 at 50 per chunk: [0, 2), [2, 3),
// [3, 4)). Always at least one chunk; never an empty one for a non-empty input (offsets start at 0).
std::vector<std::pair<std::size_t, std::size_t>> chunked_index(const std::vector<std::int64_t>& offsets, std::int64_t chunk) {
  std::vector<std::pair<std::size_t, std::size_t>> out;
  std::size_t start = 0;
  std::int64_t current = 1;
  for (std::size_t i = 0; i < offsets.size(); ++i)
    if (offsets[i] >= current * chunk) {
      out.emplace_back(start, i);
      start = i;
      ++current;
    }
  out.emplace_back(start, offsets.size());
  return out;
}

}  // namespace

std::int64_t append_qwen25_video_with_audio(const TokenRun& run, int m, std::int64_t pos, IdColumns& out) {
  // Both bos tokens (<|vision_bos|><|audio_bos|>) take one id: HF appends the same arange(1) + st_idx twice.
  out.push(pos, pos, pos);
  out.push(pos, pos, pos);
  const std::int64_t s = pos + 1;  // video and audio both start here
  const int hm = run.h / m, wm = run.w / m;
  IdColumns video;  // t-major, then rows, then columns, as get_llm_pos_ids_for_vision
  std::vector<std::int64_t> video_offsets;
  for (int f = 0; f < run.t; ++f) {
    const std::int64_t tt = static_cast<std::int64_t>(vision_time(run, f));  // .long(): trunc
    for (int y = 0; y < hm; ++y)
      for (int x = 0; x < wm; ++x) {
        video.push(s + tt, s + y, s + x);
        video_offsets.push_back(tt);
      }
  }
  std::vector<std::int64_t> audio_offsets(static_cast<std::size_t>(run.length));
  for (std::size_t j = 0; j < audio_offsets.size(); ++j) audio_offsets[j] = static_cast<std::int64_t>(j);
  // t_ntoken_per_chunk = int(position_id_per_seconds * seconds_per_chunk): Python floats, truncated.
  const auto chunk = static_cast<std::int64_t>(run.time_interval * run.seconds_per_chunk);
  const auto vchunks = chunked_index(video_offsets, chunk), achunks = chunked_index(audio_offsets, chunk);
  // Video chunk j, then audio chunk j. The eos ids come from the LAST chunk's max + 1 (its three
  // rows), not the sequence's: an audio chunk that ends below the video's rows and columns puts
  // the eos among the video's ids.
  std::int64_t last_max = 0;
  for (std::size_t j = 0; j < std::max(vchunks.size(), achunks.size()); ++j) {
    if (j < vchunks.size()) {
      last_max = s;
      for (std::size_t i = vchunks[j].first; i < vchunks[j].second; ++i) {
        out.push(video.t[i], video.h[i], video.w[i]);
        last_max = std::max({last_max, video.t[i], video.h[i], video.w[i]});
      }
    }
    if (j < achunks.size()) {
      for (std::size_t i = achunks[j].first; i < achunks[j].second; ++i) out.push(s + audio_offsets[i], s + audio_offsets[i], s + audio_offsets[i]);
      last_max = s + static_cast<std::int64_t>(achunks[j].second) - 1;  // chunks are never empty (length >= 1)
    }
  }
  const std::int64_t eos = last_max + 1;  // <|audio_eos|><|vision_eos|>: one id, appended twice
  out.push(eos, eos, eos);
  out.push(eos, eos, eos);
  return eos + 1;
}

}  // namespace mrope_detail

}  // namespace posenc
