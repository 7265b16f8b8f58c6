// FoX, the forgetting transformer (Lin, Nikishin, He, Courville 2025, "Forgetting Transformer:
// Softmax Attention with a Forget Gate", ICLR, eqs. 4-6; x-transformers' DataDependentAlibi): per
// token t and head h a forget gate f_t = sigmoid(z_t), z_t = w_h . x_t + b_h, and the bias of
// query i and key j <= i
//
//   b_ij = sum_{s=j+1..i} log f_s = c_i - c_j,      c_t = sum_{s<=t} log f_s  (cumulative gate)
//
// so attention needs only c ([B, H, T], linear memory; attention.h, kForgetGate). A constant gate
// f = gamma gives b_ij = -(-log gamma) (i - j): ALiBi with slope -log gamma.
//
// Precision: c is rounded to float32 once, so c_i - c_j carries an absolute error of about
// ulp(|c|) (6e-8 |c|), whatever i - j: at |c| ~ 100, ~1e-5. That is FoX's own float32 behaviour
// (any kernel that takes c as float32 has it), not a loss of this library's.
#pragma once

#include <cstdint>

namespace posenc {

// [batch][heads][tokens], dense, row-major.
struct ForgetGateShape {
  int batch = 1, heads = 1, tokens = 0;
};

// c from the gate logits z: log sigmoid(z) = -log1p(exp(-z)) (stable for either sign), summed
// over tokens in double and rounded once. logits, c: [B][H][T]. Throws posenc::Error for a
// negative size or a non-finite logit (naming it).
void forget_gate_cumulative(const float* logits, const ForgetGateShape& shape, float* c);

// The gradient of a loss w.r.t. the logits from its gradient w.r.t. c: dz_s = sigmoid(-z_s) *
// sum_{t>=s} dc_t (d log sigmoid(z) / dz = sigmoid(-z)), in double, rounded once; overwrites dlogits.
void forget_gate_cumulative_backward(const float* logits, const float* dc, const ForgetGateShape& shape, float* dlogits);

// The double reference of one bias: sum_{s=j+1..i} log(sigmoid(z_s)) term by term, for j <= i
// (0 for i = j); throws posenc::Error otherwise.
double forget_gate_bias_reference(const float* logits, const ForgetGateShape& shape, int b, int h, int i, int j);

}  // namespace posenc
