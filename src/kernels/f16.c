/* The row conversions: F16C on x86, the Advanced SIMD conversions on
 * aarch64 (FCVTL/FCVTN, part of ARMv8.0), both exact and rounding to
 * nearest even as the scalar forms of f16.h do. */
#include "kernels/cpu.h"
#include "kernels/f16.h"

#if defined(OKV_X86)
#include <immintrin.h>

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
#endif

#if defined(OKV_ARM)
#include <arm_neon.h>

static void f16_to_f32_neon(float *dst, const okv_f16 *src, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const float16x8_t h = vreinterpretq_f16_u16(vld1q_u16(src + i));
        vst1q_f32(dst + i, vcvt_f32_f16(vget_low_f16(h)));
        vst1q_f32(dst + i + 4, vcvt_high_f32_f16(h));
    }
    for (; i < n; i++) dst[i] = okv_f16_to_f32(src[i]);
}

static void f32_to_f16_neon(okv_f16 *dst, const float *src, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const float16x8_t h = vcvt_high_f16_f32(vcvt_f16_f32(vld1q_f32(src + i)), vld1q_f32(src + i + 4));
        vst1q_u16(dst + i, vreinterpretq_u16_f16(h));
    }
    for (; i < n; i++) dst[i] = okv_f32_to_f16(src[i]);
}
#endif

void okv_f16_to_f32_row(float *dst, const okv_f16 *src, int64_t n) {
#if defined(OKV_X86)
    if (okv_cpu_has_isa(OKV_ISA_AVX2)) { f16_to_f32_f16c(dst, src, n); return; }
#endif
#if defined(OKV_ARM)
    if (okv_cpu_best_isa() >= OKV_ISA_NEON) { f16_to_f32_neon(dst, src, n); return; }
#endif
    for (int64_t i = 0; i < n; i++) dst[i] = okv_f16_to_f32(src[i]);
}

void okv_f32_to_f16_row(okv_f16 *dst, const float *src, int64_t n) {
#if defined(OKV_X86)
    if (okv_cpu_has_isa(OKV_ISA_AVX2)) { f32_to_f16_f16c(dst, src, n); return; }
#endif
#if defined(OKV_ARM)
    if (okv_cpu_best_isa() >= OKV_ISA_NEON) { f32_to_f16_neon(dst, src, n); return; }
#endif
    for (int64_t i = 0; i < n; i++) dst[i] = okv_f32_to_f16(src[i]);
}
