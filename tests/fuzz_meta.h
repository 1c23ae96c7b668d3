/* Test support for the metadata fuzz tests: a copy of a shared model with
 * one metadata key replaced (tests/gguf_copy.h), loaded, given a context and
 * 3 tokens; a case says whether it must be refused (load or context creation
 * fails with a status and a message naming the key) or must run with finite
 * logits. */
#ifndef OKV_TESTS_FUZZ_META_H
#define OKV_TESTS_FUZZ_META_H

#include <math.h>
#include <stdint.h>

#include "check.h"
#include "gguf_copy.h"
#include "offkv/offkv.h"

static const char *shared;
/* Set by the test: where variants are written (under build/). */
static const char *tmp;

enum { V_DROP, V_U32, V_I32, V_U64, V_F32, V_STR, V_BOOLS, V_U32S, V_I32S, V_VOCAB };
enum { REFUSE, RUN };

typedef struct meta_case {
    const char *model;   /* under shared/models, without .gguf */
    const char *key;     /* full key, replaced (or dropped) */
    int type;
    double num;          /* the value (scalars), or element value (arrays) */
    int n;               /* array length */
    int expect;          /* REFUSE or RUN */
    const char *needle;  /* what a refusal's message must name (NULL: the key's last part) */
} meta_case;

/* Writes the model with key replaced as c says. */
static int write_variant(const meta_case *c) {
    char path[1024];
    snprintf(path, sizeof path, "%s/models/%s.gguf", shared, c->model);
    okv_error err;
    okv_gguf *g = okv_gguf_open(path, &err);
    if (!g) return 0;
    okv_gguf_writer *w = okv_gguf_writer_create(&err);
    const char *skip_one[] = {c->key, NULL};
    const char *skip_vocab[] = {"tokenizer.ggml.tokens", "tokenizer.ggml.scores", "tokenizer.ggml.token_type", NULL};
    int ok = copy_metadata_except(g, w, c->type == V_VOCAB ? skip_vocab : skip_one);
    okv_status st = OKV_OK;
    const char *k = c->key;
    switch (c->type) {
    case V_DROP: break;
    case V_U32: st = okv_gguf_writer_add_u32(w, k, (uint32_t)c->num, &err); break;
    case V_I32: st = okv_gguf_writer_add_i32(w, k, (int32_t)c->num, &err); break;
    case V_U64: st = okv_gguf_writer_add_u64(w, k, (uint64_t)c->num, &err); break;
    case V_F32: st = okv_gguf_writer_add_f32(w, k, (float)c->num, &err); break;
    case V_STR: st = okv_gguf_writer_add_str(w, k, "none", &err); break;
    case V_BOOLS: {
        bool b[64];
        for (int i = 0; i < c->n; i++) b[i] = i % 4 != 3;
        st = okv_gguf_writer_add_array(w, k, OKV_GGUF_BOOL, b, (uint64_t)c->n, &err);
        break;
    }
    case V_VOCAB: { /* the vocabulary arrays cut or padded to n entries */
        const int n = c->n, all = c->num == 0;
        char **tok = calloc((size_t)n, sizeof *tok);
        float *sc = calloc((size_t)n, sizeof *sc);
        int32_t *ty = calloc((size_t)n, sizeof *ty);
        uint64_t n_old = 0;
        okv_gguf_get_array(g, "tokenizer.ggml.tokens", NULL, &n_old, &err);
        for (int i = 0; i < n; i++) {
            const char *p;
            size_t len;
            int64_t t = 1;
            if ((uint64_t)i < n_old) {
                okv_gguf_array_str(g, "tokenizer.ggml.tokens", (uint64_t)i, &p, &len, &err);
                tok[i] = strndup(p, len);
                okv_gguf_array_f32(g, "tokenizer.ggml.scores", (uint64_t)i, &sc[i], &err);
                okv_gguf_array_i64(g, "tokenizer.ggml.token_type", (uint64_t)i, &t, &err);
            } else {
                tok[i] = malloc(32);
                snprintf(tok[i], 32, "<extra_%d>", i);
            }
            ty[i] = (int32_t)t;
        }
        const uint64_t n_other = all ? (uint64_t)n : n_old < (uint64_t)n ? n_old : (uint64_t)n;
        st = okv_gguf_writer_add_array(w, "tokenizer.ggml.tokens", OKV_GGUF_STRING, tok, (uint64_t)n, &err);
        if (!st) st = okv_gguf_writer_add_array(w, "tokenizer.ggml.scores", OKV_GGUF_F32, sc, n_other, &err);
        if (!st) st = okv_gguf_writer_add_array(w, "tokenizer.ggml.token_type", OKV_GGUF_I32, ty, n_other, &err);
        for (int i = 0; i < n; i++) free(tok[i]);
        free(tok);
        free(sc);
        free(ty);
        break;
    }
    case V_U32S: case V_I32S: {
        int32_t v[64];
        for (int i = 0; i < c->n; i++) v[i] = (int32_t)c->num;
        st = okv_gguf_writer_add_array(w, k, c->type == V_U32S ? OKV_GGUF_U32 : OKV_GGUF_I32, v,
                                       (uint64_t)c->n, &err);
        break;
    }
    }
    ok = ok && st == OKV_OK && copy_tensors(g, w) && okv_gguf_writer_write(w, tmp, &err) == OKV_OK;
    okv_gguf_writer_free(w);
    okv_gguf_close(g);
    return ok;
}

static void run_case(const meta_case *c) {
    char what[256];
    snprintf(what, sizeof what, "%s: %s = %g (type %d, n %d)", c->model, c->key, c->num, c->type, c->n);
    if (!write_variant(c)) { CHECK(0, "%s: cannot write the variant", what); return; }
    okv_error err;
    memset(&err, 0, sizeof err);
    okv_model *m = okv_model_load(tmp, NULL, &err);
    okv_context *ctx = NULL;
    okv_status st = OKV_OK;
    int32_t nv = m ? okv_model_n_vocab(m) : 0;
    float *logits = m ? malloc(sizeof(float) * 3 * (size_t)nv) : NULL;
    bool finite = false;
    if (m) ctx = okv_context_create(m, NULL, NULL, &err);
    if (ctx) {
        int32_t toks[3] = {1, 2, nv - 1}, pos[3] = {0, 1, 2};
        st = okv_context_eval(ctx, toks, pos, 3, logits, &err);
        finite = st == OKV_OK;
        for (size_t i = 0; finite && i < 3 * (size_t)nv; i++) finite = isfinite(logits[i]);
    }
    const char *needle = c->needle;
    if (!needle) {
        needle = strrchr(c->key, '.');
        needle = needle ? needle + 1 : c->key;
    }
    if (c->expect == REFUSE) {
        CHECK(!ctx && err.status != OKV_OK && strstr(err.message, needle),
              "%s: want a refusal naming '%s', got %s (%s '%s')%s", what, needle,
              ctx ? "a running model" : "a refusal", okv_status_name(err.status), err.message,
              ctx ? (finite ? ", finite logits" : ", NON-FINITE logits") : "");
    } else {
        CHECK(ctx && st == OKV_OK && finite, "%s: want a model that runs with finite logits, got %s '%s'%s", what,
              okv_status_name(err.status), err.message, ctx && !finite ? " (non-finite logits)" : "");
    }
    free(logits);
    okv_context_free(ctx);
    okv_model_free(m);
}

#endif
