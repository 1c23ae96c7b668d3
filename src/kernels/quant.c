#include <math.h>

#include "kernels/quant.h"
#include "kernels/wtype.h"

void okv_dequantize_row_q8_0(const void *vsrc, float *dst, int64_t k) {
    const block_q8_0 *src = vsrc;
    for (int64_t b = 0; b < k / OKV_QK; b++) {
        float d = okv_f16_to_f32(src[b].d);
        for (int j = 0; j < OKV_QK; j++) dst[b * OKV_QK + j] = (float)src[b].qs[j] * d;
    }
}

void okv_dequantize_row_q4_0(const void *vsrc, float *dst, int64_t k) {
    const block_q4_0 *src = vsrc;
    for (int64_t b = 0; b < k / OKV_QK; b++) {
        float d = okv_f16_to_f32(src[b].d);
        for (int j = 0; j < OKV_QK / 2; j++) {
            dst[b * OKV_QK + j] = (float)((src[b].qs[j] & 0x0F) - 8) * d;
            dst[b * OKV_QK + j + OKV_QK / 2] = (float)((src[b].qs[j] >> 4) - 8) * d;
        }
    }
}

/* The formats below follow ggml's dequantize_row_* (ggml-quants.c) line by
 * line, float operation for float operation, so the results are ggml's bit
 * for bit. */

void okv_dequantize_row_q4_1(const void *vsrc, float *y, int64_t k) {
    const block_q4_1 *x = vsrc;
    for (int64_t i = 0; i < k / OKV_QK; i++) {
        const float d = okv_f16_to_f32(x[i].d), m = okv_f16_to_f32(x[i].m);
        for (int j = 0; j < OKV_QK / 2; j++) {
            y[i * OKV_QK + j] = (float)(x[i].qs[j] & 0x0F) * d + m;
            y[i * OKV_QK + j + OKV_QK / 2] = (float)(x[i].qs[j] >> 4) * d + m;
        }
    }
}

/* bit j of the little-endian word qh is value j's fifth bit */
static uint32_t q5_high(const uint8_t qh[4]) {
    return (uint32_t)qh[0] | (uint32_t)qh[1] << 8 | (uint32_t)qh[2] << 16 | (uint32_t)qh[3] << 24;
}

void okv_dequantize_row_q5_0(const void *vsrc, float *y, int64_t k) {
    const block_q5_0 *x = vsrc;
    for (int64_t i = 0; i < k / OKV_QK; i++) {
        const float d = okv_f16_to_f32(x[i].d);
        const uint32_t qh = q5_high(x[i].qh);
        for (int j = 0; j < OKV_QK / 2; j++) {
            const int x0 = (int)((x[i].qs[j] & 0x0F) | (((qh >> j) << 4) & 0x10)) - 16;
            const int x1 = (int)((x[i].qs[j] >> 4) | ((qh >> (j + 12)) & 0x10)) - 16;
            y[i * OKV_QK + j] = (float)x0 * d;
            y[i * OKV_QK + j + OKV_QK / 2] = (float)x1 * d;
        }
    }
}

void okv_dequantize_row_q5_1(const void *vsrc, float *y, int64_t k) {
    const block_q5_1 *x = vsrc;
    for (int64_t i = 0; i < k / OKV_QK; i++) {
        const float d = okv_f16_to_f32(x[i].d), m = okv_f16_to_f32(x[i].m);
        const uint32_t qh = q5_high(x[i].qh);
        for (int j = 0; j < OKV_QK / 2; j++) {
            const int x0 = (int)((x[i].qs[j] & 0x0F) | (((qh >> j) << 4) & 0x10));
            const int x1 = (int)((x[i].qs[j] >> 4) | ((qh >> (j + 12)) & 0x10));
            y[i * OKV_QK + j] = (float)x0 * d + m;
            y[i * OKV_QK + j + OKV_QK / 2] = (float)x1 * d + m;
        }
    }
}

void okv_dequantize_row_q2_K(const void *vsrc, float *y, int64_t k) {
    const block_q2_K *x = vsrc;
    for (int64_t i = 0; i < k / OKV_QK_K; i++) {
        const float d = okv_f16_to_f32(x[i].d), min = okv_f16_to_f32(x[i].dmin);
        const uint8_t *q = x[i].qs;
        int is = 0;
        for (int n = 0; n < OKV_QK_K; n += 128) {
            int shift = 0;
            for (int j = 0; j < 4; j++) {
                uint8_t sc = x[i].scales[is++];
                float dl = d * (float)(sc & 0xF), ml = min * (float)(sc >> 4);
                for (int l = 0; l < 16; l++) *y++ = dl * (float)((q[l] >> shift) & 3) - ml;
                sc = x[i].scales[is++];
                dl = d * (float)(sc & 0xF);
                ml = min * (float)(sc >> 4);
                for (int l = 0; l < 16; l++) *y++ = dl * (float)((q[l + 16] >> shift) & 3) - ml;
                shift += 2;
            }
            q += 32;
        }
    }
}

void okv_dequantize_row_q3_K(const void *vsrc, float *y, int64_t k) {
    const block_q3_K *x = vsrc;
    for (int64_t i = 0; i < k / OKV_QK_K; i++) {
        const float d_all = okv_f16_to_f32(x[i].d);
        const uint8_t *q = x[i].qs, *hm = x[i].hmask;
        uint8_t m = 1;
        int is = 0;
        for (int n = 0; n < OKV_QK_K; n += 128) {
            int shift = 0;
            for (int j = 0; j < 4; j++) {
                float dl = d_all * (float)okv_q3_K_scale(is++, x[i].scales);
                for (int l = 0; l < 16; l++)
                    *y++ = dl * (float)(((q[l] >> shift) & 3) - ((hm[l] & m) ? 0 : 4));
                dl = d_all * (float)okv_q3_K_scale(is++, x[i].scales);
                for (int l = 0; l < 16; l++)
                    *y++ = dl * (float)(((q[l + 16] >> shift) & 3) - ((hm[l + 16] & m) ? 0 : 4));
                shift += 2;
                m = (uint8_t)(m << 1);
            }
            q += 32;
        }
    }
}

void okv_dequantize_row_q4_K(const void *vsrc, float *y, int64_t k) {
    const block_q4_K *x = vsrc;
    for (int64_t i = 0; i < k / OKV_QK_K; i++) {
        const uint8_t *q = x[i].qs;
        const float d = okv_f16_to_f32(x[i].d), min = okv_f16_to_f32(x[i].dmin);
        int is = 0;
        uint8_t sc, m;
        for (int j = 0; j < OKV_QK_K; j += 64) {
            okv_q4_K_scale_min(is + 0, x[i].scales, &sc, &m);
            const float d1 = d * (float)sc, m1 = min * (float)m;
            okv_q4_K_scale_min(is + 1, x[i].scales, &sc, &m);
            const float d2 = d * (float)sc, m2 = min * (float)m;
            for (int l = 0; l < 32; l++) *y++ = d1 * (float)(q[l] & 0xF) - m1;
            for (int l = 0; l < 32; l++) *y++ = d2 * (float)(q[l] >> 4) - m2;
            q += 32;
            is += 2;
        }
    }
}

void okv_dequantize_row_q5_K(const void *vsrc, float *y, int64_t k) {
    const block_q5_K *x = vsrc;
    for (int64_t i = 0; i < k / OKV_QK_K; i++) {
        const uint8_t *ql = x[i].qs, *qh = x[i].qh;
        const float d = okv_f16_to_f32(x[i].d), min = okv_f16_to_f32(x[i].dmin);
        int is = 0;
        uint8_t sc, m, u1 = 1, u2 = 2;
        for (int j = 0; j < OKV_QK_K; j += 64) {
            okv_q4_K_scale_min(is + 0, x[i].scales, &sc, &m);
            const float d1 = d * (float)sc, m1 = min * (float)m;
            okv_q4_K_scale_min(is + 1, x[i].scales, &sc, &m);
            const float d2 = d * (float)sc, m2 = min * (float)m;
            for (int l = 0; l < 32; l++) *y++ = d1 * (float)((ql[l] & 0xF) + (qh[l] & u1 ? 16 : 0)) - m1;
            for (int l = 0; l < 32; l++) *y++ = d2 * (float)((ql[l] >> 4) + (qh[l] & u2 ? 16 : 0)) - m2;
            ql += 32;
            is += 2;
            u1 = (uint8_t)(u1 << 2);
            u2 = (uint8_t)(u2 << 2);
        }
    }
}

void okv_dequantize_row_q6_K(const void *vsrc, float *y, int64_t k) {
    const block_q6_K *x = vsrc;
    for (int64_t i = 0; i < k / OKV_QK_K; i++) {
        const float d = okv_f16_to_f32(x[i].d);
        const uint8_t *ql = x[i].ql, *qh = x[i].qh;
        const int8_t *sc = x[i].scales;
        for (int n = 0; n < OKV_QK_K; n += 128) {
            for (int l = 0; l < 32; l++) {
                const int is = l / 16;
                const int q1 = ((ql[l + 0] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
                const int q2 = ((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
                const int q3 = ((ql[l + 0] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
                const int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
                y[l + 0] = d * (float)sc[is + 0] * (float)q1;
                y[l + 32] = d * (float)sc[is + 2] * (float)q2;
                y[l + 64] = d * (float)sc[is + 4] * (float)q3;
                y[l + 96] = d * (float)sc[is + 6] * (float)q4;
            }
            y += 128;
            ql += 64;
            qh += 32;
            sc += 8;
        }
    }
}

void okv_bf16_to_f32_row(float *dst, const okv_bf16 *src, int64_t k) {
    for (int64_t i = 0; i < k; i++) dst[i] = okv_bf16_to_f32(src[i]);
}

void okv_f32_to_bf16_row(okv_bf16 *dst, const float *src, int64_t k) {
    for (int64_t i = 0; i < k; i++) dst[i] = okv_f32_to_bf16(src[i]);
}

void okv_dequantize_row_mxfp4(const void *src, float *dst, int64_t k) {
    const block_mxfp4 *b = src;
    for (int64_t i = 0; i < k / OKV_QK; i++) {
        const float d = okv_e8m0_half(b[i].e);
        for (int j = 0; j < OKV_QK / 2; j++) {
            dst[i * OKV_QK + j] = okv_mxfp4_values[b[i].qs[j] & 0x0F] * d;
            dst[i * OKV_QK + j + OKV_QK / 2] = okv_mxfp4_values[b[i].qs[j] >> 4] * d;
        }
    }
}

int okv_dequantize_row(int type, const void *src, float *dst, int64_t k) {
    if (!okv_wtype_runnable(type) || k < 0 || (okv_wtype_row_size(type, k) == 0 && k != 0)) return 0;
    okv_wtype_get(type)->to_float(src, dst, k);
    return 1;
}

void okv_quantize_row_q8_0(const float *x, block_q8_0 *y, int64_t k) {
    for (int64_t b = 0; b < k / OKV_QK; b++) {
        const float *xb = x + b * OKV_QK;
        float amax = 0.0f;
        for (int j = 0; j < OKV_QK; j++) amax = fmaxf(amax, fabsf(xb[j]));
        const float d = amax / 127.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        y[b].d = okv_f32_to_f16(d);
        for (int j = 0; j < OKV_QK; j++) {
            const float v = roundf(xb[j] * id);
            y[b].qs[j] = v == v ? (int8_t)v : 0; /* NaN (a NaN or inf input): 0, not undefined */
        }
    }
}

void okv_quantize_row_q4_0(const float *x, block_q4_0 *y, int64_t k) {
    for (int64_t b = 0; b < k / OKV_QK; b++) {
        const float *xb = x + b * OKV_QK;
        float amax = 0.0f, max = 0.0f;
        for (int j = 0; j < OKV_QK; j++) {
            if (amax < fabsf(xb[j])) { amax = fabsf(xb[j]); max = xb[j]; }
        }
        const float d = max / -8.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        y[b].d = okv_f32_to_f16(d);
        for (int j = 0; j < OKV_QK / 2; j++) {
            /* ggml truncates toward zero after adding 8.5; the values are >= 0
             * here except for rounding slop near -0, which truncation maps to 0 */
            int q0 = (int8_t)(xb[j] * id + 8.5f);
            int q1 = (int8_t)(xb[j + OKV_QK / 2] * id + 8.5f);
            if (q0 > 15) q0 = 15;
            if (q1 > 15) q1 = 15;
            y[b].qs[j] = (uint8_t)(q0 | (q1 << 4));
        }
    }
}

void okv_quantize_row_q8_1(const float *x, block_q8_1 *y, int64_t k) {
    for (int64_t b = 0; b < k / OKV_QK; b++) {
        const float *xb = x + b * OKV_QK;
        float amax = 0.0f;
        for (int j = 0; j < OKV_QK; j++) amax = fmaxf(amax, fabsf(xb[j]));
        const float d = amax / 127.0f;
        const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
        int sum = 0;
        for (int j = 0; j < OKV_QK; j++) {
            y[b].qs[j] = okv_i8_nearest(xb[j] * id);
            sum += y[b].qs[j];
        }
        y[b].d = okv_f32_to_f16(d);
        y[b].s = okv_f32_to_f16(d * (float)sum);
    }
}

/* ggml's nearest_int: round half to even through the float's mantissa,
 * exact for |x| < 2^22 (here |x| <= 127.5). */
static int nearest_int(float fval) {
    float val = fval + 12582912.f;
    int i;
    memcpy(&i, &val, sizeof i);
    return (i & 0x007fffff) - 0x00400000;
}

void okv_quantize_row_q8_K(const float *x, block_q8_K *y, int64_t k) {
    for (int64_t b = 0; b < k / OKV_QK_K; b++) {
        const float *xb = x + b * OKV_QK_K;
        float max = 0.0f, amax = 0.0f;
        for (int j = 0; j < OKV_QK_K; j++) {
            const float ax = fabsf(xb[j]);
            if (ax > amax) { amax = ax; max = xb[j]; }
        }
        if (amax == 0.0f) {
            memset(&y[b], 0, sizeof y[b]);
            continue;
        }
        /* -127 rather than -128: the value of largest magnitude maps to -127
         * and every other one into -127..127 (ggml made the same change so
         * that the SIMD products never meet -128) */
        const float iscale = -127.0f / max;
        for (int j = 0; j < OKV_QK_K; j++) {
            const int v = nearest_int(iscale * xb[j]);
            y[b].qs[j] = (int8_t)(v < 127 ? v : 127);
        }
        for (int j = 0; j < OKV_QK_K / 16; j++) {
            int sum = 0;
            for (int i = 0; i < 16; i++) sum += y[b].qs[j * 16 + i];
            y[b].bsums[j] = (int16_t)sum;
        }
        y[b].d = 1.0f / iscale;
    }
}
