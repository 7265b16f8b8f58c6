// Learned absolute positions (GPT-2, BERT; BART and OPT with their offset of 2): a table of
// trainable rows, looked up by position.
//
//   row(position) = position + past + offset      must lie in [0, rows) — past the table is an
//                                                 error naming the position, never a wrap or clamp
// BART/OPT keep num_positions + 2 rows and look up position + 2 (OPT's pads carry position -1,
// so they read row 1). Interpolation resizes the table to a new length the way ViT resizes its
// position grid (linear, half-pixel centres: torch's F.interpolate(mode="linear",
// align_corners=False)).
#pragma once

#include <cstdint>
#include <vector>

namespace posenc {

// The standard deviation of a freshly initialised position table, bias table or embedding:
// GPT-2's initializer_range (HF GPT2Config, T5's and DeBERTa's own defaults are of this order).
inline constexpr double kLearnedInitStd = 0.02;

struct LearnedTable {
  int num_positions = 0;  // positions the table serves: 0 .. num_positions-1
  int dim = 0;
  int offset = 0;             // 2 for BART/OPT
  std::vector<float> weight;  // [num_positions + offset][dim]

  int rows() const { return num_positions + offset; }
};

// N(0, std^2) rows from a deterministic generator (same seed, same table on every machine).
LearnedTable learned_init(int num_positions, int dim, double std, std::uint64_t seed, int offset = 0);

// out[t][dim] = weight[positions[t] + past + offset]. Throws posenc::Error for a row outside
// the table, naming the position.
void learned_lookup(const LearnedTable& table, const std::int64_t* positions, int count, std::int64_t past,
                    float* out);

// The table resized to new_num_positions positions (the offset rows are kept as they are).
LearnedTable learned_interpolate(const LearnedTable& table, int new_num_positions);

}  // namespace posenc
