/* Q4_K and Q5_K sixteen sub-blocks wide (q4_Kx16.h), aarch64: the NEON
 * (ARMv8.0) and DOTPROD kernels beside q4_Kx16.c's scalar and x86 ones, the
 * same operations in the same order (x16_neon.h), so the same bits. */
#include "kernels/cpu.h"

#if defined(OKV_ARM)
#include <stddef.h>

#include "kernels/matmul_impl.h"
#include "kernels/q4_Kx16.h"
#include "kernels/x16_neon.h"

_Static_assert(offsetof(block_q4_Kx16, dmin) == offsetof(block_q4_Kx16, d) + 2 * sizeof(okv_f16),
               "the kernels read d and dmin as four adjacent f16s");

/* Lane quartet t's d sc (or dmin m): the super-block's scale times the four
 * 6-bit integers, exact in f32 as in the scalar kernel. */
OKV_NEON_INLINE float32x4_t scales4(float d, const uint8_t *s) {
    const uint32x4_t v = vmovl_u16(vget_low_u16(vmovl_u8(okv_x16_bytes4_neon(s))));
    return vmulq_f32(vdupq_n_f32(d), vcvtq_f32_u32(v));
}

/* Quartet t (lanes 4t .. 4t + 3) of activation group g for every column:
 * the weights (nibbles of QS[u] + 16 t, with FIVE the fifth bit from QH +
 * 16 t: bit u onto the low nibble of qs[u], bit 4 + u onto its high one),
 * then per column the lane dots, and acc = fma(dot, d sc dx, acc),
 * acc = fma(-dmin m, xm, acc) as the scalar kernel, with D and DMIN the
 * super-block's scales (floats) and SC, MN its lanes' 6-bit scales and mins
 * from lane 4t.  NEON's int16 sums take the 8 products of a byte position,
 * each at most 31 * 127: 31496 < 2^15, exact.  A macro, as QS is a group's
 * [4][64] or a half group's [4][32]. */
#define QUARTET_NEON(QS, QH, D, DMIN, SC, MN, t, DOT, FIVE)                                                  \
    do {                                                                                                    \
        int8x16_t lo[4], hi[4];                                                                             \
        const uint8x16_t hb = (FIVE) ? vld1q_u8((QH) + 16 * (t)) : vdupq_n_u8(0);                          \
        UNROLL for (int u = 0; u < 4; u++) {                                                                \
            const uint8x16_t wv = vld1q_u8((QS)[u] + 16 * (t));                                             \
            uint8x16_t l4 = vandq_u8(wv, low4), h4 = vshrq_n_u8(wv, 4);                                     \
            if (FIVE) {                                                                                     \
                l4 = vorrq_u8(l4, vandq_u8(vshlq_u8(hb, vdupq_n_s8((int8_t)(4 - u))), bit4));               \
                h4 = vorrq_u8(h4, vandq_u8(vshlq_u8(hb, vdupq_n_s8((int8_t)-u)), bit4));                    \
            }                                                                                               \
            lo[u] = vreinterpretq_s8_u8(l4);                                                                \
            hi[u] = vreinterpretq_s8_u8(h4);                                                                \
        }                                                                                                   \
        const float32x4_t dsc = scales4(D, SC), dm = scales4(DMIN, MN);                                     \
        UNROLL for (int j = 0; j < NC; j++) {                                                               \
            const block_act_q8_Kx16 *x = xs[j] + g;                                                         \
            int32x4_t p;                                                                                    \
            if (DOT) {                                                                                      \
                p = vdupq_n_s32(0);                                                                         \
                UNROLL for (int u = 0; u < 4; u++) {                                                        \
                    p = vdotq_s32(p, lo[u], vld1q_s8(x->qs[2 * u] + 16 * (t)));                             \
                    p = vdotq_s32(p, hi[u], vld1q_s8(x->qs[2 * u + 1] + 16 * (t)));                         \
                }                                                                                           \
            } else {                                                                                        \
                int16x8_t sl = vdupq_n_s16(0), sh = vdupq_n_s16(0);                                         \
                UNROLL for (int u = 0; u < 4; u++) {                                                        \
                    okv_x16_mlal_neon(&sl, &sh, lo[u], vld1q_s8(x->qs[2 * u] + 16 * (t)));                  \
                    okv_x16_mlal_neon(&sl, &sh, hi[u], vld1q_s8(x->qs[2 * u + 1] + 16 * (t)));              \
                }                                                                                           \
                p = okv_x16_lanes_neon(vpaddlq_s16(sl), vpaddlq_s16(sh));                                   \
            }                                                                                               \
            acc[j][t] = vfmaq_f32(acc[j][t], vcvtq_f32_s32(p), vmulq_f32(dsc, vld1q_f32(x->d + 4 * (t))));  \
            acc[j][t] = vfmsq_f32(acc[j][t], dm, vld1q_f32(x->xm + 4 * (t)));                               \
        }                                                                                                   \
    } while (0)

/* Per row: the whole groups' four quartets, then a half group's first two
 * (lanes 0-7; lanes 8-15 left as they are: q4_Kx16.h). */
#define TILE_NEON(name, TARGET, DOT, FIVE)                                                                  \
    OKV_NEON_INLINE TARGET void name(const okv_mm_ctx *c, int64_t r0, const int NR, int64_t c0, const int NC) { \
        const size_t gs = (FIVE) ? sizeof(block_q5_Kx16) : sizeof(block_q4_Kx16);                          \
        const int64_t nw = okv_kx16_whole(c->k);                                                            \
        OKV_X16_TILE_SETUP(uint8_t, block_act_q8_Kx16, okv_x16_groups(c->k));                               \
        const uint8x16_t low4 = vdupq_n_u8(0x0F), bit4 = vdupq_n_u8(0x10);                                  \
        for (int r = 0; r < NR; r++) {                                                                      \
            float32x4_t acc[OKV_X16_MAX_COLS][4];                                                           \
            UNROLL for (int j = 0; j < NC; j++) UNROLL for (int t = 0; t < 4; t++) acc[j][t] = vdupq_n_f32(0.0f); \
            for (int64_t g = 0; g < nw; g++) {                                                              \
                const block_q4_Kx16 *w = (const block_q4_Kx16 *)(wr[r] + g * gs);                          \
                const uint8_t *qh = (FIVE) ? ((const block_q5_Kx16 *)w)->qh : NULL;                        \
                for (size_t l = 0; l < gs; l += 128) __builtin_prefetch((const char *)w + OKV_X16_AHEAD + l); \
                float dd[4]; /* d[0], d[1], dmin[0], dmin[1]: adjacent f16s */                               \
                vst1q_f32(dd, okv_x16_f16x4_neon(w->d));                                                    \
                UNROLL for (int t = 0; t < 4; t++)                                                          \
                    QUARTET_NEON(w->qs, qh, dd[t / 2], dd[2 + t / 2], w->sc + 4 * t, w->m + 4 * t, t, DOT, FIVE); \
            }                                                                                               \
            if (nw < ng) {                                                                                  \
                const int64_t g = nw;                                                                       \
                const block_q4_Kx8 *h = (const block_q4_Kx8 *)(wr[r] + nw * gs);                           \
                const uint8_t *qh = (FIVE) ? ((const block_q5_Kx8 *)h)->qh : NULL;                         \
                for (size_t l = 0; l < gs / 2; l += 128) __builtin_prefetch((const char *)h + OKV_X16_AHEAD + l); \
                const float d = okv_f16_to_f32(h->d), dmin = okv_f16_to_f32(h->dmin);                      \
                UNROLL for (int t = 0; t < 2; t++)                                                          \
                    QUARTET_NEON(h->qs, qh, d, dmin, h->sc + 4 * t, h->m + 4 * t, t, DOT, FIVE);            \
            }                                                                                               \
            UNROLL for (int j = 0; j < NC; j++) c->y[(c0 + j) * c->rows + r0 + r] = okv_x16_sum16_neon(acc[j]); \
        }                                                                                                   \
    }

TILE_NEON(tile4_neon, OKV_TARGET_NEON, 0, 0)
TILE_NEON(tile4_dotprod, OKV_TARGET_DOTPROD, 1, 0)
TILE_NEON(tile5_neon, OKV_TARGET_NEON, 0, 1)
TILE_NEON(tile5_dotprod, OKV_TARGET_DOTPROD, 1, 1)
OKV_X16_TILE_ENTRY(OKV_TARGET_NEON, tile4_neon, okv_mm_tile_q4_Kx16_neon)
OKV_X16_TILE_ENTRY(OKV_TARGET_DOTPROD, tile4_dotprod, okv_mm_tile_q4_Kx16_dotprod)
OKV_X16_TILE_ENTRY(OKV_TARGET_NEON, tile5_neon, okv_mm_tile_q5_Kx16_neon)
OKV_X16_TILE_ENTRY(OKV_TARGET_DOTPROD, tile5_dotprod, okv_mm_tile_q5_Kx16_dotprod)

#endif /* OKV_ARM */
