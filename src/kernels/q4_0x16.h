/* Internal: Q4_0 repacked sixteen blocks wide ("q4_0x16"), the layout the
 * model keeps its Q4_0 matrices in (a row's last group of 16 blocks may be
 * a compact part of one: below).
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
 * A row of k values holds k / 512 whole groups and, when k / 32 is not a
 * multiple of 16, a last group of its nt = k / 32 % 16 blocks stored
 * compactly: their nt scales, then for u = 0..3 the 4 nt bytes of qs[u]
 * (lane i's at 4 i), so a row takes Q4_0's bytes exactly.  A padded group
 * would read a third more for Gemma 3 1B's 1152 values (2 groups and 4
 * blocks), a ninth for Gemma 2 2B's 2304, a seventh for Qwen2.5-0.5B's
 * 896: single-token decode reads every byte, and Gemma 3 1B's tied output
 * matrix (262144 rows of 1152) is a third of them.  The kernels read the compact
 * group in place as the whole group with zero lanes nt..15 (weights and
 * scales 0, and the activations' padding zero: products 0) it stands for:
 * x86 with masked loads, aarch64 with its partial quartet's lanes one by
 * one; a copy of the group into a zeroed one per row (five library calls)
 * took a Gemma-3-1B-shaped decode from 44 to 27 tokens/s (Zen 5, 2 threads).
 *
 * Results: each block's integer dot product is exact; lane i accumulates
 * fma((float)dot_i, d_w[i] * d_x[i], acc_i) over the row's groups, and the
 * sixteen lanes are summed in one fixed order.  Every ISA's kernel does
 * exactly that, so they all give the same bits, for any n. */
#ifndef OKV_KERNELS_Q4_0X16_H
#define OKV_KERNELS_Q4_0X16_H

#include <stdint.h>
#include <string.h>

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
 * layout (rows of okv_wtype_row_size(OKV_WT_Q4_0X16, k) bytes, Q4_0's); k
 * a multiple of 32; dst and src must not overlap. */
void okv_repack_q4_0x16(void *dst, const void *src, int64_t rows, int64_t k);

/* Blocks in the compact last group of a row of k values (0: none). */
static inline int okv_q4_0x16_tail_blocks(int64_t k) { return (int)(k / 32 % OKV_X16_BLOCKS); }

/* Group g of a row (nw whole groups, then nt blocks): a whole group in
 * place, the compact one copied into lanes 0..nt-1 of *tmp, whose lanes
 * nt..15 the caller has zeroed.  For the scalar kernel and to_float; the
 * SIMD kernels read the compact group in place. */
static inline const block_q4_0x16 *okv_q4_0x16_group(const void *row, int64_t g, int64_t nw, int nt,
                                                     block_q4_0x16 *tmp) {
    if (g < nw) return (const block_q4_0x16 *)row + g;
    const uint8_t *t = (const uint8_t *)row + (size_t)nw * sizeof(block_q4_0x16);
    memcpy(tmp->d, t, (size_t)nt * sizeof(okv_f16));
    for (int u = 0; u < 4; u++) memcpy(tmp->qs[u], t + 2 * (size_t)nt + 4 * (size_t)nt * u, 4 * (size_t)nt);
    return tmp;
}

/* One row to f32, the same floats as okv_dequantize_row_q4_0 of the source. */
void okv_dequantize_row_q4_0x16(const void *src, float *dst, int64_t k);

/* Quantizes k activations (a multiple of 32) into ceil(k / 512) groups
 * (the last one padded with zeros), with the Q8_0 quantizer of kern (scalar or the AVX2 one, which
 * give the same bits). */
void okv_quantize_act_q8_0x16(okv_isa kern, const float *x, int64_t k, block_act_q8_0x16 *y);

#endif
