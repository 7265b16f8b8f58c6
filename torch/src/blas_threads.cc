#include "posenc_torch/blas_threads.h"

#include <dlfcn.h>
#include <torch/torch.h>

namespace posenc::torch_layer {

int set_torch_and_blas_threads(int threads) {
  torch::set_num_threads(threads);
  using SetThreads = void (*)(int);
  using GetThreads = int (*)();
  const auto set = reinterpret_cast<SetThreads>(dlsym(RTLD_DEFAULT, "openblas_set_num_threads"));
  const auto get = reinterpret_cast<GetThreads>(dlsym(RTLD_DEFAULT, "openblas_get_num_threads"));
  if (!set || !get) return 0;
  set(threads);
  return get();
}

}  // namespace posenc::torch_layer
