/* Internal: the aarch64 side of x16.h, for the sixteen-wide layouts'
 * _neon.c files.  A group's 16 lanes are four int32x4 / float32x4
 * registers, quartet t = lanes 4t .. 4t + 3 = bytes 16t .. 16t + 15 of each
 * 64-byte vector (four bytes per lane, as on x86).
 *
 * The integer lane dots are exact at every level:
 *  - DOTPROD: one SDOT per 16 products, four per lane, straight into the
 *    lane's int32;
 *  - NEON (ARMv8.0): SMULL/SMLAL into int16 (what fits: see each kernel),
 *    then pairwise widening adds (SADDLP/SADALP) and one ADDP, which put
 *    each lane's four bytes' sums back together.
 * The float work is the scalar kernel's, lane by lane (FCVTL for the f16
 * scales, FMUL, SCVTF, FMLA = fmaf), and the lanes are summed in x16.h's
 * order, so every level gives the scalar kernel's bits. */
#ifndef OKV_KERNELS_X16_NEON_H
#define OKV_KERNELS_X16_NEON_H

#include "kernels/cpu.h"

#if defined(OKV_ARM)
#include <arm_neon.h>
#include <string.h>

#include "kernels/f16.h"
#include "kernels/x16.h"

#define OKV_NEON_INLINE static inline __attribute__((always_inline))

/* okv_x16_sum16 of the four quartets: lanes i + 8, then i + 4, then
 * (0 + 2) + (1 + 3). */
OKV_NEON_INLINE float okv_x16_sum16_neon(const float32x4_t a[4]) {
    const float32x4_t s4 = vaddq_f32(vaddq_f32(a[0], a[2]), vaddq_f32(a[1], a[3]));
    return vpadds_f32(vadd_f32(vget_low_f32(s4), vget_high_f32(s4)));
}

/* Four f16 scales to f32 (exact). */
OKV_NEON_INLINE float32x4_t okv_x16_f16x4_neon(const okv_f16 *h) {
    return vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(h)));
}

/* Four bytes from p in the low half of a vector (the high half repeats
 * them): a quartet's 8-bit scales. */
OKV_NEON_INLINE uint8x8_t okv_x16_bytes4_neon(const void *p) {
    uint32_t v;
    memcpy(&v, p, sizeof v);
    return vreinterpret_u8_u32(vdup_n_u32(v));
}

/* The int16 sums of products of bytes 0..7 (lo) and 8..15 (hi) of one
 * quartet: s += w * x, byte by byte (SMLAL, SMLAL2). */
OKV_NEON_INLINE void okv_x16_mlal_neon(int16x8_t *lo, int16x8_t *hi, int8x16_t w, int8x16_t x) {
    *lo = vmlal_s8(*lo, vget_low_s8(w), vget_low_s8(x));
    *hi = vmlal_high_s8(*hi, w, x);
}

/* The four lane sums of a quartet's int32 pair sums (SADDLP/SADALP of its
 * bytes 0..7 into lo, 8..15 into hi): lane 4t + l has bytes 4l .. 4l + 3. */
OKV_NEON_INLINE int32x4_t okv_x16_lanes_neon(int32x4_t lo, int32x4_t hi) { return vpaddq_s32(lo, hi); }

/* p (int32x4_t) += quartet t's lane dots of a 4-bit-vector layout: the
 * weights lo[u] and hi[u] (int8x16_t: the low and high nibbles' values of
 * qs[u], however made) by one column's activation vectors x[2u] and
 * x[2u + 1] (int8_t [8][64]).  DOT: SDOT; else int16 sums of the 8
 * products of each byte position (exact while 8 |w| |x| < 2^15: every
 * caller says why its weights keep to that), then the lane sums.  A
 * macro, as SDOT needs the caller's target. */
#define OKV_X16_QUARTET_DOTS_NEON(p, lo, hi, x, t, DOT)                                      \
    do {                                                                                     \
        if (DOT) {                                                                           \
            UNROLL for (int u_ = 0; u_ < 4; u_++) {                                          \
                (p) = vdotq_s32((p), (lo)[u_], vld1q_s8((x)[2 * u_] + 16 * (t)));            \
                (p) = vdotq_s32((p), (hi)[u_], vld1q_s8((x)[2 * u_ + 1] + 16 * (t)));        \
            }                                                                                \
        } else {                                                                             \
            int16x8_t sl_ = vdupq_n_s16(0), sh_ = vdupq_n_s16(0);                            \
            UNROLL for (int u_ = 0; u_ < 4; u_++) {                                          \
                okv_x16_mlal_neon(&sl_, &sh_, (lo)[u_], vld1q_s8((x)[2 * u_] + 16 * (t)));   \
                okv_x16_mlal_neon(&sl_, &sh_, (hi)[u_], vld1q_s8((x)[2 * u_ + 1] + 16 * (t))); \
            }                                                                                \
            (p) = vaddq_s32((p), okv_x16_lanes_neon(vpaddlq_s16(sl_), vpaddlq_s16(sh_)));    \
        }                                                                                    \
    } while (0)

#endif /* OKV_ARM */
#endif
