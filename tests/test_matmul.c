/* Every weight type on every kernel this processor runs, against a double
 * reference built from weights decoded here by the format's formula (Q8_0,
 * Q4_0) or by the dequantizers test_quant checks by hand (the others).
 *
 * Tolerances: for F32/F16/BF16 the only error is f32 summation, at most
 * (k + 16) * 2^-24 * sum|w x| (a sequential-sum bound; SIMD lanes sum fewer
 * terms each).  For the quantized types the activations are quantized;
 * against the double product with the same quantized activations (here, by
 * ggml's rules: x86 Q8_0/Q8_1, quantize_row_q8_K_ref) the error is again
 * only summation, (k/32 + 24) * 2^-24 * sum|w xq|, where a format with an
 * offset (Q4_1, Q5_1, Q2_K, Q4_K, Q5_K) counts its scaled and offset parts
 * apart, as the kernels sum them apart.  Against the exact f32 activations
 * each value moves by at most half a step, amax_b/254, and the scale by
 * 2^-11 relative, giving the looser bound checked second.  SIMD kernels
 * differ from scalar only in the order of float sums, so both bounds hold
 * for every ISA; the ARM kernels for the quantized types keep the scalar
 * order too, and must give its bits on every level. */
#include <math.h>

#include "check.h"
#include "kernels/cpu.h"
#include "kernels/matmul.h"
#include "kernels/matmul_impl.h"
#include "kernels/quant.h"
#include "kernels/quantize.h"
#include "kernels/wtype.h"
#include "offkv/offkv.h"

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static float frand(void) {
    rng_state ^= rng_state << 13; rng_state ^= rng_state >> 7; rng_state ^= rng_state << 17;
    return (float)((rng_state >> 40) * (2.0 / (1ull << 24)) - 1.0);
}

static const int TYPES[] = {OKV_GGML_F32,  OKV_GGML_F16,  OKV_GGML_BF16, OKV_GGML_Q8_0, OKV_GGML_Q4_0,
                            OKV_GGML_Q4_1, OKV_GGML_Q5_0, OKV_GGML_Q5_1, OKV_GGML_Q2_K, OKV_GGML_Q3_K,
                            OKV_GGML_Q4_K, OKV_GGML_Q5_K, OKV_GGML_Q6_K, OKV_GGML_MXFP4};

/* The formats without a quantizer here: random bytes, with the f16 scale
 * fields (d, and m or dmin) at these byte offsets set to small values. */
typedef struct raw_format { int type, d_off, m_off, act; } raw_format;
enum { ACT_Q8_0, ACT_Q8_1, ACT_Q8_K };
static const raw_format RAW[] = {
    {OKV_GGML_Q4_1, 0, 2, ACT_Q8_1}, {OKV_GGML_Q5_0, 0, -1, ACT_Q8_0}, {OKV_GGML_Q5_1, 0, 2, ACT_Q8_1},
    {OKV_GGML_Q2_K, 80, 82, ACT_Q8_K}, {OKV_GGML_Q3_K, 108, -1, ACT_Q8_K}, {OKV_GGML_Q4_K, 0, 2, ACT_Q8_K},
    {OKV_GGML_Q5_K, 0, 2, ACT_Q8_K}, {OKV_GGML_Q6_K, 208, -1, ACT_Q8_K},
};

static const raw_format *raw_of(int t) {
    for (size_t i = 0; i < sizeof RAW / sizeof RAW[0]; i++)
        if (RAW[i].type == t) return &RAW[i];
    return NULL;
}

static float h2f(uint16_t h) { return okv_f16_to_f32(h); }

static void put_f16(uint8_t *p, float v) {
    const uint16_t h = okv_f32_to_f16(v);
    memcpy(p, &h, 2);
}

/* W in type t, and its decoded values: for the formats with a quantizer here
 * (Q8_0, Q4_0) by the format's definition written out below; for the others
 * through the library's dequantizers, which test_quant checks against
 * values worked out by hand.  Where a format has an offset (value = d*q*... +
 * m, or - dmin*m), wm gets the offset part alone (else 0): the products
 * compute the two parts apart, so their size bounds the rounding. */
static void make_weights_split(int t, int64_t rows, int64_t k, uint8_t *w, float *wd, float *wm) {
    size_t rb = okv_ggml_row_size(t, k);
    float *row = malloc((size_t)k * sizeof(float));
    const raw_format *rf = raw_of(t);
    if (wm) memset(wm, 0, sizeof(float) * (size_t)(rows * k));
    if (rf) {
        const size_t bs = okv_ggml_type_size(t);
        uint8_t *tmp = malloc(rb);
        for (int64_t r = 0; r < rows; r++) {
            uint8_t *wr = w + r * rb;
            for (size_t i = 0; i < rb; i++) wr[i] = (uint8_t)((frand() + 1.0f) * 127.99f); /* frand is in [-1, 1) */
            for (size_t b = 0; b < rb / bs; b++) {
                put_f16(wr + b * bs + rf->d_off, frand() * 0.01f);
                if (rf->m_off >= 0) put_f16(wr + b * bs + rf->m_off, frand() * 0.02f);
            }
            okv_dequantize_row(t, wr, wd + r * k, k);
            if (wm && rf->m_off >= 0) {
                /* with d = 0 only the offsets are left */
                memcpy(tmp, wr, rb);
                for (size_t b = 0; b < rb / bs; b++) put_f16(tmp + b * bs + rf->d_off, 0.0f);
                okv_dequantize_row(t, tmp, wm + r * k, k);
            }
        }
        free(tmp);
        free(row);
        return;
    }
    for (int64_t r = 0; r < rows; r++) {
        uint8_t *wr = w + r * rb;
        for (int64_t i = 0; i < k; i++) row[i] = frand() * (1.0f + (float)(i % 7));
        if (r == 1 && t == OKV_GGML_Q8_0) row[0] = -200.0f; /* exercise qs = -127 */
        float *o = wd + r * k;
        switch (t) {
        case OKV_GGML_F32: memcpy(wr, row, (size_t)k * 4); memcpy(o, row, (size_t)k * 4); break;
        case OKV_GGML_F16:
            for (int64_t i = 0; i < k; i++) {
                uint16_t h = okv_f32_to_f16(row[i]);
                memcpy(wr + 2 * i, &h, 2);
                o[i] = h2f(h);
            }
            break;
        case OKV_GGML_BF16:
            for (int64_t i = 0; i < k; i++) {
                uint16_t h = okv_f32_to_bf16(row[i]);
                memcpy(wr + 2 * i, &h, 2);
                uint32_t bits = (uint32_t)h << 16;
                memcpy(&o[i], &bits, 4);
            }
            break;
        case OKV_GGML_Q8_0:
            okv_quantize_row_q8_0(row, (block_q8_0 *)wr, k);
            if (r == 2) ((block_q8_0 *)wr)[0].qs[3] = -128; /* legal in the format, never written by ggml */
            for (int64_t i = 0; i < k; i++) {
                const uint8_t *blk = wr + (i / 32) * 34;
                o[i] = (float)(int8_t)blk[2 + i % 32] * h2f((uint16_t)(blk[0] | blk[1] << 8));
            }
            break;
        case OKV_GGML_MXFP4:
            /* E2M1 doubled: 0 .. 6 in halves as integers, sign in bit 3;
             * the scale byte e is 2^(e - 128) */
            okv_quantize_row_mxfp4(row, (block_mxfp4 *)wr, k);
            if (r == 1) ((block_mxfp4 *)wr)[0].e = 1; /* a subnormal scale */
            for (int64_t i = 0; i < k; i++) {
                static const int e2m1x2[8] = {0, 1, 2, 3, 4, 6, 8, 12};
                const uint8_t *blk = wr + (i / 32) * 17;
                int j = (int)(i % 32);
                int q = j < 16 ? blk[1 + j] & 15 : blk[1 + j - 16] >> 4;
                o[i] = (float)((q & 8 ? -1 : 1) * e2m1x2[q & 7]) * ldexpf(1.0f, (int)blk[0] - 128);
            }
            break;
        case OKV_GGML_Q4_0:
            okv_quantize_row_q4_0(row, (block_q4_0 *)wr, k);
            for (int64_t i = 0; i < k; i++) {
                const uint8_t *blk = wr + (i / 32) * 18;
                int j = (int)(i % 32);
                int q = j < 16 ? blk[2 + j] & 15 : blk[2 + j - 16] >> 4;
                o[i] = (float)(q - 8) * h2f((uint16_t)(blk[0] | blk[1] << 8));
            }
            break;
        }
    }
    free(row);
}

static void make_weights(int t, int64_t rows, int64_t k, uint8_t *w, float *wd) {
    make_weights_split(t, rows, k, w, wd, NULL);
}

/* ggml's x86 activation quantizer, written plainly: d = f16(amax/127),
 * q = nearest-even(x * 127/amax); returns the dequantized values. */
static void quantize_ref(const float *x, int64_t k, float *xq) {
    for (int64_t b = 0; b < k / 32; b++) {
        float amax = 0;
        for (int i = 0; i < 32; i++) amax = fmaxf(amax, fabsf(x[b * 32 + i]));
        float id = amax ? 127.0f / amax : 0.0f;
        float d = h2f(okv_f32_to_f16(amax / 127.0f));
        for (int i = 0; i < 32; i++) xq[b * 32 + i] = nearbyintf(x[b * 32 + i] * id) * d;
    }
}

/* ggml's quantize_row_q8_K_ref, written plainly: iscale = -127/max (max the
 * signed value of largest magnitude), q = min(127, nearest-even(iscale x)),
 * d = 1/iscale. */
static void quantize_ref_k(const float *x, int64_t k, float *xq) {
    for (int64_t b = 0; b < k / 256; b++) {
        const float *xb = x + b * 256;
        float amax = 0, max = 0;
        for (int i = 0; i < 256; i++)
            if (fabsf(xb[i]) > amax) { amax = fabsf(xb[i]); max = xb[i]; }
        const float iscale = amax ? -127.0f / max : 0.0f;
        for (int i = 0; i < 256; i++) {
            float q = nearbyintf(iscale * xb[i]);
            xq[b * 256 + i] = amax ? fminf(q, 127.0f) * (1.0f / iscale) : 0.0f;
        }
    }
}

typedef struct shape { int64_t rows, k, n; } shape;

static void check_type_shape(int t, shape s, okv_threadpool **pools) {
    const int64_t rows = s.rows, k = s.k, n = s.n;
    const raw_format *rf = raw_of(t);
    const int quant = t == OKV_GGML_Q8_0 || t == OKV_GGML_Q4_0 || t == OKV_GGML_MXFP4 || rf;
    const int act = rf ? rf->act : ACT_Q8_0;
    const int64_t ab = act == ACT_Q8_K ? 256 : 32; /* activation block */
    uint8_t *w = malloc(okv_ggml_row_size(t, k) * (size_t)rows);
    float *wd = malloc(sizeof(float) * (size_t)(rows * k));
    float *wm = malloc(sizeof(float) * (size_t)(rows * k));
    float *x = malloc(sizeof(float) * (size_t)(n * k));
    float *xq = malloc(sizeof(float) * (size_t)(n * k));
    make_weights_split(t, rows, k, w, wd, wm);
    for (int64_t i = 0; i < n * k; i++) x[i] = frand() * 3.0f;
    x[0] = 0.5f; /* ties for the nearest-even rounding */
    if (quant)
        for (int64_t j = 0; j < n; j++) {
            if (act == ACT_Q8_K) quantize_ref_k(x + j * k, k, xq + j * k);
            else quantize_ref(x + j * k, k, xq + j * k);
        }
    double *ref = malloc(sizeof(double) * (size_t)(n * rows));
    double *tol = malloc(sizeof(double) * (size_t)(n * rows));
    double *ref_exact = malloc(sizeof(double) * (size_t)(n * rows));
    double *tol_exact = malloc(sizeof(double) * (size_t)(n * rows));
    for (int64_t j = 0; j < n; j++) {
        for (int64_t r = 0; r < rows; r++) {
            const float *wr = wd + r * k, *xj = x + j * k, *xqj = xq + j * k;
            const float *wmr = wm + r * k;
            double sum = 0, mag = 0, sum_e = 0, qerr = 0;
            for (int64_t i = 0; i < k; i++) {
                double xv = quant ? xqj[i] : xj[i];
                sum += (double)wr[i] * xv;
                /* the scaled part and the offset part are summed apart */
                mag += (fabs((double)wr[i] - wmr[i]) + fabs((double)wmr[i])) * fabs(xv);
                sum_e += (double)wr[i] * xj[i];
            }
            if (act == ACT_Q8_1) {
                /* the offsets meet s = f16(d * sum(q)), not the sum of the
                 * f16-scaled values: count the offset part from s, as the
                 * product does (ggml's vec_dot_q4_1_q8_1) */
                for (int64_t b = 0; b < k / 32; b++) {
                    float amax = 0;
                    double part = 0;
                    for (int i = 0; i < 32; i++) amax = fmaxf(amax, fabsf(xj[b * 32 + i]));
                    const float id = amax ? 127.0f / amax : 0.0f;
                    int qsum = 0;
                    for (int i = 0; i < 32; i++) {
                        qsum += (int)nearbyintf(xj[b * 32 + i] * id);
                        part += (double)wmr[b * 32 + i] * xqj[b * 32 + i];
                    }
                    const double s_b = h2f(okv_f32_to_f16(amax / 127.0f * (float)qsum));
                    sum += (double)wmr[b * 32] * s_b - part;
                    qerr += fabs(wmr[b * 32] * s_b) * 0x1p-10;
                }
            }
            if (quant) {
                for (int64_t b = 0; b < k / ab; b++) {
                    double amax = 0, wabs = 0, wx = 0;
                    for (int i = 0; i < ab; i++) {
                        amax = fmax(amax, fabs(xj[b * ab + i]));
                        wabs += fabs(wr[b * ab + i]);
                        wx += fabs(wr[b * ab + i] * xj[b * ab + i]);
                    }
                    qerr += wabs * amax / 254.0 + wx * 0x1p-10;
                }
            }
            /* per block a few roundings (scales times integer sums), then
             * one sum over blocks */
            double steps = quant ? (double)(k / 32 + 24) : (double)(k + 16);
            ref[j * rows + r] = sum;
            tol[j * rows + r] = steps * 0x1p-24 * mag + 1e-30;
            ref_exact[j * rows + r] = sum_e;
            tol_exact[j * rows + r] = qerr + tol[j * rows + r] * 2;
        }
    }

    size_t sb = okv_matmul_scratch_bytes(t, k, n);
    void *scratch = sb ? malloc(sb) : NULL;
    float *y = malloc(sizeof(float) * (size_t)(n * rows));
    float *y2 = malloc(sizeof(float) * (size_t)(n * rows));
    float *y1 = malloc(sizeof(float) * (size_t)rows);
    float *yb = malloc(sizeof(float) * (size_t)(n * rows));
    float *ys = malloc(sizeof(float) * (size_t)(n * rows));
    int have_bw = 0;
    for (int kern = 0; kern < OKV_ISA_COUNT; kern++) {
        if (!okv_cpu_has_isa((okv_isa)kern)) {
            printf("kernel %s: not on this processor, skipped\n", okv_isa_name((okv_isa)kern));
            continue;
        }
        const char *kn = okv_isa_name((okv_isa)kern);
        okv_error err;
        okv_status st = okv_matmul_with((okv_isa)kern, NULL, t, w, rows, k, x, n, y, scratch, &err);
        CHECK_STATUS(st, OKV_OK, err);
        int bad = 0, bad_e = 0;
        double worst = 0;
        for (int64_t i = 0; i < n * rows; i++) {
            double e = fabs(y[i] - ref[i]);
            if (!(e <= tol[i])) bad++;
            if (e / tol[i] > worst) worst = e / tol[i];
            if (quant && !(fabs(y[i] - ref_exact[i]) <= tol_exact[i])) bad_e++;
        }
        CHECK(bad == 0, "%s %s rows %lld k %lld n %lld: %d outputs off (worst %.2f x tol)", kn,
              okv_ggml_type_name(t), (long long)rows, (long long)k, (long long)n, bad, worst);
        CHECK(bad_e == 0, "%s %s: %d outputs beyond the activation-quantization bound", kn, okv_ggml_type_name(t),
              bad_e);
        /* threads and column count must not change a single bit */
        for (int p = 0; p < 3; p++) {
            memset(y2, 0xFF, sizeof(float) * (size_t)(n * rows));
            st = okv_matmul_with((okv_isa)kern, pools[p], t, w, rows, k, x, n, y2, scratch, &err);
            CHECK_STATUS(st, OKV_OK, err);
            CHECK(memcmp(y, y2, sizeof(float) * (size_t)(n * rows)) == 0, "%s %s: %d threads differ", kn,
                  okv_ggml_type_name(t), okv_threadpool_size(pools[p]));
        }
        for (int64_t j = 0; j < n; j++) {
            st = okv_matmul_with((okv_isa)kern, pools[1], t, w, rows, k, x + j * k, 1, y1, scratch, &err);
            CHECK(st == OKV_OK && memcmp(y1, y + j * rows, sizeof(float) * (size_t)rows) == 0,
                  "%s %s: column %lld alone differs from within n = %lld", kn, okv_ggml_type_name(t),
                  (long long)j, (long long)n);
        }
        /* ARM's kernels for the quantized types repeat the scalar kernel's
         * float operations over exact integer sums: its bits, every level */
        if (kern == OKV_ISA_SCALAR) memcpy(ys, y, sizeof(float) * (size_t)(n * rows));
        if (quant && okv_isa_is_arm((okv_isa)kern))
            CHECK(memcmp(ys, y, sizeof(float) * (size_t)(n * rows)) == 0,
                  "%s %s rows %lld k %lld n %lld: differs from the scalar kernel's bits", kn, okv_ggml_type_name(t),
                  (long long)rows, (long long)k, (long long)n);
        if (kern == OKV_ISA_AVX512) { memcpy(yb, y, sizeof(float) * (size_t)(n * rows)); have_bw = 1; }
        if (kern > OKV_ISA_SCALAR && !okv_wtype_get(t)->tile[kern]) continue; /* the included ISA's kernel */
        if (kern == OKV_ISA_AVX512_VNNI && have_bw)
            CHECK(memcmp(yb, y, sizeof(float) * (size_t)(n * rows)) == 0, "vnni and bw differ (%s)",
                  okv_ggml_type_name(t));
    }
    free(w); free(wd); free(wm); free(x); free(xq); free(ref); free(tol); free(ref_exact); free(tol_exact);
    free(scratch); free(y); free(y2); free(y1); free(yb); free(ys);
}

static void test_act_quantizers(void) {
    enum { K = 32 * 8 };
    float x[K];
    for (int i = 0; i < K; i++) x[i] = frand() * 5.0f;
    /* exact ties after scaling by 127/amax = 1: block 1 has amax 127 */
    for (int i = 0; i < 32; i++) x[32 + i] = (float)(i - 16) + 0.5f;
    x[32 + 31] = 127.0f;
    for (int i = 0; i < 32; i++) x[64 + i] = 0.0f; /* zero block */
    int8_t qa[K], qb[K];
    float da[K / 32], db[K / 32];
    okv_mm_quantize_act_scalar(x, K, qa, da);
    CHECK(qa[32 + 0] == -16 && qa[32 + 1] == -14 && qa[32 + 2] == -14, "half to even: %d %d %d", qa[32],
          qa[33], qa[34]);
    CHECK(da[1] == 1.0f && da[2] == 0.0f && qa[64] == 0, "scales %g %g", da[1], da[2]);
    /* each family's SIMD quantizer (AVX2's, NEON's) */
    for (int kern = 1; kern < OKV_ISA_COUNT; kern++) {
        if (!okv_cpu_has_isa((okv_isa)kern)) continue;
        memset(qb, 0x55, sizeof qb);
        okv_mm_quantize_act((okv_isa)kern, x, K, qb, db);
        CHECK(memcmp(qa, qb, K) == 0 && memcmp(da, db, sizeof da) == 0, "%s quantizer differs from scalar",
              okv_isa_name((okv_isa)kern));
    }
}

/* The SIMD Q8_K quantizers (AVX2's, NEON's) against the reference one:
 * random blocks of several scales, a zero block, the largest magnitude
 * negative and first, a tie between +m and -m (the first wins), exact halves
 * after scaling. */
static void test_q8_K_quantizers(void) {
    enum { NB = 12, K = 256 * NB };
    float *x = malloc(sizeof(float) * K);
    for (int i = 0; i < K; i++) x[i] = frand() * (float)(1 << (i / 256 % 6)) * 0.37f;
    memset(x + 256, 0, 256 * sizeof(float));          /* block 1: zero */
    x[512 + 3] = -9.0f; x[512 + 200] = 9.0f;          /* block 2: -9 first */
    x[768 + 7] = 5.0f; x[768 + 9] = -5.0f;            /* block 3: +5 first */
    for (int i = 0; i < 256; i++) x[1024 + i] = (float)(i - 128) * 0.5f; /* block 4: max -64, halves */
    block_q8_K a[NB], b[NB];
    memset(a, 0x55, sizeof a);
    memset(b, 0x55, sizeof b);
    okv_quantize_row_q8_K(x, a, K);
    for (int kern = 1; kern < OKV_ISA_COUNT; kern++) {
        if (!okv_cpu_has_isa((okv_isa)kern)) continue;
        memset(b, 0x55, sizeof b);
        okv_mm_quantize_q8_K((okv_isa)kern, x, b, K);
        int same = 1;
        for (int i = 0; i < NB; i++)
            same &= a[i].d == b[i].d && !memcmp(a[i].qs, b[i].qs, 256) && !memcmp(a[i].bsums, b[i].bsums, 32);
        CHECK(same, "%s q8_K quantizer differs from the reference", okv_isa_name((okv_isa)kern));
    }
    CHECK(a[2].d > 0.0f && a[2].qs[3] == -127 && a[2].qs[200] == 127, "max -9: d %g, q %d %d", a[2].d, a[2].qs[3],
          a[2].qs[200]);
    CHECK(a[3].qs[7] == -127 && a[3].qs[9] == 127, "+5 first: %d %d", a[3].qs[7], a[3].qs[9]);
    free(x);
}

static void test_errors(void) {
    okv_error err;
    float x[64] = {0}, y[4];
    uint8_t w[4 * 68] = {0};
    uint8_t scratch[1024];
    CHECK_STATUS(okv_matmul(NULL, OKV_GGML_Q4_0, w, 1, 48, x, 1, y, scratch, &err), OKV_ERR_INVALID, err);
    CHECK(strstr(err.message, "48") != NULL, "message names k: %s", err.message);
    CHECK_STATUS(okv_matmul(NULL, OKV_GGML_IQ2_XXS, w, 1, 256, x, 1, y, scratch, &err), OKV_ERR_INVALID, err);
    CHECK_STATUS(okv_matmul(NULL, OKV_GGML_Q8_0, w, 1, 32, x, 1, y, NULL, &err), OKV_ERR_INVALID, err);
    CHECK_STATUS(okv_matmul(NULL, OKV_GGML_F32, w, 0, 32, x, 1, y, NULL, &err), OKV_ERR_INVALID, err);
    CHECK_STATUS(okv_matmul(NULL, OKV_GGML_F32, NULL, 1, 32, x, 1, y, NULL, &err), OKV_ERR_INVALID, err);
    CHECK_STATUS(okv_matmul_with(OKV_ISA_COUNT, NULL, OKV_GGML_F32, w, 1, 16, x, 1, y, NULL, &err),
                 OKV_ERR_UNSUPPORTED, err);
    CHECK_STATUS(okv_matmul(NULL, OKV_GGML_F32, w, 1, 16, x, 1, y, NULL, NULL), OKV_OK, err);
    CHECK(okv_matmul_scratch_bytes(OKV_GGML_F16, 64, 3) == 0, "float types need no scratch");
    CHECK(okv_matmul_scratch_bytes(OKV_GGML_Q4_0, 48, 3) == 0, "bad k");
    CHECK(okv_matmul_scratch_bytes(OKV_GGML_Q8_0, 64, 3) >= 3 * (64 + 8), "q8 scratch");
}

/* Whether any of the types multiplies quantized activations. */
static int act_needs_scratch(const int *types, int n) {
    for (int i = 0; i < n; i++)
        if (okv_wtype_get(types[i])->act != OKV_ACT_F32) return 1;
    return 0;
}

/* Rows of product i of a test group: partial row tiles of several sizes. */
static int64_t group_rows(int i) {
    static const int64_t rows[] = {37, 9, 20, 4, 13};
    return rows[i % 5];
}

/* A group of products of one input (activations quantized once, one
 * fork-join) gives every product bit for bit as okv_matmul alone does, with
 * quantized and float weights mixed in one group.  each: okv_matmul_each,
 * product i of column i of x alone, against okv_matmul of that column. */
static void test_group(okv_threadpool **pools, const int *types, int n_ops, int64_t K, int each) {
    enum { N = 7 };
    const int64_t n = each ? 1 : N, n_cols = each ? n_ops : N;
    uint8_t *w[OKV_MM_MAX_OPS];
    float *wd = malloc(sizeof(float) * 37 * K);
    float *y[OKV_MM_MAX_OPS], *y1 = malloc(sizeof(float) * 37 * N);
    float *x = malloc(sizeof(float) * (size_t)(n_cols * K));
    for (int i = 0; i < n_cols * K; i++) x[i] = frand() * 2.0f;
    okv_mm_op ops[OKV_MM_MAX_OPS];
    for (int i = 0; i < n_ops; i++) {
        w[i] = malloc(okv_ggml_row_size(types[i], K) * (size_t)group_rows(i));
        y[i] = malloc(sizeof(float) * (size_t)(group_rows(i) * n));
        make_weights(types[i], group_rows(i), K, w[i], wd);
        ops[i] = (okv_mm_op){.wtype = types[i], .w = w[i], .rows = group_rows(i), .y = y[i]};
    }
    /* the group's largest need: its formats take turns in it */
    size_t sb = 0;
    for (int i = 0; i < n_ops; i++)
        if (okv_matmul_scratch_bytes(types[i], K, n_cols) > sb) sb = okv_matmul_scratch_bytes(types[i], K, n_cols);
    void *scratch = malloc(sb);
    okv_error err;
    for (int kern = 0; kern < OKV_ISA_COUNT; kern++) {
        if (!okv_cpu_has_isa((okv_isa)kern)) continue;
        for (int p = 0; p < 3; p++) {
            for (int i = 0; i < n_ops; i++) memset(y[i], 0xFF, sizeof(float) * (size_t)(group_rows(i) * n));
            if (each)
                CHECK_STATUS(okv_matmul_each_with((okv_isa)kern, pools[p], ops, n_ops, K, x, scratch, &err), OKV_OK,
                             err);
            else
                CHECK_STATUS(okv_matmul_multi_with((okv_isa)kern, pools[p], ops, n_ops, K, x, N, scratch, &err),
                             OKV_OK, err);
            for (int i = 0; i < n_ops; i++) {
                CHECK_STATUS(okv_matmul_with((okv_isa)kern, pools[p], types[i], w[i], group_rows(i), K,
                                             x + (each ? i * K : 0), n, y1, scratch, &err),
                             OKV_OK, err);
                CHECK(memcmp(y1, y[i], sizeof(float) * (size_t)(group_rows(i) * n)) == 0,
                      "%s, %d threads: product %d of %d of the group%s differs from it alone",
                      okv_isa_name((okv_isa)kern), okv_threadpool_size(pools[p]), i, n_ops,
                      each ? " (each its own column)" : "");
            }
        }
    }
    if (each) {
        CHECK_STATUS(okv_matmul_each(NULL, ops, 0, K, x, scratch, &err), OKV_ERR_INVALID, err);
        CHECK_STATUS(okv_matmul_each(NULL, ops, OKV_MM_MAX_OPS + 1, K, x, scratch, &err), OKV_ERR_INVALID, err);
        CHECK_STATUS(okv_matmul_each(NULL, ops, 2, K, NULL, scratch, &err), OKV_ERR_INVALID, err);
    } else {
        CHECK_STATUS(okv_matmul_multi(NULL, ops, 0, K, x, N, scratch, &err), OKV_ERR_INVALID, err);
        CHECK_STATUS(okv_matmul_multi(NULL, ops, OKV_MM_MAX_OPS + 1, K, x, N, scratch, &err), OKV_ERR_INVALID, err);
    }
    if (act_needs_scratch(types, n_ops)) {
        CHECK_STATUS(each ? okv_matmul_each(NULL, ops, n_ops, K, x, NULL, &err)
                          : okv_matmul_multi(NULL, ops, n_ops, K, x, N, NULL, &err),
                     OKV_ERR_INVALID, err);
    }
    ops[n_ops > 1].w = NULL;
    CHECK_STATUS(each ? okv_matmul_each(NULL, ops, n_ops, K, x, scratch, &err)
                      : okv_matmul_multi(NULL, ops, n_ops, K, x, N, scratch, &err),
                 OKV_ERR_INVALID, err);
    for (int i = 0; i < n_ops; i++) { free(w[i]); free(y[i]); }
    free(wd); free(y1); free(scratch); free(x);
}

/* test_group, grouped (okv_matmul_multi) and each its own column
 * (okv_matmul_each), for n_ops of types, then as many products as a group
 * holds (the types in turn). */
static void test_groups(okv_threadpool **pools, const int *types, int n_ops, int64_t K) {
    int all[OKV_MM_MAX_OPS];
    for (int i = 0; i < OKV_MM_MAX_OPS; i++) all[i] = types[i % n_ops];
    for (int each = 0; each < 2; each++) {
        test_group(pools, types, n_ops, K, each);
        test_group(pools, all, OKV_MM_MAX_OPS, K, each);
    }
}

/* The levels (kernels/cpu.h): each falls back within its family, its rank
 * falling at every step, down to scalar, so a kernel taken from a level it
 * includes never needs an instruction its processor lacks (AVX-VNNI falls
 * to AVX2, not to an AVX-512 level: a Zen 4 has AVX-512 VNNI without
 * AVX-VNNI); and this processor runs every level the ones it runs include. */
static void test_isa_levels(void) {
    for (int i = 0; i < OKV_ISA_COUNT; i++) {
        okv_isa l = (okv_isa)i;
        for (int steps = 0; l != OKV_ISA_SCALAR && steps < OKV_ISA_COUNT; steps++) {
            const okv_isa f = okv_isa_fallback(l);
            if (f == OKV_ISA_COUNT) break;
            CHECK(okv_isa_rank(f) < okv_isa_rank(l), "%s falls back to %s, which does not rank lower",
                  okv_isa_name(l), okv_isa_name(f));
            CHECK(f == OKV_ISA_SCALAR || okv_isa_is_x86(f) == okv_isa_is_x86(l), "%s falls back across families to %s",
                  okv_isa_name(l), okv_isa_name(f));
            CHECK(!okv_cpu_has_isa(l) || okv_cpu_has_isa(f), "this processor runs %s but not %s, its fallback",
                  okv_isa_name(l), okv_isa_name(f));
            l = f;
        }
        CHECK(l == OKV_ISA_SCALAR, "%s's fallbacks do not reach scalar", okv_isa_name((okv_isa)i));
    }
}

/* okv_cpu_amd_halves_512's table on signatures of real processors (CPUID
 * leaf 1 EAX), so that a slip in the family or model arithmetic shows. */
static void test_halves_table(void) {
    static const struct {
        unsigned sig;
        int halves;
        const char *what;
    } cpus[] = {
        {0x00A00F11, 1, "EPYC 7003 (Zen 3, family 0x19 model 0x01)"},
        {0x00A10F11, 1, "EPYC 9004 (Zen 4, family 0x19 model 0x11)"},
        {0x00A60F12, 1, "Ryzen 7000 (Zen 4, family 0x19 model 0x61)"},
        {0x00B00F21, 0, "EPYC 9005 (Zen 5, family 0x1A model 0x02)"},
        {0x00B40F40, 0, "Ryzen 9000 (Zen 5, family 0x1A model 0x44)"},
        {0x00B20F40, 1, "Ryzen AI 300 Strix Point (Zen 5, family 0x1A model 0x24)"},
        {0x00B60F00, 1, "Ryzen AI 300 Krackan Point (Zen 5, family 0x1A model 0x60)"},
        {0x00B70F00, 0, "Ryzen AI Max Strix Halo (Zen 5, family 0x1A model 0x70)"},
        {0x00830F10, 0, "EPYC 7002 (Zen 2, family 0x17 model 0x31)"},
    };
    for (size_t i = 0; i < sizeof cpus / sizeof cpus[0]; i++)
        CHECK(okv_cpu_amd_halves_512(cpus[i].sig) == cpus[i].halves, "%s (%08x): halves %d, expected %d", cpus[i].what,
              cpus[i].sig, okv_cpu_amd_halves_512(cpus[i].sig), cpus[i].halves);
}

int main(void) {
    okv_threadpool *pools[3];
    for (int i = 0; i < 3; i++) pools[i] = okv_threadpool_create(i + 1, NULL);
    if (!pools[0] || !pools[1] || !pools[2]) { fprintf(stderr, "thread pools\n"); return 1; }
    printf("best kernel: %s\n", okv_isa_name(okv_cpu_best_isa()));
    test_isa_levels();
    test_halves_table();
    test_act_quantizers();
    test_q8_K_quantizers();
    test_errors();
    const int legacy[] = {OKV_GGML_Q4_0, OKV_GGML_F16, OKV_GGML_Q8_0, OKV_GGML_Q4_0};
    test_groups(pools, legacy, 4, 96);
    /* a Q4_K_M layer's Q/K/V (Q4_K and Q6_K share the Q8_K activations) */
    const int q4_k_m[] = {OKV_GGML_Q4_K, OKV_GGML_Q4_K, OKV_GGML_Q6_K, OKV_GGML_Q5_K};
    test_groups(pools, q4_k_m, 4, 512);
    /* every activation format at once: one pass per format */
    const int mixed[] = {OKV_GGML_Q4_K, OKV_GGML_Q4_1, OKV_GGML_F32, OKV_GGML_Q5_0};
    test_groups(pools, mixed, 4, 256);
    /* odd block counts (3, 7) take the AVX-512 single-block tail; rows 37
     * and 67 leave partial row tiles; n 9 leaves a partial column tile */
    const shape qshapes[] = {{1, 32, 1}, {5, 64, 3}, {37, 96, 1}, {67, 320, 9}, {8, 224, 5}, {13, 32, 4}};
    /* n >= 16 takes the AVX-512 panels, n >= 10 AVX2's: k 1100
     * spans three weight panels and ends in a partial step, n 70 two column
     * blocks, rows 29 every strip height; k 5 leaves AVX2's panels empty
     * (all of it the scalar tail), k 521 a panel of 8 and a tail of 1, n 11
     * column tiles of 3 and one of 2, n 70's first block (64) two of 2 at the
     * end.  From 2 to 9 columns AVX2 sweeps strips of rows by every column,
     * AVX-512 from 2 to 15 (past 6 in sweeps over 12-row strips, of 6-row
     * tiles up to 4 columns): n 2 to 9 each once, 11, 12, 13 and 15, rows
     * that leave every strip height a remainder (29, 30, 25, 19: past a
     * 12-row strip too; 23 rows by 8: 6 + 6, then 6 + 4 + 1), n 65 a last
     * column block of 1 */
    const shape fshapes[] = {{1, 16, 1},   {5, 37, 3},     {37, 96, 1},   {67, 320, 9},  {9, 19, 6},
                             {4, 33, 4},   {29, 1100, 70}, {7, 5, 12},    {13, 521, 11}, {29, 37, 2},
                             {30, 521, 5}, {25, 40, 7},    {13, 96, 8},   {9, 24, 65},   {19, 70, 13},
                             {21, 50, 15}, {23, 96, 8}};
    /* the same for the 256-value K-quant blocks */
    const shape kshapes[] = {{1, 256, 1}, {5, 512, 3}, {37, 768, 1}, {67, 1280, 9}, {8, 256, 5}, {13, 2304, 4}};
    for (size_t ti = 0; ti < sizeof TYPES / sizeof TYPES[0]; ti++) {
        int t = TYPES[ti];
        int quant = okv_wtype_get(t)->act != OKV_ACT_F32;
        const int kq = okv_ggml_block_size(t) == 256;
        const shape *sh = kq ? kshapes : quant ? qshapes : fshapes;
        const int n_shapes = kq      ? (int)(sizeof kshapes / sizeof kshapes[0])
                             : quant ? (int)(sizeof qshapes / sizeof qshapes[0])
                                     : (int)(sizeof fshapes / sizeof fshapes[0]);
        for (int s = 0; s < n_shapes; s++) check_type_shape(t, sh[s], pools);
    }
    for (int i = 0; i < 3; i++) okv_threadpool_free(pools[i]);
    return check_done();
}
