/* The planner: which physical rows a step writes and reads in one layer.
 * Pure functions of the geometry, the config and the positions. */
#include "cache/cache_impl.h"
#include "core/error.h"

okv_status okv_check_positions(const okv_cache *c, const int32_t *positions, int32_t start,
                               int32_t n_tokens, bool with_length, okv_error *err) {
    const okv_cache_config *cfg = &c->cfg;
    if (n_tokens > cfg->max_write)
        return okv_fail(err, OKV_ERR_POSITION, "step of %d tokens exceeds max_write %d",
                        (int)n_tokens, (int)cfg->max_write);
    if (start < 0) return okv_fail(err, OKV_ERR_POSITION, "position %d is negative", (int)start);
    if (positions) {
        for (int32_t i = 1; i < n_tokens; i++) {
            if ((int64_t)positions[i] != (int64_t)start + i)
                return okv_fail(err, OKV_ERR_POSITION,
                                "position %d at index %d is not consecutive (expected %lld)",
                                (int)positions[i], (int)i, (long long)start + i);
        }
    }
    int64_t end = (int64_t)start + n_tokens;
    if (end > cfg->capacity)
        return okv_fail(err, OKV_ERR_POSITION, "step end %lld exceeds capacity %d", (long long)end,
                        (int)cfg->capacity);
    if (!with_length) return OKV_OK;
    if (start > c->length)
        return okv_fail(err, OKV_ERR_POSITION, "step start %d is past the length %d", (int)start,
                        (int)c->length);
    if (start < c->length && !okv_cache_can_rewind(c, start))
        return okv_fail(err, OKV_ERR_POSITION,
                        "step start %d: cannot rewind there (length %d; a sliding-window layer no "
                        "longer holds what it needs)",
                        (int)start, (int)c->length);
    return OKV_OK;
}

/* Splits `len` rows starting at physical row `row` of a ring of `rows` into
 * at most two runs. */
static int32_t wrap_runs(int32_t row, int32_t len, int32_t rows, okv_run out[2]) {
    if (row + len <= rows) {
        out[0] = (okv_run){row, len};
        return 1;
    }
    out[0] = (okv_run){row, rows - row};
    out[1] = (okv_run){0, len - (rows - row)};
    return 2;
}

okv_status okv_cache_plan(const okv_cache *c, int32_t layer, int32_t start, int32_t n_tokens,
                          okv_plan *out, okv_error *err) {
    if (!c || !out) return okv_fail(err, OKV_ERR_INVALID, "plan: NULL argument");
    if (n_tokens < 1)
        return okv_fail(err, OKV_ERR_INVALID, "plan: n_tokens %d < 1", (int)n_tokens);
    if (layer < 0 || layer >= c->n_layers)
        return okv_fail(err, OKV_ERR_INVALID, "plan: layer %d outside 0..%d", (int)layer,
                        (int)c->n_layers - 1);
    okv_status st = okv_check_positions(c, NULL, start, n_tokens, false, err);
    if (st != OKV_OK) return st;

    const okv_layer_geometry *g = &c->layers[layer].geom;
    const int32_t end = start + n_tokens;
    okv_plan p = {0};
    if (g->window <= 0) {
        p.write[0] = (okv_run){start, n_tokens};
        p.n_write = 1;
        p.read[0] = (okv_run){0, end};
        p.n_read = 1;
        p.read_base_pos = 0;
    } else {
        const int32_t rows = okv_ring_rows(g, &c->cfg);
        const int32_t base = start - g->window + 1 > 0 ? start - g->window + 1 : 0;
        p.n_write = wrap_runs(start % rows, n_tokens, rows, p.write);
        p.n_read = wrap_runs(base % rows, end - base, rows, p.read);
        p.read_base_pos = base;
    }
    *out = p;
    okv_error_clear(err);
    return OKV_OK;
}
