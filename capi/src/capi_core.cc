// The C ABI's shared machinery: the version, the thread's last error, and the checks that turn
// a C view or position-id struct into posenc's C++ ones before any memory is read or written.
#include <algorithm>
#include <climits>
#include <utility>

#include "capi_internal.h"
#include "posenc/rope_params.h"

namespace posenc::capi {

namespace {
// One per thread: a failure on another thread never overwrites the text a caller is reading.
thread_local std::string last_error;

// Views larger than this many bytes are refused as absurd (256 TiB: beyond any machine's memory,
// far below where an offset in bytes would overflow int64 or a pointer).
constexpr std::int64_t kMaxViewBytes = std::int64_t{1} << 48;
}  // namespace

void fail(const std::string& message, posenc_status status) { throw ArgError{status, message}; }

posenc_status set_error(posenc_status status, const std::string& message) {
  try {
    last_error = message;
  } catch (...) {  // no memory for the text: the status still says what happened
    last_error.clear();
  }
  return status;
}

std::int64_t in_range(std::int64_t value, std::int64_t lo, std::int64_t hi, const std::string& name) {
  if (value < lo || value > hi)
    fail(name + " must be in [" + std::to_string(lo) + ", " + std::to_string(hi) + "], got " + std::to_string(value));
  return value;
}

const posenc_schedule& handle(const posenc_schedule* s) {
  require(s, "schedule");
  return *s;
}

RopeLayout layout_of(std::int32_t layout, const posenc_schedule& schedule, const char* name) {
  switch (layout) {
    case POSENC_LAYOUT_MODEL: return schedule.layer.layout;
    case POSENC_LAYOUT_HALF_SPLIT: return RopeLayout::kHalfSplit;
    case POSENC_LAYOUT_INTERLEAVED: return RopeLayout::kInterleaved;
    case POSENC_LAYOUT_DEEPSEEK_V3: return RopeLayout::kDeepSeekV3;
  }
  fail(std::string(name) + " " + std::to_string(layout) +
       " is not a layout: 0 (model), 1 (half_split), 2 (interleaved), 3 (deepseek_v3)");
}

namespace {

DType dtype_of(std::int32_t dtype, const std::string& name) {
  switch (dtype) {
    case POSENC_DTYPE_F32: return DType::kF32;
    case POSENC_DTYPE_BF16: return DType::kBF16;
    case POSENC_DTYPE_F16: return DType::kF16;
  }
  fail(name + ".dtype " + std::to_string(dtype) + " is not a dtype: 0 (f32), 1 (bf16), 2 (f16)");
}

struct Dim {
  std::int64_t extent, stride;
};

// The dims of a view that have more than one row, smallest stride first.
std::vector<Dim> row_dims(const RopeTensor& x) {
  std::vector<Dim> dims;
  for (Dim d : {Dim{x.heads, x.head_stride}, Dim{x.tokens, x.token_stride}, Dim{x.batch, x.batch_stride}})
    if (d.extent > 1) dims.push_back(d);
  std::sort(dims.begin(), dims.end(), [](Dim a, Dim b) { return a.stride < b.stride; });
  return dims;
}

// Rows are disjoint when, smallest stride first, each stride steps past everything the smaller
// dims reach (sufficient; every dense or sliced layout passes, an aliasing one does not).
bool rows_disjoint(const RopeTensor& x) {
  std::int64_t span = x.head_dim;
  for (Dim d : row_dims(x)) {
    if (d.stride < span) return false;
    span += (d.extent - 1) * d.stride;
  }
  return true;
}

}  // namespace

// The view's sizes are bounded (to_tensor), so no product overflows.
std::int64_t extent_elements(const RopeTensor& x) {
  std::int64_t span = x.head_dim;
  for (Dim d : row_dims(x)) span += (d.extent - 1) * d.stride;
  return span;
}

RopeTensor to_tensor(const posenc_tensor* view, const char* name) {
  require(view, name);
  const std::string n = name;
  RopeTensor x;
  x.dtype = dtype_of(view->dtype, n);
  x.batch = static_cast<int>(in_range(view->batch, 0, INT_MAX, n + ".batch"));
  x.tokens = static_cast<int>(in_range(view->tokens, 0, INT_MAX, n + ".tokens"));
  x.heads = static_cast<int>(in_range(view->heads, 0, INT_MAX, n + ".heads"));
  x.head_dim = static_cast<int>(in_range(view->head_dim, 1, kMaxHeadDim, n + ".head_dim"));
  // Strides below 2^40 elements: with extents below 2^31 no sum below overflows int64.
  x.batch_stride = in_range(view->batch_stride, 0, std::int64_t{1} << 40, n + ".batch_stride");
  x.token_stride = in_range(view->token_stride, 0, std::int64_t{1} << 40, n + ".token_stride");
  x.head_stride = in_range(view->head_stride, 0, std::int64_t{1} << 40, n + ".head_stride");
  x.data = view->data;
  if (empty_view(x)) return x;  // nothing is read or written; data may even be NULL
  require(view->data, (n + ".data").c_str());
  // Misaligned elements are undefined behaviour in the scalar paths (and slow in the vector ones).
  if (reinterpret_cast<std::uintptr_t>(view->data) % dtype_size(x.dtype) != 0)
    fail(n + ".data is not aligned to its " + std::to_string(dtype_size(x.dtype)) + "-byte elements");
  long double reach = x.head_dim;  // in long double: extent * stride may exceed int64 here
  for (Dim d : row_dims(x)) reach += static_cast<long double>(d.extent - 1) * d.stride;
  if (reach * static_cast<long double>(dtype_size(x.dtype)) > kMaxViewBytes)
    fail(n + " reaches " + std::to_string(static_cast<double>(reach)) +
         " elements: more than 2^48 bytes, not a view of memory");
  if (!rows_disjoint(x))
    fail(n + " has rows that share elements (strides batch " + std::to_string(x.batch_stride) + ", token " +
         std::to_string(x.token_stride) + ", head " + std::to_string(x.head_stride) + " for " +
         std::to_string(x.batch) + "x" + std::to_string(x.tokens) + "x" + std::to_string(x.heads) + "x" +
         std::to_string(x.head_dim) + ")");
  return x;
}

bool views_overlap(const RopeTensor& a, const RopeTensor& b) {
  if (empty_view(a) || empty_view(b)) return false;
  const auto begin_a = reinterpret_cast<std::uintptr_t>(a.data), begin_b = reinterpret_cast<std::uintptr_t>(b.data);
  const std::uintptr_t end_a = begin_a + static_cast<std::uintptr_t>(extent_elements(a)) * dtype_size(a.dtype);
  const std::uintptr_t end_b = begin_b + static_cast<std::uintptr_t>(extent_elements(b)) * dtype_size(b.dtype);
  if (end_a <= begin_b || end_b <= begin_a) return false;
  // Heads of one buffer (fused QKV, [B,S,H,D] or [B,H,S,D]): the same strides, b's first head j
  // heads after a's first; they share nothing when j is outside a's heads (or a's outside b's)
  // and the buffer holding both has disjoint rows.
  if (a.dtype != b.dtype || a.head_dim != b.head_dim || a.batch_stride != b.batch_stride ||
      a.token_stride != b.token_stride || a.head_stride != b.head_stride || a.head_stride == 0)
    return true;
  const std::int64_t bytes = static_cast<std::int64_t>(begin_b - begin_a);  // two's complement difference
  const std::int64_t head_bytes = a.head_stride * static_cast<std::int64_t>(dtype_size(a.dtype));
  if (bytes % head_bytes != 0) return true;
  const std::int64_t j = bytes / head_bytes;
  RopeTensor both = j >= 0 ? a : b;
  both.batch = std::max(a.batch, b.batch);
  both.tokens = std::max(a.tokens, b.tokens);
  if (j >= a.heads) both.heads = static_cast<int>(std::min<std::int64_t>(j + b.heads, INT_MAX));
  else if (-j >= b.heads) both.heads = static_cast<int>(std::min<std::int64_t>(-j + a.heads, INT_MAX));
  else return true;  // the head ranges intersect
  return !rows_disjoint(both);
}

PositionIds to_positions(const posenc_positions* ids, const char* name) {
  require(ids, name);
  const std::string n = name;
  // |offset| below 2^31 and ids below 2^40 (checked where the view is known): no sum overflows.
  const std::int64_t offset = in_range(ids->offset, -kMaxPosition, kMaxPosition, n + ".offset");
  if (ids->kind == POSENC_IDS_IMPLICIT) {
    return PositionIds::implicit(offset);  // axes: fit_implicit_axes
  }
  if (ids->kind != POSENC_IDS_INT32 && ids->kind != POSENC_IDS_INT64)
    fail(n + ".kind " + std::to_string(ids->kind) + " is not one of 0 (implicit), 1 (int32), 2 (int64)");
  require(ids->ids, (n + ".ids").c_str());
  const std::size_t width = ids->kind == POSENC_IDS_INT32 ? 4 : 8;
  if (reinterpret_cast<std::uintptr_t>(ids->ids) % width != 0)
    fail(n + ".ids is not aligned to its " + std::to_string(width) + "-byte ids");
  PositionIds p;
  p.axes = static_cast<int>(in_range(ids->axes, 1, 3, n + ".axes"));
  p.axis_stride = in_range(ids->axis_stride, 0, std::int64_t{1} << 40, n + ".axis_stride");
  p.offset = offset;
  p.shared_across_batch = ids->shared_across_batch != 0;
  if (ids->kind == POSENC_IDS_INT32) p.ids32 = static_cast<const std::int32_t*>(ids->ids);
  else p.ids = static_cast<const std::int64_t*>(ids->ids);
  return p;
}

void check_id_values(const PositionIds& ids, const RopeTensor& x, const char* name) {
  if (!ids.ids) return;  // int32 ids plus an offset below 2^31 fit in int64
  constexpr std::int64_t kLimit = std::int64_t{1} << 40;
  const int rows = ids.shared_across_batch ? std::min(x.batch, 1) : x.batch;
  for (int a = 0; a < ids.axes; ++a)
    for (int b = 0; b < rows; ++b)
      for (int t = 0; t < x.tokens; ++t) {
        const std::int64_t v = ids.ids[a * ids.axis_stride + std::int64_t{b} * x.tokens + t];
        if (v < -kLimit || v > kLimit)
          fail(std::string(name) + " id " + std::to_string(v) + " (axis " + std::to_string(a) + ", batch " +
               std::to_string(b) + ", token " + std::to_string(t) + ") is not a position", POSENC_ERR_VALUE);
      }
}

RopeApplyParams apply_params(const posenc_schedule& s, RopeLayout layout, const char* function) {
  const RopeSchedule* r = s.schedule();
  if (!r || r->inv_freq.empty())
    fail(std::string(function) + ": layer " + std::to_string(s.layer.index) + " ('" + s.layer_type +
             "') has no RoPE (NoPE): nothing to rotate",
         POSENC_ERR_VALUE);
  RopeApplyParams p;
  p.inv_freq = r->inv_freq.data();
  p.num_freqs = static_cast<int>(r->inv_freq.size());
  p.axis_of_freq = s.axis_of_freq.empty() ? nullptr : s.axis_of_freq.data();
  p.attention_factor = r->attention_factor;
  p.layout = layout;
  p.angles = s.numerics;
  return p;
}

// A versioned struct zeroed with its struct_size stamped; false for a null pointer.
template <typename T>
bool stamped(T* p) {
  if (!p) return false;
  *p = T{};
  p->struct_size = sizeof(T);
  return true;
}

}  // namespace posenc::capi

using namespace posenc::capi;

extern "C" {

POSENC_API int32_t posenc_abi_version(void) { return POSENC_ABI_VERSION; }

POSENC_API const char* posenc_last_error(void) { return last_error.c_str(); }

// ---- the defaults of the versioned structs (posenc.h: what a caller gets from *_init) ----

POSENC_API void posenc_rope_options_init(posenc_rope_options* options) {
  if (!stamped(options)) return;
  options->layout = POSENC_LAYOUT_MODEL;
  options->direction = 1;
}

POSENC_API void posenc_attention_params_init(posenc_attention_params* params) {
  if (!stamped(params)) return;
  params->causal = 1;
  params->past = -1;
  params->positions = POSENC_POS_NONE;
  params->rope_layout = POSENC_LAYOUT_MODEL;
  params->alibi_mode = POSENC_ALIBI_CAUSAL;
  params->t5_num_buckets = 32;
  params->t5_max_distance = 128;
  params->t5_bidirectional = 1;
  params->remap_group = 1;
}

}  // extern "C"
