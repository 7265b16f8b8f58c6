// The "posenc" operator namespace, registered once per process (op_registration.cc): each
// operator file adds its schemas and kernels through these libraries.
#pragma once

#include <torch/library.h>

namespace posenc::torch_layer {

struct OpLibraries {
  torch::Library& def;       // schemas
  torch::Library& cpu;       // CPU kernels
  torch::Library& autograd;  // Autograd kernels
  // Every other backend (a GPU's, meta): the torch-native paths, reached below autograd too (under
  // torch.inference_mode(), which skips the Autograd kernels).
  torch::Library& other_devices;
};

void register_rope_ops(const OpLibraries& libraries);       // rope_op.cc
void register_attention_ops(const OpLibraries& libraries);  // attention_op.cc

}  // namespace posenc::torch_layer
