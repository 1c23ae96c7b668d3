#include <immintrin.h>

#include "kernels/cpu.h"
#include "kernels/f16.h"

OKV_TARGET_AVX2 static void f16_to_f32_f16c(float *dst, const okv_f16 *src, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(src + i))));
    for (; i < n; i++) dst[i] = okv_f16_to_f32(src[i]);
}

OKV_TARGET_AVX2 static void f32_to_f16_f16c(okv_f16 *dst, const float *src, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm_storeu_si128((__m128i *)(dst + i),
                         _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT));
    for (; i < n; i++) dst[i] = okv_f32_to_f16(src[i]);
}

void okv_f16_to_f32_row(float *dst, const okv_f16 *src, int64_t n) {
    if (okv_cpu_has_isa(OKV_ISA_AVX2)) { f16_to_f32_f16c(dst, src, n); return; }
    for (int64_t i = 0; i < n; i++) dst[i] = okv_f16_to_f32(src[i]);
}

void okv_f32_to_f16_row(okv_f16 *dst, const float *src, int64_t n) {
    if (okv_cpu_has_isa(OKV_ISA_AVX2)) { f32_to_f16_f16c(dst, src, n); return; }
    for (int64_t i = 0; i < n; i++) dst[i] = okv_f32_to_f16(src[i]);
}
