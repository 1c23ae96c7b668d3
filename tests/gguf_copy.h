/* Test support: copying a GGUF file's metadata into a writer, so tests can
 * write variants of a real model (fused weights, dequantized weights). */
#ifndef OKV_TESTS_GGUF_COPY_H
#define OKV_TESTS_GGUF_COPY_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "offkv/offkv.h"

/* Copies every metadata value of g into w, except the keys in skip (a
 * NULL-terminated list, or NULL). */
static inline int copy_metadata_except(const okv_gguf *g, okv_gguf_writer *w, const char *const *skip) {
    okv_error err;
    for (int64_t i = 0; i < okv_gguf_n_kv(g); i++) {
        const char *key = okv_gguf_key(g, i);
        bool skipped = false;
        for (size_t j = 0; skip && skip[j]; j++) skipped |= strcmp(skip[j], key) == 0;
        if (skipped) continue;
        okv_gguf_type t = okv_gguf_kv_type(g, i);
        okv_status st = OKV_OK;
        if (t == OKV_GGUF_STRING) {
            char buf[4096];
            st = okv_gguf_get_str_buf(g, key, buf, sizeof buf, &err);
            if (!st) st = okv_gguf_writer_add_str(w, key, buf, &err);
        } else if (t == OKV_GGUF_F32) {
            float f;
            st = okv_gguf_get_f32(g, key, &f, &err);
            if (!st) st = okv_gguf_writer_add_f32(w, key, f, &err);
        } else if (t == OKV_GGUF_BOOL) {
            bool b;
            st = okv_gguf_get_bool(g, key, &b, &err);
            if (!st) st = okv_gguf_writer_add_bool(w, key, b, &err);
        } else if (t == OKV_GGUF_ARRAY) {
            okv_gguf_type et;
            uint64_t n;
            okv_gguf_get_array(g, key, &et, &n, &err);
            if (et == OKV_GGUF_STRING) {
                char **s = calloc(n, sizeof *s);
                for (uint64_t j = 0; j < n; j++) {
                    const char *p; size_t len;
                    okv_gguf_array_str(g, key, j, &p, &len, &err);
                    s[j] = strndup(p, len);
                }
                st = okv_gguf_writer_add_array(w, key, et, (const char *const *)s, n, &err);
                for (uint64_t j = 0; j < n; j++) free(s[j]);
                free(s);
            } else if (et == OKV_GGUF_F32) {
                float *f = malloc(sizeof(float) * n);
                for (uint64_t j = 0; j < n; j++) okv_gguf_array_f32(g, key, j, &f[j], &err);
                st = okv_gguf_writer_add_array(w, key, et, f, n, &err);
                free(f);
            } else if (et == OKV_GGUF_BOOL) {
                bool *b = malloc(sizeof(bool) * n);
                for (uint64_t j = 0; j < n; j++) okv_gguf_array_bool(g, key, j, &b[j], &err);
                st = okv_gguf_writer_add_array(w, key, et, b, n, &err);
                free(b);
            } else {
                int32_t *v = malloc(sizeof(int32_t) * n);
                for (uint64_t j = 0; j < n; j++) { int64_t x; okv_gguf_array_i64(g, key, j, &x, &err); v[j] = (int32_t)x; }
                st = okv_gguf_writer_add_array(w, key, OKV_GGUF_I32, v, n, &err);
                free(v);
            }
        } else {
            uint32_t u;
            st = okv_gguf_get_u32(g, key, &u, &err);
            if (!st) st = okv_gguf_writer_add_u32(w, key, u, &err);
        }
        if (st) { fprintf(stderr, "copy %s: %s\n", key, err.message); return 0; }
    }
    return 1;
}

static inline int copy_metadata(const okv_gguf *g, okv_gguf_writer *w) { return copy_metadata_except(g, w, NULL); }

/* Adds every tensor of g to w (data borrowed from g's map). */
static inline int copy_tensors(const okv_gguf *g, okv_gguf_writer *w) {
    okv_error err;
    for (int64_t i = 0; i < okv_gguf_n_tensors(g); i++) {
        const okv_gguf_tensor *t = okv_gguf_tensor_at(g, i);
        if (okv_gguf_writer_add_tensor(w, t->name, t->type, t->n_dims, t->ne, t->data, &err)) {
            fprintf(stderr, "copy tensor %s: %s\n", t->name, err.message);
            return 0;
        }
    }
    return 1;
}

#endif
