// Multimodal RoPE: which position axis each frequency reads, and the position ids themselves.
//
// M-RoPE (Qwen2-VL, 3 axes T, H, W), mrope_section = [s_t, s_h, s_w] summing to d/2:
//   contiguous  (Qwen2-VL):  frequencies [0, s_t) read T, [s_t, s_t+s_h) read H, the rest W
//                            (in both halves of the half-split layout)
//   interleaved (Qwen3-VL):  T by default; 1, 4, 7, .. < 3 s_h read H; 2, 5, 8, .. < 3 s_w read W
// For text tokens all three ids are equal, so M-RoPE reduces to 1-D RoPE.
// The vision towers' own 2-D RoPE is vision_rope.h's.
#pragma once

#include <cstdint>
#include <vector>

namespace posenc {

std::vector<std::uint8_t> mrope_axis_map(const std::vector<int>& sections, bool interleaved);

// (h, w) ids of the patches of a t x h x w grid, block-major over m x m merge blocks (the order
// Qwen2-VL's vision tower emits patches), repeated t times: ids[0][n] = h, ids[1][n] = w.
std::vector<std::int64_t> vision_2d_position_ids(int t, int h, int w, int merge_size);

// A run of tokens of one kind for get_rope_index. The bos and eos tokens around an image, a video
// or an audio clip are text runs (HF gives them text ids), except a video with its audio's.
struct TokenRun {
  // kVideoWithAudio: a video and its audio track (HF's use_audio_in_video), holding its own four
  // special tokens: <|vision_bos|><|audio_bos|>, the video's t h' w' tokens and the audio's `length`
  // tokens interleaved, <|audio_eos|><|vision_eos|> (4 + t h' w' + length tokens; h' = h / merge).
  // Qwen2.5-Omni (rule kV4_49) gives each bos pair and each eos pair one id, Qwen3-Omni consecutive ids.
  enum Kind { kText, kImage, kVideo, kAudio, kVideoWithAudio } kind = kText;
  // text, audio: token count; video with audio: the audio's token count (qwen_omni_audio_tokens,
  // >= 1); image, video: 0 (the grid gives the count)
  int length = 0;
  int t = 1, h = 1, w = 1;  // vision grid in patches, before merging
  // Temporal patch f of a vision run has T id start + trunc(float32(float32(f * seconds_per_grid) *
  // time_interval)), HF's float32 tensors (Qwen3-Omni: not truncated): Qwen2.5-VL videos
  // time_interval = tokens_per_second, Qwen2.5-Omni and Qwen3-Omni images and videos
  // position_id_per_seconds (25; Qwen3-Omni's checkpoint 13), with the video's second_per_grid;
  // Qwen2-VL 1 and 1.
  double time_interval = 1;
  double seconds_per_grid = 1;
  // Qwen2.5-Omni's video with audio: video and audio cut into chunks of int(time_interval *
  // seconds_per_chunk) T ids (the thinker config's seconds_per_chunk, default 2: 50 ids), then
  // interleaved (modeling_qwen2_5_omni.py get_chunked_index). Qwen3-Omni does not chunk.
  double seconds_per_chunk = 2;
};

struct MropeIndex {
  std::vector<std::int64_t> ids;  // [axes][seq]: T, H, W (XD-RoPE: [P,] W, H, image index)
  std::int64_t seq_len = 0;
  std::int64_t rope_delta = 0;    // max(ids) + 1 - seq_len; a decode step at cache position c uses c + delta
};

enum class MropeIndexRule {
  kV5,    // the next run starts at pos + max(h', w') after a vision run (HF v5)
  kV4_49, // the next run starts at the last piece's max id + 1 (HF <= 4.49; differs for long videos);
          // also Qwen2.5-Omni's get_rope_index, whose audio runs are sequential on every axis like
          // text, with its videos with audio (kVideoWithAudio)
};

// Audio tokens for `mel_frames` valid mel frames (Python floor division): Qwen2.5-Omni
// ((L - 1) // 2 + 1 - 2) // 2 + 1 (modeling_qwen2_5_omni.py get_rope_index); Qwen3-Omni
// ((f - 1) // 2 + 1 - 1) // 2 + 1 + (L // 100) * 13 with f = ((L % 100) - 1) // 2 + 1
// (modeling_qwen3_omni_moe.py _get_feat_extract_output_lengths). L >= 0.
std::int64_t qwen_omni_audio_tokens(std::int64_t mel_frames, bool qwen3);

// HF's get_rope_index for one sequence of runs; merge_size is spatial_merge_size. A sequence's
// videos all carry their audio or none does (HF's use_audio_in_video is one flag per call).
MropeIndex mrope_position_ids(const std::vector<TokenRun>& runs, int merge_size, MropeIndexRule rule = MropeIndexRule::kV5);

// Qwen3-Omni-MoE's ids are real numbers: HF computes them in float32 and never truncates a
// temporal step (12.5, or 8.666667 at 3 fps). Here they are HF's float32 values, each widened
// exactly to a double. Not for the rotary kernels, which take integer positions.
struct MropeFloatIndex {
  std::vector<double> ids;  // [3][seq]: T, H, W
  std::int64_t seq_len = 0;
  double rope_delta = 0;    // float32(max(ids) + 1 - seq_len), as HF
};

// modeling_qwen3_omni_moe.py get_rope_index for one sequence: every piece starts at the last piece's
// max + 1 (video ids at start + float32(f * seconds_per_grid) * time_interval, h' and w' as
// Qwen2.5-Omni); a video with its audio takes its two bos ids, then its video and audio tokens
// merged by T id (video first on a tie), then two eos ids from that merge's last piece's max + 1.
MropeFloatIndex qwen3_omni_position_ids(const std::vector<TokenRun>& runs, int merge_size);

// XD-RoPE (HunYuan-VL; modeling_hunyuan_vl.py apply_multimodal_rotary_pos_emb): the sections
// [s_0 .. s_{A-1}] (A = 3 or 4 axes, summing to d/2) are doubled and laid over the full
// cat(freqs, freqs) width, so cos/sin column c (frequency c mod d/2) reads axis i when c lies in
// the i-th chunk of [2 s_0, .., 2 s_{A-1}]: [16, 16, 16, 16] over d = 128 gives columns 0-31 axis 0,
// 32-63 axis 1, 64-95 axis 2, 96-127 axis 3. rotate_half pairs column c with c + d/2, which may read
// another axis: for tokens whose axes differ (an image's) the map is not a rotation, and posenc's
// pair kernels cannot apply it (golden writes HF's vectors); for text, every axis equal, it is 1-D RoPE.
std::vector<std::uint8_t> xdrope_column_axes(const std::vector<int>& sections);

// HunYuanVLModel.get_rope_index and get_vision_position_ids for one sequence of text and image
// runs: every axis starts as the token index; an image run of grid h x w (merge m) is h'(w' + 1) + 2
// tokens (image begin, h' rows of w' patches and one newline token, image end; h' = h/m, w' = w/m),
// whose grid tokens take (column 0..w', row, image index) on the last three axes; with 4 axes the
// first keeps the token index. Images are counted from 0 along the runs. Video runs are refused
// (HunYuan-VL is image-text only). rope_delta = max(ids) + 1 - seq.
MropeIndex xdrope_position_ids(const std::vector<TokenRun>& runs, int merge_size, int axes);

}  // namespace posenc
