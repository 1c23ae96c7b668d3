/* Forks, rows by logical position, and whole-state replacement.
 *
 * Everything here copies rows as opaque bytes (okv_cache_row_bytes per kv
 * head and position), so it holds for any storage type the cache grows.
 * Positions map to physical rows through okv_row_of: a flat layer keeps p
 * in row p, a ring in row p mod rows.  A layer that shares another's K/V
 * (kv_from) has no storage of its own: its rows are its donor's, so reads
 * and writes go to the donor and copies skip it. */
#include <stdlib.h>
#include <string.h>

#include "cache/cache_impl.h"
#include "core/error.h"

size_t okv_cache_row_bytes(const okv_cache *c, int32_t layer) {
    if (!c || layer < 0 || layer >= c->n_layers) return 0;
    return okv_dtype_row_bytes(c->cfg.dtype, c->layers[layer].geom.head_dim);
}

int32_t okv_cache_high_water(const okv_cache *c) { return c ? c->high_water : 0; }

int32_t okv_cache_first_held(const okv_cache *c, int32_t layer) {
    if (!c || layer < 0 || layer >= c->n_layers) return -1;
    const cache_layer *L = &c->layers[okv_cache_owner(c, layer)];
    if (L->geom.window <= 0) return 0;
    const int32_t lo = c->high_water - L->st->rows;
    return lo > 0 ? lo : 0;
}

/* Copies positions pos .. pos+n-1 between a layer's storage and a packed
 * [n_kv_heads][n][row bytes] buffer, splitting at a ring's wrap. */
static void copy_rows(const cache_layer *L, size_t rb, int32_t pos, int32_t n, void *packed_k,
                      void *packed_v, bool to_storage) {
    const int32_t rows = L->st->rows;
    for (int32_t h = 0; h < L->geom.n_kv_heads; h++) {
        for (int32_t done = 0; done < n;) {
            const int32_t phys = okv_row_of(&L->geom, rows, pos + done);
            int32_t run = n - done;
            if (run > rows - phys) run = rows - phys;
            if (run <= 0) return; /* callers check that the rows fit; never spin if they did not */
            const size_t st_off = ((size_t)h * (size_t)rows + (size_t)phys) * rb;
            const size_t pk_off = ((size_t)h * (size_t)n + (size_t)done) * rb;
            const size_t bytes = (size_t)run * rb;
            if (to_storage) {
                memcpy((char *)L->st->k + st_off, (const char *)packed_k + pk_off, bytes);
                memcpy((char *)L->st->v + st_off, (const char *)packed_v + pk_off, bytes);
            } else {
                memcpy((char *)packed_k + pk_off, (const char *)L->st->k + st_off, bytes);
                memcpy((char *)packed_v + pk_off, (const char *)L->st->v + st_off, bytes);
            }
            done += run;
        }
    }
}

okv_status okv_cache_read_rows(const okv_cache *c, int32_t layer, int32_t pos, int32_t n, void *k, void *v,
                               okv_error *err) {
    if (!c) return okv_fail(err, OKV_ERR_INVALID, "read_rows: cache is NULL");
    if (layer < 0 || layer >= c->n_layers)
        return okv_fail(err, OKV_ERR_INVALID, "read_rows: layer %d outside 0..%d", (int)layer, (int)c->n_layers - 1);
    if (n < 0) return okv_fail(err, OKV_ERR_INVALID, "read_rows: n %d < 0", (int)n);
    if (c->step_open) return okv_fail(err, OKV_ERR_BUSY, "read_rows: a step is open on the cache");
    const int32_t lo = okv_cache_first_held(c, layer);
    if (pos < lo || (int64_t)pos + n > c->length)
        return okv_fail(err, OKV_ERR_POSITION,
                        "read_rows: positions %d..%lld of layer %d: it holds %d..%d (length %d)", (int)pos,
                        (long long)pos + n - 1, (int)layer, (int)lo, (int)c->length - 1, (int)c->length);
    if (n > 0 && (!k || !v)) return okv_fail(err, OKV_ERR_INVALID, "read_rows: NULL buffer");
    const cache_layer *L = &c->layers[okv_cache_owner(c, layer)];
    if (L->geom.window <= 0 && (int64_t)pos + n > L->st->rows)
        return okv_fail(err, OKV_ERR_POSITION, "read_rows: positions %d..%lld of layer %d: it has %d rows", (int)pos,
                        (long long)pos + n - 1, (int)layer, (int)L->st->rows);
    if (n > 0) copy_rows(L, okv_cache_row_bytes(c, layer), pos, n, k, v, false);
    okv_error_clear(err);
    return OKV_OK;
}

okv_status okv_cache_write_rows(okv_cache *c, int32_t layer, int32_t pos, int32_t n, const void *k,
                                const void *v, okv_error *err) {
    if (!c || layer < 0 || layer >= c->n_layers || n < 0 || pos < 0 || (n > 0 && (!k || !v)))
        return okv_fail(err, OKV_ERR_INVALID, "write_rows: bad argument (layer %d, pos %d, n %d)", (int)layer,
                        (int)pos, (int)n);
    const cache_layer *L = &c->layers[okv_cache_owner(c, layer)];
    const int64_t need = L->geom.window > 0 ? n : (int64_t)pos + n;
    if (need > L->st->rows)
        return okv_fail(err, OKV_ERR_POSITION, "write_rows: positions %d..%d do not fit layer %d's %d rows",
                        (int)pos, (int)(pos + n - 1), (int)layer, (int)L->st->rows);
    /* copy_rows only reads the packed buffers in this direction. */
    if (n > 0) copy_rows(L, okv_cache_row_bytes(c, layer), pos, n, (void *)k, (void *)v, true);
    okv_error_clear(err);
    return OKV_OK;
}

void okv_cache_set_extent(okv_cache *c, int32_t length, int32_t high_water) {
    c->length = length;
    c->high_water = high_water > length ? high_water : length;
}

okv_cache *okv_cache_blank_like(const okv_cache *c, const int32_t *flat_rows, okv_error *err) {
    okv_layer_geometry *geo = malloc(sizeof *geo * (size_t)c->n_layers);
    if (!geo) {
        okv_fail(err, OKV_ERR_NOMEM, "cache: out of memory for %d layers", (int)c->n_layers);
        return NULL;
    }
    for (int32_t i = 0; i < c->n_layers; i++) geo[i] = c->layers[i].geom;
    /* initial_capacity 0: no flat storage is made here; it is sized below. */
    okv_cache_config cfg = c->cfg;
    cfg.initial_capacity = 0;
    okv_cache *t = okv_cache_create(geo, c->n_layers, &cfg, err);
    free(geo);
    if (!t) return NULL;
    t->cfg = c->cfg;
    okv_cache_set_alloc_hook(t, c->alloc, c->alloc_user);
    for (int32_t i = 0; i < c->n_layers; i++) {
        cache_layer *L = &t->layers[i];
        if (L->geom.window > 0 || L->geom.kv_from) continue;
        const int32_t rows = flat_rows ? flat_rows[i] : c->layers[i].st->rows;
        if (rows < 0 || rows > c->cfg.capacity) {
            okv_fail(err, OKV_ERR_INVALID, "cache: layer %d: %d rows outside 0..capacity %d", (int)i, (int)rows,
                     (int)c->cfg.capacity);
            okv_cache_release(t);
            return NULL;
        }
        if (rows == 0) continue;
        okv_storage *s = okv_storage_new(t, &L->geom, rows);
        if (!s) {
            okv_fail(err, OKV_ERR_NOMEM, "cache: out of memory for layer %d (%d rows)", (int)i, (int)rows);
            okv_cache_release(t);
            return NULL;
        }
        okv_storage_release(L->st);
        L->st = s;
    }
    okv_error_clear(err);
    return t;
}

okv_status okv_cache_adopt(okv_cache *dst, okv_cache *src, okv_error *err) {
    if (dst->step_open || src->step_open)
        return okv_fail(err, OKV_ERR_BUSY, "cache: a step is open on the cache");
    if (dst->n_layers != src->n_layers || dst->cfg.capacity != src->cfg.capacity ||
        dst->cfg.max_write != src->cfg.max_write || dst->cfg.dtype != src->cfg.dtype)
        return okv_fail(err, OKV_ERR_INVALID, "cache: adopt between caches of different configs");
    for (int32_t i = 0; i < dst->n_layers; i++) {
        const okv_layer_geometry *a = &dst->layers[i].geom, *b = &src->layers[i].geom;
        if (a->n_kv_heads != b->n_kv_heads || a->head_dim != b->head_dim || a->window != b->window ||
            a->kv_from != b->kv_from)
            return okv_fail(err, OKV_ERR_INVALID, "cache: adopt: layer %d differs", (int)i);
    }
    for (int32_t i = 0; i < dst->n_layers; i++) {
        okv_storage *t = dst->layers[i].st;
        dst->layers[i].st = src->layers[i].st;
        src->layers[i].st = t;
    }
    const int32_t len = dst->length, hw = dst->high_water;
    dst->length = src->length;
    dst->high_water = src->high_water;
    src->length = len;
    src->high_water = hw;
    /* Holders of pointers into the old storage must learn they are stale. */
    dst->generation++;
    src->generation++;
    okv_error_clear(err);
    return OKV_OK;
}

okv_cache *okv_cache_fork(okv_cache *src, okv_error *err) {
    if (!src) {
        okv_fail(err, OKV_ERR_INVALID, "fork: cache is NULL");
        return NULL;
    }
    if (src->step_open) {
        okv_fail(err, OKV_ERR_BUSY, "fork: a step is open on the cache");
        return NULL;
    }
    okv_cache *t = okv_cache_blank_like(src, NULL, err);
    if (!t) return NULL;
    for (int32_t i = 0; i < src->n_layers; i++) {
        const cache_layer *S = &src->layers[i];
        const int32_t lo = okv_cache_first_held(src, i), n = src->length - lo;
        if (n <= 0 || S->geom.kv_from) continue; /* a sharer's rows are its donor's, copied there */
        /* Same rows, same positions in them: copy the physical rows of the
         * held positions head by head, straight from storage to storage. */
        const size_t rb = okv_cache_row_bytes(src, i);
        const int32_t rows = S->st->rows;
        for (int32_t h = 0; h < S->geom.n_kv_heads; h++) {
            for (int32_t done = 0; done < n;) {
                const int32_t phys = okv_row_of(&S->geom, rows, lo + done);
                int32_t run = n - done;
                if (run > rows - phys) run = rows - phys;
                if (run <= 0) break; /* a flat layer always holds its length; never spin */
                const size_t off = ((size_t)h * (size_t)rows + (size_t)phys) * rb;
                memcpy((char *)t->layers[i].st->k + off, (const char *)S->st->k + off, (size_t)run * rb);
                memcpy((char *)t->layers[i].st->v + off, (const char *)S->st->v + off, (size_t)run * rb);
                done += run;
            }
        }
    }
    okv_cache_set_extent(t, src->length, src->high_water);
    okv_error_clear(err);
    return t;
}
