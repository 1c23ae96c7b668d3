/* Steps: begin (check, grow, plan), update_and_attend per layer, commit or
 * abort.  The rule that keeps the sequence honest: nothing changes before
 * every check has passed, and a step that wrote anything and does not commit
 * leaves the length at most at its start. */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "attend/attend.h"
#include "cache/cache_impl.h"
#include "core/error.h"
#include "kernels/f16.h"
#include "kernels/quant.h"

/* Handles.  A step's state lives in the cache's one slot (so a step
 * allocates nothing), but each begin hands out a different handle: ticket
 * number (begin count mod OKV_STEP_TICKETS) of the cache's array.  Once its
 * step has ended a handle no longer matches the open ticket, so a late
 * commit, abort or attend through it is refused and cannot touch the step
 * someone else has opened since. */
struct okv_step {
    okv_cache *cache; /* the cache whose ticket this is; never changes */
};

struct okv_step_state {
    okv_cache *cache;       /* retained */
    okv_threadpool *pool;
    int32_t start, n_tokens;
    okv_storage **storage;  /* per layer, retained: what this step writes and reads */
    okv_plan *plans;
    uint8_t *attended;
    bool failed;            /* an error happened; commit refuses */
    bool wrote;             /* some layer's rows were overwritten */
};

okv_step *okv_step_tickets_create(okv_cache *c) {
    okv_step *t = calloc(OKV_STEP_TICKETS, sizeof *t);
    for (int i = 0; t && i < OKV_STEP_TICKETS; i++) t[i].cache = c;
    return t;
}

/* The open step behind handle t, or NULL (err filled) when t is NULL or its
 * step has ended. */
static okv_step_state *live(okv_step *t, const char *who, okv_error *err) {
    if (!t) {
        okv_fail(err, OKV_ERR_INVALID, "%s: step is NULL", who);
        return NULL;
    }
    okv_cache *c = t->cache;
    if (!c->step_open || t != &c->step_tickets[c->step_ticket]) {
        okv_fail(err, OKV_ERR_INVALID, "%s: stale step handle (its step was already committed or aborted)", who);
        return NULL;
    }
    return c->step_slot;
}

okv_step_state *okv_step_slot_create(int32_t n_layers) {
    okv_step_state *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    s->storage = calloc((size_t)n_layers, sizeof *s->storage);
    s->plans = calloc((size_t)n_layers, sizeof *s->plans);
    s->attended = calloc((size_t)n_layers, 1);
    if (!s->storage || !s->plans || !s->attended) {
        okv_step_slot_destroy(s);
        return NULL;
    }
    return s;
}

void okv_step_slot_destroy(okv_step_state *s) {
    if (!s) return;
    free(s->storage);
    free(s->plans);
    free(s->attended);
    free(s);
}

/* Ends the step: drops what it held and hands the slot back.  The cache's
 * reference goes last, since it may free the cache and the slot with it. */
static void step_end(okv_step_state *s) {
    okv_cache *c = s->cache;
    for (int32_t i = 0; i < c->n_layers; i++) {
        okv_storage_release(s->storage[i]);
        s->storage[i] = NULL;
    }
    c->step_open = false;
    s->cache = NULL;
    okv_cache_release(c);
}

/* Rows a flat layer needs for a step ending at end: doubling from the rows it
 * has (from 1 if none) until the step fits, capped at the capacity. */
static int32_t grown_rows(int32_t rows, int32_t end, int32_t capacity) {
    int64_t r = rows > 0 ? rows : 1;
    while (r < end) r *= 2;
    return r < capacity ? (int32_t)r : capacity;
}

/* Grows every flat layer that cannot hold positions up to end.  All new
 * buffers are allocated before any is swapped in, so a failure leaves every
 * layer (and the generation) as it was. */
static okv_status grow(okv_cache *c, int32_t end, okv_error *err) {
    okv_storage **fresh = c->fresh;
    bool any = false;
    for (int32_t i = 0; i < c->n_layers; i++) {
        cache_layer *L = &c->layers[i];
        fresh[i] = NULL;
        if (L->geom.window > 0 || L->geom.kv_from || L->st->rows >= end) continue;
        int32_t rows = grown_rows(L->st->rows, end, c->cfg.capacity);
        fresh[i] = okv_storage_new(c, &L->geom, rows);
        if (!fresh[i]) {
            for (int32_t j = 0; j < i; j++) okv_storage_release(fresh[j]);
            return okv_fail(err, OKV_ERR_NOMEM, "step: out of memory growing layer %d to %d rows",
                            (int)i, (int)rows);
        }
        any = true;
    }
    for (int32_t i = 0; i < c->n_layers && any; i++) {
        if (!fresh[i]) continue;
        cache_layer *L = &c->layers[i];
        const okv_storage *old = L->st;
        const size_t row_bytes = okv_dtype_row_bytes(c->cfg.dtype, L->geom.head_dim);
        for (int32_t h = 0; h < L->geom.n_kv_heads && old->rows > 0; h++) {
            size_t src = (size_t)h * old->rows * row_bytes, dst = (size_t)h * fresh[i]->rows * row_bytes;
            memcpy((char *)fresh[i]->k + dst, (const char *)old->k + src, old->rows * row_bytes);
            memcpy((char *)fresh[i]->v + dst, (const char *)old->v + src, old->rows * row_bytes);
        }
        okv_storage_release(L->st);
        L->st = fresh[i];
    }
    if (any) c->generation++;
    return OKV_OK;
}

okv_step *okv_step_begin(okv_cache *c, const int32_t *positions, int32_t n_tokens,
                         okv_threadpool *pool, okv_error *err) {
    if (!c || !positions) {
        okv_fail(err, OKV_ERR_INVALID, "step: %s is NULL", c ? "positions" : "cache");
        return NULL;
    }
    if (n_tokens < 1) {
        okv_fail(err, OKV_ERR_INVALID, "step: n_tokens %d < 1", (int)n_tokens);
        return NULL;
    }
    if (c->step_open) {
        okv_fail(err, OKV_ERR_BUSY, "step: another step is open on this cache");
        return NULL;
    }
    if (okv_check_positions(c, positions, positions[0], n_tokens, true, err) != OKV_OK) return NULL;

    if (grow(c, positions[0] + n_tokens, err) != OKV_OK) return NULL;
    okv_step_state *s = c->step_slot;
    s->start = positions[0];
    s->n_tokens = n_tokens;
    s->pool = pool;
    s->failed = s->wrote = false;
    memset(s->attended, 0, (size_t)c->n_layers);
    for (int32_t i = 0; i < c->n_layers; i++) {
        /* Checked above, so planning cannot fail. */
        okv_cache_plan(c, i, s->start, n_tokens, &s->plans[i], NULL);
        s->storage[i] = okv_storage_retain(c->layers[okv_cache_owner(c, i)].st);
    }
    s->cache = okv_cache_retain(c);
    c->step_open = true;
    c->step_ticket = (c->step_ticket + 1) % OKV_STEP_TICKETS;
    okv_error_clear(err);
    return &c->step_tickets[c->step_ticket];
}

static okv_status step_error(okv_step_state *s, okv_error *err, okv_status st, const char *what, int layer) {
    s->failed = true;
    return okv_fail(err, st, "update_and_attend: layer %d: %s", layer, what);
}

/* Writes the step's rows of one layer: input [n_tokens][n_kv_heads][head_dim]
 * of kv_type (f32 or f16) into storage [n_kv_heads][rows][row] of the
 * cache's type.  tmp holds head_dim rounded up to 32 floats: q8_0 rows go
 * through it, zero-padded to whole blocks. */
static void write_rows(okv_step_state *s, int32_t layer, const void *src, okv_dtype kv_type, void *dst,
                       float *tmp) {
    const okv_cache *c = s->cache;
    const okv_layer_geometry *g = &c->layers[layer].geom;
    const int32_t rows = s->storage[layer]->rows, hd = g->head_dim;
    const okv_dtype to = c->cfg.dtype;
    const size_t in_bytes = okv_dtype_row_bytes(kv_type, hd), out_bytes = okv_dtype_row_bytes(to, hd);
    for (int32_t t = 0; t < s->n_tokens; t++) {
        const int32_t row = okv_row_of(g, rows, s->start + t);
        for (int32_t h = 0; h < g->n_kv_heads; h++) {
            const char *in = (const char *)src + ((size_t)t * g->n_kv_heads + h) * in_bytes;
            char *at = (char *)dst + ((size_t)h * rows + row) * out_bytes;
            if (kv_type == to) {
                memcpy(at, in, out_bytes);
            } else if (to == OKV_Q8_0) {
                const int32_t padded = (hd + 31) / 32 * 32;
                if (kv_type == OKV_F16) okv_f16_to_f32_row(tmp, (const okv_f16 *)in, hd);
                else memcpy(tmp, in, (size_t)hd * sizeof(float));
                for (int32_t d = hd; d < padded; d++) tmp[d] = 0.0f;
                okv_quantize_row_q8_0(tmp, (block_q8_0 *)at, padded);
            } else if (kv_type == OKV_F32) {
                okv_f32_to_f16_row((okv_f16 *)at, (const float *)in, hd);
            } else {
                okv_f16_to_f32_row((float *)at, (const okv_f16 *)in, hd);
            }
        }
    }
}

okv_status okv_update_and_attend(okv_step *step, int32_t layer, const float *q, int32_t n_heads,
                                 const void *k, const void *v, okv_dtype kv_type, float scale,
                                 float *out, okv_error *err) {
    const okv_attend_opts opts = {.scale = scale};
    return okv_update_and_attend_opts(step, layer, q, n_heads, k, v, kv_type, &opts, out, err);
}

okv_status okv_update_and_attend_opts(okv_step *step, int32_t layer, const float *q, int32_t n_heads,
                                      const void *k, const void *v, okv_dtype kv_type,
                                      const okv_attend_opts *opts, float *out, okv_error *err) {
    okv_step_state *s = live(step, "update_and_attend", err);
    if (!s) return OKV_ERR_INVALID;
    okv_cache *c = s->cache;
    if (layer < 0 || layer >= c->n_layers) {
        s->failed = true;
        return okv_fail(err, OKV_ERR_INVALID, "update_and_attend: layer %d outside 0..%d",
                        (int)layer, (int)c->n_layers - 1);
    }
    const okv_layer_geometry *g = &c->layers[layer].geom;
    const int32_t donor = g->kv_from - 1;
    if (!q || !out || !opts) return step_error(s, err, OKV_ERR_INVALID, "NULL q, out or opts", layer);
    const float scale = opts->scale, softcap = opts->softcap;
    const float *sinks = opts->sinks;
    if (g->kv_from == 0 && (!k || !v)) return step_error(s, err, OKV_ERR_INVALID, "NULL k or v", layer);
    if (g->kv_from && (k || v)) {
        s->failed = true;
        return okv_fail(err, OKV_ERR_INVALID,
                        "update_and_attend: layer %d shares layer %d's K/V: it takes NULL k and v", (int)layer,
                        (int)donor);
    }
    if (g->kv_from && !s->attended[donor]) {
        s->failed = true;
        return okv_fail(err, OKV_ERR_INVALID,
                        "update_and_attend: layer %d reads layer %d's rows, which this step has not written yet",
                        (int)layer, (int)donor);
    }
    if (n_heads < 1 || n_heads % g->n_kv_heads != 0) {
        s->failed = true;
        return okv_fail(err, OKV_ERR_INVALID,
                        "update_and_attend: layer %d: n_heads %d is not a positive multiple of "
                        "n_kv_heads %d",
                        (int)layer, (int)n_heads, (int)g->n_kv_heads);
    }
    if (kv_type != OKV_F32 && kv_type != OKV_F16) {
        s->failed = true;
        return okv_fail(err, OKV_ERR_INVALID, "update_and_attend: layer %d: unknown kv_type %d",
                        (int)layer, (int)kv_type);
    }
    if (s->attended[layer])
        return step_error(s, err, OKV_ERR_INVALID, "already attended in this step", layer);
    /* The kernels work in base 2 (scale * log2 e) and cap through 1/cap:
     * past float's range those made 0 * inf, NaN outputs. */
    if (!isfinite(scale) || !isfinite(scale * 1.44269504f)) {
        s->failed = true;
        return okv_fail(err, OKV_ERR_INVALID,
                        "update_and_attend: layer %d: scale %g is not a finite number (times log2 e, below %g)",
                        (int)layer, (double)scale, (double)(FLT_MAX / 1.44269504f));
    }
    if (!(softcap >= 0.0f) || !isfinite(softcap) || (softcap > 0.0f && !isfinite(1.0f / softcap))) {
        s->failed = true;
        return okv_fail(err, OKV_ERR_INVALID,
                        "update_and_attend: layer %d: softcap %g is not 0 or a finite number whose inverse is finite",
                        (int)layer, (double)softcap);
    }

    for (int32_t h = 0; sinks && h < n_heads; h++)
        if (!isfinite(sinks[h])) {
            s->failed = true;
            return okv_fail(err, OKV_ERR_INVALID, "update_and_attend: layer %d: sink %d = %g is not a finite number",
                            (int)layer, (int)h, (double)sinks[h]);
        }

    okv_storage *st = s->storage[layer];
    okv_attend_job job = {
        .k = st->k, .v = st->v, .dtype = c->cfg.dtype,
        .n_kv_heads = g->n_kv_heads, .rows = st->rows, .head_dim = g->head_dim,
        .window = g->window, .ring = g->window > 0, .lo_pos = s->plans[layer].read_base_pos,
        .q = q, .out = out, .n_heads = n_heads, .n_tokens = s->n_tokens,
        .start = s->start, .scale = scale, .softcap = softcap, .sinks = sinks,
    };
    /* q8_0 storage quantizes f16 input through f32: one row of floats, after the kernel's part. */
    const size_t kern = (okv_attend_scratch_bytes(&job, okv_threadpool_size(s->pool)) + 63) & ~(size_t)63;
    const size_t need = kern + ((size_t)g->head_dim + 31) / 32 * 32 * sizeof(float);
    if (need > c->scratch_bytes) {
        void *p = aligned_alloc(64, (need + 63) & ~(size_t)63);
        if (!p) return step_error(s, err, OKV_ERR_NOMEM, "out of memory for attention scratch", layer);
        free(c->scratch);
        c->scratch = p;
        c->scratch_bytes = need;
    }

    if (!g->kv_from) {
        float *tmp = (float *)((char *)c->scratch + kern);
        write_rows(s, layer, k, kv_type, st->k, tmp);
        write_rows(s, layer, v, kv_type, st->v, tmp);
        s->wrote = true;
        /* A step at 0 begins a new history, as a rewind to 0 does: what the
         * rings held past it is dead, so it no longer bounds what they hold. */
        if (s->start == 0 || c->high_water < s->start + s->n_tokens) c->high_water = s->start + s->n_tokens;
    }

    okv_attend_run(&job, s->pool, c->scratch, okv_cpu_best_isa());
    s->attended[layer] = 1;
    okv_error_clear(err);
    return OKV_OK;
}

okv_status okv_step_commit(okv_step *step, okv_error *err) {
    okv_step_state *s = live(step, "commit", err);
    if (!s) return OKV_ERR_INVALID;
    if (s->failed)
        return okv_fail(err, OKV_ERR_INVALID, "commit: the step had an error; abort it");
    for (int32_t i = 0; i < s->cache->n_layers; i++) {
        if (!s->attended[i])
            return okv_fail(err, OKV_ERR_INVALID, "commit: layer %d was not attended", (int)i);
    }
    s->cache->length = s->start + s->n_tokens;
    step_end(s);
    okv_error_clear(err);
    return OKV_OK;
}

void okv_step_abort(okv_step *step) {
    okv_step_state *s = live(step, "abort", NULL);
    if (!s) return;
    if (s->wrote && s->cache->length > s->start) s->cache->length = s->start;
    step_end(s);
}
