/* Internal: keyed hashing for the tables whose keys come from users: a
 * model file's vocabulary and merges, a client's JSON object keys, schema
 * property and grammar rule names.  Under a fixed hash (FNV-1a, as before)
 * keys chosen offline to share a slot turn every insert and lookup into a
 * scan: a 1.4 MB vocabulary of such tokens took 16 s to load.  SipHash-1-3
 * (Aumasson and Bernstein's SipHash with one compression and three
 * finalization rounds, as Python and Rust use for their tables) under a key
 * drawn from the OS for each table leaves nothing to precompute. */
#ifndef OKV_CORE_HASH_H
#define OKV_CORE_HASH_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

typedef struct okv_hash_key {
    uint64_t k0, k1;
} okv_hash_key;

/* A fresh key from getrandom(); should the OS refuse, from the clock, the
 * process id and the key's own address (never fails: a table needs one). */
void okv_hash_key_new(okv_hash_key *key);

static inline uint64_t okv_hash_rotl(uint64_t x, int b) { return (x << b) | (x >> (64 - b)); }

#define OKV_SIPROUND(v0, v1, v2, v3)                                                                          \
    do {                                                                                                      \
        v0 += v1, v1 = okv_hash_rotl(v1, 13), v1 ^= v0, v0 = okv_hash_rotl(v0, 32);                           \
        v2 += v3, v3 = okv_hash_rotl(v3, 16), v3 ^= v2;                                                       \
        v0 += v3, v3 = okv_hash_rotl(v3, 21), v3 ^= v0;                                                       \
        v2 += v1, v1 = okv_hash_rotl(v1, 17), v1 ^= v2, v2 = okv_hash_rotl(v2, 32);                           \
    } while (0)

/* SipHash-c-d of data[0..n) under key (tests check c = 2, d = 4 against the
 * paper's vector; tables use okv_hash). */
static inline uint64_t okv_siphash(const okv_hash_key *key, const void *data, size_t n, int c, int d) {
    uint64_t v0 = key->k0 ^ 0x736f6d6570736575ull, v1 = key->k1 ^ 0x646f72616e646f6dull,
             v2 = key->k0 ^ 0x6c7967656e657261ull, v3 = key->k1 ^ 0x7465646279746573ull;
    const unsigned char *p = data;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t m;
        memcpy(&m, p + i, 8); /* little-endian words: every target offkv builds for */
        v3 ^= m;
        for (int r = 0; r < c; r++) OKV_SIPROUND(v0, v1, v2, v3);
        v0 ^= m;
    }
    uint64_t m = (uint64_t)(n & 0xff) << 56;
    for (int b = 0; i + b < n; b++) m |= (uint64_t)p[i + b] << (8 * b);
    v3 ^= m;
    for (int r = 0; r < c; r++) OKV_SIPROUND(v0, v1, v2, v3);
    v0 ^= m;
    v2 ^= 0xff;
    for (int r = 0; r < d; r++) OKV_SIPROUND(v0, v1, v2, v3);
    return v0 ^ v1 ^ v2 ^ v3;
}

static inline uint64_t okv_hash(const okv_hash_key *key, const void *data, size_t n) {
    return okv_siphash(key, data, n, 1, 3);
}

#endif
