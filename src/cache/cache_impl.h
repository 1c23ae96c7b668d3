/* Internal: the sequence cache's representation, shared by the files of
 * src/cache/ (cache.c: lifetime and length; storage.c: per-layer buffers;
 * plan.c: where a step writes and reads; step.c: steps) and by the engine,
 * which binds to storage directly. */
#ifndef OKV_CACHE_IMPL_H
#define OKV_CACHE_IMPL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "offkv/cache.h"

/* Allocation hook: lets tests make a particular allocation fail.  Returns
 * memory that okv_storage frees with free(), or NULL. */
typedef void *(*okv_alloc_fn)(void *user, size_t bytes);

/* One layer's K/V buffers, reference counted so that whoever points into
 * them (an open step, an engine context) keeps them alive across a regrow. */
typedef struct okv_storage {
    int32_t refs;
    int32_t rows;
    void *k, *v;  /* [n_kv_heads][rows][head_dim], NULL when rows == 0 */
} okv_storage;

typedef struct cache_layer {
    okv_layer_geometry geom;
    okv_storage *st;  /* NULL for a layer that shares its donor's (geom.kv_from) */
} cache_layer;

struct okv_cache {
    int32_t refs;
    int32_t n_layers;
    cache_layer *layers;
    okv_cache_config cfg;

    int32_t length;       /* logical length */
    int32_t high_water;   /* one past the highest position written since the last clear */
    uint64_t generation;
    bool step_open;
    okv_alloc_fn alloc;   /* NULL: malloc-like default */
    void *alloc_user;
    void *scratch;        /* attention scratch, grown on demand, 64-byte aligned */
    size_t scratch_bytes;
    /* Made at creation so that a step allocates nothing unless it grows:
     * the one step that can be open, its handles (step.c says why there are
     * many), and growth's list of new buffers. */
    struct okv_step_state *step_slot;
    struct okv_step *step_tickets; /* OKV_STEP_TICKETS */
    int32_t step_ticket;           /* the open (or last) step's handle */
    okv_storage **fresh;  /* n_layers */
};

/* The cache's step slot: made with the cache, for n_layers layers. */
typedef struct okv_step_state okv_step_state;
okv_step_state *okv_step_slot_create(int32_t n_layers);
void okv_step_slot_destroy(okv_step_state *s);

/* Step handles: a stale one is recognised until OKV_STEP_TICKETS more steps
 * have begun on the cache.  Freed with free(). */
enum { OKV_STEP_TICKETS = 256 };
struct okv_step *okv_step_tickets_create(okv_cache *c);

/* Storage: allocate (rows may be 0), add a reference, drop one. */
okv_storage *okv_storage_new(const okv_cache *c, const okv_layer_geometry *g, int32_t rows);
okv_storage *okv_storage_retain(okv_storage *s);
void okv_storage_release(okv_storage *s);

/* Bytes of one stored row of head_dim values (Q8_0: whole 34-byte blocks). */
static inline size_t okv_dtype_row_bytes(okv_dtype t, int32_t head_dim) {
    return t == OKV_Q8_0 ? ((size_t)head_dim + 31) / 32 * 34 : (size_t)head_dim * (t == OKV_F16 ? 2 : 4);
}

/* The layer whose storage layer i reads: itself, or its donor. */
static inline int32_t okv_cache_owner(const okv_cache *c, int32_t i) {
    return c->layers[i].geom.kv_from > 0 ? c->layers[i].geom.kv_from - 1 : i;
}

/* Bytes of one of a layer's K or V buffers at `rows` rows; false when that
 * cannot be addressed (the product overflows or passes PTRDIFF_MAX / 2). */
bool okv_storage_bytes(const okv_layer_geometry *g, int32_t rows, okv_dtype dtype, size_t *out);

/* Rows a ring layer holds: min(window + max_write - 1, capacity). */
int32_t okv_ring_rows(const okv_layer_geometry *g, const okv_cache_config *cfg);

/* The physical row of position pos in a layer of `rows` rows. */
static inline int32_t okv_row_of(const okv_layer_geometry *g, int32_t rows, int32_t pos) {
    return g->window > 0 ? pos % rows : pos;
}

/* Checks a step's positions against the cache (everything okv_step_begin
 * checks before growing); with_length = false skips the checks that involve
 * the length (okv_cache_plan's subset). */
okv_status okv_check_positions(const okv_cache *c, const int32_t *positions, int32_t start,
                               int32_t n_tokens, bool with_length, okv_error *err);

/* Test hook: route storage allocations through fn (NULL restores the default). */
void okv_cache_set_alloc_hook(okv_cache *c, okv_alloc_fn fn, void *user);

/* The storage a layer points into now (borrowed).  Holders that keep it past
 * the next step retain it. */
okv_storage *okv_cache_layer_storage(okv_cache *c, int32_t layer);

#endif
