// Tensors crossing from Python into _posenc. Each arrives as a DLPack capsule
// (torch.utils.dlpack.to_dlpack), so its address, dtype, shape and strides are the ones torch
// itself reports, read here from the capsule: no address or extent crosses as a plain integer
// that a caller (or a bug in the package) could get wrong and crash the interpreter with. Every
// view the kernels read or write is checked to lie inside the tensor it came from.
#pragma once

#include <pybind11/pybind11.h>

#include <cstdint>
#include <vector>

#include "posenc/rope_apply.h"

namespace posenc {

enum class ElementKind { kF32, kBF16, kF16, kI32, kI64, kU8 };

struct TensorArg {
  void* data = nullptr;  // the first element (the capsule's data + byte_offset)
  ElementKind kind = ElementKind::kF32;
  std::vector<std::int64_t> shape, strides;  // strides in elements
  std::int64_t numel = 1;
};

// The tensor a capsule describes: an Error naming `name` unless it is an unconsumed DLPack
// capsule of a CPU tensor of one of the kinds above. The capsule stays the caller's (it keeps the
// memory alive for the call and frees it when Python drops it).
TensorArg tensor_arg(const pybind11::handle& capsule, const char* name);

// The core's view of a 4-D float tensor: [B, S, H, D] for heads_dim 2, [B, H, S, D] for heads_dim
// 1; channels contiguous, every size within int.
RopeTensor rope_view(const TensorArg& t, int heads_dim, const char* name);

// A tensor the kernels write: an Error naming `name` if two of its elements share memory
// through a zero stride (an expanded view), which would be written once per alias.
void check_written(const TensorArg& t, const char* name);

// A contiguous buffer of `shape` and `kind` (a bias table, a mask, a log-sum-exp): its first
// element, or an Error naming `name`, the shape expected and the shape given.
void* contiguous_buffer(const TensorArg& t, ElementKind kind, const std::vector<std::int64_t>& shape, const char* name);

// Positions for a [batch, tokens] view from an int32 or int64 tensor shaped [S] (every batch row
// the same), [B, S] or [axes, B, S] (axes 1 to 3), contiguous; offset added to each.
PositionIds position_ids(const TensorArg& t, int batch, int tokens, std::int64_t offset, const char* name);

}  // namespace posenc
