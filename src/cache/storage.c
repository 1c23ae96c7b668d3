#include <stdlib.h>
#include <string.h>

#include "cache/cache_impl.h"

static void *cache_alloc(const okv_cache *c, size_t bytes) {
    if (c->alloc) return c->alloc(c->alloc_user, bytes);
    /* 64-byte alignment lets the SIMD kernels load whole cache lines. */
    size_t rounded = (bytes + 63) & ~(size_t)63;
    return aligned_alloc(64, rounded ? rounded : 64);
}

okv_storage *okv_storage_new(const okv_cache *c, const okv_layer_geometry *g, int32_t rows) {
    okv_storage *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    s->refs = 1;
    s->rows = rows;
    if (rows > 0) {
        size_t bytes = (size_t)g->n_kv_heads * (size_t)rows * (size_t)g->head_dim * c->elem;
        s->k = cache_alloc(c, bytes);
        s->v = s->k ? cache_alloc(c, bytes) : NULL;
        if (!s->k || !s->v) {
            free(s->k);
            free(s);
            return NULL;
        }
        /* Rows are read only after they are written, but zeroing keeps
         * uninitialised memory out of any debugging dump. */
        memset(s->k, 0, bytes);
        memset(s->v, 0, bytes);
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
