/* Llama-architecture models against llama.cpp's logits (../shared/golden):
 * 121 tokens in chunks of 16 and of 121, f32 and f16 KV; greedy generation
 * from "Once upon a time"; chunked vs unchunked; a prefill context and a
 * decode context sharing one registry cache. */
#include "check.h"
#include "golden.h"
#include "offkv/offkv.h"
#include "offkv/context.h"

#include "golden_run.h"

/* A prefill context (chunks of 16) and a decode context share one registry
 * cache; their logits equal one context's. */
static void shared_cache_case(void) {
    char path[1024], json_path[1024];
    snprintf(path, sizeof path, "%s/models/stories260K.gguf", shared);
    snprintf(json_path, sizeof json_path, "%s/golden/stories260K.seq121.seed42.chunk16.kvf32_faoff.json", shared);
    char *json = golden_read(json_path, NULL);
    int tokens[200];
    int n = json ? golden_ints(json, "tokens", tokens, 200) : -1;
    okv_error err;
    okv_model *m = okv_model_load(path, NULL, &err);
    if (!m || n != 121) { CHECK(0, "shared cache setup"); okv_model_free(m); free(json); return; }
    const int V = okv_model_n_vocab(m);
    okv_layer_geometry geo[64];
    for (int i = 0; i < okv_model_n_layers(m); i++) okv_model_layer_geometry(m, i, &geo[i]);
    okv_cache_config cfg = {.capacity = 256, .initial_capacity = 4, .max_write = 16, .dtype = OKV_F32};
    okv_factory *f = okv_factory_create();
    okv_register_cpu_cache_builders(f, &err);
    okv_cache *c = okv_factory_build(f, "cpu", "single", geo, okv_model_n_layers(m), &cfg, &err);
    okv_registry *r = okv_registry_create();
    okv_registry_install(r, "seq", c, &err);
    okv_cache_release(c);
    const char *popts[] = {"llm_cache_registry_key", "seq", NULL};
    const char *dopts[] = {"llm_cache_registry_key", "seq", "max_write", "1", NULL};
    okv_context *pre = okv_context_create(m, popts, r, &err);
    CHECK(pre != NULL, "prefill context: %s", err.message);
    okv_context *dec = okv_context_create(m, dopts, r, &err);
    CHECK(dec != NULL, "decode context: %s", err.message);
    float *ours = malloc(sizeof(float) * 121 * V);
    int32_t pos[128];
    for (int i = 0; i < 121; i++) pos[i] = i;
    int ok = pre && dec;
    for (int s = 0; ok && s < 96; s += 16) ok = !okv_context_eval(pre, tokens + s, pos + s, 16, ours + (size_t)s * V, &err);
    for (int s = 96; ok && s < 121; s++) ok = !okv_context_eval(dec, tokens + s, pos + s, 1, ours + (size_t)s * V, &err);
    CHECK(ok, "shared eval: %s", err.message);
    CHECK(okv_cache_length(okv_registry_get(r, "seq")) == 121, "shared length");
    float *one = eval_all(m, tokens, 121, 16, "f32", 1);
    if (ok && one) {
        golden_cmp d = golden_compare(ours, one, 121, V);
        CHECK(d.max_diff <= 1e-5 * (d.max_abs > 1 ? d.max_abs : 1), "shared-cache contexts differ by %g", d.max_diff);
    }
    /* Option and key errors name what is wrong. */
    const char *bad_key[] = {"llm_cache_registry_key", "nope", NULL};
    CHECK(okv_context_create(m, bad_key, r, &err) == NULL && err.status == OKV_ERR_NOT_FOUND &&
              strstr(err.message, "nope"), "missing key: %s", err.message);
    const char *bad_opt[] = {"n_thread", "2", NULL};
    CHECK(okv_context_create(m, bad_opt, r, &err) == NULL && err.status == OKV_ERR_INVALID &&
              strstr(err.message, "n_thread"), "unknown option: %s", err.message);
    okv_layer_geometry wrong[64];
    memcpy(wrong, geo, sizeof geo);
    wrong[2].head_dim = 4;
    okv_cache *w = okv_cache_create(wrong, okv_model_n_layers(m), &cfg, &err);
    okv_registry_install(r, "wrong", w, &err);
    okv_cache_release(w);
    const char *wrong_opts[] = {"llm_cache_registry_key", "wrong", NULL};
    CHECK(okv_context_create(m, wrong_opts, r, &err) == NULL && err.status == OKV_ERR_INVALID &&
              strstr(err.message, "layer 2"), "geometry mismatch: %s", err.message);
    free(one);
    free(ours);
    okv_context_free(pre);
    okv_context_free(dec);
    okv_registry_free(r);
    okv_factory_free(f);
    okv_model_free(m);
    free(json);
}

int main(void) {
    shared = check_shared_dir();
    if (!shared) { printf("skipped: ../shared not found\n"); return CHECK_SKIP; }
    const char *models[] = {"stories260K", "tiny-llama"};
    for (int i = 0; i < 2; i++) {
        seq_case(models[i], 16, "f32");
        seq_case(models[i], 121, "f32");
        seq_case(models[i], 16, "f16");
        seq_case(models[i], 121, "f16");
        gen_case(models[i]);
    }
    shared_cache_case();
    return check_done();
}
