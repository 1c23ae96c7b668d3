/* Internal: ggml's reference quantizers for the legacy formats beside
 * Q8_0/Q4_0 (which live in quant.c) and for the K-quants.
 *
 * Each function is ggml's quantize_row_X_ref, the path llama-quantize takes
 * when it has no importance matrix: the same searches for scales and mins,
 * the same float operations in the same order, the same rounding to f16.  So
 * the bytes equal what llama.cpp writes for the same f32 input (the test
 * test_quantize_ggml checks this against real llama-quantize output).
 *
 * x holds k floats; y receives k / block-size blocks.  k must be a multiple
 * of 32 for q4_1/q5_0/q5_1 and of 256 (OKV_QK_K) for the K-quants; callers
 * check with okv_ggml_row_size.  The block layouts are in quant.h. */
#ifndef OKV_KERNELS_QUANTIZE_H
#define OKV_KERNELS_QUANTIZE_H

#include <stdint.h>

#include "kernels/quant.h"

/* Legacy, 32 values a block. */
void okv_quantize_row_q4_1(const float *x, block_q4_1 *y, int64_t k);
void okv_quantize_row_q5_0(const float *x, block_q5_0 *y, int64_t k);
void okv_quantize_row_q5_1(const float *x, block_q5_1 *y, int64_t k);

/* K-quants, 256 values a super-block. */
void okv_quantize_row_q2_K(const float *x, block_q2_K *y, int64_t k);
void okv_quantize_row_q3_K(const float *x, block_q3_K *y, int64_t k);
void okv_quantize_row_q4_K(const float *x, block_q4_K *y, int64_t k);
void okv_quantize_row_q5_K(const float *x, block_q5_K *y, int64_t k);
void okv_quantize_row_q6_K(const float *x, block_q6_K *y, int64_t k);
/* ggml's quantize_row_mxfp4_ref: e = floor(log2(amax)) - 2 + 127, each value
 * the nearest of the 16 (the first of equals). */
void okv_quantize_row_mxfp4(const float *x, block_mxfp4 *y, int64_t k);

/* Any type offkv can write: f32, f16, bf16, q8_0, q4_0 and the eight above.
 * Returns 0 (writing nothing) for another type or a k that is not whole
 * blocks of it, else 1. */
int okv_quantize_row(int type, const float *x, void *dst, int64_t k);

#endif
