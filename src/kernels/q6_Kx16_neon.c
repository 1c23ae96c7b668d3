/* Q6_K sixteen sub-blocks wide (q6_Kx16.h), aarch64: the NEON (ARMv8.0)
 * and DOTPROD kernels beside q6_Kx16.c's scalar and x86 ones, the same
 * operations in the same order (x16_neon.h), so the same bits. */
#include "kernels/cpu.h"

#if defined(OKV_ARM)
#include "kernels/matmul_impl.h"
#include "kernels/q6_Kx16.h"
#include "kernels/x16_neon.h"

#define TILE_SETUP() OKV_X16_TILE_SETUP(block_q6_Kx16, block_act_q8_Kx16s, c->k / OKV_QK_K)

/* Per row and super-block, per quartet t: the four value vectors (0..63:
 * nibble | bits 2v, 2v + 1 of qh << 4, as q6_Kx16.c's Q6_VALUES), then per
 * column the lane dots from c32 (-32 * the sub-block's activation sum: the
 * offset), and acc = fma(dot, (d sc) dx, acc).  NEON's int16 sums take the
 * 4 products of a byte position, each at most 63 * 127: 32004 < 2^15. */
#define TILE_NEON(name, TARGET, DOT)                                                                        \
    OKV_NEON_INLINE TARGET void name(const okv_mm_ctx *c, int64_t r0, const int NR, int64_t c0, const int NC) { \
        TILE_SETUP();                                                                                       \
        const uint8x16_t m4 = vdupq_n_u8(0x0F), m30 = vdupq_n_u8(0x30);                                    \
        for (int r = 0; r < NR; r++) {                                                                      \
            float32x4_t acc[OKV_X16_MAX_COLS][4];                                                           \
            UNROLL for (int j = 0; j < NC; j++) UNROLL for (int t = 0; t < 4; t++) acc[j][t] = vdupq_n_f32(0.0f); \
            for (int64_t g = 0; g < ng; g++) {                                                              \
                const block_q6_Kx16 *w = wr[r] + g;                                                         \
                __builtin_prefetch((const char *)w + OKV_X16_AHEAD);                                        \
                __builtin_prefetch((const char *)w + OKV_X16_AHEAD + 128);                                  \
                const float32x4_t d = vdupq_laneq_f32(vcvt_f32_f16(vreinterpret_f16_u16(vld1_dup_u16(&w->d))), 0); \
                UNROLL for (int t = 0; t < 4; t++) {                                                        \
                    const uint8x16_t l0 = vld1q_u8(w->ql[0] + 16 * t), l1 = vld1q_u8(w->ql[1] + 16 * t);    \
                    const uint8x16_t h = vld1q_u8(w->qh + 16 * t);                                          \
                    int8x16_t wv[4];                                                                        \
                    wv[0] = vreinterpretq_s8_u8(vorrq_u8(vandq_u8(l0, m4), vandq_u8(vshlq_n_u8(h, 4), m30))); \
                    wv[1] = vreinterpretq_s8_u8(vorrq_u8(vandq_u8(l1, m4), vandq_u8(vshlq_n_u8(h, 2), m30))); \
                    wv[2] = vreinterpretq_s8_u8(vorrq_u8(vshrq_n_u8(l0, 4), vandq_u8(h, m30)));             \
                    wv[3] = vreinterpretq_s8_u8(vorrq_u8(vshrq_n_u8(l1, 4), vandq_u8(vshrq_n_u8(h, 2), m30))); \
                    const int8x8_t sc = vreinterpret_s8_u8(okv_x16_bytes4_neon(w->sc + 4 * t));              \
                    const float32x4_t dsc = vmulq_f32(d, vcvtq_f32_s32(vmovl_s16(vget_low_s16(vmovl_s8(sc))))); \
                    UNROLL for (int j = 0; j < NC; j++) {                                                   \
                        const block_act_q8_Kx16s *x = xs[j] + g;                                            \
                        int32x4_t p = vld1q_s32(x->c32 + 4 * t);                                            \
                        if (DOT) {                                                                          \
                            UNROLL for (int v = 0; v < 4; v++) p = vdotq_s32(p, wv[v], vld1q_s8(x->qs[v] + 16 * t)); \
                        } else {                                                                            \
                            int16x8_t sl = vdupq_n_s16(0), sh = vdupq_n_s16(0);                             \
                            UNROLL for (int v = 0; v < 4; v++)                                              \
                                okv_x16_mlal_neon(&sl, &sh, wv[v], vld1q_s8(x->qs[v] + 16 * t));            \
                            p = vaddq_s32(p, okv_x16_lanes_neon(vpaddlq_s16(sl), vpaddlq_s16(sh)));         \
                        }                                                                                   \
                        acc[j][t] = vfmaq_f32(acc[j][t], vcvtq_f32_s32(p), vmulq_f32(dsc, vld1q_f32(x->d + 4 * t))); \
                    }                                                                                       \
                }                                                                                           \
            }                                                                                               \
            UNROLL for (int j = 0; j < NC; j++) c->y[(c0 + j) * c->rows + r0 + r] = okv_x16_sum16_neon(acc[j]); \
        }                                                                                                   \
    }

TILE_NEON(tile_neon, OKV_TARGET_NEON, 0)
TILE_NEON(tile_dotprod, OKV_TARGET_DOTPROD, 1)
OKV_X16_TILE_ENTRY(OKV_TARGET_NEON, tile_neon, okv_mm_tile_q6_Kx16_neon)
OKV_X16_TILE_ENTRY(OKV_TARGET_DOTPROD, tile_dotprod, okv_mm_tile_q6_Kx16_dotprod)

#endif /* OKV_ARM */
