/* Test support: drives an okv_cache through steps while keeping a plain
 * model of what the sequence holds, and checks every attention output
 * against a naive softmax attention computed here in double precision.
 *
 * Values are multiples of 1/64 in [-2, 2], so they are exact in f16 and the
 * reference needs no rounding model: f16 storage or f16 inputs lose nothing. */
#ifndef OKV_TESTS_SEQREF_H
#define OKV_TESTS_SEQREF_H

#include <math.h>
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
        if (s->high_water < start + n) s->high_water = start + n;
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

#endif
