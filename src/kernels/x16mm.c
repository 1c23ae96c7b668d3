/* Q4_0, Q8_0 and Q4_K for SMMLA (see x16mm.h): the repacking, the rows to f32
 * and the scalar kernels, the reference the I8MM kernels (x16mm_neon.c)
 * match bit for bit, and the kernel the other levels run (the model keeps
 * these layouts only where I8MM runs). */
#include <math.h>
#include <string.h>

#include "kernels/matmul_impl.h"
#include "kernels/quant.h"
#include "kernels/x16.h"
#include "kernels/x16mm.h"

void okv_repack_q4_0x16mm(void *dst, const void *src, int64_t rows, int64_t k) {
    const int64_t nq = k / OKV_X16MM_VALUES;
    const block_q4_0 *in = src;
    for (int64_t r = 0; r < rows; r++) {
        block_q4_0x16mm *row = (block_q4_0x16mm *)dst + r * nq;
        for (int64_t q = 0; q < nq; q++) {
            block_q4_0x16mm *out = row + okv_x16mm_slot(q, nq);
            for (int m = 0; m < 4; m++, in++) {
                out->d[m] = in->d;
                for (int i = 0; i < 16; i++) out->qs[m / 2][i / 8][8 * (m % 2) + i % 8] = in->qs[i] ^ 0x88;
            }
        }
    }
}

void okv_repack_q8_0x16mm(void *dst, const void *src, int64_t rows, int64_t k) {
    const int64_t nq = k / OKV_X16MM_VALUES;
    const block_q8_0 *in = src;
    for (int64_t r = 0; r < rows; r++) {
        block_q8_0x16mm *row = (block_q8_0x16mm *)dst + r * nq;
        for (int64_t q = 0; q < nq; q++) {
            block_q8_0x16mm *out = row + okv_x16mm_slot(q, nq);
            for (int m = 0; m < 4; m++, in++) {
                out->d[m] = in->d;
                for (int c = 0; c < 4; c++) memcpy(&out->qs[m / 2][c][8 * (m % 2)], in->qs + 8 * c, 8);
            }
        }
    }
}

void okv_quantize_act_q8_0p(okv_isa kern, const float *x, int64_t k, uint8_t *xa, size_t xa_col, int64_t n,
                            int64_t j) {
    const okv_act_q8_0p_col col = okv_act_q8_0p_at(xa, xa_col, k, n, j);
    int8_t block[OKV_QK];
    for (int64_t b = 0; b < k / OKV_QK; b++) {
        /* the Q8_0 quantizer works block by block: the bits of a whole row's */
        okv_mm_quantize_act(kern, x + b * OKV_QK, OKV_QK, block, (float *)col.d + b);
        for (int c = 0; c < 4; c++) memcpy((int8_t *)okv_act_q8_0p_chunk(col, b, c), block + 8 * c, 8);
    }
}

void okv_repack_q4_Kx16mm(void *dst, const void *src, int64_t rows, int64_t k) {
    const int64_t nq = k / OKV_X16MM_VALUES;
    const block_q4_K *in = src;
    for (int64_t r = 0; r < rows; r++) {
        block_q4_Kx16mm *row = (block_q4_Kx16mm *)dst + r * nq;
        for (int64_t s = 0; s < nq / 2; s++, in++)
            for (int h = 0; h < 2; h++) { /* sub-blocks 4h .. 4h + 3: quartet 2s + h */
                block_q4_Kx16mm *out = row + okv_x16mm_slot(2 * s + h, nq);
                out->d = in->d;
                out->dmin = in->dmin;
                for (int m = 0; m < 4; m++) {
                    const int j = 4 * h + m; /* ggml: sub-block j, the low (j even) or high nibbles of qs[32 (j / 2) ..] */
                    okv_q4_K_scale_min(j, in->scales, &out->sc[m], &out->m[m]);
                    const uint8_t *q = in->qs + 32 * (j / 2);
                    const int sh = 4 * (j % 2);
                    for (int i = 0; i < 16; i++)
                        out->qs[m / 2][i / 8][8 * (m % 2) + i % 8] =
                            (uint8_t)((q[i] >> sh & 0x0F) | (q[16 + i] >> sh & 0x0F) << 4);
                }
            }
    }
}

void okv_quantize_act_q8_Kp(okv_isa kern, const float *x, int64_t k, uint8_t *xa, size_t xa_col, int64_t n,
                            int64_t j) {
    const okv_act_q8_0p_col col = okv_act_q8_0p_at(xa, xa_col, k, n, j);
    float *d = (float *)col.d, *xm = (float *)okv_act_q8_Kp_xm(col, k);
    block_q8_K a;
    for (int64_t s = 0; s < k / OKV_QK_K; s++) {
        okv_mm_quantize_q8_K(kern, x + s * OKV_QK_K, &a, OKV_QK_K);
        for (int i = 0; i < 8; i++) {
            const int64_t b = 8 * s + i;
            for (int c = 0; c < 4; c++) memcpy((int8_t *)okv_act_q8_0p_chunk(col, b, c), a.qs + 32 * i + 8 * c, 8);
            d[b] = a.d; /* okv_quantize_act_q8_Kx16's d and xm */
            xm[b] = a.d * (float)(a.bsums[2 * i] + a.bsums[2 * i + 1]);
        }
    }
}

/* Value l of block m of a quartet. */
static inline int q4_value(const block_q4_0x16mm *w, int m, int l) {
    const int i = l % 16, byte = w->qs[m / 2][i / 8][8 * (m % 2) + i % 8];
    return (l < 16 ? (byte & 0x0F) ^ 8 : (byte >> 4) ^ 8) - 8; /* the nibble XOR 8, minus 8 */
}

static inline int q8_value(const block_q8_0x16mm *w, int m, int l) {
    return w->qs[m / 2][l / 8][8 * (m % 2) + l % 8];
}

void okv_dequantize_row_q4_0x16mm(const void *src, float *dst, int64_t k) {
    const int64_t nq = k / OKV_X16MM_VALUES;
    for (int64_t q = 0; q < nq; q++) {
        const block_q4_0x16mm *b = (const block_q4_0x16mm *)src + okv_x16mm_slot(q, nq);
        for (int m = 0; m < 4; m++)
            for (int l = 0; l < OKV_QK; l++)
                dst[(4 * q + m) * OKV_QK + l] = (float)q4_value(b, m, l) * okv_f16_to_f32(b->d[m]);
    }
}

void okv_dequantize_row_q8_0x16mm(const void *src, float *dst, int64_t k) {
    const int64_t nq = k / OKV_X16MM_VALUES;
    for (int64_t q = 0; q < nq; q++) {
        const block_q8_0x16mm *b = (const block_q8_0x16mm *)src + okv_x16mm_slot(q, nq);
        for (int m = 0; m < 4; m++)
            for (int l = 0; l < OKV_QK; l++)
                dst[(4 * q + m) * OKV_QK + l] = (float)q8_value(b, m, l) * okv_f16_to_f32(b->d[m]);
    }
}

/* Value l (0-15) of sub-block m of a Q4_K quartet. */
static inline int q4k_value(const block_q4_Kx16mm *w, int m, int l) {
    const int i = l % 16, byte = w->qs[m / 2][i / 8][8 * (m % 2) + i % 8];
    return l < 16 ? byte & 0x0F : byte >> 4;
}

void okv_dequantize_row_q4_Kx16mm(const void *src, float *dst, int64_t k) {
    const int64_t nq = k / OKV_X16MM_VALUES;
    for (int64_t q = 0; q < nq; q++) {
        const block_q4_Kx16mm *b = (const block_q4_Kx16mm *)src + okv_x16mm_slot(q, nq);
        for (int m = 0; m < 4; m++) {
            /* ggml's float operations: d * sc, min * m, then d1 * q - m1 */
            const float d1 = okv_f16_to_f32(b->d) * (float)b->sc[m], m1 = okv_f16_to_f32(b->dmin) * (float)b->m[m];
            for (int l = 0; l < OKV_QK; l++) dst[(4 * q + m) * OKV_QK + l] = d1 * (float)q4k_value(b, m, l) - m1;
        }
    }
}

/* Block b's exact sum into lane b % 16 (block b sits in lane b % 16 of
 * group b / 16, as in x16.h), in block order, so each lane sees its groups
 * in order; a row's last group has no padding blocks here, and skipping
 * them leaves a lane as q4_0x16's fma of zeros does.  Then x16.h's lane
 * sum: q4_0x16's and q8_0x16's scalar kernels' bits. */
#define SCALAR_TILE(name, WT, VALUE)                                                               \
    void name(const okv_mm_ctx *c, int64_t r0, int nr, int64_t c0, int nc) {                      \
        const int64_t nb = c->k / OKV_QK, nq = c->k / OKV_X16MM_VALUES;                           \
        for (int r = 0; r < nr; r++) {                                                            \
            const WT *w = (const WT *)(c->w + (r0 + r) * c->wrow);                                 \
            for (int j = 0; j < nc; j++) {                                                        \
                const okv_act_q8_0p_col x = okv_act_q8_0p_at(c->xa, c->xa_col, c->k, c->n, c0 + j); \
                float acc[16] = {0};                                                              \
                for (int64_t b = 0; b < nb; b++) {                                                \
                    const WT *quartet = w + okv_x16mm_slot(b / 4, nq);                            \
                    const int m = (int)(b % 4);                                                   \
                    int32_t p = 0;                                                                \
                    for (int l = 0; l < OKV_QK; l++)                                              \
                        p += VALUE(quartet, m, l) * okv_act_q8_0p_chunk(x, b, l / 8)[l % 8];      \
                    acc[b % 16] = fmaf((float)p, okv_f16_to_f32(quartet->d[m]) * x.d[b], acc[b % 16]); \
                }                                                                                 \
                c->y[(c0 + j) * c->rows + r0 + r] = okv_x16_sum16(acc);                           \
            }                                                                                     \
        }                                                                                         \
    }

SCALAR_TILE(okv_mm_tile_q4_0x16mm_scalar, block_q4_0x16mm, q4_value)
SCALAR_TILE(okv_mm_tile_q8_0x16mm_scalar, block_q8_0x16mm, q8_value)

/* Q4_K: sub-block b's exact sum into lane b % 16, then q4_Kx16's two
 * operations, fma(dot, (d sc) dx, acc) and fma(-dmin m, xm, acc), in
 * group order per lane; q4_Kx16's scalar kernel's bits (its half group's
 * lanes 8-15 are the ones a 768-value row never reaches here). */
void okv_mm_tile_q4_Kx16mm_scalar(const okv_mm_ctx *c, int64_t r0, int nr, int64_t c0, int nc) {
    const int64_t nb = c->k / OKV_QK, nq = c->k / OKV_X16MM_VALUES;
    for (int r = 0; r < nr; r++) {
        const block_q4_Kx16mm *w = (const block_q4_Kx16mm *)(c->w + (r0 + r) * c->wrow);
        for (int j = 0; j < nc; j++) {
            const okv_act_q8_0p_col x = okv_act_q8_0p_at(c->xa, c->xa_col, c->k, c->n, c0 + j);
            const float *xm = okv_act_q8_Kp_xm(x, c->k);
            float acc[16] = {0};
            for (int64_t b = 0; b < nb; b++) {
                const block_q4_Kx16mm *quartet = w + okv_x16mm_slot(b / 4, nq);
                const int m = (int)(b % 4);
                int32_t p = 0;
                for (int l = 0; l < OKV_QK; l++) p += q4k_value(quartet, m, l) * okv_act_q8_0p_chunk(x, b, l / 8)[l % 8];
                const float dsc = okv_f16_to_f32(quartet->d) * (float)quartet->sc[m];
                const float dm = okv_f16_to_f32(quartet->dmin) * (float)quartet->m[m];
                acc[b % 16] = fmaf((float)p, dsc * x.d[b], acc[b % 16]);
                acc[b % 16] = fmaf(-dm, xm[b], acc[b % 16]);
            }
            c->y[(c0 + j) * c->rows + r0 + r] = okv_x16_sum16(acc);
        }
    }
}
