/* aarch64 kernels for float weights (F32, F16, BF16), one for every ARM
 * level (FMLA is ARMv8.0's).  As on x86 they sum in another order than the
 * scalar kernel (four FMA lanes along k, then the lanes, then the k % 4
 * tail in order), so their bits are their own; what must not change is that
 * every output of a tile goes through the same operations whatever the
 * tile's shape, hence the same bits for any number of columns and threads
 * (test_matmul).  F16 and BF16 convert exactly (FCVTL, a shift). */
#include "kernels/cpu.h"

#if defined(OKV_ARM)
#include <arm_neon.h>
#include <string.h>

#include "kernels/f16.h"
#include "kernels/matmul_impl.h"

#define KERNEL static inline __attribute__((always_inline))

/* Four weights from i on, as f32. */
KERNEL float32x4_t load4(int wtype, const uint8_t *row, int64_t i) {
    if (wtype == OKV_GGML_F16) return vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16((const uint16_t *)row + i)));
    if (wtype == OKV_GGML_BF16) return vreinterpretq_f32_u32(vshll_n_u16(vld1_u16((const uint16_t *)row + i), 16));
    return vld1q_f32((const float *)row + i);
}

KERNEL float load1(int wtype, const uint8_t *row, int64_t i) {
    if (wtype == OKV_GGML_F16) {
        okv_f16 h;
        memcpy(&h, row + 2 * i, 2);
        return okv_f16_to_f32(h);
    }
    if (wtype == OKV_GGML_BF16) {
        okv_bf16 h;
        memcpy(&h, row + 2 * i, 2);
        return okv_bf16_to_f32(h);
    }
    float f;
    memcpy(&f, row + 4 * i, 4);
    return f;
}

/* 16 accumulators, 4 weight and 4 activation registers: 24 of the 32. */
KERNEL void float_tile(int wtype, const okv_mm_ctx *c, int64_t r0, const int NR, int64_t c0, const int NC) {
    const int64_t k4 = c->k / 4 * 4;
    const uint8_t *wr[MM_TR];
    const float *xc[MM_TC];
    UNROLL for (int r = 0; r < NR; r++) wr[r] = c->w + (r0 + r) * c->wrow;
    UNROLL for (int j = 0; j < NC; j++) xc[j] = c->x + (c0 + j) * c->k;
    float32x4_t acc[MM_TR][MM_TC];
    UNROLL for (int r = 0; r < NR; r++) UNROLL for (int j = 0; j < NC; j++) acc[r][j] = vdupq_n_f32(0.0f);
    for (int64_t i = 0; i < k4; i += 4) {
        float32x4_t w[MM_TR];
        UNROLL for (int r = 0; r < NR; r++) {
            __builtin_prefetch(wr[r] + (wtype == OKV_GGML_F32 ? 4 : 2) * i + 512);
            w[r] = load4(wtype, wr[r], i);
        }
        UNROLL for (int j = 0; j < NC; j++) {
            const float32x4_t x = vld1q_f32(xc[j] + i);
            UNROLL for (int r = 0; r < NR; r++) acc[r][j] = vfmaq_f32(acc[r][j], w[r], x);
        }
    }
    UNROLL for (int r = 0; r < NR; r++) UNROLL for (int j = 0; j < NC; j++) {
        float s = vaddvq_f32(acc[r][j]);
        for (int64_t i = k4; i < c->k; i++) s += load1(wtype, wr[r], i) * xc[j][i];
        c->y[(c0 + j) * c->rows + r0 + r] = s;
    }
}

OKV_MM_FLOAT_TILES(KERNEL, OKV_TARGET_NEON, neon, float_tile)

#endif /* OKV_ARM */
