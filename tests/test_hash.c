/* Keyed hashing (core/hash.h) and the tables built on it.
 *
 *  - SipHash-2-4 against the vectors of Aumasson and Bernstein's reference
 *    code (key 00..0f, message 00 01 .. n-1), so the rounds are SipHash's.
 *  - Keys chosen to collide: 8 000 names whose FNV-1a (the tables' old,
 *    fixed hash) falls in one of 16 slots of 16 384 go into an okv_strmap;
 *    under its keyed hash their probe runs stay short (the old hash made
 *    every insert scan the cluster: quadratic), and every name is found. */
#include <stdint.h>

#include "check.h"
#include "core/hash.h"
#include "core/strmap.h"

static void siphash_vectors(void) {
    okv_hash_key key;
    uint8_t kb[16], msg[64];
    for (int i = 0; i < 16; i++) kb[i] = (uint8_t)i;
    for (int i = 0; i < 64; i++) msg[i] = (uint8_t)i;
    memcpy(&key.k0, kb, 8);
    memcpy(&key.k1, kb + 8, 8);
    const struct { size_t n; uint64_t want; } v[] = {
        {0, 0x726fdb47dd0e0e31ull}, {1, 0x74f839c593dc67fdull}, {15, 0xa129ca6149be45e5ull}};
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
        const uint64_t got = okv_siphash(&key, msg, v[i].n, 2, 4);
        CHECK(got == v[i].want, "SipHash-2-4 of %zu bytes: %016llx, want %016llx", v[i].n, (unsigned long long)got,
              (unsigned long long)v[i].want);
    }
    okv_hash_key a, b;
    okv_hash_key_new(&a);
    okv_hash_key_new(&b);
    CHECK(a.k0 != b.k0 || a.k1 != b.k1, "two fresh keys are equal");
}

static uint64_t fnv1a(const char *s, size_t n) {
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)s[i]) * 1099511628211ull;
    return h;
}

static void colliding_names(void) {
    enum { N = 8000, LEN = 12 };
    char *names = malloc((size_t)N * LEN);
    int found = 0;
    uint32_t fnv_slots[16], n_fnv_slots = 0;
    for (uint64_t x = 0; found < N; x++) {
        char *s = names + (size_t)found * LEN;
        s[0] = 'k';
        for (int d = 0; d < LEN - 2; d++) s[1 + d] = "0123456789abcdef"[(x >> (4 * d)) & 15];
        s[LEN - 1] = '\0';
        const uint64_t h = fnv1a(s, LEN - 1);
        if ((h & 0x3ff) != 0) continue; /* low 10 bits zero: 16 slots of a 16 384-slot table */
        const uint32_t slot = (uint32_t)(h & 0x3fff);
        bool seen = false;
        for (uint32_t i = 0; i < n_fnv_slots; i++) seen |= fnv_slots[i] == slot;
        if (!seen && n_fnv_slots < 16) fnv_slots[n_fnv_slots++] = slot;
        found++;
    }
    CHECK(n_fnv_slots <= 16, "the names share %u FNV slots", n_fnv_slots);
    okv_strmap m = {0};
    for (int i = 0; i < N; i++) CHECK(okv_strmap_put(&m, names + (size_t)i * LEN, LEN - 1, i), "put %d", i);
    CHECK(m.cap == 16384, "capacity %zu", m.cap);
    /* Each name's distance from its home slot, summed. */
    uint64_t probes = 0;
    int wrong = 0;
    for (size_t slot = 0; slot < m.cap; slot++) {
        if (!m.keys[slot]) continue;
        const size_t home = okv_strmap_hash(&m, m.keys[slot], m.lens[slot]) & (m.cap - 1);
        probes += (slot - home) & (m.cap - 1);
    }
    for (int i = 0; i < N; i++) wrong += okv_strmap_get(&m, names + (size_t)i * LEN, LEN - 1) != i;
    CHECK(wrong == 0, "%d names not found", wrong);
    /* Random slots at load 0.5: about half a probe a name; sixteen
     * clusters would be N / 32 a name. */
    CHECK(probes < 2ull * N, "%llu probes for %d names chosen to collide", (unsigned long long)probes, N);
    okv_strmap_free(&m);
    free(names);
}

int main(void) {
    siphash_vectors();
    colliding_names();
    return check_done();
}
