#include "tensor_arg.h"

#include <Python.h>

#include <algorithm>
#include <climits>
#include <utility>
#include <string>

#include "posenc/error.h"

namespace posenc {
namespace {

// DLPack v0.6's C ABI (github.com/dmlc/dlpack, include/dlpack/dlpack.h), the layout PyTorch
// exports through to_dlpack in a capsule named "dltensor". Only the fields read here matter;
// the layout must stay whole for the offsets to be right.
struct DLDevice {
  std::int32_t device_type;  // 1: kDLCPU
  std::int32_t device_id;
};
struct DLDataType {
  std::uint8_t code;  // 0 int, 1 uint, 2 float, 4 bfloat
  std::uint8_t bits;
  std::uint16_t lanes;
};
struct DLTensor {
  void* data;
  DLDevice device;
  std::int32_t ndim;
  DLDataType dtype;
  std::int64_t* shape;
  std::int64_t* strides;  // elements; null: compact row-major
  std::uint64_t byte_offset;
};
struct DLManagedTensor {
  DLTensor dl_tensor;
  void* manager_ctx;
  void (*deleter)(DLManagedTensor*);
};

constexpr std::int32_t kDLCPU = 1;

ElementKind kind_of(const DLDataType& t, const char* name) {
  if (t.lanes == 1) {
    if (t.code == 2 && t.bits == 32) return ElementKind::kF32;
    if (t.code == 4 && t.bits == 16) return ElementKind::kBF16;
    if (t.code == 2 && t.bits == 16) return ElementKind::kF16;
    if (t.code == 0 && t.bits == 32) return ElementKind::kI32;
    if (t.code == 0 && t.bits == 64) return ElementKind::kI64;
    if (t.code == 1 && t.bits == 8) return ElementKind::kU8;
  }
  throw Error(std::string(name) + ": a tensor of DLPack type code " + std::to_string(t.code) + ", " +
              std::to_string(t.bits) + " bits, " + std::to_string(t.lanes) +
              " lanes; expected float32, bfloat16, float16, int32, int64 or uint8");
}

const char* kind_name(ElementKind k) {
  switch (k) {
    case ElementKind::kF32: return "float32";
    case ElementKind::kBF16: return "bfloat16";
    case ElementKind::kF16: return "float16";
    case ElementKind::kI32: return "int32";
    case ElementKind::kI64: return "int64";
    case ElementKind::kU8: return "uint8";
  }
  return "?";
}

std::string shape_text(const std::vector<std::int64_t>& shape) {
  std::string s = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

// torch's rule: row-major strides, those of size-1 dimensions and of empty tensors ignored.
bool contiguous(const TensorArg& t) {
  if (t.numel == 0) return true;
  std::int64_t expected = 1;
  for (std::size_t i = t.shape.size(); i-- > 0;) {
    if (t.shape[i] != 1 && t.strides[i] != expected) return false;
    expected *= t.shape[i];
  }
  return true;
}

int as_int(std::int64_t v, const char* name) {
  if (v > INT_MAX) throw Error(std::string(name) + ": a size of " + std::to_string(v) + " is over 2^31-1");
  return static_cast<int>(v);
}

}  // namespace

TensorArg tensor_arg(const pybind11::handle& capsule, const char* name) {
  if (!PyCapsule_CheckExact(capsule.ptr()) || !PyCapsule_IsValid(capsule.ptr(), "dltensor"))
    throw Error(std::string(name) + ": expected an unconsumed DLPack capsule (torch.utils.dlpack.to_dlpack), got " +
                std::string(pybind11::str(pybind11::type::of(capsule).attr("__name__"))));
  const auto* managed = static_cast<const DLManagedTensor*>(PyCapsule_GetPointer(capsule.ptr(), "dltensor"));
  if (!managed) throw pybind11::error_already_set();
  const DLTensor& d = managed->dl_tensor;
  if (d.device.device_type != kDLCPU)
    throw Error(std::string(name) + ": posenc's kernels run on the CPU, got a tensor of DLPack device type " +
                std::to_string(d.device.device_type));
  if (d.ndim < 0 || d.ndim > 8) throw Error(std::string(name) + ": " + std::to_string(d.ndim) + " dimensions");
  TensorArg t;
  t.kind = kind_of(d.dtype, name);
  t.shape.assign(d.shape, d.shape + d.ndim);
  t.strides.resize(d.ndim);
  std::int64_t compact = 1;
  for (int i = d.ndim; i-- > 0;) {
    if (t.shape[i] < 0) throw Error(std::string(name) + ": a negative size in " + shape_text(t.shape));
    t.strides[i] = d.strides ? d.strides[i] : compact;
    if (t.strides[i] < 0) throw Error(std::string(name) + ": a negative stride");
    compact *= t.shape[i];
  }
  t.numel = compact;
  t.data = static_cast<char*>(d.data) + d.byte_offset;
  return t;
}

RopeTensor rope_view(const TensorArg& t, int heads_dim, const char* name) {
  if (t.shape.size() != 4) throw Error(std::string(name) + ": expected a 4-D tensor, got " + shape_text(t.shape));
  if (heads_dim != 1 && heads_dim != 2) throw Error("heads_dim must be 1 or 2, got " + std::to_string(heads_dim));
  DType dtype = DType::kF32;
  if (t.kind == ElementKind::kBF16) dtype = DType::kBF16;
  else if (t.kind == ElementKind::kF16) dtype = DType::kF16;
  else if (t.kind != ElementKind::kF32)
    throw Error(std::string(name) + ": expected float32, bfloat16 or float16, got " + kind_name(t.kind));
  if (t.shape[3] > 1 && t.strides[3] != 1) throw Error(std::string(name) + ": the last dimension must be contiguous");
  const int s = heads_dim == 2 ? 1 : 2, h = heads_dim == 2 ? 2 : 1;
  return strided(t.data, dtype,
                 {as_int(t.shape[0], name), as_int(t.shape[s], name), as_int(t.shape[h], name), as_int(t.shape[3], name)},
                 {t.strides[0], t.strides[s], t.strides[h]});
}

// The rule of python/posenc/rope.py's _check_writable, sufficient for no two elements to share
// memory: sorted by stride, each dimension of size > 1 steps past the whole extent of the ones
// before it (dense tensors in any dimension order pass, as do fused projections' q, k, v views).
void check_written(const TensorArg& t, const char* name) {
  std::vector<std::pair<std::int64_t, std::size_t>> dims;  // (stride, dimension) of the sizes > 1
  for (std::size_t i = 0; i < t.shape.size(); ++i)
    if (t.shape[i] > 1) dims.emplace_back(t.strides[i], i);
  std::sort(dims.begin(), dims.end());
  std::int64_t extent = 0;  // the last element's offset over the dimensions so far
  for (const auto& [stride, i] : dims) {
    if (stride <= extent)
      throw Error(std::string(name) + " is written, but its elements share memory (an expanded or overlapping view: "
                  "dimension " + std::to_string(i) + " steps " + std::to_string(stride) + " elements, inside the " +
                  std::to_string(extent + 1) + " of the dimensions before it); pass a tensor of its own");
    extent += stride * (t.shape[i] - 1);
  }
}

void* contiguous_buffer(const TensorArg& t, ElementKind kind, const std::vector<std::int64_t>& shape, const char* name) {
  if (t.kind != kind || t.shape != shape || !contiguous(t))
    throw Error(std::string(name) + ": expected a contiguous " + kind_name(kind) + " " + shape_text(shape) + " tensor, got " +
                kind_name(t.kind) + " " + shape_text(t.shape) + (contiguous(t) ? "" : ", not contiguous"));
  return t.data;
}

PositionIds position_ids(const TensorArg& t, int batch, int tokens, std::int64_t offset, const char* name) {
  if (t.kind != ElementKind::kI32 && t.kind != ElementKind::kI64)
    throw Error(std::string(name) + ": positions must be int32 or int64, got " + kind_name(t.kind));
  const std::vector<std::int64_t>& s = t.shape;
  const bool one_row = s.size() == 1 && s[0] == tokens;
  const bool per_row = s.size() == 2 && s[0] == batch && s[1] == tokens;
  const bool axial = s.size() == 3 && s[0] >= 1 && s[0] <= 3 && s[1] == batch && s[2] == tokens;
  if ((!one_row && !per_row && !axial) || !contiguous(t))
    throw Error(std::string(name) + ": positions must be contiguous [S], [B, S] or [axes, B, S] with B = " +
                std::to_string(batch) + ", S = " + std::to_string(tokens) + ", axes 1 to 3; got " + shape_text(s));
  PositionIds ids;
  ids.axes = axial ? static_cast<int>(s[0]) : 1;
  ids.axis_stride = one_row ? 0 : std::int64_t{batch} * tokens;
  ids.shared_across_batch = one_row;
  ids.offset = offset;
  if (t.kind == ElementKind::kI32) ids.ids32 = static_cast<const std::int32_t*>(t.data);
  else ids.ids = static_cast<const std::int64_t*>(t.data);
  return ids;
}

}  // namespace posenc
