/* AVX2 kernels: one 32-value block per 256-bit register. */
#include <immintrin.h>
#include <math.h>

#include "kernels/cpu.h"
#include "kernels/matmul_impl.h"

#define KERNEL static inline __attribute__((always_inline)) OKV_TARGET_AVX2

KERNEL float hsum256(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

OKV_TARGET_AVX2 void okv_mm_quantize_act_avx2(const float *x, int64_t k, int8_t *q, float *d) {
    const __m256 sign = _mm256_set1_ps(-0.0f);
    for (int64_t b = 0; b < k / OKV_QK; b++) {
        __m256 v[4];
        __m256 amax = _mm256_setzero_ps();
        for (int i = 0; i < 4; i++) {
            v[i] = _mm256_loadu_ps(x + b * OKV_QK + 8 * i);
            amax = _mm256_max_ps(amax, _mm256_andnot_ps(sign, v[i]));
        }
        __m128 m = _mm_max_ps(_mm256_castps256_ps128(amax), _mm256_extractf128_ps(amax, 1));
        m = _mm_max_ps(m, _mm_movehl_ps(m, m));
        m = _mm_max_ss(m, _mm_movehdup_ps(m));
        const float am = _mm_cvtss_f32(m);
        const float id = am != 0.0f ? 127.0f / am : 0.0f;
        d[b] = _cvtsh_ss(_cvtss_sh(am / 127.0f, _MM_FROUND_TO_NEAREST_INT));
        __m256i iv[4];
        for (int i = 0; i < 4; i++)
            iv[i] = _mm256_cvtps_epi32(_mm256_round_ps(_mm256_mul_ps(v[i], _mm256_set1_ps(id)),
                                                       _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
        /* packs interleave 128-bit lanes; the permute restores element order */
        __m256i p = _mm256_packs_epi16(_mm256_packs_epi32(iv[0], iv[1]), _mm256_packs_epi32(iv[2], iv[3]));
        p = _mm256_permutevar8x32_epi32(p, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
        _mm256_storeu_si256((__m256i *)(q + b * OKV_QK), p);
    }
}

KERNEL __m256 block_scale(okv_f16 d) { return _mm256_set1_ps(_cvtsh_ss(d)); }

KERNEL void q8_0_tile(const okv_mm_ctx *c, int64_t r0, const int NR, int64_t c0, const int NC) {
    const int64_t nb = c->k / OKV_QK;
    const __m256i ones = _mm256_set1_epi16(1);
    __m256 acc[MM_TR][MM_TC];
    for (int r = 0; r < NR; r++)
        for (int j = 0; j < NC; j++) acc[r][j] = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        __m256i xv[MM_TC];
        __m256 sx[MM_TC];
        for (int j = 0; j < NC; j++) {
            xv[j] = _mm256_loadu_si256((const __m256i *)(c->xq + (c0 + j) * c->k + b * OKV_QK));
            sx[j] = _mm256_set1_ps(c->xd[(c0 + j) * nb + b]);
        }
        for (int r = 0; r < NR; r++) {
            const block_q8_0 *blk = (const block_q8_0 *)(c->w + (r0 + r) * c->wrow) + b;
            const __m256i wv = _mm256_loadu_si256((const __m256i *)blk->qs);
            const __m256i wa = _mm256_sign_epi8(wv, wv);
            const __m256 sw = block_scale(blk->d);
            for (int j = 0; j < NC; j++) {
                /* |w| * (x with w's sign): maddubs needs one unsigned side */
                const __m256i p = _mm256_madd_epi16(_mm256_maddubs_epi16(wa, _mm256_sign_epi8(xv[j], wv)), ones);
                acc[r][j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), _mm256_mul_ps(sw, sx[j]), acc[r][j]);
            }
        }
    }
    for (int r = 0; r < NR; r++)
        for (int j = 0; j < NC; j++) c->y[(c0 + j) * c->rows + r0 + r] = hsum256(acc[r][j]);
}

KERNEL void q4_0_tile(const okv_mm_ctx *c, int64_t r0, const int NR, int64_t c0, const int NC) {
    const int64_t nb = c->k / OKV_QK;
    const __m256i ones = _mm256_set1_epi16(1);
    const __m256i eight = _mm256_set1_epi8(8);
    const __m256i low4 = _mm256_set1_epi8(0x0F);
    __m256 acc[MM_TR][MM_TC];
    for (int r = 0; r < NR; r++)
        for (int j = 0; j < NC; j++) acc[r][j] = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        __m256i xv[MM_TC], x8[MM_TC];
        __m256 sx[MM_TC];
        for (int j = 0; j < NC; j++) {
            xv[j] = _mm256_loadu_si256((const __m256i *)(c->xq + (c0 + j) * c->k + b * OKV_QK));
            /* the stored nibbles are value + 8: subtract 8 * x once per column */
            x8[j] = _mm256_maddubs_epi16(eight, xv[j]);
            sx[j] = _mm256_set1_ps(c->xd[(c0 + j) * nb + b]);
        }
        for (int r = 0; r < NR; r++) {
            const block_q4_0 *blk = (const block_q4_0 *)(c->w + (r0 + r) * c->wrow) + b;
            const __m128i q = _mm_loadu_si128((const __m128i *)blk->qs);
            const __m256i wq = _mm256_and_si256(
                _mm256_inserti128_si256(_mm256_castsi128_si256(q), _mm_srli_epi16(q, 4), 1), low4);
            const __m256 sw = block_scale(blk->d);
            for (int j = 0; j < NC; j++) {
                const __m256i p16 = _mm256_sub_epi16(_mm256_maddubs_epi16(wq, xv[j]), x8[j]);
                const __m256i p = _mm256_madd_epi16(p16, ones);
                acc[r][j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), _mm256_mul_ps(sw, sx[j]), acc[r][j]);
            }
        }
    }
    for (int r = 0; r < NR; r++)
        for (int j = 0; j < NC; j++) c->y[(c0 + j) * c->rows + r0 + r] = hsum256(acc[r][j]);
}

KERNEL __m256 load8(int wtype, const uint8_t *row, int64_t i) {
    if (wtype == OKV_GGML_F16) return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(row + 2 * i)));
    if (wtype == OKV_GGML_BF16)
        return _mm256_castsi256_ps(
            _mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(row + 2 * i))), 16));
    return _mm256_loadu_ps((const float *)(row + 4 * i));
}

KERNEL float load1(int wtype, const uint8_t *row, int64_t i) {
    uint16_t h;
    float f;
    if (wtype == OKV_GGML_F16) { memcpy(&h, row + 2 * i, 2); return _cvtsh_ss(h); }
    if (wtype == OKV_GGML_BF16) { memcpy(&h, row + 2 * i, 2); return okv_bf16_to_f32(h); }
    memcpy(&f, row + 4 * i, 4);
    return f;
}

KERNEL void float_tile(int wtype, const okv_mm_ctx *c, int64_t r0, const int NR, int64_t c0, const int NC) {
    __m256 acc[MM_TR][MM_TC];
    for (int r = 0; r < NR; r++)
        for (int j = 0; j < NC; j++) acc[r][j] = _mm256_setzero_ps();
    const int64_t k8 = c->k & ~(int64_t)7;
    for (int64_t i = 0; i < k8; i += 8) {
        __m256 xv[MM_TC];
        for (int j = 0; j < NC; j++) xv[j] = _mm256_loadu_ps(c->x + (c0 + j) * c->k + i);
        for (int r = 0; r < NR; r++) {
            const __m256 wv = load8(wtype, c->w + (r0 + r) * c->wrow, i);
            for (int j = 0; j < NC; j++) acc[r][j] = _mm256_fmadd_ps(wv, xv[j], acc[r][j]);
        }
    }
    for (int r = 0; r < NR; r++) {
        for (int j = 0; j < NC; j++) {
            float s = hsum256(acc[r][j]);
            for (int64_t i = k8; i < c->k; i++)
                s += load1(wtype, c->w + (r0 + r) * c->wrow, i) * c->x[(c0 + j) * c->k + i];
            c->y[(c0 + j) * c->rows + r0 + r] = s;
        }
    }
}

KERNEL void f32_tile(const okv_mm_ctx *c, int64_t r0, const int NR, int64_t c0, const int NC) {
    float_tile(OKV_GGML_F32, c, r0, NR, c0, NC);
}
KERNEL void f16_tile(const okv_mm_ctx *c, int64_t r0, const int NR, int64_t c0, const int NC) {
    float_tile(OKV_GGML_F16, c, r0, NR, c0, NC);
}
KERNEL void bf16_tile(const okv_mm_ctx *c, int64_t r0, const int NR, int64_t c0, const int NC) {
    float_tile(OKV_GGML_BF16, c, r0, NR, c0, NC);
}

OKV_MM_DISPATCH(OKV_TARGET_AVX2, okv_mm_tile_q8_0_avx2, q8_0_tile)
OKV_MM_DISPATCH(OKV_TARGET_AVX2, okv_mm_tile_q4_0_avx2, q4_0_tile)
OKV_MM_DISPATCH(OKV_TARGET_AVX2, okv_mm_tile_f32_avx2, f32_tile)
OKV_MM_DISPATCH(OKV_TARGET_AVX2, okv_mm_tile_f16_avx2, f16_tile)
OKV_MM_DISPATCH(OKV_TARGET_AVX2, okv_mm_tile_bf16_avx2, bf16_tile)
