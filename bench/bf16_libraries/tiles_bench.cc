// posenc's AVX512-BF16 attention tile products beside the same products by libxsmm 1.17 and
// oneDNN 2.6 (Debian's libxsmm-dev, libdnnl-dev), one thread, on the shapes of posenc's bf16
// prefill (core/src/attention_bf16_tiles.h): per (query tile, key tile)
//   scores  Sc[128][64] = Q[128][64] . K^T   (f32 sums of bf16 products)
//   P.V     acc[128][64] += P[128][64] . V[64][64]
// Both libraries are handed posenc's own tile layouts, which are theirs too: libxsmm's column-major
// C = A.B with A in VNNI pairs is Sc^T = Kp.Q^T (Kp [pairs][keys]: posenc's packed key tile) and
// acc^T = Vp.P^T (Vp [key pairs][D]: posenc's packed value tile); oneDNN's matmul takes the tiles
// batched ([B, 128, 64] x [B, 64, 64]) on K's and V's rows. Each product's result is checked
// against posenc's.
// Also a square 2048^3 bf16 matmul in oneDNN (its best case). Operands stay in L1/L2, as in the
// kernel, so these are the products' own rates. Build and run: bench/bf16_libraries/run.sh.
//
//   tiles_bench [rounds=5]
#include <libxsmm.h>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <oneapi/dnnl/dnnl.hpp>
#include <random>
#include <vector>

#include "attention_bf16_tiles.h"  // posenc's core/src: score_tile, value_tile (private API)
#include "posenc/attention_bf16.h"
#include "posenc/half.h"

namespace {

using posenc::attention_detail::kKeyTile;
constexpr int kRows = 128, kD = 64, kPairs = kD / 2, kTiles = 8;  // kTiles query and key tiles, cycled
constexpr double kTileFlops = 2.0 * kRows * kKeyTile * kD;        // one product of one tile pair

double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Seconds of one call of f, the median of `rounds` timings of `calls` calls each.
template <class F>
double seconds_per_call(F&& f, int calls, int rounds) {
  f();  // warm-up: code, JIT, caches
  std::vector<double> t;
  for (int r = 0; r < rounds; ++r) {
    const double t0 = now();
    for (int i = 0; i < calls; ++i) f();
    t.push_back((now() - t0) / calls);
  }
  return median(t);
}

// Seconds that `more` takes beyond `base` a call: the two timed in turn each round (`calls` calls
// each), the median of the rounds' differences, so a slow spell of the machine touches both.
template <class F, class G>
double extra_seconds_per_call(F&& base, G&& more, int calls, int rounds) {
  base();
  more();
  std::vector<double> d;
  for (int r = 0; r < rounds; ++r) {
    double t0 = now();
    for (int i = 0; i < calls; ++i) base();
    const double b = (now() - t0) / calls;
    t0 = now();
    for (int i = 0; i < calls; ++i) more();
    d.push_back((now() - t0) / calls - b);
  }
  return median(d);
}

std::vector<std::uint16_t> random_bf16(std::size_t n, std::mt19937& rng, bool positive) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<std::uint16_t> v(n);
  for (auto& x : v) x = posenc::float_to_bf16(positive ? std::abs(normal(rng)) * 0.1f : normal(rng));
  return v;
}

double max_rel_diff(const float* a, const float* b, std::size_t n) {
  double worst = 0, largest = 0;
  for (std::size_t i = 0; i < n; ++i) {
    worst = std::max(worst, std::abs(static_cast<double>(a[i]) - b[i]));
    largest = std::max(largest, std::abs(static_cast<double>(b[i])));
  }
  return largest > 0 ? worst / largest : worst;
}

void report(const char* what, double seconds_per_tile, double check) {
  std::printf("  %-44s %8.1f GFLOP/s", what, kTileFlops / seconds_per_tile / 1e9);
  if (check >= 0) std::printf("   max_rel_diff vs posenc %.1e", check);
  std::printf("\n");
}

}  // namespace

int main(int argc, char** argv) {
  namespace bf16 = posenc::attention_detail::bf16;
  const int rounds = argc > 1 ? std::max(1, std::atoi(argv[1])) : 5;
  omp_set_num_threads(1);
  if (!posenc::attention_bf16_available()) {
    std::fprintf(stderr, "tiles_bench: this CPU has no AVX512-BF16 (posenc's bf16 tiles are not compiled for it)\n");
    return 2;
  }
  libxsmm_init();
  std::printf("bf16 attention tile products, one thread, tiles [%d x %d] x [%d x %d], median of %d rounds\n", kRows, kD, kD, kKeyTile,
              rounds);
  std::printf("  libxsmm %s, target %s; oneDNN %d.%d.%d\n", LIBXSMM_VERSION, libxsmm_get_target_arch(), dnnl_version()->major,
              dnnl_version()->minor, dnnl_version()->patch);

  std::mt19937 rng(7);
  // Q as posenc's Qp (pairs of bf16 = the bf16 row itself), K and V already packed: Kp [pairs][keys],
  // Vp [key pairs][D] (pairs of two keys' values), P as bf16 pairs in a row of kKeyTile floats.
  const auto Q = random_bf16(std::size_t{kTiles} * kRows * kD, rng, false);
  const auto Kp = random_bf16(std::size_t{kTiles} * kD * kKeyTile, rng, false);
  const auto Vp = random_bf16(std::size_t{kTiles} * kKeyTile * kD, rng, false);
  const auto Pbits = random_bf16(std::size_t{kRows} * kKeyTile, rng, true);
  std::vector<float> P(std::size_t{kRows} * kKeyTile);  // row r: 32 uint32 of bf16 pairs, then unused
  for (int r = 0; r < kRows; ++r) std::memcpy(&P[std::size_t(r) * kKeyTile], &Pbits[std::size_t(r) * kKeyTile], kKeyTile * 2);
  const auto u32 = [](const std::vector<std::uint16_t>& v, std::size_t at) {
    return reinterpret_cast<const std::uint32_t*>(v.data() + at);
  };
  const std::size_t q_tile = std::size_t{kRows} * kD, kv_tile = std::size_t{kD} * kKeyTile;

  std::vector<float> Sc_posenc(std::size_t{kRows} * kKeyTile), Sc_lib(Sc_posenc.size());
  std::vector<float> acc_posenc(std::size_t{kRows} * kD), acc_lib(acc_posenc.size());
  int tile = 0;
  const auto next = [&] { return tile = (tile + 1) % kTiles; };
  const int calls = 2000;

  // posenc: the kernel's own products.
  const double posenc_score = seconds_per_call(
      [&] {
        next();
        bf16::score_tile(u32(Q, tile * q_tile), kPairs, u32(Kp, tile * kv_tile), kRows, Sc_posenc.data());
      },
      calls, rounds);
  const double posenc_value = seconds_per_call(
      [&] {
        next();
        bf16::value_tile(P.data(), u32(Vp, tile * kv_tile), kRows, kKeyTile / 2, kD, acc_posenc.data());
      },
      calls, rounds);
  // The online softmax of a tile (bf16::softmax_tile), timed behind a fresh score_tile (it
  // overwrites its input), in turn with score_tile alone: the difference is its own time. Every
  // row's running maximum starts at the largest score of all the tiles, so none grows: no rescale
  // of acc, as in most tiles of a row after its first (a lower bound: a tile that raises a row's
  // maximum also rescales the row's sums).
  float largest = -INFINITY;
  for (int t = 0; t < kTiles; ++t) {
    bf16::score_tile(u32(Q, t * q_tile), kPairs, u32(Kp, t * kv_tile), kRows, Sc_posenc.data());
    for (const float x : Sc_posenc) largest = std::max(largest, x);
  }
  std::vector<float> row_max(kRows), row_sum(kRows);
  const auto score_only = [&] {
    next();
    bf16::score_tile(u32(Q, tile * q_tile), kPairs, u32(Kp, tile * kv_tile), kRows, Sc_posenc.data());
  };
  const auto score_softmax = [&] {
    score_only();
    std::fill(row_max.begin(), row_max.end(), largest);
    std::fill(row_sum.begin(), row_sum.end(), 0.0f);
    bf16::softmax_tile(Sc_posenc.data(), kRows, kRows, row_max.data(), row_sum.data(), acc_posenc.data(), kD);
  };
  const double posenc_softmax = extra_seconds_per_call(score_only, score_softmax, calls, rounds);

  // libxsmm: column-major C[m][n] = A[m][k] B[k][n], A in VNNI pairs of k.
  const libxsmm_blasint m = kKeyTile, n = kRows, k = kD, lda = kKeyTile, ldb_q = kD, ldc = kKeyTile;
  const libxsmm_blasint lda_v = kD, ldb_p = 2 * kKeyTile, ldc_v = kD;  // P's rows are kKeyTile floats = 2 kKeyTile bf16 apart
  const float one = 1.0f, zero = 0.0f;
  const int flags = LIBXSMM_GEMM_FLAG_VNNI_A;
  const libxsmm_bsmmfunction score = libxsmm_bsmmdispatch(m, n, k, &lda, &ldb_q, &ldc, &one, &zero, &flags, nullptr);
  const libxsmm_bsmmfunction value = libxsmm_bsmmdispatch(kD, kRows, kKeyTile, &lda_v, &ldb_p, &ldc_v, &one, &one, &flags, nullptr);
  if (!score || !value) {
    std::fprintf(stderr, "tiles_bench: libxsmm has no bf16 kernel for these shapes on target %s\n", libxsmm_get_target_arch());
    return 2;
  }
  const auto bf = [](const std::vector<std::uint16_t>& v, std::size_t at) {
    return reinterpret_cast<const libxsmm_bfloat16*>(v.data() + at);
  };
  const double xsmm_score = seconds_per_call(
      [&] {
        next();
        score(bf(Kp, tile * kv_tile), bf(Q, tile * q_tile), Sc_lib.data());
      },
      calls, rounds);
  const double xsmm_value = seconds_per_call(
      [&] {
        next();
        value(bf(Vp, tile * kv_tile), reinterpret_cast<const libxsmm_bfloat16*>(P.data()), acc_lib.data());
      },
      calls, rounds);
  // The check: one call of each on tile 0, from zero sums.
  std::fill(acc_posenc.begin(), acc_posenc.end(), 0.0f);
  std::fill(acc_lib.begin(), acc_lib.end(), 0.0f);
  bf16::score_tile(u32(Q, 0), kPairs, u32(Kp, 0), kRows, Sc_posenc.data());
  score(bf(Kp, 0), bf(Q, 0), Sc_lib.data());
  const double xsmm_score_diff = max_rel_diff(Sc_lib.data(), Sc_posenc.data(), Sc_lib.size());
  bf16::value_tile(P.data(), u32(Vp, 0), kRows, kKeyTile / 2, kD, acc_posenc.data());
  value(bf(Vp, 0), reinterpret_cast<const libxsmm_bfloat16*>(P.data()), acc_lib.data());
  const double xsmm_value_diff = max_rel_diff(acc_lib.data(), acc_posenc.data(), acc_lib.size());

  // oneDNN: the same tiles batched, kTiles a call; Sc = Q K^T with K as stored rows [keys][D]
  // (weights {B, D, keys} in acb), P.V with V as rows [keys][D] (weights {B, keys, D} in abc).
  using dnnl::memory;
  using tag = memory::format_tag;
  using dt = memory::data_type;
  dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  dnnl::stream stream(engine);
  // a, b: the operands' bf16 (null: random); want: posenc's result for the check (null: none).
  const auto matmul = [&](memory::dims a, memory::dims b, memory::dims c, tag b_tag, double flops, const char* what, int repeats,
                          const std::uint16_t* a_data, const std::uint16_t* b_data, const float* want) {
    const memory::desc a_md(a, dt::bf16, a.size() == 3 ? tag::abc : tag::ab), b_md(b, dt::bf16, b_tag),
        c_md(c, dt::f32, c.size() == 3 ? tag::abc : tag::ab);
    const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(a_md, b_md, c_md), engine);
    memory A(a_md, engine), B(b_md, engine), C(c_md, engine);
    const auto fill = [&](memory& x, const std::uint16_t* data) {
      const std::size_t n = x.get_desc().get_size() / 2;
      const auto v = data ? std::vector<std::uint16_t>(data, data + n) : random_bf16(n, rng, false);
      std::copy(v.begin(), v.end(), static_cast<std::uint16_t*>(x.get_data_handle()));
    };
    fill(A, a_data);
    fill(B, b_data);
    dnnl::matmul mm(pd);
    const auto run = [&] {
      mm.execute(stream, {{DNNL_ARG_SRC, A}, {DNNL_ARG_WEIGHTS, B}, {DNNL_ARG_DST, C}});
      stream.wait();
    };
    const double s = seconds_per_call(run, repeats, rounds);
    std::printf("  %-44s %8.1f GFLOP/s", what, flops / s / 1e9);
    if (want)
      std::printf("   max_rel_diff vs posenc %.1e",
                  max_rel_diff(static_cast<const float*>(C.get_data_handle()), want, c_md.get_size() / 4));
    std::printf("   (%s)\n", pd.impl_info_str());
  };
  // oneDNN's operands from posenc's: K's and V's rows unpacked from Kp and Vp, P's rows made
  // contiguous for every tile; posenc's results for every tile, from zero sums.
  std::vector<std::uint16_t> K_rows(Kp.size()), V_rows(Vp.size()), P_tiles(std::size_t{kTiles} * kRows * kKeyTile);
  std::vector<float> Sc_want(std::size_t{kTiles} * kRows * kKeyTile), acc_want(std::size_t{kTiles} * kRows * kD, 0.0f);
  for (int t = 0; t < kTiles; ++t) {
    const std::size_t at = t * kv_tile;
    for (int c = 0; c < kKeyTile; ++c)
      for (int x = 0; x < kD; ++x) {
        K_rows[at + std::size_t(c) * kD + x] = Kp[at + std::size_t(x / 2) * 2 * kKeyTile + 2 * c + x % 2];
        V_rows[at + std::size_t(c) * kD + x] = Vp[at + std::size_t(c / 2) * 2 * kD + 2 * x + c % 2];
      }
    std::copy(Pbits.begin(), Pbits.end(), P_tiles.begin() + t * std::size_t{kRows} * kKeyTile);
    bf16::score_tile(u32(Q, t * q_tile), kPairs, u32(Kp, at), kRows, Sc_want.data() + t * std::size_t{kRows} * kKeyTile);
    bf16::value_tile(P.data(), u32(Vp, at), kRows, kKeyTile / 2, kD, acc_want.data() + t * std::size_t{kRows} * kD);
  }

  std::printf("scores Sc = Q.K^T, 128 x 64 x 64 (%.2f MFLOP a tile pair):\n", kTileFlops / 1e6);
  report("posenc score_tile (VDPBF16PS)", posenc_score, -1);
  report("libxsmm bsmm (VNNI A = posenc's Kp)", xsmm_score, xsmm_score_diff);
  matmul({kTiles, kRows, kD}, {kTiles, kD, kKeyTile}, {kTiles, kRows, kKeyTile}, tag::acb, kTiles * kTileFlops,
         "oneDNN matmul, 8 tiles a call", calls / kTiles, Q.data(), K_rows.data(), Sc_want.data());
  std::printf("P.V acc += P.V, 128 x 64 x 64:\n");
  report("posenc value_tile (VDPBF16PS)", posenc_value, -1);
  report("libxsmm bsmm (VNNI A = posenc's Vp)", xsmm_value, xsmm_value_diff);
  matmul({kTiles, kRows, kKeyTile}, {kTiles, kKeyTile, kD}, {kTiles, kRows, kD}, tag::abc, kTiles * kTileFlops,
         "oneDNN matmul, 8 tiles a call", calls / kTiles, P_tiles.data(), V_rows.data(), acc_want.data());
  std::printf(
      "the online softmax of a score tile (posenc softmax_tile, no row's maximum raised): %.2f us, against %.2f us for its two products\n",
      posenc_softmax * 1e6, (posenc_score + posenc_value) * 1e6);
  std::printf("square:\n");
  matmul({2048, 2048}, {2048, 2048}, {2048, 2048}, tag::ab, 2.0 * 2048.0 * 2048 * 2048, "oneDNN matmul 2048^3 bf16 -> f32", 3, nullptr,
         nullptr, nullptr);
  return 0;
}
