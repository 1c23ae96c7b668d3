/* Cross-layer K/V sharing (okv_layer_geometry.kv_from; YOCO, Gemma 3n): a
 * sharing layer stores nothing and attends its donor's rows with its own
 * queries.
 *  - The cache: sharers (flat and ring) against a plain attention over the
 *    donor's K/V, through prefill wider than the window and ring wraps; no
 *    storage for sharers; every bad donor refused at create, naming the
 *    layers; K/V given to a sharer, or a sharer before its donor, refused.
 *  - A model: tiny-llama with llama.attention.shared_kv_layers = 2 against
 *    the dense double-precision forward (tests/dense_llama.h) in which the
 *    top two layers reuse layer 1's K/V; gemma3 files whose shared layers
 *    have no donor of their kind are refused naming the key. */
#include <math.h>
#include <stdint.h>

#include "check.h"
#include "dense_llama.h"
#include "gguf_copy.h"
#include "offkv/offkv.h"

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static float frand(void) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (float)((rng >> 40) * (1.0 / 8388608.0)) - 1.0f;
}

enum { NKV = 2, HD = 16, GROUP = 2, NH = NKV * GROUP, W = 4, T = 30, MW = 8 };

/* K/V of every position of the two owning layers, [layer][pos][kv head][hd]. */
static float K[2][T][NKV][HD], V[2][T][NKV][HD];

static void reference(int owner, int window, int start, int n, const float *q, double *out) {
    for (int t = 0; t < n; t++)
        for (int h = 0; h < NH; h++) {
            const int p = start + t, g = h / GROUP, lo = window && p - window + 1 > 0 ? p - window + 1 : 0;
            double s[T], mx = -INFINITY, sum = 0;
            for (int k = lo; k <= p; k++) {
                double d = 0;
                for (int i = 0; i < HD; i++) d += (double)q[((size_t)t * NH + h) * HD + i] * K[owner][k][g][i];
                s[k] = d * 0.25;
                mx = fmax(mx, s[k]);
            }
            double *o = out + ((size_t)t * NH + h) * HD;
            for (int i = 0; i < HD; i++) o[i] = 0;
            for (int k = lo; k <= p; k++) {
                const double w = exp(s[k] - mx);
                sum += w;
                for (int i = 0; i < HD; i++) o[i] += w * V[owner][k][g][i];
            }
            for (int i = 0; i < HD; i++) o[i] /= sum;
        }
}

static void cache_level(void) {
    /* layers: 0 flat, 1 ring, 2 flat reading 0, 3 ring reading 1 */
    okv_layer_geometry geo[4] = {{NKV, HD, 0, 0}, {NKV, HD, W, 0}, {NKV, HD, 0, 1}, {NKV, HD, W, 2}};
    okv_cache_config cfg = {.capacity = 64, .initial_capacity = 4, .max_write = MW, .dtype = OKV_F32};
    okv_error err;
    okv_cache *c = okv_cache_create(geo, 4, &cfg, &err);
    CHECK(c != NULL, "create: %s", err.message);
    if (!c) return;
    float q[MW * NH * HD], out[MW * NH * HD];
    double want[MW * NH * HD];
    double worst = 0;
    for (int start = 0; start < T;) {
        const int n = start == 0 ? 7 : (start % 4) + 1 > T - start ? T - start : (start % 4) + 1;
        int32_t pos[MW];
        for (int t = 0; t < n; t++) {
            pos[t] = start + t;
            for (int l = 0; l < 2; l++)
                for (int g = 0; g < NKV; g++)
                    for (int i = 0; i < HD; i++) K[l][start + t][g][i] = frand(), V[l][start + t][g][i] = frand();
        }
        okv_step *s = okv_step_begin(c, pos, n, NULL, &err);
        CHECK(s != NULL, "begin: %s", err.message);
        if (!s) break;
        for (int layer = 0; layer < 4; layer++) {
            const int owner = layer % 2;
            for (int i = 0; i < n * NH * HD; i++) q[i] = frand();
            const void *k = layer < 2 ? (const void *)&K[owner][start] : NULL;
            const void *v = layer < 2 ? (const void *)&V[owner][start] : NULL;
            CHECK_STATUS(okv_update_and_attend(s, layer, q, NH, k, v, OKV_F32, 0.25f, out, &err), OKV_OK, err);
            reference(owner, owner ? W : 0, start, n, q, want);
            for (int i = 0; i < n * NH * HD; i++) worst = fmax(worst, fabs(out[i] - want[i]));
        }
        CHECK_STATUS(okv_step_commit(s, &err), OKV_OK, err);
        start += n;
    }
    CHECK(worst < 1e-5, "sharing layers against the donor's K/V: max error %g", worst);
    CHECK(okv_cache_rows(c, 2) == 0 && okv_cache_rows(c, 3) == 0 && okv_cache_layer_bytes(c, 2) == 0 &&
              okv_cache_layer_bytes(c, 3) == 0,
          "sharing layers hold no storage");
    CHECK(okv_cache_bytes(c) == okv_cache_layer_bytes(c, 0) + okv_cache_layer_bytes(c, 1), "bytes: owners only");
    CHECK(okv_cache_can_rewind(c, T - 3) && !okv_cache_can_rewind(c, 5), "rewind limits are the donor ring's");

    /* misuse inside a step */
    int32_t pos[1] = {T};
    okv_step *s = okv_step_begin(c, pos, 1, NULL, &err);
    CHECK_STATUS(okv_update_and_attend(s, 2, q, NH, NULL, NULL, OKV_F32, 0.25f, out, &err), OKV_ERR_INVALID, err);
    CHECK(strstr(err.message, "layer 2") && strstr(err.message, "layer 0") && strstr(err.message, "not written"),
          "a sharer before its donor: %s", err.message);
    CHECK_STATUS(okv_step_commit(s, &err), OKV_ERR_INVALID, err);
    okv_step_abort(s);
    s = okv_step_begin(c, pos, 1, NULL, &err);
    CHECK_STATUS(okv_update_and_attend(s, 0, q, NH, K[0][0], V[0][0], OKV_F32, 0.25f, out, &err), OKV_OK, err);
    CHECK_STATUS(okv_update_and_attend(s, 2, q, NH, K[0][0], V[0][0], OKV_F32, 0.25f, out, &err), OKV_ERR_INVALID,
                 err);
    CHECK(strstr(err.message, "NULL k and v") != NULL, "K/V given to a sharer: %s", err.message);
    okv_step_abort(s);
    CHECK(okv_cache_length(c) == T, "aborted steps left the length");
    okv_cache_release(c);

    /* bad donors, each refused at create naming the layers */
    static const struct { okv_layer_geometry g[3]; const char *needle; } bad[] = {
        {{{NKV, HD, 0, 0}, {NKV, HD, 0, 2}, {NKV, HD, 0, 0}}, "layer 1: kv_from 2 names layer 1"},
        {{{NKV, HD, 0, 0}, {NKV, HD, 0, 3}, {NKV, HD, 0, 0}}, "names layer 2"},
        {{{NKV, HD, 0, 0}, {NKV, HD, 0, 1}, {NKV, HD, 0, 2}}, "which itself shares"},
        {{{NKV, HD, 0, 0}, {NKV, 32, 0, 1}, {NKV, HD, 0, 0}}, "layer 1 (kv heads 2, head dim 32"},
        {{{NKV, HD, 0, 0}, {1, HD, 0, 1}, {NKV, HD, 0, 0}}, "shares layer 0"},
        {{{NKV, HD, 0, 0}, {NKV, HD, W, 1}, {NKV, HD, 0, 0}}, "window 4"},
        {{{NKV, HD, 0, 0}, {NKV, HD, 0, -1}, {NKV, HD, 0, 0}}, "kv_from -1"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        okv_cache *b = okv_cache_create(bad[i].g, 3, &cfg, &err);
        CHECK(!b && err.status == OKV_ERR_INVALID && strstr(err.message, bad[i].needle),
              "bad donor %zu: want a refusal naming '%s', got '%s'", i, bad[i].needle, err.message);
        okv_cache_release(b);
    }
}

/* tiny-llama (4 layers) with its top 2 layers reading layer 1's K/V. */
static void model_level(const char *shared) {
    char src[1024];
    snprintf(src, sizeof src, "%s/models/tiny-llama.gguf", shared);
    const char *tmp = "test_kv_share.tmp.gguf";
    okv_error err;
    okv_gguf *g = okv_gguf_open(src, &err);
    okv_gguf_writer *w = okv_gguf_writer_create(&err);
    int ok = g && w && copy_metadata(g, w) && copy_tensors(g, w) &&
             okv_gguf_writer_add_u32(w, "llama.attention.shared_kv_layers", 2, &err) == OKV_OK &&
             okv_gguf_writer_write(w, tmp, &err) == OKV_OK;
    okv_gguf_writer_free(w);
    CHECK(ok, "write the sharing model: %s", err.message);
    okv_model *m = ok ? okv_model_load(tmp, NULL, &err) : NULL;
    CHECK(m != NULL, "load: %s", err.message);
    okv_layer_geometry lg;
    CHECK(m && okv_model_layer_geometry(m, 2, &lg) && lg.kv_from == 2 && okv_model_layer_geometry(m, 3, &lg) &&
              lg.kv_from == 2 && okv_model_layer_geometry(m, 1, &lg) && lg.kv_from == 0,
          "layers 2 and 3 read layer 1's K/V");
    if (m) {
        enum { N = 40 };
        int tokens[N];
        int32_t t32[N], pos[N];
        for (int i = 0; i < N; i++) tokens[i] = t32[i] = i == 0 ? 1 : 3 + (int)((i * 7919u) % 500u), pos[i] = i;
        const char *opts[] = {"kv_type", "f32", "max_write", "16", "capacity", "64", NULL};
        okv_context *ctx = okv_context_create(m, opts, NULL, &err);
        const int32_t nv = okv_model_n_vocab(m);
        float *logits = malloc(sizeof(float) * N * nv);
        for (int s = 0; ctx && s < N; s += 16)
            CHECK_STATUS(okv_context_eval(ctx, t32 + s, pos + s, N - s < 16 ? N - s : 16, logits + (size_t)s * nv,
                                          &err),
                         OKV_OK, err);
        okv_cache *c = okv_context_cache(ctx);
        CHECK(okv_cache_layer_bytes(c, 2) == 0 && okv_cache_layer_bytes(c, 3) == 0 && okv_cache_layer_bytes(c, 1) > 0,
              "the sharing layers hold nothing");
        G = g;
        const dense_opts sharing = {.pos_scale = 1, .shared_kv = 2}, plain = {.pos_scale = 1};
        double *ref = dense_forward(tokens, N, &sharing), *ref_plain = dense_forward(tokens, N, &plain);
        double e = 0, e_plain = 0;
        for (size_t i = 0; i < (size_t)N * nv; i++) {
            e = fmax(e, fabs(logits[i] - ref[i]));
            e_plain = fmax(e_plain, fabs(logits[i] - ref_plain[i]));
        }
        printf("tiny-llama, 2 top layers sharing layer 1's K/V: max |diff| %.3g against the dense reference "
               "(%.3g against the same model without sharing)\n", e, e_plain);
        CHECK(e < 2e-4, "sharing model against the dense reference: %g", e);
        CHECK(e_plain > 100 * e, "sharing changes the result (%g vs %g)", e_plain, e);
        free(ref);
        free(ref_plain);
        free(logits);
        okv_context_free(ctx);
        okv_model_free(m);
    }
    okv_gguf_close(g);

    /* gemma3 (layers 0-4 sliding, 5 global): a shared global layer has no global donor */
    snprintf(src, sizeof src, "%s/models/tiny-gemma3.gguf", shared);
    g = okv_gguf_open(src, &err);
    w = okv_gguf_writer_create(&err);
    ok = g && w && copy_metadata(g, w) && copy_tensors(g, w) &&
         okv_gguf_writer_add_u32(w, "gemma3.attention.shared_kv_layers", 2, &err) == OKV_OK &&
         okv_gguf_writer_write(w, tmp, &err) == OKV_OK;
    okv_gguf_writer_free(w);
    okv_gguf_close(g);
    m = ok ? okv_model_load(tmp, NULL, &err) : NULL;
    CHECK(!m && err.status == OKV_ERR_FORMAT && strstr(err.message, "shared_kv_layers") &&
              strstr(err.message, "global"),
          "gemma3 with a shared global layer and no global donor: %s", err.message);
    okv_model_free(m);
    remove(tmp);
}

int main(void) {
    cache_level();
    const char *shared = check_shared_dir();
    if (!shared) printf("skipped the model checks: ../shared not found\n");
    else model_level(shared);
    return check_done();
}
