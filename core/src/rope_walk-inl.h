// The two walks of one rope_rotate call over its tensors (token-outer, and head by head for
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

#include <cstddef>
#include <cstdint>
#include <vector>

#include "posenc/aligned_vector.h"
#include "posenc/rope_apply.h"
#include "posenc/rope_xpos.h"
#include "rope_kernel_job.h"
#include "rope_sincos-inl.h"
#include "rope_token_switch-inl.h"

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

// Head-major storage with 1-D positions and a table: walked head by head, each head's tokens in
// order, so every thread reads one sequential stream. The token-outer walk below reads one
// stream per head at once (40 for Llama-3-8B's q and k), more than the hardware prefetchers
// follow: measured 0.38 of the memory ceiling on one thread, 0.51-0.61 this way. What is left
// is the cos/sin table, read once per head (4 MiB at 8192 tokens, rotary dim 128: as many bytes
// as the head's values); chunks of 256 tokens across all heads, to keep the table in L2, measured
// slower (0.41-0.43). The other cos/sin modes compute rows, so they stay token-outer.
// Work units of the head-by-head walk: (tensor, batch row, head). Fewer than threads: the
// token-outer walk, which splits tokens, keeps every thread busy.
inline std::int64_t HeadUnits(const RotateJob& job) {
  std::int64_t units = 0;
  for (int i = 0; i < job.num_tensors; ++i) units += std::int64_t{job.tensors[0].batch} * job.tensors[i].heads;
  return units;
}

template <bool kForward>
void RotateHeadByHead(const RotateJob& job) {
  const RopeApplyParams& p = *job.params;
  const PositionIds& pos = *job.positions;
  const int half = p.num_freqs, tokens = job.tensors[0].tokens, batch = job.tensors[0].batch;
  const std::int64_t units = HeadUnits(job);
#ifdef _OPENMP
#pragma omp parallel num_threads(job.threads)
#endif
  {
    std::vector<float> tmp(static_cast<std::size_t>(2 * half)), tmp2(static_cast<std::size_t>(2 * half));
#ifdef _OPENMP
#pragma omp for schedule(static)
#endif
    for (std::int64_t u = 0; u < units; ++u) {
      std::int64_t rest = u;
      int i = 0;
      while (rest >= std::int64_t{batch} * job.tensors[i].heads) rest -= std::int64_t{batch} * job.tensors[i].heads, ++i;
      RopeTensor one = job.tensors[i];
      const int b = static_cast<int>(rest / one.heads), h = static_cast<int>(rest % one.heads);
      const std::int64_t head_offset = b * one.batch_stride + h * one.head_stride;
      // Consecutive positions (no padding, no gaps): the head's tokens are consecutive table rows,
      // so one call walks them all, each token a "head" of the view — no call per 128 values.
      const std::int64_t first = pos.at(0, b, 0, tokens);
      bool consecutive = true;
      for (int t = 1; t < tokens && consecutive; ++t) consecutive = pos.at(0, b, t, tokens) == first + t;
      if (consecutive) {
        RopeTensor run = one;
        run.heads = tokens;
        run.head_stride = one.token_stride;
        RotateTokenOf<kForward>(job, run, head_offset, job.table->cos + first * half, job.table->sin + first * half,
                                tmp.data(), tmp2.data(), half);
        continue;
      }
      one.heads = 1;  // the view of this head alone, token by token
      for (int t = 0; t < tokens; ++t) {
        const std::int64_t at = pos.at(0, b, t, tokens) * half;
        RotateTokenOf<kForward>(job, one, b * one.batch_stride + t * one.token_stride + h * one.head_stride,
                                job.table->cos + at, job.table->sin + at, tmp.data(), tmp2.data());
      }
    }
  }
}

// xPos (rope_xpos.h): the token's cos/sin row times the query's and the key's scales, one
// float32 product each (vector products round as scalar ones: the bits of rope_apply_reference);
// the kernels then rotate as for RoPE.
struct XPosRows {
  AlignedVector<float> query_scale, key_scale, query_cos, query_sin, key_cos, key_sin;
  XPosScales::Block block;
  explicit XPosRows(int half)
      : query_scale(static_cast<std::size_t>(half)), key_scale(static_cast<std::size_t>(half)),
        query_cos(static_cast<std::size_t>(half)), query_sin(static_cast<std::size_t>(half)),
        key_cos(static_cast<std::size_t>(half)), key_sin(static_cast<std::size_t>(half)) {}
  void Form(const XPosScales& scales, std::int64_t position, const float* c, const float* s, int half) {
    scales.at(position, query_scale.data(), key_scale.data(), block);
    const DF df;
    const int n = static_cast<int>(hn::Lanes(df));
    int j = 0;
    for (; j + n <= half; j += n) {
      const auto cj = hn::LoadU(df, c + j), sj = hn::LoadU(df, s + j);
      const auto qj = hn::Load(df, query_scale.data() + j), kj = hn::Load(df, key_scale.data() + j);
      hn::Store(hn::Mul(cj, qj), df, query_cos.data() + j);
      hn::Store(hn::Mul(sj, qj), df, query_sin.data() + j);
      hn::Store(hn::Mul(cj, kj), df, key_cos.data() + j);
      hn::Store(hn::Mul(sj, kj), df, key_sin.data() + j);
    }
    for (; j < half; ++j) {
      const std::size_t u = static_cast<std::size_t>(j);
      query_cos[u] = c[u] * query_scale[u];
      query_sin[u] = s[u] * query_scale[u];
      key_cos[u] = c[u] * key_scale[u];
      key_sin[u] = s[u] * key_scale[u];
    }
  }
};

template <bool kForward>
void RotateAllT(const RotateJob& job) {
  const RopeApplyParams& p = *job.params;
  const PositionIds& pos = *job.positions;
  const int half = p.num_freqs, tokens = job.tensors[0].tokens;
  const std::int64_t rows = std::int64_t{job.tensors[0].batch} * tokens;
  const bool xpos = p.xpos.enabled();
  const bool table_rows = job.table && !p.axis_of_freq;  // 1-D: point straight into the table
  // The head-by-head walk reads table rows as they are; xPos scales them per token first.
  if (table_rows && !xpos && AllHeadMajor(job) && HeadUnits(job) >= job.threads) return RotateHeadByHead<kForward>(job);
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
    const std::int64_t outer = shared ? tokens : rows;
#ifdef _OPENMP
#pragma omp for schedule(static)
#endif
    for (std::int64_t r = 0; r < outer; ++r) {
      const int b = shared ? 0 : static_cast<int>(r / tokens), t = static_cast<int>(shared ? r : r % tokens);
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
