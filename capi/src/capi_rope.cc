// RoPE in place through the C ABI: the schedule handle's frequencies, attention factor and
// M-RoPE axes, handed to rope_rotate (rope_kernels.h, the SIMD kernels every posenc caller uses),
// after the C views and ids are checked (capi_core.cc).
#include "capi_internal.h"
#include "posenc/rope_kernels.h"
#include "posenc/rope_shift.h"

namespace posenc::capi {
namespace {

posenc_rope_options options_of(const posenc_rope_options* options) {
  posenc_rope_options defaults;
  posenc_rope_options_init(&defaults);
  const posenc_rope_options o = read_versioned(options, defaults, "posenc_rope_options");
  in_range(o.threads, 0, kMaxThreads, "options->threads (0: every hardware thread)");
  return o;
}

}  // namespace
}  // namespace posenc::capi

using namespace posenc;
using namespace posenc::capi;

extern "C" {

POSENC_API posenc_status posenc_rope_rotate(const posenc_schedule* schedule, const posenc_tensor* q,
                                            const posenc_tensor* k, const posenc_positions* positions,
                                            const posenc_rope_options* options) {
  return guarded(__func__, [&] {
    const posenc_schedule& s = handle(schedule);
    const posenc_rope_options o = options_of(options);
    if (o.direction != 1 && o.direction != -1)
      fail("options->direction must be +1 or -1, got " + std::to_string(o.direction));
    const RopeTensor qt = to_tensor(q, "q");
    RopeTensor kt;
    if (k) {
      kt = to_tensor(k, "k");
      if (views_overlap(qt, kt)) fail("q and k share elements: each would be rotated twice");
    }
    PositionIds ids = to_positions(positions, "positions");
    refuse_xdrope_axes(s, ids, "positions");
    RopeApplyParams params = apply_params(s, layout_of(o.layout, s, "options->layout"), __func__);
    params.direction = o.direction;
    fit_implicit_axes(ids, &params);
    check_id_values(ids, qt, "positions");
    if (empty_view(qt) && (!k || empty_view(kt))) return;  // nothing to rotate (data may be NULL)
    KernelOptions kernel;
    kernel.threads = o.threads;
    rope_rotate(qt, k ? &kt : nullptr, ids, params, kernel);
  });
}

POSENC_API posenc_status posenc_rope_shift_keys(const posenc_schedule* schedule, const posenc_tensor* k,
                                                int64_t delta, const posenc_rope_options* options) {
  return guarded(__func__, [&] {
    const posenc_schedule& s = handle(schedule);
    const posenc_rope_options o = options_of(options);
    const RopeTensor kt = to_tensor(k, "k");
    in_range(delta, -kMaxPosition, kMaxPosition, "delta");
    RopeApplyParams params = apply_params(s, layout_of(o.layout, s, "options->layout"), __func__);
    if (delta == 0 || empty_view(kt)) return;
    // The core's rope_shift (rope_shift.h): the attention factor not applied again, DeepSeek-V3
    // keys as the half-split pairs they are stored in, every M-RoPE axis moved; p -> p + delta.
    RopeShiftParams shift;
    shift.rope = params;
    shift.rope.direction = 1;
    shift.delta = delta;
    KernelOptions kernel;
    kernel.threads = o.threads;
    rope_shift(kt, shift, kernel);
  });
}

}  // extern "C"
