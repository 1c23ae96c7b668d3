/* Block formats against values worked out by hand from the layout, and
 * ggml's reference quantizers on blocks whose results are known exactly. */
#include <math.h>

#include "check.h"
#include "kernels/matmul_impl.h"
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
    CHECK(okv_ggml_row_size(OKV_GGML_Q4_K, 512) == 288 && okv_ggml_row_size(OKV_GGML_Q4_K, 128) == 0, "q4_K");
    CHECK(okv_ggml_row_size(OKV_GGML_Q6_K, 256) == 210 && okv_ggml_row_size(OKV_GGML_Q2_K, 256) == 84, "q6_K q2_K");
    CHECK(okv_ggml_row_size(OKV_GGML_IQ2_XXS, 256) == 66 && !strcmp(okv_ggml_type_name(OKV_GGML_Q5_K), "q5_K"),
          "types offkv does not run keep their sizes and names");
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

/* The formats below: blocks built byte by byte, expected values worked out
 * by hand from the layout (quant.h, ggml-common.h) and written here.  f16
 * scales: 0x3800 = 0.5, 0x3C00 = 1, 0x4000 = 2, 0xBC00 = -1. */

static void test_dequant_q4_1(void) {
    block_q4_1 b;
    memset(&b, 0, sizeof b);
    b.d = 0x4000;
    b.m = 0xBC00;
    b.qs[0] = 0x3A;  /* low 10 -> value 0 = 10*2 - 1, high 3 -> value 16 = 3*2 - 1 */
    b.qs[15] = 0xF0; /* low 0 -> value 15 = -1, high 15 -> value 31 = 29 */
    float out[32];
    okv_dequantize_row_q4_1(&b, out, 32);
    CHECK(out[0] == 19.0f && out[16] == 5.0f && out[15] == -1.0f && out[31] == 29.0f, "%g %g %g %g", out[0],
          out[16], out[15], out[31]);
    CHECK(out[1] == -1.0f && out[17] == -1.0f, "zero nibbles are m: %g %g", out[1], out[17]);
    float gen[32];
    CHECK(okv_dequantize_row(OKV_GGML_Q4_1, &b, gen, 32) && memcmp(gen, out, sizeof gen) == 0, "generic");
}

static void test_dequant_q5_0(void) {
    block_q5_0 b;
    memset(&b, 0, sizeof b);
    b.d = 0x3800;
    /* fifth bits: bit j of the little-endian word qh for value j */
    b.qh[0] = 0x01; /* value 0 */
    b.qh[2] = 0x02; /* value 17 */
    b.qh[3] = 0x80; /* value 31 */
    b.qs[0] = 0x21;  /* value 0 = (1 | 16) - 16 = 1; value 16 = 2 - 16 = -14 */
    b.qs[15] = 0xF5; /* value 15 = 5 - 16 = -11; value 31 = (15 | 16) - 16 = 15 */
    float out[32];
    okv_dequantize_row_q5_0(&b, out, 32);
    CHECK(out[0] == 0.5f && out[16] == -7.0f, "%g %g", out[0], out[16]);
    CHECK(out[1] == -8.0f && out[17] == 0.0f, "value 1 = -16, value 17 = 16 - 16: %g %g", out[1], out[17]);
    CHECK(out[15] == -5.5f && out[31] == 7.5f, "%g %g", out[15], out[31]);
}

static void test_dequant_q5_1(void) {
    block_q5_1 b;
    memset(&b, 0, sizeof b);
    b.d = 0x3C00;
    b.m = 0x4000;
    b.qh[0] = 0x08;  /* value 3's fifth bit */
    b.qs[3] = 0x4C;  /* value 3 = (12 | 16) * 1 + 2 = 30; value 19 = 4 + 2 */
    float out[32];
    okv_dequantize_row_q5_1(&b, out, 32);
    CHECK(out[3] == 30.0f && out[19] == 6.0f && out[0] == 2.0f, "%g %g %g", out[3], out[19], out[0]);
}

static void test_dequant_q2_K(void) {
    block_q2_K b;
    memset(&b, 0, sizeof b);
    b.d = 0x3C00;    /* 1 */
    b.dmin = 0x3800; /* 0.5 */
    /* value = d * (scales[s] & 15) * q - dmin * (scales[s] >> 4); sub-block s
     * of 16: in each half (128 values, qs[32h..32h+31]) s takes bit pair
     * (s % 8) / 2 of qs[l] (even s) or qs[16 + l] (odd s) */
    b.scales[0] = 0x23; /* values 0-15: scale 3, min 2 */
    b.scales[1] = 0x05; /* values 16-31: scale 5, min 0 */
    b.scales[2] = 0x11; /* values 32-47: bits 2-3 of qs[0..15] */
    b.scales[8] = 0xF1; /* values 128-143: bits 0-1 of qs[32..47], min 15 */
    b.qs[0] = 0x0B;     /* bits 0-1 = 3 (value 0), bits 2-3 = 2 (value 32) */
    b.qs[16] = 0x03;    /* value 16 */
    b.qs[32] = 0x02;    /* value 128 */
    float out[256];
    okv_dequantize_row_q2_K(&b, out, 256);
    CHECK(out[0] == 8.0f && out[1] == -1.0f, "3*3 - 0.5*2, 0 - 1: %g %g", out[0], out[1]);
    CHECK(out[16] == 15.0f && out[17] == 0.0f, "%g %g", out[16], out[17]);
    CHECK(out[32] == 1.5f && out[33] == -0.5f, "%g %g", out[32], out[33]);
    CHECK(out[128] == -5.5f && out[129] == -7.5f && out[48] == 0.0f, "%g %g %g", out[128], out[129], out[48]);
}

static void test_dequant_q3_K(void) {
    block_q3_K b;
    memset(&b, 0, sizeof b);
    b.d = 0x4000; /* 2 */
    /* value = d * (scale_s - 32) * (2 low bits - (high bit ? 0 : 4)).  6-bit
     * scale s: low 4 bits in scales[s] (s < 8) or scales[s-8] >> 4, top 2 in
     * scales[8 + s % 4] at bit 2 * (s / 4); all-zero bytes give -32 */
    b.scales[0] = 0x01; b.scales[8] = 0x02;  /* s 0: 1 | 2 << 4 = 33 -> 1 */
    b.scales[1] = 0xD0; b.scales[9] = 0x10;  /* s 9: 13 | 1 << 4 = 29 -> -3 */
    memset(b.hmask, 0xFF, sizeof b.hmask);
    /* values 0-15: qs[0..15] bits 0-1, hmask bit 0 */
    b.qs[0] = 0x03;                      /* value 0: 3 */
    b.qs[1] = 0x01; b.hmask[1] = 0xFE;   /* value 1: 1 - 4 */
    /* values 80-95 (s 5, scale -32): qs[16..31] bits 4-5, hmask bit 2 */
    b.qs[16] = 0x10;                     /* value 80: 1 */
    /* values 144-159 (s 9): qs[48..63] bits 0-1, hmask[16..31] bit 4 */
    b.qs[48] = 0x02;                     /* value 144: 2 */
    b.hmask[17] = 0xEF;                  /* value 145: 0 - 4 */
    float out[256];
    okv_dequantize_row_q3_K(&b, out, 256);
    CHECK(out[0] == 6.0f && out[1] == -6.0f && out[2] == 0.0f, "%g %g %g", out[0], out[1], out[2]);
    CHECK(out[80] == -64.0f && out[16] == 0.0f, "%g %g", out[80], out[16]);
    CHECK(out[144] == -12.0f && out[145] == 24.0f, "%g %g", out[144], out[145]);
}

static void test_dequant_q4_K(void) {
    block_q4_K b;
    memset(&b, 0, sizeof b);
    b.d = 0x3C00;    /* 1 */
    b.dmin = 0x3800; /* 0.5 */
    /* sub-blocks of 32, value = d * sc * q - dmin * m.  sub j < 4: sc =
     * scales[j] & 63, m = scales[j+4] & 63; j >= 4: low 4 bits from
     * scales[j+4] (sc low nibble, m high nibble), top 2 bits from the top
     * bits of scales[j-4] (sc) and scales[j] (m) */
    b.scales[0] = 5; b.scales[4] = 3;  /* sub 0: sc 5, m 3 */
    b.scales[1] = 0xBF;                /* sub 1: sc 63; top bits 2 -> sub 5's sc */
    b.scales[5] = 0xC0;                /* sub 1: m 0; top bits 3 -> sub 5's m */
    b.scales[9] = 0x15;                /* sub 5: sc 5 | 2 << 4 = 37, m 1 | 3 << 4 = 49 */
    /* sub 2i: low nibbles of qs[32i..32i+31], sub 2i+1: high nibbles */
    b.qs[0] = 0xA7;  /* value 0: 7, value 32: 10 */
    b.qs[64] = 0xF0; /* value 128 (sub 4, all 0): 0, value 160 (sub 5): 15 */
    float out[256];
    okv_dequantize_row_q4_K(&b, out, 256);
    CHECK(out[0] == 33.5f && out[1] == -1.5f, "5*7 - 0.5*3: %g %g", out[0], out[1]);
    CHECK(out[32] == 630.0f && out[33] == 0.0f, "%g %g", out[32], out[33]);
    CHECK(out[160] == 530.5f && out[161] == -24.5f && out[128] == 0.0f, "37*15 - 0.5*49: %g %g %g", out[160],
          out[161], out[128]);
}

static void test_dequant_q5_K(void) {
    block_q5_K b;
    memset(&b, 0, sizeof b);
    b.d = 0x4000;    /* 2 */
    b.dmin = 0x3C00; /* 1 */
    b.scales[0] = 1; b.scales[4] = 2;  /* sub 0: sc 1, m 2 */
    b.scales[1] = 3;                   /* sub 1: sc 3, m 0 */
    b.scales[11] = 0x21;               /* sub 7: sc 1, m 2 */
    /* fifth bit of value l of sub-block s: bit s of qh[l] */
    b.qs[0] = 0x4F; b.qh[0] = 0x03;    /* value 0: 15 + 16, value 32: 4 + 16 */
    b.qh[1] = 0x02;                    /* value 1: 0, value 33: 0 + 16 */
    b.qs[127] = 0x30; b.qh[31] = 0x80; /* value 255 (sub 7, high nibble of qs[127]): 3 + 16 */
    float out[256];
    okv_dequantize_row_q5_K(&b, out, 256);
    CHECK(out[0] == 60.0f && out[32] == 120.0f, "2*31 - 2, 2*3*20: %g %g", out[0], out[32]);
    CHECK(out[1] == -2.0f && out[33] == 96.0f, "%g %g", out[1], out[33]);
    CHECK(out[255] == 36.0f, "2*19 - 2: %g", out[255]);
}

static void test_dequant_q6_K(void) {
    block_q6_K b;
    memset(&b, 0, sizeof b);
    b.d = 0x3800; /* 0.5 */
    b.scales[0] = 2; b.scales[2] = -3; b.scales[4] = 1; b.scales[6] = 4; b.scales[15] = -1;
    /* in each half (128 values): value l, l+32, l+64, l+96 (l < 32) take the
     * low nibble of ql[l], ql[l+32], the high nibble of ql[l], ql[l+32], and
     * bits 0-1, 2-3, 4-5, 6-7 of qh[l] on top; minus 32; scale per 16 */
    b.ql[0] = 0x5A;
    b.ql[32] = 0xF1;
    b.qh[0] = 0xD8; /* 3, 1, 2, 0 from the top */
    b.ql[127] = 0x70; b.qh[63] = 0x40; /* value 255: 7 | 1 << 4 */
    float out[256];
    okv_dequantize_row_q6_K(&b, out, 256);
    CHECK(out[0] == -22.0f && out[32] == -1.5f, "0.5*2*(10-32), 0.5*-3*(33-32): %g %g", out[0], out[32]);
    CHECK(out[64] == -5.5f && out[96] == 62.0f, "0.5*1*(21-32), 0.5*4*(63-32): %g %g", out[64], out[96]);
    CHECK(out[1] == -32.0f && out[255] == 4.5f, "%g %g", out[1], out[255]);
}

static void test_quantize_q8_1(void) {
    float x[64] = {0};
    x[0] = 127.0f; x[1] = -2.5f; x[2] = 0.5f; x[3] = 1.5f; /* amax 127: d 1, x * 127/127 */
    x[32] = -63.5f;                                        /* amax 63.5: d 0.5 */
    block_q8_1 y[2];
    okv_quantize_row_q8_1(x, y, 64);
    CHECK(y[0].d == 0x3C00 && y[0].qs[0] == 127, "%#x %d", y[0].d, y[0].qs[0]);
    CHECK(y[0].qs[1] == -2 && y[0].qs[2] == 0 && y[0].qs[3] == 2, "half to even: %d %d %d", y[0].qs[1],
          y[0].qs[2], y[0].qs[3]);
    CHECK(y[0].s == 0x57F0, "s = 1 * (127 - 2 + 2) = 127: %#x", y[0].s);
    CHECK(y[1].d == 0x3800 && y[1].qs[0] == -127 && y[1].s == 0xD3F0, "s = 0.5 * -127: %#x %d %#x", y[1].d,
          y[1].qs[0], y[1].s);
}

static void test_quantize_q8_K(void) {
    float x[3 * 256] = {0};
    /* block 0: the largest magnitude is -4, so iscale = -127/-4 = 31.75 */
    x[0] = 2.0f; x[5] = -4.0f; x[6] = 1.0f; x[7] = -1.0f; x[17] = 3.0f; x[20] = 0.0315f;
    /* block 1: +5 first, then -5: max is +5, iscale = -25.4 */
    x[256] = 5.0f; x[257] = -5.0f;
    /* block 2 all zero */
    block_q8_K y[3];
    okv_quantize_row_q8_K(x, y, 3 * 256);
    CHECK(y[0].qs[0] == 64 && y[0].qs[5] == -127 && y[0].qs[6] == 32 && y[0].qs[7] == -32,
          "63.5 to even, -127, 31.75, -31.75: %d %d %d %d", y[0].qs[0], y[0].qs[5], y[0].qs[6], y[0].qs[7]);
    CHECK(y[0].qs[17] == 95 && y[0].qs[20] == 1 && y[0].qs[1] == 0, "%d %d", y[0].qs[17], y[0].qs[20]);
    CHECK(y[0].d == 1.0f / 31.75f, "d = 1/iscale: %g", y[0].d);
    CHECK(y[0].bsums[0] == 64 - 127 + 32 - 32 && y[0].bsums[1] == 96 && y[0].bsums[2] == 0, "bsums %d %d",
          y[0].bsums[0], y[0].bsums[1]);
    CHECK(y[1].qs[0] == -127 && y[1].qs[1] == 127 && y[1].d == 1.0f / (-127.0f / 5.0f), "%d %d %g", y[1].qs[0],
          y[1].qs[1], y[1].d);
    CHECK(y[2].d == 0.0f && y[2].qs[0] == 0 && y[2].bsums[15] == 0, "zero block");
}

/* okv_dequantize_row reaches each format's dequantizer through the type
 * table, and refuses what it cannot convert. */
static void test_generic_dispatch(void) {
    static const int types[] = {OKV_GGML_Q4_1, OKV_GGML_Q5_0, OKV_GGML_Q5_1, OKV_GGML_Q2_K,
                                OKV_GGML_Q3_K, OKV_GGML_Q4_K, OKV_GGML_Q5_K, OKV_GGML_Q6_K};
    uint8_t raw[2 * 210];
    for (size_t i = 0; i < sizeof raw; i++) raw[i] = (uint8_t)(i * 37 + 11);
    for (size_t t = 0; t < sizeof types / sizeof types[0]; t++) {
        const int64_t k = 2 * okv_ggml_block_size(types[t]) > 256 ? 256 : 2 * okv_ggml_block_size(types[t]);
        float a[512], b[512];
        CHECK(okv_dequantize_row(types[t], raw, a, k), "%s", okv_ggml_type_name(types[t]));
        okv_wtype_get(types[t])->to_float(raw, b, k);
        CHECK(memcmp(a, b, (size_t)k * sizeof(float)) == 0, "%s", okv_ggml_type_name(types[t]));
    }
    float out[256];
    CHECK(!okv_dequantize_row(OKV_GGML_IQ2_XXS, raw, out, 256), "iq2_xxs is not runnable");
    CHECK(!okv_dequantize_row(OKV_GGML_Q4_K, raw, out, 128), "k not whole blocks");
}

/* A block whose largest magnitude is subnormal: 127 / amax overflows to
 * infinity.  The activation quantizers must still give values in -127..127
 * (the largest one at +-127) and no undefined float-to-int cast (the model
 * fuzzer found one through a damaged Q4_1 model; UBSan catches it here). */
static void test_quantize_subnormal_block(void) {
    float x[OKV_QK] = {0};
    x[3] = 1e-45f;
    x[7] = -1e-45f;
    x[9] = 3e-45f;
    block_q8_1 y1;
    okv_quantize_row_q8_1(x, &y1, OKV_QK);
    int8_t q[OKV_QK];
    float d;
    okv_mm_quantize_act_scalar(x, OKV_QK, q, &d);
    int bad = 0;
    for (int j = 0; j < OKV_QK; j++) {
        const int want = j == 3 ? 127 : j == 7 ? -127 : j == 9 ? 127 : 0;
        bad += y1.qs[j] != want || q[j] != want;
    }
    CHECK(bad == 0, "subnormal block: %d values off (q8_1 qs[3] %d, qs[7] %d; q8_0 q[3] %d)", bad, y1.qs[3],
          y1.qs[7], q[3]);
}

int main(void) {
    test_quantize_subnormal_block();
    test_sizes();
    test_dequant_q8_0();
    test_dequant_q4_0();
    test_bf16_f16();
    test_quantize_q8_0();
    test_quantize_q4_0();
    test_roundtrip();
    test_dequant_q4_1();
    test_dequant_q5_0();
    test_dequant_q5_1();
    test_dequant_q2_K();
    test_dequant_q3_K();
    test_dequant_q4_K();
    test_dequant_q5_K();
    test_dequant_q6_K();
    test_quantize_q8_1();
    test_quantize_q8_K();
    test_generic_dispatch();
    return check_done();
}
