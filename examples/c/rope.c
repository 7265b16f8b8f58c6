/* posenc's C ABI: read a model's config.json, print its RoPE schedule, rotate q and k in place.
 *   cc -std=c99 rope.c $(pkg-config --cflags --libs posenc-c) -o rope && ./rope config.json */
#include <posenc.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char** argv) {
  enum { TOKENS = 4, HEADS = 8, KV_HEADS = 2 };
  static char text[1 << 20];
  FILE* f = argc > 1 ? fopen(argv[1], "rb") : NULL;
  size_t length = f ? fread(text, 1, sizeof text, f) : 0;
  posenc_schedule* s = NULL;
  posenc_layer_info info = {0};
  if (f) fclose(f);
  info.struct_size = sizeof info; /* the fields this program knows */
  /* Layer 0 of the model, as `posenc spec` reads it. */
  if (posenc_schedule_from_config(text, (int64_t)length, 0, 0, &s) != POSENC_OK ||
      posenc_schedule_layer(s, &info) != POSENC_OK) {
    fprintf(stderr, "posenc: %s\n", posenc_last_error());
    return 1;
  }
  printf("%s layer 0: %s RoPE, %s pairs, %d of %d channels, attention factor %g\n", info.model_type,
         info.rope_type, info.pairing, info.rotary_dim, info.head_dim, info.attention_factor);
  if (info.rope) {
    /* q [1, TOKENS, HEADS, head_dim] and k [1, TOKENS, KV_HEADS, head_dim], f32, dense. */
    int64_t d = info.head_dim;
    float* q = calloc((size_t)(TOKENS * HEADS * d), sizeof(float));
    float* k = calloc((size_t)(TOKENS * KV_HEADS * d), sizeof(float));
    /* Rotated channels start at rotary_offset (DeepSeek MLA: after the NoPE part), else at 0. */
    int64_t r = d - info.rotary_offset;
    posenc_tensor qv = {q + info.rotary_offset, POSENC_DTYPE_F32, 1, TOKENS, HEADS, r, TOKENS * HEADS * d, HEADS * d, d};
    posenc_tensor kv = {k + info.rotary_offset, POSENC_DTYPE_F32, 1, TOKENS, KV_HEADS, r, TOKENS * KV_HEADS * d,
                        KV_HEADS * d, d};
    posenc_positions at = {POSENC_IDS_IMPLICIT, NULL, 1, 0, 100, 0}; /* a decode step: t + 100 */
    q[info.rotary_offset] = 1.0f;
    if (posenc_rope_rotate(s, &qv, &kv, &at, NULL) != POSENC_OK) fprintf(stderr, "posenc: %s\n", posenc_last_error());
    printf("first rotated channel of q at position 100: %g\n", q[info.rotary_offset]);
    free(q);
    free(k);
  }
  posenc_schedule_free(s);
  return 0;
}
