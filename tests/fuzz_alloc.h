/* Test support: allocation-failure injection.  Defines malloc, calloc,
 * realloc, free, aligned_alloc and posix_memalign for the whole test
 * program (the executable's definitions interpose glibc's), so the k-th
 * allocation can be made to fail, and counts live allocations so leaks show.
 * Include only in the plain build (not with AddressSanitizer). */
#ifndef OKV_TESTS_FUZZ_ALLOC_H
#define OKV_TESTS_FUZZ_ALLOC_H

#include <stdio.h>
#include <string.h>

#include "check.h"
#include "offkv/offkv.h"

#include <errno.h>
#include <stdint.h>

extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void *__libc_memalign(size_t, size_t);
extern void __libc_free(void *);

static long fail_at = -1, n_allocs, live;

static int should_fail(void) { return fail_at >= 0 && ++n_allocs == fail_at; }

void *malloc(size_t n) {
    if (should_fail()) return NULL;
    void *p = __libc_malloc(n);
    if (p) live++;
    return p;
}
void *calloc(size_t a, size_t b) {
    if (should_fail()) return NULL;
    void *p = __libc_calloc(a, b);
    if (p) live++;
    return p;
}
void *realloc(void *q, size_t n) {
    if (!q) return malloc(n);
    if (n == 0) { free(q); return NULL; }
    if (should_fail()) return NULL;
    return __libc_realloc(q, n);
}
void free(void *p) {
    if (p) live--;
    __libc_free(p);
}
void *aligned_alloc(size_t a, size_t n) {
    if (should_fail()) return NULL;
    void *p = __libc_memalign(a, n);
    if (p) live++;
    return p;
}
int posix_memalign(void **out, size_t a, size_t n) {
    if (should_fail()) return ENOMEM;
    void *p = __libc_memalign(a, n);
    if (!p) return ENOMEM;
    live++;
    *out = p;
    return 0;
}

/* A checksum of what the scenario computed (logits, ids), so a failure the
 * library absorbs can be shown to change nothing. */
static uint64_t result_sum;
static void sum_bytes(const void *p, size_t n) {
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++) result_sum = (result_sum ^ b[i]) * 1099511628211ull;
}

/* One pass of the scenario; returns the status of the first failure. */
static okv_status scenario(const char *model_path, const char *vocab_path, okv_error *err) {
    okv_status st = OKV_OK;
    okv_model *m = okv_model_load(model_path, NULL, err);
    if (!m) return err->status;
    const char *opts[] = {"capacity", "32", "max_write", "4", "initial_capacity", "2", NULL};
    okv_context *ctx = okv_context_create(m, opts, NULL, err);
    if (!ctx) { st = err->status; goto done; }
    int32_t toks[4] = {1, 2, 3, 4}, pos[4] = {0, 1, 2, 3};
    float *logits = malloc(sizeof(float) * 4 * (size_t)okv_model_n_vocab(m));
    if (!logits) { st = OKV_ERR_NOMEM; snprintf(err->message, sizeof err->message, "test: logits"); goto done; }
    /* two evals: the second grows the flat layers (initial capacity 2) */
    if ((st = okv_context_eval(ctx, toks, pos, 2, logits, err)) == OKV_OK)
        st = okv_context_eval(ctx, toks + 2, pos + 2, 2, logits, err);
    if (st == OKV_OK) sum_bytes(logits, sizeof(float) * 2 * (size_t)okv_model_n_vocab(m));
    free(logits);
    if (st) goto done;
    size_t n = 0;
    int32_t ids[64];
    const char *text = "Once upon a time, \xe4\xb8\x80 \xff!";
    if ((st = okv_tokenizer_encode(okv_model_tokenizer(m), text, strlen(text), OKV_TOKENIZE_ADD_SPECIAL, ids, 64, &n,
                                   err)))
        goto done;
    sum_bytes(ids, n * sizeof *ids);
    if (vocab_path) {
        okv_gguf *g = okv_gguf_open(vocab_path, err);
        if (!g) { st = err->status; goto done; }
        okv_tokenizer *t = okv_tokenizer_from_gguf(g, err);
        okv_gguf_close(g);
        if (!t) { st = err->status; goto done; }
        st = okv_tokenizer_encode(t, text, strlen(text), 0, ids, 64, &n, err);
        if (st == OKV_OK) sum_bytes(ids, n * sizeof *ids);
        okv_tokenizer_free(t);
    }
done:
    okv_context_free(ctx);
    okv_model_free(m);
    return st;
}

/* Runs the scenario once counting allocations, then once per allocation
 * with that one failing; CHECKs each failing run is OKV_ERR_NOMEM with a
 * message and frees everything, and that an absorbed failure changes no
 * result. */
static void alloc_fail_all(const char *what, const char *model_path, const char *vocab_path) {
    okv_error err;
    fail_at = 0;
    n_allocs = 0;
    long base = live;
    result_sum = 0;
    okv_status st = scenario(model_path, vocab_path, &err);
    const uint64_t want_sum = result_sum;
    CHECK(st == OKV_OK, "%s: the scenario fails without injection: %s", what, err.message);
    CHECK(live == base, "%s: %ld allocations left after a clean run", what, live - base);
    long total = n_allocs;
    int clean = 0, leaks = 0, wrong = 0;
    for (long k = 1; k <= total; k++) {
        fail_at = k;
        n_allocs = 0;
        base = live;
        memset(&err, 0, sizeof err);
        result_sum = 0;
        st = scenario(model_path, vocab_path, &err);
        fail_at = -1;
        if (live != base && leaks++ < 5)
            CHECK(0, "%s: allocation %ld failing leaks %ld allocations (%s: %s)", what, k, live - base,
                  okv_status_name(st), err.message);
        if (st == OKV_OK) {
            /* a failure the library absorbed (PCRE2's JIT, a retry) is fine
             * if it changes nothing */
            clean++;
            CHECK(result_sum == want_sum, "%s: allocation %ld failing was absorbed but changed the results", what, k);
        } else if ((st != OKV_ERR_NOMEM || !err.message[0]) && wrong++ < 5) {
            CHECK(0, "%s: allocation %ld failing gives %s '%s', want OKV_ERR_NOMEM with a message", what, k,
                  okv_status_name(st), err.message);
        }
    }
    printf("%s: %ld allocations, each failed once: %d absorbed, %d leaked, %d wrong status\n", what, total, clean,
           leaks, wrong);
}

#endif
