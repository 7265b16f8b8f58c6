// Decode attention's tile products (attention_decode-inl.h), per Highway target: the scores of one
// or four keys against a kv head's G query rows, ALiBi's term added to every head's scores, and
// the values' weighted sum read in place.
#if defined(POSENC_ATTENTION_DECODE_TILES_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef POSENC_ATTENTION_DECODE_TILES_INL_H_
#undef POSENC_ATTENTION_DECODE_TILES_INL_H_
#else
#define POSENC_ATTENTION_DECODE_TILES_INL_H_
#endif

#include <hwy/highway.h>

#include <cmath>
#include <cstdint>

#include "attention_plan.h"
// DA and kRowBlock; the unit's own copies of the prefill tile products are not used.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"
#include "attention_tiles-inl.h"
#pragma GCC diagnostic pop
#include "rope_convert-inl.h"

HWY_BEFORE_NAMESPACE();
namespace posenc {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;
namespace decode {

using attention_detail::kKeyTile;

// scores[r * kKeyTile] = sum_x Q[r][x] key[x] for the kRows rows at Q (row stride D); key: D
// values stored as T (float, bf16 or f16), each vector widened once for all kRows rows.
template <int kRows, typename T>
HWY_INLINE void DotRows(const float* HWY_RESTRICT Q, int D, const T* HWY_RESTRICT key, float* HWY_RESTRICT scores) {
  const DA d;
  const int N = static_cast<int>(hn::Lanes(d));
  hn::Vec<DA> sum[kRows];
  for (int r = 0; r < kRows; ++r) sum[r] = hn::Zero(d);
  const int end = D / N * N;  // of the whole vectors (a constant where D is: DecodeKeys' kWidth)
  for (int x = 0; x < end; x += N) {
    const auto k = LoadAs(d, key + x);
    for (int r = 0; r < kRows; ++r) sum[r] = hn::MulAdd(hn::LoadU(d, Q + r * D + x), k, sum[r]);
  }
  for (int r = 0; r < kRows; ++r) {
    float total = hn::GetLane(hn::SumOfLanes(d, sum[r]));
    for (int t = end; t < D; ++t) total += Q[r * D + t] * LoadScalar(key + t);  // channels past the last vector
    scores[r * kKeyTile] = total;
  }
}

// Column c of the score tile for all `rows` query rows: blocks of 4 rows, then one at a time.
template <typename T>
HWY_INLINE void ScoreKey(const float* HWY_RESTRICT Q, int rows, int D, const T* HWY_RESTRICT key, float* HWY_RESTRICT column) {
  int r = 0;
  for (; r + 4 <= rows; r += 4) DotRows<4>(Q + r * D, D, key, column + r * kKeyTile);
  for (; r < rows; ++r) DotRows<1>(Q + r * D, D, key, column + r * kKeyTile);
}

#if HWY_TARGET != HWY_SCALAR
// Four keys at a time: a (query head, key) score without a horizontal sum of its own. The four
// keys' vector sums of one head are folded together by a transposing tree (lane pairs, then
// 64-bit pairs, then the two 128-bit blocks): 9 shuffles and adds for 4 scores where 4 separate
// horizontal sums take about 24. Vectors of at most 256 bits: a Zen 4 core splits 512-bit
// operations in two anyway, and the tree is one level shorter.
using DK = hn::CappedTag<float, 8>;
using DK4 = hn::CappedTag<float, 4>;
inline constexpr bool kFourKeys = true;
// Query heads per block of the four-key product: 4 x 4 accumulators where there are 32 vector
// registers (AVX-512), 2 x 4 where there are 16.
inline constexpr int kFourKeyRows = HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX3 ? 4 : 2;

// Lanes 0..3: the sums of the lanes of a, b, c and e.
template <class D>  // DK (a template, so the branch for the other width is discarded)
HWY_INLINE hn::Vec<DK4> SumOf4(D d, hn::Vec<D> a, hn::Vec<D> b, hn::Vec<D> c, hn::Vec<D> e) {
  const hn::Repartition<std::uint64_t, D> d64;
  // Per 128-bit block: [a0+a2, b0+b2, a1+a3, b1+b3] and the same of c, e.
  const auto ab = hn::Add(hn::InterleaveLower(d, a, b), hn::InterleaveUpper(d, a, b));
  const auto ce = hn::Add(hn::InterleaveLower(d, c, e), hn::InterleaveUpper(d, c, e));
  // Per block: [a, b, c, e] over the block's lanes.
  const auto sums = hn::Add(hn::BitCast(d, hn::InterleaveLower(d64, hn::BitCast(d64, ab), hn::BitCast(d64, ce))),
                            hn::BitCast(d, hn::InterleaveUpper(d64, hn::BitCast(d64, ab), hn::BitCast(d64, ce))));
  if constexpr (hn::MaxLanes(D()) == 8) {
    return hn::Add(hn::LowerHalf(DK4(), sums), hn::UpperHalf(DK4(), sums));
  } else {
    return sums;
  }
}

// scores[r * kKeyTile + 0 .. 3] = sum_x Q[r][x] keys[k][x] for the kRows rows at Q (row stride D)
// and 4 keys stored as T: each key vector widened once for the kRows rows.
template <int kRows, typename T>
HWY_INLINE void DotRows4Keys(const float* HWY_RESTRICT Q, int D, const T* const* keys, float* HWY_RESTRICT scores) {
  const DK d;
  const int N = static_cast<int>(hn::Lanes(d));
  hn::Vec<DK> sum[kRows][4];
  for (int r = 0; r < kRows; ++r)
    for (int k = 0; k < 4; ++k) sum[r][k] = hn::Zero(d);
  const int end = D / N * N;
  for (int x = 0; x < end; x += N) {
    const auto k0 = LoadAs(d, keys[0] + x), k1 = LoadAs(d, keys[1] + x), k2 = LoadAs(d, keys[2] + x), k3 = LoadAs(d, keys[3] + x);
    for (int r = 0; r < kRows; ++r) {
      const auto q = hn::LoadU(d, Q + r * D + x);
      sum[r][0] = hn::MulAdd(q, k0, sum[r][0]);
      sum[r][1] = hn::MulAdd(q, k1, sum[r][1]);
      sum[r][2] = hn::MulAdd(q, k2, sum[r][2]);
      sum[r][3] = hn::MulAdd(q, k3, sum[r][3]);
    }
  }
  for (int r = 0; r < kRows; ++r) {
    const auto sums = SumOf4(d, sum[r][0], sum[r][1], sum[r][2], sum[r][3]);
    if (end == D) {  // the four keys' scores are neighbours in the row: one store
      hn::StoreU(sums, DK4(), scores + r * kKeyTile);
      continue;
    }
    HWY_ALIGN float four[hn::MaxLanes(DK4())];
    hn::Store(sums, DK4(), four);
    for (int k = 0; k < 4; ++k) {
      for (int t = end; t < D; ++t) four[k] += Q[r * D + t] * LoadScalar(keys[k] + t);  // channels past the last vector
      scores[r * kKeyTile + k] = four[k];
    }
  }
}

// Columns c .. c + 3 of the score tile for all `rows` query rows.
template <typename T>
HWY_INLINE void ScoreFourKeys(const float* HWY_RESTRICT Q, int rows, int D, const T* const* keys, float* HWY_RESTRICT column) {
  int r = 0;
  for (; r + kFourKeyRows <= rows; r += kFourKeyRows) DotRows4Keys<kFourKeyRows>(Q + r * D, D, keys, column + r * kKeyTile);
  for (; r < rows; ++r) DotRows4Keys<1>(Q + r * D, D, keys, column + r * kKeyTile);
}
#else
inline constexpr bool kFourKeys = false;  // one lane: ScoreKey's sums are the scalar products
template <typename T>
HWY_INLINE void ScoreFourKeys(const float*, int, int, const T* const*, float*) {}
#endif

// acc[r][x .. x + kVecs N) += sum_{c < cols} P[r][c] v_c[x ..] for r < kRows, P [kRows][kKeyTile]:
// v_c = V + c ld, stored as T and read where it lies (widened from bf16/f16 in registers, once
// for the kRows rows). One row keeps two sets of accumulators (even and odd keys), so its FMAs
// are not a single dependency chain.
template <int kRows, int kVecs, typename T>
HWY_INLINE void AccumulateBlock(const float* HWY_RESTRICT P, const T* HWY_RESTRICT V, std::int64_t ld, int cols, int D, int x,
                                float* HWY_RESTRICT acc) {
  const DA d;
  const int N = static_cast<int>(hn::Lanes(d));
  constexpr int kSets = kRows == 1 ? 2 : 1;
  hn::Vec<DA> a[kSets][kRows][kVecs];
  for (int r = 0; r < kRows; ++r)
    for (int u = 0; u < kVecs; ++u) {
      a[0][r][u] = hn::LoadU(d, acc + r * D + x + u * N);
      if constexpr (kSets == 2) a[kSets - 1][r][u] = hn::Zero(d);
    }
  int c = 0;
  if constexpr (kSets == 2) {
    for (; c + 2 <= cols; c += 2) {
      const T* v0 = V + c * ld + x;
      const T* v1 = v0 + ld;
      const auto p0 = hn::Set(d, P[c]), p1 = hn::Set(d, P[c + 1]);
      for (int u = 0; u < kVecs; ++u) {
        a[0][0][u] = hn::MulAdd(p0, LoadAs(d, v0 + u * N), a[0][0][u]);
        a[kSets - 1][0][u] = hn::MulAdd(p1, LoadAs(d, v1 + u * N), a[kSets - 1][0][u]);
      }
    }
  }
  for (; c < cols; ++c) {
    const T* vc = V + c * ld + x;
    hn::Vec<DA> v[kVecs];
    for (int u = 0; u < kVecs; ++u) v[u] = LoadAs(d, vc + u * N);
    for (int r = 0; r < kRows; ++r) {
      const auto p = hn::Set(d, P[r * kKeyTile + c]);
      for (int u = 0; u < kVecs; ++u) a[0][r][u] = hn::MulAdd(p, v[u], a[0][r][u]);
    }
  }
  for (int r = 0; r < kRows; ++r)
    for (int u = 0; u < kVecs; ++u) {
      auto sum = a[0][r][u];
      if constexpr (kSets == 2) sum = hn::Add(sum, a[kSets - 1][r][u]);
      hn::StoreU(sum, d, acc + r * D + x + u * N);
    }
}

// acc[r][:] += sum_{c < cols} P[r][c] v_c[:] for r < kRows: the channels in passes of 4 vectors
// (AVX-512's 32 registers hold 4 rows x 4 vectors) or 2, then one vector, then one at a time.
template <int kRows, typename T>
HWY_INLINE void AccumulateRowBlock(const float* HWY_RESTRICT P, const T* HWY_RESTRICT V, std::int64_t ld, int cols, int D,
                                   float* HWY_RESTRICT acc) {
  const int N = static_cast<int>(hn::Lanes(DA()));
  constexpr int kWide = HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX3 ? 4 : 2;
  const int wide_end = D / (kWide * N) * (kWide * N), end = D / N * N;
  for (int x = 0; x < wide_end; x += kWide * N) AccumulateBlock<kRows, kWide>(P, V, ld, cols, D, x, acc);
  for (int x = wide_end; x < end; x += N) AccumulateBlock<kRows, 1>(P, V, ld, cols, D, x, acc);
  for (int x = end; x < D; ++x)
    for (int r = 0; r < kRows; ++r)
      for (int c = 0; c < cols; ++c) acc[r * D + x] += P[r * kKeyTile + c] * LoadScalar(V + c * ld + x);
}

// acc[r][:] += sum_{c < cols} P[r][c] v_c[:] for r < rows (P [rows][kKeyTile], acc [rows][D]):
// the value rows v_c = V + c ld of one kv head read in place from the cache, never copied (a
// copy of a tile's values was 128 KiB at 8 kv heads of 64 f32 channels: four times L1, and it
// held decode to a quarter of the memory ceiling).
template <typename T>
HWY_INLINE void AccumulateRows(const float* HWY_RESTRICT P, const T* HWY_RESTRICT V, std::int64_t ld, int rows, int cols, int D,
                               float* HWY_RESTRICT acc) {
  int r = 0;
  for (; r + 4 <= rows; r += 4) AccumulateRowBlock<4>(P + r * kKeyTile, V, ld, cols, D, acc + r * D);
  for (; r + 2 <= rows; r += 2) AccumulateRowBlock<2>(P + r * kKeyTile, V, ld, cols, D, acc + r * D);
  for (; r < rows; ++r) AccumulateRowBlock<1>(P + r * kKeyTile, V, ld, cols, D, acc + r * D);
}

// acc[h][:] += P[h kKeyTile] v_{h / G} for every query head h < Hq: one key's value rows, kv head
// hk's at V + hk head_stride (stored as T), each vector widened once for its G heads; the
// accumulators stay in memory (L1), so a key costs no call per kv head (the pipelined decode's
// single keys on the by-head path; by key, inside ScoreKeyHeads where G = 1, else after the scores).
template <typename T>
HWY_INLINE void AccumulateKey(const float* HWY_RESTRICT P, const T* HWY_RESTRICT V, std::int64_t head_stride, int Hq, int G, int D,
                              float* HWY_RESTRICT acc) {
  const DA d;
  const int N = static_cast<int>(hn::Lanes(d));
  for (int hk = 0; hk < Hq / G; ++hk) {
    const T* v = V + hk * head_stride;
    float* a = acc + hk * G * D;
    const float* p = P + hk * G * kKeyTile;
    const int end = D / N * N;
    if (G == 1) {  // the weight broadcast once (in the loop below it is reloaded per vector: acc may alias P)
      const auto p0 = hn::Set(d, p[0]);
      for (int x = 0; x < end; x += N) hn::StoreU(hn::MulAdd(p0, LoadAs(d, v + x), hn::LoadU(d, a + x)), d, a + x);
    }
    for (int x = 0; G > 1 && x < end; x += N) {
      const auto vx = LoadAs(d, v + x);
      for (int g = 0; g < G; ++g) hn::StoreU(hn::MulAdd(hn::Set(d, p[g * kKeyTile]), vx, hn::LoadU(d, a + g * D + x)), d, a + g * D + x);
    }
    for (int x = end; x < D; ++x)
      for (int g = 0; g < G; ++g) a[g * D + x] += p[g * kKeyTile] * LoadScalar(v + x);
  }
}

// A token-major cache ([B, T, Hk, D]: one key's rows of every kv head side by side) can be read
// in storage order, one key at a time. Reading four keys per kv head walks a cache region in a
// permuted order, which the hardware's stream prefetchers follow less well: on a Zen 4 EPYC a
// plain pass over 128 MiB of f32 K and V (8 kv heads of 64, each kv head's values read down a
// tile) read at 11.6 GB/s with K in the four-key order, 14.3 GB/s with K in storage order.

#if HWY_TARGET != HWY_SCALAR
// out[i kKeyTile] = Q[i] . key of query head i, for the 4 query rows at Q (row stride D); head i
// reads rows[i kDistinct / 4]: 2 distinct rows (groups of 2) or 4 (groups of 1 or 3; a group of
// 4 or more takes ScoreKeys' by-head path instead).
// Their four vector sums are folded together (SumOf4).
template <int kDistinct, typename T>
HWY_INLINE void DotHeads4(const float* HWY_RESTRICT Q, int D, const T* const* rows, float* HWY_RESTRICT out) {
  const DK d;
  const int N = static_cast<int>(hn::Lanes(d));
  hn::Vec<DK> sum[4] = {hn::Zero(d), hn::Zero(d), hn::Zero(d), hn::Zero(d)};
  const int end = D / N * N;
  for (int x = 0; x < end; x += N) {
    hn::Vec<DK> k[kDistinct];
    for (int i = 0; i < kDistinct; ++i) k[i] = LoadAs(d, rows[i] + x);
    for (int i = 0; i < 4; ++i) sum[i] = hn::MulAdd(hn::LoadU(d, Q + i * D + x), k[i * kDistinct / 4], sum[i]);
  }
  HWY_ALIGN float four[hn::MaxLanes(DK4())];
  hn::Store(SumOf4(d, sum[0], sum[1], sum[2], sum[3]), DK4(), four);
  for (int i = 0; i < 4; ++i) {
    for (int t = end; t < D; ++t) four[i] += Q[i * D + t] * LoadScalar(rows[i * kDistinct / 4] + t);  // channels past the last vector
    out[i * kKeyTile] = four[i];
  }
}
#endif

// The last tile's P.V of one key, summed between ScoreKeyHeads' blocks of query heads (values
// null: none), where each kv head serves one query head (G = 1): P column c of the weights, v
// the key's value rows (kv head h's at v + h head_stride), acc [Hq][D].
template <typename TV>
struct KeyValues {
  const float* P = nullptr;
  const TV* v = nullptr;
  std::int64_t head_stride = 0;
  float* acc = nullptr;
};

// column[h kKeyTile] = Q[h] . k_{h / G} for every query head h < Hq, G < 4 (reads_by_key): one
// key's rows, kv head hk's at key + hk head_stride (stored as T). Blocks of 4 query heads, then one
// at a time; after each, the same heads' P.V of the last tile's key (values, if any; G = 1), so K's and
// V's rows are read alternately, a kilobyte or less at a time. Measured against the whole key's
// scores, then its P.V (2 KiB apart at 8 f32 kv heads of 64): Zen 3 EPYC, T = 32768, cold, ns a
// key, four interleaved runs, one thread: f32 over 8 kv heads 265 -> 231, bf16 162 -> 152; two
// threads, f32 150 -> 134, bf16 85 -> 79.
template <typename T, typename TV>
HWY_INLINE void ScoreKeyHeads(const float* HWY_RESTRICT Q, int Hq, int G, int D, const T* key, std::int64_t head_stride,
                              float* HWY_RESTRICT column, const KeyValues<TV>& values) {
  HWY_DASSERT(values.v == nullptr || G == 1);  // values: query head h sums kv head h's row
  int h = 0;
#if HWY_TARGET != HWY_SCALAR
  for (int hk = 0, g = 0; h + 4 <= Hq; h += 4) {
    const T* rows[4];
    for (int i = 0; i < 4; ++i) {  // kv head (h + i) / G, counted (a division per head cost 10% of a step)
      rows[i] = key + hk * head_stride;
      if (++g == G) g = 0, ++hk;
    }
    if (G == 2) {
      rows[1] = rows[2];
      DotHeads4<2>(Q + h * D, D, rows, column + h * kKeyTile);
    } else {
      DotHeads4<4>(Q + h * D, D, rows, column + h * kKeyTile);
    }
    if (values.v)
      AccumulateKey(values.P + h * kKeyTile, values.v + h * values.head_stride, values.head_stride, 4, 1, D, values.acc + h * D);
  }
#endif
  for (; h < Hq; ++h) {
    DotRows<1>(Q + h * D, D, key + h / G * head_stride, column + h * kKeyTile);
    if (values.v)
      AccumulateKey(values.P + h * kKeyTile, values.v + h * values.head_stride, values.head_stride, 1, 1, D, values.acc + h * D);
  }
}

// ALiBi's term of one query (position qpos) against a tile's keys, for every head: the distances
// are the same for all heads, so they are formed once per tile (distance[c] = qpos - kpos, or its
// absolute value when symmetric) and each head's row gets - slope_h distance[c] in vectors, as
// Plan::add_bias_tile does per element (float: slope and distance rounded, then multiplied).
// Measured: add_bias_tile per head took 10% of a bf16 step at 8 query heads over 2 kv heads.
static HWY_NOINLINE void AddAlibiRows(const attention_detail::Plan& plan, int b, std::int64_t j0, int cols, float* HWY_RESTRICT Sc,
                                      std::int64_t* HWY_RESTRICT positions, float* HWY_RESTRICT distance) {
  plan.tile_positions(b, 0, 1, j0, cols, positions);
  const bool symmetric = plan.p->alibi_mode == AlibiMode::kSymmetric;
  for (int c = 0; c < cols; ++c) {
    const float d = static_cast<float>(positions[0] - positions[1 + c]);
    distance[c] = symmetric ? std::abs(d) : d;
  }
  const DA d;
  const int N = static_cast<int>(hn::Lanes(d));
  for (int h = 0; h < plan.Hq; ++h) {
    const float slope = static_cast<float>(plan.p->alibi_slopes[h]);
    float* row = Sc + h * kKeyTile;
    int c = 0;
    for (; c + N <= cols; c += N)
      hn::StoreU(hn::Sub(hn::LoadU(d, row + c), hn::Mul(hn::Set(d, slope), hn::LoadU(d, distance + c))), d, row + c);
    for (; c < cols; ++c) row[c] -= slope * distance[c];
  }
}

}  // namespace decode
}  // namespace HWY_NAMESPACE
}  // namespace posenc
HWY_AFTER_NAMESPACE();

#endif  // per-target include guard
