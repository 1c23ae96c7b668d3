/* Test support: a llama forward written plainly, in double precision, over
 * a whole sequence at once (full T x T scores, explicit masks, no cache):
 * the independent reference for windows and RoPE variants.  Reads F32
 * weights from the GGUF file set in G. */
#ifndef OKV_TESTS_DENSE_LLAMA_H
#define OKV_TESTS_DENSE_LLAMA_H

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

#include "offkv/offkv.h"

typedef struct dense_opts {
    int window;                 /* 0: full attention */
    double pos_scale;           /* positions are multiplied by this (1 / linear factor) */
    const float *freq_factors;  /* n_rot / 2 divisors of the rotation frequencies, or NULL */
    int n_rot;                  /* dimensions rotated per head; 0: all */
    int shared_kv;              /* the last shared_kv layers attend the K/V of the layer before them */
} dense_opts;

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

static void rope(double *x, int heads, int hd, int pos, double base, const dense_opts *o) {
    for (int h = 0; h < heads; h++)
        for (int i = 0; i < (o->n_rot ? o->n_rot : hd); i += 2) {
            double th = pos * o->pos_scale * pow(base, -(double)i / (o->n_rot ? o->n_rot : hd));
            if (o->freq_factors) th /= o->freq_factors[i / 2];
            double c = cos(th), s = sin(th);
            double a = x[h * hd + i], b = x[h * hd + i + 1];
            x[h * hd + i] = a * c - b * s;
            x[h * hd + i + 1] = a * s + b * c;
        }
}

/* The whole sequence at once; window 0 = full attention. */
static double *dense_forward(const int *tokens, int n_tokens, const dense_opts *opt) {
    const int T = n_tokens, window = opt->window;
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
    double *logits = malloc(sizeof(double) * T * V), *sc = malloc(sizeof(double) * T);
    const float *emb = tensor("token_embd.weight", 0);
    for (int t = 0; t < T; t++)
        for (int i = 0; i < E; i++) x[(size_t)t * E + i] = emb[(size_t)tokens[t] * E + i];
    for (int l = 0; l < L; l++) {
        for (int t = 0; t < T; t++) {
            rmsnorm(xb, x + (size_t)t * E, tensor("blk.%d.attn_norm.weight", l), E, epsf);
            matvec(q + (size_t)t * H * HD, tensor("blk.%d.attn_q.weight", l), xb, H * HD, E);
            rope(q + (size_t)t * H * HD, H, HD, t, basef, opt);
            /* a sharing layer keeps the k and v of the last layer that made them */
            if (l >= L - opt->shared_kv) continue;
            matvec(k + (size_t)t * KV * HD, tensor("blk.%d.attn_k.weight", l), xb, KV * HD, E);
            matvec(v + (size_t)t * KV * HD, tensor("blk.%d.attn_v.weight", l), xb, KV * HD, E);
            rope(k + (size_t)t * KV * HD, KV, HD, t, basef, opt);
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
    free(sc); free(x); free(xb); free(q); free(k); free(v); free(att); free(o); free(g); free(u);
    return logits;
}

#endif
