/* The sequence cache: creation, lifetime, length, rewind and clear. */
#include <stdint.h>
#include <stdlib.h>

#include "attend/attend.h"
#include "cache/cache_impl.h"
#include "core/error.h"

/* A sharing layer's donor comes earlier, owns its K/V, and has the same
 * shape, so the sharer can read its rows as if they were its own. */
static okv_status check_donor(const okv_layer_geometry *layers, int32_t i, okv_error *err) {
    const okv_layer_geometry *g = &layers[i];
    if (g->kv_from == 0) return OKV_OK;
    const int32_t d = g->kv_from - 1;
    if (g->kv_from < 0 || d >= i)
        return okv_fail(err, OKV_ERR_INVALID, "cache: layer %d: kv_from %d names layer %d, which does not come before it",
                        (int)i, (int)g->kv_from, (int)d);
    const okv_layer_geometry *h = &layers[d];
    if (h->kv_from != 0)
        return okv_fail(err, OKV_ERR_INVALID, "cache: layer %d shares layer %d's K/V, which itself shares layer %d's",
                        (int)i, (int)d, (int)h->kv_from - 1);
    if (h->n_kv_heads != g->n_kv_heads || h->head_dim != g->head_dim || h->window != g->window)
        return okv_fail(err, OKV_ERR_INVALID,
                        "cache: layer %d (kv heads %d, head dim %d, window %d) shares layer %d's K/V, which is "
                        "(%d, %d, %d)",
                        (int)i, (int)g->n_kv_heads, (int)g->head_dim, (int)g->window, (int)d, (int)h->n_kv_heads,
                        (int)h->head_dim, (int)h->window);
    return OKV_OK;
}

static okv_status check_config(const okv_layer_geometry *layers, int32_t n_layers,
                               const okv_cache_config *cfg, okv_error *err) {
    if (!layers) return okv_fail(err, OKV_ERR_INVALID, "cache: layers is NULL");
    if (!cfg) return okv_fail(err, OKV_ERR_INVALID, "cache: config is NULL");
    if (n_layers < 1) return okv_fail(err, OKV_ERR_INVALID, "cache: n_layers %d < 1", (int)n_layers);
    if (cfg->capacity < 1)
        return okv_fail(err, OKV_ERR_INVALID, "cache: capacity %d < 1", (int)cfg->capacity);
    if (cfg->max_write < 1)
        return okv_fail(err, OKV_ERR_INVALID, "cache: max_write %d < 1", (int)cfg->max_write);
    if (cfg->dtype != OKV_F32 && cfg->dtype != OKV_F16 && cfg->dtype != OKV_Q8_0)
        return okv_fail(err, OKV_ERR_INVALID, "cache: unknown dtype %d", (int)cfg->dtype);
    for (int32_t i = 0; i < n_layers; i++) {
        const okv_layer_geometry *g = &layers[i];
        if (g->n_kv_heads < 1)
            return okv_fail(err, OKV_ERR_INVALID, "cache: layer %d: n_kv_heads %d < 1", (int)i,
                            (int)g->n_kv_heads);
        if (g->head_dim < 1 || g->head_dim > 512)
            return okv_fail(err, OKV_ERR_INVALID, "cache: layer %d: head_dim %d outside 1..512",
                            (int)i, (int)g->head_dim);
        if (g->window < 0)
            return okv_fail(err, OKV_ERR_INVALID, "cache: layer %d: window %d < 0", (int)i,
                            (int)g->window);
        if (check_donor(layers, i, err) != OKV_OK) return OKV_ERR_INVALID;
    }
    /* Every layer at its largest (a flat one at the capacity) and the whole
     * cache must be addressable, so growth and okv_cache_bytes never overflow. */
    size_t total = 0, bytes;
    for (int32_t i = 0; i < n_layers; i++) {
        const okv_layer_geometry *g = &layers[i];
        const int32_t rows = g->kv_from ? 0 : g->window > 0 ? okv_ring_rows(g, cfg) : cfg->capacity;
        if (!okv_storage_bytes(g, rows, cfg->dtype, &bytes) || __builtin_add_overflow(total, 2 * bytes, &total) ||
            total > PTRDIFF_MAX)
            return okv_fail(err, OKV_ERR_NOMEM,
                            "cache: layer %d: %d kv heads x %d rows x head_dim %d cannot be addressed",
                            (int)i, (int)g->n_kv_heads, (int)rows, (int)g->head_dim);
    }
    return OKV_OK;
}

okv_cache *okv_cache_create(const okv_layer_geometry *layers, int32_t n_layers,
                            const okv_cache_config *cfg, okv_error *err) {
    if (check_config(layers, n_layers, cfg, err) != OKV_OK) return NULL;
    okv_cache *c = calloc(1, sizeof *c);
    if (c) {
        c->refs = 1;
        c->layers = calloc((size_t)n_layers, sizeof *c->layers);
        c->fresh = calloc((size_t)n_layers, sizeof *c->fresh);
        c->step_slot = okv_step_slot_create(n_layers);
        c->step_tickets = okv_step_tickets_create(c);
    }
    if (!c || !c->layers || !c->fresh || !c->step_slot || !c->step_tickets) {
        okv_cache_release(c);
        okv_fail(err, OKV_ERR_NOMEM, "cache: out of memory for %d layers", (int)n_layers);
        return NULL;
    }
    c->n_layers = n_layers;
    c->cfg = *cfg;
    if (c->cfg.initial_capacity < 0) c->cfg.initial_capacity = 0;
    if (c->cfg.initial_capacity > c->cfg.capacity) c->cfg.initial_capacity = c->cfg.capacity;
    for (int32_t i = 0; i < n_layers; i++) {
        const okv_layer_geometry *g = &layers[i];
        c->layers[i].geom = *g;
        if (g->kv_from) continue; /* reads its donor's storage */
        int32_t rows = g->window > 0 ? okv_ring_rows(g, &c->cfg) : c->cfg.initial_capacity;
        c->layers[i].st = okv_storage_new(c, g, rows);
        if (!c->layers[i].st) {
            okv_fail(err, OKV_ERR_NOMEM, "cache: out of memory for layer %d (%d rows)", (int)i,
                     (int)rows);
            okv_cache_release(c);
            return NULL;
        }
    }
    okv_error_clear(err);
    return c;
}

okv_cache *okv_cache_retain(okv_cache *c) {
    if (c) c->refs++;
    return c;
}

void okv_cache_release(okv_cache *c) {
    if (!c || --c->refs > 0) return;
    for (int32_t i = 0; i < c->n_layers && c->layers; i++) okv_storage_release(c->layers[i].st);
    okv_step_slot_destroy(c->step_slot);
    free(c->step_tickets);
    free(c->fresh);
    free(c->layers);
    free(c->scratch);
    free(c);
}

int32_t okv_cache_length(const okv_cache *c) { return c ? c->length : 0; }
int32_t okv_cache_n_layers(const okv_cache *c) { return c ? c->n_layers : 0; }

bool okv_cache_layer_geometry(const okv_cache *c, int32_t layer, okv_layer_geometry *out) {
    if (!c || !out || layer < 0 || layer >= c->n_layers) return false;
    *out = c->layers[layer].geom;
    return true;
}

bool okv_cache_get_config(const okv_cache *c, okv_cache_config *out) {
    if (!c || !out) return false;
    *out = c->cfg;
    return true;
}

int32_t okv_cache_rows(const okv_cache *c, int32_t layer) {
    if (!c || layer < 0 || layer >= c->n_layers) return -1;
    return c->layers[layer].st ? c->layers[layer].st->rows : 0;
}

size_t okv_cache_layer_bytes(const okv_cache *c, int32_t layer) {
    if (!c || layer < 0 || layer >= c->n_layers || !c->layers[layer].st) return 0;
    const okv_layer_geometry *g = &c->layers[layer].geom;
    size_t bytes = 0;
    okv_storage_bytes(g, c->layers[layer].st->rows, c->cfg.dtype, &bytes); /* checked at create */
    return 2 * bytes;
}

size_t okv_cache_bytes(const okv_cache *c) {
    size_t total = 0;
    for (int32_t i = 0; c && i < c->n_layers; i++) total += okv_cache_layer_bytes(c, i);
    return total;
}

uint64_t okv_cache_generation(const okv_cache *c) { return c ? c->generation : 0; }

bool okv_cache_can_rewind(const okv_cache *c, int32_t pos) {
    if (!c) return false;
    if (pos == 0) return true;
    if (pos < 0 || pos > c->length) return false;
    /* A query at pos needs positions pos-W+1 .. pos-1 of each ring layer; the
     * oldest position a ring of R rows still holds is high_water - R. */
    for (int32_t i = 0; i < c->n_layers; i++) {
        const okv_layer_geometry *g = &c->layers[i].geom;
        if (g->window <= 0 || g->kv_from) continue; /* a sharer holds what its donor holds */
        int64_t need = (int64_t)pos - g->window + 1;
        int64_t held = (int64_t)c->high_water - c->layers[i].st->rows;
        if ((need > 0 ? need : 0) < (held > 0 ? held : 0)) return false;
    }
    return true;
}

okv_status okv_cache_rewind(okv_cache *c, int32_t pos, okv_error *err) {
    if (!c) return okv_fail(err, OKV_ERR_INVALID, "rewind: cache is NULL");
    if (c->step_open) return okv_fail(err, OKV_ERR_BUSY, "rewind: a step is open on the cache");
    if (!okv_cache_can_rewind(c, pos)) {
        if (pos < 0 || pos > c->length)
            return okv_fail(err, OKV_ERR_POSITION, "rewind to %d: outside 0..length %d", (int)pos,
                            (int)c->length);
        return okv_fail(err, OKV_ERR_POSITION,
                        "rewind to %d: a sliding-window layer no longer holds the positions it needs "
                        "(written up to %d)",
                        (int)pos, (int)c->high_water);
    }
    c->length = pos;
    /* Nothing before position 0 is needed, so a rewind to 0 forgets history
     * as clear does.  Keeping high_water would make the rings' first held
     * position (high_water - rows) exceed what a shorter new sequence
     * writes: fork and save would then copy none of its ring rows. */
    if (pos == 0) c->high_water = 0;
    okv_error_clear(err);
    return OKV_OK;
}

okv_status okv_cache_clear(okv_cache *c, okv_error *err) {
    if (!c) return okv_fail(err, OKV_ERR_INVALID, "clear: cache is NULL");
    if (c->step_open) return okv_fail(err, OKV_ERR_BUSY, "clear: a step is open on the cache");
    c->length = 0;
    c->high_water = 0;
    okv_error_clear(err);
    return OKV_OK;
}

void okv_cache_set_alloc_hook(okv_cache *c, okv_alloc_fn fn, void *user) {
    if (!c) return;
    c->alloc = fn;
    c->alloc_user = user;
}

okv_storage *okv_cache_layer_storage(okv_cache *c, int32_t layer) {
    if (!c || layer < 0 || layer >= c->n_layers) return NULL;
    return c->layers[okv_cache_owner(c, layer)].st;
}
