/* aarch64 NEON attention kernels (4 lanes, 32 registers), the AVX2 file's
 * structure: scores in tiles of queries x rows, the softmax a block at a
 * time with the same exp2 polynomial, the V pass in tiles of queries x
 * head-dim chunks.  Each (query, row) score and each accumulator lane is
 * summed in one order whatever the tile shape, so a query's result does not
 * depend on how many queries share its block (batch invariance). */
#include "attend/attend_impl.h"

#if defined(OKV_ARM)
#include <arm_neon.h>
#include <string.h>

#include "kernels/f16.h"

#define AI static inline __attribute__((always_inline))
#define BR OKV_ATTEND_BR
/* unrolled loops over queries, rows and chunks keep the tiles in registers */
#define UNROLL _Pragma("GCC unroll 8")

/* Elements off .. off+min(n,4) of a row as f32; lanes past n are zero and
 * nothing past the row is read.  full: the caller knows n >= 4. */
AI float32x4_t load4(const void *base, int f16, int64_t off, int32_t n, const int full) {
    if (full || n >= 4) {
        if (f16) return vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16((const uint16_t *)((const okv_f16 *)base + off))));
        return vld1q_f32((const float *)base + off);
    }
    if (n <= 0) return vdupq_n_f32(0.0f);
    if (f16) {
        okv_f16 t[4] = {0};
        memcpy(t, (const okv_f16 *)base + off, (size_t)n * sizeof(okv_f16));
        return vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16((const uint16_t *)t)));
    }
    float t[4] = {0};
    memcpy(t, (const float *)base + off, (size_t)n * sizeof(float));
    return vld1q_f32(t);
}

/* Q queries x 4 rows; acc[q][r] holds lane partial sums over d, reduced
 * (l0 + l1) + (l2 + l3) by two pairwise adds. */
AI void score_tile(const float *qs, int32_t hdp, int32_t nqv, const void *k, int f16, int32_t hd,
                   int32_t nr, int32_t r0, const int Q, const int full, float *S) {
    int64_t roff[4];
    const float *qp[4];
    UNROLL for (int r = 0; r < 4; r++) roff[r] = (int64_t)(r0 + r < nr ? r0 + r : nr - 1) * hd;
    UNROLL for (int q = 0; q < Q; q++) qp[q] = qs + (size_t)(q < nqv ? q : nqv - 1) * hdp;
    float32x4_t acc[4][4];
    UNROLL for (int q = 0; q < Q; q++) UNROLL for (int r = 0; r < 4; r++) acc[q][r] = vdupq_n_f32(0.0f);
    for (int32_t d = 0; d < hd; d += 4) {
        float32x4_t qv[4];
        UNROLL for (int q = 0; q < Q; q++) qv[q] = vld1q_f32(qp[q] + d);
        UNROLL for (int r = 0; r < 4; r++) {
            const float32x4_t kv = load4(k, f16, roff[r] + d, hd - d, full);
            UNROLL for (int q = 0; q < Q; q++) acc[q][r] = vfmaq_f32(acc[q][r], qv[q], kv);
        }
    }
    UNROLL for (int q = 0; q < Q && q < nqv; q++) {
        const float32x4_t sums = vpaddq_f32(vpaddq_f32(acc[q][0], acc[q][1]), vpaddq_f32(acc[q][2], acc[q][3]));
        float *dst = S + (size_t)q * BR + r0;
        if (r0 + 4 <= nr) vst1q_f32(dst, sums);
        else {
            float out[4];
            vst1q_f32(out, sums);
            for (int r = 0; r0 + r < nr; r++) dst[r] = out[r];
        }
    }
}

AI void scores_dt(const float *qs, int32_t nq, int32_t hdp, const void *k, int f16, int32_t hd,
                  int32_t nr, const int full, float *S) {
    int32_t q = 0;
    for (; nq - q >= 3; q += 4)
        for (int32_t r0 = 0; r0 < nr; r0 += 4)
            score_tile(qs + (size_t)q * hdp, hdp, nq - q < 4 ? nq - q : 4, k, f16, hd, nr, r0, 4, full,
                       S + (size_t)q * BR);
    for (; q < nq; q++)
        for (int32_t r0 = 0; r0 < nr; r0 += 4)
            score_tile(qs + (size_t)q * hdp, hdp, 1, k, f16, hd, nr, r0, 1, full, S + (size_t)q * BR);
}

static void scores_neon(const float *qs, int32_t nq, int32_t hdp, const void *k, int f16, int32_t hd,
                        int32_t nr, float *S) {
    if (hd % 4 == 0) {
        if (f16) scores_dt(qs, nq, hdp, k, 1, hd, nr, 1, S);
        else scores_dt(qs, nq, hdp, k, 0, hd, nr, 1, S);
    } else {
        if (f16) scores_dt(qs, nq, hdp, k, 1, hd, nr, 0, S);
        else scores_dt(qs, nq, hdp, k, 0, hd, nr, 0, S);
    }
}

/* 2^x for x <= 0: the AVX2 file's polynomial (degree-7 Taylor on |f| <=
 * 1/2, 2^n in the exponent field, n >= -64), zero below the floor. */
AI float32x4_t exp2_4(float32x4_t x) {
    const float32x4_t floor_ = vdupq_n_f32(OKV_ATTEND_EXP_FLOOR);
    const uint32x4_t keep = vcgeq_f32(x, floor_);
    x = vmaxq_f32(x, floor_);
    const float32x4_t n = vrndnq_f32(x);
    const float32x4_t f = vsubq_f32(x, n);
    float32x4_t p = vdupq_n_f32(1.5252733804059841e-05f);
    p = vfmaq_f32(vdupq_n_f32(1.5403530393381610e-04f), p, f);
    p = vfmaq_f32(vdupq_n_f32(1.3333558146428443e-03f), p, f);
    p = vfmaq_f32(vdupq_n_f32(9.6181291076284772e-03f), p, f);
    p = vfmaq_f32(vdupq_n_f32(5.5504108664821580e-02f), p, f);
    p = vfmaq_f32(vdupq_n_f32(2.4022650695910071e-01f), p, f);
    p = vfmaq_f32(vdupq_n_f32(6.9314718055994531e-01f), p, f);
    p = vfmaq_f32(vdupq_n_f32(1.0f), p, f);
    const int32x4_t e = vshlq_n_s32(vaddq_s32(vcvtq_s32_f32(n), vdupq_n_s32(127)), 23);
    return vreinterpretq_f32_u32(vandq_u32(vreinterpretq_u32_f32(vmulq_f32(p, vreinterpretq_f32_s32(e))), keep));
}

static float softmax_neon(float *s, int32_t lo, int32_t hi, float *m, float *l) {
    const int32x4_t lov = vdupq_n_s32(lo - 1), hiv = vdupq_n_s32(hi + 1);
    const int32_t lane[4] = {0, 1, 2, 3};
    const int32x4_t lanes = vld1q_s32(lane);
    const float32x4_t ninf = vdupq_n_f32(-INFINITY);
    float32x4_t x[BR / 4];
    uint32x4_t vis[BR / 4];
    float32x4_t mx = ninf;
    for (int i = 0; i < BR / 4; i++) {
        const int32x4_t idx = vaddq_s32(lanes, vdupq_n_s32(4 * i));
        vis[i] = vandq_u32(vcgtq_s32(idx, lov), vcgtq_s32(hiv, idx));
        x[i] = vbslq_f32(vis[i], vld1q_f32(s + 4 * i), ninf);
        mx = vmaxq_f32(mx, x[i]);
    }
    const float mb = vmaxvq_f32(mx);
    const float m_new = mb > *m ? mb : *m;
    const float corr = okv_attend_exp2_scalar(*m - m_new);
    const float32x4_t mn = vdupq_n_f32(m_new);
    float32x4_t sum = vdupq_n_f32(0.0f);
    for (int i = 0; i < BR / 4; i++) {
        const float32x4_t p = vreinterpretq_f32_u32(
            vandq_u32(vreinterpretq_u32_f32(exp2_4(vsubq_f32(x[i], mn))), vis[i]));
        vst1q_f32(s + 4 * i, p);
        sum = vaddq_f32(sum, p);
    }
    *l = *l * corr + vaddvq_f32(sum);
    *m = m_new;
    return corr;
}

/* Q queries x C chunks of 4 lanes from d0: scale by corr, then one FMA per
 * row in row order. */
AI void accum_tile(float *acc, int32_t hdp, const float *P, const float *corr, const void *v, int f16,
                   int32_t hd, int32_t nr, int32_t d0, const int Q, const int C, const int full) {
    float32x4_t a[4][8];
    UNROLL for (int q = 0; q < Q; q++)
        UNROLL for (int c = 0; c < C; c++)
            a[q][c] = vmulq_n_f32(vld1q_f32(acc + (size_t)q * hdp + d0 + 4 * c), corr[q]);
    for (int32_t r = 0; r < nr; r++)
        UNROLL for (int c = 0; c < C; c++) {
            const float32x4_t x = load4(v, f16, (int64_t)r * hd + d0 + 4 * c, hd - (d0 + 4 * c), full);
            UNROLL for (int q = 0; q < Q; q++) a[q][c] = vfmaq_n_f32(a[q][c], x, P[(size_t)q * BR + r]);
        }
    UNROLL for (int q = 0; q < Q; q++)
        UNROLL for (int c = 0; c < C; c++) vst1q_f32(acc + (size_t)q * hdp + d0 + 4 * c, a[q][c]);
}

/* Chunks up to hd rounded up to 4 (<= hdp): lanes past hd see V's zeros,
 * lanes past that keep the zeros they started as. */
AI void accum_group(float *acc, int32_t hdp, const float *P, const float *corr, const void *v, int f16,
                    int32_t hd, int32_t nr, const int Q, const int C, const int full) {
    int32_t d0 = 0;
    for (; d0 + 4 * C <= hd; d0 += 4 * C) accum_tile(acc, hdp, P, corr, v, f16, hd, nr, d0, Q, C, full);
    for (; d0 < hd; d0 += 4) accum_tile(acc, hdp, P, corr, v, f16, hd, nr, d0, Q, 1, full);
}

AI void accum_dt(float *acc, int32_t nq, int32_t hdp, const float *P, const float *corr, const void *v,
                 int f16, int32_t hd, int32_t nr, const int full) {
    int32_t q = 0;
    for (; nq - q >= 4; q += 4)
        accum_group(acc + (size_t)q * hdp, hdp, P + (size_t)q * BR, corr + q, v, f16, hd, nr, 4, 4, full);
    float *a = acc + (size_t)q * hdp;
    const float *p = P + (size_t)q * BR, *c = corr + q;
    switch (nq - q) {
    case 3: accum_group(a, hdp, p, c, v, f16, hd, nr, 3, 4, full); break;
    case 2: accum_group(a, hdp, p, c, v, f16, hd, nr, 2, 8, full); break;
    case 1: accum_group(a, hdp, p, c, v, f16, hd, nr, 1, 8, full); break;
    default: break;
    }
}

static void accum_neon(float *acc, int32_t nq, int32_t hdp, const float *P, const float *corr, const void *v,
                       int f16, int32_t hd, int32_t nr) {
    if (hd % 4 == 0) {
        if (f16) accum_dt(acc, nq, hdp, P, corr, v, 1, hd, nr, 1);
        else accum_dt(acc, nq, hdp, P, corr, v, 0, hd, nr, 1);
    } else {
        if (f16) accum_dt(acc, nq, hdp, P, corr, v, 1, hd, nr, 0);
        else accum_dt(acc, nq, hdp, P, corr, v, 0, hd, nr, 0);
    }
}

const okv_attend_kernels okv_attend_kernels_neon = {scores_neon, softmax_neon, accum_neon};

#endif /* OKV_ARM */
