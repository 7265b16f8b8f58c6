// The one foreach_target translation unit of the RoPE kernels: compiles the kernels' -inl.h files
// (below, in dependency order) for every Highway target and exports coarse entry points ("rotate
// this whole call"), dispatched once per call, never per row.
#include "posenc/rope_kernels.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "rope_kernels.cc"  // this file, once per target
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include "rope_widths-inl.h"         // the vector widths
#include "rope_rotate-inl.h"         // one pair; DeepSeek-V3's pairs <-> halves
#include "rope_convert-inl.h"        // bf16/f16 <-> float32 storage conversions
#include "rope_prefetch-inl.h"       // the prefetch hints of a call's policy
#include "rope_token_kernels-inl.h"  // one token, per layout x storage type
#include "rope_token_switch-inl.h"   // which token kernel: the layout / dtype switch
#include "rope_sincos-inl.h"         // cos/sin rows on the fly (accurate angles)
#include "rope_walk-inl.h"           // the walks over a call's tensors: RotateAll

HWY_BEFORE_NAMESPACE();
namespace posenc {
namespace HWY_NAMESPACE {

std::int64_t CurrentTarget() { return HWY_TARGET; }
bool TargetNarrowsBf16() { return POSENC_NATIVE_BF16; }

}  // namespace HWY_NAMESPACE
}  // namespace posenc
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include <algorithm>
#include <chrono>
#include <string>

#include "posenc/error.h"
#include "rope_prefetch_tuner.h"

namespace posenc {

HWY_EXPORT(RotateAll);
HWY_EXPORT(CurrentTarget);
HWY_EXPORT(TargetNarrowsBf16);

RopeTable::RopeTable(const RopeApplyParams& params, std::int64_t initial_positions)
    : inv_freq_(params.inv_freq, params.inv_freq + params.num_freqs), params_(params) {
  if (params.num_freqs < 1 || !params.inv_freq) throw Error("RoPE table needs inv_freq");
  if (initial_positions < 1 || initial_positions > kMaxPosition + 1)
    throw Error("RoPE table size must be in [1, 2^31], got " + std::to_string(initial_positions));
  params_.inv_freq = inv_freq_.data();
  params_.direction = 1;
  ensure(initial_positions - 1);
}

bool RopeTable::matches(const RopeApplyParams& p) const {
  if (p.num_freqs != params_.num_freqs || p.attention_factor != params_.attention_factor || p.angles != params_.angles)
    return false;
  return std::equal(inv_freq_.begin(), inv_freq_.end(), p.inv_freq);
}

std::shared_ptr<const RopeTable::Rows> RopeTable::ensure(std::int64_t max_position) const {
  if (max_position < 0 || max_position > kMaxPosition)
    throw Error("RoPE table position must be in [0, 2^31-1], got " + std::to_string(max_position));
  std::lock_guard<std::mutex> lock(mutex_);
  if (rows_ && rows_->positions > max_position) return rows_;
  std::int64_t size = rows_ ? rows_->positions : 1;
  while (size <= max_position) size = std::min<std::int64_t>(2 * size, kMaxPosition + 1);
  auto rows = std::make_shared<Rows>();
  rows->positions = size;
  rows->num_freqs = params_.num_freqs;
  const std::size_t half = static_cast<std::size_t>(params_.num_freqs);
  rows->cos.resize(static_cast<std::size_t>(size) * half);
  rows->sin.resize(static_cast<std::size_t>(size) * half);
  const std::int64_t reuse = rows_ ? rows_->positions : 0;  // rows already computed stay valid
  if (reuse) {
    std::copy(rows_->cos.begin(), rows_->cos.end(), rows->cos.begin());
    std::copy(rows_->sin.begin(), rows_->sin.end(), rows->sin.begin());
  }
  for (std::int64_t p = reuse; p < size; ++p)
    for (std::size_t j = 0; j < half; ++j)
      rope_cos_sin(params_.inv_freq[j], p, params_, &rows->cos[static_cast<std::size_t>(p) * half + j],
                   &rows->sin[static_cast<std::size_t>(p) * half + j]);
  rows_ = std::move(rows);
  return rows_;
}

void rope_rotate(const RopeTensor& q, const RopeTensor* k, const PositionIds& positions, const RopeApplyParams& params,
                 const RopeKernelOptions& options) {
  validate(q, positions, params);
  RotateJob job;
  job.tensors[0] = q;
  if (k) {
    if (k->batch != q.batch || k->tokens != q.tokens)
      throw Error("k must have q's batch and tokens: q " + std::to_string(q.batch) + "x" + std::to_string(q.tokens) +
                  ", k " + std::to_string(k->batch) + "x" + std::to_string(k->tokens));
    validate(*k, positions, params);
    job.tensors[1] = *k;
    job.num_tensors = 2;
  }
  job.positions = &positions;
  job.params = &params;
  job.threads = kernel_threads(options.threads, "rope");
  job.native_bf16 = rope_native_bf16();
  std::shared_ptr<const RopeTable::Rows> rows;
  CosSinRows table_rows;
  if (options.table) {
    if (!options.table->matches(params))
      throw Error("the RoPE table was built for other frequencies, attention factor or angle mode");
    std::int64_t max_position = 0;
    for (int a = 0; a < positions.axes; ++a)
      for (int b = 0; b < q.batch; ++b)
        for (int t = 0; t < q.tokens; ++t) max_position = std::max(max_position, positions.at(a, b, t, q.tokens));
    rows = options.table->ensure(max_position);
    table_rows = {rows->cos.data(), rows->sin.data()};
    job.table = &table_rows;
  }
  if (std::int64_t{q.batch} * q.tokens == 0) return;
  dispatch_rotate(job);
}

namespace {

// The class a job's prefetch is measured in (rope_prefetch_tuner.h): its walk, as RotateAllT
// (rope_walk-inl.h) picks it, and its storage dtype. Head-major: every tensor of more than one
// head is (AllHeadMajor); grouped: with a 1-D table and no xPos.
int prefetch_class(const RotateJob& job) {
  bool head_major = true;
  for (int i = 0; i < job.num_tensors; ++i)
    if (job.tensors[i].heads > 1 && job.tensors[i].token_stride > job.tensors[i].head_stride) head_major = false;
  const bool groups = head_major && job.table && !job.params->axis_of_freq && !job.params->xpos.enabled();
  const RopeWalk walk = groups ? RopeWalk::kHeadMajorGroups : head_major ? RopeWalk::kHeadMajorByToken : RopeWalk::kTokenMajor;
  return rope_prefetch_class(walk, job.tensors[0].dtype);
}

// Bytes a job's rotated rows hold (each read and written once).
std::size_t rotated_bytes(const RotateJob& job) {
  std::size_t bytes = 0;
  for (int i = 0; i < job.num_tensors; ++i) {
    const RopeTensor& x = job.tensors[i];
    bytes += static_cast<std::size_t>(x.batch) * x.tokens * x.heads * 2 * job.params->num_freqs * dtype_size(x.dtype);
  }
  return bytes;
}

}  // namespace

void dispatch_rotate(const RotateJob& job) {
  RotateJob parts = job;  // the rotated channels and heads of each view (validated by the caller)
  for (int i = 0; i < job.num_tensors; ++i) parts.tensors[i] = rotated_part(job.tensors[i], *job.params);
  RopePrefetchTuner& tuner = rope_prefetch_tuner();
  const int cls = prefetch_class(parts), tokens = parts.tensors[0].tokens;
  const std::size_t bytes = rotated_bytes(parts);
  const RopePrefetchTuner::Step step = tuner.next(cls, tokens >= 2 ? bytes : 0);
  if (!step.trial) {
    parts.prefetch = step.policy;
    HWY_DYNAMIC_DISPATCH(RotateAll)(parts);
    return;
  }
  // A trial: the first half of the tokens under one policy, the rest under the other, each once.
  const auto timed = [&](int begin, int end, RopePrefetch policy) {
    parts.token_begin = begin;
    parts.token_end = end;
    parts.prefetch = policy;
    const auto start = std::chrono::steady_clock::now();
    HWY_DYNAMIC_DISPATCH(RotateAll)(parts);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    tuner.record(cls, policy, seconds / (static_cast<double>(bytes) * (end - begin) / tokens));
  };
  timed(0, tokens / 2, step.first);
  timed(tokens / 2, tokens, step.second);
}

RopePrefetchChoice rope_prefetch_choice(const RopeTensor& q, const RopeApplyParams& params, const RopeKernelOptions& options) {
  RotateJob job;
  job.tensors[0] = q;
  job.params = &params;
  const CosSinRows rows;
  job.table = options.table ? &rows : nullptr;  // only whether there is one
  const RopePrefetchTuner& tuner = rope_prefetch_tuner();
  const RopePrefetchTuner::Choice choice = tuner.choice(prefetch_class(job));
  return {rope_prefetch_name(choice.policy), choice.settled, tuner.min_trial_bytes()};
}

namespace {
bool native_bf16_allowed = true;
}  // namespace

bool rope_native_bf16() {
#if HWY_ARCH_X86 && (defined(__GNUC__) || defined(__clang__))
  static const bool cpu_has_it = __builtin_cpu_supports("avx512bf16");
  return cpu_has_it && native_bf16_allowed && HWY_DYNAMIC_DISPATCH(TargetNarrowsBf16)();
#else
  return false;
#endif
}

void allow_rope_native_bf16_for_test(bool allowed) { native_bf16_allowed = allowed; }

const char* rope_kernel_target() { return hwy::TargetName(HWY_DYNAMIC_DISPATCH(CurrentTarget)()); }

}  // namespace posenc
#endif  // HWY_ONCE
