/* Quantized weights end to end.  offkv synth writes the same random model
 * (same seed) in F32, Q8_0 and Q4_0.  Two checks per quantized type:
 *
 *  1. Against its own dequantized twin (the Q file's weights expanded to F32
 *     and written back): the only difference left is that Q8_0/Q4_0 matmuls
 *     quantize their activations to 8 bits per block of 32, a relative error
 *     of at most 1/254 of each block's largest activation per product.  We
 *     allow 2% of the logits' range, which that bound keeps far below.
 *  2. Against the F32 source: now the weights' own rounding counts too,
 *     about amax/254 per weight for Q8_0 and amax/16 for Q4_0 (relative RMS
 *     ~0.3% and ~6% of a weight).  Over a few layers those errors add like a
 *     random walk; seen here: 0.7% (Q8_0, mostly the activations' rounding)
 *     and 8% (Q4_0) of the logits' range, so we allow 3% and 20%. */
#include <math.h>
#include <stdlib.h>

#include "check.h"
#include "gguf_copy.h"
#include "kernels/quant.h"

enum { N_TOK = 24 };

static float *logits_of(const char *path, int *n_vocab) {
    okv_error err;
    okv_model *m = okv_model_load(path, NULL, &err);
    if (!m) { CHECK(0, "load %s: %s", path, err.message); return NULL; }
    const char *opts[] = {"max_write", "8", "kv_type", "f32", "capacity", "64", NULL};
    okv_context *ctx = okv_context_create(m, opts, NULL, &err);
    const int V = *n_vocab = okv_model_n_vocab(m);
    float *out = malloc(sizeof(float) * N_TOK * V);
    int32_t toks[8], pos[8];
    for (int s = 0; s < N_TOK; s += 8) {
        for (int i = 0; i < 8; i++) { toks[i] = 3 + (s + i) * 37 % 500; pos[i] = s + i; }
        if (okv_context_eval(ctx, toks, pos, 8, out + (size_t)s * V, &err)) CHECK(0, "eval: %s", err.message);
    }
    okv_context_free(ctx);
    okv_model_free(m);
    return out;
}

/* Writes src with every quantized tensor expanded to F32. */
static int write_dequantized(const char *src, const char *dst) {
    okv_error err;
    okv_gguf *g = okv_gguf_open(src, &err);
    okv_gguf_writer *w = okv_gguf_writer_create(&err);
    int ok = g && w && copy_metadata(g, w);
    float *bufs[256] = {0};
    int nb = 0;
    for (int64_t i = 0; ok && i < okv_gguf_n_tensors(g); i++) {
        const okv_gguf_tensor *t = okv_gguf_tensor_at(g, i);
        if (t->type == OKV_GGML_F32 || nb == 256) {
            ok = !okv_gguf_writer_add_tensor(w, t->name, t->type, t->n_dims, t->ne, t->data, &err);
            continue;
        }
        const int64_t rows = t->n_bytes / okv_ggml_row_size(t->type, t->ne[0]);
        float *f = bufs[nb++] = malloc(sizeof(float) * rows * t->ne[0]);
        for (int64_t r = 0; r < rows; r++)
            okv_dequantize_row(t->type, (const char *)t->data + r * okv_ggml_row_size(t->type, t->ne[0]),
                               f + r * t->ne[0], t->ne[0]);
        ok = !okv_gguf_writer_add_tensor(w, t->name, OKV_GGML_F32, t->n_dims, t->ne, f, &err);
    }
    ok = ok && !okv_gguf_writer_write(w, dst, &err);
    if (!ok) fprintf(stderr, "dequantize: %s\n", err.message);
    for (int i = 0; i < nb; i++) free(bufs[i]);
    okv_gguf_writer_free(w);
    okv_gguf_close(g);
    return ok;
}

static void compare(const char *what, const float *a, const float *b, int V, double allow) {
    double lo = 1e30, hi = -1e30, d = 0;
    int agree = 0;
    for (int i = 0; i < N_TOK * V; i++) {
        lo = fmin(lo, b[i]);
        hi = fmax(hi, b[i]);
        d = fmax(d, fabs(a[i] - b[i]));
    }
    for (int r = 0; r < N_TOK; r++) {
        int ia = 0, ib = 0;
        for (int j = 1; j < V; j++) {
            if (a[r * V + j] > a[r * V + ia]) ia = j;
            if (b[r * V + j] > b[r * V + ib]) ib = j;
        }
        agree += ia == ib;
    }
    printf("%-28s max |diff| %.4g = %.2f%% of the logit range %.3g; argmax agrees on %d/%d rows\n", what, d,
           100 * d / (hi - lo), hi - lo, agree, N_TOK);
    CHECK(d <= allow * (hi - lo), "%s: max diff %g over %.0f%% of range %g", what, d, 100 * allow, hi - lo);
}

int main(void) {
    const char *bin = getenv("OKV_BIN");
    if (!bin) { printf("skipped: OKV_BIN (the build folder) not set\n"); return CHECK_SKIP; }
    const char *types[] = {"f32", "q8_0", "q4_0"};
    char cmd[4096], path[3][64];
    for (int i = 0; i < 3; i++) {
        snprintf(path[i], sizeof path[i], "test_quant_model.%s.tmp.gguf", types[i]);
        snprintf(cmd, sizeof cmd,
                 "'%s/offkv' synth --arch llama --n-embd 128 --n-layer 3 --n-head 4 --n-head-kv 2 --n-ff 256 "
                 "--type %s --seed 11 -o %s 2> /dev/null",
                 bin, types[i], path[i]);
        CHECK(system(cmd) == 0, "synth: %s", cmd);
    }
    int V = 0;
    float *f32 = logits_of(path[0], &V);
    for (int i = 1; i < 3 && f32; i++) {
        char twin[80], label[64];
        snprintf(twin, sizeof twin, "test_quant_model.%s-as-f32.tmp.gguf", types[i]);
        CHECK(write_dequantized(path[i], twin), "dequantized twin of %s", types[i]);
        float *q = logits_of(path[i], &V), *t = logits_of(twin, &V);
        if (q && t) {
            snprintf(label, sizeof label, "%s vs its f32 twin", types[i]);
            compare(label, q, t, V, 0.02);
            snprintf(label, sizeof label, "%s vs the f32 source", types[i]);
            compare(label, q, f32, V, i == 1 ? 0.03 : 0.20);
        }
        free(q);
        free(t);
        remove(twin);
    }
    free(f32);
    for (int i = 0; i < 3; i++) remove(path[i]);
    return check_done();
}
