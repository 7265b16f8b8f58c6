// RopeParams: everything that determines a RoPE frequency schedule, in one validated struct.
//
// It is filled either from a model's config.json (hf_config.h) or from CLI flags, then
// validate()d, then handed to compute_schedule() (rope_schedule.h). Optional fields are
// optional because Hugging Face derives them when absent (see each comment); the derivation
// happens in one place, resolve(), so that both entry points behave identically.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "posenc/rope_type.h"

namespace posenc {

inline constexpr int kMaxHeadDim = 65536;
inline constexpr std::int64_t kMaxPosition = 2147483647;  // 2^31 - 1

struct RopeParams {
  RopeType type = RopeType::kDefault;

  int head_dim = 0;                    // channels per attention head
  double partial_rotary_factor = 1.0;  // rotary_dim = int(head_dim * factor), truncated as HF
  std::optional<int> rotary_dim;       // explicit rotary dim (MiniMax-M2, ChatGLM); wins if set
  double theta = 10000.0;              // rope_theta, the base

  // Scale factor s. Required for linear, ntk, dynamic, llama3; yarn and longrope derive it as
  // max_position_embeddings / original_max_position_embeddings when absent; proportional: 1.
  std::optional<double> factor;

  // The model's context length (config.max_position_embeddings). dynamic's reference length.
  std::optional<std::int64_t> max_position_embeddings;
  // The pre-extension training context (yarn, ntk_by_parts, llama3, longrope). HF falls back to
  // max_position_embeddings when absent.
  std::optional<std::int64_t> original_max_position_embeddings;

  // yarn
  std::optional<double> attention_factor;  // explicit value wins (yarn, longrope)
  double beta_fast = 32.0;                 // correction range, in rotations (high-frequency end)
  double beta_slow = 1.0;                  //                                (low-frequency end)
  std::optional<double> mscale;            // used only together with mscale_all_dim (HF rule)
  std::optional<double> mscale_all_dim;
  bool truncate = true;                    // floor/ceil the correction range (gpt-oss: false)

  // llama3
  std::optional<double> low_freq_factor;
  std::optional<double> high_freq_factor;

  // longrope: one rescale factor per frequency, rotary_dim / 2 each
  std::vector<double> short_factor;
  std::vector<double> long_factor;

  // Multimodal RoPE (Qwen2-VL family): frequency sections taken from the T, H, W position axes.
  // Carried for the application kernels; the schedule itself is the default one.
  std::vector<int> mrope_section;
  bool mrope_interleaved = false;  // Qwen3-VL axis map
  // HunYuan-VL's XD-RoPE (mrope.h xdrope_column_axes): the sections, 3 or 4 of them, doubled over
  // the full rotate_half width, so no per-frequency axis map exists; set by the family's config
  // reading (FamilyQuirks::xdrope), never by a rope dict key.
  bool mrope_xdrope = false;

  // HunYuan's NTK-alpha (dynamic only; hf_config keeps it for HunYuan, whose modeling file
  // reads it): a static base theta * alpha^(d/(d-2)), attention factor 1, up to
  // max_position_embeddings; beyond it HF's dynamic_rope_update recomputes plain dynamic NTK.
  std::optional<double> alpha;

  // Ministral-3 / Llama-4 query scaling beta: an attention-side factor, not part of the schedule.
  std::optional<double> llama_4_scaling_beta;

  // Clipped RoPE (Li et al. 2026, arXiv 2602.05258), a posenc option over any type's schedule:
  // the lowest clip_low frequencies (the last indices F - n .. F - 1 of the F rotated ones) are
  // softly clipped, inv_freq[F - n + k] *= (1 + cos(pi k / (n - 1))) / 2 for k = 0 .. n - 1, or,
  // with clip_hard, set to 0. 0 clips nothing; more than F is an error; soft clipping needs
  // n >= 2 (its taper runs from 1 at k = 0 to 0 at k = n - 1: one frequency cannot be both).
  int clip_low = 0;
  bool clip_hard = false;

  // The number of rotated channels: rotary_dim if set, else int(head_dim * partial_rotary_factor).
  int rotated_dim() const;
};

// Checks every field against its allowed range and the needs of the chosen type; throws
// posenc::Error naming the field, its value and what is allowed. Keys the chosen type ignores
// are not errors here (the config layer warns about those).
void validate(const RopeParams& params);

// What validate() lets through (HF computes it) but a reader should hear about: inverted or
// empty llama3 bands, an inverted YaRN correction range. Appends to warnings (probably a
// mistake) and notes (a deliberate but unusual choice).
void advise(const RopeParams& params, std::vector<std::string>& warnings, std::vector<std::string>& notes);

// The factor in force: explicit, or HF's derivation (yarn, longrope: max_pos / original;
// proportional: 1). Throws when it is required and absent.
double resolved_factor(const RopeParams& params);

// original_max_position_embeddings, or max_position_embeddings when absent (HF's default).
// Throws when neither is set.
std::int64_t resolved_original_max(const RopeParams& params);

}  // namespace posenc
