#include "posenc/attention_backward.h"

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "attention_plan.h"
#include "posenc/error.h"

namespace posenc {
namespace {

using namespace attention_detail;

std::string dims(const RopeTensor& x) {
  return std::to_string(x.batch) + "x" + std::to_string(x.tokens) + "x" + std::to_string(x.heads) + "x" + std::to_string(x.head_dim);
}

void check_like(const RopeTensor& x, const RopeTensor& like, const char* name, const char* like_name) {
  if (!x.data) throw Error(std::string("attention_backward: ") + name + " has no data");
  if (x.batch != like.batch || x.tokens != like.tokens || x.heads != like.heads || x.head_dim != like.head_dim)
    throw Error(std::string("attention_backward: ") + name + " " + dims(x) + " must have " + like_name + "'s shape " + dims(like));
}

}  // namespace

void validate_attention_backward(const AttentionBackwardInputs& in, const AttentionGradients& grads, const AttentionParams& params) {
  validate_attention(in.q, in.k, in.v, in.out, params);
  check_like(in.dout, in.out, "dout", "out");
  check_like(grads.dq, in.q, "dq", "q");
  check_like(grads.dk, in.k, "dk", "k");
  check_like(grads.dv, in.v, "dv", "v");
  const std::pair<const RopeTensor*, const char*> all[] = {{&in.q, "q"},     {&in.k, "k"},   {&in.v, "v"},   {&in.out, "out"},
                                                           {&in.dout, "dout"}, {&grads.dq, "dq"}, {&grads.dk, "dk"}, {&grads.dv, "dv"}};
  for (const auto& [x, name] : all)
    if (x->dtype != DType::kF32)
      throw Error(std::string("attention_backward: ") + name + " is " + to_string(x->dtype) + "; the backward pass takes float32 only");
  if (!in.lse) throw Error("attention_backward: needs the forward's lse [B, Hq, S] (AttentionOptions::lse)");
  if (grads.t5_table_grad && params.positions != AttentionPositions::kT5)
    throw Error(std::string("attention_backward: t5_table_grad is for T5 attention, positions are '") + to_string(params.positions) + "'");
  if (grads.distance_table_grad && params.positions != AttentionPositions::kDistanceTable)
    throw Error(std::string("attention_backward: distance_table_grad is for distance-table attention, positions are '") +
                to_string(params.positions) + "'");
  if (grads.gate_cumulative_grad && params.positions != AttentionPositions::kForgetGate)
    throw Error(std::string("attention_backward: gate_cumulative_grad is for forget-gate attention, positions are '") +
                to_string(params.positions) + "'");
}

void attention_backward_reference(const AttentionBackwardInputs& in, const AttentionGradients& grads, const AttentionParams& params) {
  validate_attention_backward(in, grads, params);
  const Plan plan = make_plan(in.q, in.k, in.v, in.out, params, nullptr);
  const int B = in.q.batch, S = plan.S, T = plan.T, Hq = plan.Hq, Hk = in.k.heads, D = plan.D;
  const double neg_inf = -std::numeric_limits<double>::infinity();
  // dk and dv sum over query rows and heads: in double until the end, as the rotated-frame dk.
  const auto kv_at = [&](int b, int j, int hk) { return ((static_cast<std::size_t>(b) * T + j) * Hk + hk) * D; };
  std::vector<double> dk(static_cast<std::size_t>(B) * T * Hk * D), dv(dk.size());
  std::vector<double> table(params.positions == AttentionPositions::kT5 ? static_cast<std::size_t>(params.t5.num_buckets) * Hq : 0);
  const std::int64_t width = params.distance_table.width();
  std::vector<double> distance(grads.distance_table_grad ? static_cast<std::size_t>(Hq * width) : 0);
  std::vector<double> gate(grads.gate_cumulative_grad ? static_cast<std::size_t>(B) * Hq * T : 0);
  // A remap (attention_remap.h): each pair's branch picks the query's rotation (near, far, DCA's
  // far2) and the key's (near, far); each rotation's gradient is taken back by its own transpose.
  const Remap& remap = plan.remap;
  std::vector<double> dk_far(remap.on() ? dk.size() : 0);
  std::vector<float> qr(D), qf(D), qf2(D), kr(D), vr(D), dor(D), tmp(D), row(D), far_row(D);
  std::vector<double> s(static_cast<std::size_t>(T)), P(s.size()), dP(s.size()), dq(D), dq_far(D), dq_far2(D);
  const auto branch_of = [&](int b, int i, int j) {
    return remap.on() ? remap.branch(params.q_positions.at(0, b, i, S), params.k_positions.at(0, b, j, T)) : Remap::kNear;
  };
  const auto load_key_of = [&](int branch, int b, int j, int hk) {
    if (branch == Remap::kNear)
      plan.load_key(b, j, hk, kr.data(), tmp.data());
    else
      plan.load_key_far(b, j, hk, kr.data(), tmp.data());
  };
  for (int b = 0; b < B; ++b)
    for (int h = 0; h < Hq; ++h)
      for (int i = 0; i < S; ++i) {
        const int hk = h / plan.group;
        plan.load_query(b, i, h, qr.data(), tmp.data());
        if (remap.on()) plan.load_query_far(b, i, h, qf.data(), tmp.data(), Remap::kFar);
        if (remap.far_queries() > 1) plan.load_query_far(b, i, h, qf2.data(), tmp.data(), Remap::kFar2);
        const auto query_of = [&](int branch) -> const std::vector<float>& { return branch == Remap::kNear ? qr : branch == Remap::kFar ? qf : qf2; };
        load_row(in.dout, b, i, h, dor.data());
        double best = neg_inf;
        for (int j = 0; j < T; ++j) {
          s[j] = neg_inf;
          if (!plan.visible(b, plan.past + i, j)) continue;
          const int branch = branch_of(b, i, j);
          load_key_of(branch, b, j, hk);
          const std::vector<float>& qrow = query_of(branch);
          double dot = 0;
          for (int c = 0; c < D; ++c) dot += static_cast<double>(qrow[c]) * kr[c];
          s[j] = dot * plan.scale + plan.bias(b, h, i, j);
          best = std::max(best, s[j]);
        }
        double total = 0, Di = 0;  // softmax denominator; D_i = sum_j P_ij dP_ij = dO_i . O_i
        for (int j = 0; j < T; ++j) total += s[j] == neg_inf ? 0.0 : std::exp(s[j] - best);
        for (auto* x : {&dq, &dq_far, &dq_far2}) std::fill(x->begin(), x->end(), 0.0);
        for (int j = 0; j < T && total > 0; ++j) {
          P[j] = s[j] == neg_inf ? 0.0 : std::exp(s[j] - best) / total;
          load_row(in.v, b, j, hk, vr.data());
          double dot = 0;
          for (int c = 0; c < D; ++c) dot += static_cast<double>(dor[c]) * vr[c];
          dP[j] = dot;
          Di += P[j] * dot;
        }
        for (int j = 0; j < T && total > 0; ++j) {
          if (P[j] == 0) continue;
          const double dS = P[j] * (dP[j] - Di);
          const int branch = branch_of(b, i, j);
          load_key_of(branch, b, j, hk);
          const std::vector<float>& qrow = query_of(branch);
          std::vector<double>& dqb = branch == Remap::kNear ? dq : branch == Remap::kFar ? dq_far : dq_far2;
          double* dkj = &(branch == Remap::kNear ? dk : dk_far)[kv_at(b, j, hk)];
          double* dvj = &dv[kv_at(b, j, hk)];
          for (int c = 0; c < D; ++c) {
            dqb[c] += plan.scale * dS * kr[c];
            dkj[c] += plan.scale * dS * qrow[c];
            dvj[c] += P[j] * dor[c];
          }
          if (!table.empty()) {
            const int bucket = t5_bucket(params.k_positions.at(0, b, j, T) - params.q_positions.at(0, b, i, S), params.t5);
            table[static_cast<std::size_t>(bucket) * Hq + h] += dS;
          }
          if (!distance.empty())
            distance[static_cast<std::size_t>(h * width + plan.distance_column(params.q_positions.at(0, b, i, S), params.k_positions.at(0, b, j, T)))] += dS;
          if (!gate.empty()) {  // bias = c[past + i] - c[j]
            gate[(static_cast<std::size_t>(b) * Hq + h) * T + static_cast<std::size_t>(plan.past + i)] += dS;
            gate[(static_cast<std::size_t>(b) * Hq + h) * T + static_cast<std::size_t>(j)] -= dS;
          }
        }
        for (int c = 0; c < D; ++c) row[c] = static_cast<float>(dq[c]);
        plan.unrotate_query(b, i, h, row.data(), tmp.data());
        for (int f = 0; f < remap.far_queries(); ++f) {
          const std::vector<double>& g = f ? dq_far2 : dq_far;
          for (int c = 0; c < D; ++c) far_row[c] = static_cast<float>(g[c]);
          plan.rotate_query_far(b, i, far_row.data(), tmp.data(), f ? Remap::kFar2 : Remap::kFar, -1);
          for (int c = 0; c < D; ++c) row[c] += far_row[c];
        }
        store_row(grads.dq, b, i, h, row.data());
      }
  for (int b = 0; b < B; ++b)
    for (int j = 0; j < T; ++j)
      for (int hk = 0; hk < Hk; ++hk) {
        for (int c = 0; c < D; ++c) row[c] = static_cast<float>(dk[kv_at(b, j, hk) + c]);
        plan.unrotate_key(b, j, hk, row.data(), tmp.data());
        if (remap.on()) {
          for (int c = 0; c < D; ++c) far_row[c] = static_cast<float>(dk_far[kv_at(b, j, hk) + c]);
          plan.rotate_key_far(b, j, far_row.data(), tmp.data(), -1);
          for (int c = 0; c < D; ++c) row[c] += far_row[c];
        }
        store_row(grads.dk, b, j, hk, row.data());
        for (int c = 0; c < D; ++c) row[c] = static_cast<float>(dv[kv_at(b, j, hk) + c]);
        store_row(grads.dv, b, j, hk, row.data());
      }
  for (std::size_t x = 0; grads.t5_table_grad && x < table.size(); ++x) grads.t5_table_grad[x] += static_cast<float>(table[x]);
  for (std::size_t x = 0; x < distance.size(); ++x) grads.distance_table_grad[x] += static_cast<float>(distance[x]);
  for (std::size_t x = 0; x < gate.size(); ++x) grads.gate_cumulative_grad[x] += static_cast<float>(gate[x]);
}

}  // namespace posenc
