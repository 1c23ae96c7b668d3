/* Internal: Q4_0, Q8_0 and Q4_K for ARMv8.6's SMMLA ("q4_0x16mm",
 * "q8_0x16mm", "q4_Kx16mm": below), the layouts the model keeps those
 * matrices in where the products run at I8MM (the model's "isa" at load).
 *
 * Why a layout of its own: SMMLA multiplies a 2x8 by an 8x2 block of bytes
 * (int32 result [r0.c0, r0.c1, r1.c0, r1.c1]), so each half of an operand
 * must hold 8 values of one block of one row (or column).  The sixteen-wide
 * layouts (x16.h) keep 4 bytes of a block per lane for SDOT and VNNI, and
 * feeding SMMLA from them took two ZIP stages per operand (a tested
 * prototype lost to SDOT).  Here a block keeps ggml's byte order: its values
 * in order (Q8_0), or ggml's nibbles (Q4_0: byte m holds values m and
 * 16 + m), in chunks of 8 bytes, two blocks' chunks side by side in 16
 * bytes: two rows' 16-byte loads ZIP (64-bit halves) into two A operands
 * (one per block).  The activations (OKV_ACT_Q8_0P) are Q8_0 with each
 * pair of columns interleaved 8 values at a time, so one 16-byte load is a
 * B operand (from plain Q8_0 it took a ZIP per operand too, and the
 * kernels lost to SDOT: 7.2 against 6.5 instructions per 32 weights and
 * column), and one SMMLA does 32 products where SDOT does 16.
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

#include <stddef.h>
#include <stdint.h>

#include "kernels/cpu.h"
#include "kernels/f16.h"

enum { OKV_X16MM_VALUES = 128 }; /* values per quartet */

/* Four Q4_0 blocks: their scales, then their bytes in ggml's order, every
 * nibble XORed with 8: a nibble is then its value (q - 8) as a signed
 * 4-bit number, so shifting a byte left by 4 (low nibble) or masking it
 * with 0xF0 (high) gives 16 * the value as a signed byte, one instruction
 * each, and the sums are 16 times the block's (exact: the kernels convert
 * them with 4 fraction bits).  Byte i of block m is qs[m / 2][i / 8][8 (m % 2)
 * + i % 8]: blocks 0 and 1, then 2 and 3, side by side 8 bytes at a time,
 * so SDOT against one column sums two blocks in one register (lanes 0-1
 * and 2-3). */
typedef struct block_q4_0x16mm {
    okv_f16 d[4];
    uint8_t qs[2][2][16];
} block_q4_0x16mm;

/* Four Q8_0 blocks: their scales, then value l of block m at
 * qs[m / 2][l / 8][8 (m % 2) + l % 8] (as Q4_0's bytes). */
typedef struct block_q8_0x16mm {
    okv_f16 d[4];
    int8_t qs[2][4][16];
} block_q8_0x16mm;

/* The position (in quartets from the row's start) of quartet q (blocks
 * 4q .. 4q + 3) of a row of nq quartets: pass q % 4, place q / 4 in it. */
static inline int64_t okv_x16mm_slot(int64_t q, int64_t nq) {
    const int64_t t = q % 4;
    int64_t before = 0;
    for (int64_t u = 0; u < t; u++) before += (nq - u + 3) / 4; /* quartets of pass u */
    return before + q / 4;
}

/* OKV_ACT_Q8_0P: k / 8 + k bytes a column (the matmul driver's xa_col).
 * Columns 2p and 2p + 1 share the 2 xa_col bytes from column 2p's: chunk c
 * (values 8c .. 8c + 7, c < 4) of block b of column 2p + h at byte
 * 64b + 16c + 8h (a 16-byte load is an SMMLA operand), then column 2p's
 * k / 32 float scales, then column 2p + 1's.  The last column of an odd n
 * (decode's one) is alone, in the weights' order: chunk c of block b at
 * 64 (b / 2) + 16c + 8 (b % 2), then its scales. */
typedef struct okv_act_q8_0p_col {
    const int8_t *q; /* the column's first chunk */
    const float *d;  /* its scales */
    int alone;
} okv_act_q8_0p_col;

/* Column j of n, in activations xa (OKV_ACT_Q8_0P or OKV_ACT_Q8_KP: a
 * column's floats are its xa_col - k bytes after the values). */
static inline okv_act_q8_0p_col okv_act_q8_0p_at(const uint8_t *xa, size_t xa_col, int64_t k, int64_t n,
                                                 int64_t j) {
    const uint8_t *base = xa + (size_t)(j & ~(int64_t)1) * xa_col;
    if (n % 2 && j == n - 1) return (okv_act_q8_0p_col){(const int8_t *)base, (const float *)(base + k), 1};
    return (okv_act_q8_0p_col){(const int8_t *)base + 8 * (j & 1),
                               (const float *)(base + 2 * k + (size_t)(j & 1) * (xa_col - (size_t)k)), 0};
}

/* Chunk c of block b of column x. */
static inline const int8_t *okv_act_q8_0p_chunk(okv_act_q8_0p_col x, int64_t b, int c) {
    return x.alone ? x.q + 64 * (b / 2) + 16 * c + 8 * (b % 2) : x.q + 64 * b + 16 * c;
}

/* Quantizes column j (of n) of k activations x into its place in xa
 * (OKV_ACT_Q8_0P, xa_col bytes a column), with the Q8_0 quantizer of kern
 * (the bits of every level's). */
void okv_quantize_act_q8_0p(okv_isa kern, const float *x, int64_t k, uint8_t *xa, size_t xa_col, int64_t n,
                            int64_t j);

/* Q4_K for SMMLA ("q4_Kx16mm"): four 32-value sub-blocks of one
 * super-block (a quartet; a super-block is two), the same passes and
 * lanes as Q4_0's (sub-block b in lane b % 16 of group b / 16, as in
 * q4_Kx16.h), so a row of an odd number of super-blocks (768 values) needs
 * no half group: its last group's lanes 8-15 get nothing, which is what
 * q4_Kx16's half group does.  d and dmin first, where a 4-byte load takes
 * both; byte i of sub-block m at qs[m / 2][i / 8][8 (m % 2) + i % 8], low
 * nibble its value i, high its value 16 + i (unsigned, 0-15: AND and
 * USHR give SMMLA's signed bytes), as Q4_0's bytes (76 bytes per 128
 * values against Q4_K's 72). */
typedef struct block_q4_Kx16mm {
    okv_f16 d, dmin;     /* the super-block's */
    uint8_t sc[4], m[4]; /* the four sub-blocks' 6-bit scales and mins */
    uint8_t qs[2][2][16];
} block_q4_Kx16mm;

/* OKV_ACT_Q8_KP: Q8_K's values (one scale per 256) where OKV_ACT_Q8_0P
 * keeps Q8_0's, k / 4 bytes of floats a column: per 32-value sub-block b
 * its super-block's scale d[b], then per sub-block xm[b] = d times the sum
 * of its 32 values (q4_Kx16.h's; the mins' part): k + k / 4 bytes a
 * column. */
static inline const float *okv_act_q8_Kp_xm(okv_act_q8_0p_col x, int64_t k) { return x.d + (uint64_t)k / 32; }

/* Quantizes column j of n into xa as OKV_ACT_Q8_KP (xa_col bytes a
 * column), with the Q8_K quantizer of kern, super-block by super-block. */
void okv_quantize_act_q8_Kp(okv_isa kern, const float *x, int64_t k, uint8_t *xa, size_t xa_col, int64_t n,
                            int64_t j);

/* Copies rows x k Q4_0 (Q8_0) weights in ggml's layout from src into dst
 * in this layout; k a multiple of 128; no overlap. */
void okv_repack_q4_0x16mm(void *dst, const void *src, int64_t rows, int64_t k);
void okv_repack_q8_0x16mm(void *dst, const void *src, int64_t rows, int64_t k);

/* One row to f32, the same floats as ggml's dequantization of the source. */
void okv_dequantize_row_q4_0x16mm(const void *src, float *dst, int64_t k);
void okv_dequantize_row_q8_0x16mm(const void *src, float *dst, int64_t k);

/* The same two for Q4_K, k a multiple of 256: okv_dequantize_row_q4_K's
 * floats. */
void okv_repack_q4_Kx16mm(void *dst, const void *src, int64_t rows, int64_t k);
void okv_dequantize_row_q4_Kx16mm(const void *src, float *dst, int64_t k);

#endif
