/* offkv-demo: drives one sequence cache through a prefill, decode steps, a
 * regrow, a ring wrap and a rewind, printing what the cache holds after each.
 * Random queries and keys; the point is the cache's bookkeeping. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "offkv/offkv.h"

enum { HEAD_DIM = 8, N_HEADS = 4, N_KV = 2, N_LAYERS = 2, MAX_WRITE = 4 };

static float frand(unsigned *s) {
    *s = *s * 1664525u + 1013904223u;
    return (float)((*s >> 8) & 0xffff) / 32768.0f - 1.0f;
}

static void show(const okv_cache *c, const char *what) {
    printf("%-28s length %3d | flat rows %3d | ring rows %3d | bytes %6zu | generation %llu\n", what,
           okv_cache_length(c), okv_cache_rows(c, 0), okv_cache_rows(c, 1), okv_cache_bytes(c),
           (unsigned long long)okv_cache_generation(c));
}

static int step(okv_cache *c, okv_threadpool *pool, int32_t start, int32_t n, unsigned *seed) {
    int32_t pos[MAX_WRITE];
    float q[MAX_WRITE * N_HEADS * HEAD_DIM], k[MAX_WRITE * N_KV * HEAD_DIM], v[MAX_WRITE * N_KV * HEAD_DIM];
    float out[MAX_WRITE * N_HEADS * HEAD_DIM];
    okv_error err;
    for (int32_t i = 0; i < n; i++) pos[i] = start + i;
    okv_step *s = okv_step_begin(c, pos, n, pool, &err);
    if (!s) {
        printf("  step at %d refused: %s: %s\n", start, okv_status_name(err.status), err.message);
        return 0;
    }
    for (int32_t l = 0; l < N_LAYERS; l++) {
        for (int i = 0; i < n * N_HEADS * HEAD_DIM; i++) q[i] = frand(seed);
        for (int i = 0; i < n * N_KV * HEAD_DIM; i++) { k[i] = frand(seed); v[i] = frand(seed); }
        if (okv_update_and_attend(s, l, q, N_HEADS, k, v, OKV_F32, 1.0f / sqrtf(HEAD_DIM), out, &err)) {
            printf("  attend failed: %s\n", err.message);
            okv_step_abort(s);
            return 0;
        }
    }
    if (okv_step_commit(s, &err)) { printf("  commit failed: %s\n", err.message); okv_step_abort(s); return 0; }
    return 1;
}

int main(void) {
    okv_error err;
    okv_layer_geometry layers[N_LAYERS] = {{N_KV, HEAD_DIM, 0, 0}, {N_KV, HEAD_DIM, 4, 0}};
    okv_cache_config cfg = {.capacity = 64, .initial_capacity = 2, .max_write = MAX_WRITE, .dtype = OKV_F16};
    okv_threadpool *pool = okv_threadpool_create(2, &err);
    okv_cache *c = pool ? okv_cache_create(layers, N_LAYERS, &cfg, &err) : NULL;
    if (!c) { fprintf(stderr, "offkv-demo: %s\n", err.message); return 1; }
    unsigned seed = 42;
    printf("offkv demo: layer 0 flat (full attention), layer 1 ring (window 4, %d rows), f16 storage\n",
           okv_cache_rows(c, 1));
    show(c, "created");
    step(c, pool, 0, 4, &seed);
    show(c, "prefill 0..3 (regrew)");
    for (int32_t p = 4; p < 11; p++) {
        char what[64];
        uint64_t gen = okv_cache_generation(c);
        step(c, pool, p, 1, &seed);
        snprintf(what, sizeof what, "decode %d%s", p, okv_cache_generation(c) != gen ? " (regrew)" : "");
        show(c, what);
    }
    okv_plan plan;
    okv_cache_plan(c, 1, 11, 1, &plan, &err);
    printf("ring plan for a decode at 11: write row %d; read", plan.write[0].start);
    for (int32_t i = 0; i < plan.n_read; i++) printf(" rows %d..%d", plan.read[i].start, plan.read[i].start + plan.read[i].len - 1);
    printf(" = positions %d..11, rows = position mod %d\n", plan.read_base_pos, okv_cache_rows(c, 1));
    for (int32_t pos = 5; pos <= 9; pos++)
        printf("can rewind to %d? %s\n", pos, okv_cache_can_rewind(c, pos) ? "yes" : "no (the ring overwrote what it needs)");
    if (okv_cache_rewind(c, 5, &err)) printf("rewind to 5 refused: %s\n", err.message);
    okv_cache_rewind(c, 9, &err);
    show(c, "rewound to 9");
    step(c, pool, 9, 2, &seed);
    show(c, "re-decoded 9..10");
    okv_cache_clear(c, &err);
    show(c, "cleared");
    okv_cache_release(c);
    okv_threadpool_free(pool);
    return 0;
}
