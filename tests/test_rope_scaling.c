/* RoPE scaling, read in one place for every architecture (issue 16: the
 * long-context Qwen 2.5 / Qwen 3 files whose rope.scaling.type is yarn):
 *  - tiny-qwen2, tiny-qwen3moe and tiny-llama with rope.scaling.type yarn, factor 4 and
 *    an original context that puts YaRN's ramp in the middle of the
 *    rotated pairs: the cos/sin each layer rotates by (okv_fwd_rope_cs,
 *    what okv_fwd_rope applies) against YaRN written below in double
 *    precision from its definition (ggml's rope_yarn, llama.cpp's defaults
 *    beta_fast 32, beta_slow 1, ext_factor 1, cos and sin times
 *    1 + 0.1 ln factor), and once more with the file's own betas;
 *  - the yarn tiny-qwen2 evaluates, and its logits move away from the
 *    plain model's (llama.cpp's goldens), while yarn with factor 1 keeps
 *    them within the golden tests' tolerance;
 *  - muse-glimmer reads them too (it read none: a YaRN file ran unscaled);
 *  - an unknown scaling type is refused naming it, a YaRN factor below 1
 *    naming the key. */
#include <math.h>

#include "check.h"
#include "gguf_copy.h"
#include "golden.h"
#include "golden_run.h"
#include "model/model_impl.h"

/* model (from ../shared/models) with the rope.scaling keys given (NULL /
 * <= 0: left out) written to out. */
static int write_variant(const char *model, const char *out, const char *type, float factor, uint32_t orig,
                         float beta_fast, float beta_slow) {
    char path[1024], key[128];
    snprintf(path, sizeof path, "%s/models/%s.gguf", shared, model);
    okv_error err = {0};
    okv_gguf *g = okv_gguf_open(path, &err);
    okv_gguf_writer *w = okv_gguf_writer_create(&err);
    int ok = g && w && copy_metadata(g, w) && copy_tensors(g, w);
    const char *arch = model + 5; /* "tiny-" */
#define KEY(s) (snprintf(key, sizeof key, "%s.rope.scaling.%s", arch, s), key)
    if (ok && type) ok = !okv_gguf_writer_add_str(w, KEY("type"), type, &err);
    if (ok && factor > 0) ok = !okv_gguf_writer_add_f32(w, KEY("factor"), factor, &err);
    if (ok && orig > 0) ok = !okv_gguf_writer_add_u32(w, KEY("original_context_length"), orig, &err);
    if (ok && beta_fast > 0) ok = !okv_gguf_writer_add_f32(w, KEY("yarn_beta_fast"), beta_fast, &err);
    if (ok && beta_slow > 0) ok = !okv_gguf_writer_add_f32(w, KEY("yarn_beta_slow"), beta_slow, &err);
#undef KEY
    ok = ok && !okv_gguf_writer_write(w, out, &err);
    CHECK(ok, "writing %s: %s", out, err.message);
    okv_gguf_writer_free(w);
    okv_gguf_close(g);
    return ok;
}

/* YaRN's cos/sin of pair i at position pos, in double precision. */
static void yarn_reference(int n_rot, double base, double factor, double orig, double beta_fast, double beta_slow,
                           int pos, double *cs, int *low_out, int *high_out) {
    const double pi = 3.14159265358979323846;
    /* the pair whose wavelength turns n times over the original context */
    const double d_fast = n_rot * log(orig / (beta_fast * 2 * pi)) / (2 * log(base));
    const double d_slow = n_rot * log(orig / (beta_slow * 2 * pi)) / (2 * log(base));
    const double low = fmax(0, floor(d_fast)), high = fmin(n_rot - 1, ceil(d_slow));
    const double mscale = 1 + 0.1 * log(factor);
    for (int i = 0; i < n_rot / 2; i++) {
        const double extrap = pos * pow(base, -2.0 * i / n_rot), interp = extrap / factor;
        /* 1 below low (kept), 0 above high (interpolated), linear between */
        const double ramp = 1 - fmin(1, fmax(0, (i - low) / fmax(0.001, high - low)));
        const double theta = interp * (1 - ramp) + extrap * ramp;
        cs[2 * i] = cos(theta) * mscale;
        cs[2 * i + 1] = sin(theta) * mscale;
    }
    *low_out = (int)low;
    *high_out = (int)high;
}

/* An original context whose ramp runs through the middle pairs: the
 * geometric mean of the betas' wavelengths at pair n_rot / 4. */
static uint32_t mid_orig_ctx(double base, double beta_fast, double beta_slow) {
    return (uint32_t)lround(2 * 3.14159265358979323846 * sqrt(beta_fast * beta_slow) * sqrt(base));
}

/* Every layer's cos/sin at a few positions against the reference; the
 * largest difference. */
static void check_cs(const char *path, double factor, double beta_fast, double beta_slow) {
    okv_error err;
    okv_model *m = okv_model_load(path, NULL, &err);
    CHECK(m != NULL, "load %s: %s", path, err.message);
    if (!m) return;
    static const int positions[] = {0, 1, 3, 7, 31, 100, 1000};
    double worst = 0, worst_rel = 0;
    int low = 0, high = 0;
    for (int32_t il = 0; il < m->n_layer; il++) {
        const okv_layer_params *p = &m->layer[il];
        CHECK(m->yarn.ext_factor == 1.0f && m->yarn.orig_ctx == m->n_ctx_orig, "%s: yarn not set", path);
        for (size_t j = 0; j < sizeof positions / sizeof positions[0]; j++) {
            const int pos = positions[j];
            float cs[512];
            double ref[512];
            okv_fwd_rope_cs(m, p, 4096, pos, cs);
            yarn_reference(p->n_rot, p->rope_base, factor, m->n_ctx_orig, beta_fast, beta_slow, pos, ref, &low, &high);
            /* f32 angles (ggml's repeated multiplication) drift by about
             * an ulp per pair and position */
            const double tol = 1e-6 + 4e-7 * p->n_rot * pos;
            for (int i = 0; i < p->n_rot; i++) {
                const double d = fabs(cs[i] - ref[i]);
                worst = fmax(worst, d);
                worst_rel = fmax(worst_rel, d / tol);
                CHECK(d <= tol, "%s layer %d pos %d value %d: %.9g vs YaRN's %.9g", path, (int)il, pos, i, cs[i],
                      ref[i]);
            }
        }
    }
    printf("%s: ramp over pairs %d..%d of %d; cos/sin within %.3g of YaRN in double (%.2f of the tolerance)\n",
           path, low, high, m->layer[0].n_rot / 2, worst, worst_rel);
    CHECK(low > 0 && high <= m->layer[0].n_rot / 2 - 1, "the ramp %d..%d should lie inside the pairs", low, high);
    okv_model_free(m);
}

/* The 121 golden tokens' logits (chunks of 16, f32 K/V), or NULL. */
static float *logits_of(const char *path, const int *tokens, int V) {
    okv_error err;
    okv_model *m = okv_model_load(path, NULL, &err);
    CHECK(m != NULL, "load %s: %s", path, err.message);
    if (!m) return NULL;
    const char *opts[] = {"max_write", "16", "kv_type", "f32", "n_threads", "1", NULL};
    okv_context *ctx = okv_context_create(m, opts, NULL, &err);
    CHECK(ctx != NULL, "context: %s", err.message);
    float *logits = ctx ? malloc(sizeof(float) * 121 * (size_t)V) : NULL;
    for (int s = 0; logits && s < 121; s += 16) {
        int len = 121 - s < 16 ? 121 - s : 16, pos[16];
        for (int i = 0; i < len; i++) pos[i] = s + i;
        if (okv_context_eval(ctx, tokens + s, pos, len, logits + (size_t)s * V, &err)) {
            CHECK(0, "eval: %s", err.message);
            free(logits);
            logits = NULL;
        }
    }
    okv_context_free(ctx);
    okv_model_free(m);
    return logits;
}

static double max_diff(const float *a, const float *b, size_t n) {
    double d = 0;
    for (size_t i = 0; i < n; i++) d = fmax(d, fabs((double)a[i] - b[i]));
    return d;
}

static void refused(const char *path, okv_status want, const char *needle) {
    okv_error err;
    okv_model *m = okv_model_load(path, NULL, &err);
    CHECK(!m && err.status == want && strstr(err.message, needle), "%s: want a refusal naming %s, got %s", path,
          needle, m ? "a model" : err.message);
    if (!m) printf("refused as expected: %s\n", err.message);
    okv_model_free(m);
}

int main(void) {
    shared = check_shared_dir();
    if (!shared) { printf("skipped: ../shared not found\n"); return CHECK_SKIP; }
    const char *yq2 = "test_rope_scaling.qwen2.tmp.gguf", *yq2b = "test_rope_scaling.qwen2b.tmp.gguf",
               *ymoe = "test_rope_scaling.qwen3moe.tmp.gguf", *y1 = "test_rope_scaling.one.tmp.gguf",
               *bad = "test_rope_scaling.bad.tmp.gguf", *low = "test_rope_scaling.low.tmp.gguf",
               *yllama = "test_rope_scaling.llama.tmp.gguf", *ymuse = "test_rope_scaling.muse.tmp.gguf";
    /* the tiny models' base, read back from a plain load */
    char path[1024];
    snprintf(path, sizeof path, "%s/models/tiny-qwen2.gguf", shared);
    okv_error err;
    okv_model *plain = okv_model_load(path, NULL, &err);
    CHECK(plain != NULL, "load %s: %s", path, err.message);
    const double base = plain ? plain->layer[0].rope_base : 10000;
    okv_model_free(plain);
    snprintf(path, sizeof path, "%s/models/tiny-qwen3moe.gguf", shared);
    plain = okv_model_load(path, NULL, &err);
    CHECK(plain != NULL, "load %s: %s", path, err.message);
    const double base_moe = plain ? plain->layer[0].rope_base : 10000;
    okv_model_free(plain);

    if (write_variant("tiny-qwen2", yq2, "yarn", 4.0f, mid_orig_ctx(base, 32, 1), 0, 0))
        check_cs(yq2, 4.0, 32, 1);
    if (write_variant("tiny-qwen2", yq2b, "yarn", 8.0f, mid_orig_ctx(base, 16, 2), 16, 2)) check_cs(yq2b, 8.0, 16, 2);
    if (write_variant("tiny-qwen3moe", ymoe, "yarn", 4.0f, mid_orig_ctx(base_moe, 32, 1), 0, 0))
        check_cs(ymoe, 4.0, 32, 1);
    /* llama.cpp reads the keys alike for every architecture: llama too */
    snprintf(path, sizeof path, "%s/models/tiny-llama.gguf", shared);
    plain = okv_model_load(path, NULL, &err);
    CHECK(plain != NULL, "load %s: %s", path, err.message);
    const double base_llama = plain ? plain->layer[0].rope_base : 10000;
    okv_model_free(plain);
    if (write_variant("tiny-llama", yllama, "yarn", 4.0f, mid_orig_ctx(base_llama, 32, 1), 0, 0))
        check_cs(yllama, 4.0, 32, 1);

    /* the forward pass applies it */
    char json_path[1024], f32_path[1024];
    snprintf(json_path, sizeof json_path, "%s/golden/tiny-qwen2.seq121.seed42.chunk16.kvf32_faoff.json", shared);
    snprintf(f32_path, sizeof f32_path, "%s/golden/tiny-qwen2.seq121.seed42.chunk16.kvf32_faoff.f32", shared);
    char *json = golden_read(json_path, NULL);
    float *ref = (float *)golden_read(f32_path, NULL);
    int tokens[200];
    const int n = json ? golden_ints(json, "tokens", tokens, 200) : -1;
    CHECK(ref && n == 121, "tiny-qwen2 goldens");
    if (ref && n == 121 && write_variant("tiny-qwen2", y1, "yarn", 1.0f, 64, 0, 0)) {
        snprintf(path, sizeof path, "%s/models/tiny-qwen2.gguf", shared);
        plain = okv_model_load(path, NULL, &err);
        const int V = plain ? okv_model_n_vocab(plain) : 0;
        okv_model_free(plain);
        float *scaled = logits_of(yq2, tokens, V), *one = logits_of(y1, tokens, V);
        if (scaled && one) {
            const size_t all = (size_t)121 * V;
            const double d_scaled = max_diff(scaled, ref, all), d_one = max_diff(one, ref, all);
            printf("yarn factor 4 moves the logits by %.3g from llama.cpp's plain ones; factor 1 by %.3g\n", d_scaled,
                   d_one);
            CHECK(d_scaled > 0.01, "yarn factor 4 should change the logits (%g)", d_scaled);
            CHECK(d_one <= 1e-3 * 4.48, "yarn factor 1 should keep llama.cpp's logits (%g)", d_one);
        }
        free(scaled);
        free(one);
    }
    free(json);
    free(ref);

    /* muse-glimmer read no scaling keys at all: its sliding layers rotated
     * unscaled under a file that asked for YaRN */
    if (write_variant("tiny-muse-glimmer", ymuse, "yarn", 4.0f, 64, 0, 0)) {
        okv_model *mm = okv_model_load(ymuse, NULL, &err);
        CHECK(mm != NULL, "load %s: %s", ymuse, err.message);
        if (mm)
            CHECK(mm->layer[0].rope_pos_scale == 0.25f && mm->yarn.orig_ctx == 64,
                  "muse-glimmer reads YaRN: positions scaled by %g (want 0.25), original context %d (want 64)",
                  (double)mm->layer[0].rope_pos_scale, (int)mm->yarn.orig_ctx);
        okv_model_free(mm);
    }
    if (write_variant("tiny-muse-glimmer", bad, "dynamic", 2.0f, 0, 0, 0)) refused(bad, OKV_ERR_UNSUPPORTED, "'dynamic'");
    if (write_variant("tiny-qwen2", bad, "dynamic", 2.0f, 0, 0, 0)) refused(bad, OKV_ERR_UNSUPPORTED, "'dynamic'");
    if (write_variant("tiny-qwen3moe", bad, "ntk", 0, 0, 0, 0)) refused(bad, OKV_ERR_UNSUPPORTED, "'ntk'");
    if (write_variant("tiny-qwen2", low, "yarn", 0.5f, 0, 0, 0))
        refused(low, OKV_ERR_FORMAT, "qwen2.rope.scaling.factor");
    remove(yq2); remove(yq2b); remove(yllama); remove(ymoe); remove(y1); remove(bad); remove(low); remove(ymuse);
    return check_done();
}
