/* Contexts: one stream of evaluation over a sequence cache.  An eval is
 * the one-sequence case of a batched eval: the context's batch holds all
 * working memory, allocated at creation for max_write tokens, so an eval
 * allocates nothing. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/options.h"
#include "engine/engine_impl.h"
#include "model/model_impl.h"
#include "offkv/batch.h"
#include "offkv/context.h"

struct okv_context {
    okv_model *model;
    okv_cache *cache;          /* own reference */
    okv_threadpool *pool;
    int32_t max_write;
    uint64_t generation;       /* the cache's, when last seen */
    okv_batch *batch;          /* working memory for max_write rows */
};

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
        char name[160];
        snprintf(name, sizeof name, "context: cache '%.100s'", key);
        if ((st = okv_engine_cache_fits(m, c, name, err))) return st;
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
    else if (kv && strcmp(kv, "q8_0") == 0) cfg.dtype = OKV_Q8_0;
    else if (kv) return okv_fail(err, OKV_ERR_INVALID, "context: kv_type '%.40s' (expected f16, f32 or q8_0)", kv);
    okv_layer_geometry *geo = malloc(sizeof *geo * (size_t)m->n_layer);
    if (!geo) return okv_fail(err, OKV_ERR_NOMEM, "context: out of memory");
    for (int32_t i = 0; i < m->n_layer; i++) okv_model_layer_geometry(m, i, &geo[i]);
    ctx->cache = okv_cache_create(geo, m->n_layer, &cfg, err);
    free(geo);
    if (!ctx->cache) return err ? err->status : OKV_ERR_INVALID;
    ctx->max_write = cfg.max_write;
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
    if (bind_cache(ctx, options, registry, err)) goto fail;
    if (!(ctx->pool = okv_threadpool_create(n_threads, err))) goto fail;
    if (!(ctx->batch = okv_batch_create(model, ctx->max_write, ctx->pool, err))) goto fail;
    ctx->generation = okv_cache_generation(ctx->cache);
    okv_error_clear(err);
    return ctx;
fail:
    okv_context_free(ctx);
    return NULL;
}

void okv_context_free(okv_context *ctx) {
    if (!ctx) return;
    okv_batch_free(ctx->batch);
    okv_threadpool_free(ctx->pool);
    okv_cache_release(ctx->cache);
    free(ctx);
}

okv_cache *okv_context_cache(okv_context *ctx) { return ctx ? ctx->cache : NULL; }
int32_t okv_context_max_write(const okv_context *ctx) { return ctx ? ctx->max_write : 0; }
const okv_model *okv_context_model(const okv_context *ctx) { return ctx ? ctx->model : NULL; }

static okv_status eval(okv_context *ctx, const int32_t *tokens, const int32_t *positions, int32_t n,
                       float *logits, bool all_rows, okv_error *err) {
    if (!ctx || !tokens || !positions) return okv_fail(err, OKV_ERR_INVALID, "eval: NULL argument");
    if (n < 1) return okv_fail(err, OKV_ERR_INVALID, "eval: n %d < 1", (int)n);
    if (n > ctx->max_write)
        return okv_fail(err, OKV_ERR_POSITION, "eval: %d tokens exceed this context's max_write %d", (int)n,
                        (int)ctx->max_write);
    const int32_t n_vocab = okv_model_n_vocab(ctx->model);
    for (int32_t i = 0; i < n; i++)
        if (tokens[i] < 0 || tokens[i] >= n_vocab)
            return okv_fail(err, OKV_ERR_INVALID, "eval: token %d at index %d is outside the vocabulary (%d)",
                            (int)tokens[i], (int)i, (int)n_vocab);
    const okv_batch_seq seq = {.cache = ctx->cache, .tokens = tokens, .positions = positions, .n_tokens = n,
                               .logits = logits, .all_logits = all_rows};
    okv_status st = okv_batch_eval(ctx->batch, &seq, 1, err);
    /* Another context sharing the cache may have grown it; steps retain the
     * storage they use, so there is nothing to rebind: just note it. */
    ctx->generation = okv_cache_generation(ctx->cache);
    return st;
}

okv_status okv_context_eval(okv_context *ctx, const int32_t *tokens, const int32_t *positions, int32_t n,
                            float *logits_out, okv_error *err) {
    return eval(ctx, tokens, positions, n, logits_out, true, err);
}

okv_status okv_context_eval_last(okv_context *ctx, const int32_t *tokens, const int32_t *positions,
                                 int32_t n, float *logits_out, okv_error *err) {
    return eval(ctx, tokens, positions, n, logits_out, false, err);
}
