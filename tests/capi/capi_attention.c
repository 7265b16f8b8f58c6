/* Fused attention and the plain encodings through the C ABI, against a naive C computation:
 * softmax(q.k * scale + bias) v with causal masking and GQA, ALiBi's -slope * (i - j), T5's
 * table[bucket(j - i)][h]; RoPE attention equals attention of copies rotated by
 * posenc_rope_rotate; ALiBi slopes, T5 buckets (hf-golden.json) and sinusoidal rows by formula. */
#include <stdint.h>

#include "capi_check.h"

enum { B = 1, S = 5, HQ = 4, HK = 2, D = 16, NB = 32 };

static float q[B * S * HQ * D], k[B * S * HK * D], v[B * S * HK * D], out[B * S * HQ * D];

/* Naive attention of one (query i, head h) with an additive bias per key: into o[D]. */
static void naive_row(int i, int h, double scale, const double* bias, float* o) {
  double score[S], top = -1e300, sum = 0;
  int j, c;
  for (j = 0; j <= i; ++j) { /* causal, past = 0 (S == T) */
    double dot = 0;
    for (c = 0; c < D; ++c) dot += (double)q[(i * HQ + h) * D + c] * k[(j * HK + h / (HQ / HK)) * D + c];
    score[j] = dot * scale + (bias ? bias[j] : 0.0);
    top = fmax(top, score[j]);
  }
  for (j = 0; j <= i; ++j) sum += score[j] = exp(score[j] - top);
  for (c = 0; c < D; ++c) {
    double acc = 0;
    for (j = 0; j <= i; ++j) acc += score[j] / sum * v[(j * HK + h / (HQ / HK)) * D + c];
    o[c] = (float)acc;
  }
}

static void run(const posenc_attention_params* p) {
  posenc_tensor qt = bshd_f32(q, B, S, HQ, D), kt = bshd_f32(k, B, S, HK, D), vt = bshd_f32(v, B, S, HK, D),
                ot = bshd_f32(out, B, S, HQ, D);
  OK(posenc_attention_forward(p, &qt, &kt, &vt, &ot));
}

static void plain_alibi_t5(void) {
  posenc_attention_params p;
  double slopes[HQ], bias[S];
  float table[NB * HQ], o[D];
  int64_t n = 0;
  int i, h, j, c;
  fill(table, NB * HQ, 9);
  OK(posenc_alibi_slopes(HQ, slopes, HQ, &n));
  for (h = 0; h < 3; ++h) {  /* none, ALiBi, T5 */
    posenc_attention_params_init(&p);
    if (h == 1) p.positions = POSENC_POS_ALIBI, p.alibi_slopes = slopes;
    if (h == 2) p.positions = POSENC_POS_T5, p.t5_table = table, p.t5_bidirectional = 0, p.scale = 1;
    run(&p);
    for (i = 0; i < S; ++i)
      for (j = 0; j < HQ; ++j) {
        int32_t bucket = 0, key;
        for (key = 0; key <= i; ++key) {
          bias[key] = 0;
          if (h == 1) bias[key] = -slopes[j] * (i - key);
          if (h == 2) {
            OK(posenc_t5_bucket(key - i, NB, 128, 0, &bucket));
            bias[key] = table[bucket * HQ + j];
          }
        }
        naive_row(i, j, h == 2 ? 1.0 : 1.0 / sqrt((double)D), bias, o);
        for (c = 0; c < D; ++c) NEAR(out[(i * HQ + j) * D + c], o[c], 2e-5);
      }
  }
}

/* RoPE inside attention (q, k not modified) = attention of copies rotated beforehand. */
static void rope_attention(void) {
  posenc_attention_params p;
  static float fused[B * S * HQ * D], q0[B * S * HQ * D], k0[B * S * HK * D];
  static const char config[] =
      "{\"model_type\": \"llama\", \"hidden_size\": 64, \"num_attention_heads\": 4, \"num_hidden_layers\": 1,"
      " \"max_position_embeddings\": 64, \"rope_theta\": 100.0}";
  posenc_schedule* s = NULL;
  posenc_tensor qt = bshd_f32(q, B, S, HQ, D), kt = bshd_f32(k, B, S, HK, D);
  posenc_positions from3 = implicit_positions(3);
  int i;
  OK(posenc_schedule_from_config(config, (int64_t)strlen(config), 0, 0, &s));
  memcpy(q0, q, sizeof q);
  memcpy(k0, k, sizeof k);
  posenc_attention_params_init(&p);
  p.positions = POSENC_POS_ROPE, p.rope = s, p.q_positions = from3, p.k_positions = from3;
  run(&p);
  CHECK(memcmp(q, q0, sizeof q) == 0 && memcmp(k, k0, sizeof k) == 0);
  memcpy(fused, out, sizeof out);
  OK(posenc_rope_rotate(s, &qt, &kt, &from3, NULL));
  posenc_attention_params_init(&p);
  run(&p);
  for (i = 0; i < B * S * HQ * D; ++i) NEAR(fused[i], out[i], 1e-5);
  memcpy(q, q0, sizeof q);
  memcpy(k, k0, sizeof k);
  posenc_schedule_free(s);
}

static void encodings(void) {
  double slopes[9];
  int64_t n = 0;
  int32_t bucket = -1;
  float row[4];
  const double at[1] = {1.0};
  int i;
  /* hf-golden.json alibi.paper_slopes_f64 for 9 heads */
  OK(posenc_alibi_slopes(9, slopes, 9, &n));
  CHECK(n == 9);
  for (i = 0; i < 8; ++i) NEAR(slopes[i], pow(2.0, -(i + 1.0)), 1e-15);
  NEAR(slopes[8], 0.7071067811865476, 1e-15);
  /* hf-golden.json t5_relative_bias.bucket_cases (32 buckets, max_distance 128) */
  OK(posenc_t5_bucket(-300, 32, 128, 1, &bucket));
  CHECK(bucket == 15);
  OK(posenc_t5_bucket(5, 32, 128, 1, &bucket));
  CHECK(bucket == 21);
  OK(posenc_t5_bucket(300, 32, 128, 1, &bucket));
  CHECK(bucket == 31);
  OK(posenc_t5_bucket(-20, 32, 128, 0, &bucket));
  CHECK(bucket == 17);
  OK(posenc_t5_bucket(20, 32, 128, 0, &bucket));
  CHECK(bucket == 0);
  /* Vaswani, dim 4, position 1: w = 1, 0.01 */
  OK(posenc_sinusoidal_rows(4, POSENC_SINUSOIDAL_INTERLEAVED, POSENC_SINUSOIDAL_VASWANI, 10000.0, at, 1, row, 4));
  NEAR(row[0], sin(1.0), 1e-7);
  NEAR(row[1], cos(1.0), 1e-7);
  NEAR(row[2], sin(0.01), 1e-7);
  NEAR(row[3], cos(0.01), 1e-7);
  OK(posenc_sinusoidal_rows(4, POSENC_SINUSOIDAL_HALVES, POSENC_SINUSOIDAL_VASWANI, 10000.0, at, 1, row, 4));
  NEAR(row[0], sin(1.0), 1e-7);
  NEAR(row[1], sin(0.01), 1e-7);
  NEAR(row[2], cos(1.0), 1e-7);
  NEAR(row[3], cos(0.01), 1e-7);
}

int main(void) {
  fill(q, B * S * HQ * D, 6);
  fill(k, B * S * HK * D, 7);
  fill(v, B * S * HK * D, 8);
  plain_alibi_t5();
  rope_attention();
  encodings();
  return finish("capi attention and encodings");
}
