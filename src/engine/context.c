/* Contexts: one stream of evaluation over a sequence cache.  All working
 * memory is allocated here, at creation, for max_write tokens, so an eval
 * allocates nothing. */
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/options.h"
#include "kernels/matmul.h"
#include "kernels/ops.h"
#include "kernels/quant.h"
#include "model/model_impl.h"
#include "offkv/context.h"

struct okv_context {
    okv_model *model;
    okv_cache *cache;          /* own reference */
    okv_threadpool *pool;
    int32_t max_write;
    uint64_t generation;       /* the cache's, when last seen */
    okv_fwd fwd;               /* buffers, reused by every eval */
    float *last_logits;        /* n_vocab, for eval_last */
    void *block;               /* one allocation behind every buffer */
};

static okv_status geometry_matches(const okv_model *m, const okv_cache *c, const char *key, okv_error *err) {
    if (okv_cache_n_layers(c) != m->n_layer)
        return okv_fail(err, OKV_ERR_INVALID, "context: cache '%s' has %d layers, the model %d", key,
                        (int)okv_cache_n_layers(c), (int)m->n_layer);
    for (int32_t i = 0; i < m->n_layer; i++) {
        okv_layer_geometry a, b;
        okv_cache_layer_geometry(c, i, &a);
        okv_model_layer_geometry(m, i, &b);
        if (a.n_kv_heads != b.n_kv_heads || a.head_dim != b.head_dim || a.window != b.window)
            return okv_fail(err, OKV_ERR_INVALID,
                            "context: cache '%s' layer %d is (kv heads %d, head dim %d, window %d), the "
                            "model needs (%d, %d, %d)",
                            key, (int)i, (int)a.n_kv_heads, (int)a.head_dim, (int)a.window,
                            (int)b.n_kv_heads, (int)b.head_dim, (int)b.window);
    }
    return OKV_OK;
}

static okv_status bind_cache(okv_context *ctx, const char *const *options, okv_registry *registry,
                             okv_error *err) {
    const okv_model *m = ctx->model;
    const char *key = okv_option_get(options, "llm_cache_registry_key");
    okv_status st;
    if (key) {
        static const char *const own_only[] = {"capacity", "initial_capacity", "kv_type", NULL};
        for (size_t i = 0; own_only[i]; i++)
            if (okv_option_get(options, own_only[i]))
                return okv_fail(err, OKV_ERR_INVALID,
                                "context: option '%s' configures an own cache; with llm_cache_registry_key "
                                "the cache '%s' is used as installed",
                                own_only[i], key);
        if (!registry)
            return okv_fail(err, OKV_ERR_INVALID, "context: llm_cache_registry_key '%s' given without a registry", key);
        okv_cache *c = okv_registry_get(registry, key);
        if (!c) return okv_fail(err, OKV_ERR_NOT_FOUND, "context: no cache installed under key '%s'", key);
        if ((st = geometry_matches(m, c, key, err))) return st;
        okv_cache_config cfg;
        okv_cache_get_config(c, &cfg);
        ctx->max_write = cfg.max_write;
        if ((st = okv_option_int(options, "max_write", 1, cfg.max_write, &ctx->max_write, err))) return st;
        ctx->cache = okv_cache_retain(c);
        return OKV_OK;
    }
    okv_cache_config cfg = {.capacity = m->n_ctx_train < 4096 ? m->n_ctx_train : 4096,
                            .initial_capacity = 256, .max_write = 512, .dtype = OKV_F16};
    if ((st = okv_option_int(options, "capacity", 1, 1 << 30, &cfg.capacity, err))) return st;
    if ((st = okv_option_int(options, "initial_capacity", 0, 1 << 30, &cfg.initial_capacity, err))) return st;
    if (cfg.max_write > cfg.capacity) cfg.max_write = cfg.capacity;
    if ((st = okv_option_int(options, "max_write", 1, 1 << 20, &cfg.max_write, err))) return st;
    /* No step can write more positions than the cache holds: do not size buffers for more. */
    if (cfg.max_write > cfg.capacity) cfg.max_write = cfg.capacity;
    const char *kv = okv_option_get(options, "kv_type");
    if (kv && strcmp(kv, "f16") == 0) cfg.dtype = OKV_F16;
    else if (kv && strcmp(kv, "f32") == 0) cfg.dtype = OKV_F32;
    else if (kv) return okv_fail(err, OKV_ERR_INVALID, "context: kv_type '%.40s' (expected f16 or f32)", kv);
    okv_layer_geometry *geo = malloc(sizeof *geo * (size_t)m->n_layer);
    if (!geo) return okv_fail(err, OKV_ERR_NOMEM, "context: out of memory");
    for (int32_t i = 0; i < m->n_layer; i++) okv_model_layer_geometry(m, i, &geo[i]);
    ctx->cache = okv_cache_create(geo, m->n_layer, &cfg, err);
    free(geo);
    if (!ctx->cache) return err ? err->status : OKV_ERR_INVALID;
    ctx->max_write = cfg.max_write;
    return OKV_OK;
}

static size_t max_size(size_t a, size_t b) { return a > b ? a : b; }

static size_t scratch_for(const okv_weight *w, int32_t n) {
    return w->data ? okv_matmul_scratch_bytes(w->type, w->ne0, n) : 0;
}

/* Carves every buffer out of one allocation, 64-byte aligned each. */
static okv_status alloc_buffers(okv_context *ctx, okv_error *err) {
    const okv_model *m = ctx->model;
    const size_t T = (size_t)ctx->max_write;
    size_t q_w = 0, kv_w = 0;
    for (int32_t i = 0; i < m->n_layer; i++) {
        q_w = max_size(q_w, (size_t)m->layer[i].n_head * m->layer[i].head_dim);
        kv_w = max_size(kv_w, (size_t)m->layer[i].n_head_kv * m->layer[i].head_dim);
    }
    const size_t wide = max_size((size_t)m->n_embd, q_w);
    size_t scratch = scratch_for(&m->output, ctx->max_write);
    for (int32_t i = 0; i < m->n_layer; i++) {
        const okv_layer_weights *w = &m->w[i];
        const okv_weight *all[] = {&w->wq, &w->wk, &w->wv, &w->wqkv, &w->wo, &w->attn_gate,
                                   &w->ffn_gate, &w->ffn_up, &w->ffn_down};
        for (size_t j = 0; j < sizeof all / sizeof all[0]; j++)
            scratch = max_size(scratch, scratch_for(all[j], ctx->max_write));
    }
    const size_t floats[] = {
        T * m->n_embd,  /* x */
        T * wide,       /* xb */
        T * wide,       /* xb2 */
        T * q_w,        /* q */
        T * kv_w,       /* k */
        T * kv_w,       /* v */
        T * q_w,        /* att */
        T * q_w,        /* gate */
        T * (q_w + 2 * kv_w), /* qkv */
        T * m->n_ff,    /* hb */
        T * m->n_ff,    /* hb2 */
        (size_t)m->n_vocab, /* last logits */
    };
    const size_t n_buf = sizeof floats / sizeof floats[0];
    size_t total = (scratch + 63) & ~(size_t)63;
    for (size_t i = 0; i < n_buf; i++) total += (floats[i] * sizeof(float) + 63) & ~(size_t)63;
    ctx->block = aligned_alloc(64, total ? total : 64);
    if (!ctx->block) return okv_fail(err, OKV_ERR_NOMEM, "context: out of memory for %zu bytes of buffers", total);
    char *p = ctx->block;
    float **dst[] = {&ctx->fwd.x, &ctx->fwd.xb, &ctx->fwd.xb2, &ctx->fwd.q, &ctx->fwd.k, &ctx->fwd.v,
                     &ctx->fwd.att, &ctx->fwd.gate, &ctx->fwd.qkv, &ctx->fwd.hb, &ctx->fwd.hb2,
                     &ctx->last_logits};
    for (size_t i = 0; i < n_buf; i++) {
        *dst[i] = (float *)p;
        p += (floats[i] * sizeof(float) + 63) & ~(size_t)63;
    }
    ctx->fwd.mm_scratch = p;
    return OKV_OK;
}

okv_context *okv_context_create(okv_model *model, const char *const *options, okv_registry *registry,
                                okv_error *err) {
    static const char *const known[] = {"llm_cache_registry_key", "capacity", "initial_capacity",
                                        "max_write", "kv_type", "n_threads", NULL};
    if (!model) { okv_fail(err, OKV_ERR_INVALID, "context: model is NULL"); return NULL; }
    if (okv_options_check(options, known, "context", err)) return NULL;
    int32_t n_threads = 1;
    if (okv_option_int(options, "n_threads", 1, 1024, &n_threads, err)) return NULL;
    okv_context *ctx = calloc(1, sizeof *ctx);
    if (!ctx) { okv_fail(err, OKV_ERR_NOMEM, "context: out of memory"); return NULL; }
    ctx->model = model;
    if (bind_cache(ctx, options, registry, err) || alloc_buffers(ctx, err)) goto fail;
    ctx->pool = okv_threadpool_create(n_threads, err);
    if (!ctx->pool) goto fail;
    ctx->generation = okv_cache_generation(ctx->cache);
    ctx->fwd.m = model;
    ctx->fwd.pool = ctx->pool;
    okv_error_clear(err);
    return ctx;
fail:
    okv_context_free(ctx);
    return NULL;
}

void okv_context_free(okv_context *ctx) {
    if (!ctx) return;
    okv_threadpool_free(ctx->pool);
    okv_cache_release(ctx->cache);
    free(ctx->block);
    free(ctx);
}

okv_cache *okv_context_cache(okv_context *ctx) { return ctx ? ctx->cache : NULL; }
int32_t okv_context_max_write(const okv_context *ctx) { return ctx ? ctx->max_write : 0; }
const okv_model *okv_context_model(const okv_context *ctx) { return ctx ? ctx->model : NULL; }

/* Final scaling and soft-capping of n rows of logits. */
static void finish_logits(const okv_model *m, float *logits, int32_t rows) {
    const int64_t n = (int64_t)rows * m->n_vocab;
    if (m->logit_scale != 1.0f) okv_scale(logits, logits, m->logit_scale, n);
    if (m->final_softcap > 0.0f) okv_softcap(logits, logits, n, m->final_softcap);
}

static okv_status eval(okv_context *ctx, const int32_t *tokens, const int32_t *positions, int32_t n,
                       float *logits, bool all_rows, okv_error *err) {
    if (!ctx || !tokens || !positions) return okv_fail(err, OKV_ERR_INVALID, "eval: NULL argument");
    const okv_model *m = ctx->model;
    if (n < 1) return okv_fail(err, OKV_ERR_INVALID, "eval: n %d < 1", (int)n);
    if (n > ctx->max_write)
        return okv_fail(err, OKV_ERR_POSITION, "eval: %d tokens exceed this context's max_write %d", (int)n,
                        (int)ctx->max_write);
    for (int32_t i = 0; i < n; i++)
        if (tokens[i] < 0 || tokens[i] >= m->n_vocab)
            return okv_fail(err, OKV_ERR_INVALID, "eval: token %d at index %d is outside the vocabulary (%d)",
                            (int)tokens[i], (int)i, (int)m->n_vocab);
    okv_fwd *f = &ctx->fwd;
    f->step = okv_step_begin(ctx->cache, positions, n, ctx->pool, err);
    if (!f->step) return err ? err->status : OKV_ERR_INVALID;
    /* Another context sharing the cache may have grown it; steps retain the
     * storage they use, so there is nothing to rebind: just note it. */
    ctx->generation = okv_cache_generation(ctx->cache);
    f->n = n;
    f->pos = positions;
    f->err = err;
    const size_t row_bytes = okv_ggml_row_size(m->tok_embd.type, m->n_embd);
    for (int32_t t = 0; t < n; t++) {
        float *x = f->x + (size_t)t * m->n_embd;
        okv_dequantize_row(m->tok_embd.type, (const char *)m->tok_embd.data + (size_t)tokens[t] * row_bytes, x,
                           m->n_embd);
        if (m->embd_scale != 1.0f) okv_scale(x, x, m->embd_scale, m->n_embd);
    }
    okv_status st = m->forward(f);
    if (st == OKV_OK) st = okv_step_commit(f->step, err);
    if (st != OKV_OK) {
        okv_step_abort(f->step);
        f->step = NULL;
        return st;
    }
    f->step = NULL;
    if (!logits) return OKV_OK;
    const float *x = all_rows ? f->x : f->x + (size_t)(n - 1) * m->n_embd;
    const int32_t rows = all_rows ? n : 1;
    if ((st = okv_fwd_matmul(f, &m->output, x, rows, logits))) return st;
    finish_logits(m, logits, rows);
    okv_error_clear(err);
    return OKV_OK;
}

okv_status okv_context_eval(okv_context *ctx, const int32_t *tokens, const int32_t *positions, int32_t n,
                            float *logits_out, okv_error *err) {
    return eval(ctx, tokens, positions, n, logits_out, true, err);
}

okv_status okv_context_eval_last(okv_context *ctx, const int32_t *tokens, const int32_t *positions,
                                 int32_t n, float *logits_out, okv_error *err) {
    return eval(ctx, tokens, positions, n, logits_out, false, err);
}
