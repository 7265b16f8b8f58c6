// The Omni models' get_rope_index where it parts from Qwen2-VL's: Qwen2.5-Omni's video with audio
// (modeling_qwen2_5_omni.py get_rope_index, use_audio_in_video branch, and get_chunked_index) and
// Qwen3-Omni-MoE's float walk (modeling_qwen3_omni_moe.py get_rope_index), both read at
// transformers c49429ed (5.16.0.dev0).
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

namespace {

float f32(double v) { return static_cast<float>(v); }

// modeling_qwen3_omni_moe.py get_rope_index, piece by piece (each an entry of llm_pos_ids_list), in
// float32: every piece is arange(n) + st_idx or a vision piece, torch.cat([item.float() ...]) makes
// all float32, and st_idx is float32 from the first vision piece on, each sum rounded (before it,
// HF's int64 st_idx counts tokens, below 2^24, so float32 holds it exactly: the same values).
class Qwen3Walk {
 public:
  explicit Qwen3Walk(int m) : m_(m) {}

  // st_idx = llm_pos_ids_list[-1].max() + 1 (0 before the first piece).
  float next() const { return pieces_ ? last_max_ + 1.0f : 0.0f; }

  // arange(n) + b on all three axes (text, bos, eos, audio): one piece.
  void sequential(float b, std::int64_t n) {
    for (std::int64_t i = 0; i < n; ++i) push(f32(double(i)) + b, f32(double(i)) + b, f32(double(i)) + b);
    if (n > 0) close(f32(double(n - 1)) + b);  // float32 rounding is monotone: the last is the max
  }

  // get_llm_pos_ids_for_vision(start, ...): float32 (t, h, w) + start, t-major, [n][3].
  std::vector<float> vision(const TokenRun& run, float start) const {
    std::vector<float> v;
    for (int f = 0; f < run.t; ++f)
      for (int y = 0; y < run.h / m_; ++y)
        for (int x = 0; x < run.w / m_; ++x)
          for (float a : {mrope_detail::vision_time(run, f), float(y), float(x)}) v.push_back(a + start);
    return v;
  }

  void vision_piece(const std::vector<float>& v, std::size_t begin, std::size_t end) {
    float top = v[3 * begin];
    for (std::size_t i = begin; i < end; ++i) {
      push(v[3 * i], v[3 * i + 1], v[3 * i + 2]);
      top = std::max({top, v[3 * i], v[3 * i + 1], v[3 * i + 2]});
    }
    close(top);
  }

  // Two bos ids from `carry`, the video's and the audio's tokens merged on row 0 (video first when
  // video_t <= audio_t), each token its own piece, the rest of whichever is left one piece, then
  // two eos ids from the last piece's max + 1.
  void video_with_audio(const TokenRun& run, float carry) {
    sequential(carry, 2);
    const float s = carry + 2.0f;  // st_idx += bos_len
    const std::vector<float> video = vision(run, s);
    const std::size_t nv = video.size() / 3, na = static_cast<std::size_t>(run.length);
    std::size_t vi = 0, ai = 0;
    while (vi < nv && ai < na) {
      if (video[3 * vi] <= f32(double(ai)) + s) {
        vision_piece(video, vi, vi + 1);
        ++vi;
      } else {
        sequential(f32(double(ai)) + s, 1);  // audio_llm_pos_ids[:, ai : ai + 1]
        ++ai;
      }
    }
    if (vi < nv) vision_piece(video, vi, nv);
    for (std::size_t j = ai; j < na; ++j) push(f32(double(j)) + s, f32(double(j)) + s, f32(double(j)) + s);
    if (ai < na) close(f32(double(na - 1)) + s);  // the audio's tail, one piece
    sequential(next(), 2);
  }

  MropeFloatIndex result() const {
    MropeFloatIndex out;
    out.seq_len = static_cast<std::int64_t>(t_.size());
    float top = -1;
    for (const auto* axis : {&t_, &h_, &w_})
      for (float v : *axis) {
        out.ids.push_back(double(v));
        top = std::max(top, v);
      }
    out.rope_delta = double((top + 1.0f) - f32(double(out.seq_len)));  // llm_positions.max() + 1 - len
    return out;
  }

 private:
  void push(float a, float b, float c) {
    t_.push_back(a);
    h_.push_back(b);
    w_.push_back(c);
  }
  void close(float max) {
    last_max_ = max;
    pieces_ = true;
  }

  int m_;
  std::vector<float> t_, h_, w_;
  float last_max_ = 0;
  bool pieces_ = false;
};

}  // namespace

MropeFloatIndex qwen3_omni_position_ids(const std::vector<TokenRun>& given, int m) {
  mrope_detail::check_runs(given, m, false);
  std::vector<TokenRun> runs;  // adjacent text runs as one: HF's pieces do not see the seams
  for (const TokenRun& run : given) {
    if (run.kind == TokenRun::kText && run.length == 0) continue;
    if (run.kind == TokenRun::kText && !runs.empty() && runs.back().kind == TokenRun::kText)
      runs.back().length += run.length;
    else
      runs.push_back(run);
  }
  Qwen3Walk walk(m);
  // A text run holds the eos of the item before it and the bos of the item after it. The eos of an
  // image, video or audio clip is a piece of its own (the last piece's max + 1), the rest one piece
  // (the bos is st_idx + text_len, the same sum); a video with audio takes its bos pair at st_idx
  // after that text (st_idx += text_len) and holds its own eos pair.
  float carry = 0;           // st_idx where the next item's bos goes
  bool eos_pending = false;  // the previous run was an image, a video or an audio clip
  for (const TokenRun& run : runs) {
    if (run.kind == TokenRun::kText) {
      std::int64_t n = run.length;
      if (eos_pending) {
        walk.sequential(walk.next(), 1);
        --n;
      }
      eos_pending = false;
      const float b = walk.next();
      walk.sequential(b, n);
      carry = n > 0 ? f32(double(n)) + b : b;
      continue;
    }
    if (run.kind == TokenRun::kVideoWithAudio) {
      walk.video_with_audio(run, eos_pending ? walk.next() : carry);
      eos_pending = false;
      carry = walk.next();
      continue;
    }
    const float s = walk.next();  // st_idx += bos_len: the bos id + 1, the same sum
    if (run.kind == TokenRun::kAudio) {
      walk.sequential(s, run.length);
    } else {
      const std::vector<float> v = walk.vision(run, s);
      walk.vision_piece(v, 0, v.size() / 3);
    }
    eos_pending = true;
    carry = walk.next();
  }
  return walk.result();
}

}  // namespace posenc
