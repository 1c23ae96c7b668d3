/* The f16 row conversions (F16C on x86, FCVTL/FCVTN on aarch64, scalar
 * elsewhere) against f16.h's scalar forms, which test_threads checks by
 * hand: every half to f32, and a sweep of f32 bit patterns (every exponent,
 * ties, subnormal results, overflow, infinities, NaNs) to f16, at row
 * lengths that leave a scalar tail.  Bit for bit, except that a signalling
 * NaN half may come back quieted (the hardware conversions quiet it). */
#include <math.h>
#include <stdint.h>

#include "check.h"
#include "kernels/cpu.h"
#include "kernels/f16.h"

static int same_f32(float a, float b, uint16_t h) {
    uint32_t x, y;
    memcpy(&x, &a, 4);
    memcpy(&y, &b, 4);
    if (x == y) return 1;
    /* a signalling NaN half (quiet bit clear): the same NaN, quieted */
    return (h & 0x7c00) == 0x7c00 && (h & 0x3ff) && !(h & 0x200) && (x | 0x400000u) == (y | 0x400000u);
}

int main(void) {
    printf("row conversions of %s\n", okv_isa_name(okv_cpu_best_isa()));
    enum { N = 65536 };
    static okv_f16 h[N], h2[N];
    static float f[N];
    for (int i = 0; i < N; i++) h[i] = (okv_f16)i;
    for (int len = N; len >= N - 7; len -= 7) { /* a whole number of 8, and a tail */
        memset(f, 0, sizeof f);
        okv_f16_to_f32_row(f, h, len);
        int bad = 0, first = -1;
        for (int i = 0; i < len; i++)
            if (!same_f32(f[i], okv_f16_to_f32(h[i]), h[i])) { bad++; if (first < 0) first = i; }
        CHECK(bad == 0, "f16 -> f32, %d values: %d differ from the scalar form (first 0x%04x)", len, bad, first);
    }
    /* f32 -> f16: 2^16 patterns spread over all 2^32 (a stride coprime with
     * 2^32 plus the low bits that decide rounding), then the edges */
    static float src[N];
    uint32_t b = 0;
    for (int i = 0; i < N; i++, b += 0x9E3779B1u) {
        uint32_t v = b ^ (uint32_t)(i & 0x1fff); /* vary the bits below f16's mantissa */
        memcpy(&src[i], &v, 4);
    }
    static const uint32_t edges[] = {0x00000000u, 0x80000000u, 0x7f800000u, 0xff800000u, 0x7fc00000u, 0x7f800001u,
                                     0xffa00000u, 0x477ff000u, 0x477fefffu, 0x477fe000u, 0x38800000u, 0x387fffffu,
                                     0x33000000u, 0x33000001u, 0x32ffffffu, 0x3f801000u, 0x3f803000u, 0x3f800fffu};
    for (size_t i = 0; i < sizeof edges / sizeof edges[0]; i++) memcpy(&src[i], &edges[i], 4);
    for (int len = N; len >= N - 7; len -= 7) {
        memset(h2, 0, sizeof h2);
        okv_f32_to_f16_row(h2, src, len);
        int bad = 0, first = -1;
        for (int i = 0; i < len; i++)
            if (h2[i] != okv_f32_to_f16(src[i])) { bad++; if (first < 0) first = i; }
        CHECK(bad == 0, "f32 -> f16, %d values: %d differ from the scalar form (first at %d)", len, bad, first);
    }
    return check_done();
}
