/* Internal: Q5_0 repacked sixteen blocks wide ("q5_0x16"), the layout the
 * model keeps Q5_0 matrices in, for the reasons of q4_0x16.h: one 32-bit
 * lane per block, eight integer dot products per sixteen block sums, three
 * float operations per 512 multiply-adds.  The same bytes as Q5_0's,
 * reordered; the activations are q4_0x16.h's (block_act_q8_0x16), whose c8
 * (-8 * a block's activation sum) doubled takes Q5_0's offset of 16 off.
 *
 * Why a layout of its own: llama-quantize gives Q5_0 to every matrix of a
 * Q4_K_M file whose rows are not whole super-blocks (Qwen2.5-0.5B's 896,
 * the usual draft model of speculative decoding), and in ggml's layout its
 * kernels, not memory, bound decode (bench/matmul 5632x2048, one column, 2
 * threads of a Zen 5: 28.7 GB/s against Q4_0x16's 38.2).
 *
 * A row of k values holds k / 512 whole groups and, when k / 32 is not a
 * multiple of 16, a last group of its nt = k / 32 % 16 blocks stored
 * compactly, as q8_0x16.h's: a group of n blocks is n scales, then 4 n
 * bytes of fifth bits, then for u = 0..3 the 4 n bytes of qs[u] (lane i's
 * at 4 i), so a whole group is block_q5_0x16 and a row takes Q5_0's bytes
 * exactly (896 values: one group and 12 blocks, where a padded group would
 * read a seventh more).  The kernels read the compact group as the whole
 * group with zero lanes nt..15 (weights 0, scales 0, and the activations'
 * padding zero: products 0) it stands for.
 *
 * Results: each block's integer dot product is exact (the 5-bit weights
 * unsigned, 0..31, the offset taken off with 2 c8); lane i accumulates
 * fma((float)dot_i, d_w[i] * d_x[i], acc_i), summed in x16.h's order on
 * every ISA: the same bits everywhere, for any n. */
#ifndef OKV_KERNELS_Q5_0X16_H
#define OKV_KERNELS_Q5_0X16_H

#include <stdint.h>
#include <string.h>

#include "kernels/f16.h"
#include "kernels/q4_0x16.h"

/* Sixteen Q5_0 blocks: the scales, the fifth bits (byte 4i + m of lane i:
 * bit u for the value in the low nibble of qs[u][4i + m], bit 4 + u for the
 * high one's: x16.h's FIVE), then the nibbles as q4_0x16's: qs[u][4i + m]
 * = block i's qs[4u + m], low nibble value 4u + m, high nibble 16 + 4u + m. */
typedef struct block_q5_0x16 {
    okv_f16 d[OKV_X16_BLOCKS];
    uint8_t qh[64];
    uint8_t qs[4][64];
} block_q5_0x16;

/* Copies rows x k Q5_0 weights (ggml layout) from src into dst in this
 * layout (rows of okv_wtype_row_size(OKV_WT_Q5_0X16, k) bytes, Q5_0's); k
 * a multiple of 32; no overlap. */
void okv_repack_q5_0x16(void *dst, const void *src, int64_t rows, int64_t k);

/* Blocks in the compact last group of a row of k values (0: none). */
static inline int okv_q5_0x16_tail_blocks(int64_t k) { return (int)(k / 32 % OKV_X16_BLOCKS); }

/* Group g of a row (nw whole groups, then nt blocks): a whole group in
 * place, the compact one copied into lanes 0..nt-1 of *tmp, whose lanes
 * nt..15 the caller has zeroed. */
static inline const block_q5_0x16 *okv_q5_0x16_group(const void *row, int64_t g, int64_t nw, int nt,
                                                     block_q5_0x16 *tmp) {
    if (g < nw) return (const block_q5_0x16 *)row + g;
    const uint8_t *t = (const uint8_t *)row + (size_t)nw * sizeof(block_q5_0x16);
    memcpy(tmp->d, t, (size_t)nt * sizeof(okv_f16));
    t += (size_t)nt * sizeof(okv_f16);
    memcpy(tmp->qh, t, 4 * (size_t)nt);
    for (int u = 0; u < 4; u++) memcpy(tmp->qs[u], t + 4 * (size_t)nt * (u + 1), 4 * (size_t)nt);
    return tmp;
}

/* One row to f32, the same floats as okv_dequantize_row_q5_0 of the source. */
void okv_dequantize_row_q5_0x16(const void *src, float *dst, int64_t k);

#endif
