// Uses the installed posenc::core: Llama 3.1's schedule and one rotation.
#include <cstdio>
#include <vector>

#include "posenc/rope_kernels.h"

int main() {
  posenc::RopeParams p;
  p.type = posenc::RopeType::kLlama3;
  p.head_dim = 128;
  p.theta = 500000;
  p.factor = 8;
  p.low_freq_factor = 1;
  p.high_freq_factor = 4;
  p.original_max_position_embeddings = 8192;
  const posenc::RopeSchedule s = posenc::compute_schedule(p);
  std::vector<float> x(128, 1.0f);
  posenc::rope_rotate(posenc::bshd(x.data(), {1, 1, 1, 128}), nullptr, {}, posenc::rope_apply_params(s));
  std::printf("inv_freq[63] %.9g, x[0] %.3f, target %s\n", s.inv_freq[63], x[0], posenc::rope_kernel_target());
  return s.inv_freq.size() == 64 && x[0] == 1.0f ? 0 : 1;
}
