/* Metadata variants of real models, each written as a modified copy:
 *  - llama with a rope_freqs tensor (Llama 3), with linear RoPE scaling, and
 *    rotating only part of each head, against the dense double-precision
 *    reference with the same rotation;
 *  - head counts given per layer as arrays: same logits as scalars;
 *  - gemma3: linear scaling moves only global layers; no window key means
 *    no layer slides;
 *  - muse-glimmer without its window keys is refused, naming the key, and
 *    without a soft-cap key caps at 30;
 *  - tensors: a llama file's attention biases are applied (zero ones leave
 *    the logits bit-identical, others move them), a tensor the architecture
 *    does not use (an FFN bias) is refused naming it, rope_freqs has one
 *    factor per rotated pair, and data the kernels cannot read aligned
 *    (general.alignment 1) is refused;
 *  - gpt-oss without attention.sliding_window is refused (llama.cpp's too);
 *  - qwen3moe's feed_forward_length, which no tensor has, sizes nothing. */
#include "check.h"
#include "dense_llama.h"
#include "gguf_copy.h"

enum { T = 40, CHUNK = 8 };
static const char *shared;
static int tokens[T];

typedef struct extra {
    const char *const *skip;  /* keys to leave out */
    const char *f32_key;      /* a float key to add, or NULL */
    float f32_value;
    const char *str_key, *str_value;
    const char *arr_key;      /* a u32 array key to add (n_layers values) */
    const uint32_t *arr;
    int arr_n;
    const char *tensor;       /* an f32 vector tensor to add */
    const float *tensor_data;
    int64_t tensor_n;
    const char *u32_key;      /* a u32 key to add, or NULL */
    uint32_t u32_value;
    const char *const *vectors; /* n_vectors more f32 vectors, every value vector_fill */
    const int64_t *vector_lens;
    int n_vectors;
    float vector_fill;
} extra;

static const char *variant(const char *model, const extra *x) {
    static char dst[64];
    snprintf(dst, sizeof dst, "test_model_variants.tmp.gguf");
    char src[1024];
    snprintf(src, sizeof src, "%s/models/%s.gguf", shared, model);
    okv_error err;
    okv_gguf *g = okv_gguf_open(src, &err);
    okv_gguf_writer *w = okv_gguf_writer_create(&err);
    int ok = g && w && copy_metadata_except(g, w, x->skip) && copy_tensors(g, w);
    if (ok && x->f32_key) ok = !okv_gguf_writer_add_f32(w, x->f32_key, x->f32_value, &err);
    if (ok && x->str_key) ok = !okv_gguf_writer_add_str(w, x->str_key, x->str_value, &err);
    if (ok && x->arr_key) ok = !okv_gguf_writer_add_array(w, x->arr_key, OKV_GGUF_U32, x->arr, (uint64_t)x->arr_n, &err);
    if (ok && x->u32_key) ok = !okv_gguf_writer_add_u32(w, x->u32_key, x->u32_value, &err);
    if (ok && x->tensor) ok = !okv_gguf_writer_add_tensor(w, x->tensor, OKV_GGML_F32, 1, &x->tensor_n, x->tensor_data, &err);
    float fill[4096];
    for (int i = 0; i < 4096; i++) fill[i] = x->vector_fill;
    for (int i = 0; ok && i < x->n_vectors; i++)
        ok = !okv_gguf_writer_add_tensor(w, x->vectors[i], OKV_GGML_F32, 1, &x->vector_lens[i], fill, &err);
    ok = ok && !okv_gguf_writer_write(w, dst, &err);
    okv_gguf_writer_free(w);
    okv_gguf_close(g);
    CHECK(ok, "writing a variant of %s: %s", model, err.message);
    return ok ? dst : NULL;
}

static float *logits_of(const char *path) {
    okv_error err;
    okv_model *m = path ? okv_model_load(path, NULL, &err) : NULL;
    if (!m) { CHECK(0, "load %s: %s", path ? path : "(none)", err.message); return NULL; }
    const char *opts[] = {"max_write", "8", "kv_type", "f32", "capacity", "64", NULL};
    okv_context *ctx = okv_context_create(m, opts, NULL, &err);
    const int V = okv_model_n_vocab(m);
    float *out = malloc(sizeof(float) * T * V);
    int32_t pos[T];
    for (int i = 0; i < T; i++) pos[i] = i;
    for (int s = 0; s < T; s += CHUNK)
        if (okv_context_eval(ctx, tokens + s, pos + s, CHUNK, out + (size_t)s * V, &err)) CHECK(0, "eval: %s", err.message);
    okv_context_free(ctx);
    okv_model_free(m);
    return out;
}

static double max_diff(const float *a, const double *b, int n, double *max_abs) {
    double d = 0, mx = 0;
    for (int i = 0; i < n; i++) { d = fmax(d, fabs(a[i] - b[i])); mx = fmax(mx, fabs(b[i])); }
    if (max_abs) *max_abs = mx;
    return d;
}

static double max_diff_ff(const float *a, const float *b, int n) {
    double d = 0;
    for (int i = 0; i < n; i++) d = fmax(d, fabs(a[i] - b[i]));
    return d;
}

/* offkv on a variant against the dense reference with the same rotation. */
static void against_dense(const char *what, const char *path, const dense_opts *same, const dense_opts *plain) {
    float *ours = logits_of(path); /* a failure is reported there */
    okv_error err;
    okv_gguf *file = ours ? okv_gguf_open(path, &err) : NULL;
    if (!file) {
        free(ours);
        return;
    }
    G = file;
    double *ref = dense_forward(tokens, T, same), *ref_plain = dense_forward(tokens, T, plain), mx;
    double d = max_diff(ours, ref, T * 512, &mx), d_plain = max_diff(ours, ref_plain, T * 512, NULL);
    printf("%-26s max |diff| vs dense reference %.3g (max |logit| %.3g); vs unrotated-variant reference %.3g\n",
           what, d, mx, d_plain);
    CHECK(d <= 1e-4 * fmax(1, mx), "%s: differs from the dense reference by %g", what, d);
    CHECK(d_plain > 100 * d, "%s: the variant made no difference (%g vs %g)", what, d_plain, d);
    free(ours);
    free(ref);
    free(ref_plain);
    okv_gguf_close(file);
}

static void expect_load_error(const char *path, const char *needle, const char *what) {
    okv_error err = {0};
    okv_model *m = path ? okv_model_load(path, NULL, &err) : NULL;
    CHECK(path && !m && err.status == OKV_ERR_FORMAT && strstr(err.message, needle),
          "%s: got %s '%s', want an error naming %s", what, okv_status_name(err.status), err.message, needle);
    okv_model_free(m);
}

static void tensor_variants(void) {
    char orig[1024];
    snprintf(orig, sizeof orig, "%s/models/tiny-llama.gguf", shared);
    float *base = logits_of(orig);
    /* tiny-llama: 4 layers, n_embd 64, 4 heads and 2 kv heads of 16 */
    char names[4][4][40];
    const char *list[16];
    int64_t lens[16];
    static const char *const kinds[4] = {"attn_q", "attn_k", "attn_v", "attn_output"};
    static const int64_t widths[4] = {64, 32, 32, 64};
    int n = 0;
    for (int l = 0; l < 4; l++)
        for (int k = 0; k < 4; k++) {
            snprintf(names[l][k], sizeof names[l][k], "blk.%d.%s.bias", l, kinds[k]);
            list[n] = names[l][k];
            lens[n++] = widths[k];
        }
    extra zero_b = {.vectors = list, .vector_lens = lens, .n_vectors = n, .vector_fill = 0.0f};
    extra some_b = {.vectors = list, .vector_lens = lens, .n_vectors = n, .vector_fill = 0.05f};
    float *zero = logits_of(variant("tiny-llama", &zero_b));
    float *some = logits_of(variant("tiny-llama", &some_b));
    CHECK(base && zero && max_diff_ff(base, zero, T * 512) == 0, "zero attention biases moved llama's logits");
    CHECK(base && some && max_diff_ff(base, some, T * 512) > 1e-4, "llama's attention biases were not applied");
    free(zero);
    free(some);
    free(base);

    okv_error err = {0};
    const char *ffn_bias[] = {"blk.1.ffn_down.bias"};
    const int64_t ffn_len[] = {64};
    extra ffn_b = {.vectors = ffn_bias, .vector_lens = ffn_len, .n_vectors = 1, .vector_fill = 0.1f};
    const char *p = variant("tiny-llama", &ffn_b);
    okv_model *m = p ? okv_model_load(p, NULL, &err) : NULL;
    CHECK(!m && err.status == OKV_ERR_UNSUPPORTED && strstr(err.message, "'blk.1.ffn_down.bias' is not used"),
          "an FFN bias llama does not run: %s", m ? "loaded" : err.message);
    okv_model_free(m);

    /* rope_freqs: n_rot / 2 factors when only 8 of 16 dimensions rotate
     * (it wanted head_dim / 2 = 8, refusing llama.cpp's 4). */
    {
        static const char *const skip_rot[] = {"llama.rope.dimension_count", NULL};
        float f4[4] = {2.0f, 1.5f, 3.0f, 1.0f};
        extra rot_freqs = {.skip = skip_rot, .u32_key = "llama.rope.dimension_count", .u32_value = 8,
                           .tensor = "rope_freqs.weight", .tensor_data = f4, .tensor_n = 4};
        const dense_opts plain = {.pos_scale = 1};
        dense_opts rot8 = {.pos_scale = 1, .n_rot = 8, .freq_factors = f4};
        against_dense("rope_freqs for rope.dimension_count 8", variant("tiny-llama", &rot_freqs), &rot8, &plain);
    }

    /* general.alignment 1: the data section starts wherever the header
     * ends; pad strings of 1..4 bytes shift it, so some copy puts F32 data
     * off a multiple of 4: refused, never read misaligned. */
    int refused = 0;
    for (int pad = 1; pad <= 4; pad++) {
        char padding[8] = "xxxx";
        padding[pad] = '\0';
        extra unaligned = {.u32_key = "general.alignment", .u32_value = 1, .str_key = "test.pad", .str_value = padding};
        p = variant("tiny-llama", &unaligned);
        m = p ? okv_model_load(p, NULL, &err) : NULL;
        if (!m) {
            refused++;
            CHECK(err.status == OKV_ERR_FORMAT && strstr(err.message, "not a multiple of"), "alignment 1, pad %d: %s %s",
                  pad, okv_status_name(err.status), err.message);
        }
        okv_model_free(m);
    }
    CHECK(refused > 0, "no copy with general.alignment 1 was refused");

    /* qwen3moe: feed_forward_length shapes no tensor of an all-experts
     * model; 4194303 of it made a context of max_write 2048 ask for
     * 2 x 2048 x 4194303 floats (68 GB: refused, or a crash, here). */
    {
        static const char *const skip_ff[] = {"qwen3moe.feed_forward_length", NULL};
        extra huge_ff = {.skip = skip_ff, .u32_key = "qwen3moe.feed_forward_length", .u32_value = 4194303};
        p = variant("tiny-qwen3moe", &huge_ff);
        m = p ? okv_model_load(p, NULL, &err) : NULL;
        const char *opts[] = {"max_write", "2048", "capacity", "2048", NULL};
        okv_context *ctx = m ? okv_context_create(m, opts, NULL, &err) : NULL;
        CHECK(ctx != NULL, "qwen3moe with feed_forward_length 4194303: %s", err.message);
        okv_context_free(ctx);
        okv_model_free(m);
    }

    /* gpt-oss: the window is required. */
    static const char *const skip_gw[] = {"gpt-oss.attention.sliding_window", NULL};
    extra no_gw = {.skip = skip_gw};
    expect_load_error(variant("tiny-gpt-oss", &no_gw), "gpt-oss.attention.sliding_window", "gpt-oss without a window");
}

int main(void) {
    shared = check_shared_dir();
    if (!shared) { printf("skipped: ../shared not found\n"); return CHECK_SKIP; }
    for (int i = 0; i < T; i++) tokens[i] = i == 0 ? 1 : 3 + (i * 97) % 509;
    const dense_opts plain = {.pos_scale = 1};

    /* Llama 3's rope_freqs: frequency i divided by factor i. */
    float factors[8];
    for (int i = 0; i < 8; i++) factors[i] = 1.0f + 0.5f * (float)i;
    extra freqs = {.tensor = "rope_freqs.weight", .tensor_data = factors, .tensor_n = 8};
    dense_opts with_freqs = {.pos_scale = 1, .freq_factors = factors};
    against_dense("rope_freqs", variant("tiny-llama", &freqs), &with_freqs, &plain);

    /* Linear scaling divides positions. */
    extra linear = {.f32_key = "llama.rope.scaling.factor", .f32_value = 4.0f, .str_key = "llama.rope.scaling.type",
                    .str_value = "linear"};
    dense_opts scaled = {.pos_scale = 0.25};
    against_dense("linear rope scaling x4", variant("tiny-llama", &linear), &scaled, &plain);
    /* A type llama.cpp does not know is refused, naming it (yarn is
     * test_rope_scaling's). */
    extra unknown = {.f32_key = "llama.rope.scaling.factor", .f32_value = 4.0f, .str_key = "llama.rope.scaling.type",
                     .str_value = "dynamic"};
    okv_error err = {0};
    const char *unknown_path = variant("tiny-llama", &unknown);
    okv_model *m = unknown_path ? okv_model_load(unknown_path, NULL, &err) : NULL;
    CHECK(!m && err.status == OKV_ERR_UNSUPPORTED && strstr(err.message, "'dynamic'"), "unknown scaling: %s",
          m ? "loaded" : err.message);
    okv_model_free(m);

    /* Partial rotary: only the first 8 of 16 dimensions rotate. */
    static const char *const skip_rot[] = {"llama.rope.dimension_count", NULL};
    extra rot = {.skip = skip_rot, .u32_key = "llama.rope.dimension_count", .u32_value = 8};
    dense_opts rot8 = {.pos_scale = 1, .n_rot = 8};
    against_dense("rope.dimension_count 8 of 16", variant("tiny-llama", &rot), &rot8, &plain);

    /* Head counts per layer, as arrays. */
    char orig[1024];
    snprintf(orig, sizeof orig, "%s/models/tiny-llama.gguf", shared);
    float *base = logits_of(orig);
    static const char *const skip_kv[] = {"llama.attention.head_count_kv", NULL};
    const uint32_t kv[4] = {2, 2, 2, 2};
    extra arrays = {.skip = skip_kv, .arr_key = "llama.attention.head_count_kv", .arr = kv, .arr_n = 4};
    float *arr = logits_of(variant("tiny-llama", &arrays));
    CHECK(base && arr && max_diff_ff(base, arr, T * 512) == 0, "per-layer head_count_kv array changed the logits");
    free(arr);
    const uint32_t kv_bad[3] = {2, 2, 2};
    extra short_arr = {.skip = skip_kv, .arr_key = "llama.attention.head_count_kv", .arr = kv_bad, .arr_n = 3};
    expect_load_error(variant("tiny-llama", &short_arr), "head_count_kv", "a 3-entry array for 4 layers");
    free(base);

    /* gemma3: linear scaling reaches global layers only. */
    snprintf(orig, sizeof orig, "%s/models/tiny-gemma3-allswa.gguf", shared);
    float *allswa = logits_of(orig);
    extra g_scale = {.f32_key = "gemma3.rope.scaling.factor", .f32_value = 8.0f};
    float *allswa_scaled = logits_of(variant("tiny-gemma3-allswa", &g_scale));
    CHECK(allswa && allswa_scaled && max_diff_ff(allswa, allswa_scaled, T * 512) == 0,
          "scaling moved a model whose every layer slides");
    snprintf(orig, sizeof orig, "%s/models/tiny-gemma3.gguf", shared);
    float *g3 = logits_of(orig), *g3_scaled = logits_of(variant("tiny-gemma3", &g_scale));
    double moved = g3 && g3_scaled ? max_diff_ff(g3, g3_scaled, T * 512) : 0;
    CHECK(moved > 1e-3, "scaling did not move gemma3's global layer (%g)", moved);
    /* gemma3 without a window key: no layer slides. */
    static const char *const skip_window[] = {"gemma3.attention.sliding_window", NULL};
    extra no_window = {.skip = skip_window};
    const char *nw = variant("tiny-gemma3", &no_window);
    m = nw ? okv_model_load(nw, NULL, &err) : NULL;
    int sliding = 0;
    for (int l = 0; m && l < okv_model_n_layers(m); l++) {
        okv_layer_geometry g;
        okv_model_layer_geometry(m, l, &g);
        sliding += g.window > 0;
    }
    CHECK(m && sliding == 0, "gemma3 without a window key: %d sliding layers", sliding);
    okv_model_free(m);
    free(allswa); free(allswa_scaled); free(g3); free(g3_scaled);

    /* muse-glimmer refuses to run without its window layout. */
    static const char *const skip_pattern[] = {"muse-glimmer.attention.sliding_window_pattern", NULL};
    static const char *const skip_mwindow[] = {"muse-glimmer.attention.sliding_window", NULL};
    static const char *const skip_scale[] = {"muse-glimmer.logit_scale", NULL};
    extra np = {.skip = skip_pattern}, nwin = {.skip = skip_mwindow}, nscale = {.skip = skip_scale};
    expect_load_error(variant("tiny-muse-glimmer", &np), "muse-glimmer.attention.sliding_window_pattern", "no pattern");
    expect_load_error(variant("tiny-muse-glimmer", &nwin), "muse-glimmer.attention.sliding_window", "no window");
    expect_load_error(variant("tiny-muse-glimmer", &nscale), "muse-glimmer.logit_scale", "no logit scale");
    /* Without final_logit_softcapping muse-glimmer caps at 30, as llama.cpp does. */
    static const char *const skip_cap[] = {"muse-glimmer.final_logit_softcapping", NULL};
    extra no_cap = {.skip = skip_cap}, cap30 = {.skip = skip_cap, .f32_key = "muse-glimmer.final_logit_softcapping",
                                                 .f32_value = 30.0f};
    float *a = logits_of(variant("tiny-muse-glimmer", &no_cap)), *b = logits_of(variant("tiny-muse-glimmer", &cap30));
    snprintf(orig, sizeof orig, "%s/models/tiny-muse-glimmer.gguf", shared);
    float *c15 = logits_of(orig);
    CHECK(a && b && c15 && max_diff_ff(a, b, T * 512) == 0 && max_diff_ff(a, c15, T * 512) > 1e-3,
          "muse-glimmer's default soft cap is not 30");
    free(a); free(b); free(c15);
    tensor_variants();
    remove("test_model_variants.tmp.gguf");
    return check_done();
}
