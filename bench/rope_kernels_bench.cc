// posenc_kernel_bench: rope_rotate per layout and storage dtype, [tokens, 32 + 8 heads, 128],
// table and on-the-fly cos/sin. Bytes processed = q and k read and written.
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <cstring>
#include <vector>

#include "posenc/rope_kernels.h"

namespace {

void BM_RopeRotate(benchmark::State& state) {
  const auto layout = static_cast<posenc::RopeLayout>(state.range(0));
  const auto dtype = static_cast<posenc::DType>(state.range(1));
  const bool table_mode = state.range(2) != 0;
  const int tokens = static_cast<int>(state.range(3)), heads = 32, kv_heads = 8, head_dim = 128;
  const std::size_t esize = posenc::dtype_size(dtype);
  std::vector<std::uint8_t> q(std::size_t{1} * tokens * heads * head_dim * esize), k(std::size_t{1} * tokens * kv_heads * head_dim * esize);
  for (std::size_t i = 0; i + 1 < q.size(); i += 2) q[i + 1] = 0x3c;  // small finite values in every dtype
  for (std::size_t i = 0; i + 1 < k.size(); i += 2) k[i + 1] = 0x3c;
  posenc::RopeParams rp;
  rp.head_dim = head_dim;
  const posenc::RopeSchedule schedule = posenc::compute_schedule(rp);
  const posenc::RopeApplyParams p = posenc::rope_apply_params(schedule, layout);
  posenc::RopeTable table(p, tokens);
  posenc::RopeKernelOptions options;
  options.table = table_mode ? &table : nullptr;
  const posenc::RopeTensor qv = posenc::bshd(q.data(), dtype, {1, tokens, heads, head_dim});
  const posenc::RopeTensor kv = posenc::bshd(k.data(), dtype, {1, tokens, kv_heads, head_dim});
  for (auto _ : state) {
    posenc::rope_rotate(qv, &kv, {}, p, options);
    benchmark::DoNotOptimize(q.data());
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) * 2 * static_cast<std::int64_t>(q.size() + k.size()));
  state.SetLabel(posenc::rope_kernel_target());
}

void Args(benchmark::internal::Benchmark* b) {
  for (int layout : {0, 1, 2})
    for (int dtype : {0, 1, 2})
      for (int table : {1, 0}) b->Args({layout, dtype, table, 8192});
  b->ArgNames({"layout", "dtype", "table", "tokens"})->Unit(benchmark::kMillisecond)->UseRealTime();
}

BENCHMARK(BM_RopeRotate)->Apply(Args);

}  // namespace

BENCHMARK_MAIN();
