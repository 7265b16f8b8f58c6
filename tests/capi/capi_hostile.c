/* Hostile arguments to every entry point: each is answered by an error status and a text that
 * names the value, never a crash (this program runs under ASan/UBSan in `make sanitize`). */
#include <stdint.h>

#include "capi_check.h"

static const char kConfig[] =
    "{\"model_type\": \"llama\", \"hidden_size\": 256, \"num_attention_heads\": 4, \"num_hidden_layers\": 2,"
    " \"max_position_embeddings\": 2048}";

static posenc_schedule* small_schedule(void) {
  posenc_schedule* s = NULL;
  OK(posenc_schedule_from_config(kConfig, (int64_t)strlen(kConfig), 0, 0, &s));
  if (!s) exit(2);
  return s;
}

static void configs(void) {
  posenc_schedule* s = (posenc_schedule*)1;  /* must be reset to NULL on failure */
  const int64_t n = (int64_t)strlen(kConfig);
  static const char bad_json[] = "{\"model_type\": \"llama\", \"hidden_size\": ";
  static const char bad_factor[] =
      "{\"model_type\": \"llama\", \"hidden_size\": 256, \"num_attention_heads\": 4, \"num_hidden_layers\": 2,"
      " \"max_position_embeddings\": 2048, \"rope_scaling\": {\"rope_type\": \"linear\", \"factor\": -2}}";
  REFUSED(posenc_schedule_from_config(NULL, n, 0, 0, &s), POSENC_ERR_ARGUMENT, "json is NULL");
  CHECK(s == NULL);
  REFUSED(posenc_schedule_from_config(kConfig, n, 0, 0, NULL), POSENC_ERR_ARGUMENT, "out is NULL");
  REFUSED(posenc_schedule_from_config(kConfig, -5, 0, 0, &s), POSENC_ERR_ARGUMENT, "got -5");
  REFUSED(posenc_schedule_from_config(kConfig, INT64_MAX, 0, 0, &s), POSENC_ERR_ARGUMENT, "16 MiB");
  REFUSED(posenc_schedule_from_config(kConfig, n, 64, 0, &s), POSENC_ERR_ARGUMENT, "flags 64");
  REFUSED(posenc_schedule_from_config(kConfig, n, 0, 2, &s), POSENC_ERR_ARGUMENT, "layer_index");
  REFUSED(posenc_schedule_from_config(kConfig, n, 0, -1, &s), POSENC_ERR_ARGUMENT, "got -1");
  REFUSED(posenc_schedule_from_config(bad_json, (int64_t)strlen(bad_json), 0, 0, &s), POSENC_ERR_VALUE, "JSON");
  REFUSED(posenc_schedule_from_config(bad_factor, (int64_t)strlen(bad_factor), 0, 0, &s), POSENC_ERR_VALUE, "-2");
  REFUSED(posenc_schedule_from_config_type(kConfig, n, 0, "sliding_attention", &s), POSENC_ERR_VALUE,
          "sliding_attention");
  CHECK(s == NULL);
  posenc_schedule_free(NULL);  /* nothing */
}

static void getters(void) {
  posenc_schedule* s = small_schedule();
  posenc_schedule* at = NULL;
  float few[4];
  int64_t count = -1;
  double d;
  posenc_layer_info info;
  REFUSED(posenc_schedule_inv_freq(NULL, few, 4, &count), POSENC_ERR_ARGUMENT, "schedule is NULL");
  REFUSED(posenc_schedule_inv_freq(s, few, 4, NULL), POSENC_ERR_ARGUMENT, "count is NULL");
  REFUSED(posenc_schedule_inv_freq(s, few, 4, &count), POSENC_ERR_BUFFER, "capacity is 4");
  CHECK(count == 32);
  REFUSED(posenc_schedule_inv_freq(s, few, -1, &count), POSENC_ERR_ARGUMENT, "capacity");
  REFUSED(posenc_schedule_inv_freq(s, NULL, 64, &count), POSENC_ERR_ARGUMENT, "out is NULL");
  REFUSED(posenc_schedule_attention_factor(s, NULL), POSENC_ERR_ARGUMENT, "out is NULL");
  REFUSED(posenc_schedule_query_scale_at(s, -3, &d), POSENC_ERR_ARGUMENT, "position");
  REFUSED(posenc_schedule_at(s, 0, &at), POSENC_ERR_ARGUMENT, "seq_len");
  REFUSED(posenc_schedule_at(s, INT64_MAX, &at), POSENC_ERR_ARGUMENT, "seq_len");
  REFUSED(posenc_schedule_update(s, -1), POSENC_ERR_ARGUMENT, "max_position_id");
  memset(&info, 0, sizeof info);
  REFUSED(posenc_schedule_layer(s, &info), POSENC_ERR_ARGUMENT, "struct_size 0");
  posenc_schedule_free(s);
}

static void views(void) {
  enum { T = 4, H = 2, D = 64 };
  static float x[2 * T * H * D];
  posenc_schedule* s = small_schedule();
  posenc_tensor q = bshd_f32(x, 1, T, H, D), k = bshd_f32(x + T * H * D, 1, T, H, D), bad;
  posenc_positions at = implicit_positions(0), ids = implicit_positions(0);
  posenc_rope_options o;
  int64_t huge_ids[T] = {0, 1, INT64_MAX, 3};
  int32_t negative[T] = {0, 1, -7, 3};
  OK(posenc_rope_rotate(s, &q, &k, &at, NULL));
  REFUSED(posenc_rope_rotate(s, NULL, NULL, &at, NULL), POSENC_ERR_ARGUMENT, "q is NULL");
  REFUSED(posenc_rope_rotate(s, &q, NULL, NULL, NULL), POSENC_ERR_ARGUMENT, "positions is NULL");
  bad = q, bad.data = NULL;
  REFUSED(posenc_rope_rotate(s, &bad, NULL, &at, NULL), POSENC_ERR_ARGUMENT, "q.data is NULL");
  bad = q, bad.tokens = -4;
  REFUSED(posenc_rope_rotate(s, &bad, NULL, &at, NULL), POSENC_ERR_ARGUMENT, "q.tokens");
  bad = q, bad.tokens = INT64_MAX;
  REFUSED(posenc_rope_rotate(s, &bad, NULL, &at, NULL), POSENC_ERR_ARGUMENT, "q.tokens");
  bad = q, bad.tokens = 1 << 30, bad.token_stride = (int64_t)1 << 39;
  REFUSED(posenc_rope_rotate(s, &bad, NULL, &at, NULL), POSENC_ERR_ARGUMENT, "2^48 bytes");
  bad = q, bad.head_dim = 0;
  REFUSED(posenc_rope_rotate(s, &bad, NULL, &at, NULL), POSENC_ERR_ARGUMENT, "q.head_dim");
  bad = q, bad.head_stride = -D;
  REFUSED(posenc_rope_rotate(s, &bad, NULL, &at, NULL), POSENC_ERR_ARGUMENT, "q.head_stride");
  bad = q, bad.data = (char*)x + 2;
  REFUSED(posenc_rope_rotate(s, &bad, NULL, &at, NULL), POSENC_ERR_ARGUMENT, "q.data is not aligned");
  bad = q, bad.dtype = 7;
  REFUSED(posenc_rope_rotate(s, &bad, NULL, &at, NULL), POSENC_ERR_ARGUMENT, "q.dtype 7");
  bad = q, bad.head_stride = D / 2;  /* heads overlap by half: rotated twice */
  REFUSED(posenc_rope_rotate(s, &bad, NULL, &at, NULL), POSENC_ERR_ARGUMENT, "share elements");
  bad = q, bad.token_stride = 0;  /* every token the same memory */
  REFUSED(posenc_rope_rotate(s, &bad, NULL, &at, NULL), POSENC_ERR_ARGUMENT, "share elements");
  REFUSED(posenc_rope_rotate(s, &q, &q, &at, NULL), POSENC_ERR_ARGUMENT, "q and k share");
  bad = k, bad.data = x + D;  /* k's first head is q's second */
  REFUSED(posenc_rope_rotate(s, &q, &bad, &at, NULL), POSENC_ERR_ARGUMENT, "q and k share");
  /* Fused QKV rows [T, 2 heads q | 1 head k]: heads of one buffer, accepted. */
  bad = q, bad.token_stride = 3 * D, bad.tokens = 2;
  k = bad, k.heads = 1, k.data = x + 2 * D;
  OK(posenc_rope_rotate(s, &bad, &k, &at, NULL));
  posenc_rope_options_init(&o);
  o.layout = 9;
  REFUSED(posenc_rope_rotate(s, &q, NULL, &at, &o), POSENC_ERR_ARGUMENT, "options->layout 9");
  posenc_rope_options_init(&o);
  o.direction = 2;
  REFUSED(posenc_rope_rotate(s, &q, NULL, &at, &o), POSENC_ERR_ARGUMENT, "direction");
  posenc_rope_options_init(&o);
  o.threads = -1;
  REFUSED(posenc_rope_rotate(s, &q, NULL, &at, &o), POSENC_ERR_ARGUMENT, "threads");
  posenc_rope_options_init(&o);
  o.struct_size = 0;
  REFUSED(posenc_rope_rotate(s, &q, NULL, &at, &o), POSENC_ERR_ARGUMENT, "struct_size 0");
  ids.kind = 5;
  REFUSED(posenc_rope_rotate(s, &q, NULL, &ids, NULL), POSENC_ERR_ARGUMENT, "positions.kind 5");
  ids.kind = POSENC_IDS_INT64;
  REFUSED(posenc_rope_rotate(s, &q, NULL, &ids, NULL), POSENC_ERR_ARGUMENT, "positions.ids is NULL");
  ids.ids = (const char*)huge_ids + 4;
  REFUSED(posenc_rope_rotate(s, &q, NULL, &ids, NULL), POSENC_ERR_ARGUMENT, "positions.ids is not aligned");
  ids.ids = huge_ids, ids.axes = 4;
  REFUSED(posenc_rope_rotate(s, &q, NULL, &ids, NULL), POSENC_ERR_ARGUMENT, "positions.axes");
  ids.axes = 1;
  REFUSED(posenc_rope_rotate(s, &q, NULL, &ids, NULL), POSENC_ERR_VALUE, "9223372036854775807");
  ids.kind = POSENC_IDS_INT32, ids.ids = negative;
  REFUSED(posenc_rope_rotate(s, &q, NULL, &ids, NULL), POSENC_ERR_VALUE, "-7");
  at.offset = INT64_MIN;
  REFUSED(posenc_rope_rotate(s, &q, NULL, &at, NULL), POSENC_ERR_ARGUMENT, "positions.offset");
  REFUSED(posenc_rope_shift_keys(s, &q, INT64_MIN, NULL), POSENC_ERR_ARGUMENT, "delta");
  REFUSED(posenc_rope_shift_keys(NULL, &q, 1, NULL), POSENC_ERR_ARGUMENT, "schedule is NULL");
  posenc_schedule_free(s);
}

static void attention_and_encodings(void) {
  enum { T = 4, H = 2, D = 8 };
  static float q[T * H * D], k[T * H * D], v[T * H * D], out[T * H * D];
  posenc_tensor qt = bshd_f32(q, 1, T, H, D), kt = bshd_f32(k, 1, T, H, D), vt = bshd_f32(v, 1, T, H, D),
                ot = bshd_f32(out, 1, T, H, D);
  posenc_attention_params p;
  double slopes[4];
  int64_t count = 0;
  int32_t bucket = 0;
  float row[8];
  double position = 1.0;
  unsigned char bigger[sizeof(posenc_attention_params) + 8];
  posenc_attention_params_init(&p);
  OK(posenc_attention_forward(&p, &qt, &kt, &vt, &ot));
  REFUSED(posenc_attention_forward(NULL, &qt, &kt, &vt, &ot), POSENC_ERR_ARGUMENT, "params is NULL");
  REFUSED(posenc_attention_forward(&p, &qt, &kt, &vt, &qt), POSENC_ERR_ARGUMENT, "out shares elements with q");
  p.positions = 9;
  REFUSED(posenc_attention_forward(&p, &qt, &kt, &vt, &ot), POSENC_ERR_ARGUMENT, "params->positions 9");
  p.positions = POSENC_POS_ROPE;
  REFUSED(posenc_attention_forward(&p, &qt, &kt, &vt, &ot), POSENC_ERR_ARGUMENT, "params->rope");
  p.positions = POSENC_POS_ALIBI;
  REFUSED(posenc_attention_forward(&p, &qt, &kt, &vt, &ot), POSENC_ERR_ARGUMENT, "alibi_slopes");
  p.positions = POSENC_POS_T5;
  REFUSED(posenc_attention_forward(&p, &qt, &kt, &vt, &ot), POSENC_ERR_ARGUMENT, "t5_table");
  posenc_attention_params_init(&p);
  p.causal = 2;
  REFUSED(posenc_attention_forward(&p, &qt, &kt, &vt, &ot), POSENC_ERR_ARGUMENT, "params->causal");
  posenc_attention_params_init(&p);
  p.scale = -1;
  REFUSED(posenc_attention_forward(&p, &qt, &kt, &vt, &ot), POSENC_ERR_VALUE, "scale");
  posenc_attention_params_init(&p);
  p.lse = k;  /* lse written over k */
  REFUSED(posenc_attention_forward(&p, &qt, &kt, &vt, &ot), POSENC_ERR_ARGUMENT, "lse overlaps k");
  /* A newer header's longer struct: accepted with its unknown tail zero, refused otherwise. */
  posenc_attention_params_init(&p);
  memset(bigger, 0, sizeof bigger);
  p.struct_size = sizeof bigger;
  memcpy(bigger, &p, sizeof p);
  OK(posenc_attention_forward((const posenc_attention_params*)(const void*)bigger, &qt, &kt, &vt, &ot));
  bigger[sizeof p + 3] = 1;
  REFUSED(posenc_attention_forward((const posenc_attention_params*)(const void*)bigger, &qt, &kt, &vt, &ot),
          POSENC_ERR_ARGUMENT, "does not know");
  REFUSED(posenc_alibi_slopes(0, slopes, 4, &count), POSENC_ERR_ARGUMENT, "num_heads");
  REFUSED(posenc_alibi_slopes(-3, slopes, 4, &count), POSENC_ERR_ARGUMENT, "got -3");
  REFUSED(posenc_alibi_slopes(INT32_MAX, slopes, 4, &count), POSENC_ERR_ARGUMENT, "num_heads");
  REFUSED(posenc_alibi_slopes(8, slopes, 4, &count), POSENC_ERR_BUFFER, "capacity is 4");
  CHECK(count == 8);
  REFUSED(posenc_t5_bucket(3, 1, 128, 1, &bucket), POSENC_ERR_VALUE, "1");
  REFUSED(posenc_t5_bucket(3, 32, 128, 5, &bucket), POSENC_ERR_ARGUMENT, "bidirectional");
  REFUSED(posenc_t5_bucket(INT64_MIN, 32, 128, 1, &bucket), POSENC_ERR_ARGUMENT, "relative_position");
  REFUSED(posenc_t5_bucket(3, 32, 128, 1, NULL), POSENC_ERR_ARGUMENT, "bucket is NULL");
  REFUSED(posenc_sinusoidal_rows(8, 0, 0, 10000, &position, 1, row, 4), POSENC_ERR_BUFFER, "count x dim = 8");
  REFUSED(posenc_sinusoidal_rows(8, 3, 0, 10000, &position, 1, row, 8), POSENC_ERR_ARGUMENT, "layout");
  REFUSED(posenc_sinusoidal_rows(8, 0, 0, -1, &position, 1, row, 8), POSENC_ERR_VALUE, "base");
  REFUSED(posenc_sinusoidal_rows(-8, 0, 0, 10000, &position, 1, row, 8), POSENC_ERR_ARGUMENT, "dim");
  REFUSED(posenc_sinusoidal_rows(8, 0, 0, 10000, NULL, 1, row, 8), POSENC_ERR_ARGUMENT, "positions is NULL");
  position = NAN;
  REFUSED(posenc_sinusoidal_rows(8, 0, 0, 10000, &position, 1, row, 8), POSENC_ERR_VALUE, "positions[0] = nan");
}

int main(void) {
  configs();
  getters();
  views();
  attention_and_encodings();
  /* The last error stays readable after successful calls. */
  CHECK(strstr(posenc_last_error(), "positions[0]") != NULL);
  return finish("capi hostile (every argument refused with its name)");
}
