/* AVX2 + FMA versions of the element-wise kernels whose scalar form is
 * dominated by a libm call (silu's expf): 8 lanes at a time, and the
 * n % 8 tail through the same vector code (in a padded copy), so every
 * element's result is the same whatever n and its index: chunked and
 * whole prefills agree bit for bit. */
#include <immintrin.h>
#include <string.h>

#include "kernels/cpu.h"
#include "kernels/ops_impl.h"

#define AI static inline __attribute__((always_inline)) OKV_TARGET_AVX2

/* e^x for x in [-87, 88] (callers clamp): x = n ln2 + r, |r| <= ln2/2, ln2
 * in two parts so r is exact to f32; e^r by its degree-7 Taylor polynomial
 * (relative error ~5e-9, under the f32 rounding of the steps around it);
 * 2^n built in the exponent field (n in [-126, 127]: a normal number). */
AI __m256 exp8(__m256 x) {
    const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                                     _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
    __m256 p = _mm256_set1_ps(1.0f / 5040.0f);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 720.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 120.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 24.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 6.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(0.5f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
    const __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
    return _mm256_mul_ps(p, _mm256_castsi256_ps(e));
}

/* x / (1 + e^-x).  e^-x is clamped to [e^-87, e^88]: below, 1 + e^-x is 1
 * in f32 as with expf; above (x < -88), expf's infinity would give -0 where
 * this gives x / 1.7e38, a difference under 1e-36.  A NaN x stays NaN (the
 * numerator). */
AI __m256 silu8(__m256 x) {
    __m256 t = _mm256_sub_ps(_mm256_setzero_ps(), x);
    t = _mm256_min_ps(_mm256_max_ps(t, _mm256_set1_ps(-87.0f)), _mm256_set1_ps(88.0f));
    return _mm256_div_ps(x, _mm256_add_ps(_mm256_set1_ps(1.0f), exp8(t)));
}

OKV_TARGET_AVX2 void okv_swiglu_avx2(float *y, const float *gate, const float *up, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(y + i, _mm256_mul_ps(silu8(_mm256_loadu_ps(gate + i)), _mm256_loadu_ps(up + i)));
    if (i < n) {
        float g[8] = {0}, u[8] = {0}, o[8];
        memcpy(g, gate + i, (size_t)(n - i) * sizeof(float));
        memcpy(u, up + i, (size_t)(n - i) * sizeof(float));
        _mm256_storeu_ps(o, _mm256_mul_ps(silu8(_mm256_loadu_ps(g)), _mm256_loadu_ps(u)));
        memcpy(y + i, o, (size_t)(n - i) * sizeof(float));
    }
}

OKV_TARGET_AVX2 void okv_silu_avx2(float *y, const float *x, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, silu8(_mm256_loadu_ps(x + i)));
    if (i < n) {
        float t[8] = {0}, o[8];
        memcpy(t, x + i, (size_t)(n - i) * sizeof(float));
        _mm256_storeu_ps(o, silu8(_mm256_loadu_ps(t)));
        memcpy(y + i, o, (size_t)(n - i) * sizeof(float));
    }
}

/* ops.h's okv_geglu_ggml, 8 lanes at a time: the same f16 rounding (F16C's
 * round to nearest even is okv_f32_to_f16's), the same table entry, the same
 * two clamps and product, so the scalar code's bits.  Each f16 index's
 * entry comes from the aligned 32-bit word that holds it (a gather of words
 * idx / 2, then the half idx % 2): a 4-byte gather at idx itself would read
 * 2 bytes past the table for idx 65535 (a NaN's).  The scalar loop's
 * software f32-to-f16 took 10 % of a Gemma-3-1B-shaped prefill (Zen 5). */
AI __m256 geglu8(__m256 g, __m256 u, const okv_f16 *table) {
    const __m256i h = _mm256_cvtepu16_epi32(_mm256_cvtps_ph(g, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    const __m256i w = _mm256_i32gather_epi32((const int *)(const void *)table, _mm256_srli_epi32(h, 1), 4);
    const __m256i v = _mm256_srlv_epi32(w, _mm256_slli_epi32(_mm256_and_si256(h, _mm256_set1_epi32(1)), 4));
    /* 32-bit lanes of 16-bit values to 8 f16 in order (packus works per
     * 128-bit half: v0-3 low, v4-7 high) */
    const __m256i p = _mm256_permute4x64_epi64(_mm256_packus_epi32(_mm256_and_si256(v, _mm256_set1_epi32(0xFFFF)),
                                                                    _mm256_setzero_si256()), 0x08);
    __m256 r = _mm256_mul_ps(_mm256_cvtph_ps(_mm256_castsi256_si128(p)), u);
    r = _mm256_blendv_ps(r, _mm256_mul_ps(g, u), _mm256_cmp_ps(g, _mm256_set1_ps(10.0f), _CMP_GE_OQ));
    return _mm256_andnot_ps(_mm256_cmp_ps(g, _mm256_set1_ps(-10.0f), _CMP_LE_OQ), r);
}

OKV_TARGET_AVX2 void okv_geglu_ggml_avx2(float *y, const float *gate, const float *up, int64_t n, const okv_f16 *table) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(y + i, geglu8(_mm256_loadu_ps(gate + i), _mm256_loadu_ps(up + i), table));
    if (i < n) {
        float g[8] = {0}, u[8] = {0}, o[8];
        memcpy(g, gate + i, (size_t)(n - i) * sizeof(float));
        memcpy(u, up + i, (size_t)(n - i) * sizeof(float));
        _mm256_storeu_ps(o, geglu8(_mm256_loadu_ps(g), _mm256_loadu_ps(u), table));
        memcpy(y + i, o, (size_t)(n - i) * sizeof(float));
    }
}
