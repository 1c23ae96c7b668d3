/* aarch64 Advanced SIMD (NEON) kernels for ggml's layouts: the activation
 * quantizers.  Each gives the scalar reference's bits (test_matmul,
 * test_quant run both on every ARM level under qemu). */
#include "kernels/cpu.h"

#if defined(OKV_ARM)
#include <arm_neon.h>
#include <math.h>
#include <string.h>

#include "kernels/f16.h"
#include "kernels/matmul_impl.h"

/* Four floats times s to int8 as okv_i8_nearest does: FCVTNS rounds to
 * nearest even, saturates and turns NaN into 0; the clamp to +-127 then is
 * okv_i8_nearest's. */
static inline int32x4_t nearest_clamped(float32x4_t v, float32x4_t s) {
    const int32x4_t r = vcvtnq_s32_f32(vmulq_f32(v, s));
    return vmaxq_s32(vminq_s32(r, vdupq_n_s32(127)), vdupq_n_s32(-127));
}

/* 16 int32 in [-127, 127] to 16 int8, in order. */
static inline int8x16_t narrow16(int32x4_t a, int32x4_t b, int32x4_t c, int32x4_t d) {
    const int16x8_t lo = vcombine_s16(vmovn_s32(a), vmovn_s32(b));
    const int16x8_t hi = vcombine_s16(vmovn_s32(c), vmovn_s32(d));
    return vcombine_s8(vmovn_s16(lo), vmovn_s16(hi));
}

/* okv_mm_quantize_act_scalar: amax by FMAXNM (which, like fmaxf, skips a
 * NaN), the same scale and rounding. */
void okv_mm_quantize_act_neon(const float *x, int64_t k, int8_t *q, float *d) {
    for (int64_t b = 0; b < k / OKV_QK; b++) {
        const float *xb = x + b * OKV_QK;
        float32x4_t v[8];
        float32x4_t m = vdupq_n_f32(0.0f);
        for (int i = 0; i < 8; i++) {
            v[i] = vld1q_f32(xb + 4 * i);
            m = vmaxnmq_f32(m, vabsq_f32(v[i]));
        }
        const float amax = vmaxnmvq_f32(m);
        const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
        d[b] = okv_f16_to_f32(okv_f32_to_f16(amax / 127.0f));
        const float32x4_t s = vdupq_n_f32(id);
        for (int h = 0; h < 2; h++)
            vst1q_s8(q + b * OKV_QK + 16 * h,
                     narrow16(nearest_clamped(v[4 * h], s), nearest_clamped(v[4 * h + 1], s),
                              nearest_clamped(v[4 * h + 2], s), nearest_clamped(v[4 * h + 3], s)));
    }
}

/* okv_quantize_row_q8_K for finite x, as the AVX2 one: the largest
 * magnitude, the first value of that magnitude for the sign,
 * q = min(127, nearest-even(iscale * x)), bsums per 16. */
void okv_mm_quantize_q8_K_neon(const float *x, block_q8_K *y, int64_t k) {
    for (int64_t b = 0; b < k / OKV_QK_K; b++) {
        const float *xb = x + b * OKV_QK_K;
        float32x4_t m = vdupq_n_f32(0.0f);
        for (int i = 0; i < OKV_QK_K; i += 4) m = vmaxnmq_f32(m, vabsq_f32(vld1q_f32(xb + i)));
        const float amax = vmaxnmvq_f32(m);
        if (amax == 0.0f) {
            memset(&y[b], 0, sizeof y[b]);
            continue;
        }
        float max = 0.0f;
        for (int i = 0; i < OKV_QK_K; i++)
            if (fabsf(xb[i]) == amax) { max = xb[i]; break; }
        const float iscale = -127.0f / max;
        const float32x4_t s = vdupq_n_f32(iscale);
        for (int c = 0; c < OKV_QK_K / 16; c++) {
            int32x4_t iv[4];
            for (int i = 0; i < 4; i++)
                iv[i] = vminq_s32(vcvtnq_s32_f32(vmulq_f32(s, vld1q_f32(xb + 16 * c + 4 * i))), vdupq_n_s32(127));
            const int8x16_t p = narrow16(iv[0], iv[1], iv[2], iv[3]);
            vst1q_s8(y[b].qs + 16 * c, p);
            y[b].bsums[c] = (int16_t)vaddlvq_s8(p);
        }
        y[b].d = 1.0f / iscale;
    }
}

#endif /* OKV_ARM */
