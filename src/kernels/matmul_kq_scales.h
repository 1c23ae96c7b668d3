/* The K-quants' packed 6-bit scales unpacked in SIMD registers, included
 * by matmul_avx2.c and matmul_avx512.c with KQ_TARGET set to their target
 * attribute (the functions are static, one copy per file).
 *
 * Unpacking through scalar words (ggml's kmask shuffles) and loading the
 * result as a vector stalls on store forwarding: Q3_K took 20 ns per
 * super-block and row that way, against 10-13 for Q4_K and Q6_K. */
#ifndef OKV_KERNELS_MATMUL_KQ_SCALES_H
#define OKV_KERNELS_MATMUL_KQ_SCALES_H

#include <immintrin.h>
#include <stdint.h>
#include <string.h>

#define KQ_INLINE static inline __attribute__((always_inline)) KQ_TARGET

/* The 12 scale bytes in the low 96 bits. */
KQ_INLINE __m128i kq_load12(const uint8_t *s) {
    uint32_t t;
    memcpy(&t, s + 8, 4);
    return _mm_insert_epi32(_mm_loadl_epi64((const __m128i *)s), (int)t, 2);
}

/* Q3_K: the 16 signed scales as int8 (okv_q3_K_scale j in byte j): low 4
 * bits from byte j (j < 8) or the high nibble of byte j - 8; top 2 bits
 * from byte 8 + j % 4 at bit 2 * (j / 4); minus 32. */
KQ_INLINE __m128i kq_q3_K_scales(const uint8_t *s) {
    const __m128i low4 = _mm_set1_epi8(0x0F);
    const __m128i v = _mm_loadl_epi64((const __m128i *)s);
    const __m128i lo = _mm_unpacklo_epi64(_mm_and_si128(v, low4), _mm_and_si128(_mm_srli_epi16(v, 4), low4));
    uint32_t t;
    memcpy(&t, s + 8, 4);
    const __m128i hi = _mm_and_si128(_mm_srlv_epi32(_mm_set1_epi32((int)t), _mm_setr_epi32(0, 2, 4, 6)),
                                     _mm_set1_epi8(3));
    return _mm_sub_epi8(_mm_or_si128(lo, _mm_slli_epi16(hi, 4)), _mm_set1_epi8(32));
}

/* Q4_K/Q5_K: the 8 scales in bytes 0-7 and the 8 mins in bytes 8-15
 * (okv_q4_K_scale_min j): j < 4 from the low 6 bits of bytes j and j + 4;
 * j >= 4 low nibble (scale) or high nibble (min) of byte j + 4, top 2 bits
 * from the top bits of byte j - 4 (scale) or j (min). */
KQ_INLINE __m128i kq_q4_K_scales_mins(const uint8_t *s) {
    const __m128i v = kq_load12(s);
    /* the low parts' source bytes, and the top bits' (0x80: none) */
    const __m128i p = _mm_shuffle_epi8(v, _mm_setr_epi8(0, 1, 2, 3, 8, 9, 10, 11, 4, 5, 6, 7, 8, 9, 10, 11));
    const __m128i q = _mm_shuffle_epi8(v, _mm_setr_epi8(-128, -128, -128, -128, 0, 1, 2, 3, -128, -128, -128, -128,
                                                        4, 5, 6, 7));
    const __m128i keep = _mm_setr_epi8(63, 63, 63, 63, 15, 15, 15, 15, 63, 63, 63, 63, 0, 0, 0, 0);
    const __m128i high_nib = _mm_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 15, 15, 15, 15);
    const __m128i low = _mm_or_si128(_mm_and_si128(p, keep), _mm_and_si128(_mm_srli_epi16(p, 4), high_nib));
    const __m128i top = _mm_slli_epi16(_mm_and_si128(_mm_srli_epi16(q, 6), _mm_set1_epi8(3)), 4);
    return _mm_or_si128(low, top);
}

#undef KQ_INLINE

#endif
