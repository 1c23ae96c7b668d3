#include <math.h>

#include "kernels/cpu.h"
#include "kernels/ops.h"
#include "kernels/ops_impl.h"

/* ggml's constants, in f32 as ggml declares them */
static const float GELU_COEF_A = 0.044715f;
static const float SQRT_2_OVER_PI = 0.79788456080286535587989211986876f;

static float rms_scale(const float *x, int64_t n, float eps) {
    double sum = 0.0;
    for (int64_t i = 0; i < n; i++) sum += (double)(x[i] * x[i]);
    const float mean = (float)(sum / (double)n);
    return 1.0f / sqrtf(mean + eps);
}

void okv_rmsnorm(float *y, const float *x, int64_t n, const float *gain, float eps) {
    if (n <= 0) return;
    const float s = rms_scale(x, n, eps);
    if (gain) {
        for (int64_t i = 0; i < n; i++) y[i] = (x[i] * s) * gain[i];
    } else {
        for (int64_t i = 0; i < n; i++) y[i] = x[i] * s;
    }
}

void okv_rmsnorm_heads(float *y, const float *x, int32_t n_heads, int32_t head_dim, const float *gain,
                       float eps) {
    for (int32_t h = 0; h < n_heads; h++)
        okv_rmsnorm(y + (int64_t)h * head_dim, x + (int64_t)h * head_dim, head_dim, gain, eps);
}

/* Dimensions in YaRN's correction range turn n_turns times over n_ctx_orig positions. */
static float yarn_corr_dim(int32_t n_rot, int32_t n_ctx_orig, float n_turns, float base) {
    return (float)n_rot * logf((float)n_ctx_orig / (n_turns * 2.0f * 3.14159265358979323846f)) / (2.0f * logf(base));
}

void okv_yarn_corr_dims(int32_t n_rot, int32_t n_ctx_orig, float freq_base, float beta_fast, float beta_slow,
                        float dims[2]) {
    const float lo = floorf(yarn_corr_dim(n_rot, n_ctx_orig, beta_fast, freq_base));
    const float hi = ceilf(yarn_corr_dim(n_rot, n_ctx_orig, beta_slow, freq_base));
    dims[0] = lo > 0.0f ? lo : 0.0f;
    dims[1] = hi < (float)(n_rot - 1) ? hi : (float)(n_rot - 1);
}

void okv_rope_cache(const okv_rope *rope, int32_t pos, float *cs) {
    const float theta_scale = powf(rope->freq_base, -2.0f / (float)rope->n_rot);
    const okv_yarn *y = rope->yarn;
    float mscale = y ? y->attn_factor : 1.0f;
    /* ggml corrects the magnitude only when it mixes */
    if (y && y->ext_factor != 0.0f) mscale *= 1.0f + 0.1f * logf(1.0f / rope->freq_scale);
    float theta = (float)pos;
    for (int32_t i = 0; i < rope->n_rot / 2; i++) {
        const float ff = rope->freq_factors ? rope->freq_factors[i] : 1.0f;
        const float extrap = theta / ff;
        float angle = rope->freq_scale * extrap;
        if (y && y->ext_factor != 0.0f) {
            /* the ramp runs over pair index i (ggml: i0 / 2) */
            const float span = y->corr_dims[1] - y->corr_dims[0];
            float r = ((float)i - y->corr_dims[0]) / (span > 0.001f ? span : 0.001f);
            r = 1.0f - (r < 0.0f ? 0.0f : r > 1.0f ? 1.0f : r);
            const float mix = r * y->ext_factor;
            angle = angle * (1.0f - mix) + extrap * mix;
        }
        cs[2 * i] = cosf(angle) * mscale;
        cs[2 * i + 1] = sinf(angle) * mscale;
        theta *= theta_scale;
    }
}

void okv_rope_normal(float *x, int32_t n_heads, int32_t head_dim, int32_t n_rot, const float *cs) {
    for (int32_t h = 0; h < n_heads; h++) {
        float *v = x + (int64_t)h * head_dim;
        for (int32_t i = 0; i < n_rot / 2; i++) {
            const float c = cs[2 * i], s = cs[2 * i + 1];
            const float x0 = v[2 * i], x1 = v[2 * i + 1];
            v[2 * i] = x0 * c - x1 * s;
            v[2 * i + 1] = x0 * s + x1 * c;
        }
    }
}

void okv_rope_neox(float *x, int32_t n_heads, int32_t head_dim, int32_t n_rot, const float *cs) {
    const int32_t half = n_rot / 2;
    for (int32_t h = 0; h < n_heads; h++) {
        float *v = x + (int64_t)h * head_dim;
        for (int32_t i = 0; i < half; i++) {
            const float c = cs[2 * i], s = cs[2 * i + 1];
            const float x0 = v[i], x1 = v[i + half];
            v[i] = x0 * c - x1 * s;
            v[i + half] = x0 * s + x1 * c;
        }
    }
}

static inline float silu1(float x) { return x / (1.0f + expf(-x)); }

/* The vector silu (ops_avx2.c, and ops_neon.c with the same bits) rounds
 * differently from expf (within a few ulps); which one runs depends on the processor alone, like matmul's
 * kernels, never on n or chunking. */
void okv_silu(float *y, const float *x, int64_t n) {
#if defined(OKV_X86)
    if (okv_isa_is_x86(okv_cpu_best_isa())) {
        okv_silu_avx2(y, x, n);
        return;
    }
#elif defined(OKV_ARM)
    if (okv_isa_is_arm(okv_cpu_best_isa())) {
        okv_silu_neon(y, x, n);
        return;
    }
#endif
    for (int64_t i = 0; i < n; i++) y[i] = silu1(x[i]);
}

void okv_swiglu(float *y, const float *gate, const float *up, int64_t n) {
#if defined(OKV_X86)
    if (okv_isa_is_x86(okv_cpu_best_isa())) {
        okv_swiglu_avx2(y, gate, up, n);
        return;
    }
#elif defined(OKV_ARM)
    if (okv_isa_is_arm(okv_cpu_best_isa())) {
        okv_swiglu_neon(y, gate, up, n);
        return;
    }
#endif
    for (int64_t i = 0; i < n; i++) y[i] = silu1(gate[i]) * up[i];
}

void okv_sigmoid(float *y, const float *x, int64_t n) {
    for (int64_t i = 0; i < n; i++) y[i] = 1.0f / (1.0f + expf(-x[i]));
}

static inline float gelu1(float x) {
    return 0.5f * x * (1.0f + tanhf(SQRT_2_OVER_PI * x * (1.0f + GELU_COEF_A * x * x)));
}

void okv_gelu(float *y, const float *x, int64_t n) {
    for (int64_t i = 0; i < n; i++) y[i] = gelu1(x[i]);
}

void okv_gelu_table_init(okv_f16 *table) {
    for (uint32_t h = 0; h < 0x10000u; h++) table[h] = okv_f32_to_f16(gelu1(okv_f16_to_f32((okv_f16)h)));
}

static inline float gelu_ggml1(float x, const okv_f16 *table) {
    if (x <= -10.0f) return 0.0f;
    if (x >= 10.0f) return x;
    const okv_f16 h = okv_f32_to_f16(x);
    return okv_f16_to_f32(table ? table[h] : okv_f32_to_f16(gelu1(okv_f16_to_f32(h))));
}

void okv_gelu_ggml(float *y, const float *x, int64_t n, const okv_f16 *table) {
    for (int64_t i = 0; i < n; i++) y[i] = gelu_ggml1(x[i], table);
}

void okv_geglu_ggml(float *y, const float *gate, const float *up, int64_t n, const okv_f16 *table) {
#if defined(OKV_X86)
    if (table && okv_isa_is_x86(okv_cpu_best_isa())) { /* the same bits, 8 at a time */
        okv_geglu_ggml_avx2(y, gate, up, n, table);
        return;
    }
#elif defined(OKV_ARM)
    if (table && okv_isa_is_arm(okv_cpu_best_isa())) { /* the same bits, 4 at a time */
        okv_geglu_ggml_neon(y, gate, up, n, table);
        return;
    }
#endif
    for (int64_t i = 0; i < n; i++) {
        /* ggml returns 0 (not 0 * up) below -10 */
        y[i] = gate[i] <= -10.0f ? 0.0f : gelu_ggml1(gate[i], table) * up[i];
    }
}

void okv_geglu(float *y, const float *gate, const float *up, int64_t n) {
    for (int64_t i = 0; i < n; i++) y[i] = gelu1(gate[i]) * up[i];
}

void okv_softmax(float *x, int64_t n) {
    if (n <= 0) return;
    float max = -INFINITY;
    for (int64_t i = 0; i < n; i++) max = fmaxf(max, x[i]);
    double sum = 0.0;
    for (int64_t i = 0; i < n; i++) {
        x[i] = expf(x[i] - max);
        sum += (double)x[i];
    }
    const float inv = (float)(1.0 / sum);
    for (int64_t i = 0; i < n; i++) x[i] *= inv;
}

void okv_softcap(float *y, const float *x, int64_t n, float c) {
    const float inv = 1.0f / c;
    for (int64_t i = 0; i < n; i++) y[i] = tanhf(x[i] * inv) * c;
}

void okv_add(float *y, const float *a, const float *b, int64_t n) {
    for (int64_t i = 0; i < n; i++) y[i] = a[i] + b[i];
}

void okv_mul(float *y, const float *a, const float *b, int64_t n) {
    for (int64_t i = 0; i < n; i++) y[i] = a[i] * b[i];
}

void okv_scale(float *y, const float *x, float s, int64_t n) {
    for (int64_t i = 0; i < n; i++) y[i] = x[i] * s;
}
