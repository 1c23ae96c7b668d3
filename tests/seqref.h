/* Test support: drives an okv_cache through steps while keeping a plain
 * model of what the sequence holds, and checks every attention output
 * against a naive softmax attention computed here in double precision.
 *
 * Values are multiples of 1/64 in [-2, 2], so they are exact in f16 and the
 * reference needs no rounding model: f16 storage or f16 inputs lose nothing. */
#ifndef OKV_TESTS_SEQREF_H
#define OKV_TESTS_SEQREF_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "offkv/offkv.h"
#include "kernels/f16.h"

#define SEQ_MAX_LAYERS 8

typedef struct seqref {
    okv_cache *cache;
    okv_threadpool *pool;
    int32_t n_layers;
    okv_layer_geometry geo[SEQ_MAX_LAYERS];
    int32_t n_heads[SEQ_MAX_LAYERS];
    okv_cache_config cfg;
    okv_dtype in_type;
    float *hist_k[SEQ_MAX_LAYERS], *hist_v[SEQ_MAX_LAYERS]; /* [capacity][n_kv][hd]: last written */
    int32_t length, high_water;                              /* the model's view */
    uint64_t rng;
    double max_err;                                          /* worst |out - ref| / max(|ref|, 1) */
} seqref;

static inline uint64_t seq_rand(seqref *s) {
    uint64_t z = (s->rng += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static inline float seq_value(seqref *s) { return (float)((int)(seq_rand(s) % 257) - 128) / 64.0f; }

static inline int seq_init(seqref *s, const okv_layer_geometry *geo, const int32_t *n_heads,
                           int32_t n_layers, const okv_cache_config *cfg, okv_dtype in_type,
                           uint64_t seed, okv_error *err) {
    memset(s, 0, sizeof *s);
    s->n_layers = n_layers;
    s->cfg = *cfg;
    s->in_type = in_type;
    s->rng = seed;
    for (int32_t l = 0; l < n_layers; l++) {
        s->geo[l] = geo[l];
        s->n_heads[l] = n_heads[l];
        size_t n = (size_t)cfg->capacity * geo[l].n_kv_heads * geo[l].head_dim;
        s->hist_k[l] = calloc(n, sizeof(float));
        s->hist_v[l] = calloc(n, sizeof(float));
    }
    s->cache = okv_cache_create(geo, n_layers, cfg, err);
    return s->cache != NULL;
}

static inline void seq_free(seqref *s) {
    okv_cache_release(s->cache);
    for (int32_t l = 0; l < s->n_layers; l++) {
        free(s->hist_k[l]);
        free(s->hist_v[l]);
    }
}

/* Naive attention of one layer for the step start .. start+n-1. */
static inline void seq_reference(const seqref *s, int32_t l, int32_t start, int32_t n,
                                 const float *q, float scale, double *ref) {
    const okv_layer_geometry *g = &s->geo[l];
    const int32_t hd = g->head_dim, nh = s->n_heads[l], nkv = g->n_kv_heads;
    double *w = malloc(sizeof(double) * (size_t)(start + n));
    for (int32_t t = 0; t < n; t++) {
        const int32_t p = start + t;
        for (int32_t h = 0; h < nh; h++) {
            const int32_t kvh = h / (nh / nkv);
            const float *qv = q + ((size_t)t * nh + h) * hd;
            double mx = -INFINITY, sum = 0;
            for (int32_t k = 0; k <= p; k++) {
                w[k] = -INFINITY;
                if (g->window > 0 && p - k >= g->window) continue;
                const float *kv = s->hist_k[l] + ((size_t)k * nkv + kvh) * hd;
                double d = 0;
                for (int32_t i = 0; i < hd; i++) d += (double)qv[i] * kv[i];
                w[k] = d * scale;
                if (w[k] > mx) mx = w[k];
            }
            double *o = ref + ((size_t)t * nh + h) * hd;
            for (int32_t i = 0; i < hd; i++) o[i] = 0;
            for (int32_t k = 0; k <= p; k++) {
                if (w[k] == -INFINITY) continue;
                double e = exp(w[k] - mx);
                sum += e;
                const float *vv = s->hist_v[l] + ((size_t)k * nkv + kvh) * hd;
                for (int32_t i = 0; i < hd; i++) o[i] += e * vv[i];
            }
            for (int32_t i = 0; i < hd; i++) o[i] /= sum;
        }
    }
    free(w);
}

/* Fills the step's inputs for layer l and records K/V in the model. */
static inline void seq_inputs(seqref *s, int32_t l, int32_t start, int32_t n, float *q, void *k,
                              void *v) {
    const okv_layer_geometry *g = &s->geo[l];
    const int32_t hd = g->head_dim;
    for (size_t i = 0; i < (size_t)n * s->n_heads[l] * hd; i++) q[i] = seq_value(s);
    for (int32_t t = 0; t < n; t++) {
        for (int32_t i = 0; i < g->n_kv_heads * hd; i++) {
            float kx = seq_value(s), vx = seq_value(s);
            size_t at = (size_t)t * g->n_kv_heads * hd + i;
            s->hist_k[l][(size_t)(start + t) * g->n_kv_heads * hd + i] = kx;
            s->hist_v[l][(size_t)(start + t) * g->n_kv_heads * hd + i] = vx;
            if (s->in_type == OKV_F16) {
                ((okv_f16 *)k)[at] = okv_f32_to_f16(kx);
                ((okv_f16 *)v)[at] = okv_f32_to_f16(vx);
            } else {
                ((float *)k)[at] = kx;
                ((float *)v)[at] = vx;
            }
        }
    }
}

/* Attends one layer of an open step and compares with the reference.
 * Returns the status of okv_update_and_attend. */
static inline okv_status seq_attend(seqref *s, okv_step *st, int32_t l, int32_t start, int32_t n,
                                    okv_error *err) {
    const int32_t hd = s->geo[l].head_dim, nh = s->n_heads[l];
    const size_t nq = (size_t)n * nh * hd, nkv = (size_t)n * s->geo[l].n_kv_heads * hd;
    float *q = malloc(nq * sizeof(float)), *out = malloc(nq * sizeof(float));
    void *k = malloc(nkv * sizeof(float)), *v = malloc(nkv * sizeof(float));
    double *ref = malloc(nq * sizeof(double));
    /* A call refused before writing must leave the model as it was too. */
    float *save_k = malloc(nkv * sizeof(float)), *save_v = malloc(nkv * sizeof(float));
    const size_t at = (size_t)start * s->geo[l].n_kv_heads * hd;
    memcpy(save_k, s->hist_k[l] + at, nkv * sizeof(float));
    memcpy(save_v, s->hist_v[l] + at, nkv * sizeof(float));
    seq_inputs(s, l, start, n, q, k, v);
    const float scale = 1.0f / sqrtf((float)hd);
    okv_status rc = okv_update_and_attend(st, l, q, nh, k, v, s->in_type, scale, out, err);
    if (rc == OKV_OK) {
        if (start == 0 || s->high_water < start + n) s->high_water = start + n;
        seq_reference(s, l, start, n, q, scale, ref);
        for (size_t i = 0; i < nq; i++) {
            double a = fabs(ref[i]) > 1 ? fabs(ref[i]) : 1;
            double e = fabs(out[i] - ref[i]) / a;
            if (!(e <= s->max_err)) s->max_err = isnan(e) ? INFINITY : e;
        }
    } else {
        memcpy(s->hist_k[l] + at, save_k, nkv * sizeof(float));
        memcpy(s->hist_v[l] + at, save_v, nkv * sizeof(float));
    }
    free(q); free(out); free(k); free(v); free(ref); free(save_k); free(save_v);
    return rc;
}

/* A whole step over every layer, committed.  Returns the first failing status. */
static inline okv_status seq_step(seqref *s, int32_t start, int32_t n, okv_error *err) {
    int32_t pos[512];
    for (int32_t i = 0; i < n && i < 512; i++) pos[i] = start + i;
    okv_step *st = okv_step_begin(s->cache, pos, n, s->pool, err);
    if (!st) return err ? err->status : OKV_ERR_INVALID;
    for (int32_t l = 0; l < s->n_layers; l++) {
        okv_status rc = seq_attend(s, st, l, start, n, err);
        if (rc != OKV_OK) {
            okv_step_abort(st);
            if (s->length > start) s->length = start;
            return rc;
        }
    }
    okv_status rc = okv_step_commit(st, err);
    if (rc == OKV_OK) s->length = start + n;
    return rc;
}

/* Steps of at most n tokens until the sequence's length reaches end. */
static inline bool seq_steps_to(seqref *s, int32_t end, int32_t n, okv_error *err) {
    while (s->length < end) {
        const int32_t len = end - s->length < n ? end - s->length : n;
        if (seq_step(s, s->length, len, err) != OKV_OK) return false;
    }
    return true;
}

/* Caches a and b (a fork, a loaded save) hold the same length and high
 * water, and every held row of every layer byte for byte. */
static inline bool seq_same_rows(okv_cache *a, okv_cache *b) {
    if (okv_cache_length(a) != okv_cache_length(b) || okv_cache_high_water(a) != okv_cache_high_water(b)) return false;
    for (int32_t l = 0; l < okv_cache_n_layers(a); l++) {
        okv_layer_geometry g;
        okv_cache_layer_geometry(a, l, &g);
        const int32_t lo = okv_cache_first_held(a, l), n = okv_cache_length(a) - lo;
        if (lo != okv_cache_first_held(b, l)) return false;
        if (n <= 0) continue;
        const size_t bytes = (size_t)g.n_kv_heads * n * okv_cache_row_bytes(a, l);
        char *ka = malloc(bytes), *va = malloc(bytes), *kb = malloc(bytes), *vb = malloc(bytes);
        okv_error err;
        bool ok = ka && va && kb && vb && okv_cache_read_rows(a, l, lo, n, ka, va, &err) == OKV_OK &&
                  okv_cache_read_rows(b, l, lo, n, kb, vb, &err) == OKV_OK && memcmp(ka, kb, bytes) == 0 &&
                  memcmp(va, vb, bytes) == 0;
        free(ka), free(va), free(kb), free(vb);
        if (!ok) return false;
    }
    return true;
}

/* a and b allow rewinding to the same positions. */
static inline bool seq_same_rewind_limits(okv_cache *a, okv_cache *b) {
    for (int32_t p = 0; p <= okv_cache_length(a) + 1; p++)
        if (okv_cache_can_rewind(a, p) != okv_cache_can_rewind(b, p)) return false;
    return true;
}

/* A plain model of what a sequence cache holds (tests/test_cache_property.c
 * and fuzz/fuzz_cache.c check the cache against it): its length, its high
 * water (the longest it has been since the last clear) and each layer's rows
 * (a flat layer's start at initial_capacity or 1 and double up to capacity;
 * a ring's are fixed). */
typedef struct seq_model {
    int32_t length, high_water, rows[SEQ_MAX_LAYERS];
} seq_model;

static inline int32_t seq_imax(int32_t a, int32_t b) { return a > b ? a : b; }

/* The model of a new cache: a ring's window + max_write - 1 rows (at
 * least 1), a flat layer's initial_capacity, neither past the capacity. */
static inline seq_model seq_model_new(const seqref *s) {
    seq_model m = {0};
    for (int32_t l = 0; l < s->n_layers; l++) {
        const int32_t w = s->geo[l].window;
        m.rows[l] = w > 0 ? seq_imax(1, w + s->cfg.max_write - 1) : s->cfg.initial_capacity;
        if (m.rows[l] > s->cfg.capacity) m.rows[l] = s->cfg.capacity;
    }
    return m;
}

/* The model after a successful rewind to pos: a rewind to 0 forgets the
 * history, as clear does. */
static inline void seq_model_rewind(seq_model *m, int32_t pos) {
    m->length = pos;
    if (pos == 0) m->high_water = 0;
}

/* The model after a layer of a step at start .. start+n-1 wrote its rows
 * (committed or not): a step at 0 begins a new history. */
static inline void seq_model_wrote(seq_model *m, int32_t start, int32_t n) {
    m->high_water = start == 0 ? n : seq_imax(m->high_water, start + n);
}

/* Whether the cache may rewind to pos: each ring must still hold the rows
 * from pos - window + 1 on. */
static inline bool seq_model_can_rewind(const seqref *s, const seq_model *m, int32_t pos) {
    if (pos == 0) return true;
    if (pos < 0 || pos > m->length) return false;
    for (int32_t l = 0; l < s->n_layers; l++) {
        const int32_t w = s->geo[l].window;
        if (w > 0 && seq_imax(0, pos - w + 1) < seq_imax(0, m->high_water - m->rows[l])) return false;
    }
    return true;
}

/* Whether a step of n tokens from start may begin. */
static inline bool seq_model_step_ok(const seqref *s, const seq_model *m, int32_t start, int32_t n) {
    return n >= 1 && n <= s->cfg.max_write && start >= 0 && start <= m->length &&
           start + n <= s->cfg.capacity && (start == m->length || seq_model_can_rewind(s, m, start));
}

/* The flat layers' rows once a step reaches end. */
static inline void seq_model_grow(const seqref *s, seq_model *m, int32_t end) {
    for (int32_t l = 0; l < s->n_layers; l++) {
        if (s->geo[l].window > 0 || m->rows[l] >= end) continue;
        int32_t r = m->rows[l] ? m->rows[l] : 1;
        while (r < end) r *= 2;
        m->rows[l] = r < s->cfg.capacity ? r : s->cfg.capacity;
    }
}

#endif
