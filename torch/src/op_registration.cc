#include "op_registration.h"

#include <memory>

namespace posenc::torch_layer {
namespace {

// The operators' registration, once per process. Two copies of this library can be loaded (the
// C++ layer's in lib/ and the Python package's own): the second finds the namespace taken and
// leaves the operators to the first, built from the same code, where TORCH_LIBRARY's static
// registration would throw during initialisation and terminate the process.
struct Registration {
  std::unique_ptr<torch::Library> def, cpu, autograd, other_devices;
  Registration() {
    try {
      def = std::make_unique<torch::Library>(torch::Library::DEF, "posenc", c10::nullopt, __FILE__, __LINE__);
    } catch (const c10::Error&) {
      return;  // registered by another copy of this library
    }
    cpu = std::make_unique<torch::Library>(torch::Library::IMPL, "posenc", c10::DispatchKey::CPU, __FILE__, __LINE__);
    autograd = std::make_unique<torch::Library>(torch::Library::IMPL, "posenc", c10::DispatchKey::Autograd, __FILE__, __LINE__);
    // The CPU's own kernels take precedence over these on the CPU.
    other_devices = std::make_unique<torch::Library>(torch::Library::IMPL, "posenc", c10::DispatchKey::CompositeExplicitAutograd,
                                                     __FILE__, __LINE__);
    const OpLibraries libraries{*def, *cpu, *autograd, *other_devices};
    register_rope_ops(libraries);
    register_attention_ops(libraries);
  }
};
const Registration registration;

}  // namespace
}  // namespace posenc::torch_layer
