/* The C ABI from a C99 program, checked against known numbers: Hugging Face's inv_freq for
 * Llama-3.1-8B (tests/data/hf-golden.json), the formulas of RoPE, dynamic NTK, ALiBi, T5 and the
 * sinusoidal table, and identities (rotate then un-rotate, shift = rotate further, fused RoPE
 * attention = attention of rotated copies, M-RoPE text positions = 1-D RoPE). */
#include <stdint.h>

#include "capi_check.h"

static void schedule_from_real_config(void) {
  posenc_schedule* s = real_config("Llama-3.1-8B-Instruct.json", 0);
  float inv_freq[64];
  int64_t count = -1;
  double factor = 0;
  int32_t rotary = 0, head = 0;
  posenc_layer_info info;
  CHECK(posenc_abi_version() == POSENC_ABI_VERSION && POSENC_ABI_VERSION == 1);
  OK(posenc_schedule_inv_freq(s, NULL, 0, &count));  /* the count alone */
  CHECK(count == 64);
  OK(posenc_schedule_inv_freq(s, inv_freq, 64, &count));
  /* HF's _compute_llama3_parameters (hf-golden.json llama3_llama3.1_8b); posenc within 1e-6. */
  REL(inv_freq[0], 1.0, 1e-6);
  REL(inv_freq[1], 0.8146172165870667, 1e-6);
  REL(inv_freq[63], 3.068925877869333e-07, 1e-6);
  OK(posenc_schedule_attention_factor(s, &factor));
  OK(posenc_schedule_rotary_dim(s, &rotary));
  OK(posenc_schedule_head_dim(s, &head));
  CHECK(factor == 1.0 && rotary == 128 && head == 128);
  memset(&info, 0, sizeof info);
  info.struct_size = sizeof info;
  OK(posenc_schedule_layer(s, &info));
  CHECK(info.family_known == 1 && info.index == 0 && info.rope == 1 && info.layout == POSENC_LAYOUT_HALF_SPLIT);
  CHECK(info.attention == POSENC_ATTENTION_FULL && info.window == -1 && info.rotary_dim == 128);
  NEAR(info.softmax_scale, 1.0 / sqrt(128.0), 1e-15);
  CHECK(strcmp(info.model_type, "llama") == 0 && strcmp(info.rope_type, "llama3") == 0);
  CHECK(strcmp(info.pairing, "half_split") == 0 && strcmp(info.output_order, "") == 0);
  CHECK(strcmp(info.attention_name, "full") == 0 && strcmp(info.mrope_style, "") == 0);
  posenc_schedule_free(s);
}

/* Dynamic NTK through HF's runtime rule: base * (factor * L / max - (factor - 1))^(d / (d - 2)). */
static void dynamic_ntk_at_length(void) {
  static const char config[] =
      "{\"model_type\": \"llama\", \"hidden_size\": 256, \"num_attention_heads\": 4, \"num_hidden_layers\": 2,"
      " \"max_position_embeddings\": 2048, \"rope_theta\": 10000.0,"
      " \"rope_scaling\": {\"rope_type\": \"dynamic\", \"factor\": 2.0}}";
  posenc_schedule *s = NULL, *at = NULL;
  float init[32], longer[32];
  int64_t n = 0;
  posenc_layer_info info;
  const double base = 10000.0 * pow(2.0 * 4096 / 2048 - 1.0, 64.0 / 62.0);
  OK(posenc_schedule_from_config(config, (int64_t)strlen(config), 0, 1, &s));
  OK(posenc_schedule_inv_freq(s, init, 32, &n));
  REL(init[1], pow(10000.0, -2.0 / 64), 1e-6);
  OK(posenc_schedule_at(s, 4096, &at));
  OK(posenc_schedule_inv_freq(at, longer, 32, &n));
  REL(longer[1], pow(base, -2.0 / 64), 1e-6);
  REL(longer[31], pow(base, -62.0 / 64), 1e-6);
  /* The runtime rule on the handle: grows at 4096, resets to init below max_position (2048). */
  OK(posenc_schedule_update(s, 4095));
  OK(posenc_schedule_inv_freq(s, init, 32, &n));
  CHECK(init[1] == longer[1]);
  memset(&info, 0, sizeof info);
  info.struct_size = sizeof info;
  OK(posenc_schedule_layer(s, &info));
  CHECK(info.seq_len == 4096);
  NEAR(info.base, base, 1e-9);
  OK(posenc_schedule_update(s, 100));
  OK(posenc_schedule_inv_freq(s, init, 32, &n));
  REL(init[1], pow(10000.0, -2.0 / 64), 1e-6);
  posenc_schedule_free(s);
  posenc_schedule_free(at);
}

/* Half-split RoPE by its formula; then direction -1 undoes it (attention factor 1). */
static void rotate_matches_formula(void) {
  enum { T = 5, H = 2, D = 128, F = 64 };
  posenc_schedule* s = real_config("Llama-3.1-8B-Instruct.json", 0);
  static float x[T * H * D], y[T * H * D], z[T * H * D];
  float inv_freq[F];
  int64_t n = 0, t, h, j;
  posenc_tensor q = bshd_f32(y, 1, T, H, D);
  posenc_positions at = implicit_positions(7);  /* token t at position t + 7 */
  posenc_rope_options back;
  fill(x, T * H * D, 1);
  memcpy(y, x, sizeof x);
  OK(posenc_schedule_inv_freq(s, inv_freq, F, &n));
  OK(posenc_rope_rotate(s, &q, NULL, &at, NULL));
  for (t = 0; t < T; ++t)
    for (h = 0; h < H; ++h)
      for (j = 0; j < F; ++j) {
        const float* in = x + (t * H + h) * D;
        const float* out = y + (t * H + h) * D;
        const double angle = (double)(t + 7) * inv_freq[j];
        NEAR(out[j], in[j] * cos(angle) - in[j + F] * sin(angle), 2e-6);
        NEAR(out[j + F], in[j + F] * cos(angle) + in[j] * sin(angle), 2e-6);
      }
  posenc_rope_options_init(&back);
  back.direction = -1;
  OK(posenc_rope_rotate(s, &q, NULL, &at, &back));
  for (j = 0; j < T * H * D; ++j) NEAR(y[j], x[j], 2e-6);
  /* The same positions as int32 and int64 ids, and the [B, H, S, D] layout: the same bits. */
  {
    int32_t ids32[T];
    int64_t ids64[T];
    posenc_positions p32 = implicit_positions(0), p64 = implicit_positions(0);
    posenc_tensor zt = bshd_f32(z, 1, T, H, D);
    for (t = 0; t < T; ++t) ids32[t] = (int32_t)(t + 7), ids64[t] = t + 7;
    p32.kind = POSENC_IDS_INT32, p32.ids = ids32, p32.axes = 1;
    p64.kind = POSENC_IDS_INT64, p64.ids = ids64, p64.axes = 1;
    memcpy(y, x, sizeof x);
    OK(posenc_rope_rotate(s, &q, NULL, &p32, NULL));
    for (t = 0; t < T; ++t)  /* z: x stored [B, H, S, D] */
      for (h = 0; h < H; ++h) memcpy(z + (h * T + t) * D, x + (t * H + h) * D, D * sizeof(float));
    zt.head_stride = T * D, zt.token_stride = D;
    OK(posenc_rope_rotate(s, &zt, NULL, &p64, NULL));
    for (t = 0; t < T; ++t)
      for (h = 0; h < H; ++h) CHECK(memcmp(z + (h * T + t) * D, y + (t * H + h) * D, D * sizeof(float)) == 0);
  }
  posenc_schedule_free(s);
}

static uint16_t to_bf16(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}
static float from_bf16(uint16_t h) {
  uint32_t u = (uint32_t)h << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}

/* bf16 storage: the f32 result rounded (math in f32 either way), and q with k (GQA) in one call. */
static void rotate_bf16_and_k(void) {
  enum { T = 3, HQ = 4, HK = 2, D = 128 };
  posenc_schedule* s = real_config("Qwen2.5-7B-Instruct.json", -1);
  static float qf[T * HQ * D], kf[T * HK * D], k1[T * HK * D];
  static uint16_t qb[T * HQ * D];
  posenc_tensor q = bshd_f32(qf, 1, T, HQ, D), k = bshd_f32(kf, 1, T, HK, D), kalone = bshd_f32(k1, 1, T, HK, D);
  posenc_tensor qbt = q;
  posenc_positions at = implicit_positions(3);
  int64_t i;
  fill(qf, T * HQ * D, 2);
  fill(kf, T * HK * D, 3);
  memcpy(k1, kf, sizeof kf);
  for (i = 0; i < T * HQ * D; ++i) qb[i] = to_bf16(qf[i]), qf[i] = from_bf16(qb[i]);
  qbt.data = qb, qbt.dtype = POSENC_DTYPE_BF16;
  OK(posenc_rope_rotate(s, &q, &k, &at, NULL));
  OK(posenc_rope_rotate(s, &qbt, NULL, &at, NULL));
  OK(posenc_rope_rotate(s, &kalone, NULL, &at, NULL));
  for (i = 0; i < T * HQ * D; ++i) CHECK(qb[i] == to_bf16(qf[i]));
  CHECK(memcmp(kf, k1, sizeof kf) == 0);
  posenc_schedule_free(s);
}

/* A key rotated at p and shifted by d equals the key rotated at p + d (f32 rounding), with
 * gpt-oss's YaRN attention factor (1.3466) applied once. */
static void shift_keys(void) {
  enum { T = 4, H = 2, D = 64 };
  posenc_schedule* s = real_config("gpt-oss-20b.json", -1);
  static float a[T * H * D], b[T * H * D];
  double factor = 0;
  int64_t delta, i;
  const int64_t deltas[3] = {5, -3, 1000};
  posenc_tensor ka = bshd_f32(a, 1, T, H, D), kb = bshd_f32(b, 1, T, H, D);
  OK(posenc_schedule_attention_factor(s, &factor));
  NEAR(factor, 1.3465735902799727, 1e-12);
  for (delta = 0; delta < 3; ++delta) {
    posenc_positions p = implicit_positions(10), moved = implicit_positions(10 + deltas[delta]);
    fill(a, T * H * D, 4);
    memcpy(b, a, sizeof a);
    OK(posenc_rope_rotate(s, &ka, NULL, &p, NULL));
    OK(posenc_rope_shift_keys(s, &ka, deltas[delta], NULL));
    OK(posenc_rope_rotate(s, &kb, NULL, &moved, NULL));
    for (i = 0; i < T * H * D; ++i) NEAR(a[i], b[i], 1e-5);
  }
  posenc_schedule_free(s);
}

/* M-RoPE (Qwen2-VL, sections 16/24/24): axes per frequency; text ids (T = H = W) equal 1-D RoPE. */
static void mrope_text_is_1d(void) {
  enum { T = 3, H = 1, D = 128 };
  posenc_schedule* s = real_config("Qwen2-VL-7B-Instruct__4layer.json", 0);
  uint8_t axes[64];
  int64_t n = 0, t;
  static float a[T * H * D], b[T * H * D];
  int64_t ids[3 * T];
  posenc_tensor ta = bshd_f32(a, 1, T, H, D), tb = bshd_f32(b, 1, T, H, D);
  posenc_positions three = implicit_positions(0), text = implicit_positions(2);
  OK(posenc_schedule_axis_of_freq(s, axes, 64, &n));
  CHECK(n == 64 && axes[0] == 0 && axes[15] == 0 && axes[16] == 1 && axes[39] == 1 && axes[40] == 2 && axes[63] == 2);
  for (t = 0; t < 3 * T; ++t) ids[t] = t % T + 2;
  three.kind = POSENC_IDS_INT64, three.ids = ids, three.axes = 3, three.axis_stride = T;
  fill(a, T * D, 5);
  memcpy(b, a, sizeof a);
  OK(posenc_rope_rotate(s, &ta, NULL, &three, NULL));
  OK(posenc_rope_rotate(s, &tb, NULL, &text, NULL));
  CHECK(memcmp(a, b, sizeof a) == 0);
  posenc_schedule_free(s);
}

/* HunYuan-VL's XD-RoPE: no per-frequency axis map (its rotate_half pairs can read two axes), so the
   schedule reports style "xdrope" and no axes: text positions rotate as 1-D RoPE. */
static void xdrope_has_no_axis_map(void) {
  enum { T = 3, H = 1, D = 128 };
  posenc_schedule* s = real_config("../configs-extra/HunyuanOCR__constructed.json", 0);
  posenc_layer_info info;
  uint8_t axes[64];
  int64_t n = -1, t;
  static float a[T * H * D];
  int64_t ids[3 * T];
  posenc_tensor ta = bshd_f32(a, 1, T, H, D);
  posenc_positions three = implicit_positions(0), text = implicit_positions(0);
  memset(&info, 0, sizeof info);
  info.struct_size = sizeof info;
  OK(posenc_schedule_layer(s, &info));
  CHECK(strcmp(info.mrope_style, "xdrope") == 0);
  OK(posenc_schedule_axis_of_freq(s, axes, 64, &n));
  CHECK(n == 0);
  for (t = 0; t < 3 * T; ++t) ids[t] = t % T;  /* 3 axes: refused, not read as axis 0 */
  three.kind = POSENC_IDS_INT64, three.ids = ids, three.axes = 3, three.axis_stride = T;
  fill(a, T * D, 7);
  CHECK(posenc_rope_rotate(s, &ta, NULL, &three, NULL) == POSENC_ERR_ARGUMENT);
  CHECK(strstr(posenc_last_error(), "XD-RoPE") != NULL);
  OK(posenc_rope_rotate(s, &ta, NULL, &text, NULL));  /* text ids rotate */
  posenc_schedule_free(s);
}

int main(void) {
  schedule_from_real_config();
  dynamic_ntk_at_length();
  rotate_matches_formula();
  rotate_bf16_and_k();
  shift_keys();
  mrope_text_is_1d();
  xdrope_has_no_axis_map();
  return finish("capi values");
}
