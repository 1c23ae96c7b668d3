/* Q4_0, Q8_0 and Q4_K for SMMLA (x16mm.h), aarch64's I8MM kernels: the scalar
 * kernel's exact block sums and its float operations per lane in the same
 * order (x16_neon.h's FCVTL, FMUL, SCVTF, FMLA, and its lane sum), so the
 * same bits.
 *
 * Per row pair and quartet (4 blocks), the two rows' 16-byte loads (one
 * 8-byte chunk of two blocks each) ZIP by 64-bit halves into A operands
 * (8 values of row a | the same 8 of row b), a column pair's four 16-byte
 * loads are the B operands (OKV_ACT_Q8_0P), and four SMMLAs give a
 * block's [a.x0, a.x1, b.x0, b.x1]; four blocks' of those transposed
 * (TRN1/TRN2, ZIP1/ZIP2) are the quartet's lanes for each row and column.
 * Rows go two at a time (an odd last one paired with itself), columns four
 * (two pairs: 8 float accumulators, 8 integer ones, and the operands fit
 * the 32 registers).  The last column of an odd n, stored alone in the
 * weights' order, takes SDOT instead (up to four rows against its bytes,
 * loaded once: no ZIPs, where SMMLA against a doubled column would waste
 * half its products): each 16-byte SDOT sums two blocks, lanes 0-1 and
 * 2-3, and one ADDP of two such sums gives a quartet's four.  Q4_K's
 * sub-blocks stand where Q4_0's blocks do, with q4_Kx16's two float
 * operations per lane (FMLA, then FMLS of dmin m and the activation
 * sums). */
#include "kernels/cpu.h"

#if defined(OKV_ARM)
#include <string.h>

#include "kernels/matmul_impl.h"
#include "kernels/x16_neon.h"
#include "kernels/x16mm.h"

#define I8MM OKV_NEON_INLINE OKV_TARGET_I8MM

/* The A operands of blocks 2h and 2h + 1 of rows a and b: op[e][u] =
 * values 8u .. 8u + 7 of block 2h + e, row a's then row b's.  Q4_0: the
 * low nibbles shifted up are values 0-15 times 16, the high ones masked
 * values 16-31 times 16 (x16mm.h). */
I8MM void pair_a_q4(const block_q4_0x16mm *a, const block_q4_0x16mm *b, int h, int8x16_t op[2][4]) {
    const int8x16_t hi4 = vdupq_n_s8((int8_t)0xF0);
    UNROLL for (int c = 0; c < 2; c++) {
        const uint64x2_t wa = vreinterpretq_u64_u8(vld1q_u8(a->qs[h][c]));
        const uint64x2_t wb = vreinterpretq_u64_u8(vld1q_u8(b->qs[h][c]));
        const int8x16_t z[2] = {vreinterpretq_s8_u64(vzip1q_u64(wa, wb)), vreinterpretq_s8_u64(vzip2q_u64(wa, wb))};
        UNROLL for (int e = 0; e < 2; e++) {
            op[e][c] = vshlq_n_s8(z[e], 4);
            op[e][c + 2] = vandq_s8(z[e], hi4);
        }
    }
}

I8MM void pair_a_q8(const block_q8_0x16mm *a, const block_q8_0x16mm *b, int h, int8x16_t op[2][4]) {
    UNROLL for (int c = 0; c < 4; c++) {
        const int64x2_t wa = vreinterpretq_s64_s8(vld1q_s8(a->qs[h][c])), wb = vreinterpretq_s64_s8(vld1q_s8(b->qs[h][c]));
        op[0][c] = vreinterpretq_s8_s64(vzip1q_s64(wa, wb));
        op[1][c] = vreinterpretq_s8_s64(vzip2q_s64(wa, wb));
    }
}

/* Q4_K: the nibbles as they are (0-15), low ones masked, high ones
 * shifted down. */
I8MM void pair_a_q4k(const block_q4_Kx16mm *a, const block_q4_Kx16mm *b, int h, int8x16_t op[2][4]) {
    const uint8x16_t lo4 = vdupq_n_u8(0x0F);
    UNROLL for (int c = 0; c < 2; c++) {
        const uint64x2_t wa = vreinterpretq_u64_u8(vld1q_u8(a->qs[h][c]));
        const uint64x2_t wb = vreinterpretq_u64_u8(vld1q_u8(b->qs[h][c]));
        const uint8x16_t z[2] = {vreinterpretq_u8_u64(vzip1q_u64(wa, wb)), vreinterpretq_u8_u64(vzip2q_u64(wa, wb))};
        UNROLL for (int e = 0; e < 2; e++) {
            op[e][c] = vreinterpretq_s8_u8(vandq_u8(z[e], lo4));
            op[e][c + 2] = vreinterpretq_s8_u8(vshrq_n_u8(z[e], 4));
        }
    }
}

/* One row's blocks 2h and 2h + 1 against one column's x[u] (values 8u ..
 * 8u + 7 of both blocks, as the weights): SDOT's lanes 0-1 sum block 2h,
 * 2-3 block 2h + 1 (times 16 for Q4_0). */
I8MM int32x4_t one_q4(const block_q4_0x16mm *w, int h, const int8x16_t x[4]) {
    const int8x16_t hi4 = vdupq_n_s8((int8_t)0xF0);
    const int8x16_t v0 = vld1q_s8((const int8_t *)w->qs[h][0]), v1 = vld1q_s8((const int8_t *)w->qs[h][1]);
    int32x4_t p = vdotq_s32(vdupq_n_s32(0), vshlq_n_s8(v0, 4), x[0]);
    p = vdotq_s32(p, vshlq_n_s8(v1, 4), x[1]);
    p = vdotq_s32(p, vandq_s8(v0, hi4), x[2]);
    return vdotq_s32(p, vandq_s8(v1, hi4), x[3]);
}

I8MM int32x4_t one_q4k(const block_q4_Kx16mm *w, int h, const int8x16_t x[4]) {
    const uint8x16_t lo4 = vdupq_n_u8(0x0F);
    const uint8x16_t v0 = vld1q_u8(w->qs[h][0]), v1 = vld1q_u8(w->qs[h][1]);
    int32x4_t p = vdotq_s32(vdupq_n_s32(0), vreinterpretq_s8_u8(vandq_u8(v0, lo4)), x[0]);
    p = vdotq_s32(p, vreinterpretq_s8_u8(vandq_u8(v1, lo4)), x[1]);
    p = vdotq_s32(p, vreinterpretq_s8_u8(vshrq_n_u8(v0, 4)), x[2]);
    return vdotq_s32(p, vreinterpretq_s8_u8(vshrq_n_u8(v1, 4)), x[3]);
}

I8MM int32x4_t one_q8(const block_q8_0x16mm *w, int h, const int8x16_t x[4]) {
    int32x4_t p = vdotq_s32(vdupq_n_s32(0), vld1q_s8(w->qs[h][0]), x[0]);
    UNROLL for (int u = 1; u < 4; u++) p = vdotq_s32(p, vld1q_s8(w->qs[h][u]), x[u]);
    return p;
}

/* The quartet's block sums to float: Q4_0's are 16 times the block's, so
 * SCVTF with 4 fraction bits divides exactly (the same float as the
 * scalar kernel's (float)p). */
#define TO_F32_q4(p) vcvtq_n_f32_s32((p), 4)
#define TO_F32_q8(p) vcvtq_f32_s32(p)

/* A quartet's float factors for one row: s[0] its four scales (Q4_0,
 * Q8_0: d; Q4_K: d sc, exact in f32 as in the scalar kernel), s[1] Q4_K's
 * dmin m. */
I8MM void scales_q4(const block_q4_0x16mm *w, float32x4_t s[2]) { s[0] = okv_x16_f16x4_neon(w->d); }
I8MM void scales_q8(const block_q8_0x16mm *w, float32x4_t s[2]) { s[0] = okv_x16_f16x4_neon(w->d); }
I8MM void scales_q4k(const block_q4_Kx16mm *w, float32x4_t s[2]) {
    uint32_t both; /* d and dmin */
    memcpy(&both, &w->d, sizeof both);
    const float32x4_t dd = vcvt_f32_f16(vreinterpret_f16_u32(vdup_n_u32(both)));
    const uint16x8_t v = vmovl_u8(vld1_u8(w->sc)); /* sc[0..3], m[0..3] */
    s[0] = vmulq_laneq_f32(vcvtq_f32_u32(vmovl_u16(vget_low_u16(v))), dd, 0);
    s[1] = vmulq_laneq_f32(vcvtq_f32_u32(vmovl_u16(vget_high_u16(v))), dd, 1);
}

/* acc plus quartet q's four lane sums p of one row (factors s) and column
 * x: fma(p, s dx, acc) (Q4_0, Q8_0), then Q4_K's fma(-dmin m, xm, acc). */
I8MM float32x4_t step_q4(float32x4_t acc, int32x4_t p, const float32x4_t s[2], okv_act_q8_0p_col x, int64_t q,
                         int64_t k) {
    (void)k;
    return vfmaq_f32(acc, TO_F32_q4(p), vmulq_f32(s[0], vld1q_f32(x.d + 4 * q)));
}
I8MM float32x4_t step_q8(float32x4_t acc, int32x4_t p, const float32x4_t s[2], okv_act_q8_0p_col x, int64_t q,
                         int64_t k) {
    (void)k;
    return vfmaq_f32(acc, TO_F32_q8(p), vmulq_f32(s[0], vld1q_f32(x.d + 4 * q)));
}
I8MM float32x4_t step_q4k(float32x4_t acc, int32x4_t p, const float32x4_t s[2], okv_act_q8_0p_col x, int64_t q,
                          int64_t k) {
    acc = vfmaq_f32(acc, vcvtq_f32_s32(p), vmulq_f32(s[0], vld1q_f32(x.d + 4 * q)));
    return vfmsq_f32(acc, s[1], vld1q_f32(okv_act_q8_Kp_xm(x, k) + 4 * q));
}

/* Rows r0 .. r0 + NR - 1 (in pairs, an odd last one paired with itself),
 * columns c0 .. c0 + 2 NP - 1 (NP whole pairs).  Per pass t: acc[row][col],
 * the lanes 4t .. 4t + 3, over the pass's quartets q = 4g + t in group
 * order; part[t] keeps each pass's for the lane sum. */
#define PAIR_BODY(T, WT)                                                                                  \
    I8MM void pair_##T(const okv_mm_ctx *c, int64_t r0, const int NR, int64_t c0, const int NP) {         \
        const int64_t nq = c->k / OKV_X16MM_VALUES;                                                      \
        okv_act_q8_0p_col x[4]; /* x[2p].q: pair p's interleaved values */                                \
        UNROLL for (int j = 0; j < 2 * NP; j++) x[j] = okv_act_q8_0p_at(c->xa, c->xa_col, c->k, c->n, c0 + j); \
        for (int rp = 0; rp < NR; rp += 2) {                                                              \
            const int two = rp + 1 < NR;                                                                  \
            const WT *wa = (const WT *)(c->w + (r0 + rp) * c->wrow);                                      \
            const WT *wb = (const WT *)(c->w + (r0 + rp + two) * c->wrow);                                \
            float32x4_t part[4][2][4];                                                                    \
            for (int t = 0; t < 4; t++) {                                                                 \
                float32x4_t acc[2][4];                                                                    \
                UNROLL for (int j = 0; j < 2 * NP; j++) acc[0][j] = acc[1][j] = vdupq_n_f32(0.0f);        \
                for (int64_t q = t; q < nq; q += 4, wa++, wb++) {                                         \
                    __builtin_prefetch((const char *)wa + OKV_X16_AHEAD);                                 \
                    __builtin_prefetch((const char *)wb + OKV_X16_AHEAD);                                 \
                    int32x4_t s[2][4];                                                                    \
                    UNROLL for (int h = 0; h < 2; h++) {                                                  \
                        int8x16_t a[2][4];                                                                \
                        pair_a_##T(wa, wb, h, a);                                                         \
                        UNROLL for (int e = 0; e < 2; e++) {                                              \
                            const int m = 2 * h + e;                                                      \
                            UNROLL for (int p = 0; p < NP; p++) {                                         \
                                const int8_t *xb = x[2 * p].q + 64 * (4 * q + m);                         \
                                s[p][m] = vmmlaq_s32(vdupq_n_s32(0), a[e][0], vld1q_s8(xb));              \
                                UNROLL for (int u = 1; u < 4; u++)                                        \
                                    s[p][m] = vmmlaq_s32(s[p][m], a[e][u], vld1q_s8(xb + 16 * u));        \
                            }                                                                             \
                        }                                                                                 \
                    }                                                                                     \
                    float32x4_t sw[2][2];                                                                 \
                    scales_##T(wa, sw[0]);                                                                \
                    scales_##T(wb, sw[1]);                                                                \
                    UNROLL for (int p = 0; p < NP; p++) {                                                 \
                        /* s[p][m] = block m's [a.x0, a.x1, b.x0, b.x1]: transposed */                   \
                        const int32x4_t t0 = vtrn1q_s32(s[p][0], s[p][1]), t1 = vtrn2q_s32(s[p][0], s[p][1]); \
                        const int32x4_t t2 = vtrn1q_s32(s[p][2], s[p][3]), t3 = vtrn2q_s32(s[p][2], s[p][3]); \
                        int32x4_t lanes[2][2]; /* [row][column of the pair] */                            \
                        lanes[0][0] = vreinterpretq_s32_s64(vzip1q_s64(vreinterpretq_s64_s32(t0), vreinterpretq_s64_s32(t2))); \
                        lanes[1][0] = vreinterpretq_s32_s64(vzip2q_s64(vreinterpretq_s64_s32(t0), vreinterpretq_s64_s32(t2))); \
                        lanes[0][1] = vreinterpretq_s32_s64(vzip1q_s64(vreinterpretq_s64_s32(t1), vreinterpretq_s64_s32(t3))); \
                        lanes[1][1] = vreinterpretq_s32_s64(vzip2q_s64(vreinterpretq_s64_s32(t1), vreinterpretq_s64_s32(t3))); \
                        UNROLL for (int h = 0; h < 2; h++)                                                \
                            UNROLL for (int r = 0; r < 2; r++)                                            \
                                acc[r][2 * p + h] = step_##T(acc[r][2 * p + h], lanes[r][h], sw[r], x[2 * p + h], q, c->k); \
                    }                                                                                     \
                }                                                                                         \
                UNROLL for (int j = 0; j < 2 * NP; j++) part[t][0][j] = acc[0][j], part[t][1][j] = acc[1][j]; \
            }                                                                                             \
            UNROLL for (int r = 0; r < 1 + two; r++) {                                                    \
                UNROLL for (int j = 0; j < 2 * NP; j++) {                                                 \
                    const float32x4_t q4[4] = {part[0][r][j], part[1][r][j], part[2][r][j], part[3][r][j]};   \
                    c->y[(c0 + j) * c->rows + r0 + rp + r] = okv_x16_sum16_neon(q4);                      \
                }                                                                                         \
            }                                                                                             \
        }                                                                                                 \
    }

/* Rows r0 .. r0 + NR - 1 against the lone column j (SDOT; its values
 * loaded once for the rows). */
#define ONE_BODY(T, WT)                                                                                   \
    I8MM void one_col_##T(const okv_mm_ctx *c, int64_t r0, const int NR, int64_t j) {                     \
        const int64_t nq = c->k / OKV_X16MM_VALUES;                                                      \
        const okv_act_q8_0p_col col = okv_act_q8_0p_at(c->xa, c->xa_col, c->k, c->n, j);                  \
        const WT *w[4];                                                                                   \
        UNROLL for (int r = 0; r < NR; r++) w[r] = (const WT *)(c->w + (r0 + r) * c->wrow);               \
        float32x4_t part[4][4];                                                                           \
        for (int t = 0; t < 4; t++) {                                                                     \
            float32x4_t acc[4];                                                                           \
            UNROLL for (int r = 0; r < NR; r++) acc[r] = vdupq_n_f32(0.0f);                               \
            for (int64_t q = t; q < nq; q += 4) {                                                         \
                /* blocks 2h, 2h + 1 of the quartet, values 8u .. 8u + 7 (alone: at 64 (b / 2) + 16u) */ \
                int8x16_t x[2][4];                                                                        \
                UNROLL for (int h = 0; h < 2; h++)                                                        \
                    UNROLL for (int u = 0; u < 4; u++) x[h][u] = vld1q_s8(col.q + 128 * q + 64 * h + 16 * u); \
                UNROLL for (int r = 0; r < NR; r++) {                                                     \
                    __builtin_prefetch((const char *)w[r] + OKV_X16_AHEAD);                               \
                    const int32x4_t p = vpaddq_s32(one_##T(w[r], 0, x[0]), one_##T(w[r], 1, x[1]));       \
                    float32x4_t sw[2];                                                                    \
                    scales_##T(w[r], sw);                                                                 \
                    acc[r] = step_##T(acc[r], p, sw, col, q, c->k);                                       \
                    w[r]++;                                                                               \
                }                                                                                         \
            }                                                                                             \
            UNROLL for (int r = 0; r < NR; r++) part[t][r] = acc[r];                                      \
        }                                                                                                 \
        UNROLL for (int r = 0; r < NR; r++) {                                                             \
            const float32x4_t q4[4] = {part[0][r], part[1][r], part[2][r], part[3][r]};                   \
            c->y[j * c->rows + r0 + r] = okv_x16_sum16_neon(q4);                                          \
        }                                                                                                 \
    }

/* The tile: column pairs by SMMLA, a lone column by SDOT.  The driver's
 * tiles start at multiples of 4 columns, so pairs stay whole and only the
 * last column of an odd n comes alone, which is stored alone. */
#define TILE(T, WT, NAME, ONE_ROWS)                                                                       \
    PAIR_BODY(T, WT)                                                                                      \
    ONE_BODY(T, WT)                                                                                       \
    OKV_TARGET_I8MM void NAME(const okv_mm_ctx *c, int64_t r0, int nr, int64_t c0, int nc) {             \
        if (nc >= 4) pair_##T(c, r0, nr, c0, 2);                                                          \
        else if (nc >= 2) pair_##T(c, r0, nr, c0, 1);                                                     \
        if (nc % 2) {                                                                                     \
            const int64_t j = c0 + nc - 1;                                                                \
            for (int r = 0; r < nr; r += ONE_ROWS) {                                                      \
                switch (nr - r < ONE_ROWS ? nr - r : ONE_ROWS) {                                          \
                case 4: one_col_##T(c, r0 + r, 4, j); break;                                              \
                case 3: one_col_##T(c, r0 + r, 3, j); break;                                              \
                case 2: one_col_##T(c, r0 + r, 2, j); break;                                              \
                default: one_col_##T(c, r0 + r, 1, j); break;                                             \
                }                                                                                         \
            }                                                                                             \
        }                                                                                                 \
    }

/* Q4_K's lone column takes two rows at a time: with four, its scales' and
 * sums' registers spill (GCC 12: 12.9 instructions per 32 weights against
 * 11.8) */
TILE(q4, block_q4_0x16mm, okv_mm_tile_q4_0x16mm_i8mm, 4)
TILE(q8, block_q8_0x16mm, okv_mm_tile_q8_0x16mm_i8mm, 4)
TILE(q4k, block_q4_Kx16mm, okv_mm_tile_q4_Kx16mm_i8mm, 2)

#endif /* OKV_ARM */
