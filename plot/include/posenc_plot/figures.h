// The numbers behind each picture of `posenc plot`, and the pictures.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "posenc/rope_schedule.h"
#include "posenc/t5_bias.h"
#include "posenc_plot/heatmap.h"
#include "posenc_plot/svg_chart.h"
#include "posenc_plot/user_table.h"

namespace posenc::plot {

struct HeatmapRequest {
  std::string scheme;        // sinusoidal, learned, rope, alibi, t5, xl
  int dim = 64;              // model or head dimension
  std::int64_t first = 0;    // first position (or query/key position for biases)
  std::int64_t count = 128;  // positions
  int heads = 8, head = 0;   // biases: which head of how many
  double base = 10000.0;
  std::uint64_t seed = 0;    // learned: the init
  T5BucketParams t5{32, 128, true};
};

// positions x dimensions (absolute tables, RoPE cos|sin), query x key (ALiBi bias, T5 buckets),
// distance x dimensions (Transformer-XL's R). Masked (future) cells are NaN, drawn white.
HeatmapSpec heatmap_data(const HeatmapRequest& request);

// Wavelength 2 pi / inv_freq of every frequency before (base) and after scaling, against the
// training context; YaRN / NTK-by-parts ramp and llama3's smooth band shaded.
struct WavelengthData {
  std::vector<double> index, base, scaled;
  double original_context = 0;           // 0: unknown
  std::vector<Band> bands;               // in frequency-index units
  std::string title;
};
WavelengthData wavelength_data(const RopeParams& params, const std::string& title);
std::string wavelength_svg(const WavelengthData& data);

// Expected score against relative distance: RoFormer's bound for RoPE, the score of q = k = 1 per
// channel for xPos with RoPE's beside it (sum_i zeta_i^(d/512) cos(d w_i) / (d_h/2)), -slope * d for ALiBi
// heads, PE(0).PE(d) / (dim/2) for sinusoidal, the bucket for T5 (its scores are learned); the
// learned distance biases per head against d = 0 .. max_distance on a linear axis (bias_curves.h).
struct DecayRequest {
  std::string scheme;  // rope, xpos, alibi, t5, sinusoidal; kerple, sandwich, table (bias_curves.h)
  int dim = 128;
  int heads = 8;
  std::int64_t max_distance = 1024;
  double base = 10000.0;
  T5BucketParams t5{32, 128, false};
  std::string kind = "log";        // kerple: log or power
  std::optional<UserTable> table;  // scheme "table": [heads][distances] values (read_user_table)
  std::string table_name;          // the table's file, for the title and errors
};
std::vector<Series> decay_data(const DecayRequest& request);
std::string decay_svg(const DecayRequest& request);

}  // namespace posenc::plot
