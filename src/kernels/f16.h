/* Internal: IEEE half-precision conversion.  The scalar forms are exact
 * (round to nearest even) and serve as the reference for the SIMD rows. */
#ifndef OKV_KERNELS_F16_H
#define OKV_KERNELS_F16_H

#include <stdint.h>
#include <string.h>

typedef uint16_t okv_f16;

static inline float okv_f16_to_f32(okv_f16 h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1f;
    uint32_t man = h & 0x3ffu;
    uint32_t bits;
    if (exp == 0x1f) {
        bits = sign | 0x7f800000u | (man << 13);
    } else if (exp != 0) {
        bits = sign | ((exp + 112u) << 23) | (man << 13);
    } else if (man == 0) {
        bits = sign;
    } else { /* subnormal: normalize */
        int e = -1;
        do { man <<= 1; e++; } while (!(man & 0x400u));
        bits = sign | ((uint32_t)(112 - e) << 23) | ((man & 0x3ffu) << 13);
    }
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

static inline okv_f16 okv_f32_to_f16(float f) {
    uint32_t x;
    memcpy(&x, &f, sizeof x);
    uint32_t sign = (x >> 16) & 0x8000u;
    uint32_t absx = x & 0x7fffffffu;
    if (absx >= 0x7f800000u) /* inf or nan */
        return (okv_f16)(sign | 0x7c00u | (absx > 0x7f800000u ? 0x200u | ((absx >> 13) & 0x3ffu) : 0));
    if (absx >= 0x477ff000u) return (okv_f16)(sign | 0x7c00u); /* rounds to inf */
    if (absx < 0x38800000u) { /* result is subnormal or zero */
        if (absx < 0x33000000u) return (okv_f16)sign;
        uint32_t e = absx >> 23;
        uint32_t m = (absx & 0x7fffffu) | 0x800000u;
        uint32_t shift = 126 - e; /* 14 .. 24 */
        uint32_t half = m >> shift;
        uint32_t rem = m & ((1u << shift) - 1);
        uint32_t mid = 1u << (shift - 1);
        if (rem > mid || (rem == mid && (half & 1))) half++;
        return (okv_f16)(sign | half);
    }
    uint32_t r = absx + 0xfffu + ((absx >> 13) & 1u); /* round to nearest even */
    return (okv_f16)(sign | ((r - 0x38000000u) >> 13));
}

/* Row conversions, using F16C when the processor has it. */
void okv_f16_to_f32_row(float *dst, const okv_f16 *src, int64_t n);
void okv_f32_to_f16_row(okv_f16 *dst, const float *src, int64_t n);

#endif
