// What every C entry point shares: the one exception barrier (guarded), the argument checks that
// run before any memory is touched, the versioned-struct reader, the schedule handle, and the
// conversion of C views and position ids into posenc's C++ ones.
#pragma once

#include <cstdint>
#include <climits>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "posenc.h"
#include "posenc/model_spec.h"
#include "posenc/rope_apply.h"
#include "posenc/rope_runtime.h"

// The handle behind posenc_schedule*: the selected layer's params (for HF's runtime rule), its
// schedule in force (runtime.current()), the layer facts, and the strings getters hand out.
struct posenc_schedule {
  posenc::Numerics numerics = posenc::Numerics::kAccurate;
  bool has_rope = false;
  posenc::RopeParams params;                   // meaningful when has_rope
  std::optional<posenc::RopeRuntime> runtime;  // set when has_rope
  std::vector<std::uint8_t> axis_of_freq;      // M-RoPE: one axis per frequency; empty otherwise
  bool family_known = false;
  posenc::LayerSpec layer;                     // index -1 when selected by type, family unknown
  std::vector<int> mrope_section;
  std::string model_type, layer_type, rope_type, mrope_style;

  const posenc::RopeSchedule* schedule() const { return runtime ? &runtime->current() : nullptr; }
};

namespace posenc::capi {

// An argument the C layer refuses itself (status POSENC_ERR_ARGUMENT or POSENC_ERR_BUFFER).
struct ArgError {
  posenc_status status;
  std::string message;
};
[[noreturn]] void fail(const std::string& message, posenc_status status = POSENC_ERR_ARGUMENT);

// Stores the thread's last error text; returns status.
posenc_status set_error(posenc_status status, const std::string& message);

// The barrier: runs body, turns every exception into a status and text prefixed with the
// function's name. Nothing escapes (catch (...) included).
template <typename Body>
posenc_status guarded(const char* function, Body&& body) noexcept {
  try {
    body();
    return POSENC_OK;
  } catch (const ArgError& e) {
    return set_error(e.status, std::string(function) + ": " + e.message);
  } catch (const posenc::Error& e) {
    return set_error(POSENC_ERR_VALUE, std::string(function) + ": " + e.what());
  } catch (const std::bad_alloc&) {
    return set_error(POSENC_ERR_MEMORY, std::string(function) + ": out of memory");
  } catch (const std::exception& e) {
    return set_error(POSENC_ERR_INTERNAL, std::string(function) + ": internal error: " + e.what());
  } catch (...) {
    return set_error(POSENC_ERR_INTERNAL, std::string(function) + ": internal error (unknown exception)");
  }
}

template <typename T>
void require(const T* pointer, const char* name) {
  if (!pointer) fail(std::string(name) + " is NULL");
}

// A size in [lo, hi], else an error naming it and its value.
std::int64_t in_range(std::int64_t value, std::int64_t lo, std::int64_t hi, const std::string& name);

// Reads a struct that begins with `uint32_t struct_size` written by a caller compiled against
// this header or another of the same major: shorter (an older header) keeps our defaults for the
// missing tail; longer (a newer header) is accepted when every byte we do not know is zero.
template <typename T>
T read_versioned(const T* in, T defaults, const char* name) {
  if (!in) return defaults;
  std::uint32_t size = 0;
  std::memcpy(&size, in, sizeof size);
  if (size < sizeof(std::uint32_t) || size > (1u << 16))
    fail(std::string(name) + "->struct_size " + std::to_string(size) + " is not a size of " + name +
         " (set it to sizeof, or call its _init function)");
  const unsigned char* bytes = reinterpret_cast<const unsigned char*>(in);
  for (std::size_t i = sizeof(T); i < size; ++i)
    if (bytes[i] != 0)
      fail(std::string(name) + " has fields this library (ABI " + std::to_string(POSENC_ABI_VERSION) +
           ") does not know, set at byte " + std::to_string(i) + " of struct_size " + std::to_string(size));
  T out = defaults;
  std::memcpy(&out, in, size < sizeof(T) ? size : sizeof(T));
  out.struct_size = sizeof(T);
  return out;
}

// values into out[0 .. capacity); *count = how many there are. out NULL with capacity 0 asks
// only the count (POSENC_OK); otherwise POSENC_ERR_BUFFER when capacity is less.
template <typename T>
void copy_out(const std::vector<T>& values, T* out, std::int64_t capacity, std::int64_t* count, const char* what) {
  require(count, "count");
  in_range(capacity, 0, INT64_MAX, "capacity");
  const auto n = static_cast<std::int64_t>(values.size());
  *count = n;
  if (!out && capacity == 0) return;  // the question "how many?"
  if (capacity < n)
    fail(std::string(what) + " has " + std::to_string(n) + " values, capacity is " + std::to_string(capacity),
         POSENC_ERR_BUFFER);
  if (n == 0) return;
  require(out, "out");
  std::memcpy(out, values.data(), values.size() * sizeof(T));
}

// Implicit ids (t + offset) read the same on every axis: give them as many axes as the
// frequencies read (M-RoPE: 3), one otherwise (the biases want one).
inline void fit_implicit_axes(PositionIds& ids, const RopeApplyParams* rope) {
  if (!ids.ids && !ids.ids32) ids.axes = rope && rope->axis_of_freq ? 3 : 1;
}

const posenc_schedule& handle(const posenc_schedule* s);

// XD-RoPE (HunYuan-VL) pairs channels that can read two position axes: no per-frequency map, so
// its schedule rotates 1-axis (text) ids only; explicit ids with more axes are refused, naming why.
inline void refuse_xdrope_axes(const posenc_schedule& s, const PositionIds& ids, const char* name) {
  if (s.mrope_style == "xdrope" && ids.axes > 1)
    fail(std::string(name) + " have " + std::to_string(ids.axes) + " axes, but this schedule is HunYuan-VL's XD-RoPE, " +
         "whose rotate_half pairs can read two position axes (no pair rotation applies it): pass 1-axis (text) ids");
}

RopeLayout layout_of(std::int32_t layout, const posenc_schedule& schedule, const char* name);

// A C view checked (dtype, non-negative sizes and strides, int range, rows that do not share an
// element, an element count that fits in memory) and converted.
RopeTensor to_tensor(const posenc_tensor* view, const char* name);
inline bool empty_view(const RopeTensor& x) { return x.batch == 0 || x.tokens == 0 || x.heads == 0; }
// One past the last element a non-empty, checked view reaches (in elements from data).
std::int64_t extent_elements(const RopeTensor& x);
// Whether two views share an element: false also for heads of one buffer (same strides, k's
// first head a whole number of heads after q's last).
bool views_overlap(const RopeTensor& a, const RopeTensor& b);

PositionIds to_positions(const posenc_positions* ids, const char* name);
// Reads every id the view will use and refuses one beyond +-2^40 (id + offset cannot overflow;
// posenc's own validate then checks [0, 2^31-1] and names the token).
void check_id_values(const PositionIds& ids, const RopeTensor& x, const char* name);

// The schedule's kernel parameters (inv_freq and axes point into the handle); a NoPE layer is
// an error naming it.
RopeApplyParams apply_params(const posenc_schedule& schedule, RopeLayout layout, const char* function);

}  // namespace posenc::capi
