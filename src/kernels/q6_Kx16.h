/* Internal: Q6_K repacked sixteen sub-blocks wide ("q6_Kx16"), the layout
 * the model keeps Q6_K matrices in (Q4_K_M's output and some attn_v and
 * ffn_down, Q6_K files): the idea of q4_0x16.h for a super-block of 16
 * sub-blocks of 16 values, each with its own 8-bit scale.  One 32-bit lane
 * per sub-block: four integer dot products finish sixteen sub-block sums
 * (ggml's kernels multiply by the scales in 16-bit lanes on every 64
 * values), and the float work is three operations per 256 multiply-adds.
 * The same 210 bytes per super-block as Q6_K, reordered; every value is
 * Q6_K's (to_float gives ggml's floats).
 *
 * Results: lane i's integer dot of its 6-bit values (0..63) with the
 * activations, less 32 times their sum, is exact; lane i accumulates
 * fma((float)dot_i, (d * sc_i) * d_x, acc_i) and the lanes are summed in
 * x16.h's order on every ISA: the same bits everywhere, for any n. */
#ifndef OKV_KERNELS_Q6_KX16_H
#define OKV_KERNELS_Q6_KX16_H

#include <stdint.h>

#include "kernels/cpu.h"
#include "kernels/f16.h"

/* One Q6_K super-block: sub-block i is lane i.  ql[u][4i + m]: low nibble
 * the low 4 bits of its value 4u + m, high nibble those of value 8 + 4u + m
 * (u = 0, 1); qh[4i + m]: bits 2v, 2v + 1 the top 2 bits of value 4v + m. */
typedef struct block_q6_Kx16 {
    uint8_t ql[2][64];
    uint8_t qh[64];
    int8_t sc[16];
    okv_f16 d;
} block_q6_Kx16;

/* The activations of a super-block in the matching order, quantized as
 * ggml's Q8_K: vector v, lane i = sub-block i's values 4v .. 4v + 3.  c32:
 * -32 times each sub-block's sum (Q6_K's offset); d: the Q8_K scale in
 * every lane. */
typedef struct block_act_q8_Kx16s {
    int8_t qs[4][64];
    int32_t c32[16];
    float d[16];
} block_act_q8_Kx16s;

/* Copies rows x k Q6_K weights (ggml layout) from src into dst in this
 * layout; k a multiple of 256; no overlap. */
void okv_repack_q6_Kx16(void *dst, const void *src, int64_t rows, int64_t k);

/* One row to f32, the same floats as okv_dequantize_row_q6_K of the source. */
void okv_dequantize_row_q6_Kx16(const void *src, float *dst, int64_t k);

/* Quantizes k activations (a multiple of 256) with the Q8_K quantizer of
 * kern (scalar or AVX2: the same bits) into k / 256 super-blocks. */
void okv_quantize_act_q8_Kx16s(okv_isa kern, const float *x, int64_t k, block_act_q8_Kx16s *y);

#endif
