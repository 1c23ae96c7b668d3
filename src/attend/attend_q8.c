/* Q8_0 K/V rows for the attention kernel.  The driver widens one block of
 * at most OKV_ATTEND_BR rows at a time into the item's workspace and runs
 * the f32 kernels on it: the cache is read once, at half the bytes of f16,
 * and the widened block stays in L1/L2 for the score and V passes. */
#include <stdint.h>

#include "attend/attend_impl.h"
#include "kernels/f16.h"
#include "kernels/quant.h"

#ifdef OKV_ATTEND_HAVE_X86
#include <immintrin.h>

OKV_TARGET_AVX512 static void widen_avx512(const block_q8_0 *b, int32_t n_blocks, float *dst) {
    for (int32_t i = 0; i < n_blocks; i++) {
        const __m512 d = _mm512_set1_ps(okv_f16_to_f32(b[i].d));
        const __m128i lo = _mm_loadu_si128((const __m128i *)b[i].qs);
        const __m128i hi = _mm_loadu_si128((const __m128i *)(b[i].qs + 16));
        _mm512_storeu_ps(dst + 32 * i, _mm512_mul_ps(d, _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(lo))));
        _mm512_storeu_ps(dst + 32 * i + 16, _mm512_mul_ps(d, _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(hi))));
    }
}

OKV_TARGET_AVX2 static void widen_avx2(const block_q8_0 *b, int32_t n_blocks, float *dst) {
    for (int32_t i = 0; i < n_blocks; i++) {
        const __m256 d = _mm256_set1_ps(okv_f16_to_f32(b[i].d));
        for (int j = 0; j < 32; j += 8) {
            const __m128i q = _mm_loadl_epi64((const __m128i *)(b[i].qs + j));
            _mm256_storeu_ps(dst + 32 * i + j, _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q))));
        }
    }
}
#elif defined(OKV_ARM)
#include <arm_neon.h>

/* d * (float)q lane by lane, as widen_scalar: SXTL twice, SCVTF, FMUL. */
static void widen_neon(const block_q8_0 *b, int32_t n_blocks, float *dst) {
    for (int32_t i = 0; i < n_blocks; i++) {
        const float d = okv_f16_to_f32(b[i].d);
        for (int j = 0; j < 32; j += 8) {
            const int16x8_t q = vmovl_s8(vld1_s8(b[i].qs + j));
            vst1q_f32(dst + 32 * i + j, vmulq_n_f32(vcvtq_f32_s32(vmovl_s16(vget_low_s16(q))), d));
            vst1q_f32(dst + 32 * i + j + 4, vmulq_n_f32(vcvtq_f32_s32(vmovl_high_s16(q)), d));
        }
    }
}
#endif

static void widen_scalar(const block_q8_0 *b, int32_t n_blocks, float *dst) {
    for (int32_t i = 0; i < n_blocks; i++) {
        const float d = okv_f16_to_f32(b[i].d);
        for (int j = 0; j < 32; j++) dst[32 * i + j] = d * (float)b[i].qs[j];
    }
}

void okv_attend_widen_q8(const void *rows, int32_t hd, int32_t nr, float *dst, okv_isa isa) {
    const block_q8_0 *b = rows;
    const int32_t full = hd / 32, tail = hd % 32, per_row = full + (tail > 0);
    void (*widen)(const block_q8_0 *, int32_t, float *) = widen_scalar;
#ifdef OKV_ATTEND_HAVE_X86
    if (isa == OKV_ISA_AVX512) widen = widen_avx512;
    else if (isa == OKV_ISA_AVX2) widen = widen_avx2;
#elif defined(OKV_ARM)
    if (isa == OKV_ISA_NEON) widen = widen_neon;
#else
    (void)isa;
#endif
    if (tail == 0) {
        widen(b, full * nr, dst); /* rows are whole blocks, back to back */
        return;
    }
    for (int32_t r = 0; r < nr; r++) {
        const block_q8_0 *br = b + (size_t)r * per_row;
        float *d = dst + (size_t)r * hd;
        widen(br, full, d);
        const float s = okv_f16_to_f32(br[full].d);
        for (int32_t j = 0; j < tail; j++) d[32 * full + j] = s * (float)br[full].qs[j];
    }
}
