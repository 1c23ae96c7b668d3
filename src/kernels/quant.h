/* Internal: ggml-compatible weight formats and their row conversions.
 *
 * Type numbers are ggml's (they are what a GGUF tensor header stores), so the
 * model code passes a tensor's type straight through.  Quantized formats hold
 * blocks of 32 values; a row of k values is k/32 consecutive blocks. */
#ifndef OKV_KERNELS_QUANT_H
#define OKV_KERNELS_QUANT_H

#include <math.h>
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

/* MXFP4 (OCP microscaling, ggml type 39): 32 values, one E8M0 exponent e
 * and 16 bytes of E2M1 nibbles laid out as Q4_0's (value j in the low
 * nibble of qs[j], value j+16 in the high one).  As ggml stores them, a
 * nibble indexes okv_mxfp4_values (twice the E2M1 value, so integers) and
 * the scale is 2^(e - 128), half of E8M0's 2^(e - 127). */
typedef struct block_mxfp4 {
    uint8_t e;
    uint8_t qs[OKV_QK / 2];
} block_mxfp4;

static const int8_t okv_mxfp4_values[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

/* 2^(e - 128), exactly (ggml's GGML_E8M0_TO_FP32_HALF, subnormals included). */
static inline float okv_e8m0_half(uint8_t e) {
    union { uint32_t u; float f; } v;
    v.u = e < 2 ? 0x00200000u << e : (uint32_t)(e - 1) << 23;
    return v.f;
}

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
_Static_assert(sizeof(block_mxfp4) == 17, "block_mxfp4 must match ggml's 17-byte layout");

/* nearbyintf(v) as int8 for |v| <= 127; 0 for a NaN, which a NaN or
 * infinite activation makes; +-127 beyond, which a block whose largest
 * magnitude is subnormal makes (127 / amax overflows to infinity).  A cast
 * of either would be undefined behaviour; the model fuzzer found both
 * through damaged models. */
static inline int8_t okv_i8_nearest(float v) {
    const float r = nearbyintf(v);
    if (r != r) return 0;
    return (int8_t)(r > 127.0f ? 127.0f : r < -127.0f ? -127.0f : r);
}

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

/* Row conversions to f32, bit for bit as ggml's dequantize_row_* (same
 * float operations in the same order).  k must be a multiple of the type's
 * block size (callers check with okv_ggml_row_size); src points at blocks of
 * the named type. */
void okv_dequantize_row_q8_0(const void *src, float *dst, int64_t k);
void okv_dequantize_row_q4_0(const void *src, float *dst, int64_t k);
void okv_dequantize_row_q4_1(const void *src, float *dst, int64_t k);
void okv_dequantize_row_q5_0(const void *src, float *dst, int64_t k);
void okv_dequantize_row_q5_1(const void *src, float *dst, int64_t k);
void okv_dequantize_row_q2_K(const void *src, float *dst, int64_t k);
void okv_dequantize_row_q3_K(const void *src, float *dst, int64_t k);
void okv_dequantize_row_q4_K(const void *src, float *dst, int64_t k);
void okv_dequantize_row_q5_K(const void *src, float *dst, int64_t k);
void okv_dequantize_row_q6_K(const void *src, float *dst, int64_t k);
void okv_dequantize_row_mxfp4(const void *src, float *dst, int64_t k);
void okv_bf16_to_f32_row(float *dst, const okv_bf16 *src, int64_t k);
/* Any runnable type (kernels/wtype.h); returns 0 for another type or a bad
 * k, else 1. */
int okv_dequantize_row(int type, const void *src, float *dst, int64_t k);

/* The 6-bit scale and min of sub-block j (0..7) of a Q4_K or Q5_K block,
 * from its 12 packed bytes (ggml's get_scale_min_k4). */
static inline void okv_q4_K_scale_min(int j, const uint8_t *q, uint8_t *d, uint8_t *m) {
    if (j < 4) {
        *d = q[j] & 63;
        *m = q[j + 4] & 63;
    } else {
        *d = (uint8_t)((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4));
        *m = (uint8_t)((q[j + 4] >> 4) | ((q[j - 0] >> 6) << 4));
    }
}

/* The signed 6-bit scale of sub-block j (0..15) of a Q3_K block: low 4 bits
 * from byte j (j < 8) or the high nibble of byte j - 8, top 2 bits from
 * byte 8 + j % 4 at bit 2 * (j / 4); stored with a bias of 32. */
static inline int okv_q3_K_scale(int j, const uint8_t *s) {
    const int lo = j < 8 ? s[j] & 0xF : s[j - 8] >> 4;
    const int hi = (s[8 + j % 4] >> (2 * (j / 4))) & 3;
    return (lo | hi << 4) - 32;
}

/* Quantization exactly as ggml's reference (quantize_row_*_ref), which is
 * what llama.cpp's converter and quantizer write into files:
 *   q8_0: d = amax/127, q = roundf(x/d) (ties away from zero);
 *   q4_0: m = the value of largest magnitude (signed), d = m/-8,
 *         q = min(15, (int8)(x/d + 8.5)).
 * k is a multiple of 32. */
void okv_quantize_row_q8_0(const float *x, block_q8_0 *y, int64_t k);
void okv_quantize_row_q4_0(const float *x, block_q4_0 *y, int64_t k);

/* The activation formats of the Q4_1/Q5_1 and K-quant products.
 *   q8_1: d = amax/127 (stored as f16), q = nearest-even(x * 127/amax) as
 *         ggml's x86 quantize_row_q8_1 (and as the Q8_0 activations of
 *         matmul.h), s = f16(d * sum(q)) with d before its rounding to f16;
 *         k a multiple of 32.
 *   q8_K: ggml's quantize_row_q8_K_ref: max = the value of largest magnitude
 *         (signed, the first such), iscale = -127/max, q = min(127,
 *         nearest-even(iscale * x)), d = 1/iscale (an f32), bsums[i] = sum
 *         of q[16i..16i+15]; an all-zero block has d = 0 and q = 0.  k a
 *         multiple of 256. */
void okv_quantize_row_q8_1(const float *x, block_q8_1 *y, int64_t k);
void okv_quantize_row_q8_K(const float *x, block_q8_K *y, int64_t k);
void okv_f32_to_bf16_row(okv_bf16 *dst, const float *src, int64_t k);

#endif
