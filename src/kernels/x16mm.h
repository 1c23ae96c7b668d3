/* Internal: Q4_0 and Q8_0 for ARMv8.6's SMMLA ("q4_0x16mm", "q8_0x16mm"),
 * the layouts the model keeps those matrices in where the run-time ISA is
 * I8MM (okv_cpu_best_isa).
 *
 * Why a layout of its own: SMMLA multiplies a 2x8 by an 8x2 block of bytes
 * (int32 result [r0.c0, r0.c1, r1.c0, r1.c1]), so each half of an operand
 * must hold 8 values of one block of one row (or column).  The sixteen-wide
 * layouts (x16.h) keep 4 bytes of a block per lane for SDOT and VNNI, and
 * feeding SMMLA from them took two ZIP stages per operand (a tested
 * prototype lost to SDOT).  Here a block keeps ggml's byte order: its values
 * in order (Q8_0), or ggml's nibbles (Q4_0: byte m holds values m and
 * 16 + m), so 8 consecutive bytes are 8 consecutive values: two rows'
 * 16-byte loads ZIP (64-bit halves) into two A operands.  The activations
 * (OKV_ACT_Q8_0P) are Q8_0 with each pair of columns interleaved 8 values at
 * a time, so one 16-byte load is a B operand (from plain Q8_0 it took a
 * ZIP per operand too, and the kernels lost to SDOT: 7.2 against 6.5
 * instructions per 32 weights and column), and one SMMLA does 32 products
 * where SDOT does 16.
 *
 * The results are q4_0x16.h's and q8_0x16.h's, bit for bit: the same lanes
 * (lane i of group g = block 16g + i), the same exact integer block sums,
 * fma((float)dot, d_w * d_x, acc) per lane and group in group order, and
 * x16.h's lane sum.  So a model gives the same bits at i8mm as at dotprod,
 * whichever layout it keeps.  To hold one float vector per row and column
 * (instead of a group's four), a row is stored pass by pass: pass t
 * (t < 4) holds the quartets of blocks 16g + 4t .. 16g + 4t + 3 (lanes
 * 4t .. 4t + 3) of every group g in group order, so a kernel sweeps a row
 * four times, each sweep one contiguous quarter of it, with one
 * accumulator of four lanes.  A quartet (4 blocks, 128 values) is the unit:
 * rows of a multiple of 128 values (the model keeps the sixteen-wide
 * layouts for the others), and no padding, the bytes of ggml's blocks. */
#ifndef OKV_KERNELS_X16MM_H
#define OKV_KERNELS_X16MM_H

#include <stdint.h>

#include <stddef.h>

#include "kernels/cpu.h"
#include "kernels/f16.h"

enum { OKV_X16MM_VALUES = 128 }; /* values per quartet */

/* Four Q4_0 blocks: their scales, then each block's 16 bytes in ggml's
 * order, every nibble XORed with 8: a nibble is then its value (q - 8) as
 * a signed 4-bit number, so shifting a byte left by 4 (low nibble) or
 * masking it with 0xF0 (high) gives 16 * the value as a signed byte, one
 * instruction each, and the sums are 16 times the block's (exact: the
 * kernels convert them with 4 fraction bits). */
typedef struct block_q4_0x16mm {
    okv_f16 d[4];
    uint8_t qs[4][16];
} block_q4_0x16mm;

/* Four Q8_0 blocks: their scales, then each block's values in order. */
typedef struct block_q8_0x16mm {
    okv_f16 d[4];
    int8_t qs[4][32];
} block_q8_0x16mm;

/* The position (in quartets from the row's start) of quartet q (blocks
 * 4q .. 4q + 3) of a row of nq quartets: pass q % 4, place q / 4 in it. */
static inline int64_t okv_x16mm_slot(int64_t q, int64_t nq) {
    const int64_t t = q % 4;
    int64_t before = 0;
    for (int64_t u = 0; u < t; u++) before += (nq - u + 3) / 4; /* quartets of pass u */
    return before + q / 4;
}

/* OKV_ACT_Q8_0P: k / 8 + k bytes a column (the matmul driver's xa_col);
 * columns 2p and 2p + 1 share the 2 xa_col bytes from column 2p's: block
 * b's 8-value chunk c (c < 4) of column 2p + h at byte 64b + 16c + 8h, then
 * column 2p's k / 32 float scales, then column 2p + 1's.  A last column of
 * an odd n is alone: its values in order, then its scales.  This finds
 * column j's values (chunk c of block b at q + stride (4b + c)) and scales
 * among n. */
static inline void okv_act_q8_0p_col(const uint8_t *xa, size_t xa_col, int64_t k, int64_t n, int64_t j,
                                     const int8_t **q, const float **d, int *stride) {
    const uint8_t *base = xa + (size_t)(j & ~(int64_t)1) * xa_col;
    if (n % 2 && j == n - 1) {
        *q = (const int8_t *)base, *d = (const float *)(base + k), *stride = 8;
    } else {
        *q = (const int8_t *)base + 8 * (j & 1), *d = (const float *)(base + 2 * k + (j & 1) * (k / 8));
        *stride = 16;
    }
}

/* Quantizes column j (of n) of k activations x into its place in xa
 * (OKV_ACT_Q8_0P, xa_col bytes a column), with the Q8_0 quantizer of kern
 * (the bits of every level's). */
void okv_quantize_act_q8_0p(okv_isa kern, const float *x, int64_t k, uint8_t *xa, size_t xa_col, int64_t n,
                            int64_t j);

/* Copies rows x k Q4_0 (Q8_0) weights in ggml's layout from src into dst
 * in this layout; k a multiple of 128; no overlap. */
void okv_repack_q4_0x16mm(void *dst, const void *src, int64_t rows, int64_t k);
void okv_repack_q8_0x16mm(void *dst, const void *src, int64_t rows, int64_t k);

/* One row to f32, the same floats as ggml's dequantization of the source. */
void okv_dequantize_row_q4_0x16mm(const void *src, float *dst, int64_t k);
void okv_dequantize_row_q8_0x16mm(const void *src, float *dst, int64_t k);

#endif
