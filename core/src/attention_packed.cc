#include "attention_packed.h"

#include <algorithm>
#include <vector>

namespace posenc::attention_detail {

PackedKeys::PackedKeys(const Plan& plan, PackedKeyLayouts layouts, int threads, std::int64_t first_group, std::int64_t end_group)
    : tiles_((plan.T + kKeyTile - 1) / kKeyTile), first_group_(first_group), heads_(plan.k->heads),
      tile_floats_(static_cast<std::size_t>(kKeyTile) * plan.D) {
  if (end_group < 0) end_group = std::int64_t{plan.k->batch} * heads_;
  const std::size_t total = static_cast<std::size_t>(end_group - first_group) * tiles_ * tile_floats_;
  for (auto [wanted, x] : {std::pair{layouts.kt, &kt_}, std::pair{layouts.k_rows, &k_rows_}, std::pair{layouts.v_rows, &v_rows_},
                           std::pair{layouts.vt, &vt_}})
    if (wanted) x->assign(total, 0.0f);
  const int D = plan.D, T = plan.T;
  const std::int64_t tasks = (end_group - first_group) * tiles_;
#ifdef _OPENMP
#pragma omp parallel num_threads(threads)
#endif
  {
    std::vector<float> row(static_cast<std::size_t>(D)), tmp(static_cast<std::size_t>(D));
#ifdef _OPENMP
#pragma omp for schedule(static)
#endif
    for (std::int64_t task = 0; task < tasks; ++task) {
      const std::int64_t tile = task % tiles_, group = first_group + task / tiles_;
      const int hk = static_cast<int>(group % heads_), b = static_cast<int>(group / heads_);
      const std::size_t at = offset(b, hk, tile);
      for (int c = 0; c < kKeyTile && tile * kKeyTile + c < T; ++c) {
        const int j = static_cast<int>(tile * kKeyTile + c);
        if (layouts.kt || layouts.k_rows) {
          plan.load_key(b, j, hk, row.data(), tmp.data());
          for (int x = 0; layouts.kt && x < D; ++x) kt_[at + static_cast<std::size_t>(x) * kKeyTile + c] = row[x];
          if (layouts.k_rows) std::copy(row.begin(), row.end(), k_rows_.begin() + static_cast<std::ptrdiff_t>(at + static_cast<std::size_t>(c) * D));
        }
        if (layouts.v_rows || layouts.vt) {
          load_row(*plan.v, b, j, hk, row.data());
          for (int x = 0; layouts.vt && x < D; ++x) vt_[at + static_cast<std::size_t>(x) * kKeyTile + c] = row[x];
          if (layouts.v_rows) std::copy(row.begin(), row.end(), v_rows_.begin() + static_cast<std::ptrdiff_t>(at + static_cast<std::size_t>(c) * D));
        }
      }
    }
  }
}

std::int64_t PackedKeys::group_bytes(const RopeTensor& k, PackedKeyLayouts layouts) {
  const std::int64_t tiles = (std::int64_t{k.tokens} + kKeyTile - 1) / kKeyTile;
  return tiles * kKeyTile * k.head_dim * layouts.count() * static_cast<std::int64_t>(sizeof(float));
}

PackedQueries::PackedQueries(const Plan& plan, const RopeTensor& dout, int threads)
    : rows_((std::int64_t{plan.S} + kQueryTile - 1) / kQueryTile * kQueryTile), heads_(plan.Hq), D_(static_cast<std::size_t>(plan.D)) {
  static_assert(kPaddedRows <= kQueryTile, "a tile's padded rows lie inside the packed rows");
  const std::size_t total = static_cast<std::size_t>(plan.q->batch) * heads_ * rows_ * D_;
  q_.assign(total, 0.0f);
  dout_.assign(total, 0.0f);
  const std::int64_t tasks = std::int64_t{plan.q->batch} * heads_ * plan.S;
#ifdef _OPENMP
#pragma omp parallel num_threads(threads)
#endif
  {
    std::vector<float> tmp(D_);
#ifdef _OPENMP
#pragma omp for schedule(static)
#endif
    for (std::int64_t task = 0; task < tasks; ++task) {
      const int i = static_cast<int>(task % plan.S), h = static_cast<int>(task / plan.S % heads_);
      const int b = static_cast<int>(task / plan.S / heads_);
      float* row = q_.data() + offset(b, h, i);
      plan.load_query(b, i, h, row, tmp.data());
      for (std::size_t x = 0; x < D_; ++x) row[x] *= plan.scale;
      load_row(dout, b, i, h, dout_.data() + offset(b, h, i));
    }
  }
}

std::int64_t PackedQueries::bytes(const RopeTensor& q) {
  const std::int64_t rows = (std::int64_t{q.tokens} + kQueryTile - 1) / kQueryTile * kQueryTile;
  return 2 * std::int64_t{q.batch} * q.heads * rows * q.head_dim * static_cast<std::int64_t>(sizeof(float));
}

bool packing_pays(const RopeTensor& q, const RopeTensor& k) { return q.heads > k.heads || q.tokens > kQueryTile; }

namespace {
std::int64_t forward_limit = kForwardPackBytes;
}  // namespace

std::int64_t forward_pack_limit() { return forward_limit; }
void set_forward_pack_limit_for_test(std::int64_t bytes) { forward_limit = bytes; }

std::int64_t forward_groups_per_batch(const RopeTensor& q, const RopeTensor& k) {
  const std::int64_t group = PackedKeys::group_bytes(k, kForwardLayouts), groups = std::int64_t{k.batch} * k.heads;
  if (!packing_pays(q, k) || group > forward_limit) return 0;
  return std::min(groups, forward_limit / group);
}

std::int64_t forward_pack_bytes(const RopeTensor& q, const RopeTensor& k) {
  return forward_groups_per_batch(q, k) * PackedKeys::group_bytes(k, kForwardLayouts);
}

bool backward_packs(const RopeTensor& q, const RopeTensor& k) {
  const std::int64_t keys = std::int64_t{k.batch} * k.heads * PackedKeys::group_bytes(k, kBackwardLayouts);
  return packing_pays(q, k) && keys + PackedQueries::bytes(q) <= kBackwardPackBytes;
}

}  // namespace posenc::attention_detail
