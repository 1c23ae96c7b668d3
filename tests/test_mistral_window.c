/* Mistral-style llama with every layer sliding: llama.cpp ignores this
 * window, so the reference is a dense forward written plainly here in double
 * precision — full T x T scores with an explicit window mask, no cache —
 * against offkv's chunked evaluation through ring layers. */
#include "check.h"
#include "golden.h"
#include "offkv/offkv.h"

enum { T = 121, CHUNK = 16, WINDOW = 8 };

static const okv_gguf *G;

static const float *tensor(const char *fmt, int l) {
    char name[96];
    snprintf(name, sizeof name, fmt, l);
    int64_t i = okv_gguf_find_tensor(G, name);
    const okv_gguf_tensor *t = i >= 0 ? okv_gguf_tensor_at(G, i) : NULL;
    return t && t->type == OKV_GGML_F32 ? t->data : NULL;
}

static uint32_t u32(const char *key) {
    uint32_t v = 0;
    okv_gguf_get_u32(G, key, &v, NULL);
    return v;
}

/* y[r] = sum_c W[r][c] x[c], W stored [rows][cols]. */
static void matvec(double *y, const float *w, const double *x, int rows, int cols) {
    for (int r = 0; r < rows; r++) {
        double s = 0;
        for (int c = 0; c < cols; c++) s += (double)w[(size_t)r * cols + c] * x[c];
        y[r] = s;
    }
}

static void rmsnorm(double *y, const double *x, const float *g, int n, double eps) {
    double ss = 0;
    for (int i = 0; i < n; i++) ss += x[i] * x[i];
    double s = 1.0 / sqrt(ss / n + eps);
    for (int i = 0; i < n; i++) y[i] = x[i] * s * g[i];
}

static void rope(double *x, int heads, int hd, int pos, double base) {
    for (int h = 0; h < heads; h++)
        for (int i = 0; i < hd; i += 2) {
            double th = pos * pow(base, -(double)i / hd), c = cos(th), s = sin(th);
            double a = x[h * hd + i], b = x[h * hd + i + 1];
            x[h * hd + i] = a * c - b * s;
            x[h * hd + i + 1] = a * s + b * c;
        }
}

/* The whole sequence at once; window 0 = full attention. */
static double *dense_forward(const int *tokens, int window) {
    const int E = (int)u32("llama.embedding_length"), L = (int)u32("llama.block_count");
    const int H = (int)u32("llama.attention.head_count"), KV = (int)u32("llama.attention.head_count_kv");
    const int F = (int)u32("llama.feed_forward_length"), HD = E / H, V = 512;
    float epsf = 1e-5f, basef = 10000.0f;
    okv_gguf_get_f32(G, "llama.attention.layer_norm_rms_epsilon", &epsf, NULL);
    okv_gguf_get_f32(G, "llama.rope.freq_base", &basef, NULL);
    double *x = calloc((size_t)T * E, sizeof(double)), *xb = malloc(sizeof(double) * E);
    double *q = malloc(sizeof(double) * T * H * HD), *k = malloc(sizeof(double) * T * KV * HD);
    double *v = malloc(sizeof(double) * T * KV * HD), *att = malloc(sizeof(double) * H * HD);
    double *o = malloc(sizeof(double) * E), *g = malloc(sizeof(double) * F), *u = malloc(sizeof(double) * F);
    double *logits = malloc(sizeof(double) * T * V), sc[T];
    const float *emb = tensor("token_embd.weight", 0);
    for (int t = 0; t < T; t++)
        for (int i = 0; i < E; i++) x[(size_t)t * E + i] = emb[(size_t)tokens[t] * E + i];
    for (int l = 0; l < L; l++) {
        for (int t = 0; t < T; t++) {
            rmsnorm(xb, x + (size_t)t * E, tensor("blk.%d.attn_norm.weight", l), E, epsf);
            matvec(q + (size_t)t * H * HD, tensor("blk.%d.attn_q.weight", l), xb, H * HD, E);
            matvec(k + (size_t)t * KV * HD, tensor("blk.%d.attn_k.weight", l), xb, KV * HD, E);
            matvec(v + (size_t)t * KV * HD, tensor("blk.%d.attn_v.weight", l), xb, KV * HD, E);
            rope(q + (size_t)t * H * HD, H, HD, t, basef);
            rope(k + (size_t)t * KV * HD, KV, HD, t, basef);
        }
        for (int t = 0; t < T; t++) {
            for (int h = 0; h < H; h++) {
                const int kh = h / (H / KV);
                double mx = -INFINITY, sum = 0;
                for (int s = 0; s < T; s++) {
                    bool visible = s <= t && (window == 0 || t - s < window);
                    sc[s] = -INFINITY;
                    if (!visible) continue;
                    double d = 0;
                    for (int i = 0; i < HD; i++) d += q[((size_t)t * H + h) * HD + i] * k[((size_t)s * KV + kh) * HD + i];
                    sc[s] = d / sqrt((double)HD);
                    mx = fmax(mx, sc[s]);
                }
                for (int i = 0; i < HD; i++) att[h * HD + i] = 0;
                for (int s = 0; s < T; s++) {
                    if (sc[s] == -INFINITY) continue;
                    double e = exp(sc[s] - mx);
                    sum += e;
                    for (int i = 0; i < HD; i++) att[h * HD + i] += e * v[((size_t)s * KV + kh) * HD + i];
                }
                for (int i = 0; i < HD; i++) att[h * HD + i] /= sum;
            }
            matvec(o, tensor("blk.%d.attn_output.weight", l), att, E, H * HD);
            for (int i = 0; i < E; i++) x[(size_t)t * E + i] += o[i];
            rmsnorm(xb, x + (size_t)t * E, tensor("blk.%d.ffn_norm.weight", l), E, epsf);
            matvec(g, tensor("blk.%d.ffn_gate.weight", l), xb, F, E);
            matvec(u, tensor("blk.%d.ffn_up.weight", l), xb, F, E);
            for (int i = 0; i < F; i++) g[i] = g[i] / (1 + exp(-g[i])) * u[i];
            matvec(o, tensor("blk.%d.ffn_down.weight", l), g, E, F);
            for (int i = 0; i < E; i++) x[(size_t)t * E + i] += o[i];
        }
    }
    const float *out = tensor("output.weight", 0);
    for (int t = 0; t < T; t++) {
        rmsnorm(xb, x + (size_t)t * E, tensor("output_norm.weight", 0), E, epsf);
        matvec(logits + (size_t)t * V, out ? out : emb, xb, V, E);
    }
    free(x); free(xb); free(q); free(k); free(v); free(att); free(o); free(g); free(u);
    return logits;
}

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
    double *ref = dense_forward(tokens, WINDOW);
    with_window = worst(ours, ref, T * V, &max_abs);
    free(ref);
    ref = dense_forward(tokens, 0);
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
