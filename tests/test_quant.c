/* Block formats against values worked out by hand from the layout, and
 * ggml's reference quantizers on blocks whose results are known exactly. */
#include <math.h>

#include "check.h"
#include "kernels/quant.h"
#include "kernels/wtype.h"

static uint64_t rng_state = 0x1234567;
static float frand(void) { /* uniform in [-1, 1) */
    rng_state ^= rng_state << 13; rng_state ^= rng_state >> 7; rng_state ^= rng_state << 17;
    return (float)((rng_state >> 40) * (2.0 / (1ull << 24)) - 1.0);
}

static void test_sizes(void) {
    CHECK(okv_ggml_row_size(OKV_GGML_Q8_0, 64) == 68, "q8_0 64");
    CHECK(okv_ggml_row_size(OKV_GGML_Q4_0, 64) == 36, "q4_0 64");
    CHECK(okv_ggml_row_size(OKV_GGML_Q4_0, 48) == 0, "q4_0 48 is not whole blocks");
    CHECK(okv_ggml_row_size(OKV_GGML_F16, 3) == 6, "f16 3");
    CHECK(okv_ggml_row_size(OKV_GGML_BF16, 5) == 10, "bf16 5");
    CHECK(okv_ggml_row_size(OKV_GGML_F32, 5) == 20, "f32 5");
    CHECK(okv_ggml_row_size(OKV_GGML_Q4_1, 64) == 40, "q4_1 is known to the type table (20-byte blocks)");
    CHECK(!okv_wtype_runnable(4) && okv_wtype_runnable(3) && okv_wtype_runnable(30) && okv_wtype_runnable(OKV_GGML_Q4_K) &&
              !okv_wtype_runnable(OKV_GGML_Q8_K) && !okv_wtype_runnable(OKV_GGML_IQ2_XXS),
          "runnable set");
}

static void test_dequant_q8_0(void) {
    block_q8_0 b[2];
    memset(b, 0, sizeof b);
    b[0].d = 0x3800; /* 0.5 */
    b[0].qs[0] = -3; b[0].qs[1] = 127; b[0].qs[31] = -128;
    b[1].d = 0xC000; /* -2 */
    b[1].qs[5] = 7;
    float out[64];
    okv_dequantize_row_q8_0(b, out, 64);
    CHECK(out[0] == -1.5f && out[1] == 63.5f && out[31] == -64.0f, "%g %g %g", out[0], out[1], out[31]);
    CHECK(out[2] == 0.0f && out[30] == 0.0f, "zeros");
    CHECK(out[32 + 5] == -14.0f && out[32] == 0.0f, "block 1: %g", out[37]);
    /* the 34-byte stride: block 1's scale sits at byte 34 */
    const uint8_t *raw = (const uint8_t *)b;
    CHECK(raw[34] == 0x00 && raw[35] == 0xC0 && raw[2] == 0xFD, "byte layout");
    float gen[64];
    CHECK(okv_dequantize_row(OKV_GGML_Q8_0, b, gen, 64) && memcmp(gen, out, sizeof gen) == 0, "generic");
}

static void test_dequant_q4_0(void) {
    block_q4_0 b;
    memset(b.qs, 0x88, sizeof b.qs); /* 8 in both nibbles = 0 */
    b.d = 0x4000;                     /* 2 */
    b.qs[0] = 0x1F;                   /* low 15 -> value 0 = 14, high 1 -> value 16 = -14 */
    b.qs[15] = 0x80;                  /* low 0 -> value 15 = -16, high 8 -> value 31 = 0 */
    b.qs[3] = 0x79;                   /* low 9 -> value 3 = 2, high 7 -> value 19 = -2 */
    float out[32];
    okv_dequantize_row_q4_0(&b, out, 32);
    CHECK(out[0] == 14.0f && out[16] == -14.0f, "%g %g", out[0], out[16]);
    CHECK(out[15] == -16.0f && out[31] == 0.0f, "%g %g", out[15], out[31]);
    CHECK(out[3] == 2.0f && out[19] == -2.0f, "%g %g", out[3], out[19]);
    CHECK(out[1] == 0.0f && out[17] == 0.0f, "zeros");
}

static void test_bf16_f16(void) {
    const okv_bf16 h[3] = {0x3F80, 0xC040, 0x4049};
    float out[3];
    CHECK(okv_dequantize_row(OKV_GGML_BF16, h, out, 3), "bf16 row");
    CHECK(out[0] == 1.0f && out[1] == -3.0f && out[2] == 3.140625f, "%g %g %g", out[0], out[1], out[2]);
    CHECK(okv_f32_to_bf16(1.0f) == 0x3F80, "1");
    CHECK(okv_f32_to_bf16(3.14159265f) == 0x4049, "pi rounds down");
    CHECK(okv_f32_to_bf16(1.00390625f) == 0x3F80, "tie to even (down)");
    CHECK(okv_f32_to_bf16(1.01171875f) == 0x3F82, "tie to even (up)");
    CHECK(okv_f32_to_bf16(NAN) != 0x7F80 && (okv_f32_to_bf16(NAN) & 0x7F80) == 0x7F80, "NaN stays NaN");
    const okv_f16 f[2] = {0x3C00, 0xB800};
    CHECK(okv_dequantize_row(OKV_GGML_F16, f, out, 2) && out[0] == 1.0f && out[1] == -0.5f, "f16 row");
}

static void test_quantize_q8_0(void) {
    float x[64] = {0};
    x[0] = 127.0f; x[1] = -5.0f; x[2] = 2.5f; x[3] = -2.5f; x[4] = 0.49f; x[5] = -126.6f;
    /* block 1 all zero */
    block_q8_0 y[2];
    okv_quantize_row_q8_0(x, y, 64);
    CHECK(y[0].d == 0x3C00, "d = 127/127 = 1: %#x", y[0].d);
    CHECK(y[0].qs[0] == 127 && y[0].qs[1] == -5, "%d %d", y[0].qs[0], y[0].qs[1]);
    CHECK(y[0].qs[2] == 3 && y[0].qs[3] == -3, "ties away from zero: %d %d", y[0].qs[2], y[0].qs[3]);
    CHECK(y[0].qs[4] == 0 && y[0].qs[5] == -127 && y[0].qs[6] == 0, "%d %d", y[0].qs[4], y[0].qs[5]);
    CHECK(y[1].d == 0 && y[1].qs[0] == 0 && y[1].qs[31] == 0, "zero block");
}

static void test_quantize_q4_0(void) {
    float x[64] = {0};
    /* block 0: largest magnitude is -8 (first), so d = -8/-8 = 1 */
    x[0] = -8.0f; x[1] = 7.0f; x[2] = 3.0f; x[3] = -2.6f; x[4] = 0.5f; x[5] = 8.0f;
    x[16] = 2.0f; x[17] = -1.0f;
    /* block 1: largest is +16, so d = -2 */
    x[32] = 16.0f; x[33] = -14.0f; x[34] = 2.0f; x[48] = -3.0f;
    block_q4_0 y[2];
    okv_quantize_row_q4_0(x, y, 64);
    CHECK(y[0].d == 0x3C00, "d %#x", y[0].d);
    /* q = min(15, trunc(x/d + 8.5)); low nibble element j, high j+16 */
    CHECK((y[0].qs[0] & 15) == 0 && (y[0].qs[1] & 15) == 15 && (y[0].qs[2] & 15) == 11,
          "%#x %#x %#x", y[0].qs[0], y[0].qs[1], y[0].qs[2]);
    CHECK((y[0].qs[3] & 15) == 5 && (y[0].qs[4] & 15) == 9, "truncation: %#x %#x", y[0].qs[3], y[0].qs[4]);
    CHECK((y[0].qs[5] & 15) == 15, "clamped to 15: %#x", y[0].qs[5]);
    CHECK(y[0].qs[0] >> 4 == 10 && y[0].qs[1] >> 4 == 7 && y[0].qs[2] >> 4 == 8,
          "high nibbles %#x %#x %#x", y[0].qs[0], y[0].qs[1], y[0].qs[2]);
    CHECK(y[1].d == 0xC000, "d %#x", y[1].d);
    CHECK((y[1].qs[0] & 15) == 0 && (y[1].qs[1] & 15) == 15 && (y[1].qs[2] & 15) == 7,
          "%#x %#x %#x", y[1].qs[0], y[1].qs[1], y[1].qs[2]);
    CHECK(y[1].qs[0] >> 4 == 10, "-3/-2 + 8.5 = 10: %#x", y[1].qs[0]);
    float back[64];
    okv_dequantize_row_q4_0(y, back, 64);
    CHECK(back[32] == 16.0f && back[33] == -14.0f && back[48] == -4.0f, "%g %g %g", back[32], back[33], back[48]);
}

static void test_roundtrip(void) {
    enum { K = 32 * 40 };
    float x[K], back[K];
    for (int i = 0; i < K; i++) x[i] = frand() * (float)(1 + i / 32);
    block_q8_0 q8[K / 32];
    block_q4_0 q4[K / 32];
    okv_quantize_row_q8_0(x, q8, K);
    okv_dequantize_row_q8_0(q8, back, K);
    int bad = 0;
    for (int i = 0; i < K; i++) {
        /* rounding to q costs <= d/2; d itself is rounded to f16 (2^-11) */
        float d = okv_f16_to_f32(q8[i / 32].d);
        if (fabsf(back[i] - x[i]) > d * 0.5f + fabsf(x[i]) * 0x1p-10f) bad++;
    }
    CHECK(bad == 0, "%d q8_0 values off by more than d/2", bad);
    okv_quantize_row_q4_0(x, q4, K);
    okv_dequantize_row_q4_0(q4, back, K);
    bad = 0;
    for (int i = 0; i < K; i++) {
        /* truncation of x/d + 8.5 rounds half up (<= |d|/2), except values
         * clamped at 15, which are at most one step |d| away */
        float d = fabsf(okv_f16_to_f32(q4[i / 32].d));
        if (fabsf(back[i] - x[i]) > d + fabsf(x[i]) * 0x1p-10f) bad++;
    }
    CHECK(bad == 0, "%d q4_0 values off by more than d", bad);
}

int main(void) {
    test_sizes();
    test_dequant_q8_0();
    test_dequant_q4_0();
    test_bf16_f16();
    test_quantize_q8_0();
    test_quantize_q4_0();
    test_roundtrip();
    return check_done();
}
