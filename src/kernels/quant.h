/* Internal: ggml-compatible weight formats and their row conversions.
 *
 * Type numbers are ggml's (they are what a GGUF tensor header stores), so the
 * model code passes a tensor's type straight through.  Quantized formats hold
 * blocks of 32 values; a row of k values is k/32 consecutive blocks. */
#ifndef OKV_KERNELS_QUANT_H
#define OKV_KERNELS_QUANT_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "kernels/f16.h"
#include "offkv/gguf.h" /* okv_ggml_type and the type table */


enum { OKV_QK = 32 }; /* values per quantized block */

/* value j = qs[j] * d */
typedef struct block_q8_0 {
    okv_f16 d;
    int8_t qs[OKV_QK];
} block_q8_0;

/* value j (0..15) = ((qs[j] & 0x0F) - 8) * d, value j+16 = ((qs[j] >> 4) - 8) * d */
typedef struct block_q4_0 {
    okv_f16 d;
    uint8_t qs[OKV_QK / 2];
} block_q4_0;

/* The legacy formats beside Q4_0/Q8_0, 32 values a block (ggml-common.h). */

/* value j (0..15) = (qs[j] & 0x0F) * d + m, value j+16 = (qs[j] >> 4) * d + m */
typedef struct block_q4_1 {
    okv_f16 d, m;
    uint8_t qs[OKV_QK / 2];
} block_q4_1;

/* as q4_0 with a fifth bit per value in qh (bit j of the little-endian
 * 32-bit word): value = (nibble | bit << 4) - 16, times d */
typedef struct block_q5_0 {
    okv_f16 d;
    uint8_t qh[4];
    uint8_t qs[OKV_QK / 2];
} block_q5_0;

/* as q4_1 with the fifth bit of q5_0: value = (nibble | bit << 4) * d + m */
typedef struct block_q5_1 {
    okv_f16 d, m;
    uint8_t qh[4];
    uint8_t qs[OKV_QK / 2];
} block_q5_1;

/* 8-bit activations for the q4_1/q5_1 products: s = d * sum(qs) */
typedef struct block_q8_1 {
    okv_f16 d, s;
    int8_t qs[OKV_QK];
} block_q8_1;

/* The K-quants: 256-value super-blocks split into sub-blocks of 16 or 32
 * with their own quantized scales (and mins). */
enum { OKV_QK_K = 256, OKV_K_SCALE_SIZE = 12 };

/* 16 sub-blocks of 16; scales[i] = scale (low 4 bits) | min << 4, 2-bit qs */
typedef struct block_q2_K {
    uint8_t scales[OKV_QK_K / 16];
    uint8_t qs[OKV_QK_K / 4];
    okv_f16 d, dmin;
} block_q2_K;

/* 16 sub-blocks of 16, symmetric: 2 low bits in qs, the high bit in hmask,
 * 6-bit signed scales packed into 12 bytes */
typedef struct block_q3_K {
    uint8_t hmask[OKV_QK_K / 8];
    uint8_t qs[OKV_QK_K / 4];
    uint8_t scales[OKV_K_SCALE_SIZE];
    okv_f16 d;
} block_q3_K;

/* 8 sub-blocks of 32, 6-bit scales and mins packed into 12 bytes, 4-bit qs */
typedef struct block_q4_K {
    okv_f16 d, dmin;
    uint8_t scales[OKV_K_SCALE_SIZE];
    uint8_t qs[OKV_QK_K / 2];
} block_q4_K;

/* as q4_K with a fifth bit per value in qh */
typedef struct block_q5_K {
    okv_f16 d, dmin;
    uint8_t scales[OKV_K_SCALE_SIZE];
    uint8_t qh[OKV_QK_K / 8];
    uint8_t qs[OKV_QK_K / 2];
} block_q5_K;

/* 16 sub-blocks of 16, symmetric: 4 low bits in ql, 2 high bits in qh,
 * value = (q - 32) * scales[sub] * d */
typedef struct block_q6_K {
    uint8_t ql[OKV_QK_K / 2];
    uint8_t qh[OKV_QK_K / 4];
    int8_t scales[OKV_QK_K / 16];
    okv_f16 d;
} block_q6_K;

/* 8-bit activations for the K-quant products: bsums[i] = sum of qs[16i..16i+15] */
typedef struct block_q8_K {
    float d;
    int8_t qs[OKV_QK_K];
    int16_t bsums[OKV_QK_K / 16];
} block_q8_K;

_Static_assert(sizeof(block_q4_1) == 20, "block_q4_1 must match ggml's layout");
_Static_assert(sizeof(block_q5_0) == 22, "block_q5_0 must match ggml's layout");
_Static_assert(sizeof(block_q5_1) == 24, "block_q5_1 must match ggml's layout");
_Static_assert(sizeof(block_q8_1) == 36, "block_q8_1 must match ggml's layout");
_Static_assert(sizeof(block_q2_K) == 84, "block_q2_K must match ggml's layout");
_Static_assert(sizeof(block_q3_K) == 110, "block_q3_K must match ggml's layout");
_Static_assert(sizeof(block_q4_K) == 144, "block_q4_K must match ggml's layout");
_Static_assert(sizeof(block_q5_K) == 176, "block_q5_K must match ggml's layout");
_Static_assert(sizeof(block_q6_K) == 210, "block_q6_K must match ggml's layout");
_Static_assert(sizeof(block_q8_K) == 292, "block_q8_K must match ggml's layout");
_Static_assert(sizeof(block_q8_0) == 34, "block_q8_0 must match ggml's 34-byte layout");
_Static_assert(sizeof(block_q4_0) == 18, "block_q4_0 must match ggml's 18-byte layout");

/* bfloat16: the top 16 bits of an IEEE f32. */
typedef uint16_t okv_bf16;

static inline float okv_bf16_to_f32(okv_bf16 h) {
    uint32_t bits = (uint32_t)h << 16;
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

/* Round to nearest even, as ggml does; a NaN stays a (quiet) NaN rather than
 * rounding into infinity. */
static inline okv_bf16 okv_f32_to_bf16(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (okv_bf16)((u >> 16) | 64u);
    return (okv_bf16)((u + (0x7fffu + ((u >> 16) & 1u))) >> 16);
}

/* 1 for the five types above, 0 otherwise. */
int okv_ggml_type_supported(int type);


/* Row conversions to f32.  k must be a multiple of the type's block size
 * (callers check with okv_ggml_row_size). */
void okv_dequantize_row_q8_0(const block_q8_0 *src, float *dst, int64_t k);
void okv_dequantize_row_q4_0(const block_q4_0 *src, float *dst, int64_t k);
void okv_bf16_to_f32_row(float *dst, const okv_bf16 *src, int64_t k);
/* Any supported type; returns 0 for an unknown type or bad k, else 1. */
int okv_dequantize_row(int type, const void *src, float *dst, int64_t k);

/* Quantization exactly as ggml's reference (quantize_row_*_ref), which is
 * what llama.cpp's converter and quantizer write into files:
 *   q8_0: d = amax/127, q = roundf(x/d) (ties away from zero);
 *   q4_0: m = the value of largest magnitude (signed), d = m/-8,
 *         q = min(15, (int8)(x/d + 8.5)).
 * k is a multiple of 32. */
void okv_quantize_row_q8_0(const float *x, block_q8_0 *y, int64_t k);
void okv_quantize_row_q4_0(const float *x, block_q4_0 *y, int64_t k);
void okv_f32_to_bf16_row(okv_bf16 *dst, const float *src, int64_t k);

#endif
