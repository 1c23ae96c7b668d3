/* Mistral-style llama with every layer sliding: llama.cpp ignores this
 * window, so the reference is a dense forward written plainly in double
 * precision (dense_llama.h: full T x T scores with an explicit window mask,
 * no cache) against offkv's chunked evaluation through ring layers. */
#include "check.h"
#include "golden.h"
#include "offkv/offkv.h"
#include "dense_llama.h"

enum { T = 121, CHUNK = 16, WINDOW = 8 };

static double worst(const float *a, const double *b, int n, double *max_abs) {
    double d = 0;
    *max_abs = 0;
    for (int i = 0; i < n; i++) {
        d = fmax(d, fabs(a[i] - b[i]));
        *max_abs = fmax(*max_abs, fabs(b[i]));
    }
    return d;
}

int main(void) {
    const char *shared = check_shared_dir();
    if (!shared) { printf("skipped: ../shared not found\n"); return CHECK_SKIP; }
    char path[1024];
    snprintf(path, sizeof path, "%s/models/tiny-llama.gguf", shared);
    okv_error err;
    okv_gguf *file = okv_gguf_open(path, &err);
    const char *opts[] = {"sliding_window", "8", NULL};
    okv_model *m = okv_model_load(path, opts, &err);
    if (!file || !m) { CHECK(0, "load: %s", err.message); return check_done(); }
    G = file;
    int tokens[T];
    uint64_t state = 42;
    tokens[0] = 1;
    for (int i = 1; i < T; i++) {
        uint64_t z = (state += 0x9e3779b97f4a7c15ull);
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        z ^= z >> 31;
        tokens[i] = 3 + (int)((z >> 11) % 509);
    }
    const int V = okv_model_n_vocab(m);
    const char *copts[] = {"max_write", "16", "kv_type", "f32", "capacity", "256", NULL};
    okv_context *ctx = okv_context_create(m, copts, NULL, &err);
    float *ours = malloc(sizeof(float) * T * V);
    int32_t pos[T];
    for (int i = 0; i < T; i++) pos[i] = i;
    for (int s = 0; s < T; s += CHUNK) {
        int n = T - s < CHUNK ? T - s : CHUNK;
        if (okv_context_eval(ctx, tokens + s, pos + s, n, ours + (size_t)s * V, &err)) { CHECK(0, "eval: %s", err.message); break; }
    }
    double max_abs, with_window, without_window;
    dense_opts windowed = {.window = WINDOW, .pos_scale = 1}, full = {.window = 0, .pos_scale = 1};
    double *ref = dense_forward(tokens, T, &windowed);
    with_window = worst(ours, ref, T * V, &max_abs);
    free(ref);
    ref = dense_forward(tokens, T, &full);
    double ignore;
    without_window = worst(ours, ref, T * V, &ignore);
    free(ref);
    printf("window %d, chunks of %d: max |diff| vs dense windowed reference %.3g (max |logit| %.3g); "
           "vs dense full attention %.3g\n", WINDOW, CHUNK, with_window, max_abs, without_window);
    CHECK(with_window <= 1e-4 * fmax(1, max_abs), "offkv differs from the windowed reference by %g", with_window);
    CHECK(without_window > 100 * with_window && without_window > 1e-2,
          "the window made no difference (%g vs %g)", without_window, with_window);
    free(ours);
    okv_context_free(ctx);
    okv_model_free(m);
    okv_gguf_close(file);
    return check_done();
}
