/* The shared checks of the C ABI's test programs (capi_check.h). */
#include "capi_check.h"

int failures = 0;

int expect_status(const char* file, int line, const char* text, posenc_status got, posenc_status want,
                         const char* needle) {
  const char* message = posenc_last_error();
  if (got != want) {
    fprintf(stderr, "%s:%d: %s returned %d, expected %d (%s)\n", file, line, text, (int)got, (int)want,
            got == POSENC_OK ? "no error" : message);
    ++failures;
    return 0;
  }
  if (needle && (!message || !strstr(message, needle))) {
    fprintf(stderr, "%s:%d: %s: error text \"%s\" does not name \"%s\"\n", file, line, text, message, needle);
    ++failures;
    return 0;
  }
  return 1;
}

/* The whole file as text (malloc'd, *length bytes); exits when it cannot be read. */
char* read_text(const char* path, int64_t* length) {
  FILE* f = fopen(path, "rb");
  char* text;
  long size;
  if (!f || fseek(f, 0, SEEK_END) != 0 || (size = ftell(f)) < 0 || fseek(f, 0, SEEK_SET) != 0) {
    fprintf(stderr, "cannot read %s\n", path);
    exit(2);
  }
  text = (char*)malloc((size_t)size + 1);
  if (!text || fread(text, 1, (size_t)size, f) != (size_t)size) {
    fprintf(stderr, "cannot read %s\n", path);
    exit(2);
  }
  fclose(f);
  text[size] = '\0';
  *length = (int64_t)size;
  return text;
}

/* A schedule from tests/data/real-configs/<name>, layer `layer` (-1: by type, NULL type). */
posenc_schedule* real_config(const char* name, int64_t layer) {
  char path[1024];
  int64_t length = 0;
  char* text;
  posenc_schedule* s = NULL;
  snprintf(path, sizeof path, "%s/real-configs/%s", POSENC_REFERENCE_DIR, name);
  text = read_text(path, &length);
  if (layer >= 0) OK(posenc_schedule_from_config(text, length, 0, layer, &s));
  else OK(posenc_schedule_from_config_type(text, length, 0, NULL, &s));
  free(text);
  if (!s) {
    fprintf(stderr, "no schedule from %s\n", name);
    exit(2);
  }
  return s;
}

/* A dense [batch, tokens, heads, head_dim] f32 view. */
posenc_tensor bshd_f32(float* data, int64_t batch, int64_t tokens, int64_t heads, int64_t head_dim) {
  posenc_tensor t;
  memset(&t, 0, sizeof t);
  t.data = data;
  t.dtype = POSENC_DTYPE_F32;
  t.batch = batch;
  t.tokens = tokens;
  t.heads = heads;
  t.head_dim = head_dim;
  t.head_stride = head_dim;
  t.token_stride = heads * head_dim;
  t.batch_stride = tokens * heads * head_dim;
  return t;
}

posenc_positions implicit_positions(int64_t offset) {
  posenc_positions p;
  memset(&p, 0, sizeof p);
  p.kind = POSENC_IDS_IMPLICIT;
  p.offset = offset;
  return p;
}

/* Deterministic values in [-1, 1). */
void fill(float* x, int64_t n, unsigned seed) {
  int64_t i;
  for (i = 0; i < n; ++i) {
    seed = seed * 1664525u + 1013904223u;
    x[i] = (float)((seed >> 8) & 0xffff) / 32768.0f - 1.0f;
  }
}

int finish(const char* what) {
  if (failures) fprintf(stderr, "%s: %d checks failed\n", what, failures);
  else printf("%s: every check passed\n", what);
  return failures ? 1 : 0;
}
