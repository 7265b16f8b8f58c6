/* posenc.h: posenc's stable C ABI (C99; C, Rust, Go, Zig and C++ callers alike).
 *
 * Every function returns a posenc_status: POSENC_OK (0) or an error, whose text
 * posenc_last_error() returns (thread-local: the last failed call of the calling thread; a call
 * that succeeds leaves it as it was). No C++ exception crosses this ABI, and every argument is
 * checked before memory is touched: null pointers, negative, zero or absurd sizes, unknown enum
 * values, views whose elements overlap.
 *
 * Handles are opaque and owned by the caller (posenc_schedule_free). A handle may be read by
 * several threads at once; posenc_schedule_update changes it and needs exclusive access.
 * Strings a handle returns live as long as the handle.
 *
 * Versioning: POSENC_ABI_VERSION is the ABI major of this header, posenc_abi_version() that of
 * the library (libposenc_c.so.<major>, symbols versioned POSENC_<major>). Within a major,
 * functions are only added and the structs that begin with `struct_size` only grow at their
 * end: set struct_size = sizeof(the struct) (the *_init functions do) and an older library
 * reads the fields it knows, refusing newer fields that are not zero. Documented in
 * docs/c-abi.md. */
#ifndef POSENC_H
#define POSENC_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define POSENC_ABI_VERSION 1

#if defined(__GNUC__) && !defined(POSENC_STATIC)
#define POSENC_API __attribute__((visibility("default")))
#else
#define POSENC_API
#endif

typedef int32_t posenc_status;
enum {
  POSENC_OK = 0,
  POSENC_ERR_ARGUMENT = 1,    /* a null pointer, a size or an enum value out of range, overlap */
  POSENC_ERR_VALUE = 2,       /* posenc refused a value: a config key, a position, a shape */
  POSENC_ERR_BUFFER = 3,      /* the output buffer is too small: *count says what is needed */
  POSENC_ERR_MEMORY = 4,      /* out of memory */
  POSENC_ERR_INTERNAL = 5     /* a bug: please report the text */
};

/* Storage of q, k, v, out (math is float32 always; bf16/f16 stores round to nearest even). */
enum { POSENC_DTYPE_F32 = 0, POSENC_DTYPE_BF16 = 1, POSENC_DTYPE_F16 = 2 };

/* Channel pairing (rope_apply.h): MODEL = the selected layer's own (half-split when unknown). */
enum {
  POSENC_LAYOUT_MODEL = 0,
  POSENC_LAYOUT_HALF_SPLIT = 1,  /* (j, j + r/2): NeoX, Llama, HF rotate_half */
  POSENC_LAYOUT_INTERLEAVED = 2, /* (2j, 2j+1): GPT-J, Meta, Cohere */
  POSENC_LAYOUT_DEEPSEEK_V3 = 3  /* reads pairs, writes half-split order */
};

/* What a layer's attention attends to (model_spec.h AttentionKind). */
enum {
  POSENC_ATTENTION_FULL = 0, POSENC_ATTENTION_SLIDING = 1, POSENC_ATTENTION_CHUNKED = 2,
  POSENC_ATTENTION_LINEAR = 3, POSENC_ATTENTION_CROSS = 4, POSENC_ATTENTION_NONE = 5
};

/* posenc_schedule_from_config flags. */
enum {
  POSENC_CONFIG_LENIENT = 1,       /* unknown keys in the rope dict: a warning, not an error */
  POSENC_CONFIG_HF_COMPATIBLE = 2, /* ignore the keys HF ignores (DBRX, MiniMax-M2) */
  POSENC_CONFIG_HF_FLOAT32 = 4     /* HF's float32 arithmetic for schedules and angles */
};

/* ---- errors and version ------------------------------------------------------------------ */

POSENC_API int32_t posenc_abi_version(void);
/* The text of the calling thread's last error ("" when none); valid until its next failure. */
POSENC_API const char* posenc_last_error(void);

/* ---- a schedule: one layer of a config.json ---------------------------------------------- */

typedef struct posenc_schedule posenc_schedule;

/* Parses config.json text (json[0 .. length), at most 16 MiB, not NUL-terminated necessarily)
 * and selects one layer: layer_index into the model's layers (needs a family posenc knows, see
 * `posenc spec`) ... */
POSENC_API posenc_status posenc_schedule_from_config(const char* json, int64_t length, uint32_t flags,
                                                     int64_t layer_index, posenc_schedule** out);
/* ... or a layer type ("full_attention", "sliding_attention"; NULL or "": full_attention if
 * present, else the first type with RoPE). */
POSENC_API posenc_status posenc_schedule_from_config_type(const char* json, int64_t length, uint32_t flags,
                                                          const char* layer_type, posenc_schedule** out);
/* A new handle with the schedule at sequence length seq_len >= 1 (dynamic NTK, LongRoPE:
 * compute_schedule(params, seq_len); other types: unchanged), its runtime state fresh. */
POSENC_API posenc_status posenc_schedule_at(const posenc_schedule* schedule, int64_t seq_len,
                                            posenc_schedule** out);
/* HF's runtime rule (rope_runtime.h): before a forward call whose largest position id is
 * max_position_id, moves the handle to the schedule that call rotates with (dynamic NTK grows
 * and resets, LongRoPE switches factor sets). Not thread-safe on the same handle. */
POSENC_API posenc_status posenc_schedule_update(posenc_schedule* schedule, int64_t max_position_id);
POSENC_API void posenc_schedule_free(posenc_schedule* schedule); /* NULL: nothing */

/* inv_freq (float32, radians per token, one per rotated channel pair) into out[0 .. capacity):
 * *count = the number there is (0 for a NoPE layer). out NULL with capacity 0 asks only the
 * count (POSENC_OK); otherwise POSENC_ERR_BUFFER when capacity is less (*count still set). */
POSENC_API posenc_status posenc_schedule_inv_freq(const posenc_schedule* schedule, float* out, int64_t capacity,
                                                  int64_t* count);
/* M-RoPE: the position axis (0 T, 1 H, 2 W) each frequency reads; *count 0 when not M-RoPE. */
POSENC_API posenc_status posenc_schedule_axis_of_freq(const posenc_schedule* schedule, uint8_t* out,
                                                      int64_t capacity, int64_t* count);
POSENC_API posenc_status posenc_schedule_attention_factor(const posenc_schedule* schedule, double* out);
POSENC_API posenc_status posenc_schedule_rotary_dim(const posenc_schedule* schedule, int32_t* out);
POSENC_API posenc_status posenc_schedule_head_dim(const posenc_schedule* schedule, int32_t* out);

/* Everything else about the selected layer and its schedule (`posenc spec`'s facts).
 * Set struct_size = sizeof(posenc_layer_info) before the call. */
typedef struct posenc_layer_info {
  uint32_t struct_size;
  int32_t family_known;      /* 0: per-layer facts below are defaults (unknown model family) */
  int32_t index;             /* layer index; -1 when selected by type and the family is unknown */
  int32_t rope;              /* 1 rotates, 0 NoPE */
  int32_t layout;            /* POSENC_LAYOUT_*: the pairs q.k sees and the output order */
  int32_t head_dim;          /* q/k channels per head */
  int32_t rotary_offset;     /* first rotated channel (DeepSeek MLA: qk_nope_head_dim) */
  int32_t rotary_dim;        /* rotated channels from rotary_offset on (0 for NoPE) */
  int32_t attention;         /* POSENC_ATTENTION_* */
  int64_t window;            /* sliding window or chunk size; -1 none */
  double softmax_scale;      /* on q.k, multiplier included */
  double softmax_scale_multiplier; /* DeepSeek mscale^2; 1 when none */
  int32_t query_scale_rule;  /* 0 none, 1 Llama 4 temperature, 2 llama_4_scaling_beta, 3 Qwen-1 logN */
  double query_scale;        /* attn_scale or beta */
  double query_floor_scale;  /* floor_scale or original_max_position_embeddings */
  double attention_factor;   /* on cos and sin (logits get its square) */
  double base;               /* the theta in force (NTK raises it) */
  int64_t seq_len;           /* the length the schedule was computed for; -1: at init */
  int32_t uses_long_factors; /* LongRoPE: long_factor in force */
  int32_t mrope_section[3];  /* M-RoPE sections (T, H, W); zeros when not M-RoPE */
  const char* model_type;    /* strings owned by the handle */
  const char* layer_type;
  const char* rope_type;     /* "default", "yarn", ...; "" for NoPE */
  const char* pairing;       /* "half_split", "interleaved" */
  const char* output_order;  /* "half_split" for deepseek_v3, else "" */
  const char* attention_name;
  const char* qk_norm;       /* "none", "before_rope", "l2_after_rope" */
  const char* query_scale_name;
  const char* mrope_style;   /* "contiguous", "interleaved", "xdrope" (no axis map: 1-D positions), "" */
} posenc_layer_info;
POSENC_API posenc_status posenc_schedule_layer(const posenc_schedule* schedule, posenc_layer_info* out);
/* The layer's query multiplier at absolute position p (1 when the layer has none). */
POSENC_API posenc_status posenc_schedule_query_scale_at(const posenc_schedule* schedule, int64_t position,
                                                        double* out);

/* ---- views and positions ----------------------------------------------------------------- */

/* q or k [batch, tokens, heads, head_dim]: element (b, t, h, c) at
 * data + b*batch_stride + t*token_stride + h*head_stride + c (strides in elements, >= 0,
 * channels contiguous). No two (b, t, h) rows may share an element: refused. */
typedef struct posenc_tensor {
  void* data;
  int32_t dtype; /* POSENC_DTYPE_* */
  int64_t batch, tokens, heads, head_dim;
  int64_t batch_stride, token_stride, head_stride;
} posenc_tensor;

enum { POSENC_IDS_IMPLICIT = 0, POSENC_IDS_INT32 = 1, POSENC_IDS_INT64 = 2 };

/* Position of token t of batch row b on axis a:
 *   POSENC_IDS_IMPLICIT: t + offset (offset: the KV-cache length of a decode step)
 *   INT32/INT64: ids[a*axis_stride + (shared_across_batch ? 0 : b*tokens) + t] + offset,
 *   ids holding what that formula reads. axes 1 (text) or 3 (M-RoPE T, H, W). */
typedef struct posenc_positions {
  int32_t kind; /* POSENC_IDS_* */
  const void* ids;
  int32_t axes;
  int64_t axis_stride;
  int64_t offset;
  int32_t shared_across_batch;
} posenc_positions;

/* ---- RoPE in place ----------------------------------------------------------------------- */

typedef struct posenc_rope_options {
  uint32_t struct_size;
  int32_t layout;    /* POSENC_LAYOUT_*; MODEL: the layer's */
  int32_t direction; /* +1 rotate, -1 the transpose (inverse when attention factor is 1) */
  int32_t threads;   /* 0: every hardware thread */
} posenc_rope_options;
POSENC_API void posenc_rope_options_init(posenc_rope_options* options);

/* Rotates channels [0, rotary_dim) of every head of q, and of k when not NULL, in place with
 * the schedule's inv_freq, attention factor and M-RoPE axes (for MLA pass data + rotary_offset).
 * q and k may be heads of one buffer (fused QKV) but no element of both. options NULL:
 * defaults. */
POSENC_API posenc_status posenc_rope_rotate(const posenc_schedule* schedule, const posenc_tensor* q,
                                            const posenc_tensor* k, const posenc_positions* positions,
                                            const posenc_rope_options* options);
/* Moves cached keys by delta positions (StreamingLLM-style eviction; either sign): a key rotated
 * at p becomes the key rotated at p + delta (within float32 rounding). The attention factor is
 * applied once, at the first rotation, and not again. options->direction is ignored. */
POSENC_API posenc_status posenc_rope_shift_keys(const posenc_schedule* schedule, const posenc_tensor* k,
                                                int64_t delta, const posenc_rope_options* options);

/* ---- fused attention: softmax(q k^T * scale + bias + mask) v ----------------------------- */

enum { POSENC_POS_NONE = 0, POSENC_POS_ROPE = 1, POSENC_POS_ALIBI = 2, POSENC_POS_T5 = 3 };
enum { POSENC_ALIBI_CAUSAL = 0, POSENC_ALIBI_SYMMETRIC = 1 };
enum {
  POSENC_REMAP_NONE = 0,
  POSENC_REMAP_SELF_EXTEND = 1,
  POSENC_REMAP_RE_ROPE = 2,
  POSENC_REMAP_LEAKY_RE_ROPE = 3,
  POSENC_REMAP_DUAL_CHUNK = 4
};

typedef struct posenc_attention_params {
  uint32_t struct_size;
  double scale;                 /* 0: 1/sqrt(head_dim) */
  int32_t causal;               /* key j visible to query index p when j <= p */
  int64_t past;                 /* query i sits at key index past + i; -1: T - S */
  const uint8_t* key_padding;   /* [B, T], 0 = padding; NULL: none */
  int64_t sliding_window;       /* 0: none */
  int64_t chunk;                /* 0: none (Llama 4 chunked attention) */
  int32_t positions;            /* POSENC_POS_NONE / ROPE / ALIBI / T5 */
  posenc_positions q_positions, k_positions;
  const posenc_schedule* rope;  /* ROPE: q and k rotated as loaded (not modified) */
  int32_t rope_layout;          /* POSENC_LAYOUT_*; MODEL: the layer's */
  const double* alibi_slopes;   /* ALIBI: [Hq] (posenc_alibi_slopes) */
  int32_t alibi_mode;           /* POSENC_ALIBI_* */
  const float* t5_table;        /* T5: [num_buckets][Hq], HF's embedding weight */
  int32_t t5_num_buckets, t5_max_distance, t5_bidirectional;
  int32_t threads;              /* 0: every hardware thread */
  float* lse;                   /* optional [B, Hq, S] log-sum-exp per query row; NULL: none */
  /* RoPE's distance remapped at inference (attention.h), Delta = query - key position, w window:
   * Delta < w unchanged; beyond, SELF_EXTEND floor(q/G) - floor(k/G) + w - floor(w/G), RE_ROPE
   * w, LEAKY_RE_ROPE w + (Delta - w) / leak. Added after lse: an older caller's shorter struct
   * gets NONE. */
  int32_t remap;                /* POSENC_REMAP_* */
  int64_t remap_window;         /* w >= 0 */
  int64_t remap_group;          /* G >= 1 (SELF_EXTEND) */
  double remap_leak;            /* k > 0 (LEAKY_RE_ROPE) */
  /* DUAL_CHUNK (Dual Chunk Attention, Qwen2.5-1M's dual_chunk_attention_config), c = chunk_size -
   * local_size, chunk n(p) = floor(p / c): a key in the query's chunk keeps Delta; one chunk back
   * min(q mod c + c, chunk_size) - k mod c; further back min(2c - 1, chunk_size) - k mod c.
   * Added after remap_leak: an older caller's shorter struct gets 0, refused for DUAL_CHUNK. */
  int64_t remap_chunk_size;     /* > remap_local_size (DUAL_CHUNK) */
  int64_t remap_local_size;     /* > 0 (DUAL_CHUNK) */
} posenc_attention_params;
/* Defaults: causal, past -1, no positions, T5 32 buckets / 128 / bidirectional, no remap (G 1). */
POSENC_API void posenc_attention_params_init(posenc_attention_params* params);

/* q [B,S,Hq,D], k and v [B,T,Hk,D] (Hq a multiple of Hk: GQA), out [B,S,Hq,D] written; out may
 * not share an element with q, k or v. A query that sees no key gets zeros. */
POSENC_API posenc_status posenc_attention_forward(const posenc_attention_params* params, const posenc_tensor* q,
                                                  const posenc_tensor* k, const posenc_tensor* v,
                                                  const posenc_tensor* out);

/* ---- the other encodings ----------------------------------------------------------------- */

/* ALiBi slopes of num_heads heads (the paper's rule) into out[0 .. capacity); *count = num_heads. */
POSENC_API posenc_status posenc_alibi_slopes(int32_t num_heads, double* out, int64_t capacity, int64_t* count);
/* T5's bucket of relative_position = key_position - query_position. */
POSENC_API posenc_status posenc_t5_bucket(int64_t relative_position, int32_t num_buckets, int32_t max_distance,
                                          int32_t bidirectional, int32_t* bucket);

enum { POSENC_SINUSOIDAL_INTERLEAVED = 0, POSENC_SINUSOIDAL_HALVES = 1 };
enum { POSENC_SINUSOIDAL_VASWANI = 0, POSENC_SINUSOIDAL_FAIRSEQ = 1 };
/* Rows of the sinusoidal table (sinusoidal.h) for count positions: out [count][dim] float32,
 * capacity in floats. */
POSENC_API posenc_status posenc_sinusoidal_rows(int32_t dim, int32_t layout, int32_t freqs, double base,
                                                const double* positions, int64_t count, float* out,
                                                int64_t capacity);

#ifdef __cplusplus
}
#endif

#endif /* POSENC_H */
