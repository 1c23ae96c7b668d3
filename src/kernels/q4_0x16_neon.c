/* Q4_0 sixteen blocks wide (q4_0x16.h), aarch64: the NEON (ARMv8.0) and
 * DOTPROD kernels beside q4_0x16.c's scalar and x86 ones, the same
 * operations in the same order (x16_neon.h), so the same bits. */
#include "kernels/cpu.h"

#if defined(OKV_ARM)
#include "kernels/matmul_impl.h"
#include "kernels/q4_0x16.h"
#include "kernels/x16_neon.h"

#define TILE_SETUP() OKV_X16_TILE_SETUP(block_q4_0x16, block_act_q8_0x16, okv_x16_groups(c->k))

/* The first nl (1..3) of a quartet's four 4-byte lanes from p, the rest
 * zero, and the first nl of its four f16 scales from d: the partial quartet
 * of a compact last group, read without passing its end (NEON has no
 * masked loads) and without a library call per row. */
OKV_NEON_INLINE uint8x16_t lanes_neon(const uint8_t *p, int nl) {
    uint32_t a;
    uint32x4_t v = vdupq_n_u32(0);
    memcpy(&a, p, 4), v = vsetq_lane_u32(a, v, 0);
    if (nl > 1) memcpy(&a, p + 4, 4), v = vsetq_lane_u32(a, v, 1);
    if (nl > 2) memcpy(&a, p + 8, 4), v = vsetq_lane_u32(a, v, 2);
    return vreinterpretq_u8_u32(v);
}

OKV_NEON_INLINE float32x4_t scales_neon(const okv_f16 *d, int nl) {
    uint16x4_t v = vdup_n_u16(0);
    v = vset_lane_u16(d[0], v, 0);
    if (nl > 1) v = vset_lane_u16(d[1], v, 1);
    if (nl > 2) v = vset_lane_u16(d[2], v, 2);
    return vcvt_f32_f16(vreinterpret_f16_u16(v));
}

/* Quartet t (lanes 4t .. 4t + 3) of one row's group by NC columns (x[j]:
 * their activation groups) into acc[j][t]: wv[u], the quartet's bytes of
 * qs[u]; dw, its scales.  Per column the lane dots from c8 (-8 * the
 * block's activation sum: Q4_0's offset) up.  NEON's int16 sums take the 8
 * products of a byte position over u, each at most 15 * 128: 15360 < 2^15,
 * exact. */
#define QUARTET_NEON(name, TARGET, DOT)                                                                     \
    OKV_NEON_INLINE TARGET void name(const uint8x16_t wv[4], float32x4_t dw, const block_act_q8_0x16 *const *x, \
                                     const int t, const int NC, float32x4_t (*acc)[4]) {                    \
        const uint8x16_t low4 = vdupq_n_u8(0x0F);                                                           \
        int8x16_t lo[4], hi[4];                                                                             \
        UNROLL for (int u = 0; u < 4; u++) {                                                                \
            lo[u] = vreinterpretq_s8_u8(vandq_u8(wv[u], low4));                                             \
            hi[u] = vreinterpretq_s8_u8(vshrq_n_u8(wv[u], 4));                                              \
        }                                                                                                   \
        UNROLL for (int j = 0; j < NC; j++) {                                                               \
            int32x4_t p = vld1q_s32(x[j]->c8 + 4 * t);                                                      \
            OKV_X16_QUARTET_DOTS_NEON(p, lo, hi, x[j]->qs, t, DOT);                                         \
            acc[j][t] = vfmaq_f32(acc[j][t], vcvtq_f32_s32(p), vmulq_f32(dw, vld1q_f32(x[j]->d + 4 * t)));  \
        }                                                                                                   \
    }

QUARTET_NEON(quartet_neon, OKV_TARGET_NEON, 0)
QUARTET_NEON(quartet_dotprod, OKV_TARGET_DOTPROD, 1)

/* Per row: the whole groups, then the compact one's quartets in place: its
 * whole ones as a whole group's, the partial one's lanes and scales
 * one by one (the rest zero), and the quartets past it left out, as their
 * lanes' FMAs would add +0 to an accumulator that is never -0 (it starts at
 * +0, and a sum of multiples of 2^-149 that cancels is +0): the same bits. */
#define TILE_NEON(name, TARGET, QUARTET)                                                                    \
    OKV_NEON_INLINE TARGET void name(const okv_mm_ctx *c, int64_t r0, const int NR, int64_t c0, const int NC) { \
        TILE_SETUP();                                                                                       \
        (void)ng;                                                                                           \
        const int64_t nw = c->k / OKV_X16_VALUES;                                                           \
        const int nt = okv_q4_0x16_tail_blocks(c->k);                                                       \
        const block_act_q8_0x16 *x[OKV_X16_MAX_COLS];                                                       \
        for (int r = 0; r < NR; r++) {                                                                      \
            float32x4_t acc[OKV_X16_MAX_COLS][4];                                                           \
            UNROLL for (int j = 0; j < NC; j++) UNROLL for (int t = 0; t < 4; t++) acc[j][t] = vdupq_n_f32(0.0f); \
            for (int64_t g = 0; g < nw; g++) {                                                              \
                const block_q4_0x16 *w = wr[r] + g;                                                         \
                __builtin_prefetch((const char *)w + OKV_X16_AHEAD);                                        \
                __builtin_prefetch((const char *)w + OKV_X16_AHEAD + 160);                                  \
                UNROLL for (int j = 0; j < NC; j++) x[j] = xs[j] + g;                                       \
                UNROLL for (int t = 0; t < 4; t++) {                                                        \
                    uint8x16_t wv[4];                                                                       \
                    UNROLL for (int u = 0; u < 4; u++) wv[u] = vld1q_u8(w->qs[u] + 16 * t);                 \
                    QUARTET(wv, okv_x16_f16x4_neon(w->d + 4 * t), x, t, NC, acc);                           \
                }                                                                                           \
            }                                                                                               \
            const uint8_t *tl = (const uint8_t *)(wr[r] + nw);                                              \
            const okv_f16 *dt = (const okv_f16 *)(const void *)tl;                                          \
            UNROLL for (int j = 0; j < NC; j++) x[j] = xs[j] + nw;                                          \
            UNROLL for (int t = 0; t < 4; t++) {                                                            \
                const int nl = nt - 4 * t; /* the quartet's blocks */                                       \
                if (nl <= 0) break;                                                                         \
                uint8x16_t wv[4];                                                                           \
                if (nl >= 4) {                                                                              \
                    UNROLL for (int u = 0; u < 4; u++) wv[u] = vld1q_u8(tl + 2 * nt + 4 * nt * u + 16 * t); \
                    QUARTET(wv, okv_x16_f16x4_neon(dt + 4 * t), x, t, NC, acc);                             \
                } else {                                                                                    \
                    UNROLL for (int u = 0; u < 4; u++) wv[u] = lanes_neon(tl + 2 * nt + 4 * nt * u + 16 * t, nl); \
                    QUARTET(wv, scales_neon(dt + 4 * t, nl), x, t, NC, acc);                                \
                }                                                                                           \
            }                                                                                               \
            UNROLL for (int j = 0; j < NC; j++) c->y[(c0 + j) * c->rows + r0 + r] = okv_x16_sum16_neon(acc[j]); \
        }                                                                                                   \
    }

TILE_NEON(tile_neon, OKV_TARGET_NEON, quartet_neon)
TILE_NEON(tile_dotprod, OKV_TARGET_DOTPROD, quartet_dotprod)
OKV_X16_TILE_ENTRY(OKV_TARGET_NEON, tile_neon, okv_mm_tile_q4_0x16_neon)
OKV_X16_TILE_ENTRY(OKV_TARGET_DOTPROD, tile_dotprod, okv_mm_tile_q4_0x16_dotprod)

#endif /* OKV_ARM */
