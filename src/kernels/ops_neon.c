/* aarch64 NEON versions of ops_avx2.c's kernels: the same operations in the
 * same order, 4 lanes at a time (every step is a correctly rounded IEEE
 * operation: FMUL, FMLA/FMLS = fma, FRINTN = round to nearest even, FDIV),
 * so each finite element gives the AVX2 kernel's bits; the n % 4 tail goes
 * through the same vector code in a padded copy, so an element's result
 * never depends on n or its index (chunked and whole prefills agree). */
#include "kernels/cpu.h"

#if defined(OKV_ARM)
#include <arm_neon.h>
#include <string.h>

#include "kernels/ops_impl.h"

#define AI static inline __attribute__((always_inline))

/* e^x for x in [-87, 88]: ops_avx2.c's exp8 (x = n ln2 + r with ln2 in two
 * parts, e^r by its degree-7 Taylor polynomial, 2^n in the exponent field). */
AI float32x4_t exp4(float32x4_t x) {
    const float32x4_t n = vrndnq_f32(vmulq_f32(x, vdupq_n_f32(1.44269504088896341f)));
    float32x4_t r = vfmsq_f32(x, n, vdupq_n_f32(0.693359375f));
    r = vfmsq_f32(r, n, vdupq_n_f32(-2.12194440e-4f));
    float32x4_t p = vdupq_n_f32(1.0f / 5040.0f);
    p = vfmaq_f32(vdupq_n_f32(1.0f / 720.0f), p, r);
    p = vfmaq_f32(vdupq_n_f32(1.0f / 120.0f), p, r);
    p = vfmaq_f32(vdupq_n_f32(1.0f / 24.0f), p, r);
    p = vfmaq_f32(vdupq_n_f32(1.0f / 6.0f), p, r);
    p = vfmaq_f32(vdupq_n_f32(0.5f), p, r);
    p = vfmaq_f32(vdupq_n_f32(1.0f), p, r);
    p = vfmaq_f32(vdupq_n_f32(1.0f), p, r);
    const int32x4_t e = vshlq_n_s32(vaddq_s32(vcvtq_s32_f32(n), vdupq_n_s32(127)), 23);
    return vmulq_f32(p, vreinterpretq_f32_s32(e));
}

/* x / (1 + e^-x), e^-x clamped to [e^-87, e^88] as in ops_avx2.c.  FMAX and
 * FMIN pass a NaN on (AVX's max/min would clamp it); x's NaN makes the
 * quotient NaN either way. */
AI float32x4_t silu4(float32x4_t x) {
    const float32x4_t t = vminq_f32(vmaxq_f32(vnegq_f32(x), vdupq_n_f32(-87.0f)), vdupq_n_f32(88.0f));
    return vdivq_f32(x, vaddq_f32(vdupq_n_f32(1.0f), exp4(t)));
}

void okv_swiglu_neon(float *y, const float *gate, const float *up, int64_t n) {
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) vst1q_f32(y + i, vmulq_f32(silu4(vld1q_f32(gate + i)), vld1q_f32(up + i)));
    if (i < n) {
        float g[4] = {0}, u[4] = {0}, o[4];
        memcpy(g, gate + i, (size_t)(n - i) * sizeof(float));
        memcpy(u, up + i, (size_t)(n - i) * sizeof(float));
        vst1q_f32(o, vmulq_f32(silu4(vld1q_f32(g)), vld1q_f32(u)));
        memcpy(y + i, o, (size_t)(n - i) * sizeof(float));
    }
}

void okv_silu_neon(float *y, const float *x, int64_t n) {
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) vst1q_f32(y + i, silu4(vld1q_f32(x + i)));
    if (i < n) {
        float t[4] = {0}, o[4];
        memcpy(t, x + i, (size_t)(n - i) * sizeof(float));
        vst1q_f32(o, silu4(vld1q_f32(t)));
        memcpy(y + i, o, (size_t)(n - i) * sizeof(float));
    }
}

/* ops.h's okv_geglu_ggml, 4 lanes at a time: FCVTN rounds to nearest even
 * (the FPCR's default mode, okv_f32_to_f16's rounding), each lane's table
 * entry is loaded on its own (NEON has no gather), and the clamps and the
 * product are the scalar code's: its bits.  The scalar loop converted each
 * element in software, 10 % of a Gemma-3-1B-shaped prefill on x86 before
 * its vector version. */
AI float32x4_t geglu4(float32x4_t g, float32x4_t u, const okv_f16 *table) {
    uint16_t h[4], e[4];
    vst1_u16(h, vreinterpret_u16_f16(vcvt_f16_f32(g)));
    for (int l = 0; l < 4; l++) e[l] = table[h[l]];
    float32x4_t r = vmulq_f32(vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(e))), u);
    r = vbslq_f32(vcgeq_f32(g, vdupq_n_f32(10.0f)), vmulq_f32(g, u), r);
    return vbslq_f32(vcleq_f32(g, vdupq_n_f32(-10.0f)), vdupq_n_f32(0.0f), r);
}

void okv_geglu_ggml_neon(float *y, const float *gate, const float *up, int64_t n, const okv_f16 *table) {
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) vst1q_f32(y + i, geglu4(vld1q_f32(gate + i), vld1q_f32(up + i), table));
    if (i < n) {
        float g[4] = {0}, u[4] = {0}, o[4];
        memcpy(g, gate + i, (size_t)(n - i) * sizeof(float));
        memcpy(u, up + i, (size_t)(n - i) * sizeof(float));
        vst1q_f32(o, geglu4(vld1q_f32(g), vld1q_f32(u), table));
        memcpy(y + i, o, (size_t)(n - i) * sizeof(float));
    }
}

#endif /* OKV_ARM */
