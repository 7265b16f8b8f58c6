// Idefics3's (and Idefics2's, SmolVLM's) bucketised fractional coordinates, as
// Idefics3VisionEmbeddings.forward computes them (modeling_idefics3.py, transformers v5.0.0 ..
// c49429ed; the three classes are the same code): an image of nb patches along an axis reads table
// row bucketize(frac_i, boundaries, right=True), frac_i = float32(i * float32(1 / nb)) clamped to
// 1 - 1e-6 and rounded to the pixels' dtype, boundaries = torch.arange(1/N, 1.0, 1/N) in float32.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "posenc/error.h"
#include "posenc/half.h"
#include "posenc/position_grid.h"

namespace posenc {
namespace {

// torch.arange(start, end, step) in float32 on the CPU, as torch 1.13's kernel writes it: its
// length ceil((end - start) / step) in double; in blocks of 16, each vector of 8 lanes from a base
// float32(start + step * i0), lane j float32(double(base) + j * step); the rest one by one,
// float32(start + step * i). (Matched torch.arange(1/N, 1.0, 1/N) bit for bit for every N in
// [2, 300) on the AVX2 kernels; a build whose vectors hold 16 floats may differ by one ulp.)
std::vector<float> torch_arange_f32(double start, double end, double step) {
  const std::int64_t n = static_cast<std::int64_t>(std::ceil((end - start) / step));
  std::vector<float> out(static_cast<std::size_t>(std::max<std::int64_t>(n, 0)));
  const std::int64_t vectorised = n / 16 * 16;
  for (std::int64_t i = 0; i < n; ++i) {
    if (i < vectorised) {
      const std::int64_t i0 = i / 8 * 8;
      const float base = static_cast<float>(start + step * static_cast<double>(i0));
      out[i] = static_cast<float>(static_cast<double>(base) + static_cast<double>(i - i0) * step);
    } else {
      out[i] = static_cast<float>(start + step * static_cast<double>(i));
    }
  }
  return out;
}

float in_dtype(float x, DType dtype) {
  if (dtype == DType::kBF16) return bf16_to_float(float_to_bf16(x));
  if (dtype == DType::kF16) return f16_to_float(float_to_f16(x));
  return x;
}

}  // namespace

std::vector<int> bucket_rows(int table, int patches, DType coordinate_dtype) {
  if (table < 1 || table > 65536 || patches < 1 || patches > 65536)
    throw Error("bucketised coordinates need a table side and a patch count in [1, 65536], got " + std::to_string(table) +
                " and " + std::to_string(patches));
  const std::vector<float> boundaries = torch_arange_f32(1.0 / table, 1.0, 1.0 / table);
  const float step = 1.0f / static_cast<float>(patches);  // torch: 1.0 / int64 tensor, float32
  const float clamp_at = static_cast<float>(1.0 - 1e-6);
  std::vector<int> rows(static_cast<std::size_t>(patches));
  for (int i = 0; i < patches; ++i) {
    const float frac = in_dtype(std::min(static_cast<float>(i) * step, clamp_at), coordinate_dtype);
    int bucket = 0;  // right=True: the boundaries b <= frac (compared in float32)
    while (bucket < static_cast<int>(boundaries.size()) && boundaries[bucket] <= frac) ++bucket;
    rows[i] = bucket;
  }
  return rows;
}

}  // namespace posenc
