/* okv_cache_fork and rows by logical position.
 *
 *  - Cache level (no shared data needed): a cache of flat and ring layers,
 *    f16 and f32, is forked at interesting points (empty, mid-way, after
 *    ring wraps, after a rewind, when a flat layer is about to grow); then
 *    both branches take different steps, each checked against its own naive
 *    attention reference (seqref.h), so a write to one branch that leaked
 *    into the other fails.  Rows read by position agree, and so do the
 *    rewind limits.
 *  - Model level: on every shared family, a prompt's cache is forked and the
 *    two branches continue with different tokens, interleaved token by
 *    token; each branch's logits are bit-identical to a fresh run of that
 *    branch alone. */
#include <stdint.h>

#include "check.h"
#include "seqref.h"

/* A seqref whose cache is a fork of s's and whose reference is a copy of s's. */
static bool seq_fork(const seqref *s, seqref *t, uint64_t seed, okv_error *err) {
    *t = *s;
    t->rng = seed;
    t->max_err = 0;
    for (int32_t l = 0; l < s->n_layers; l++) {
        const size_t n = (size_t)s->cfg.capacity * s->geo[l].n_kv_heads * s->geo[l].head_dim * sizeof(float);
        t->hist_k[l] = malloc(n);
        t->hist_v[l] = malloc(n);
        memcpy(t->hist_k[l], s->hist_k[l], n);
        memcpy(t->hist_v[l], s->hist_v[l], n);
    }
    t->cache = okv_cache_fork(s->cache, err);
    return t->cache != NULL;
}

static void cache_level(okv_dtype dtype) {
    const okv_layer_geometry geo[3] = {{.n_kv_heads = 2, .head_dim = 8, .window = 0},
                                       {.n_kv_heads = 1, .head_dim = 16, .window = 6},
                                       {.n_kv_heads = 2, .head_dim = 8, .window = 3}};
    const int32_t heads[3] = {4, 2, 2};
    const okv_cache_config cfg = {.capacity = 128, .initial_capacity = 4, .max_write = 4, .dtype = dtype};
    const int32_t points[] = {0, 3, 4, 11, 30, 57, 8, 9};
    const double tol = dtype == OKV_F16 ? 2e-3 : 1e-5;
    for (size_t i = 0; i < sizeof points / sizeof points[0]; i++) {
        okv_error err;
        seqref a;
        CHECK(seq_init(&a, geo, heads, 3, &cfg, OKV_F32, 100 + i, &err), "init: %s", err.message);
        CHECK(seq_steps_to(&a, points[i], 3, &err), "to %d: %s", (int)points[i], err.message);
        if (points[i] == 57) {
            /* a rewind before the fork: the branch must keep the same limits */
            CHECK_STATUS(okv_cache_rewind(a.cache, 55, &err), OKV_OK, err);
            a.length = 55;
        }
        if (points[i] == 8 || points[i] == 9) {
            /* The rings wrapped many times, then a new history from 0 (a
             * rewind to 0, or a step at 0) shorter than the old one: the
             * fork must copy the new ring rows, not count them overwritten. */
            CHECK(seq_steps_to(&a, 40, 4, &err), "to 40: %s", err.message);
            if (points[i] == 8) {
                CHECK_STATUS(okv_cache_rewind(a.cache, 0, &err), OKV_OK, err);
                a.length = 0;
            } else {
                CHECK_STATUS(seq_step(&a, 0, 3, &err), OKV_OK, err);
            }
            CHECK(seq_steps_to(&a, points[i], 3, &err), "refill to %d: %s", (int)points[i], err.message);
            CHECK(okv_cache_high_water(a.cache) == points[i] && okv_cache_can_rewind(a.cache, points[i]),
                  "a new history from 0: high water %d, want %d", (int)okv_cache_high_water(a.cache), (int)points[i]);
        }
        seqref b;
        CHECK(seq_fork(&a, &b, 900 + i, &err), "fork at %d: %s", (int)points[i], err.message);
        CHECK(b.cache != a.cache && seq_same_rows(a.cache, b.cache), "fork at %d: rows differ", (int)points[i]);
        CHECK(seq_same_rewind_limits(a.cache, b.cache), "fork at %d: rewind limits differ", (int)points[i]);
        okv_cache_config bc;
        okv_cache_get_config(b.cache, &bc);
        CHECK(bc.capacity == cfg.capacity && bc.max_write == cfg.max_write && bc.dtype == dtype, "fork's config");
        /* Different steps on each branch, interleaved, different step sizes
         * (so flat layers grow at different times): each matches its own
         * reference, so neither saw the other's rows. */
        const int32_t end = points[i] + 40;
        bool ok = true;
        while (ok && (a.length < end || b.length < end)) {
            if (a.length < end) ok &= seq_steps_to(&a, a.length + 3 < end ? a.length + 3 : end, 3, &err);
            if (b.length < end) ok &= seq_steps_to(&b, b.length + 4 < end ? b.length + 4 : end, 4, &err);
        }
        CHECK(ok, "branch steps: %s", err.message);
        CHECK(a.max_err <= tol && b.max_err <= tol, "fork at %d (%s): branch errors %g, %g", (int)points[i],
              dtype == OKV_F16 ? "f16" : "f32", a.max_err, b.max_err);
        /* A rewind on one branch leaves the other's length and limits alone. */
        const int32_t la = okv_cache_length(a.cache);
        CHECK_STATUS(okv_cache_rewind(b.cache, okv_cache_length(b.cache) - 2, &err), OKV_OK, err);
        CHECK(okv_cache_length(a.cache) == la, "rewinding b moved a");
        seq_free(&a);
        /* The fork outlives its source. */
        b.length = okv_cache_length(b.cache);
        CHECK(seq_steps_to(&b, b.length + 5, 2, &err) && b.max_err <= tol, "b after a is gone: %s", err.message);
        seq_free(&b);
    }
}

static void api_errors(void) {
    const okv_layer_geometry geo[1] = {{.n_kv_heads = 1, .head_dim = 4, .window = 2}};
    const okv_cache_config cfg = {.capacity = 16, .max_write = 2, .dtype = OKV_F16};
    okv_error err;
    CHECK(okv_cache_fork(NULL, &err) == NULL && err.status == OKV_ERR_INVALID, "fork NULL");
    okv_cache *c = okv_cache_create(geo, 1, &cfg, &err);
    const int32_t pos[2] = {0, 1};
    okv_step *s = okv_step_begin(c, pos, 2, NULL, &err);
    CHECK(okv_cache_fork(c, &err) == NULL && err.status == OKV_ERR_BUSY, "fork with a step open: %s", err.message);
    char k[64], v[64];
    CHECK_STATUS(okv_cache_read_rows(c, 0, 0, 0, k, v, &err), OKV_ERR_BUSY, err);
    okv_step_abort(s);
    CHECK_STATUS(okv_cache_read_rows(c, 0, 0, 1, k, v, &err), OKV_ERR_POSITION, err); /* length 0 */
    CHECK(strstr(err.message, "positions 0..0"), "names the positions: %s", err.message);
    CHECK_STATUS(okv_cache_read_rows(c, 1, 0, 0, k, v, &err), OKV_ERR_INVALID, err);
    CHECK(strstr(err.message, "layer 1"), "names the layer: %s", err.message);
    CHECK_STATUS(okv_cache_read_rows(c, 0, 0, -1, k, v, &err), OKV_ERR_INVALID, err);
    CHECK(okv_cache_row_bytes(c, 0) == 8 && okv_cache_row_bytes(c, 1) == 0 && okv_cache_first_held(c, 1) == -1,
          "row bytes / first held of a bad layer");
    okv_cache_release(c);
}

/* ---- model level ---- */

static bool eval_all(okv_batch *b, okv_cache *c, const int32_t *toks, int32_t from, int32_t to, int32_t mw,
                     float *logits, int32_t V) {
    for (int32_t at = from; at < to; at += mw) {
        const int32_t n = to - at < mw ? to - at : mw;
        int32_t pos[64];
        for (int32_t i = 0; i < n; i++) pos[i] = at + i;
        okv_batch_seq s = {.cache = c, .tokens = toks + at, .positions = pos, .n_tokens = n,
                           .logits = logits ? logits + (size_t)(at - from) * V : NULL, .all_logits = true};
        okv_error err;
        okv_status st = okv_batch_eval(b, &s, 1, &err);
        CHECK_STATUS(st, OKV_OK, err);
        if (st) return false;
    }
    return true;
}

enum { P = 23, CONT = 30, MW = 5 };

static void model_level(const char *shared, const char *name) {
    char path[4096];
    snprintf(path, sizeof path, "%s/models/%s.gguf", shared, name);
    okv_error err;
    okv_model *m = okv_model_load(path, NULL, &err);
    if (!m) { CHECK(0, "load %s: %s", path, err.message); return; }
    const int32_t V = okv_model_n_vocab(m);
    okv_layer_geometry geo[64];
    const int32_t nl = okv_model_n_layers(m);
    for (int32_t i = 0; i < nl; i++) okv_model_layer_geometry(m, i, &geo[i]);
    const okv_cache_config cfg = {.capacity = 128, .initial_capacity = 8, .max_write = MW, .dtype = OKV_F16};
    okv_batch *b = okv_batch_create(m, 2 * MW, NULL, &err);
    int32_t x[P + CONT], y[P + CONT];
    uint64_t s = 5;
    for (int i = 0; i < P + CONT; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        x[i] = y[i] = 1 + (int32_t)((s >> 33) % (uint64_t)(V - 1));
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        if (i >= P) y[i] = 1 + (int32_t)((s >> 33) % (uint64_t)(V - 1));
    }
    float *la = malloc(sizeof(float) * V * CONT), *lb = malloc(sizeof(float) * V * CONT);
    float *ra = malloc(sizeof(float) * V * CONT), *rb = malloc(sizeof(float) * V * CONT);
    okv_cache *a = okv_cache_create(geo, nl, &cfg, &err);
    eval_all(b, a, x, 0, P, MW, NULL, V);
    okv_cache *f = okv_cache_fork(a, &err);
    CHECK(f != NULL, "%s: fork: %s", name, err.message);
    /* Interleaved, one token at a time, both in one batched eval. */
    for (int32_t p = P; p < P + CONT && f; p++) {
        okv_batch_seq seqs[2] = {
            {.cache = a, .tokens = &x[p], .positions = &p, .n_tokens = 1, .logits = la + (size_t)(p - P) * V},
            {.cache = f, .tokens = &y[p], .positions = &p, .n_tokens = 1, .logits = lb + (size_t)(p - P) * V}};
        okv_status st = okv_batch_eval(b, seqs, 2, &err);
        CHECK_STATUS(st, OKV_OK, err);
    }
    /* Fresh runs of each branch alone, prompt in the same chunks, then one token at a time. */
    okv_cache *fa = okv_cache_create(geo, nl, &cfg, &err), *fb = okv_cache_create(geo, nl, &cfg, &err);
    eval_all(b, fa, x, 0, P, MW, NULL, V);
    eval_all(b, fb, y, 0, P, MW, NULL, V);
    eval_all(b, fa, x, P, P + CONT, 1, ra, V);
    eval_all(b, fb, y, P, P + CONT, 1, rb, V);
    CHECK(memcmp(la, ra, sizeof(float) * V * CONT) == 0, "%s: branch a differs from a fresh run of it", name);
    CHECK(memcmp(lb, rb, sizeof(float) * V * CONT) == 0, "%s: branch b (the fork) differs from a fresh run of it", name);
    CHECK(memcmp(la, lb, sizeof(float) * V) != 0, "%s: the branches' tokens should give different logits", name);
    printf("%-18s fork after %d tokens, %d different tokens on each branch: both bit-identical to fresh runs\n", name,
           P, CONT);
    okv_cache_release(a);
    okv_cache_release(f);
    okv_cache_release(fa);
    okv_cache_release(fb);
    free(la), free(lb), free(ra), free(rb);
    okv_batch_free(b);
    okv_model_free(m);
}

int main(void) {
    cache_level(OKV_F16);
    cache_level(OKV_F32);
    api_errors();
    const char *shared = check_shared_dir();
    if (!shared) {
        printf("skipped (forks on real models): ../shared not found\n");
        return check_done();
    }
    const char *models[] = {"stories260K", "tiny-llama", "tiny-gemma3", "tiny-gemma3-allswa", "tiny-muse-glimmer",
                            "tiny-qwen2", "tiny-qwen3", "tiny-smollm3", "tiny-gemma2", "tiny-phi3"};
    for (size_t i = 0; i < sizeof models / sizeof models[0]; i++) model_level(shared, models[i]);
    return check_done();
}
