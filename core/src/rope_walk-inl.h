// The two walks of one rope_rotate call over its tensors (token-outer, and in groups of heads for
// head-major storage with a table), threaded with OpenMP, per Highway target (included by
// rope_kernels.cc, the one foreach_target unit, which dispatches RotateAll once per call).
// Per-target include guard, as Highway requires:
#if defined(POSENC_ROPE_WALK_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef POSENC_ROPE_WALK_INL_H_
#undef POSENC_ROPE_WALK_INL_H_
#else
#define POSENC_ROPE_WALK_INL_H_
#endif

#include <hwy/highway.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "posenc/aligned_vector.h"
#include "posenc/rope_apply.h"
#include "posenc/rope_xpos.h"
#include "rope_kernel_job.h"
#include "rope_sincos-inl.h"
#include "rope_token_switch-inl.h"

#ifdef _OPENMP
#include <omp.h>
#endif

HWY_BEFORE_NAMESPACE();
namespace posenc {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// Every tensor stored head-major ([B, H, S, D]: a head's tokens lie next to each other)?
inline bool AllHeadMajor(const RotateJob& job) {
  for (int i = 0; i < job.num_tensors; ++i)
    if (job.tensors[i].heads > 1 && job.tensors[i].token_stride > job.tensors[i].head_stride) return false;
  return true;
}

// Head-major storage with 1-D positions and a table: walked in groups of kHeadGroup heads of one
// tensor, token by token, so a cos/sin row read serves kHeadGroup rows of values. Its table is as
// many bytes as one f32 head's values (twice a bf16 head's), so reading it once per head — the
// walk before this one, one sequential stream per head — held every dtype at 0.50-0.65 of the
// memory ceiling on one thread (Zen 4), and 0.92 with the table's traffic removed. A group is
// kHeadGroup streams: 4 measured best (f32 0.90-0.98, bf16 0.80-0.83); 8 streams fell to 0.58-0.73
// and the token-outer walk below, one stream per head (40 for Llama-3-8B's q and k), to 0.38.
// The tokens go in chunks whose table rows (kTableChunkBytes) stay in L2 while every group of the
// thread's share rotates them, so the table comes from DRAM or L3 once per chunk, not per group.
// The other cos/sin modes compute rows, so they stay token-outer. Again for 16-bit rows (bf16
// [8192, 32 + 8, 128] bhsd, one thread, Zen 4, three runs each, median fraction of the ceiling):
// groups of 2 heads 0.54, 4 0.77, 8 0.71, 16 0.68; table chunks of 64-256 KiB 0.67-0.68, the
// 512 KiB below 0.75-0.77, 2-64 MiB 0.78-0.81 in the same runs (one run's three samples of one
// setting spread up to 0.05 that day): perhaps a little better, measured too little to change it.
constexpr int kHeadGroup = 4;
constexpr std::int64_t kTableChunkBytes = std::int64_t{512} << 10;  // half of a 1 MiB L2 (Zen 4)

// One work unit of the grouped walk: up to kHeadGroup consecutive heads of one tensor's batch row.
struct HeadGroup {
  int tensor = 0, batch = 0, head = 0, heads = 0;
};

inline int GroupsOf(int heads) { return (heads + kHeadGroup - 1) / kHeadGroup; }

// The units, tensors in order, batch rows, then head groups.
inline std::int64_t HeadGroupUnits(const RotateJob& job) {
  std::int64_t units = 0;
  for (int i = 0; i < job.num_tensors; ++i) units += std::int64_t{job.tensors[i].batch} * GroupsOf(job.tensors[i].heads);
  return units;
}

inline HeadGroup HeadGroupAt(const RotateJob& job, std::int64_t unit) {
  HeadGroup g;
  while (unit >= std::int64_t{job.tensors[g.tensor].batch} * GroupsOf(job.tensors[g.tensor].heads))
    unit -= std::int64_t{job.tensors[g.tensor].batch} * GroupsOf(job.tensors[g.tensor].heads), ++g.tensor;
  const int groups = GroupsOf(job.tensors[g.tensor].heads);
  g.batch = static_cast<int>(unit / groups);
  g.head = static_cast<int>(unit % groups) * kHeadGroup;
  g.heads = std::min(kHeadGroup, job.tensors[g.tensor].heads - g.head);
  return g;
}

template <bool kForward>
void RotateHeadGroups(const RotateJob& job) {
  const int half = job.params->num_freqs;
  const int first_token = job.token_begin, span = job.end_token() - first_token;  // the job's token range
  const std::int64_t units = HeadGroupUnits(job);
  // Fewer units than threads (10 for Llama-3-8B's q and k, on 16 cores): each unit's tokens are
  // cut into slices, so every thread has work and still walks few streams.
  const std::int64_t slices = std::max<std::int64_t>(1, (job.threads + units - 1) / units), items = units * slices;
  const int chunk = static_cast<int>(std::max<std::int64_t>(1, kTableChunkBytes / (2 * half * std::int64_t{sizeof(float)})));
#ifdef _OPENMP
#pragma omp parallel num_threads(job.threads)
#endif
  {
    std::vector<float> tmp(static_cast<std::size_t>(2 * half)), tmp2(static_cast<std::size_t>(2 * half));
#ifdef _OPENMP
    const std::int64_t thread = omp_get_thread_num(), threads = omp_get_num_threads();
#else
    const std::int64_t thread = 0, threads = 1;
#endif
    // Each thread its own run of (unit, slice) items through every chunk (its own L2): no barrier
    // per chunk.
    const std::int64_t first_item = items * thread / threads, end_item = items * (thread + 1) / threads;
    for (int t0 = first_token; t0 < first_token + span; t0 += chunk) {
      for (std::int64_t item = first_item; item < end_item; ++item) {
        const std::int64_t slice = item % slices;
        const int begin = std::max(t0, first_token + static_cast<int>(span * slice / slices));
        const int end = std::min(t0 + chunk, first_token + static_cast<int>(span * (slice + 1) / slices));
        if (begin >= end) continue;
        const HeadGroup g = HeadGroupAt(job, item / slices);
        RopeTensor view = job.tensors[g.tensor];
        view.heads = g.heads;
        const std::int64_t offset = g.batch * view.batch_stride + g.head * view.head_stride;
        RotateTokenRunOf<kForward>(job, view, TokenRun{offset, g.batch, begin, end}, tmp.data(), tmp2.data());
      }
    }
  }
}

// xPos (rope_xpos.h): the token's cos/sin row times the query's and the key's scales, one
// float32 product each (vector products round as scalar ones: the bits of rope_apply_reference);
// the kernels then rotate as for RoPE. The scales are formed here in vectors from XPosScales'
// two double factors (one product, rounded once to float32: XPosScales::at's bits). Formed by
// at()'s scalar loop, they were a fifth of the instructions of a [32 + 8 heads, 128] token and
// held xPos to 1.25-1.35x plain RoPE's time (Zen 4, `posenc bench rope --xpos --threads 1`).
struct XPosRows {
  AlignedVector<float> query_cos, query_sin, key_cos, key_sin;
  XPosScales::Block block;
  explicit XPosRows(int half)
      : query_cos(static_cast<std::size_t>(half)), query_sin(static_cast<std::size_t>(half)), key_cos(static_cast<std::size_t>(half)),
        key_sin(static_cast<std::size_t>(half)) {}
  void Form(const XPosScales& scales, std::int64_t position, const float* c, const float* s, int half) {
    const XPosScales::Factors f = scales.factors(position, block);
    const hn::ScalableTag<double> dd;
    const hn::Rebind<float, decltype(dd)> df;  // as many float lanes as double lanes
    const int n = static_cast<int>(hn::Lanes(dd));
    int j = 0;
    for (; j + n <= half; j += n) {
      const auto qj = hn::DemoteTo(df, hn::Mul(hn::LoadU(dd, f.block_query + j), hn::LoadU(dd, f.within_query + j)));
      const auto kj = hn::DemoteTo(df, hn::Mul(hn::LoadU(dd, f.block_key + j), hn::LoadU(dd, f.within_key + j)));
      const auto cj = hn::LoadU(df, c + j), sj = hn::LoadU(df, s + j);
      hn::StoreU(hn::Mul(cj, qj), df, query_cos.data() + j);
      hn::StoreU(hn::Mul(sj, qj), df, query_sin.data() + j);
      hn::StoreU(hn::Mul(cj, kj), df, key_cos.data() + j);
      hn::StoreU(hn::Mul(sj, kj), df, key_sin.data() + j);
    }
    for (; j < half; ++j) {
      const std::size_t u = static_cast<std::size_t>(j);
      const float q = static_cast<float>(f.block_query[u] * f.within_query[u]), k = static_cast<float>(f.block_key[u] * f.within_key[u]);
      query_cos[u] = c[u] * q;
      query_sin[u] = s[u] * q;
      key_cos[u] = c[u] * k;
      key_sin[u] = s[u] * k;
    }
  }
};

template <bool kForward>
void RotateAllT(const RotateJob& job) {
  const RopeApplyParams& p = *job.params;
  const PositionIds& pos = *job.positions;
  const int half = p.num_freqs, tokens = job.tensors[0].tokens;
  const int first_token = job.token_begin, span = job.end_token() - first_token;  // the job's token range
  const std::int64_t rows = std::int64_t{job.tensors[0].batch} * span;
  const bool xpos = p.xpos.enabled();
  const bool table_rows = job.table && !p.axis_of_freq;  // 1-D: point straight into the table
  // The grouped walk reads table rows as they are; xPos scales them per token first.
  if (table_rows && !xpos && AllHeadMajor(job)) return RotateHeadGroups<kForward>(job);
  RopeApplyParams forward = p;
  forward.direction = 1;
  const XPosScales xpos_scales(xpos ? p.xpos : XPosParams{}, xpos ? half : 0);
#ifdef _OPENMP
#pragma omp parallel num_threads(job.threads)
#endif
  {
    AlignedVector<float> cbuf(static_cast<std::size_t>(half)), sbuf(static_cast<std::size_t>(half));
    XPosRows xpos_rows(xpos ? half : 0);
    std::vector<double> pos_of_freq(static_cast<std::size_t>(half));
    std::vector<float> tmp(static_cast<std::size_t>(2 * half)), tmp2(static_cast<std::size_t>(2 * half));
    // Shared positions: iterate tokens, and every batch row of a token reuses its cos/sin.
    const bool shared = pos.same_for_every_batch_row() && job.tensors[0].batch > 1;
    const int batch = job.tensors[0].batch;
    const std::int64_t outer = shared ? span : rows;
#ifdef _OPENMP
#pragma omp for schedule(static)
#endif
    for (std::int64_t r = 0; r < outer; ++r) {
      const int b = shared ? 0 : static_cast<int>(r / span), t = first_token + static_cast<int>(shared ? r : r % span);
      const float *c = cbuf.data(), *s = sbuf.data();
      if (table_rows) {
        const std::int64_t at = pos.at(0, b, t, tokens) * half;
        c = job.table->cos + at;
        s = job.table->sin + at;
      } else if (!job.table && p.angles == Numerics::kAccurate) {
        for (int j = 0; j < half; ++j)
          pos_of_freq[static_cast<std::size_t>(j)] = static_cast<double>(pos.at(p.axis_of_freq ? p.axis_of_freq[j] : 0, b, t, tokens));
        CosSinRowAccurate(p.inv_freq, pos_of_freq.data(), p.attention_factor, half, cbuf.data(), sbuf.data());
      } else {
        for (int j = 0; j < half; ++j) {
          const std::int64_t position = pos.at(p.axis_of_freq ? p.axis_of_freq[j] : 0, b, t, tokens);
          if (job.table) {
            cbuf[static_cast<std::size_t>(j)] = job.table->cos[static_cast<std::size_t>(position * half + j)];
            sbuf[static_cast<std::size_t>(j)] = job.table->sin[static_cast<std::size_t>(position * half + j)];
          } else {
            rope_cos_sin(p.inv_freq[j], position, forward, &cbuf[static_cast<std::size_t>(j)], &sbuf[static_cast<std::size_t>(j)]);
          }
        }
      }
      if (xpos) xpos_rows.Form(xpos_scales, pos.at(0, b, t, tokens), c, s, half);
      const int b_end = shared ? batch : b + 1;
      for (int bb = b; bb < b_end; ++bb) {
        for (int i = 0; i < job.num_tensors; ++i) {
          const RopeTensor& x = job.tensors[i];
          const float *ci = c, *si = s;
          if (xpos) {
            const bool key = i > 0 || p.xpos.first == XPosRole::kKey;
            ci = key ? xpos_rows.key_cos.data() : xpos_rows.query_cos.data();
            si = key ? xpos_rows.key_sin.data() : xpos_rows.query_sin.data();
          }
          RotateTokenOf<kForward>(job, x, bb * x.batch_stride + t * x.token_stride, ci, si, tmp.data(), tmp2.data());
        }
      }
    }
  }
}

void RotateAll(const RotateJob& job) {
  if (job.params->direction > 0)
    RotateAllT<true>(job);
  else
    RotateAllT<false>(job);
}

}  // namespace HWY_NAMESPACE
}  // namespace posenc
HWY_AFTER_NAMESPACE();

#endif  // per-target include guard
