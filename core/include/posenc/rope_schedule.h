// The RoPE frequency schedule: what every scaling method changes, and the only thing it changes.
//
//   RopeParams ──compute_schedule(params, seq_len)──► RopeSchedule
//     inv_freq[i], i = 0 .. rotary_dim/2 - 1   radians per token for the channel pair i
//     attention_factor                         multiplies cos AND sin (logits get its square)
//
// The kernels only rotate; PI, NTK, dynamic NTK, YaRN, llama3 and LongRoPE are all expressed as
// a different inv_freq (and attention factor) here. Numbers follow Hugging Face transformers v5
// (modeling_rope_utils.py), see docs/reference/hf-reference.md §3.
//
// Numerics (numerics.h): posenc computes in double and rounds once to float32 (within ~3e-7
// relative of HF, which chains float32 operations); Numerics::kHfFloat32 replays HF's float32
// operation order for users who need HF's exact bits.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <vector>

#include "posenc/numerics.h"
#include "posenc/rope_params.h"

namespace posenc {

// Tokens per full turn of a frequency: 2 pi / inv_freq (infinity for a channel that does not
// rotate, inv_freq 0).
double wavelength(double inv_freq);

struct RopeSchedule {
  RopeType type = RopeType::kDefault;
  int head_dim = 0;
  int rotary_dim = 0;   // channels the cos/sin table spans: 2 * inv_freq.size()
  int rotated_dim = 0;  // channels with a non-zero frequency (differs only for proportional)
  std::vector<float> inv_freq;       // [rotary_dim/2]
  std::vector<float> base_inv_freq;  // [rotary_dim/2] unscaled 1/theta^(2i/d), for comparison
  double attention_factor = 1.0;
  double base = 0;  // the theta actually used (NTK and dynamic NTK raise it)
  // yarn / ntk_by_parts: [low, high] in frequency-index units; pairs i <= low keep their
  // frequency, pairs i >= high are divided by factor, a linear ramp in between.
  std::optional<std::array<double, 2>> correction_range;
  // The sequence length the schedule was computed for (dynamic, longrope); nullopt = at init.
  std::optional<std::int64_t> seq_len;
  bool uses_long_factors = false;  // longrope: long_factor in force
};

// The schedule at sequence length seq_len (nullopt: as HF's rotary module builds it at init).
// For dynamic NTK seq_len is max(position_ids)+1; longrope switches to long factors when
// seq_len > original_max_position_embeddings. Validates params first (throws posenc::Error),
// and refuses a schedule with a non-finite frequency (float32 overflow from rope_theta or a
// factor near 0; llama3's empty-band division): HF would compute inf or NaN there.
RopeSchedule compute_schedule(const RopeParams& params,
                              std::optional<std::int64_t> seq_len = std::nullopt,
                              Numerics numerics = Numerics::kAccurate);

// The largest angle (radians) whose cos/sin posenc computes accurately: rope_sincos's range
// (rope_apply.h), where the pi/2 reduction is exact. Default RoPE (inv_freq[0] = 1) reaches it
// only at position 2^31; rope_theta < 1 or a factor < 1 reach it far earlier.
inline constexpr double kMaxRopeAngle = 2147483648.0;  // 2^31

// The largest position p with p * inv_freq[i] <= kMaxRopeAngle for every frequency (at most
// kMaxPosition): the positions this schedule's cos/sin are accurate for.
std::int64_t max_accurate_position(const RopeSchedule& schedule);

// Throws posenc::Error when `max_position` is beyond max_accurate_position(schedule), naming
// the frequency, the angle and the largest position that works. Callers that evaluate cos/sin
// (tables, heatmaps, the kernels) call it with the largest position they will use.
void check_angle_range(const RopeSchedule& schedule, std::int64_t max_position);

// YaRN's attention temperature m(s, k) = 0.1 k ln s + 1 (1 when s <= 1).
double yarn_get_mscale(double scale, double mscale = 1.0);

// DeepSeek-V2/V3 multiply the softmax scale by m(factor, mscale_all_dim)^2 outside the rope
// module (yarn_apply_mscale); 1 when not applicable. Reported for engine authors.
double deepseek_softmax_scale_multiplier(const RopeParams& params);

}  // namespace posenc
