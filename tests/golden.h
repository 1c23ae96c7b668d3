/* Test support: llama.cpp reference runs in ../shared/golden (see its README):
 * X.json describes a run (token ids, chunk, kv type), X.f32 holds its logits. */
#ifndef OKV_TESTS_GOLDEN_H
#define OKV_TESTS_GOLDEN_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Reads a whole file; NULL if it cannot. */
static inline char *golden_read(const char *path, size_t *size) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)n + 1);
    if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) { free(buf); buf = NULL; }
    fclose(f);
    if (buf) buf[n] = '\0';
    if (size) *size = (size_t)n;
    return buf;
}

/* The integer array under "key" in a JSON text: count, or -1. */
static inline int golden_ints(const char *json, const char *key, int *out, int max) {
    char pat[128];
    snprintf(pat, sizeof pat, "\"%s\":", key);
    const char *p = strstr(json, pat);
    if (!p) return -1;
    p = strchr(p, '[');
    if (!p) return -1;
    int n = 0;
    for (p++; *p && *p != ']';) {
        char *end;
        long v = strtol(p, &end, 10);
        if (end == p) { p++; continue; }
        if (n < max) out[n] = (int)v;
        n++;
        p = end;
    }
    return n;
}

/* Compares our logits with the reference: worst |difference|, worst
 * |reference|, and rows whose argmax differs although the top two
 * reference logits are further apart than 2 x the worst difference. */
typedef struct golden_cmp { double max_diff, max_abs; int argmax_mismatch; } golden_cmp;

static inline golden_cmp golden_compare(const float *ours, const float *ref, int rows, int n_vocab) {
    golden_cmp c = {0, 0, 0};
    for (long i = 0; i < (long)rows * n_vocab; i++) {
        double d = fabs((double)ours[i] - ref[i]);
        if (!(d <= c.max_diff)) c.max_diff = isnan(d) ? INFINITY : d;
        if (fabs(ref[i]) > c.max_abs) c.max_abs = fabs(ref[i]);
    }
    for (int r = 0; r < rows; r++) {
        const float *a = ours + (long)r * n_vocab, *b = ref + (long)r * n_vocab;
        int ia = 0, ib = 0;
        for (int j = 1; j < n_vocab; j++) {
            if (a[j] > a[ia]) ia = j;
            if (b[j] > b[ib]) ib = j;
        }
        float second = -INFINITY;
        for (int j = 0; j < n_vocab; j++)
            if (j != ib && b[j] > second) second = b[j];
        if (ia != ib && b[ib] - second > 2 * c.max_diff) c.argmax_mismatch++;
    }
    return c;
}

#endif
