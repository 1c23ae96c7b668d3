/* Internal: Q4_K and Q5_K repacked sixteen sub-blocks wide ("q4_Kx16",
 * "q5_Kx16"), the layouts the model keeps those matrices in: groups of two
 * super-blocks (512 values), a row's last one perhaps half of one
 * (block_q4_Kx8 below).  As q4_0x16.h does for Q4_0, and for the same reason: one 32-bit
 * lane per 32-value sub-block, so eight integer dot products finish sixteen
 * sub-block sums, and the scales (integer sub-scales and mins in ggml's
 * kernels, applied by 16-bit multiplies on every 64 values) cost four float
 * operations per 512 multiply-adds.
 *
 * Each sub-block's low 4 bits are regrouped (its value l and value l + 16
 * share a byte), Q5_K's fifth bits gathered into a vector of their own, the
 * 6-bit scales and mins unpacked into a byte each, and the two super-blocks'
 * d and dmin kept as they are.  Every value is the format's own (to_float
 * gives ggml's floats).
 *
 * Results: lane i accumulates, per group, fma of its exact integer dot
 * product with (d * sc_i) * d_x, minus (dmin * m_i) * (d_x * the sum of the
 * sub-block's activations); the lanes are summed in x16.h's fixed order.
 * Every ISA does exactly that, so all give the same bits, for any n. */
#ifndef OKV_KERNELS_Q4_KX16_H
#define OKV_KERNELS_Q4_KX16_H

#include <stdint.h>

#include "kernels/cpu.h"
#include "kernels/f16.h"

/* Two Q4_K super-blocks (296 bytes per 512 values against 288): sub-block
 * i (0..15; 8b + j is super-block b's j-th) is lane i.  qs[u][4i + m]: low
 * nibble its value 4u + m, high nibble its value 16 + 4u + m. */
typedef struct block_q4_Kx16 {
    uint8_t qs[4][64];
    uint8_t sc[16], m[16];  /* 6-bit scales and mins */
    okv_f16 d[2], dmin[2];  /* per super-block */
} block_q4_Kx16;

/* Two Q5_K super-blocks: Q4_K's layout of their low 4 bits, scales and
 * mins, and their fifth bits: qh[4i + m] bit u is that of the value in the
 * low nibble of qs[u][4i + m], bit 4 + u that of the high one (360 bytes
 * per 512 values against Q5_K's 352). */
typedef struct block_q5_Kx16 {
    block_q4_Kx16 low;
    uint8_t qh[64];
} block_q5_Kx16;

/* A row's last super-block when k is an odd multiple of 256 (768: the
 * experts' down rows of Qwen3-30B-A3B): lanes 0-7 of a group, without the
 * eight lanes of padding (148 bytes where a padded group takes 296), so a
 * row of any whole number of super-blocks takes 1.03 times Q4_K's bytes.
 * The kernels do for lanes 0-7 what they do for a whole group and leave
 * lanes 8-15 as they are, which is what adding the padding's exact zeros did
 * (an accumulator that starts at +0 never becomes -0 under round to
 * nearest, and x + 0 is x for any other x): the bits of the padded layout. */
typedef struct block_q4_Kx8 {
    uint8_t qs[4][32];
    uint8_t sc[8], m[8];
    okv_f16 d, dmin;
} block_q4_Kx8;

/* The same for Q5_K: qh is a group's first 32 bytes of fifth bits. */
typedef struct block_q5_Kx8 {
    block_q4_Kx8 low;
    uint8_t qh[32];
} block_q5_Kx8;

/* Whole groups in a row of k values (a multiple of 256); the row then ends
 * in a block_q4_Kx8 (or block_q5_Kx8) if k % 512 is 256. */
static inline int64_t okv_kx16_whole(int64_t k) { return k / 512; }

/* The activations of 512 values in the same order, quantized as ggml's Q8_K
 * (one scale per 256): vector 2u + h, lane i = sub-block i's values
 * 16h + 4u .. + 3.  d[i]: its super-block's scale; xm[i]: d times the sum
 * of its 32 quantized values (the mins' part). */
typedef struct block_act_q8_Kx16 {
    int8_t qs[8][64];
    float d[16];
    float xm[16];
} block_act_q8_Kx16;

/* Copies rows x k Q4_K weights (ggml layout) from src into dst in this
 * layout (k / 512 groups a row, then a block_q4_Kx8 if k % 512 is 256); k
 * a multiple of 256; no overlap. */
void okv_repack_q4_Kx16(void *dst, const void *src, int64_t rows, int64_t k);

/* One row to f32, the same floats as okv_dequantize_row_q4_K of the source. */
void okv_dequantize_row_q4_Kx16(const void *src, float *dst, int64_t k);

/* The same two for Q5_K (okv_dequantize_row_q5_K's floats). */
void okv_repack_q5_Kx16(void *dst, const void *src, int64_t rows, int64_t k);
void okv_dequantize_row_q5_Kx16(const void *src, float *dst, int64_t k);

/* Quantizes k activations (a multiple of 256) into ceil(k / 512) groups (a
 * missing second super-block all zeros) with the Q8_K quantizer of kern
 * (scalar or AVX2: the same bits). */
void okv_quantize_act_q8_Kx16(okv_isa kern, const float *x, int64_t k, block_act_q8_Kx16 *y);

#endif
