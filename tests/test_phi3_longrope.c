/* Phi-3's LongRoPE on variants of tiny-phi3 (which has no rope factors):
 * divisors of 2 on every frequency rotate as linear scaling by 2 does (the
 * angle theta / 2 equals 0.5 theta exactly), so
 *  - short factors of 2 give, bit for bit, the logits of linear scaling 2;
 *  - short factors of 1 and long factors of 2 with an original context of
 *    64 give the plain model's logits (llama.cpp's goldens) in a context of
 *    64 positions, and linear scaling 2's in one of 256 (llama.cpp picks
 *    the long factors by the context size, not the position);
 *  - an attention factor of 1 changes nothing and one of 1.3 changes the
 *    logits (cos and sin of every rotated pair are multiplied by it). */
#include <math.h>

#include "check.h"
#include "gguf_copy.h"
#include "golden.h"
#include "golden_run.h"

/* tiny-phi3 plus the named keys and factor tensors (factor < 0: none). */
static int write_variant(const char *out, float short_f, float long_f, int orig_ctx, float attn_factor,
                         float linear) {
    char path[1024];
    snprintf(path, sizeof path, "%s/models/tiny-phi3.gguf", shared);
    okv_error err = {0};
    okv_gguf *g = okv_gguf_open(path, &err);
    okv_gguf_writer *w = okv_gguf_writer_create(&err);
    int ok = g && w && copy_metadata(g, w) && copy_tensors(g, w);
    float fs[8], fl[8];
    for (int i = 0; i < 8; i++) { fs[i] = short_f; fl[i] = long_f; }
    const int64_t ne[1] = {8}; /* n_rot / 2 */
    if (ok && short_f > 0) ok = !okv_gguf_writer_add_tensor(w, "rope_factors_short.weight", OKV_GGML_F32, 1, ne, fs, &err);
    if (ok && long_f > 0) ok = !okv_gguf_writer_add_tensor(w, "rope_factors_long.weight", OKV_GGML_F32, 1, ne, fl, &err);
    if (ok && orig_ctx > 0)
        ok = !okv_gguf_writer_add_u32(w, "phi3.rope.scaling.original_context_length", (uint32_t)orig_ctx, &err);
    if (ok && attn_factor > 0) ok = !okv_gguf_writer_add_f32(w, "phi3.rope.scaling.attn_factor", attn_factor, &err);
    if (ok && linear > 0) {
        ok = !okv_gguf_writer_add_str(w, "phi3.rope.scaling.type", "linear", &err) &&
             !okv_gguf_writer_add_f32(w, "phi3.rope.scaling.factor", linear, &err);
    }
    ok = ok && !okv_gguf_writer_write(w, out, &err);
    CHECK(ok, "writing %s: %s", out, err.message);
    okv_gguf_writer_free(w);
    okv_gguf_close(g);
    return ok;
}

/* Logits of the 121 golden tokens in a context of capacity positions
 * (chunks of 16, f32 K/V), or NULL. */
static float *logits_of(const char *path, const int *tokens, int capacity) {
    okv_error err;
    okv_model *m = okv_model_load(path, NULL, &err);
    CHECK(m != NULL, "load %s: %s", path, err.message);
    if (!m) return NULL;
    char cap[16];
    snprintf(cap, sizeof cap, "%d", capacity);
    const char *opts[] = {"max_write", "16", "kv_type", "f32", "n_threads", "1", "capacity", cap, NULL};
    okv_context *ctx = okv_context_create(m, opts, NULL, &err);
    CHECK(ctx != NULL, "context: %s", err.message);
    const int V = okv_model_n_vocab(m), n = capacity < 121 ? capacity : 121;
    float *logits = ctx ? malloc(sizeof(float) * 121 * V) : NULL;
    for (int s = 0; logits && s < n; s += 16) {
        int len = n - s < 16 ? n - s : 16, pos[16];
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

int main(void) {
    shared = check_shared_dir();
    if (!shared) { printf("skipped: ../shared not found\n"); return CHECK_SKIP; }
    char json_path[1024], f32_path[1024];
    snprintf(json_path, sizeof json_path, "%s/golden/tiny-phi3.seq121.seed42.chunk16.kvf32_faoff.json", shared);
    snprintf(f32_path, sizeof f32_path, "%s/golden/tiny-phi3.seq121.seed42.chunk16.kvf32_faoff.f32", shared);
    char *json = golden_read(json_path, NULL);
    float *ref = (float *)golden_read(f32_path, NULL);
    int tokens[200];
    const int n = json ? golden_ints(json, "tokens", tokens, 200) : -1;
    CHECK(ref && n == 121, "tiny-phi3 goldens");
    const int V = 32064;
    const size_t n64 = (size_t)64 * V, n121 = (size_t)121 * V;
    const char *lin = "test_phi3_longrope.linear.tmp.gguf", *shrt = "test_phi3_longrope.short.tmp.gguf",
               *lng = "test_phi3_longrope.long.tmp.gguf", *af1 = "test_phi3_longrope.af1.tmp.gguf",
               *af = "test_phi3_longrope.af.tmp.gguf";
    if (ref && n == 121 && write_variant(lin, -1, -1, 0, 0, 2.0f) && write_variant(shrt, 2.0f, -1, 0, 0, 0) &&
        write_variant(lng, 1.0f, 2.0f, 64, 0, 0) && write_variant(af1, -1, -1, 0, 1.0f, 0) &&
        write_variant(af, -1, -1, 0, 1.3f, 0)) {
        float *linear = logits_of(lin, tokens, 256), *by_short = logits_of(shrt, tokens, 256);
        float *long64 = logits_of(lng, tokens, 64), *long256 = logits_of(lng, tokens, 256);
        float *one = logits_of(af1, tokens, 256), *scaled = logits_of(af, tokens, 256);
        if (linear && by_short && long64 && long256 && one && scaled) {
            const double d_lin_plain = max_diff(linear, ref, n121);
            printf("linear scaling 2 moves the logits by %.3g from the plain model's\n", d_lin_plain);
            CHECK(d_lin_plain > 0.05, "linear scaling 2 should change the logits (%g)", d_lin_plain);
            CHECK(memcmp(by_short, linear, n121 * sizeof(float)) == 0, "short factors of 2 differ from linear 2 by %g",
                  max_diff(by_short, linear, n121));
            const double d64 = max_diff(long64, ref, n64);
            printf("short 1 / long 2, original context 64: a 64-position context is %.3g from llama.cpp's plain "
                   "logits; a 256-position one is %.3g from linear scaling 2\n",
                   d64, max_diff(long256, linear, n121));
            CHECK(d64 <= 1e-3 * 4.48, "context 64 should use the short factors: %g from the goldens", d64);
            CHECK(memcmp(long256, linear, n121 * sizeof(float)) == 0, "context 256 should use the long factors");
            CHECK(max_diff(one, ref, n121) <= 1e-3 * 4.48, "attention factor 1 changed the logits by %g",
                  max_diff(one, ref, n121));
            const double d_af = max_diff(scaled, ref, n121);
            printf("attention factor 1.3 moves the logits by %.3g\n", d_af);
            CHECK(d_af > 0.05, "attention factor 1.3 is not applied (%g)", d_af);
        }
        free(linear); free(by_short); free(long64); free(long256); free(one); free(scaled);
    }
    remove(lin); remove(shrt); remove(lng); remove(af1); remove(af);
    free(json);
    free(ref);
    return check_done();
}
