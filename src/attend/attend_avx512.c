/* AVX-512 attention kernels (16 lanes).  Head-dim tails use masked loads,
 * which never fault on the masked-off lanes, so no row is read past its end. */
#include "attend/attend_impl.h"

#ifdef OKV_ATTEND_HAVE_X86
#include <immintrin.h>

#include "kernels/cpu.h"
#include "kernels/f16.h"

#define AI static inline __attribute__((always_inline)) OKV_TARGET_AVX512
#define BR OKV_ATTEND_BR

AI __mmask16 lanes(int32_t n) {
    return n >= 16 ? (__mmask16)0xffff : n <= 0 ? (__mmask16)0 : (__mmask16)((1u << n) - 1);
}

AI __m512 load16(const void *base, int f16, int64_t off, __mmask16 m) {
    if (f16) return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, (const okv_f16 *)base + off));
    return _mm512_maskz_loadu_ps(m, (const float *)base + off);
}

/* Lane i of the result is the horizontal sum of a[i]. */
AI __m512 reduce16(const __m512 a[16]) {
    __m512 x[8], z[4], u[2];
    for (int i = 0; i < 8; i++)
        x[i] = _mm512_add_ps(_mm512_unpacklo_ps(a[2 * i], a[2 * i + 1]),
                             _mm512_unpackhi_ps(a[2 * i], a[2 * i + 1]));
    for (int i = 0; i < 4; i++) {
        __m512d p = _mm512_castps_pd(x[2 * i]), q = _mm512_castps_pd(x[2 * i + 1]);
        z[i] = _mm512_add_ps(_mm512_castpd_ps(_mm512_unpacklo_pd(p, q)),
                             _mm512_castpd_ps(_mm512_unpackhi_pd(p, q)));
    }
    for (int i = 0; i < 2; i++)
        u[i] = _mm512_add_ps(_mm512_shuffle_f32x4(z[2 * i], z[2 * i + 1], 0x88),
                             _mm512_shuffle_f32x4(z[2 * i], z[2 * i + 1], 0xdd));
    return _mm512_add_ps(_mm512_shuffle_f32x4(u[0], u[1], 0x88),
                         _mm512_shuffle_f32x4(u[0], u[1], 0xdd));
}

/* Q queries x R = 16/Q rows: 16 dot products in 16 accumulators, reduced at
 * the end into one vector.  Queries past nqv and rows past nr repeat the last
 * real one; their results are dropped. */
AI void score_tile(const float *qs, int32_t hdp, int32_t nqv, const void *k, int f16, int32_t hd,
                   int32_t nr, int32_t r0, const int Q, float *S) {
    const int R = 16 / Q;
    int64_t roff[16];
    const float *qp[4];
    for (int r = 0; r < R; r++) roff[r] = (int64_t)(r0 + r < nr ? r0 + r : nr - 1) * hd;
    for (int q = 0; q < Q; q++) qp[q] = qs + (size_t)(q < nqv ? q : nqv - 1) * hdp;
    __m512 acc[16];
    for (int i = 0; i < 16; i++) acc[i] = _mm512_setzero_ps();
    for (int32_t d = 0; d < hd; d += 16) {
        const __mmask16 m = lanes(hd - d);
        __m512 qv[4];
        for (int q = 0; q < Q; q++) qv[q] = _mm512_load_ps(qp[q] + d);
        for (int r = 0; r < R; r++) {
            const __m512 kv = load16(k, f16, roff[r] + d, m);
            for (int q = 0; q < Q; q++) acc[q * R + r] = _mm512_fmadd_ps(qv[q], kv, acc[q * R + r]);
        }
    }
    const __m512 sums = reduce16(acc);
    if (nqv >= Q && r0 + R <= nr) {  /* whole tile: one store per query */
        for (int q = 0; q < Q; q++) {
            float *dst = S + (size_t)q * BR + r0;
            if (R == 16) _mm512_storeu_ps(dst, sums);
            else if (R == 8) _mm256_storeu_ps(dst, q ? _mm512_extractf32x8_ps(sums, 1)
                                                     : _mm512_castps512_ps256(sums));
            else if (q == 0) _mm_storeu_ps(dst, _mm512_castps512_ps128(sums));
            else if (q == 1) _mm_storeu_ps(dst, _mm512_extractf32x4_ps(sums, 1));
            else if (q == 2) _mm_storeu_ps(dst, _mm512_extractf32x4_ps(sums, 2));
            else _mm_storeu_ps(dst, _mm512_extractf32x4_ps(sums, 3));
        }
        return;
    }
    float out[16] __attribute__((aligned(64)));
    _mm512_store_ps(out, sums);
    for (int q = 0; q < Q && q < nqv; q++)
        for (int r = 0; r < R && r0 + r < nr; r++) S[(size_t)q * BR + r0 + r] = out[q * R + r];
}

AI void score_rows(const float *qs, int32_t hdp, int32_t nqv, const void *k, int f16, int32_t hd,
                   int32_t nr, const int Q, float *S) {
    for (int32_t r0 = 0; r0 < nr; r0 += 16 / Q) score_tile(qs, hdp, nqv, k, f16, hd, nr, r0, Q, S);
}

AI void scores_dt(const float *qs, int32_t nq, int32_t hdp, const void *k, int f16, int32_t hd,
                  int32_t nr, float *S) {
    int32_t q = 0;
    for (; nq - q >= 3; q += 4)
        score_rows(qs + (size_t)q * hdp, hdp, nq - q < 4 ? nq - q : 4, k, f16, hd, nr, 4,
                   S + (size_t)q * BR);
    if (nq - q == 2) score_rows(qs + (size_t)q * hdp, hdp, 2, k, f16, hd, nr, 2, S + (size_t)q * BR);
    else if (nq - q == 1) score_rows(qs + (size_t)q * hdp, hdp, 1, k, f16, hd, nr, 1, S + (size_t)q * BR);
}

OKV_TARGET_AVX512 static void scores_avx512(const float *qs, int32_t nq, int32_t hdp, const void *k,
                                            int f16, int32_t hd, int32_t nr, float *S) {
    if (f16) scores_dt(qs, nq, hdp, k, 1, hd, nr, S);
    else scores_dt(qs, nq, hdp, k, 0, hd, nr, S);
}

/* 2^x for x <= 0: round to an integer n, a degree-7 Taylor polynomial for
 * 2^f on |f| <= 1/2 (relative error ~5e-9), then scale by 2^n.  Lanes below
 * the floor (and -inf) give exact zeros. */
AI __m512 exp2_16(__m512 x) {
    const __mmask16 keep = _mm512_cmp_ps_mask(x, _mm512_set1_ps(OKV_ATTEND_EXP_FLOOR), _CMP_GE_OQ);
    x = _mm512_max_ps(x, _mm512_set1_ps(OKV_ATTEND_EXP_FLOOR));
    const __m512 n = _mm512_roundscale_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    const __m512 f = _mm512_sub_ps(x, n);
    __m512 p = _mm512_set1_ps(1.5252733804059841e-05f);  /* ln2^7 / 7! */
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(1.5403530393381610e-04f));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(1.3333558146428443e-03f));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(9.6181291076284772e-03f));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(5.5504108664821580e-02f));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(2.4022650695910071e-01f));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(6.9314718055994531e-01f));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(1.0f));
    return _mm512_maskz_mov_ps(keep, _mm512_scalef_ps(p, n));
}

OKV_TARGET_AVX512 static float softmax_avx512(float *s, int32_t lo, int32_t hi, float *m, float *l) {
    const uint32_t upto = hi >= 31 ? 0xffffffffu : (1u << (hi + 1)) - 1;
    const uint32_t vis = upto & ~((1u << lo) - 1);
    const __mmask16 v0 = (__mmask16)(vis & 0xffff), v1 = (__mmask16)(vis >> 16);
    const __m512 ninf = _mm512_set1_ps(-INFINITY);
    const __m512 x0 = _mm512_mask_loadu_ps(ninf, v0, s), x1 = _mm512_mask_loadu_ps(ninf, v1, s + 16);
    const float mb = _mm512_reduce_max_ps(_mm512_max_ps(x0, x1));
    const float m_new = mb > *m ? mb : *m;
    const float corr = okv_attend_exp2_scalar(*m - m_new);
    const __m512 mn = _mm512_set1_ps(m_new);
    const __m512 p0 = _mm512_maskz_mov_ps(v0, exp2_16(_mm512_sub_ps(x0, mn)));
    const __m512 p1 = _mm512_maskz_mov_ps(v1, exp2_16(_mm512_sub_ps(x1, mn)));
    _mm512_storeu_ps(s, p0);
    _mm512_storeu_ps(s + 16, p1);
    *l = *l * corr + _mm512_reduce_add_ps(_mm512_add_ps(p0, p1));
    *m = m_new;
    return corr;
}

/* Q queries x C chunks of 16 dims held in registers over all nr rows; each V
 * chunk is loaded once and feeds Q accumulators. */
AI void accum_tile(float *acc, int32_t hdp, const float *P, const float *corr, const void *v,
                   int f16, int32_t hd, int32_t nr, int32_t d0, const int Q, const int C) {
    __m512 a[16];
    __mmask16 mk[16];
    for (int c = 0; c < C; c++) mk[c] = lanes(hd - (d0 + 16 * c));
    for (int q = 0; q < Q; q++)
        for (int c = 0; c < C; c++)
            a[q * C + c] = _mm512_mul_ps(_mm512_load_ps(acc + (size_t)q * hdp + d0 + 16 * c),
                                         _mm512_set1_ps(corr[q]));
    for (int32_t r = 0; r < nr; r++) {
        __m512 w[16];
        for (int q = 0; q < Q; q++) w[q] = _mm512_set1_ps(P[(size_t)q * BR + r]);
        for (int c = 0; c < C; c++) {
            const __m512 x = load16(v, f16, (int64_t)r * hd + d0 + 16 * c, mk[c]);
            for (int q = 0; q < Q; q++) a[q * C + c] = _mm512_fmadd_ps(w[q], x, a[q * C + c]);
        }
    }
    for (int q = 0; q < Q; q++)
        for (int c = 0; c < C; c++) _mm512_store_ps(acc + (size_t)q * hdp + d0 + 16 * c, a[q * C + c]);
}

AI void accum_group(float *acc, int32_t hdp, const float *P, const float *corr, const void *v,
                    int f16, int32_t hd, int32_t nr, const int Q, const int C) {
    int32_t d0 = 0;
    for (; d0 + 16 * C <= hdp; d0 += 16 * C) accum_tile(acc, hdp, P, corr, v, f16, hd, nr, d0, Q, C);
    for (; d0 < hdp; d0 += 16) accum_tile(acc, hdp, P, corr, v, f16, hd, nr, d0, Q, 1);
}

AI void accum_dt(float *acc, int32_t nq, int32_t hdp, const float *P, const float *corr,
                 const void *v, int f16, int32_t hd, int32_t nr) {
    int32_t q = 0;
    for (; nq - q >= 8; q += 8)
        accum_group(acc + (size_t)q * hdp, hdp, P + (size_t)q * BR, corr + q, v, f16, hd, nr, 8, 2);
    float *a = acc + (size_t)q * hdp;
    const float *p = P + (size_t)q * BR, *c = corr + q;
    switch (nq - q) {
    case 7: accum_group(a, hdp, p, c, v, f16, hd, nr, 7, 2); break;
    case 6: accum_group(a, hdp, p, c, v, f16, hd, nr, 6, 2); break;
    case 5: accum_group(a, hdp, p, c, v, f16, hd, nr, 5, 2); break;
    case 4: accum_group(a, hdp, p, c, v, f16, hd, nr, 4, 4); break;
    case 3: accum_group(a, hdp, p, c, v, f16, hd, nr, 3, 4); break;
    case 2: accum_group(a, hdp, p, c, v, f16, hd, nr, 2, 4); break;
    case 1: accum_group(a, hdp, p, c, v, f16, hd, nr, 1, 8); break;
    default: break;
    }
}

OKV_TARGET_AVX512 static void accum_avx512(float *acc, int32_t nq, int32_t hdp, const float *P,
                                           const float *corr, const void *v, int f16, int32_t hd,
                                           int32_t nr) {
    if (f16) accum_dt(acc, nq, hdp, P, corr, v, 1, hd, nr);
    else accum_dt(acc, nq, hdp, P, corr, v, 0, hd, nr);
}

const okv_attend_kernels okv_attend_kernels_avx512 = {scores_avx512, softmax_avx512, accum_avx512};

#endif
