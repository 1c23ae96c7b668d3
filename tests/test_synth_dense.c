/* offkv synth for the dense families of 2026: each architecture's file
 * holds its own tensors (qwen2's Q/K/V biases, qwen3's Q/K norms, gemma2's
 * post norms and soft caps with no output matrix, phi3's fused attn_qkv and
 * 2 n_ff-row ffn_up) and loads and runs; every --preset writes the real
 * model's shape (the numbers below are from each model's config.json,
 * typed here independently of synth's table), with the flags beside it
 * overriding its values whatever their order. */
#include <math.h>

#include "check.h"
#include "offkv/offkv.h"

static const char *bin;

static int synth(const char *args, const char *out) {
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "'%s/offkv' synth %s -o %s 2> /dev/null", bin, args, out);
    return system(cmd);
}

static uint32_t u32(const okv_gguf *g, const char *arch, const char *suffix) {
    char key[160];
    snprintf(key, sizeof key, "%s.%s", arch, suffix);
    uint32_t v = 0;
    okv_error err;
    if (okv_gguf_get_u32(g, key, &v, &err)) return 0;
    return v;
}

static float f32(const okv_gguf *g, const char *arch, const char *suffix) {
    char key[160];
    snprintf(key, sizeof key, "%s.%s", arch, suffix);
    float v = 0;
    okv_error err;
    if (okv_gguf_get_f32(g, key, &v, &err)) return 0;
    return v;
}

static void arch_case(const char *arch, const char *const *must, const char *const *must_not) {
    const char *out = "test_synth_dense.tmp.gguf";
    char args[256];
    snprintf(args, sizeof args, "--arch %s --n-layer 4 --type q8_0 --seed 3", arch);
    CHECK(synth(args, out) == 0, "synth %s", args);
    okv_error err;
    okv_gguf *g = okv_gguf_open(out, &err);
    CHECK(g != NULL, "%s: open: %s", arch, g ? "" : err.message);
    for (int i = 0; g && must[i]; i++) CHECK(okv_gguf_find_tensor(g, must[i]) >= 0, "%s: no %s", arch, must[i]);
    for (int i = 0; g && must_not[i]; i++)
        CHECK(okv_gguf_find_tensor(g, must_not[i]) < 0, "%s: has %s", arch, must_not[i]);
    okv_gguf_close(g);
    okv_model *m = okv_model_load(out, NULL, &err);
    CHECK(m != NULL, "%s: load: %s", arch, m ? "" : err.message);
    if (m) {
        CHECK(strcmp(okv_model_arch(m), arch) == 0, "%s: loaded as %s", arch, okv_model_arch(m));
        okv_context *ctx = okv_context_create(m, NULL, NULL, &err);
        const int V = okv_model_n_vocab(m);
        float *logits = malloc(sizeof(float) * V);
        int32_t toks[20], pos[20];
        for (int i = 0; i < 20; i++) { toks[i] = i == 0 ? 1 : 3 + i * 7 % 300; pos[i] = i; }
        const okv_status st = ctx ? okv_context_eval_last(ctx, toks, pos, 20, logits, &err) : OKV_ERR_INVALID;
        int finite = st == OKV_OK;
        for (int i = 0; finite && i < V; i++) finite = isfinite(logits[i]);
        CHECK(finite, "%s: 20 tokens: %s", arch, st ? err.message : "non-finite logits");
        printf("%-8s synthesized, loaded and ran: %s\n", arch, okv_model_describe(m));
        free(logits);
        okv_context_free(ctx);
    }
    okv_model_free(m);
    remove(out);
}

typedef struct want {
    const char *preset, *arch;
    uint32_t n_head, n_head_kv, head_dim, n_ff, ctx, n_vocab;
    float rope_base;
    bool tied;
} want;

static void preset_case(const want *w) {
    const char *out = "test_synth_dense.preset.tmp.gguf";
    char args[256];
    /* the shape's width and depth overridden (before and after the preset) to keep the file small */
    snprintf(args, sizeof args, "--n-embd 256 --preset %s --n-layer 1 --n-vocab 600", w->preset);
    CHECK(synth(args, out) == 0, "synth %s", args);
    okv_error err;
    okv_gguf *g = okv_gguf_open(out, &err);
    CHECK(g != NULL, "%s: open", w->preset);
    if (g) {
        const char *arch = NULL;
        size_t len = 0;
        okv_gguf_get_str(g, "general.architecture", &arch, &len, &err);
        CHECK(arch && len == strlen(w->arch) && !memcmp(arch, w->arch, len), "%s: architecture", w->preset);
        CHECK(u32(g, w->arch, "embedding_length") == 256 && u32(g, w->arch, "block_count") == 1 &&
                  u32(g, w->arch, "vocab_size") == 600,
              "%s: overrides not applied", w->preset);
        CHECK(u32(g, w->arch, "attention.head_count") == w->n_head &&
                  u32(g, w->arch, "attention.head_count_kv") == w->n_head_kv &&
                  u32(g, w->arch, "attention.key_length") == w->head_dim &&
                  u32(g, w->arch, "feed_forward_length") == w->n_ff && u32(g, w->arch, "context_length") == w->ctx,
              "%s: shape differs from the model's config", w->preset);
        CHECK(f32(g, w->arch, "rope.freq_base") == w->rope_base, "%s: rope base %g", w->preset,
              f32(g, w->arch, "rope.freq_base"));
        CHECK((okv_gguf_find_tensor(g, "output.weight") < 0) == w->tied, "%s: tied should be %d", w->preset, w->tied);
        okv_gguf_close(g);
        okv_model *m = okv_model_load(out, NULL, &err);
        CHECK(m != NULL, "%s: load: %s", w->preset, m ? "" : err.message);
        okv_model_free(m);
    }
    remove(out);
    printf("--preset %-11s writes %s with %u/%u heads of %u, ffn %u, context %u\n", w->preset, w->arch, w->n_head,
           w->n_head_kv, w->head_dim, w->n_ff, w->ctx);
}

int main(void) {
    bin = getenv("OKV_BIN");
    if (!bin) { printf("skipped: OKV_BIN (the build folder) not set\n"); return CHECK_SKIP; }
    static const char *const none[] = {NULL};
    static const char *const qwen2[] = {"blk.0.attn_q.bias", "blk.3.attn_k.bias", "blk.3.attn_v.bias", NULL};
    static const char *const qwen3[] = {"blk.0.attn_q_norm.weight", "blk.3.attn_k_norm.weight", NULL};
    static const char *const gemma2[] = {"blk.0.post_attention_norm.weight", "blk.3.post_ffw_norm.weight", NULL};
    static const char *const gemma2_not[] = {"output.weight", NULL};
    static const char *const phi3[] = {"blk.0.attn_qkv.weight", "blk.3.ffn_up.weight", NULL};
    static const char *const phi3_not[] = {"blk.0.attn_q.weight", "blk.0.ffn_gate.weight", NULL};
    arch_case("qwen2", qwen2, none);
    arch_case("qwen3", qwen3, none);
    arch_case("gemma2", gemma2, gemma2_not);
    arch_case("phi3", phi3, phi3_not);
    arch_case("smollm3", none, none);

    static const want presets[] = {
        {"qwen3-4b", "qwen3", 32, 8, 128, 9728, 40960, 151936, 1e6f, true},
        {"qwen2.5-7b", "qwen2", 28, 4, 128, 18944, 32768, 152064, 1e6f, false},
        {"gemma-2-9b", "gemma2", 16, 8, 256, 14336, 8192, 256000, 1e4f, true},
        {"phi-4", "phi3", 40, 10, 128, 17920, 16384, 100352, 250000.0f, false},
        {"smollm3-3b", "smollm3", 16, 4, 128, 11008, 65536, 128256, 5e6f, true},
    };
    for (size_t i = 0; i < sizeof presets / sizeof presets[0]; i++) preset_case(&presets[i]);
    CHECK(synth("--preset qwen9", "test_synth_dense.bad.tmp.gguf") != 0, "an unknown preset is refused");
    return check_done();
}
