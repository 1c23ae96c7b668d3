#include <stdint.h>
#include <stdlib.h>

#include "cache/cache_impl.h"

static void *cache_alloc(const okv_cache *c, size_t bytes) {
    if (c->alloc) return c->alloc(c->alloc_user, bytes);
    if (bytes > SIZE_MAX - 63) return NULL;
    /* 64-byte alignment lets the SIMD kernels load whole cache lines. */
    size_t rounded = (bytes + 63) & ~(size_t)63;
    return aligned_alloc(64, rounded ? rounded : 64);
}

bool okv_storage_bytes(const okv_layer_geometry *g, int32_t rows, okv_dtype dtype, size_t *out) {
    size_t n;
    if (__builtin_mul_overflow((size_t)g->n_kv_heads, (size_t)rows, &n) ||
        __builtin_mul_overflow(n, okv_dtype_row_bytes(dtype, g->head_dim), &n) || n > PTRDIFF_MAX / 2)
        return false;
    *out = n;
    return true;
}

okv_storage *okv_storage_new(const okv_cache *c, const okv_layer_geometry *g, int32_t rows) {
    okv_storage *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    s->refs = 1;
    s->rows = rows;
    /* Not zeroed: rows are read only after they are written, and leaving
     * the pages untouched keeps a large ring's memory unpaid until used. */
    size_t bytes;
    if (rows > 0) {
        if (!okv_storage_bytes(g, rows, c->cfg.dtype, &bytes)) {
            free(s);
            return NULL;
        }
        s->k = cache_alloc(c, bytes);
        s->v = s->k ? cache_alloc(c, bytes) : NULL;
        if (!s->k || !s->v) {
            free(s->k);
            free(s);
            return NULL;
        }
    }
    return s;
}

okv_storage *okv_storage_retain(okv_storage *s) {
    if (s) s->refs++;
    return s;
}

void okv_storage_release(okv_storage *s) {
    if (!s || --s->refs > 0) return;
    free(s->k);
    free(s->v);
    free(s);
}

int32_t okv_ring_rows(const okv_layer_geometry *g, const okv_cache_config *cfg) {
    int64_t rows = (int64_t)g->window + cfg->max_write - 1;
    return rows < cfg->capacity ? (int32_t)rows : cfg->capacity;
}
