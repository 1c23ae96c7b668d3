/* Internal: Q8_0 repacked sixteen blocks wide ("q8_0x16"), the layout the
 * model keeps Q8_0 matrices in (rows in groups of 16 blocks, the last one
 * perhaps partly padding: x16.h), for
 * the reasons of q4_0x16.h: one 32-bit lane per block, eight integer dot
 * products per sixteen block sums, three float operations per 512
 * multiply-adds.  The same bytes as Q8_0's, reordered; the activations are
 * q4_0x16.h's (block_act_q8_0x16).
 *
 * Results: each block's integer dot product is exact (VNNI adds 128 to the
 * weights to make them unsigned and takes 128 * the block's activation sum
 * off; without VNNI the weights' signs move onto the activations); lane i
 * accumulates fma((float)dot_i, d_w[i] * d_x[i], acc_i), summed in x16.h's
 * order on every ISA: the same bits everywhere, for any n. */
#ifndef OKV_KERNELS_Q8_0X16_H
#define OKV_KERNELS_Q8_0X16_H

#include <stdint.h>

#include "kernels/f16.h"
#include "kernels/q4_0x16.h"

/* Sixteen Q8_0 blocks: the scales, then the values in the activations'
 * order: qs[2u + h][4i + m] = block i's value 16h + 4u + m. */
typedef struct block_q8_0x16 {
    okv_f16 d[OKV_X16_BLOCKS];
    int8_t qs[8][64];
} block_q8_0x16;

/* Copies rows x k Q8_0 weights (ggml layout) from src into dst in this
 * layout (ceil(k / 512) groups a row, the last padded); k a multiple of
 * 32; no overlap. */
void okv_repack_q8_0x16(void *dst, const void *src, int64_t rows, int64_t k);

/* One row to f32, the same floats as okv_dequantize_row_q8_0 of the source. */
void okv_dequantize_row_q8_0x16(const void *src, float *dst, int64_t k);

#endif
