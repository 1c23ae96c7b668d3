/* Internal: MXFP4 repacked sixteen blocks wide ("mxfp4x16"), the layout the
 * model keeps its MXFP4 matrices in (gpt-oss's experts), for the reasons of
 * q4_0x16.h: one 32-bit lane per block, so eight integer dot products finish
 * sixteen block sums and the float work is three operations per 512
 * multiply-adds.  The bytes are MXFP4's, reordered as Q4_0x16 reorders
 * Q4_0's (the sixteen exponent bytes first), so the layout is no larger.
 *
 * Results: each block's integer dot product of the looked-up values
 * (okv_mxfp4_values) with Q8_0 activations is exact; lane i accumulates
 * fma((float)dot_i, 2^(e_i - 128) * d_x[i], acc_i) over the row's groups,
 * and the sixteen lanes are summed in x16.h's order, on every ISA. */
#ifndef OKV_KERNELS_MXFP4X16_H
#define OKV_KERNELS_MXFP4X16_H

#include <stdint.h>

#include "kernels/q4_0x16.h"

/* Sixteen MXFP4 blocks: their exponent bytes, then their nibbles as
 * block_q4_0x16 holds Q4_0's: qs[u][4i + m] = block i's qs[4u + m]. */
typedef struct block_mxfp4x16 {
    uint8_t e[OKV_X16_BLOCKS];
    uint8_t qs[4][64];
} block_mxfp4x16;

/* Copies rows x k MXFP4 weights (ggml layout) into this layout, each row
 * ceil(k / 512) groups, the last padded with zero blocks; k a multiple of 32. */
void okv_repack_mxfp4x16(void *dst, const void *src, int64_t rows, int64_t k);

/* One row to f32, the same floats as okv_dequantize_row_mxfp4 of the source. */
void okv_dequantize_row_mxfp4x16(const void *src, float *dst, int64_t k);

#endif
