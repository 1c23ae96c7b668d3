#include <math.h>

#include "kernels/quant.h"

int okv_ggml_type_supported(int type) {
    switch (type) {
    case OKV_GGML_F32: case OKV_GGML_F16: case OKV_GGML_Q4_0: case OKV_GGML_Q8_0: case OKV_GGML_BF16:
        return 1;
    }
    return 0;
}

void okv_dequantize_row_q8_0(const block_q8_0 *src, float *dst, int64_t k) {
    for (int64_t b = 0; b < k / OKV_QK; b++) {
        float d = okv_f16_to_f32(src[b].d);
        for (int j = 0; j < OKV_QK; j++) dst[b * OKV_QK + j] = (float)src[b].qs[j] * d;
    }
}

void okv_dequantize_row_q4_0(const block_q4_0 *src, float *dst, int64_t k) {
    for (int64_t b = 0; b < k / OKV_QK; b++) {
        float d = okv_f16_to_f32(src[b].d);
        for (int j = 0; j < OKV_QK / 2; j++) {
            dst[b * OKV_QK + j] = (float)((src[b].qs[j] & 0x0F) - 8) * d;
            dst[b * OKV_QK + j + OKV_QK / 2] = (float)((src[b].qs[j] >> 4) - 8) * d;
        }
    }
}

void okv_bf16_to_f32_row(float *dst, const okv_bf16 *src, int64_t k) {
    for (int64_t i = 0; i < k; i++) dst[i] = okv_bf16_to_f32(src[i]);
}

void okv_f32_to_bf16_row(okv_bf16 *dst, const float *src, int64_t k) {
    for (int64_t i = 0; i < k; i++) dst[i] = okv_f32_to_bf16(src[i]);
}

int okv_dequantize_row(int type, const void *src, float *dst, int64_t k) {
    if (okv_ggml_row_size(type, k) == 0 && k != 0) return 0;
    switch (type) {
    case OKV_GGML_F32: memcpy(dst, src, (size_t)k * sizeof(float)); return 1;
    case OKV_GGML_F16: okv_f16_to_f32_row(dst, src, k); return 1;
    case OKV_GGML_BF16: okv_bf16_to_f32_row(dst, src, k); return 1;
    case OKV_GGML_Q4_0: okv_dequantize_row_q4_0(src, dst, k); return 1;
    case OKV_GGML_Q8_0: okv_dequantize_row_q8_0(src, dst, k); return 1;
    }
    return 0;
}

void okv_quantize_row_q8_0(const float *x, block_q8_0 *y, int64_t k) {
    for (int64_t b = 0; b < k / OKV_QK; b++) {
        const float *xb = x + b * OKV_QK;
        float amax = 0.0f;
        for (int j = 0; j < OKV_QK; j++) amax = fmaxf(amax, fabsf(xb[j]));
        const float d = amax / 127.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        y[b].d = okv_f32_to_f16(d);
        for (int j = 0; j < OKV_QK; j++) y[b].qs[j] = (int8_t)roundf(xb[j] * id);
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
