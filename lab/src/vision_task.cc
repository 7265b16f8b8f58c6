// The vision lab's scenes (vision.h): two discs on a unit canvas, drawn into patches. No torch.
#include <cmath>
#include <random>

#include "posenc/error.h"
#include "posenc_lab/vision.h"

namespace posenc::lab {

void validate_vision_task(const VisionTask& task) {
  const double r = task.radius;
  // The discs must fit apart on the canvas, and both labels must be drawable.
  if (!(r > 0 && r < 0.25)) throw Error("vision task: radius must be in (0, 0.25), got " + format_number(r));
  if (!(task.near > 2 * r && task.near < std::sqrt(2.0) * (1 - 2 * r)))
    throw Error("vision task: near must be in (2 radius, sqrt(2) (1 - 2 radius)) = (" + format_number(2 * r) + ", " +
                format_number(std::sqrt(2.0) * (1 - 2 * r)) + "), got " + format_number(task.near));
  if (task.samples < 1 || task.samples > 16) throw Error("vision task: samples must be in [1, 16], got " + std::to_string(task.samples));
}

VisionImage vision_image(int grid, unsigned long long seed, const VisionTask& task) {
  if (grid < 1 || grid > kMaxVisionGrid)
    throw Error("vision grid must be in [1, " + std::to_string(kMaxVisionGrid) + "] patches per side, got " + std::to_string(grid));
  validate_vision_task(task);
  const double r = task.radius;
  std::mt19937_64 rng(seed);
  // Uniform in [r, 1 - r) from the generator's top 53 bits: the same scenes from every C++ library
  // (std::uniform_real_distribution's algorithm is the library's own).
  const auto centre = [&] { return r + (1 - 2 * r) * static_cast<double>(rng() >> 11) * 0x1.0p-53; };
  VisionImage image;
  image.label = static_cast<int>(rng() & 1u);  // balanced: the label first, then a scene that has it
  for (int draws = 0;; ++draws) {
    // A near close to a bound leaves one label almost no scenes (the defaults draw about 3 times).
    if (draws == 1000000)
      throw Error("vision task: no scene of label " + std::to_string(image.label) + " in a million draws at radius " + format_number(r) +
                  ", near " + format_number(task.near) + "; move near away from its bounds");
    for (double& v : image.a) v = centre();
    for (double& v : image.b) v = centre();
    const double d = std::hypot(image.a[0] - image.b[0], image.a[1] - image.b[1]);
    if (d > 2 * r && (d < task.near) == (image.label == 1)) break;  // apart, and of the label drawn
  }
  // Coverage: the fraction of samples x samples points, at the centres of a patch's sub-cells,
  // inside each disc. Patch (row, col) spans x in [col, col + 1) / grid, y in [row, row + 1) / grid.
  const int s = task.samples;
  const double cell = 1.0 / (grid * s);
  image.patches.assign(static_cast<std::size_t>(grid) * grid * 2, 0.0f);
  for (int row = 0; row < grid; ++row)
    for (int col = 0; col < grid; ++col) {
      int in_a = 0, in_b = 0;
      for (int i = 0; i < s; ++i)
        for (int j = 0; j < s; ++j) {
          const double x = (col * s + j + 0.5) * cell, y = (row * s + i + 0.5) * cell;
          in_a += std::hypot(x - image.a[0], y - image.a[1]) < r;
          in_b += std::hypot(x - image.b[0], y - image.b[1]) < r;
        }
      float* patch = &image.patches[(static_cast<std::size_t>(row) * grid + col) * 2];
      patch[0] = static_cast<float>(in_a) / static_cast<float>(s * s);
      patch[1] = static_cast<float>(in_b) / static_cast<float>(s * s);
    }
  return image;
}

}  // namespace posenc::lab
