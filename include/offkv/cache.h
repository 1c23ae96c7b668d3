/* offkv — the sequence cache and update_and_attend.
 *
 * A cache holds the keys and values of one sequence for every attention
 * layer of a model, off the model's graph.  Each layer stores K and V as
 * [n_kv_heads][rows][head_dim] in the cache's storage type.
 *
 *   - A full-attention ("flat") layer, window 0, keeps position p in row p.
 *     It starts with initial_capacity rows and doubles toward capacity when a
 *     step needs more, copying the rows it holds.
 *   - A sliding-window ("ring") layer, window W > 0, holds
 *     min(W + max_write - 1, capacity) rows from creation, keeps position p in
 *     row p mod rows and never grows.
 *
 * All layers share one logical length.  Work on a cache goes in steps: a step
 * writes n_tokens consecutive positions into every layer and attends that
 * step's queries over what the cache holds (okv_step_begin, then
 * okv_update_and_attend once per layer, then okv_step_commit).
 *
 * Thread safety: a cache may be shared by several contexts (for example a
 * prefill and a decode context, or a registry entry), but calls on one cache
 * are the caller's to serialize.  At most one step is open on a cache at a
 * time; the cache itself enforces that with OKV_ERR_BUSY.  Reference counting
 * (okv_cache_retain / okv_cache_release) is not atomic either. */
#ifndef OFFKV_CACHE_H
#define OFFKV_CACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "offkv/status.h"
#include "offkv/threads.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Storage types.  OKV_Q8_0 is ggml's Q8_0 block format: each run of 32
 * values of a head's row is one f16 scale and 32 int8 (34 bytes, 53% of
 * f16 when head_dim is a multiple of 32; a shorter last run is padded with
 * zeros).  Rows are quantized when written and attended as they are.  K/V
 * given to okv_update_and_attend are OKV_F32 or OKV_F16 whatever the storage
 * type. */
typedef enum okv_dtype { OKV_F32 = 0, OKV_F16 = 1, OKV_Q8_0 = 2 } okv_dtype;

/* The shape of one attention layer's K/V.  window 0 = full attention; a
 * window W > 0 lets a query at p see keys p-W+1 .. p.  kv_from 0: the layer
 * has its own K/V; kv_from = d + 1: it stores nothing and attends the rows
 * of layer d (cross-layer K/V sharing, as in YOCO or Gemma 3n), which must
 * come earlier, have its own K/V, and the same n_kv_heads, head_dim and
 * window. */
typedef struct okv_layer_geometry {
    int32_t n_kv_heads, head_dim, window;
    int32_t kv_from;
} okv_layer_geometry;

typedef struct okv_cache_config {
    int32_t capacity;          /* most positions a sequence holds */
    int32_t initial_capacity;  /* rows a flat layer starts with (0: none until first write); doubles toward capacity */
    int32_t max_write;         /* most tokens one step writes; a ring layer holds window + max_write - 1 rows */
    okv_dtype dtype;           /* storage type */
} okv_cache_config;

typedef struct okv_cache okv_cache;

/* Creates an empty cache (length 0) for n_layers layers of the given
 * geometries.  The layers array is copied.  Invalid configurations
 * (n_layers < 1, NULL layers or cfg, n_kv_heads < 1, head_dim outside
 * 1..512, window < 0, capacity < 1, max_write < 1, an unknown dtype, a
 * kv_from that names no earlier owning layer of the same geometry) are OKV_ERR_INVALID naming the layer; failing storage is OKV_ERR_NOMEM.  Returns NULL on error.
 * The caller holds one reference and drops it with okv_cache_release. */
okv_cache *okv_cache_create(const okv_layer_geometry *layers, int32_t n_layers,
                            const okv_cache_config *cfg, okv_error *err);

/* Adds a reference to c and returns c (NULL stays NULL). */
okv_cache *okv_cache_retain(okv_cache *c);

/* Drops a reference; the last one frees the cache.  Storage still used by an
 * open step stays alive until that step ends.  NULL is a no-op. */
void okv_cache_release(okv_cache *c);

/* The logical length: positions 0 .. length-1 are in the sequence. 0 for NULL. */
int32_t okv_cache_length(const okv_cache *c);

/* Number of layers, and the geometry / config the cache was created with
 * (initial_capacity as the cache took it: clamped to 0 .. capacity).
 * okv_cache_layer_geometry returns false for a bad layer index or NULL. */
int32_t okv_cache_n_layers(const okv_cache *c);
bool okv_cache_layer_geometry(const okv_cache *c, int32_t layer, okv_layer_geometry *out);
bool okv_cache_get_config(const okv_cache *c, okv_cache_config *out);

/* Rows allocated now in the given layer (K and V each have this many per kv
 * head; 0 for a layer that shares another's K/V); -1 for a bad layer index
 * or NULL. */
int32_t okv_cache_rows(const okv_cache *c, int32_t layer);

/* Bytes of K/V storage one layer holds now: 2 * n_kv_heads * rows * the
 * bytes of a head_dim row in the storage type (0 for a sharing layer, a bad
 * index or NULL). */
size_t okv_cache_layer_bytes(const okv_cache *c, int32_t layer);

/* Bytes of K/V storage held now: the sum of okv_cache_layer_bytes.  0 for NULL. */
size_t okv_cache_bytes(const okv_cache *c);

/* A counter that changes when, and only when, some layer's storage is
 * reallocated or replaced (a flat layer grew; okv_cache_load took in the
 * saved one's).  Holders of pointers into the storage
 * compare it to learn they must rebind. */
uint64_t okv_cache_generation(const okv_cache *c);

/* True iff the sequence can be rewound to pos: pos == 0, or
 * 0 < pos <= length and every ring layer still holds the keys a query at pos
 * needs (nothing it needs has been overwritten, counting rows written by
 * aborted steps).  False for NULL. */
bool okv_cache_can_rewind(const okv_cache *c, int32_t pos);

/* Sets the length to pos; pos 0 is okv_cache_clear.  A pos that
 * okv_cache_can_rewind refuses is OKV_ERR_POSITION and changes nothing; an
 * open step is OKV_ERR_BUSY. */
okv_status okv_cache_rewind(okv_cache *c, int32_t pos, okv_error *err);

/* Sets the length to 0 and forgets history, so every rewind target that a
 * fresh cache has is valid again.  Storage is kept.  OKV_ERR_BUSY while a step
 * is open. */
okv_status okv_cache_clear(okv_cache *c, okv_error *err);

/* A run of physical rows. */
typedef struct okv_run { int32_t start, len; } okv_run;

/* Where a step writes and what it reads, in physical rows of one layer.
 * write: the rows the step's n_tokens positions land in (two runs when a ring
 * wraps).  read: every row a query of the step may see, oldest first;
 * read_base_pos is the logical position of the first row read. */
typedef struct okv_plan {
    okv_run write[2]; int32_t n_write;
    okv_run read[2];  int32_t n_read;
    int32_t read_base_pos;
} okv_plan;

/* Computes the plan of a step writing positions start .. start+n_tokens-1 in
 * the given layer, assuming storage already grown to fit.  Pure: changes
 * nothing.  It makes the checks okv_step_begin makes except those that
 * involve the length: n_tokens < 1, a bad layer or NULL out is
 * OKV_ERR_INVALID; n_tokens > max_write, start < 0 or start + n_tokens >
 * capacity is OKV_ERR_POSITION. */
okv_status okv_cache_plan(const okv_cache *c, int32_t layer, int32_t start, int32_t n_tokens,
                          okv_plan *out, okv_error *err);

typedef struct okv_step okv_step;

/* Opens a step writing the given positions.  Checks first: n_tokens < 1 or a
 * NULL argument is OKV_ERR_INVALID; positions that are not consecutive, are
 * negative, are more than max_write, start after the length, end past the
 * capacity, or start before the length at a position okv_cache_can_rewind
 * refuses are OKV_ERR_POSITION (the message names the number); another open
 * step is OKV_ERR_BUSY.  Then it grows flat layers that need more rows
 * (OKV_ERR_NOMEM leaves everything as it was) and plans every layer.  On
 * success the step holds a reference to the cache and its storage; the
 * caller must end it with okv_step_commit or okv_step_abort.  pool may be
 * NULL (work runs on the caller's thread); it must outlive the step.
 *
 * The handle is valid until its step ends.  After that it is stale: every
 * begin hands out a new handle, and a stale one given to update_and_attend,
 * commit or abort is refused (OKV_ERR_INVALID; abort does nothing) without
 * touching the cache or a step opened since, as long as its cache lives and
 * fewer than 256 steps have begun on it since (handles are then reused). */
okv_step *okv_step_begin(okv_cache *c, const int32_t *positions, int32_t n_tokens,
                         okv_threadpool *pool, okv_error *err);

/* Writes the step's K/V rows of one layer and attends the step's queries
 * over the layer.  q is [n_tokens][n_heads][head_dim] f32 with RoPE already
 * applied; k and v are [n_tokens][n_kv_heads][head_dim] of kv_type (f32 or
 * f16, converted to the storage type); out receives
 * [n_tokens][n_heads][head_dim].  The query at position p sees key k iff
 * k <= p and (window 0 or p - k < window).  A layer that shares another's
 * K/V (kv_from) takes NULL k and v and attends the rows its donor wrote in
 * this step and before, so the donor must be attended first.  Query head h reads kv head
 * h / (n_heads / n_kv_heads).  Each layer may be attended once per step, in
 * any order (donors before their sharers).  Errors (NULL pointers, K/V
 * given to a sharing layer, a donor not yet attended, a bad layer, n_heads not a positive
 * multiple of n_kv_heads, an unknown kv_type, a scale that is not finite
 * (nor its product with log2 e), a softcap below 0 or whose inverse is not
 * finite, a layer attended twice) are OKV_ERR_INVALID and mark the step
 * failed: commit then refuses it; so does OKV_ERR_NOMEM (no memory for the
 * attention's scratch).  Either way abort then leaves the sequence as
 * okv_step_abort says (as it was, unless a layer was written: a step that
 * rewrote positions before the length cannot put the old rows back).  A
 * q.k product past float's range gives NaN outputs (f32 arithmetic).  A stale handle is OKV_ERR_INVALID and changes nothing.  Outputs
 * are bit-identical for the same inputs, cache state and thread count. */
okv_status okv_update_and_attend(okv_step *s, int32_t layer,
                                 const float *q, int32_t n_heads,
                                 const void *k, const void *v, okv_dtype kv_type,
                                 float scale, float *out, okv_error *err);

/* What a layer's softmax takes besides q and K/V. */
typedef struct okv_attend_opts {
    float scale;    /* multiplies q.k (finite) */
    float softcap;  /* > 0: each score s = scale q.k becomes softcap * tanh(s / softcap) before the
                       softmax (gemma2's attention logit soft-capping); 0: none */
    const float *sinks; /* NULL, or n_heads logits, one per query head (gpt-oss's attention
                           sinks): each joins every softmax denominator of its head as
                           exp(sinks[h]) (not multiplied by scale) while attending to nothing */
} okv_attend_opts;

/* okv_update_and_attend with the softmax's options: opts->scale as scale
 * there, opts->softcap and opts->sinks.  A softcap that is negative or not
 * finite, or a sink that is not finite, is OKV_ERR_INVALID and marks the
 * step failed, as a bad scale does. */
okv_status okv_update_and_attend_opts(okv_step *s, int32_t layer,
                                      const float *q, int32_t n_heads,
                                      const void *k, const void *v, okv_dtype kv_type,
                                      const okv_attend_opts *opts, float *out, okv_error *err);

/* Ends a step whose every layer was attended exactly once: the length
 * becomes start + n_tokens and the step is freed.  A step with an error or a
 * layer left unattended is refused (OKV_ERR_INVALID) and stays open; the
 * caller must then okv_step_abort it. */
okv_status okv_step_commit(okv_step *s, okv_error *err);

/* Ends a step without committing and frees it.  If no layer was written the
 * sequence is exactly as before the step; otherwise the length drops to
 * min(length, start).  Growth done by okv_step_begin is kept.  NULL and a
 * stale handle are no-ops. */
void okv_step_abort(okv_step *s);

/* ---- Forks and rows by logical position (src/cache/fork.c) ---- */

/* Returns a new cache holding the same sequence as src: the same layers,
 * config, length, and rows, so it attends exactly as src would and can be
 * rewound as far as src can (okv_cache_can_rewind agrees).  The two then
 * evolve independently: nothing written to one is seen by the other.  For
 * parallel sampling, beam search, branching chats.  Only the rows holding
 * positions below the length are copied.  A NULL src is OKV_ERR_INVALID, an
 * open step on src OKV_ERR_BUSY, failing storage OKV_ERR_NOMEM; NULL on
 * error.  The caller owns one reference (okv_cache_release). */
okv_cache *okv_cache_fork(okv_cache *src, okv_error *err);

/* One past the highest position written since the last clear or rewind to
 * 0 (at least the length; other rewinds lower the length, not this).  0 for
 * NULL. */
int32_t okv_cache_high_water(const okv_cache *c);

/* Bytes of one kv head's K row (equally, V row) of a layer in the storage
 * type: what okv_cache_read_rows writes per position and head.  0 for a bad
 * layer or NULL. */
size_t okv_cache_row_bytes(const okv_cache *c, int32_t layer);

/* The oldest position whose rows the layer still holds: 0 for a flat
 * layer, high_water - rows (at least 0) for a ring layer, whose rows past
 * that were overwritten.  -1 for a bad layer or NULL. */
int32_t okv_cache_first_held(const okv_cache *c, int32_t layer);

/* Copies the K and V rows of positions pos .. pos+n-1 of one layer into k
 * and v, each laid out [n_kv_heads][n][okv_cache_row_bytes] (the stored
 * bytes, whatever the storage type).  The positions must be held and in the
 * sequence: okv_cache_first_held <= pos and pos + n <= length, else
 * OKV_ERR_POSITION naming them; n < 0, a bad layer or a NULL pointer is
 * OKV_ERR_INVALID; an open step is OKV_ERR_BUSY.  n = 0 copies nothing. */
okv_status okv_cache_read_rows(const okv_cache *c, int32_t layer, int32_t pos, int32_t n, void *k, void *v,
                               okv_error *err);

#ifdef __cplusplus
}
#endif
#endif
