/* Internal: the small per-token kernels around the matrix products.
 *
 * Where llama.cpp's CPU code fixes a rounding (float vs double sums, the
 * order of multiplications, f16 tables), these follow it, because the engine
 * is checked against llama.cpp's logits.  All take n >= 0 and allow y == x
 * (in place) unless said otherwise. */
#ifndef OKV_KERNELS_OPS_H
#define OKV_KERNELS_OPS_H

#include <stdint.h>

#include "kernels/f16.h"

/* y = x / sqrt(mean(x^2) + eps) [* gain]: squares in f32 summed in double,
 * scale in f32, gain applied after, as ggml's rms_norm followed by mul.
 * gain may be NULL. */
void okv_rmsnorm(float *y, const float *x, int64_t n, const float *gain, float eps);

/* okv_rmsnorm on each of n_heads consecutive vectors of head_dim values, with
 * one gain vector of head_dim values (or NULL) shared by every head. */
void okv_rmsnorm_heads(float *y, const float *x, int32_t n_heads, int32_t head_dim, const float *gain,
                       float eps);

/* YaRN's part of ggml_rope_ext: ext_factor mixes, for the dimensions
 * between corr_dims[0] and corr_dims[1], the interpolated angle with the
 * original one (a linear ramp: 1 below corr_dims[0], 0 above corr_dims[1]),
 * and cos/sin are multiplied by attn_factor (1 + 0.1 ln(1 / freq_scale)). */
typedef struct okv_yarn {
    float ext_factor;           /* 0: no mixing and no magnitude correction */
    float attn_factor;          /* magnitude scale (1 for none) */
    float corr_dims[2];         /* okv_yarn_corr_dims */
} okv_yarn;

/* ggml_rope_yarn_corr_dims: the first and last dimension pair whose
 * wavelength at the original context n_ctx_orig lies between beta_fast and
 * beta_slow rotations, clamped to 0 .. n_rot - 1. */
void okv_yarn_corr_dims(int32_t n_rot, int32_t n_ctx_orig, float freq_base, float beta_fast, float beta_slow,
                        float dims[2]);

/* Rotary embedding parameters, as llama.cpp's ggml_rope_ext. */
typedef struct okv_rope {
    int32_t n_rot;              /* dimensions rotated (even, <= head_dim); the rest pass through */
    float freq_base;            /* e.g. 10000 */
    float freq_scale;           /* 1 / linear scaling factor; 1 for none */
    const float *freq_factors;  /* n_rot/2 divisors of each frequency, or NULL */
    const okv_yarn *yarn;       /* NULL: no YaRN */
} okv_rope;

/* cos/sin for position pos: cs[2i] = cos(theta_i), cs[2i+1] = sin(theta_i),
 * i < n_rot/2, computed as ggml does in f32: theta_0 = pos, theta_{i+1} =
 * theta_i * base^(-2/n_rot) by repeated multiplication, then
 * angle_i = freq_scale * (theta_i / factor_i).  cs holds n_rot floats. */
void okv_rope_cache(const okv_rope *rope, int32_t pos, float *cs);

/* Rotates each of n_heads vectors of head_dim values in place using cs from
 * okv_rope_cache.  "normal" (llama): pairs (x[2i], x[2i+1]).  "neox"
 * (gemma, qwen): pairs (x[i], x[i + n_rot/2]). */
void okv_rope_normal(float *x, int32_t n_heads, int32_t head_dim, int32_t n_rot, const float *cs);
void okv_rope_neox(float *x, int32_t n_heads, int32_t head_dim, int32_t n_rot, const float *cs);

/* silu(x) = x / (1 + e^-x) */
void okv_silu(float *y, const float *x, int64_t n);
/* y = silu(gate) * up */
void okv_swiglu(float *y, const float *gate, const float *up, int64_t n);
/* y = 1 / (1 + e^-x) */
void okv_sigmoid(float *y, const float *x, int64_t n);

/* GELU, tanh form: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), in f32. */
void okv_gelu(float *y, const float *x, int64_t n);

/* GELU as llama.cpp's CPU backend computes it: x <= -10 gives 0, x >= 10
 * gives x, otherwise x is rounded to f16, looked up in a table of f16 GELU
 * values, and the f16 result widened.  The table (65536 entries, 128 KiB) is
 * the caller's, filled once by okv_gelu_table_init; NULL computes each entry
 * on the fly (same values, slower). */
void okv_gelu_table_init(okv_f16 *table);
void okv_gelu_ggml(float *y, const float *x, int64_t n, const okv_f16 *table);
/* y = gelu_ggml(gate) * up (llama.cpp's geglu) */
void okv_geglu_ggml(float *y, const float *gate, const float *up, int64_t n, const okv_f16 *table);
/* y = gelu(gate) * up with the exact f32 GELU */
void okv_geglu(float *y, const float *gate, const float *up, int64_t n);

/* x = softmax(x) in place: e^(x - max), summed in double. */
void okv_softmax(float *x, int64_t n);

/* y = c * tanh(x / c), computed as llama.cpp does: x * (1/c), tanh, * c. */
void okv_softcap(float *y, const float *x, int64_t n, float c);

void okv_add(float *y, const float *a, const float *b, int64_t n); /* y = a + b */
void okv_mul(float *y, const float *a, const float *b, int64_t n); /* y = a * b */
void okv_scale(float *y, const float *x, float s, int64_t n);      /* y = x * s */

#endif
