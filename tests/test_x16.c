/* Q4_0, Q8_0, Q4_K, Q5_K, Q6_K and MXFP4 repacked sixteen blocks wide
 * (kernels/q4_0x16.h, q8_0x16.h, q4_Kx16.h, q6_Kx16.h), and Q4_0, Q8_0
 * and Q4_K for SMMLA (x16mm.h), the layouts the model keeps them in.
 * Checked against things written here:
 *   - their rows decode to the values of the ggml blocks they came from,
 *     decoded by each format's formula in this file;
 *   - every ISA's product is within the float-summation bound of a double
 *     product of those values with activations quantized by ggml's rule
 *     (x86 Q8_0 for Q4_0 and Q8_0, quantize_row_q8_K_ref for the K-quants;
 *     written plainly here);
 *   - the SMMLA layouts give the bits of the sixteen-wide ones;
 *   - every ISA's activation blocks are the scalar quantizer's bytes;
 *   - every ISA gives the same bits as the scalar kernel, and a column's
 *     result does not depend on n or on the columns beside it (the batch
 *     invariance a server promises);
 *   - (also qwen3moe and gpt-oss MXFP4_MOE models, whose expert matrices are
 *     repacked too: MXFP4 into mxfp4x16)
 *   - a model loaded with its Q4_0 matrices repacked gives the logits of the
 *     same model loaded without repacking (option "repack" = "off") to
 *     float rounding, and bit for bit alone and in a batch. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "gguf_copy.h"
#include "kernels/matmul.h"
#include "kernels/mxfp4x16.h"
#include "kernels/q4_0x16.h"
#include "kernels/q4_Kx16.h"
#include "kernels/q5_0x16.h"
#include "kernels/q6_Kx16.h"
#include "kernels/q8_0x16.h"
#include "kernels/quant.h"
#include "kernels/quantize.h"
#include "kernels/wtype.h"
#include "kernels/x16mm.h"
#include "model/model_impl.h"
#include "offkv/batch.h"
#include "offkv/offkv.h"

static uint64_t rng_state = 0x2545F4914F6CDD1Dull;
static float frand(void) {
    rng_state ^= rng_state << 13; rng_state ^= rng_state >> 7; rng_state ^= rng_state << 17;
    return (float)((rng_state >> 40) * (2.0 / (1ull << 24)) - 1.0);
}

/* Q4_0 by its formula: value j < 16 = (lo nibble of qs[j] - 8) d,
 * value 16 + j = (hi nibble of qs[j] - 8) d. */
static void decode_q4_0(const block_q4_0 *b, int64_t k, float *out) {
    for (int64_t i = 0; i < k / 32; i++) {
        const float d = okv_f16_to_f32(b[i].d);
        for (int j = 0; j < 16; j++) {
            out[i * 32 + j] = (float)((b[i].qs[j] & 15) - 8) * d;
            out[i * 32 + 16 + j] = (float)((b[i].qs[j] >> 4) - 8) * d;
        }
    }
}

/* Q8_0 by its formula: value j = qs[j] d. */
static void decode_q8_0(const block_q8_0 *b, int64_t k, float *out) {
    for (int64_t i = 0; i < k / 32; i++)
        for (int j = 0; j < 32; j++) out[i * 32 + j] = (float)b[i].qs[j] * okv_f16_to_f32(b[i].d);
}

/* Q5_0 by its formula: value j < 16 is the low nibble of qs[j], j >= 16 the
 * high nibble of qs[j - 16], plus 16 where bit j of the little-endian qh
 * is set; minus 16, times d. */
static void decode_q5_0(const uint8_t *b, int64_t k, float *out) {
    for (int64_t i = 0; i < k; i++) {
        const uint8_t *blk = b + (i / 32) * 22;
        okv_f16 d;
        memcpy(&d, blk, 2);
        const int j = (int)(i % 32), nib = j < 16 ? blk[6 + j] & 15 : blk[6 + j - 16] >> 4;
        const int hi = (blk[2 + j / 8] >> (j % 8)) & 1;
        out[i] = (float)(nib + 16 * hi - 16) * okv_f16_to_f32(d);
    }
}

/* Q4_K by its formula: sub-block j of a super-block has the 6-bit scale sc
 * and min m packed in 12 bytes (j < 4: bytes j and j + 4, low 6 bits; else
 * the nibbles of byte j + 4 and the top 2 bits of bytes j - 4 and j); its
 * value l is nibble j % 2 of qs[32 (j / 2) + l], times d sc, minus dmin m. */
/* MXFP4: the nibble's E2M1 value doubled (bit 3 the sign), times 2^(e - 128). */
static void decode_mxfp4(const uint8_t *b, int64_t k, float *out) {
    static const int mag[8] = {0, 1, 2, 3, 4, 6, 8, 12};
    for (int64_t i = 0; i < k; i++) {
        const uint8_t *blk = b + (i / 32) * 17;
        const int j = (int)(i % 32), q = j < 16 ? blk[1 + j] & 15 : blk[1 + j - 16] >> 4;
        out[i] = (float)((q & 8 ? -1 : 1) * mag[q & 7]) * ldexpf(1.0f, (int)blk[0] - 128);
    }
}

static void decode_q4_K(const block_q4_K *b, int64_t k, float *out, float *off) {
    for (int64_t s = 0; s < k / 256; s++) {
        const uint8_t *q = b[s].scales;
        /* (Q5_K: the same with a fifth bit, see decode_q5_K) */
        for (int j = 0; j < 8; j++) {
            const int sc = j < 4 ? q[j] & 63 : (q[j + 4] & 15) | (q[j - 4] >> 6) << 4;
            const int m = j < 4 ? q[j + 4] & 63 : (q[j + 4] >> 4) | (q[j] >> 6) << 4;
            const float d1 = okv_f16_to_f32(b[s].d) * (float)sc, m1 = okv_f16_to_f32(b[s].dmin) * (float)m;
            for (int l = 0; l < 32; l++) {
                out[s * 256 + 32 * j + l] = d1 * (float)((b[s].qs[32 * (j / 2) + l] >> (4 * (j % 2))) & 15) - m1;
                off[s * 256 + 32 * j + l] = m1;
            }
        }
    }
}

/* Q6_K by its formula: value 128h + 32q + l (half h, quarter q, l < 32)
 * has the low 4 bits of ql[64h + 32 (q % 2) + l] (low nibble for q < 2,
 * else high) and bits 2q, 2q + 1 of qh[32h + l] on top; minus 32, times d
 * and the scale of its 16-value sub-block. */
static void decode_q6_K(const block_q6_K *b, int64_t k, float *out) {
    for (int64_t s = 0; s < k / 256; s++)
        for (int idx = 0; idx < 256; idx++) {
            const int h = idx / 128, q = idx % 128 / 32, l = idx % 32;
            const uint8_t lo = b[s].ql[64 * h + 32 * (q % 2) + l];
            const int v = (q < 2 ? lo & 15 : lo >> 4) | ((b[s].qh[32 * h + l] >> (2 * q)) & 3) << 4;
            out[s * 256 + idx] = okv_f16_to_f32(b[s].d) * (float)b[s].scales[idx / 16] * (float)(v - 32);
        }
}

/* Q5_K by its formula: as Q4_K, plus 16 where bit j of qh[l] is set. */
static void decode_q5_K(const block_q5_K *b, int64_t k, float *out, float *off) {
    for (int64_t s = 0; s < k / 256; s++) {
        const uint8_t *q = b[s].scales;
        for (int j = 0; j < 8; j++) {
            const int sc = j < 4 ? q[j] & 63 : (q[j + 4] & 15) | (q[j - 4] >> 6) << 4;
            const int m = j < 4 ? q[j + 4] & 63 : (q[j + 4] >> 4) | (q[j] >> 6) << 4;
            const float d1 = okv_f16_to_f32(b[s].d) * (float)sc, m1 = okv_f16_to_f32(b[s].dmin) * (float)m;
            for (int l = 0; l < 32; l++) {
                const int v = ((b[s].qs[32 * (j / 2) + l] >> (4 * (j % 2))) & 15) + ((b[s].qh[l] >> j) & 1) * 16;
                out[s * 256 + 32 * j + l] = d1 * (float)v - m1;
                off[s * 256 + 32 * j + l] = m1;
            }
        }
    }
}

/* ggml's quantize_row_q8_K_ref: iscale = -127 / (the value of largest
 * magnitude), q = min(127, nearest-even(iscale x)), d = 1 / iscale. */
static void quantize_ref_k(const float *x, int64_t k, double *xq) {
    for (int64_t b = 0; b < k / 256; b++) {
        const float *xb = x + b * 256;
        float amax = 0, max = 0;
        for (int i = 0; i < 256; i++)
            if (fabsf(xb[i]) > amax) { amax = fabsf(xb[i]); max = xb[i]; }
        const float iscale = amax ? -127.0f / max : 0.0f;
        for (int i = 0; i < 256; i++)
            xq[b * 256 + i] = amax ? (double)fminf(nearbyintf(iscale * xb[i]), 127.0f) * (double)(1.0f / iscale) : 0.0;
    }
}

/* ggml's x86 activation quantizer: d = f16(amax/127), q = nearest-even(x * 127/amax). */
static void quantize_ref(const float *x, int64_t k, double *xq) {
    for (int64_t b = 0; b < k / 32; b++) {
        float amax = 0;
        for (int i = 0; i < 32; i++) amax = fmaxf(amax, fabsf(x[b * 32 + i]));
        const float id = amax ? 127.0f / amax : 0.0f;
        const float d = okv_f16_to_f32(okv_f32_to_f16(amax / 127.0f));
        for (int i = 0; i < 32; i++) xq[b * 32 + i] = (double)nearbyintf(x[b * 32 + i] * id) * d;
    }
}

/* One layout: its ggml source type, how to quantize and decode rows of it. */
typedef struct layout { int32_t type, src; const char *name; } layout;
static const layout LAYOUTS[] = {{OKV_WT_Q4_0X16, OKV_GGML_Q4_0, "q4_0x16"},
                                 {OKV_WT_Q8_0X16, OKV_GGML_Q8_0, "q8_0x16"},
                                 {OKV_WT_Q4_KX16, OKV_GGML_Q4_K, "q4_Kx16"},
                                 {OKV_WT_Q5_KX16, OKV_GGML_Q5_K, "q5_Kx16"},
                                 {OKV_WT_Q6_KX16, OKV_GGML_Q6_K, "q6_Kx16"},
                                 {OKV_WT_MXFP4X16, OKV_GGML_MXFP4, "mxfp4x16"},
                                 {OKV_WT_Q5_0X16, OKV_GGML_Q5_0, "q5_0x16"},
                                 {OKV_WT_Q4_0X16MM, OKV_GGML_Q4_0, "q4_0x16mm"},
                                 {OKV_WT_Q8_0X16MM, OKV_GGML_Q8_0, "q8_0x16mm"},
                                 {OKV_WT_Q4_KX16MM, OKV_GGML_Q4_K, "q4_Kx16mm"}};

/* Blocks whose every value has the format's largest magnitude (with all
 * activations at +-127 too, each lane's integer dot is as large as it gets:
 * 16 products of 4-bit or 8 of 5-bit weights reach 30480 and 31496, just
 * inside int16, where the kernels without VNNI add pairs), and small
 * scales.  Q8_0's blocks are -128 and 127 in turn: -128 gives the pairs
 * 2 * 128 * 127 of the kernels that move w's sign onto x, 127 (w + 128 =
 * 255, both nibbles 15) the sums 8 * 2 * 15 * 127 = 30480 of AVX2's block
 * pass, which splits w + 128 into nibbles (q8_0x16.c). */
static void fill_extreme(int32_t src, uint8_t *q, size_t bytes) {
    const size_t bs = okv_ggml_type_size(src);
    const okv_f16 d = okv_f32_to_f16(0.01f), dmin = okv_f32_to_f16(0.002f);
    memset(q, 0xFF, bytes);
    for (uint8_t *b = q; b < q + bytes; b += bs) {
        if (src == OKV_GGML_Q6_K) {
            memset(b + 192, 0x7F, 16); /* scales 127 */
            memcpy(b + 208, &d, 2);
            continue;
        }
        if (src == OKV_GGML_MXFP4) { /* every value -12 (nibble 15), scale 2^-8 */
            b[0] = 120;
            continue;
        }
        memcpy(b, &d, 2);
        if (src == OKV_GGML_Q8_0) memset(b + 2, (b - q) / bs % 2 ? 0x7F : 0x80, 32); /* 127, -128 */
        if (src == OKV_GGML_Q4_K || src == OKV_GGML_Q5_K) memcpy(b + 2, &dmin, 2);
    }
}

static void check_shape(const layout *L, int64_t rows, int64_t k, int64_t n, int extreme) {
    const size_t src_row = okv_ggml_row_size(L->src, k), row = okv_wtype_row_size(L->type, k);
    uint8_t *q = malloc(src_row * (size_t)rows), *w = malloc(row * (size_t)rows);
    float *rowf = malloc(sizeof(float) * (size_t)k), *wv = malloc(sizeof(float) * (size_t)(rows * k));
    float *off = calloc((size_t)(rows * k), sizeof(float)); /* Q4_K's min part of each value */
    float *back = malloc(sizeof(float) * (size_t)k), *x = malloc(sizeof(float) * (size_t)(n * k));
    double *xq = malloc(sizeof(double) * (size_t)(n * k));
    float *y = malloc(sizeof(float) * (size_t)(n * rows)), *ys = malloc(sizeof(float) * (size_t)(n * rows));
    float *y1 = malloc(sizeof(float) * (size_t)rows);
    void *scratch = malloc(okv_matmul_scratch_bytes(L->type, k, n));
    for (int64_t r = 0; r < rows && !extreme; r++) {
        /* rows of different scales, and values clustered off zero so Q4_K's mins matter */
        for (int64_t i = 0; i < k; i++) rowf[i] = frand() * (1.0f + (float)(r % 3)) + (i % 64 < 32 ? 0.5f : -0.25f);
        okv_quantize_row(L->src, rowf, q + (size_t)r * src_row, k);
    }
    if (extreme) fill_extreme(L->src, q, src_row * (size_t)rows);
    for (int64_t r = 0; r < rows; r++) {
        const void *qr = q + (size_t)r * src_row;
        switch (L->src) {
        case OKV_GGML_Q4_0: decode_q4_0(qr, k, wv + r * k); break;
        case OKV_GGML_Q8_0: decode_q8_0(qr, k, wv + r * k); break;
        case OKV_GGML_Q5_0: decode_q5_0(qr, k, wv + r * k); break;
        case OKV_GGML_MXFP4: decode_mxfp4(qr, k, wv + r * k); break;
        case OKV_GGML_Q4_K: decode_q4_K(qr, k, wv + r * k, off + r * k); break;
        case OKV_GGML_Q5_K: decode_q5_K(qr, k, wv + r * k, off + r * k); break;
        default: decode_q6_K(qr, k, wv + r * k); break;
        }
    }
    if (L->type == OKV_WT_Q4_0X16) okv_repack_q4_0x16(w, q, rows, k);
    else if (L->type == OKV_WT_Q8_0X16) okv_repack_q8_0x16(w, q, rows, k);
    else if (L->type == OKV_WT_Q6_KX16) okv_repack_q6_Kx16(w, q, rows, k);
    else if (L->type == OKV_WT_Q5_KX16) okv_repack_q5_Kx16(w, q, rows, k);
    else if (L->type == OKV_WT_Q5_0X16) okv_repack_q5_0x16(w, q, rows, k);
    else if (L->type == OKV_WT_MXFP4X16) okv_repack_mxfp4x16(w, q, rows, k);
    else if (L->type == OKV_WT_Q4_0X16MM) okv_repack_q4_0x16mm(w, q, rows, k);
    else if (L->type == OKV_WT_Q8_0X16MM) okv_repack_q8_0x16mm(w, q, rows, k);
    else if (L->type == OKV_WT_Q4_KX16MM) okv_repack_q4_Kx16mm(w, q, rows, k);
    else okv_repack_q4_Kx16(w, q, rows, k);
    int bad = 0;
    for (int64_t r = 0; r < rows; r++) {
        okv_dequantize_row(L->type, w + (size_t)r * row, back, k);
        bad += memcmp(back, wv + r * k, sizeof(float) * (size_t)k) != 0;
    }
    CHECK(bad == 0, "%s: %d of %lld repacked rows decode to other values (k %lld)", L->name, bad, (long long)rows,
          (long long)k);
    for (int64_t i = 0; i < n * k; i++) x[i] = extreme ? 1.0f : frand() * (i % 97 == 0 ? 8.0f : 1.0f);
    for (int64_t j = 0; j < n; j++) {
        if (L->src == OKV_GGML_Q4_0 || L->src == OKV_GGML_Q8_0 || L->src == OKV_GGML_MXFP4 || L->src == OKV_GGML_Q5_0)
            quantize_ref(x + j * k, k, xq + j * k);
        else quantize_ref_k(x + j * k, k, xq + j * k);
    }

    for (int kern = 0; kern < OKV_ISA_COUNT; kern++) {
        if (!okv_cpu_has_isa((okv_isa)kern)) {
            printf("kernel %s: not on this processor, skipped\n", okv_isa_name((okv_isa)kern));
            continue;
        }
        okv_error err;
        /* NaN where a kernel leaves an output unwritten: the level before
         * left its right values in y */
        for (int64_t i = 0; i < n * rows; i++) y[i] = NAN;
        okv_status st = okv_matmul_with((okv_isa)kern, NULL, L->type, w, rows, k, x, n, y, scratch, &err);
        CHECK_STATUS(st, OKV_OK, err);
        int outside = 0, diff = 0, dep = 0;
        double worst = 0;
        for (int64_t j = 0; j < n; j++)
            for (int64_t r = 0; r < rows; r++) {
                double ref = 0, mag = 0;
                for (int64_t i = 0; i < k; i++) {
                    ref += (double)wv[r * k + i] * xq[j * k + i];
                    /* Q4_K sums its scaled and min parts apart: count both */
                    mag += fabs(xq[j * k + i]) * (fabs((double)wv[r * k + i]) + 2 * fabs((double)off[r * k + i]));
                }
                /* per block a few roundings (scale product, FMA), then 16
                 * lanes of k/512 terms and the four-step lane sum */
                const double tol = (double)(k / 512 + 8) * 0x1p-23 * mag + 1e-30;
                const double e = fabs((double)y[j * rows + r] - ref);
                if (!(e <= tol)) outside++; /* NaN too */
                if (e / tol > worst) worst = e / tol;
            }
        CHECK(outside == 0, "%s %s %lldx%lld n=%lld: %d results outside the summation bound (worst %.2f of it)",
              L->name, okv_isa_name((okv_isa)kern), (long long)rows, (long long)k, (long long)n, outside, worst);
        if (kern == OKV_ISA_SCALAR) memcpy(ys, y, sizeof(float) * (size_t)(n * rows));
        else diff = memcmp(ys, y, sizeof(float) * (size_t)(n * rows)) != 0;
        CHECK(diff == 0, "%s differs from the scalar kernel's bits (%lldx%lld n=%lld)", okv_isa_name((okv_isa)kern),
              (long long)rows, (long long)k, (long long)n);
        /* each column alone, with 2 threads */
        okv_threadpool *pool = okv_threadpool_create(2, NULL);
        for (int64_t j = 0; j < n; j++) {
            st = okv_matmul_with((okv_isa)kern, pool, L->type, w, rows, k, x + j * k, 1, y1, scratch, &err);
            dep += st != OKV_OK || memcmp(y1, y + j * rows, sizeof(float) * (size_t)rows) != 0;
        }
        okv_threadpool_free(pool);
        CHECK(dep == 0, "%s: %d columns change with n (%lldx%lld n=%lld)", okv_isa_name((okv_isa)kern), dep,
              (long long)rows, (long long)k, (long long)n);
    }
    /* the SMMLA layouts give their sixteen-wide siblings' bits (a model's
     * at i8mm are its bits at dotprod) */
    const int32_t sib = L->type == OKV_WT_Q4_0X16MM   ? OKV_WT_Q4_0X16
                        : L->type == OKV_WT_Q8_0X16MM ? OKV_WT_Q8_0X16
                        : L->type == OKV_WT_Q4_KX16MM ? OKV_WT_Q4_KX16
                                                      : -1;
    if (sib >= 0) {
        uint8_t *w16 = malloc(okv_wtype_row_size(sib, k) * (size_t)rows);
        void *s16 = malloc(okv_matmul_scratch_bytes(sib, k, n));
        if (sib == OKV_WT_Q4_0X16) okv_repack_q4_0x16(w16, q, rows, k);
        else if (sib == OKV_WT_Q8_0X16) okv_repack_q8_0x16(w16, q, rows, k);
        else okv_repack_q4_Kx16(w16, q, rows, k);
        okv_error err;
        CHECK_STATUS(okv_matmul_with(OKV_ISA_SCALAR, NULL, sib, w16, rows, k, x, n, y, s16, &err), OKV_OK, err);
        CHECK(memcmp(ys, y, sizeof(float) * (size_t)(n * rows)) == 0, "%s: not %s's bits (%lldx%lld n=%lld)", L->name,
              okv_wtype_get(sib)->name, (long long)rows, (long long)k, (long long)n);
        free(w16); free(s16);
    }
    free(q); free(w); free(rowf); free(wv); free(off); free(back); free(x); free(xq); free(y); free(ys); free(y1); free(scratch);
}

/* A random llama of 512-value rows and an FFN of 4352 (ffn_down's rows end
 * in a compact group of 8 blocks for Q4_0 and Q8_0, a half group for Q4_K
 * and Q5_K: all repacked), written by `offkv synth` into the build folder. */
static const char *synth_model(const char *type, int moe) {
    static char path[64];
    snprintf(path, sizeof path, "test_x16.%s%s.tmp.gguf", type, moe == 2 ? ".gpt-oss" : moe ? ".moe" : "");
    const char *bin = getenv("OKV_BIN");
    if (!bin) return NULL;
    /* moe: a qwen3moe whose experts (4, 2 a token, 960 wide; 768 as
     * Qwen3-30B-A3B's for the K-quants, whose down rows then end in a half
     * group) are matrices repacked like any other: Q4_0 down rows of 960
     * end in a group of 14 blocks and 2 of padding (a fifteenth more
     * bytes), Q8_0's in a compact group of 14 blocks.  gpt-oss's experts
     * are 960 wide too: MXFP4 down rows that end in a compact group of 14
     * blocks */
    const char *shape = moe == 2   ? "--arch gpt-oss --n-expert 4 --n-expert-used 2 --n-ff-exp 960"
                        : moe == 1 ? "--arch qwen3moe --n-expert 4 --n-expert-used 2 --n-ff-exp"
                                   : "--arch llama --n-ff 4352";
    const char *ff = moe != 1 ? "" : strstr(type, "_k") ? "768" : "960";
    char cmd[1024];
    snprintf(cmd, sizeof cmd,
             "'%s/offkv' synth %s %s --n-embd 512 --n-layer 2 --n-head 8 --n-head-kv 4 "
             "--n-vocab 512 --type %s --seed 5 -o %s 2> /dev/null",
             bin, shape, ff, type, path);
    return system(cmd) == 0 ? path : NULL;
}

/* A copy of the model at src without output.weight: the logits then come
 * from the embedding table (tied), which the model repacks for the product
 * and keeps in the file for the lookups. */
static const char *untie(const char *src) {
    static char path[96];
    snprintf(path, sizeof path, "%s.tied.tmp.gguf", src);
    okv_error err;
    okv_gguf *g = okv_gguf_open(src, &err);
    okv_gguf_writer *w = g ? okv_gguf_writer_create(&err) : NULL;
    int ok = w && copy_metadata(g, w);
    for (int64_t i = 0; ok && i < okv_gguf_n_tensors(g); i++) {
        const okv_gguf_tensor *t = okv_gguf_tensor_at(g, i);
        if (strcmp(t->name, "output.weight") != 0)
            ok = okv_gguf_writer_add_tensor(w, t->name, t->type, t->n_dims, t->ne, t->data, &err) == OKV_OK;
    }
    ok = ok && okv_gguf_writer_write(w, path, &err) == OKV_OK;
    okv_gguf_writer_free(w);
    okv_gguf_close(g);
    return ok ? path : NULL;
}

static void check_model(const char *type, int tied, int moe) {
    const char *path = synth_model(type, moe);
    if (path && tied) {
        const char *t = untie(path);
        remove(path);
        path = t;
    }
    CHECK(path != NULL, "offkv synth failed (OKV_BIN=%s)", getenv("OKV_BIN") ? getenv("OKV_BIN") : "unset");
    if (!path) return;
    okv_error err;
    static const char *const off[] = {"repack", "off", NULL};
    okv_model *mp = okv_model_load(path, NULL, &err), *mn = okv_model_load(path, off, &err);
    CHECK(mp && mn, "load: %s", err.message);
    if (!mp || !mn) { okv_model_free(mp); okv_model_free(mn); return; }
    /* repacked (the output matrix too, tied or not: its rows are 512 long), or not */
    CHECK(mp->packed && !mn->packed && mp->output.type >= OKV_GGML_TYPE_END && mn->output.type < OKV_GGML_TYPE_END &&
              mp->output.data != mp->tok_embd.data && mp->tok_embd.type < OKV_GGML_TYPE_END,
          "%s: repacked %p (output type %d), repack=off %p", type, mp->packed, (int)mp->output.type, mn->packed);
    /* every quantized matrix of the layers too (floats are copied as they are) */
    int kept = 0;
    const size_t nw = (size_t)okv_model_n_layers(mp) * (sizeof(okv_layer_weights) / sizeof(okv_weight));
    for (size_t i = 0; i < nw; i++) {
        const okv_weight *lw = (const okv_weight *)mp->w + i;
        kept += lw->data && lw->type < OKV_GGML_TYPE_END && okv_ggml_block_size(lw->type) > 1;
    }
    CHECK(kept == 0, "%s: %d quantized matrices kept in ggml's layout", type, kept);
    /* (layer 0's down is q4_K in a q4_k_m file, layer 1's q6_K) */
    CHECK(!moe || (mp->moe[1].down.w.type >= OKV_GGML_TYPE_END && mn->moe[1].down.w.type < OKV_GGML_TYPE_END &&
                   mp->moe[0].down.w.type >= OKV_GGML_TYPE_END &&
                   mp->moe[0].gate.w.type >= OKV_GGML_TYPE_END && mp->moe[1].up.w.type >= OKV_GGML_TYPE_END),
          "%s: experts repacked (type %d) or not (%d)", type, moe ? (int)mp->moe[1].down.w.type : 0,
          moe ? (int)mn->moe[1].down.w.type : 0);
    static const char *const bad[] = {"repack", "maybe", NULL};
    CHECK(okv_model_load(path, bad, &err) == NULL && strstr(err.message, "maybe"), "bad repack value: %s", err.message);
    const int32_t nl = okv_model_n_layers(mp), nv = okv_model_n_vocab(mp);
    okv_layer_geometry geo[8];
    for (int32_t l = 0; l < nl; l++) okv_model_layer_geometry(mp, l, &geo[l]);
    const okv_cache_config cc = {.capacity = 64, .initial_capacity = 16, .max_write = 16, .dtype = OKV_F32};
    enum { S = 3, T = 12 };
    int32_t tok[S][T], pos[S][T];
    float *lp = malloc(sizeof(float) * S * T * (size_t)nv), *ln = malloc(sizeof(float) * S * T * (size_t)nv);
    float *lb = malloc(sizeof(float) * S * T * (size_t)nv);
    for (int s = 0; s < S; s++)
        for (int t = 0; t < T; t++) tok[s][t] = 1 + (s * 37 + t * 11) % (nv - 1), pos[s][t] = t;
    /* each sequence alone, token by token, packed and not; then all in one batch */
    for (int pass = 0; pass < 3; pass++) {
        okv_model *m = pass == 1 ? mn : mp;
        okv_batch *b = okv_batch_create(m, S * T, NULL, &err);
        okv_cache *c[S];
        for (int s = 0; s < S; s++) c[s] = okv_cache_create(geo, nl, &cc, &err);
        float *out = pass == 0 ? lp : pass == 1 ? ln : lb;
        for (int t = 0; t < T; t++) {
            okv_batch_seq seqs[S];
            for (int s = 0; s < S; s++)
                seqs[s] = (okv_batch_seq){.cache = c[s], .tokens = &tok[s][t], .positions = &pos[s][t], .n_tokens = 1,
                                          .logits = out + ((size_t)s * T + (size_t)t) * (size_t)nv};
            if (pass < 2) {
                for (int s = 0; s < S; s++) CHECK_STATUS(okv_batch_eval(b, &seqs[s], 1, &err), OKV_OK, err);
            } else {
                CHECK_STATUS(okv_batch_eval(b, seqs, S, &err), OKV_OK, err);
            }
        }
        for (int s = 0; s < S; s++) okv_cache_release(c[s]);
        okv_batch_free(b);
    }
    double worst = 0, amax = 0;
    for (size_t i = 0; i < (size_t)S * T * (size_t)nv; i++) {
        worst = fmax(worst, fabs((double)lp[i] - ln[i]));
        amax = fmax(amax, fabs((double)ln[i]));
    }
    /* the same values and quantized activations; only the order of float
     * sums differs inside each product */
    /* The same values and quantized activations; only the order of float
     * sums inside a product differs, by ~1e-7.  Now and then that moves an
     * activation across a rounding boundary of the next layer's 8-bit
     * quantization (one step of a block: ~1% of its largest value), which
     * moves that token's logits by ~1e-3, and the later tokens of its
     * sequence through their K/V.  So: none beyond a few quantization steps
     * (5 % of the largest logit; a wrong layout moves them by more than the
     * logits themselves), and not every row off float rounding. */
    int moved = 0;
    for (int r = 0; r < S * T; r++) {
        double w = 0;
        for (int i = 0; i < nv; i++) w = fmax(w, fabs((double)lp[(size_t)r * nv + i] - ln[(size_t)r * nv + i]));
        moved += w > 1e-5 * fmax(1.0, amax);
    }
    CHECK(moved * 4 <= S * T * 3 && worst <= 0.05 * fmax(1.0, amax),
          "repacked vs ggml layout: %d of %d rows beyond float rounding, max |diff| %.3g (max |logit| %.3g)", moved,
          S * T, worst, amax);
    const bool same = memcmp(lp, lb, sizeof(float) * S * T * (size_t)nv) == 0;
    CHECK(same, "repacked: a batch of %d changes the logits", S);
    printf("model %s%s%s: repacked vs ggml layout: %d of %d rows beyond 1e-5, max |diff| %.3g (max |logit| %.3g); "
           "batch %s\n", type, tied ? " (tied output)" : "", moe == 2 ? " (gpt-oss)" : moe ? " (qwen3moe)" : "",
           moved, S * T, worst, amax, same ? "bit-identical" : "DIFFERS");
    free(lp); free(ln); free(lb);
    okv_model_free(mp);
    okv_model_free(mn);
    remove(path);
}

/* The sixteen-wide activation blocks of every ISA's quantizer, byte for byte
 * the scalar one's (its quantizer, block sums and permutation), for k of
 * whole groups and of a padded last one (544, 1280, 2304: a half K group;
 * 96 Q4_0's only), values of every size and zeros. */
static void check_act(void) {
    static const int64_t ks[] = {96, 512, 544, 1280, 2048, 2304};
    enum { KMAX = 2304, GMAX = (KMAX + 511) / 512 };
    static float x[KMAX];
    static block_act_q8_0x16 a0[2][GMAX];
    static block_act_q8_Kx16 ak[2][GMAX];
    static block_act_q8_Kx16s as[2][KMAX / 256];
    for (int i = 0; i < KMAX; i++) x[i] = i % 97 == 0 ? 0.0f : frand() * (i % 7 == 0 ? 100.0f : 1.0f);
    for (int kern = 1; kern < OKV_ISA_COUNT; kern++) {
        if (!okv_cpu_has_isa((okv_isa)kern)) continue;
        for (size_t t = 0; t < sizeof ks / sizeof ks[0]; t++) {
            const int64_t k = ks[t];
            memset(a0, 0x5A, sizeof a0), memset(ak, 0x5A, sizeof ak), memset(as, 0x5A, sizeof as);
            for (int s = 0; s < 2; s++) {
                const okv_isa isa = s ? (okv_isa)kern : OKV_ISA_SCALAR;
                okv_quantize_act_q8_0x16(isa, x, k, a0[s]);
                if (k % 256 == 0) {
                    okv_quantize_act_q8_Kx16(isa, x, k, ak[s]);
                    okv_quantize_act_q8_Kx16s(isa, x, k, as[s]);
                }
            }
            CHECK(memcmp(a0[0], a0[1], sizeof a0[0]) == 0, "%s: q8_0x16 activations not the scalar bytes (k %lld)",
                  okv_isa_name((okv_isa)kern), (long long)k);
            CHECK(memcmp(ak[0], ak[1], sizeof ak[0]) == 0, "%s: q8_Kx16 activations not the scalar bytes (k %lld)",
                  okv_isa_name((okv_isa)kern), (long long)k);
            CHECK(memcmp(as[0], as[1], sizeof as[0]) == 0, "%s: q8_Kx16s activations not the scalar bytes (k %lld)",
                  okv_isa_name((okv_isa)kern), (long long)k);
        }
    }
}

int main(void) {
    /* whole groups, then rows whose last group is a half one (768, 1280,
     * 2304: Q4_K's and Q5_K's) or Q4_0's, Q8_0's, Q5_0's and MXFP4's compact
     * last group (2304, 544, 96, 2880, 32, 480, 992, 896, 1152, 4352, 3616,
     * 672, 800: of 8, 1, 3, 10, 1, 15, 15, 12, 4, 8, 1, 5 and 9 blocks; 96,
     * 32 and 480 have no whole group; 2880 is gpt-oss's, 896 Qwen2.5-0.5B's,
     * 1152 Gemma 3 1B's; AVX2 runs 4352 and 3616 in strips, and Q4_0's
     * groups of up to 8 blocks leave out their padded half there); n from
     * 5 on takes the block passes, which sweep 8, 5, 4, 2 or 1 columns at a
     * time (x16.h): 9 = 8 + 1, 7 = 5 + 2, 22 = 8 + 8 + 5 + 1; at 5632 (11
     * groups) 4 columns' activations fill a sweep: 11 = 4 + 4 + 2 + 1
     * (AVX-512); AVX2's Q4_0, Q8_0, Q4_K and Q5_K sweep up to k = 3072
     * (2880: 5 at a time, 17 = 5 + 5 + 5 + 2) and run 5632 in strips;
     * AVX-512's sweeps whose columns outgrow the budget go in parts of
     * the groups (x16.h's okv_x16_part): 5632 by 5 (2 parts, 11 = 5 + 5 +
     * 1), 5728 (a compact group of 3 blocks in the last part) and 8192 by
     * 4 (2 parts), 14336 (3 parts); 531 rows make items of 72 rows (a
     * thread takes 8: matmul.c), more than a block of parts (64 + 8), and
     * a last one of 27 (pairs and one); Q8_0's VNNI pass counts its rows'
     * bytes into the parts (q8_0x16.c): 5728 by 16 goes in pairs in 2 */
    static const int64_t shapes[][3] = {{1, 512, 1},  {5, 512, 3},   {16, 1024, 8}, {37, 2048, 5}, {8, 1536, 17},
                                        {13, 512, 64}, {7, 768, 9},  {3, 1280, 2},  {9, 2304, 16}, {5, 544, 4},
                                        {6, 96, 3},    {11, 1024, 7}, {6, 1536, 22}, {4, 2880, 1}, {3, 2880, 6},
                                        {5, 32, 2},    {4, 480, 5},   {3, 992, 3},   {7, 2880, 17},
                                        {3, 5632, 11}, {5, 896, 1},  {4, 896, 6},   {4, 1152, 1},  {6, 1152, 9},
                                        {5, 4352, 7},  {3, 3616, 6}, {2, 4352, 1},  {3, 672, 5},   {2, 800, 3},
                                        {531, 5728, 6}, {66, 8192, 8}, {5, 14336, 5}, {6, 5728, 16}};
    /* the compact rows hold the ggml blocks' bytes, no more */
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
        CHECK(okv_wtype_row_size(OKV_WT_Q4_0X16, shapes[i][1]) == okv_ggml_row_size(OKV_GGML_Q4_0, shapes[i][1]) &&
                  okv_wtype_row_size(OKV_WT_Q8_0X16, shapes[i][1]) == okv_ggml_row_size(OKV_GGML_Q8_0, shapes[i][1]) &&
                  okv_wtype_row_size(OKV_WT_Q5_0X16, shapes[i][1]) == okv_ggml_row_size(OKV_GGML_Q5_0, shapes[i][1]) &&
                  okv_wtype_row_size(OKV_WT_MXFP4X16, shapes[i][1]) == okv_ggml_row_size(OKV_GGML_MXFP4, shapes[i][1]),
              "k %lld: q4_0x16 rows of %zu bytes (q4_0: %zu), q8_0x16 %zu (q8_0: %zu), mxfp4x16 %zu (mxfp4: %zu)",
              (long long)shapes[i][1], okv_wtype_row_size(OKV_WT_Q4_0X16, shapes[i][1]),
              okv_ggml_row_size(OKV_GGML_Q4_0, shapes[i][1]), okv_wtype_row_size(OKV_WT_Q8_0X16, shapes[i][1]),
              okv_ggml_row_size(OKV_GGML_Q8_0, shapes[i][1]),
              okv_wtype_row_size(OKV_WT_MXFP4X16, shapes[i][1]), okv_ggml_row_size(OKV_GGML_MXFP4, shapes[i][1]));
    for (size_t l = 0; l < sizeof LAYOUTS / sizeof LAYOUTS[0]; l++)
        for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
            if (okv_wtype_row_size(LAYOUTS[l].type, shapes[i][1]) != 0)
                check_shape(&LAYOUTS[l], shapes[i][0], shapes[i][1], shapes[i][2], 0);
    for (size_t l = 0; l < sizeof LAYOUTS / sizeof LAYOUTS[0]; l++) check_shape(&LAYOUTS[l], 5, 1280, 9, 1);
    /* the SMMLA layouts' column pairs and odd last columns, rows in pairs
     * and an odd one (7 = 4 + 3), passes of 3, 3, 2 and 2 quartets (1280:
     * Q4_K's last group half one) */
    static const int64_t mm_n[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 16, 33};
    for (size_t l = 0; l < sizeof LAYOUTS / sizeof LAYOUTS[0]; l++)
        for (size_t i = 0; i < sizeof mm_n / sizeof mm_n[0]; i++)
            if (LAYOUTS[l].type == OKV_WT_Q4_0X16MM || LAYOUTS[l].type == OKV_WT_Q8_0X16MM ||
                LAYOUTS[l].type == OKV_WT_Q4_KX16MM)
                check_shape(&LAYOUTS[l], 7, 1280, mm_n[i], 0);
    check_act();
    okv_error err;
    float x[512] = {0}, y[4];
    CHECK(okv_matmul(NULL, OKV_WT_Q4_0X16, x, 4, 500, x, 1, y, x, &err) == OKV_ERR_INVALID &&
              strstr(err.message, "500") && strstr(err.message, "32"),
          "k not whole groups: %s", err.message);
    CHECK(okv_ggml_type_name(OKV_WT_Q4_0X16) == NULL && okv_ggml_row_size(OKV_WT_Q4_0X16, 512) == 0 &&
              okv_ggml_type_name(OKV_WT_Q4_KX16) == NULL && okv_ggml_type_name(OKV_WT_Q8_0X16) == NULL &&
              okv_ggml_type_name(OKV_WT_Q6_KX16) == NULL && okv_ggml_type_name(OKV_WT_Q5_KX16) == NULL &&
              okv_ggml_type_name(OKV_WT_Q4_0X16MM) == NULL && okv_ggml_type_name(OKV_WT_Q8_0X16MM) == NULL &&
              okv_ggml_type_name(OKV_WT_Q4_KX16MM) == NULL,
          "offkv's own layout is not a ggml type");
    check_model("q4_0", 0, 0);
    check_model("q4_k_m", 0, 0);
    check_model("q8_0", 0, 0);
    check_model("q6_k", 0, 0);
    check_model("q5_k_m", 0, 0);
    check_model("q5_0", 0, 0);
    check_model("q4_0", 1, 0);
    check_model("q4_0", 0, 1);
    check_model("q4_k_m", 0, 1);
    check_model("q8_0", 0, 1);
    check_model("mxfp4_moe", 0, 2);
    return check_done();
}
