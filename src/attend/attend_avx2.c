/* AVX2 + FMA + F16C attention kernels (8 lanes, 16 registers).  AVX2 has no
 * masked 16-bit load, so head-dim tails go through a small zeroed buffer. */
#include "attend/attend_impl.h"

#ifdef OKV_ATTEND_HAVE_X86
#include <immintrin.h>
#include <string.h>

#include "kernels/cpu.h"
#include "kernels/f16.h"

#define AI static inline __attribute__((always_inline)) OKV_TARGET_AVX2
#define BR OKV_ATTEND_BR
/* Unrolled loops over queries, rows and chunks keep the accumulator arrays
 * in registers; without it GCC kept the accumulate kernel's in memory, a
 * load and a store around every FMA (f16 V at ~9 GB/s from L1, against
 * ~23 for the AVX-512 kernel). */
#define UNROLL _Pragma("GCC unroll 8")

/* Elements off .. off+min(n,8) of a row as f32; lanes past n are zero and
 * nothing past the row is read.  full: the caller knows n >= 8 (head_dim a
 * multiple of 8), so no tail path is compiled in. */
AI __m256 load8(const void *base, int f16, int64_t off, int32_t n, const int full) {
    if (full || n >= 8) {
        if (f16) return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)((const okv_f16 *)base + off)));
        return _mm256_loadu_ps((const float *)base + off);
    }
    if (n <= 0) return _mm256_setzero_ps();
    if (f16) {
        okv_f16 t[8] = {0};
        memcpy(t, (const okv_f16 *)base + off, (size_t)n * sizeof(okv_f16));
        return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)t));
    }
    float t[8] = {0};
    memcpy(t, (const float *)base + off, (size_t)n * sizeof(float));
    return _mm256_loadu_ps(t);
}

/* Lane i of the result is the horizontal sum of a[i]. */
AI __m256 reduce8(const __m256 a[8]) {
    __m256 x[4], z[2];
    for (int i = 0; i < 4; i++)
        x[i] = _mm256_add_ps(_mm256_unpacklo_ps(a[2 * i], a[2 * i + 1]),
                             _mm256_unpackhi_ps(a[2 * i], a[2 * i + 1]));
    for (int i = 0; i < 2; i++) {
        __m256d p = _mm256_castps_pd(x[2 * i]), q = _mm256_castps_pd(x[2 * i + 1]);
        z[i] = _mm256_add_ps(_mm256_castpd_ps(_mm256_unpacklo_pd(p, q)),
                             _mm256_castpd_ps(_mm256_unpackhi_pd(p, q)));
    }
    return _mm256_add_ps(_mm256_permute2f128_ps(z[0], z[1], 0x20),
                         _mm256_permute2f128_ps(z[0], z[1], 0x31));
}

/* Q queries x R = 8/Q rows in 8 accumulators; see the AVX-512 version. */
AI void score_tile(const float *qs, int32_t hdp, int32_t nqv, const void *k, int f16, int32_t hd,
                   int32_t nr, int32_t r0, const int Q, const int full, float *S) {
    const int R = 8 / Q;
    int64_t roff[8];
    const float *qp[4];
    UNROLL for (int r = 0; r < R; r++) roff[r] = (int64_t)(r0 + r < nr ? r0 + r : nr - 1) * hd;
    UNROLL for (int q = 0; q < Q; q++) qp[q] = qs + (size_t)(q < nqv ? q : nqv - 1) * hdp;
    __m256 acc[8];
    UNROLL for (int i = 0; i < 8; i++) acc[i] = _mm256_setzero_ps();
    for (int32_t d = 0; d < hd; d += 8) {
        __m256 qv[4];
        UNROLL for (int q = 0; q < Q; q++) qv[q] = _mm256_load_ps(qp[q] + d);
        UNROLL for (int r = 0; r < R; r++) {
            const __m256 kv = load8(k, f16, roff[r] + d, hd - d, full);
            UNROLL for (int q = 0; q < Q; q++) acc[q * R + r] = _mm256_fmadd_ps(qv[q], kv, acc[q * R + r]);
        }
    }
    const __m256 sums = reduce8(acc);
    if (nqv >= Q && r0 + R <= nr) {  /* whole tile: stores straight from the vector */
        UNROLL for (int q = 0; q < Q; q++) {
            float *dst = S + (size_t)q * BR + r0;
            if (R == 8) _mm256_storeu_ps(dst, sums);
            else if (R == 4) _mm_storeu_ps(dst, q ? _mm256_extractf128_ps(sums, 1) : _mm256_castps256_ps128(sums));
            else {
                float out[8] __attribute__((aligned(32)));
                _mm256_store_ps(out, sums);
                UNROLL for (int r = 0; r < R; r++) dst[r] = out[q * R + r];
            }
        }
        return;
    }
    float out[8] __attribute__((aligned(32)));
    _mm256_store_ps(out, sums);
    for (int q = 0; q < Q && q < nqv; q++)
        for (int r = 0; r < R && r0 + r < nr; r++) S[(size_t)q * BR + r0 + r] = out[q * R + r];
}

AI void score_rows(const float *qs, int32_t hdp, int32_t nqv, const void *k, int f16, int32_t hd,
                   int32_t nr, const int Q, const int full, float *S) {
    for (int32_t r0 = 0; r0 < nr; r0 += 8 / Q) score_tile(qs, hdp, nqv, k, f16, hd, nr, r0, Q, full, S);
}

AI void scores_dt(const float *qs, int32_t nq, int32_t hdp, const void *k, int f16, int32_t hd,
                  int32_t nr, const int full, float *S) {
    int32_t q = 0;
    for (; nq - q >= 3; q += 4)
        score_rows(qs + (size_t)q * hdp, hdp, nq - q < 4 ? nq - q : 4, k, f16, hd, nr, 4, full,
                   S + (size_t)q * BR);
    if (nq - q == 2) score_rows(qs + (size_t)q * hdp, hdp, 2, k, f16, hd, nr, 2, full, S + (size_t)q * BR);
    else if (nq - q == 1) score_rows(qs + (size_t)q * hdp, hdp, 1, k, f16, hd, nr, 1, full, S + (size_t)q * BR);
}

OKV_TARGET_AVX2 static void scores_avx2(const float *qs, int32_t nq, int32_t hdp, const void *k,
                                        int f16, int32_t hd, int32_t nr, float *S) {
    if (hd % 8 == 0) {
        if (f16) scores_dt(qs, nq, hdp, k, 1, hd, nr, 1, S);
        else scores_dt(qs, nq, hdp, k, 0, hd, nr, 1, S);
    } else {
        if (f16) scores_dt(qs, nq, hdp, k, 1, hd, nr, 0, S);
        else scores_dt(qs, nq, hdp, k, 0, hd, nr, 0, S);
    }
}

/* 2^x for x <= 0, as in the AVX-512 file: degree-7 Taylor on |f| <= 1/2,
 * 2^n built in the exponent field (n >= -64, so always a normal number). */
AI __m256 exp2_8(__m256 x) {
    const __m256 floor_ = _mm256_set1_ps(OKV_ATTEND_EXP_FLOOR);
    const __m256 keep = _mm256_cmp_ps(x, floor_, _CMP_GE_OQ);
    x = _mm256_max_ps(x, floor_);
    const __m256 n = _mm256_round_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    const __m256 f = _mm256_sub_ps(x, n);
    __m256 p = _mm256_set1_ps(1.5252733804059841e-05f);
    p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(1.5403530393381610e-04f));
    p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(1.3333558146428443e-03f));
    p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(9.6181291076284772e-03f));
    p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(5.5504108664821580e-02f));
    p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(2.4022650695910071e-01f));
    p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(6.9314718055994531e-01f));
    p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(1.0f));
    const __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
    return _mm256_and_ps(_mm256_mul_ps(p, _mm256_castsi256_ps(e)), keep);
}

AI float hsum8(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

AI float hmax8(__m256 v) {
    __m128 s = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_max_ps(s, _mm_movehl_ps(s, s));
    s = _mm_max_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

OKV_TARGET_AVX2 static float softmax_avx2(float *s, int32_t lo, int32_t hi, float *m, float *l) {
    const __m256i lov = _mm256_set1_epi32(lo - 1), hiv = _mm256_set1_epi32(hi + 1);
    const __m256 ninf = _mm256_set1_ps(-INFINITY);
    __m256 x[BR / 8], vis[BR / 8];
    __m256 mx = ninf;
    for (int i = 0; i < BR / 8; i++) {
        const __m256i idx = _mm256_add_epi32(_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7),
                                             _mm256_set1_epi32(8 * i));
        vis[i] = _mm256_castsi256_ps(
            _mm256_and_si256(_mm256_cmpgt_epi32(idx, lov), _mm256_cmpgt_epi32(hiv, idx)));
        x[i] = _mm256_blendv_ps(ninf, _mm256_loadu_ps(s + 8 * i), vis[i]);
        mx = _mm256_max_ps(mx, x[i]);
    }
    const float mb = hmax8(mx);
    const float m_new = mb > *m ? mb : *m;
    const float corr = okv_attend_exp2_scalar(*m - m_new);
    const __m256 mn = _mm256_set1_ps(m_new);
    __m256 sum = _mm256_setzero_ps();
    for (int i = 0; i < BR / 8; i++) {
        const __m256 p = _mm256_and_ps(exp2_8(_mm256_sub_ps(x[i], mn)), vis[i]);
        _mm256_storeu_ps(s + 8 * i, p);
        sum = _mm256_add_ps(sum, p);
    }
    *l = *l * corr + hsum8(sum);
    *m = m_new;
    return corr;
}

AI void accum_tile(float *acc, int32_t hdp, const float *P, const float *corr, const void *v,
                   int f16, int32_t hd, int32_t nr, int32_t d0, const int Q, const int C, const int full) {
    __m256 a[8];
    UNROLL for (int q = 0; q < Q; q++)
        UNROLL for (int c = 0; c < C; c++)
            a[q * C + c] = _mm256_mul_ps(_mm256_load_ps(acc + (size_t)q * hdp + d0 + 8 * c),
                                         _mm256_set1_ps(corr[q]));
    for (int32_t r = 0; r < nr; r++)
        UNROLL for (int c = 0; c < C; c++) {
            const __m256 x = load8(v, f16, (int64_t)r * hd + d0 + 8 * c, hd - (d0 + 8 * c), full);
            UNROLL for (int q = 0; q < Q; q++)
                a[q * C + c] = _mm256_fmadd_ps(_mm256_broadcast_ss(P + (size_t)q * BR + r), x, a[q * C + c]);
        }
    UNROLL for (int q = 0; q < Q; q++)
        UNROLL for (int c = 0; c < C; c++) _mm256_store_ps(acc + (size_t)q * hdp + d0 + 8 * c, a[q * C + c]);
}

AI void accum_group(float *acc, int32_t hdp, const float *P, const float *corr, const void *v,
                    int f16, int32_t hd, int32_t nr, const int Q, const int C, const int full) {
    int32_t d0 = 0;
    if (full) {
        /* lanes hd .. hdp-1 stay the zeros they started as */
        for (; d0 + 8 * C <= hd; d0 += 8 * C) accum_tile(acc, hdp, P, corr, v, f16, hd, nr, d0, Q, C, 1);
        for (; d0 < hd; d0 += 8) accum_tile(acc, hdp, P, corr, v, f16, hd, nr, d0, Q, 1, 1);
        return;
    }
    for (; d0 + 8 * C <= hdp; d0 += 8 * C) accum_tile(acc, hdp, P, corr, v, f16, hd, nr, d0, Q, C, 0);
    for (; d0 < hdp; d0 += 8) accum_tile(acc, hdp, P, corr, v, f16, hd, nr, d0, Q, 1, 0);
}

AI void accum_dt(float *acc, int32_t nq, int32_t hdp, const float *P, const float *corr,
                 const void *v, int f16, int32_t hd, int32_t nr, const int full) {
    int32_t q = 0;
    for (; nq - q >= 8; q += 8)
        accum_group(acc + (size_t)q * hdp, hdp, P + (size_t)q * BR, corr + q, v, f16, hd, nr, 8, 1, full);
    float *a = acc + (size_t)q * hdp;
    const float *p = P + (size_t)q * BR, *c = corr + q;
    switch (nq - q) {
    case 7: accum_group(a, hdp, p, c, v, f16, hd, nr, 7, 1, full); break;
    case 6: accum_group(a, hdp, p, c, v, f16, hd, nr, 6, 1, full); break;
    case 5: accum_group(a, hdp, p, c, v, f16, hd, nr, 5, 1, full); break;
    case 4: accum_group(a, hdp, p, c, v, f16, hd, nr, 4, 2, full); break;
    case 3: accum_group(a, hdp, p, c, v, f16, hd, nr, 3, 2, full); break;
    case 2: accum_group(a, hdp, p, c, v, f16, hd, nr, 2, 4, full); break;
    case 1: accum_group(a, hdp, p, c, v, f16, hd, nr, 1, 8, full); break;
    default: break;
    }
}

OKV_TARGET_AVX2 static void accum_avx2(float *acc, int32_t nq, int32_t hdp, const float *P,
                                       const float *corr, const void *v, int f16, int32_t hd,
                                       int32_t nr) {
    if (hd % 8 == 0) {
        if (f16) accum_dt(acc, nq, hdp, P, corr, v, 1, hd, nr, 1);
        else accum_dt(acc, nq, hdp, P, corr, v, 0, hd, nr, 1);
    } else {
        if (f16) accum_dt(acc, nq, hdp, P, corr, v, 1, hd, nr, 0);
        else accum_dt(acc, nq, hdp, P, corr, v, 0, hd, nr, 0);
    }
}

const okv_attend_kernels okv_attend_kernels_avx2 = {scores_avx2, softmax_avx2, accum_avx2};

#endif
