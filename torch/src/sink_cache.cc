#include "posenc_torch/sink_cache.h"

#include <string>

#include "posenc/error.h"
#include "posenc/rope_shift.h"
#include "posenc_torch/kernel_view.h"

namespace posenc::torch_layer {
namespace {

// x [..., T, ...] along dim without the tokens [sinks, sinks + gap).
torch::Tensor without_gap(const torch::Tensor& x, std::int64_t dim, std::int64_t sinks, std::int64_t gap) {
  const std::int64_t T = x.size(dim);
  return torch::cat({x.narrow(dim, 0, sinks), x.narrow(dim, sinks + gap, T - sinks - gap)}, dim);
}

}  // namespace

SinkCache::SinkCache(const SinkCacheOptions& options) : options_(options) {
  if (options.sinks < 0 || options.sinks > kMaxPosition)
    throw Error("SinkCache: sinks = " + std::to_string(options.sinks) + " must be in [0, 2^31-1]");
  if (options.window < 1 || options.window > kMaxPosition - options.sinks)
    throw Error("SinkCache: window = " + std::to_string(options.window) + " must be in [1, 2^31-1 - sinks]");
  cache_.hf_stale_keys = true;  // keys cached after RoPE: what a sink cache shifts
}

void SinkCache::evict(const RopeSpec& rope) {
  const std::int64_t T = cache_.length(), s = options_.sinks, keep = s + options_.window;
  if (T <= keep) return;
  const std::int64_t gap = T - keep;
  if (options_.rerotate && cache_.xpos_keys)
    throw Error("SinkCache: keys cached with xPos's scales cannot be re-rotated to other slots (each key's scale is its "
                "position's, rope_shift moves only the angle); use rerotate = false, which keeps every key at its position");
  for (std::size_t layer = 0; layer < cache_.k.size(); ++layer) {
    torch::Tensor& k = cache_.k[layer];
    if (!k.defined()) continue;
    k = without_gap(k, 2, s, gap);  // a fresh contiguous [B, Hk, keep, D]
    cache_.v[layer] = without_gap(cache_.v[layer], 2, s, gap);
    if (layer < cache_.gate.size() && cache_.gate[layer].defined()) cache_.gate[layer] = without_gap(cache_.gate[layer], 2, s, gap);
    if (!options_.rerotate) continue;
    RopeShiftParams shift;
    shift.rope = rope.params();
    shift.delta = -gap;  // p -> p - gap: the window's first key moves to slot s
    shift.begin = static_cast<int>(s);
    shift.end = static_cast<int>(keep);
    KernelOptions threads;
    threads.threads = torch::get_num_threads();
    rope_shift(kernel_view(k, "SinkCache: keys"), shift, threads);
  }
  cache_.mask = without_gap(cache_.mask, 1, s, gap);
  if (cache_.tokens.defined()) cache_.tokens = without_gap(cache_.tokens, 1, s, gap);
  if (!options_.rerotate) cache_.position_offset += gap;  // new tokens keep their stream positions
  evicted_ += gap;
}

}  // namespace posenc::torch_layer
