/* Q8_0 sixteen blocks wide (q8_0x16.h), aarch64: the NEON (ARMv8.0) and
 * DOTPROD kernels beside q8_0x16.c's scalar and x86 ones, the same
 * operations in the same order (x16_neon.h), so the same bits. */
#include "kernels/cpu.h"

#if defined(OKV_ARM)
#include "kernels/matmul_impl.h"
#include "kernels/q8_0x16.h"
#include "kernels/x16_neon.h"

#define TILE_SETUP() OKV_X16_TILE_SETUP(block_q8_0x16, block_act_q8_0x16, okv_x16_groups(c->k))

/* Per row and group (the compact last one copied into a zeroed group), per
 * quartet t: the eight weight vectors, then per column the lane dots.
 * Signed times signed needs no offset (SDOT and SMLAL take both signs).
 * NEON's int16 sums take two products, at most 2 * 128 * 127 (the
 * activations are within +-127), before SADALP widens them. */
#define TILE_NEON(name, TARGET, DOT)                                                                        \
    OKV_NEON_INLINE TARGET void name(const okv_mm_ctx *c, int64_t r0, const int NR, int64_t c0, const int NC) { \
        TILE_SETUP();                                                                                       \
        const int64_t nw = c->k / OKV_X16_VALUES;                                                           \
        const int nt = okv_q8_0x16_tail_blocks(c->k);                                                       \
        block_q8_0x16 tmp;                                                                                  \
        if (nt) memset(&tmp, 0, sizeof tmp);                                                                \
        for (int r = 0; r < NR; r++) {                                                                      \
            float32x4_t acc[OKV_X16_MAX_COLS][4];                                                           \
            UNROLL for (int j = 0; j < NC; j++) UNROLL for (int t = 0; t < 4; t++) acc[j][t] = vdupq_n_f32(0.0f); \
            for (int64_t g = 0; g < ng; g++) {                                                              \
                const block_q8_0x16 *w = okv_q8_0x16_group(wr[r], g, nw, nt, &tmp);                        \
                for (int l = 0; l < 576; l += 192)                                                          \
                    __builtin_prefetch((const char *)(wr[r] + g) + OKV_X16_AHEAD + l);                      \
                UNROLL for (int t = 0; t < 4; t++) {                                                        \
                    int8x16_t wv[8];                                                                        \
                    UNROLL for (int v = 0; v < 8; v++) wv[v] = vld1q_s8(w->qs[v] + 16 * t);                 \
                    const float32x4_t dw = okv_x16_f16x4_neon(w->d + 4 * t);                                \
                    UNROLL for (int j = 0; j < NC; j++) {                                                   \
                        const block_act_q8_0x16 *x = xs[j] + g;                                             \
                        int32x4_t p;                                                                        \
                        if (DOT) {                                                                          \
                            p = vdupq_n_s32(0);                                                             \
                            UNROLL for (int v = 0; v < 8; v++) p = vdotq_s32(p, wv[v], vld1q_s8(x->qs[v] + 16 * t)); \
                        } else {                                                                            \
                            int32x4_t pl = vdupq_n_s32(0), ph = vdupq_n_s32(0);                             \
                            UNROLL for (int v = 0; v < 8; v += 2) {                                         \
                                int16x8_t sl = vdupq_n_s16(0), sh = vdupq_n_s16(0);                         \
                                okv_x16_mlal_neon(&sl, &sh, wv[v], vld1q_s8(x->qs[v] + 16 * t));            \
                                okv_x16_mlal_neon(&sl, &sh, wv[v + 1], vld1q_s8(x->qs[v + 1] + 16 * t));    \
                                pl = vpadalq_s16(pl, sl);                                                   \
                                ph = vpadalq_s16(ph, sh);                                                   \
                            }                                                                               \
                            p = okv_x16_lanes_neon(pl, ph);                                                 \
                        }                                                                                   \
                        acc[j][t] = vfmaq_f32(acc[j][t], vcvtq_f32_s32(p), vmulq_f32(dw, vld1q_f32(x->d + 4 * t))); \
                    }                                                                                       \
                }                                                                                           \
            }                                                                                               \
            UNROLL for (int j = 0; j < NC; j++) c->y[(c0 + j) * c->rows + r0 + r] = okv_x16_sum16_neon(acc[j]); \
        }                                                                                                   \
    }

TILE_NEON(tile_neon, OKV_TARGET_NEON, 0)
TILE_NEON(tile_dotprod, OKV_TARGET_DOTPROD, 1)
OKV_X16_TILE_ENTRY(OKV_TARGET_NEON, tile_neon, okv_mm_tile_q8_0x16_neon)
OKV_X16_TILE_ENTRY(OKV_TARGET_DOTPROD, tile_dotprod, okv_mm_tile_q8_0x16_dotprod)

#endif /* OKV_ARM */
