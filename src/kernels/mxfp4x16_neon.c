/* MXFP4 sixteen blocks wide (mxfp4x16.h), aarch64: the NEON (ARMv8.0) and
 * DOTPROD kernels beside mxfp4x16.c's scalar and x86 ones, q4_0x16_neon.c's
 * loops with the values looked up (TBL from okv_mxfp4_values) instead of
 * offset by 8, so the same operations in the same order (x16_neon.h), so
 * the same bits. */
#include "kernels/cpu.h"

#if defined(OKV_ARM)
#include "kernels/matmul_impl.h"
#include "kernels/mxfp4x16.h"
#include "kernels/quant.h"
#include "kernels/x16_neon.h"

#define TILE_SETUP() OKV_X16_TILE_SETUP(block_mxfp4x16, block_act_q8_0x16, okv_x16_groups(c->k))

/* okv_e8m0_half of four exponent bytes: (e - 1) << 23, or for e < 2 the
 * subnormal 0x00200000 << e. */
OKV_NEON_INLINE float32x4_t scales4(const uint8_t *e) {
    const uint32x4_t e32 = vmovl_u16(vget_low_u16(vmovl_u8(okv_x16_bytes4_neon(e))));
    const uint32x4_t normal = vshlq_n_u32(vsubq_u32(e32, vdupq_n_u32(1)), 23);
    const uint32x4_t sub = vshlq_u32(vdupq_n_u32(0x00200000), vreinterpretq_s32_u32(e32));
    return vreinterpretq_f32_u32(vbslq_u32(vcltq_u32(e32, vdupq_n_u32(2)), sub, normal));
}

/* Per row and group, per quartet t: the looked-up values of the four weight
 * vectors, then per column its lane dots.  NEON's int16 sums take the 8
 * products of a byte position over u, each at most 12 * 127: 12192 < 2^15,
 * exact. */
#define TILE_NEON(name, TARGET, DOT)                                                                        \
    OKV_NEON_INLINE TARGET void name(const okv_mm_ctx *c, int64_t r0, const int NR, int64_t c0, const int NC) { \
        TILE_SETUP();                                                                                       \
        const uint8x16_t low4 = vdupq_n_u8(0x0F);                                                           \
        const int8x16_t tab = vld1q_s8(okv_mxfp4_values);                                                   \
        const int64_t nw = c->k / OKV_X16_VALUES;                                                           \
        const int nt = okv_mxfp4x16_tail_blocks(c->k);                                                      \
        block_mxfp4x16 tmp;                                                                                 \
        if (nt) memset(&tmp, 0, sizeof tmp);                                                                \
        for (int r = 0; r < NR; r++) {                                                                      \
            float32x4_t acc[OKV_X16_MAX_COLS][4];                                                           \
            UNROLL for (int j = 0; j < NC; j++) UNROLL for (int t = 0; t < 4; t++) acc[j][t] = vdupq_n_f32(0.0f); \
            for (int64_t g = 0; g < ng; g++) {                                                              \
                const block_mxfp4x16 *w = okv_mxfp4x16_group(wr[r], g, nw, nt, &tmp);                      \
                __builtin_prefetch((const char *)(wr[r] + g) + OKV_X16_AHEAD);                              \
                __builtin_prefetch((const char *)(wr[r] + g) + OKV_X16_AHEAD + 144);                        \
                UNROLL for (int t = 0; t < 4; t++) {                                                        \
                    int8x16_t lo[4], hi[4];                                                                 \
                    UNROLL for (int u = 0; u < 4; u++) {                                                    \
                        const uint8x16_t wv = vld1q_u8(w->qs[u] + 16 * t);                                  \
                        lo[u] = vqtbl1q_s8(tab, vandq_u8(wv, low4));                                        \
                        hi[u] = vqtbl1q_s8(tab, vshrq_n_u8(wv, 4));                                         \
                    }                                                                                       \
                    const float32x4_t dw = scales4(w->e + 4 * t);                                           \
                    UNROLL for (int j = 0; j < NC; j++) {                                                   \
                        const block_act_q8_0x16 *x = xs[j] + g;                                             \
                        int32x4_t p = vdupq_n_s32(0);                                                       \
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
OKV_X16_TILE_ENTRY(OKV_TARGET_NEON, tile_neon, okv_mm_tile_mxfp4x16_neon)
OKV_X16_TILE_ENTRY(OKV_TARGET_DOTPROD, tile_dotprod, okv_mm_tile_mxfp4x16_dotprod)

#endif /* OKV_ARM */
