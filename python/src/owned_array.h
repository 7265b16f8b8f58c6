// A result vector as a 1-D numpy array that owns it (torch.from_numpy shares it): 4 bytes a
// float32, where a Python list of floats costs ~30 and peaked at 12x the result's size.
#pragma once

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <vector>

namespace posenc {

template <class T>
pybind11::array_t<T> owned_array(std::vector<T>&& values) {
  auto* heap = new std::vector<T>(std::move(values));
  pybind11::capsule owner(heap, [](void* p) { delete static_cast<std::vector<T>*>(p); });
  return pybind11::array_t<T>({static_cast<pybind11::ssize_t>(heap->size())},
                              {static_cast<pybind11::ssize_t>(sizeof(T))}, heap->data(), owner);
}

}  // namespace posenc
