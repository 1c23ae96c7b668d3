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
        for (int j = 0; j < OKV_QK; j++) q[b * OKV_QK + j] = okv_i8_nearest(xb[j] * id);
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

/* MXFP4 against Q8_0 activations, as ggml's vec_dot_mxfp4_q8_0: integer
 * sums of the looked-up values, times the two scales. */
ALWAYS_INLINE void mxfp4_tile(const okv_mm_ctx *c, int64_t r0, const int NR, int64_t c0, const int NC) {
    const int64_t nb = c->k / OKV_QK;
    float acc[MM_TR][MM_TC] = {{0}};
    for (int64_t b = 0; b < nb; b++) {
        for (int r = 0; r < NR; r++) {
            const block_mxfp4 *blk = (const block_mxfp4 *)(c->w + (r0 + r) * c->wrow) + b;
            const float dw = okv_e8m0_half(blk->e);
            for (int j = 0; j < NC; j++) {
                const int8_t *xq = c->xq + (c0 + j) * c->k + b * OKV_QK;
                int32_t s = 0;
                for (int i = 0; i < OKV_QK / 2; i++) {
                    s += okv_mxfp4_values[blk->qs[i] & 0x0F] * xq[i];
                    s += okv_mxfp4_values[blk->qs[i] >> 4] * xq[i + OKV_QK / 2];
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

OKV_MM_FLOAT_TILES(ALWAYS_INLINE, , scalar, float_tile)

/* The legacy formats beside Q4_0/Q8_0, one 32-value block decoded to its
 * integer values (offset applied where the format is symmetric), scale d
 * and offset m (0 for Q5_0). */
ALWAYS_INLINE void legacy_decode(int wtype, const uint8_t *blk, int8_t q[OKV_QK], float *d, float *m) {
    const uint8_t *qs, *qhb = NULL;
    int off = 0;
    okv_f16 hd, hm = 0;
    memcpy(&hd, blk, 2);
    switch (wtype) {
    case OKV_GGML_Q4_1: memcpy(&hm, blk + 2, 2); qs = blk + 4; break;
    case OKV_GGML_Q5_0: qhb = blk + 2; qs = blk + 6; off = 16; break;
    default: /* Q5_1 */ memcpy(&hm, blk + 2, 2); qhb = blk + 4; qs = blk + 8; break;
    }
    const uint32_t qh = qhb ? (uint32_t)qhb[0] | (uint32_t)qhb[1] << 8 | (uint32_t)qhb[2] << 16 | (uint32_t)qhb[3] << 24
                            : 0;
    for (int j = 0; j < OKV_QK / 2; j++) {
        q[j] = (int8_t)((int)((qs[j] & 0x0F) | (((qh >> j) << 4) & 0x10)) - off);
        q[j + OKV_QK / 2] = (int8_t)((int)((qs[j] >> 4) | ((qh >> (j + 12)) & 0x10)) - off);
    }
    *d = okv_f16_to_f32(hd);
    *m = okv_f16_to_f32(hm);
}

/* Per block: the integer dot product of the weights' values with the 8-bit
 * activations, then in float (dw * dx) * sum, plus m * s (the activations'
 * d * sum(q)) for the formats with an offset, as ggml's vec_dot_q4_1_q8_1. */
ALWAYS_INLINE void legacy_tile(int wtype, const okv_mm_ctx *c, int64_t r0, const int NR, int64_t c0, const int NC) {
    const int64_t nb = c->k / OKV_QK;
    const size_t bsz = okv_ggml_type_size(wtype);
    float acc[MM_TR][MM_TC] = {{0}};
    for (int64_t b = 0; b < nb; b++) {
        for (int r = 0; r < NR; r++) {
            int8_t q[OKV_QK];
            float dw, mw;
            legacy_decode(wtype, c->w + (r0 + r) * c->wrow + (size_t)b * bsz, q, &dw, &mw);
            for (int j = 0; j < NC; j++) {
                int32_t s = 0;
                if (wtype == OKV_GGML_Q5_0) {
                    const int8_t *xq = c->xq + (c0 + j) * c->k + b * OKV_QK;
                    for (int i = 0; i < OKV_QK; i++) s += q[i] * xq[i];
                    acc[r][j] += dw * c->xd[(c0 + j) * nb + b] * (float)s;
                } else {
                    const block_q8_1 *y = (const block_q8_1 *)(c->xa + (c0 + j) * c->xa_col) + b;
                    for (int i = 0; i < OKV_QK; i++) s += q[i] * y->qs[i];
                    acc[r][j] += dw * okv_f16_to_f32(y->d) * (float)s + mw * okv_f16_to_f32(y->s);
                }
            }
        }
    }
    for (int r = 0; r < NR; r++)
        for (int j = 0; j < NC; j++) c->y[(c0 + j) * c->rows + r0 + r] = acc[r][j];
}

/* A K-quant super-block decoded: its 256 integer values (symmetric formats
 * with their offset applied), an integer scale and min per 16 values (a
 * 32-value sub-block's repeated), d and dmin. */
typedef struct kq_dec {
    int8_t q[OKV_QK_K];
    int16_t sc[16], mn[16];
    float d, dmin;
} kq_dec;

ALWAYS_INLINE void kq_decode(int wtype, const uint8_t *blk, kq_dec *o) {
    switch (wtype) {
    case OKV_GGML_Q2_K: {
        const block_q2_K *x = (const block_q2_K *)blk;
        const uint8_t *q = x->qs;
        int is = 0, p = 0;
        for (int n = 0; n < OKV_QK_K; n += 128, q += 32)
            for (int shift = 0; shift < 8; shift += 2)
                for (int h = 0; h < 2; h++, is++) {
                    o->sc[is] = x->scales[is] & 0xF;
                    o->mn[is] = x->scales[is] >> 4;
                    for (int l = 0; l < 16; l++) o->q[p++] = (int8_t)((q[l + 16 * h] >> shift) & 3);
                }
        o->d = okv_f16_to_f32(x->d);
        o->dmin = okv_f16_to_f32(x->dmin);
        break;
    }
    case OKV_GGML_Q3_K: {
        const block_q3_K *x = (const block_q3_K *)blk;
        const uint8_t *q = x->qs;
        int is = 0, p = 0, m = 1;
        for (int n = 0; n < OKV_QK_K; n += 128, q += 32)
            for (int shift = 0; shift < 8; shift += 2, m <<= 1)
                for (int h = 0; h < 2; h++, is++) {
                    o->sc[is] = (int16_t)okv_q3_K_scale(is, x->scales);
                    for (int l = 0; l < 16; l++)
                        o->q[p++] = (int8_t)(((q[l + 16 * h] >> shift) & 3) - ((x->hmask[l + 16 * h] & m) ? 0 : 4));
                }
        o->d = okv_f16_to_f32(x->d);
        break;
    }
    case OKV_GGML_Q4_K: case OKV_GGML_Q5_K: {
        const int five = wtype == OKV_GGML_Q5_K;
        const block_q4_K *x4 = (const block_q4_K *)blk;
        const block_q5_K *x5 = (const block_q5_K *)blk;
        const uint8_t *scales = five ? x5->scales : x4->scales;
        const uint8_t *q = five ? x5->qs : x4->qs;
        for (int s = 0; s < 8; s++) {
            uint8_t sc, mn;
            okv_q4_K_scale_min(s, scales, &sc, &mn);
            o->sc[2 * s] = o->sc[2 * s + 1] = sc;
            o->mn[2 * s] = o->mn[2 * s + 1] = mn;
        }
        /* sub-blocks 2i and 2i+1 are the low and high nibbles of q[32i..];
         * Q5_K's fifth bits: bit s of qh[l] for sub-block s */
        for (int s = 0; s < 8; s++)
            for (int l = 0; l < 32; l++) {
                int v = (s & 1) ? q[32 * (s / 2) + l] >> 4 : q[32 * (s / 2) + l] & 0xF;
                if (five) v += ((x5->qh[l] >> s) & 1) << 4;
                o->q[32 * s + l] = (int8_t)v;
            }
        o->d = okv_f16_to_f32(five ? x5->d : x4->d);
        o->dmin = okv_f16_to_f32(five ? x5->dmin : x4->dmin);
        break;
    }
    default: { /* Q6_K */
        const block_q6_K *x = (const block_q6_K *)blk;
        for (int n = 0; n < 2; n++) {
            const uint8_t *ql = x->ql + 64 * n, *qh = x->qh + 32 * n;
            int8_t *y = o->q + 128 * n;
            for (int l = 0; l < 32; l++) {
                y[l + 0] = (int8_t)(((ql[l + 0] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32);
                y[l + 32] = (int8_t)(((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32);
                y[l + 64] = (int8_t)(((ql[l + 0] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32);
                y[l + 96] = (int8_t)(((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32);
            }
        }
        for (int g = 0; g < 16; g++) o->sc[g] = x->scales[g];
        o->d = okv_f16_to_f32(x->d);
        break;
    }
    }
}

/* Per super-block, as ggml's vec_dot_q*_K_q8_K: integer sums of value times
 * activation per 16, times the integer scales; the mins meet the
 * activations' sums per 16 (bsums).  Then in float:
 *   acc += (d * dx) * sum_scaled;  acc -= (dmin * dx) * sum_mins. */
ALWAYS_INLINE void kq_tile(int wtype, const okv_mm_ctx *c, int64_t r0, const int NR, int64_t c0, const int NC) {
    const int64_t nb = c->k / OKV_QK_K;
    const size_t bsz = okv_ggml_type_size(wtype);
    const int has_min = wtype == OKV_GGML_Q2_K || wtype == OKV_GGML_Q4_K || wtype == OKV_GGML_Q5_K;
    float acc[MM_TR][MM_TC] = {{0}};
    kq_dec w;
    for (int64_t b = 0; b < nb; b++) {
        for (int r = 0; r < NR; r++) {
            kq_decode(wtype, c->w + (r0 + r) * c->wrow + (size_t)b * bsz, &w);
            for (int j = 0; j < NC; j++) {
                const block_q8_K *y = (const block_q8_K *)(c->xa + (c0 + j) * c->xa_col) + b;
                int32_t sumi = 0;
                for (int g = 0; g < 16; g++) {
                    int32_t s = 0;
                    for (int l = 0; l < 16; l++) s += w.q[16 * g + l] * y->qs[16 * g + l];
                    sumi += w.sc[g] * s;
                }
                acc[r][j] += w.d * y->d * (float)sumi;
                if (has_min) {
                    int32_t summ = 0;
                    for (int g = 0; g < 16; g++) summ += w.mn[g] * y->bsums[g];
                    acc[r][j] -= w.dmin * y->d * (float)summ;
                }
            }
        }
    }
    for (int r = 0; r < NR; r++)
        for (int j = 0; j < NC; j++) c->y[(c0 + j) * c->rows + r0 + r] = acc[r][j];
}

#define TYPED_TILE(fn, kind, T)                                                                         \
    ALWAYS_INLINE void fn(const okv_mm_ctx *c, int64_t r0, const int NR, int64_t c0, const int NC) { \
        kind(T, c, r0, NR, c0, NC);                                                                    \
    }
TYPED_TILE(q4_1_tile, legacy_tile, OKV_GGML_Q4_1)
TYPED_TILE(q5_0_tile, legacy_tile, OKV_GGML_Q5_0)
TYPED_TILE(q5_1_tile, legacy_tile, OKV_GGML_Q5_1)
TYPED_TILE(q2_K_tile, kq_tile, OKV_GGML_Q2_K)
TYPED_TILE(q3_K_tile, kq_tile, OKV_GGML_Q3_K)
TYPED_TILE(q4_K_tile, kq_tile, OKV_GGML_Q4_K)
TYPED_TILE(q5_K_tile, kq_tile, OKV_GGML_Q5_K)
TYPED_TILE(q6_K_tile, kq_tile, OKV_GGML_Q6_K)

OKV_MM_DISPATCH(, okv_mm_tile_q8_0_scalar, q8_0_tile)
OKV_MM_DISPATCH(, okv_mm_tile_q4_0_scalar, q4_0_tile)
OKV_MM_DISPATCH(, okv_mm_tile_mxfp4_scalar, mxfp4_tile)
OKV_MM_DISPATCH(, okv_mm_tile_q4_1_scalar, q4_1_tile)
OKV_MM_DISPATCH(, okv_mm_tile_q5_0_scalar, q5_0_tile)
OKV_MM_DISPATCH(, okv_mm_tile_q5_1_scalar, q5_1_tile)
OKV_MM_DISPATCH(, okv_mm_tile_q2_K_scalar, q2_K_tile)
OKV_MM_DISPATCH(, okv_mm_tile_q3_K_scalar, q3_K_tile)
OKV_MM_DISPATCH(, okv_mm_tile_q4_K_scalar, q4_K_tile)
OKV_MM_DISPATCH(, okv_mm_tile_q5_K_scalar, q5_K_tile)
OKV_MM_DISPATCH(, okv_mm_tile_q6_K_scalar, q6_K_tile)
