/* The C ABI's test programs share these checks: a failed check prints its line and counts, the
 * program exits non-zero when any failed (CTest reads the exit status). C99, no C++. */
#ifndef POSENC_CAPI_CHECK_H
#define POSENC_CAPI_CHECK_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "posenc.h"

extern int failures; /* failed checks so far (capi_check.c) */

#define CHECK(cond)                                                                 \
  do {                                                                              \
    if (!(cond)) {                                                                  \
      fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond);      \
      ++failures;                                                                   \
    }                                                                               \
  } while (0)

/* A call that must succeed. */
#define OK(call) expect_status(__FILE__, __LINE__, #call, (call), POSENC_OK, NULL)
/* A call that must fail with `status` and a message that names `needle`. */
#define REFUSED(call, status, needle) expect_status(__FILE__, __LINE__, #call, (call), (status), (needle))

int expect_status(const char* file, int line, const char* text, posenc_status got, posenc_status want,
                  const char* needle);

/* |got - want| <= tolerance * max(1, |want|). */
#define NEAR(got, want, tolerance) CHECK(fabs((double)(got) - (double)(want)) <= (tolerance) * fmax(1.0, fabs((double)(want))))
/* Relative to |want|: for small values (inv_freq of 3e-7). */
#define REL(got, want, tolerance) CHECK(fabs((double)(got) - (double)(want)) <= (tolerance) * fabs((double)(want)))

/* The whole file as text (malloc'd, *length bytes); exits when it cannot be read. */
char* read_text(const char* path, int64_t* length);
/* A schedule from tests/data/real-configs/<name>, layer `layer` (-1: by type, NULL type). */
posenc_schedule* real_config(const char* name, int64_t layer);
/* A dense [batch, tokens, heads, head_dim] f32 view. */
posenc_tensor bshd_f32(float* data, int64_t batch, int64_t tokens, int64_t heads, int64_t head_dim);
posenc_positions implicit_positions(int64_t offset);
/* Deterministic values in [-1, 1). */
void fill(float* x, int64_t n, unsigned seed);
/* The program's exit status: says how many checks failed, or that every check of `what` passed. */
int finish(const char* what);

#endif
