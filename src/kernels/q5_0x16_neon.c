/* Q5_0 sixteen blocks wide (q5_0x16.h), aarch64: the NEON (ARMv8.0) and
 * DOTPROD kernels beside q5_0x16.c's scalar and x86 ones, the same
 * operations in the same order (x16_neon.h), so the same bits. */
#include "kernels/cpu.h"

#if defined(OKV_ARM)
#include "kernels/matmul_impl.h"
#include "kernels/q5_0x16.h"
#include "kernels/x16_neon.h"

#define TILE_SETUP() OKV_X16_TILE_SETUP(block_q5_0x16, block_act_q8_0x16, okv_x16_groups(c->k))

/* q4_0x16_neon.c's tile with the fifth bits joined to the nibbles (bit u
 * of a lane's qh byte onto the low nibble of qs[u], bit 4 + u onto the
 * high one) and the dots starting from 2 c8 (Q5_0's offset of 16).  NEON's
 * int16 sums take the 8 products of a byte position over u, each at most
 * 31 * 128: 31744 < 2^15, exact. */
#define TILE_NEON(name, TARGET, DOT)                                                                        \
    OKV_NEON_INLINE TARGET void name(const okv_mm_ctx *c, int64_t r0, const int NR, int64_t c0, const int NC) { \
        TILE_SETUP();                                                                                       \
        const int64_t nw = c->k / OKV_X16_VALUES;                                                           \
        const int nt = okv_q5_0x16_tail_blocks(c->k);                                                       \
        block_q5_0x16 tmp;                                                                                  \
        if (nt) memset(&tmp, 0, sizeof tmp);                                                                \
        const uint8x16_t low4 = vdupq_n_u8(0x0F), bit4 = vdupq_n_u8(0x10);                                  \
        for (int r = 0; r < NR; r++) {                                                                      \
            float32x4_t acc[OKV_X16_MAX_COLS][4];                                                           \
            UNROLL for (int j = 0; j < NC; j++) UNROLL for (int t = 0; t < 4; t++) acc[j][t] = vdupq_n_f32(0.0f); \
            for (int64_t g = 0; g < ng; g++) {                                                              \
                const block_q5_0x16 *w = okv_q5_0x16_group(wr[r], g, nw, nt, &tmp);                         \
                __builtin_prefetch((const char *)(wr[r] + g) + OKV_X16_AHEAD);                              \
                __builtin_prefetch((const char *)(wr[r] + g) + OKV_X16_AHEAD + 176);                        \
                UNROLL for (int t = 0; t < 4; t++) {                                                        \
                    const uint8x16_t hb = vld1q_u8(w->qh + 16 * t);                                         \
                    int8x16_t lo[4], hi[4];                                                                 \
                    UNROLL for (int u = 0; u < 4; u++) {                                                    \
                        const uint8x16_t wv = vld1q_u8(w->qs[u] + 16 * t);                                  \
                        lo[u] = vreinterpretq_s8_u8(vorrq_u8(vandq_u8(wv, low4),                            \
                                                             vandq_u8(vshlq_u8(hb, vdupq_n_s8((int8_t)(4 - u))), bit4))); \
                        hi[u] = vreinterpretq_s8_u8(vorrq_u8(vshrq_n_u8(wv, 4),                             \
                                                             vandq_u8(vshlq_u8(hb, vdupq_n_s8((int8_t)-u)), bit4))); \
                    }                                                                                       \
                    const float32x4_t dw = okv_x16_f16x4_neon(w->d + 4 * t);                                \
                    UNROLL for (int j = 0; j < NC; j++) {                                                   \
                        const block_act_q8_0x16 *x = xs[j] + g;                                             \
                        int32x4_t p = vshlq_n_s32(vld1q_s32(x->c8 + 4 * t), 1);                             \
                        OKV_X16_QUARTET_DOTS_NEON(p, lo, hi, x->qs, t, DOT);                                \
                        acc[j][t] = vfmaq_f32(acc[j][t], vcvtq_f32_s32(p), vmulq_f32(dw, vld1q_f32(x->d + 4 * t))); \
                    }                                                                                       \
                }                                                                                           \
            }                                                                                               \
            UNROLL for (int j = 0; j < NC; j++) c->y[(c0 + j) * c->rows + r0 + r] = okv_x16_sum16_neon(acc[j]); \
        }                                                                                                   \
    }

TILE_NEON(tile_neon, OKV_TARGET_NEON, 0)
TILE_NEON(tile_dotprod, OKV_TARGET_DOTPROD, 1)
OKV_X16_TILE_ENTRY(OKV_TARGET_NEON, tile_neon, okv_mm_tile_q5_0x16_neon)
OKV_X16_TILE_ENTRY(OKV_TARGET_DOTPROD, tile_dotprod, okv_mm_tile_q5_0x16_dotprod)

#endif /* OKV_ARM */
