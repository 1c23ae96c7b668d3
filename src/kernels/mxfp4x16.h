/* Internal: MXFP4 repacked sixteen blocks wide ("mxfp4x16"), the layout the
 * model keeps its MXFP4 matrices in (gpt-oss's experts), for the reasons of
 * q4_0x16.h: one 32-bit lane per block, so eight integer dot products finish
 * sixteen block sums and the float work is three operations per 512
 * multiply-adds.  The bytes are MXFP4's, reordered as Q4_0x16 reorders
 * Q4_0's (the sixteen exponent bytes first), so the layout is no larger.
 *
 * A row of k values holds k / 512 whole groups and, when k / 32 is not a
 * multiple of 16, a last group of its nt = k / 32 % 16 blocks stored
 * compactly: their nt exponent bytes, then for u = 0..3 their 4 nt bytes of
 * qs[u] (lane i's at 4 i), so a row takes MXFP4's bytes exactly (gpt-oss's
 * 2880 values: 5 groups and 10 blocks, where a padded group would read a
 * fifteenth more).  The kernels read that group as the whole group with
 * zero lanes nt..15 (value 0, exponent 0: products 0) it stands for.
 *
 * Results: each block's integer dot product of the looked-up values
 * (okv_mxfp4_values) with Q8_0 activations is exact; lane i accumulates
 * fma((float)dot_i, 2^(e_i - 128) * d_x[i], acc_i) over the row's groups,
 * and the sixteen lanes are summed in x16.h's order, on every ISA. */
#ifndef OKV_KERNELS_MXFP4X16_H
#define OKV_KERNELS_MXFP4X16_H

#include <stdint.h>
#include <string.h>

#include "kernels/q4_0x16.h"

/* Sixteen MXFP4 blocks: their exponent bytes, then their nibbles as
 * block_q4_0x16 holds Q4_0's: qs[u][4i + m] = block i's qs[4u + m]. */
typedef struct block_mxfp4x16 {
    uint8_t e[OKV_X16_BLOCKS];
    uint8_t qs[4][64];
} block_mxfp4x16;

/* Copies rows x k MXFP4 weights (ggml layout) into this layout (rows of
 * okv_wtype_row_size(OKV_WT_MXFP4X16, k) bytes); k a multiple of 32. */
void okv_repack_mxfp4x16(void *dst, const void *src, int64_t rows, int64_t k);

/* Blocks in the compact last group of a row of k values (0: none). */
static inline int okv_mxfp4x16_tail_blocks(int64_t k) { return (int)(k / 32 % OKV_X16_BLOCKS); }

/* Group g of a row (nw whole groups, then nt blocks): a whole group in
 * place, the compact one copied into lanes 0..nt-1 of *tmp, whose lanes
 * nt..15 the caller has zeroed. */
static inline const block_mxfp4x16 *okv_mxfp4x16_group(const void *row, int64_t g, int64_t nw, int nt,
                                                       block_mxfp4x16 *tmp) {
    if (g < nw) return (const block_mxfp4x16 *)row + g;
    const uint8_t *t = (const uint8_t *)row + (size_t)nw * sizeof(block_mxfp4x16);
    memcpy(tmp->e, t, (size_t)nt);
    for (int u = 0; u < 4; u++) memcpy(tmp->qs[u], t + nt + 4 * nt * u, 4 * (size_t)nt);
    return tmp;
}

/* One row to f32, the same floats as okv_dequantize_row_mxfp4 of the source. */
void okv_dequantize_row_mxfp4x16(const void *src, float *dst, int64_t k);

#endif
