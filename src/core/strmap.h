/* Internal: a string -> int32 map (open addressing, keyed hashing: see
 * core/hash.h), so that rule lookups in a grammar of many rules, and the
 * duplicate-key check of a JSON object of many members, cost O(1), not a
 * scan: a client's grammar, schema or object of 100 000 names, chosen or
 * not, must not take minutes.  A zeroed map is empty. */
#ifndef OKV_CORE_STRMAP_H
#define OKV_CORE_STRMAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/hash.h"

typedef struct okv_strmap {
    const char **keys; /* borrowed: the caller keeps each key alive and unchanged */
    size_t *lens;
    int32_t *vals;
    size_t cap, n;
    okv_hash_key key; /* drawn when the first slots are */
} okv_strmap;

static inline uint64_t okv_strmap_hash(const okv_strmap *m, const char *s, size_t n) {
    return okv_hash(&m->key, s, n);
}

/* The value of key s[0..n), or -1. */
static inline int32_t okv_strmap_get(const okv_strmap *m, const char *s, size_t n) {
    if (!m->cap) return -1;
    for (size_t i = okv_strmap_hash(m, s, n) & (m->cap - 1);; i = (i + 1) & (m->cap - 1)) {
        if (!m->keys[i]) return -1;
        if (m->lens[i] == n && memcmp(m->keys[i], s, n) == 0) return m->vals[i];
    }
}

/* Sets key s[0..n) (borrowed) to v; false when out of memory. */
static inline bool okv_strmap_put(okv_strmap *m, const char *s, size_t n, int32_t v) {
    if ((m->n + 1) * 2 > m->cap) {
        size_t cap = m->cap ? m->cap * 2 : 64;
        okv_strmap g = {calloc(cap, sizeof *g.keys), calloc(cap, sizeof *g.lens), calloc(cap, sizeof *g.vals), cap, 0,
                        m->key};
        if (!m->cap) okv_hash_key_new(&g.key);
        if (!g.keys || !g.lens || !g.vals) {
            free(g.keys);
            free(g.lens);
            free(g.vals);
            return false;
        }
        for (size_t i = 0; i < m->cap; i++)
            if (m->keys[i]) okv_strmap_put(&g, m->keys[i], m->lens[i], m->vals[i]);
        free(m->keys);
        free(m->lens);
        free(m->vals);
        *m = g;
    }
    size_t i = okv_strmap_hash(m, s, n) & (m->cap - 1);
    while (m->keys[i] && !(m->lens[i] == n && memcmp(m->keys[i], s, n) == 0)) i = (i + 1) & (m->cap - 1);
    if (!m->keys[i]) m->n++;
    m->keys[i] = s;
    m->lens[i] = n;
    m->vals[i] = v;
    return true;
}

static inline void okv_strmap_free(okv_strmap *m) {
    free(m->keys);
    free(m->lens);
    free(m->vals);
    *m = (okv_strmap){0};
}

#endif
