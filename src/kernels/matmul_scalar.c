/* Plain C kernels: the reference the SIMD kernels are tested against, and
 * the path for processors without AVX2. */
#include <math.h>

#include "kernels/matmul_impl.h"

#define ALWAYS_INLINE static inline __attribute__((always_inline))

void okv_mm_quantize_act_scalar(const float *x, int64_t k, int8_t *q, float *d) {
    for (int64_t b = 0; b < k / OKV_QK; b++) {
        const float *xb = x + b * OKV_QK;
        float amax = 0.0f;
        for (int j = 0; j < OKV_QK; j++) amax = fmaxf(amax, fabsf(xb[j]));
        /* ggml's x86 quantizer: multiply by 127/amax (not 1/d) and round
         * half to even, which is what llama.cpp runs on this hardware */
        const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
        d[b] = okv_f16_to_f32(okv_f32_to_f16(amax / 127.0f));
        for (int j = 0; j < OKV_QK; j++) q[b * OKV_QK + j] = (int8_t)nearbyintf(xb[j] * id);
    }
}

ALWAYS_INLINE void q8_0_tile(const okv_mm_ctx *c, int64_t r0, const int NR, int64_t c0, const int NC) {
    const int64_t nb = c->k / OKV_QK;
    float acc[MM_TR][MM_TC] = {{0}};
    for (int64_t b = 0; b < nb; b++) {
        for (int r = 0; r < NR; r++) {
            const block_q8_0 *blk = (const block_q8_0 *)(c->w + (r0 + r) * c->wrow) + b;
            const float dw = okv_f16_to_f32(blk->d);
            for (int j = 0; j < NC; j++) {
                const int8_t *xq = c->xq + (c0 + j) * c->k + b * OKV_QK;
                int32_t s = 0;
                for (int i = 0; i < OKV_QK; i++) s += (int32_t)blk->qs[i] * xq[i];
                acc[r][j] += dw * c->xd[(c0 + j) * nb + b] * (float)s;
            }
        }
    }
    for (int r = 0; r < NR; r++)
        for (int j = 0; j < NC; j++) c->y[(c0 + j) * c->rows + r0 + r] = acc[r][j];
}

ALWAYS_INLINE void q4_0_tile(const okv_mm_ctx *c, int64_t r0, const int NR, int64_t c0, const int NC) {
    const int64_t nb = c->k / OKV_QK;
    float acc[MM_TR][MM_TC] = {{0}};
    for (int64_t b = 0; b < nb; b++) {
        for (int r = 0; r < NR; r++) {
            const block_q4_0 *blk = (const block_q4_0 *)(c->w + (r0 + r) * c->wrow) + b;
            const float dw = okv_f16_to_f32(blk->d);
            for (int j = 0; j < NC; j++) {
                const int8_t *xq = c->xq + (c0 + j) * c->k + b * OKV_QK;
                int32_t s = 0;
                for (int i = 0; i < OKV_QK / 2; i++) {
                    s += ((blk->qs[i] & 0x0F) - 8) * xq[i];
                    s += ((blk->qs[i] >> 4) - 8) * xq[i + OKV_QK / 2];
                }
                acc[r][j] += dw * c->xd[(c0 + j) * nb + b] * (float)s;
            }
        }
    }
    for (int r = 0; r < NR; r++)
        for (int j = 0; j < NC; j++) c->y[(c0 + j) * c->rows + r0 + r] = acc[r][j];
}

ALWAYS_INLINE float wval(int wtype, const uint8_t *row, int64_t i) {
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

ALWAYS_INLINE void float_tile(int wtype, const okv_mm_ctx *c, int64_t r0, const int NR, int64_t c0,
                              const int NC) {
    float acc[MM_TR][MM_TC] = {{0}};
    for (int64_t i = 0; i < c->k; i++) {
        for (int r = 0; r < NR; r++) {
            const float wv = wval(wtype, c->w + (r0 + r) * c->wrow, i);
            for (int j = 0; j < NC; j++) acc[r][j] += wv * c->x[(c0 + j) * c->k + i];
        }
    }
    for (int r = 0; r < NR; r++)
        for (int j = 0; j < NC; j++) c->y[(c0 + j) * c->rows + r0 + r] = acc[r][j];
}

ALWAYS_INLINE void f32_tile(const okv_mm_ctx *c, int64_t r0, const int NR, int64_t c0, const int NC) {
    float_tile(OKV_GGML_F32, c, r0, NR, c0, NC);
}
ALWAYS_INLINE void f16_tile(const okv_mm_ctx *c, int64_t r0, const int NR, int64_t c0, const int NC) {
    float_tile(OKV_GGML_F16, c, r0, NR, c0, NC);
}
ALWAYS_INLINE void bf16_tile(const okv_mm_ctx *c, int64_t r0, const int NR, int64_t c0, const int NC) {
    float_tile(OKV_GGML_BF16, c, r0, NR, c0, NC);
}

OKV_MM_DISPATCH(, tile_q8_0, q8_0_tile)
OKV_MM_DISPATCH(, tile_q4_0, q4_0_tile)
OKV_MM_DISPATCH(, tile_f32, f32_tile)
OKV_MM_DISPATCH(, tile_f16, f16_tile)
OKV_MM_DISPATCH(, tile_bf16, bf16_tile)

okv_mm_tile_fn okv_mm_tile_scalar(int wtype) {
    switch (wtype) {
    case OKV_GGML_F32: return tile_f32;
    case OKV_GGML_F16: return tile_f16;
    case OKV_GGML_BF16: return tile_bf16;
    case OKV_GGML_Q8_0: return tile_q8_0;
    case OKV_GGML_Q4_0: return tile_q4_0;
    }
    return NULL;
}
