/* Test support: running a shared model against its llama.cpp goldens.
 * Include after check.h and golden.h; set golden_shared first. */
#ifndef OKV_TESTS_GOLDEN_RUN_H
#define OKV_TESTS_GOLDEN_RUN_H

#include "offkv/offkv.h"

static const char *shared; /* the ../shared folder */

static float *eval_all(okv_model *m, const int *tokens, int n, int chunk, const char *kv, int threads) {
    char chunk_s[16], thr_s[16];
    snprintf(chunk_s, sizeof chunk_s, "%d", chunk);
    snprintf(thr_s, sizeof thr_s, "%d", threads);
    const char *opts[] = {"max_write", chunk_s, "kv_type", kv, "n_threads", thr_s, "capacity", "256",
                          "initial_capacity", "1", NULL};
    okv_error err;
    okv_context *ctx = okv_context_create(m, opts, NULL, &err);
    if (!ctx) { CHECK(0, "context: %s", err.message); return NULL; }
    const int V = okv_model_n_vocab(m);
    float *logits = malloc(sizeof(float) * (size_t)n * V);
    for (int s = 0; s < n; s += chunk) {
        int len = n - s < chunk ? n - s : chunk, pos[512];
        for (int i = 0; i < len; i++) pos[i] = s + i;
        okv_status st = okv_context_eval(ctx, tokens + s, pos, len, logits + (size_t)s * V, &err);
        if (st) { CHECK(0, "eval at %d: %s", s, err.message); free(logits); logits = NULL; break; }
    }
    okv_context_free(ctx);
    return logits;
}

__attribute__((unused)) static void seq_case(const char *model, int chunk, const char *kv) {
    char path[1024], json_path[1024], f32_path[1024];
    const char *kvname = strcmp(kv, "f32") == 0 ? "kvf32_faoff" : "kvf16_faauto";
    snprintf(path, sizeof path, "%s/models/%s.gguf", shared, model);
    snprintf(json_path, sizeof json_path, "%s/golden/%s.seq121.seed42.chunk%d.%s.json", shared, model, chunk, kvname);
    snprintf(f32_path, sizeof f32_path, "%s/golden/%s.seq121.seed42.chunk%d.%s.f32", shared, model, chunk, kvname);
    char *json = golden_read(json_path, NULL);
    size_t ref_bytes;
    float *ref = (float *)golden_read(f32_path, &ref_bytes);
    int tokens[200];
    int n = json ? golden_ints(json, "tokens", tokens, 200) : -1;
    CHECK(json && ref && n == 121, "golden %s: n=%d", json_path, n);
    okv_error err;
    okv_model *m = okv_model_load(path, NULL, &err);
    CHECK(m != NULL, "load %s: %s", path, err.message);
    if (m && json && ref && n == 121) {
        const int V = okv_model_n_vocab(m);
        CHECK(ref_bytes == sizeof(float) * 121 * (size_t)V, "golden size %zu", ref_bytes);
        float *ours = eval_all(m, tokens, n, chunk, kv, 2);
        if (ours) {
            golden_cmp c = golden_compare(ours, ref, n, V);
            double tol = strcmp(kv, "f32") == 0 ? 1e-3 * (c.max_abs > 1 ? c.max_abs : 1) : 0.1;
            printf("%-14s chunk %3d kv %s: max |diff| %.3g (max |logit| %.3g, tolerance %.3g), argmax mismatches %d\n",
                   model, chunk, kv, c.max_diff, c.max_abs, tol, c.argmax_mismatch);
            CHECK(c.max_diff <= tol, "%s chunk %d kv %s: max diff %g > %g", model, chunk, kv, c.max_diff, tol);
            CHECK(c.argmax_mismatch == 0, "%s: %d argmax mismatches", model, c.argmax_mismatch);
            /* Chunked and unchunked evaluation agree with each other too. */
            float *other = eval_all(m, tokens, n, chunk == 16 ? 121 : 16, kv, 1);
            if (other) {
                golden_cmp d = golden_compare(ours, other, n, V);
                /* Same bound as against llama.cpp: gemma3's f16 GELU table turns
                 * last-bit differences of a different query blocking into steps
                 * of ~1e-3 relative. */
                CHECK(d.max_diff <= 1e-3 * (d.max_abs > 1 ? d.max_abs : 1), "chunked vs unchunked differ by %g", d.max_diff);
                printf("%-14s chunk %3d vs %3d kv %s: max |diff| %.3g\n", model, chunk, chunk == 16 ? 121 : 16, kv, d.max_diff);
                free(other);
            }
            free(ours);
        }
    }
    okv_model_free(m);
    free(json);
    free(ref);
}

__attribute__((unused)) static void gen_case(const char *model) {
    char path[1024], json_path[1024];
    snprintf(path, sizeof path, "%s/models/%s.gguf", shared, model);
    snprintf(json_path, sizeof json_path, "%s/golden/%s.gen64.kvf32_faoff.json", shared, model);
    char *json = golden_read(json_path, NULL);
    int prompt[64], want[128];
    int np = json ? golden_ints(json, "prompt_tokens", prompt, 64) : -1;
    int ng = json ? golden_ints(json, "generated_tokens", want, 128) : -1;
    okv_error err;
    okv_model *m = okv_model_load(path, NULL, &err);
    CHECK(m && np > 0 && ng >= 63, "gen setup %s: %s", model, m ? "" : err.message);
    if (m && np > 0 && ng >= 63) {
        /* The tokenizer reproduces the prompt's ids. */
        int32_t ids[64];
        size_t n_ids = 0;
        const okv_tokenizer *tok = okv_model_tokenizer(m);
        okv_status st = okv_tokenizer_encode(tok, "Once upon a time", 16, OKV_TOKENIZE_ADD_SPECIAL, ids, 64, &n_ids, &err);
        int same = st == OKV_OK && (int)n_ids == np;
        for (int i = 0; same && i < np; i++) same = ids[i] == prompt[i];
        CHECK(same, "%s: prompt tokenizes differently (%zu ids)", model, n_ids);

        const char *opts[] = {"max_write", "16", "kv_type", "f32", "capacity", "256", NULL};
        okv_context *ctx = okv_context_create(m, opts, NULL, &err);
        const int V = okv_model_n_vocab(m);
        float *logits = malloc(sizeof(float) * V);
        int32_t toks[256], pos[256];
        for (int i = 0; i < np; i++) { toks[i] = prompt[i]; pos[i] = i; }
        int n = np, matched = 0;
        okv_context_eval_last(ctx, toks, pos, np, logits, &err);
        for (int g = 0; g < ng; g++) {
            int best = 0;
            for (int j = 1; j < V; j++) if (logits[j] > logits[best]) best = j;
            if (best != want[g]) break;
            matched++;
            toks[n] = best; pos[n] = n;
            if (okv_context_eval_last(ctx, &toks[n], &pos[n], 1, logits, &err)) break;
            n++;
        }
        printf("%-14s greedy: %d of %d generated tokens match llama.cpp\n", model, matched, ng);
        CHECK(matched >= 63, "%s: only %d greedy tokens match", model, matched);
        free(logits);
        okv_context_free(ctx);
    }
    okv_model_free(m);
    free(json);
}

#endif
