/* Internal: Q8_0 repacked sixteen blocks wide ("q8_0x16"), the layout the
 * model keeps Q8_0 matrices in, for the reasons of q4_0x16.h: one 32-bit
 * lane per block, eight integer dot products per sixteen block sums, three
 * float operations per 512 multiply-adds.  The same bytes as Q8_0's,
 * reordered; the activations are q4_0x16.h's (block_act_q8_0x16).
 *
 * A row of k values holds k / 512 whole groups and, when k / 32 is not a
 * multiple of 16, a last group of its nt = k / 32 % 16 blocks stored
 * compactly: their nt scales, then for v = 0..7 their 4 nt bytes of qs[v]
 * (lane i's at 4 i), so a row takes Q8_0's bytes exactly (gpt-oss's 2880
 * values: 5 groups and 10 blocks, where a padded group would read a
 * fifteenth more).  The kernels read that group as the whole group with
 * zero lanes nt..15 (values 0, scale 0: products 0) it stands for, as
 * mxfp4x16.h's do.
 *
 * Results: each block's integer dot product is exact (VNNI adds 128 to the
 * weights to make them unsigned and takes 128 * the block's activation sum
 * off; without VNNI the tiles move the weights' signs onto the
 * activations, and the AVX2 block pass splits w + 128 into nibbles, two
 * vpmaddubsw a vector, taking the 128 off as VNNI does); lane i
 * accumulates fma((float)dot_i, d_w[i] * d_x[i], acc_i), summed in x16.h's
 * order on every ISA: the same bits everywhere, for any n. */
#ifndef OKV_KERNELS_Q8_0X16_H
#define OKV_KERNELS_Q8_0X16_H

#include <stdint.h>
#include <string.h>

#include "kernels/f16.h"
#include "kernels/q4_0x16.h"

/* Sixteen Q8_0 blocks: the scales, then the values in the activations'
 * order: qs[2u + h][4i + m] = block i's value 16h + 4u + m. */
typedef struct block_q8_0x16 {
    okv_f16 d[OKV_X16_BLOCKS];
    int8_t qs[8][64];
} block_q8_0x16;

/* Copies rows x k Q8_0 weights (ggml layout) from src into dst in this
 * layout (rows of okv_wtype_row_size(OKV_WT_Q8_0X16, k) bytes); k a
 * multiple of 32; no overlap. */
void okv_repack_q8_0x16(void *dst, const void *src, int64_t rows, int64_t k);

/* Blocks in the compact last group of a row of k values (0: none). */
static inline int okv_q8_0x16_tail_blocks(int64_t k) { return (int)(k / 32 % OKV_X16_BLOCKS); }

/* Group g of a row (nw whole groups, then nt blocks): a whole group in
 * place, the compact one copied into lanes 0..nt-1 of *tmp, whose lanes
 * nt..15 the caller has zeroed. */
static inline const block_q8_0x16 *okv_q8_0x16_group(const void *row, int64_t g, int64_t nw, int nt,
                                                     block_q8_0x16 *tmp) {
    if (g < nw) return (const block_q8_0x16 *)row + g;
    const uint8_t *t = (const uint8_t *)row + (size_t)nw * sizeof(block_q8_0x16);
    memcpy(tmp->d, t, (size_t)nt * sizeof(okv_f16));
    for (int v = 0; v < 8; v++) memcpy(tmp->qs[v], t + nt * sizeof(okv_f16) + 4 * (size_t)nt * v, 4 * (size_t)nt);
    return tmp;
}

/* One row to f32, the same floats as okv_dequantize_row_q8_0 of the source. */
void okv_dequantize_row_q8_0x16(const void *src, float *dst, int64_t k);

#endif
