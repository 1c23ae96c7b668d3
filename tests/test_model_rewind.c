/* Rewinds and clears on real models: evaluate 100 tokens, rewind by up to
 * max_write and re-evaluate: the logits equal a fresh evaluation of the same
 * prefix; a rewind further back than the rings hold is refused with a
 * message and changes nothing.  A warm-up run, a clear, and a real run give
 * the real run's logits on every family. */
#include "check.h"
#include "golden.h"
#include "offkv/offkv.h"

static const char *shared;

static int32_t token_at(int i) { return i == 0 ? 1 : 3 + (int32_t)((i * 2654435761u) % 509u); }

/* Evaluates tokens start..end-1 in chunks, keeping the last row's logits. */
static int run(okv_context *ctx, int start, int end, int chunk, float *last, okv_error *err) {
    int32_t toks[64], pos[64];
    for (int s = start; s < end; s += chunk) {
        int n = end - s < chunk ? end - s : chunk;
        for (int i = 0; i < n; i++) { toks[i] = token_at(s + i); pos[i] = s + i; }
        if (okv_context_eval_last(ctx, toks, pos, n, last, err)) return 0;
    }
    return 1;
}

static double max_diff(const float *a, const float *b, int n) {
    double d = 0;
    for (int i = 0; i < n; i++) d = fmax(d, fabs((double)a[i] - b[i]));
    return d;
}

static void rewind_case(const char *model) {
    char path[1024];
    snprintf(path, sizeof path, "%s/models/%s.gguf", shared, model);
    okv_error err;
    okv_model *m = okv_model_load(path, NULL, &err);
    if (!m) { CHECK(0, "load %s: %s", model, err.message); return; }
    const int V = okv_model_n_vocab(m), MW = 4;
    const char *opts[] = {"max_write", "4", "kv_type", "f32", "capacity", "256", "initial_capacity", "8", NULL};
    okv_context *ctx = okv_context_create(m, opts, NULL, &err);
    okv_context *fresh = okv_context_create(m, opts, NULL, &err);
    float *a = malloc(sizeof(float) * V), *b = malloc(sizeof(float) * V);
    CHECK(ctx && fresh && run(ctx, 0, 100, MW, a, &err), "%s: 100 tokens: %s", model, err.message);
    okv_cache *c = okv_context_cache(ctx);
    /* Smallest position every ring still serves. */
    int lowest = 100;
    while (lowest > 0 && okv_cache_can_rewind(c, lowest - 1)) lowest--;
    bool has_ring = false;
    for (int i = 0; i < okv_model_n_layers(m); i++) {
        okv_layer_geometry g;
        okv_model_layer_geometry(m, i, &g);
        has_ring |= g.window > 0;
    }
    for (int back = 1; back <= MW; back++) {
        const int pos = 100 - back;
        CHECK_STATUS(okv_cache_rewind(c, pos, &err), OKV_OK, err);
        CHECK(run(ctx, pos, 100, MW, a, &err), "%s: re-evaluate from %d: %s", model, pos, err.message);
        okv_cache_clear(okv_context_cache(fresh), &err);
        CHECK(run(fresh, 0, 100, MW, b, &err), "%s: fresh: %s", model, err.message);
        double d = max_diff(a, b, V);
        CHECK(d <= 1e-5, "%s: rewind by %d then re-evaluate differs from fresh by %g", model, back, d);
    }
    if (has_ring) {
        /* Rings of window W hold W + max_write - 1 rows, so a rewind of more
         * than max_write positions reaches what they overwrote. */
        CHECK(lowest > 0 && lowest >= 100 - MW, "%s: can rewind down to %d", model, lowest);
        const int len = okv_cache_length(c);
        CHECK_STATUS(okv_cache_rewind(c, lowest - 1, &err), OKV_ERR_POSITION, err);
        CHECK(strstr(err.message, "sliding-window") != NULL, "message: %s", err.message);
        CHECK(okv_cache_length(c) == len, "refused rewind changed the length");
        CHECK(run(ctx, 100, 104, MW, a, &err), "%s: continue after a refused rewind: %s", model, err.message);
        okv_cache_clear(okv_context_cache(fresh), &err);
        run(fresh, 0, 104, MW, b, &err);
        CHECK(max_diff(a, b, V) <= 1e-5, "%s: refused rewind disturbed the sequence", model);
    }
    /* Warm-up: a 37-token prompt in chunks, clear, again: same logits as a
     * fresh context. */
    okv_cache_clear(c, &err);
    CHECK(run(ctx, 0, 37, MW, a, &err), "warm-up run");
    CHECK_STATUS(okv_cache_clear(c, &err), OKV_OK, err);
    CHECK(okv_cache_length(c) == 0, "clear");
    CHECK(run(ctx, 0, 37, MW, a, &err), "real run");
    okv_context *third = okv_context_create(m, opts, NULL, &err);
    CHECK(run(third, 0, 37, MW, b, &err), "fresh run");
    CHECK(max_diff(a, b, V) <= 1e-6, "%s: warm-up then clear differs from fresh by %g", model, max_diff(a, b, V));
    if (has_ring) printf("%-18s rewinds to %d..100 accepted, to %d refused; warm-up + clear equals fresh\n", model, lowest, lowest - 1);
    else printf("%-18s (no ring layers) every rewind accepted; warm-up + clear equals fresh\n", model);
    okv_context_free(third);
    free(a);
    free(b);
    okv_context_free(ctx);
    okv_context_free(fresh);
    okv_model_free(m);
}

int main(void) {
    shared = check_shared_dir();
    if (!shared) { printf("skipped: ../shared not found\n"); return CHECK_SKIP; }
    const char *models[] = {"stories260K", "tiny-gemma3", "tiny-gemma3-allswa", "tiny-muse-glimmer",
                            "tiny-qwen2", "tiny-qwen3", "tiny-smollm3", "tiny-gemma2", "tiny-phi3"};
    for (size_t i = 0; i < sizeof models / sizeof models[0]; i++) rewind_case(models[i]);
    return check_done();
}
