/* Memory on a gemma3-shaped synthetic model over a 4 k-token run: ring
 * layers hold window + max_write - 1 rows from the start and never grow;
 * flat layers double from initial_capacity; offkv_cache_bytes is the sum of
 * what every layer holds.  Prints the comparison with a full-size cache. */
#include <stdlib.h>

#include "check.h"
#include "offkv/offkv.h"

enum { N_LAYER = 12, WINDOW = 256, MAX_WRITE = 256, CAPACITY = 4096, INITIAL = 256, HEAD_DIM = 16, N_KV = 2 };

int main(void) {
    const char *bin = getenv("OKV_BIN");
    if (!bin) { printf("skipped: OKV_BIN (the build folder) not set\n"); return CHECK_SKIP; }
    char cmd[4096];
    const char *path = "test_ring_memory.tmp.gguf";
    snprintf(cmd, sizeof cmd,
             "'%s/offkv' synth --arch gemma3 --n-embd 64 --n-layer %d --n-head 4 --n-head-kv %d --head-dim %d "
             "--n-ff 128 --sliding-window %d --seed 3 -o %s > /dev/null",
             bin, N_LAYER, N_KV, HEAD_DIM, WINDOW, path);
    CHECK(system(cmd) == 0, "synth failed: %s", cmd);
    okv_error err;
    okv_model *m = okv_model_load(path, NULL, &err);
    if (!m) { CHECK(0, "load: %s", err.message); return check_done(); }
    char cap_s[16], ini_s[16], mw_s[16];
    snprintf(cap_s, sizeof cap_s, "%d", CAPACITY);
    snprintf(ini_s, sizeof ini_s, "%d", INITIAL);
    snprintf(mw_s, sizeof mw_s, "%d", MAX_WRITE);
    const char *opts[] = {"capacity", cap_s, "initial_capacity", ini_s, "max_write", mw_s, "kv_type", "f16",
                          "n_threads", "2", NULL};
    okv_context *ctx = okv_context_create(m, opts, NULL, &err);
    if (!ctx) { CHECK(0, "context: %s", err.message); okv_model_free(m); return check_done(); }
    okv_cache *c = okv_context_cache(ctx);
    int n_ring = 0;
    for (int l = 0; l < N_LAYER; l++) {
        okv_layer_geometry g;
        okv_model_layer_geometry(m, l, &g);
        n_ring += g.window > 0;
        CHECK((g.window > 0) == (l % 6 != 5), "layer %d window %d: gemma3's default period is 6", l, g.window);
    }
    const size_t row_bytes = 2 * (size_t)N_KV * HEAD_DIM * 2; /* K and V, f16 */
    static int32_t toks[MAX_WRITE], pos[MAX_WRITE];
    size_t ring_bytes_first = 0;
    for (int s = 0; s < CAPACITY; s += MAX_WRITE) {
        for (int i = 0; i < MAX_WRITE; i++) { toks[i] = 3 + (s + i) * 31 % 500; pos[i] = s + i; }
        if (okv_context_eval_last(ctx, toks, pos, MAX_WRITE, NULL, &err)) { CHECK(0, "eval at %d: %s", s, err.message); break; }
        const int len = s + MAX_WRITE;
        int flat_rows = INITIAL;
        while (flat_rows < len) flat_rows *= 2;
        size_t ring_bytes = 0, flat_bytes = 0;
        for (int l = 0; l < N_LAYER; l++) {
            okv_layer_geometry g;
            okv_model_layer_geometry(m, l, &g);
            const int rows = okv_cache_rows(c, l);
            if (g.window > 0) {
                CHECK(rows == WINDOW + MAX_WRITE - 1, "ring layer %d has %d rows at length %d", l, rows, len);
                ring_bytes += rows * row_bytes;
            } else {
                CHECK(rows == flat_rows, "flat layer %d has %d rows at length %d, want %d", l, rows, len, flat_rows);
                flat_bytes += rows * row_bytes;
            }
        }
        if (s == 0) ring_bytes_first = ring_bytes;
        CHECK(ring_bytes == ring_bytes_first, "ring bytes changed: %zu -> %zu", ring_bytes_first, ring_bytes);
        CHECK(okv_cache_bytes(c) == ring_bytes + flat_bytes, "cache bytes %zu, layers hold %zu",
              okv_cache_bytes(c), ring_bytes + flat_bytes);
        if (len == 256 || len == 1024 || len == CAPACITY)
            printf("length %4d: ring layers %d x %d rows = %zu bytes, flat layers %d x %d rows = %zu bytes, total %zu\n",
                   len, n_ring, WINDOW + MAX_WRITE - 1, ring_bytes, N_LAYER - n_ring, flat_rows, flat_bytes,
                   okv_cache_bytes(c));
    }
    const size_t full = (size_t)N_LAYER * CAPACITY * row_bytes;
    printf("a full-size cache (every layer %d rows) holds %zu bytes; offkv holds %zu (%.1f%%)\n", CAPACITY, full,
           okv_cache_bytes(c), 100.0 * okv_cache_bytes(c) / full);
    CHECK(okv_cache_length(c) == CAPACITY, "length %d", okv_cache_length(c));
    okv_context_free(ctx);
    okv_model_free(m);
    remove(path);
    return check_done();
}
