/* Internal: Q4_0 repacked sixteen blocks wide ("q4_0x16"), the layout the
 * model keeps its Q4_0 matrices in (a row's last group of 16 blocks may be
 * partly padding: x16.h).
 *
 * Why: in ggml's layout a 512-bit integer dot product covers two blocks, so
 * every two blocks cost a float conversion, a scale product and an FMA per
 * row and column, three float operations per 64 multiply-adds.  Decoding
 * several sequences at once (a server's batch) is bound by exactly that.
 * Here one 32-bit lane belongs to one block: vector lane i holds four values
 * of block i of a group of sixteen, so eight dot products finish sixteen
 * whole block sums in one register, and the float work is three operations
 * per 512 multiply-adds.  The bytes are the same as Q4_0's, only reordered,
 * and every value and scale is Q4_0's (to_float gives the same floats).
 *
 * Results: each block's integer dot product is exact; lane i accumulates
 * fma((float)dot_i, d_w[i] * d_x[i], acc_i) over the row's groups, and the
 * sixteen lanes are summed in one fixed order.  Every ISA's kernel does
 * exactly that, so they all give the same bits, for any n. */
#ifndef OKV_KERNELS_Q4_0X16_H
#define OKV_KERNELS_Q4_0X16_H

#include <stdint.h>

#include "kernels/cpu.h"
#include "kernels/f16.h"

enum { OKV_X16_BLOCKS = 16, OKV_X16_VALUES = 512 }; /* blocks and values per group */

/* Sixteen Q4_0 blocks: the scales, then their nibbles, four bytes of each
 * block per 64-byte vector: qs[u][4i + m] = block i's qs[4u + m], whose low
 * nibble is value 4u + m and high nibble value 16 + 4u + m (each - 8). */
typedef struct block_q4_0x16 {
    okv_f16 d[OKV_X16_BLOCKS];
    uint8_t qs[4][64];
} block_q4_0x16;

/* The activations of a group in the matching order, quantized as Q8_0
 * (ggml's x86 quantizer): vector 2u + h, lane i = block i's values
 * 16h + 4u .. 16h + 4u + 3.  d: the block scales; c8: -8 * the sum of each
 * block's values, which takes Q4_0's offset of 8 off the products (and,
 * times 16, Q8_0x16's unsigned weights' offset of 128: q8_0x16.h). */
typedef struct block_act_q8_0x16 {
    int8_t qs[8][64];
    float d[OKV_X16_BLOCKS];
    int32_t c8[OKV_X16_BLOCKS];
} block_act_q8_0x16;

/* Copies rows x k Q4_0 weights (ggml layout) from src into dst in this
 * layout, each row ceil(k / 512) groups, the last one padded with zero
 * blocks; k a multiple of 32; dst and src must not overlap. */
void okv_repack_q4_0x16(void *dst, const void *src, int64_t rows, int64_t k);

/* One row to f32, the same floats as okv_dequantize_row_q4_0 of the source. */
void okv_dequantize_row_q4_0x16(const void *src, float *dst, int64_t k);

/* Quantizes k activations (a multiple of 32) into ceil(k / 512) groups
 * (the last one padded with zeros), with the Q8_0 quantizer of kern (scalar or the AVX2 one, which
 * give the same bits). */
void okv_quantize_act_q8_0x16(okv_isa kern, const float *x, int64_t k, block_act_q8_0x16 *y);

#endif
