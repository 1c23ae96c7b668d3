/* The attention kernel (okv_attend_run) against a plain double-precision
 * softmax attention, on every ISA path this processor has, for f32 and f16
 * storage, flat and ring layouts, windows, GQA ratios, head dims with and
 * without SIMD tails, one and many queries, pools of 1, 2 and 4 threads, and
 * with and without attention sinks (a logit per head in every denominator). */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "attend/attend.h"
#include "attend/attend_impl.h"
#include "check.h"
#include "kernels/f16.h"
#include "kernels/quant.h"
#include "offkv/offkv.h"

typedef struct tcase {
    okv_dtype dtype;
    int32_t hd, n_kv, group, window, ring, rows, lo_pos, start, n_tokens;
    float scale;
    int sinks;        /* nonzero: a sink logit per head, some above every score */
} tcase;

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static float frand(void) { /* uniform in [-1, 1) */
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (float)((rng_state >> 40) * (1.0 / 8388608.0)) - 1.0f;
}

static double stored(const void *base, okv_dtype dt, size_t i) {
    if (dt == OKV_F16) return okv_f16_to_f32(((const okv_f16 *)base)[i]);
    return ((const float *)base)[i];
}

/* The definition: query at p sees keys max(lo_pos, p - W + 1 if W) .. p,
 * key k in row k (flat) or k % rows (ring), q head h reads kv head h / group. */
static void reference(const tcase *c, const void *K, const void *V, const float *q, const float *sinks,
                      double *out) {
    const int32_t nh = c->n_kv * c->group, hd = c->hd;
    double *s = malloc(sizeof(double) * (size_t)(c->start + c->n_tokens));
    for (int32_t t = 0; t < c->n_tokens; t++)
        for (int32_t h = 0; h < nh; h++) {
            const int32_t p = c->start + t, g = h / c->group;
            int32_t lo = c->window > 0 ? p - c->window + 1 : 0;
            if (lo < c->lo_pos) lo = c->lo_pos;
            const float *qv = q + ((size_t)t * nh + h) * hd;
            double mx = -INFINITY;
            for (int32_t k = lo; k <= p; k++) {
                const size_t row = (size_t)g * c->rows + (size_t)(c->ring ? k % c->rows : k);
                double d = 0;
                for (int32_t i = 0; i < hd; i++) d += (double)qv[i] * stored(K, c->dtype, row * hd + i);
                s[k] = d * c->scale;
                if (s[k] > mx) mx = s[k];
            }
            /* a sink joins the max and the denominator, unscaled, and adds no value */
            if (sinks && sinks[h] > mx) mx = sinks[h];
            double *o = out + ((size_t)t * nh + h) * hd, sum = sinks ? exp(sinks[h] - mx) : 0;
            for (int32_t i = 0; i < hd; i++) o[i] = 0;
            for (int32_t k = lo; k <= p; k++) {
                const size_t row = (size_t)g * c->rows + (size_t)(c->ring ? k % c->rows : k);
                const double w = exp(s[k] - mx);
                sum += w;
                for (int32_t i = 0; i < hd; i++) o[i] += w * stored(V, c->dtype, row * hd + i);
            }
            for (int32_t i = 0; i < hd; i++) o[i] /= sum;
        }
    free(s);
}

static okv_threadpool *pools[3];
static const int pool_sizes[3] = {1, 2, 4};

static void *alloc64(size_t n) { return aligned_alloc(64, (n + 63) / 64 * 64 + 64); }

static void fill_storage(void *dst, okv_dtype dt, size_t n) {
    for (size_t i = 0; i < n; i++) {
        if (dt == OKV_F16) ((okv_f16 *)dst)[i] = okv_f32_to_f16(frand());
        else ((float *)dst)[i] = frand();
    }
}

/* all_isas_threaded: run pools of 2 and 4 on every ISA; otherwise only on
 * the ISA picked by the case counter, so the matrix stays fast under the
 * sanitizers while every ISA still meets threads somewhere in it (the split
 * and merge logic is shared by all ISAs). */
static int case_counter;

static void run_case(const tcase *c, const char *what, int all_isas_threaded) {
    const int32_t nh = c->n_kv * c->group, hd = c->hd;
    const size_t esz = c->dtype == OKV_F16 ? 2 : 4;
    const size_t n_store = (size_t)c->n_kv * c->rows * hd, n_q = (size_t)c->n_tokens * nh * hd;
    void *K = malloc(n_store * esz), *V = malloc(n_store * esz);
    float *q = malloc(n_q * sizeof(float)), *out = malloc(n_q * sizeof(float));
    float *single = malloc(n_q * sizeof(float)), *first = malloc(n_q * sizeof(float));
    double *ref = malloc(n_q * sizeof(double));
    fill_storage(K, c->dtype, n_store);
    fill_storage(V, c->dtype, n_store);
    for (size_t i = 0; i < n_q; i++) q[i] = frand();
    float *sinks = c->sinks ? malloc(sizeof(float) * (size_t)nh) : NULL;
    for (int32_t h = 0; sinks && h < nh; h++) sinks[h] = 4.0f * frand() + (h % 3 == 0 ? 6.0f : 0.0f);
    reference(c, K, V, q, sinks, ref);

    okv_attend_job job = {.k = K, .v = V, .dtype = c->dtype, .n_kv_heads = c->n_kv, .rows = c->rows,
                          .head_dim = hd, .window = c->window, .ring = c->ring, .lo_pos = c->lo_pos,
                          .q = q, .out = out, .n_heads = nh, .n_tokens = c->n_tokens,
                          .start = c->start, .scale = c->scale, .sinks = sinks};
    char desc[200];
    snprintf(desc, sizeof desc, "%s: %s hd=%d kv=%d G=%d W=%d ring=%d rows=%d lo=%d start=%d n=%d sinks=%d",
             what, c->dtype == OKV_F16 ? "f16" : "f32", hd, c->n_kv, c->group, c->window, c->ring,
             c->rows, c->lo_pos, c->start, c->n_tokens, c->sinks);
    /* the levels with attention kernels of their own that run here (every
     * ARM level runs NEON's) */
    static const okv_isa levels[] = {OKV_ISA_SCALAR, OKV_ISA_AVX2, OKV_ISA_AVX512, OKV_ISA_NEON};
    okv_isa here[4];
    int n_here = 0;
    for (int i = 0; i < 4; i++)
        if (okv_cpu_has_isa(levels[i])) here[n_here++] = levels[i];
    const okv_isa threaded_isa = here[case_counter++ % n_here];
    for (int li = 0; li < n_here; li++) {
        const okv_isa isa = here[li];
        const int threaded = all_isas_threaded || isa == threaded_isa;
        for (int pi = 0; pi < (threaded ? 3 : 1); pi++) {
            const size_t bytes = okv_attend_scratch_bytes(&job, pool_sizes[pi]);
            void *scratch = alloc64(bytes);
            /* Threaded runs go twice: their result must not depend on timing. */
            for (int rep = 0; rep < (pi > 0 ? 2 : 1); rep++) {
                for (size_t i = 0; i < n_q; i++) out[i] = NAN;
                okv_attend_run(&job, pools[pi], scratch, (okv_isa)isa);
                double worst = 0;
                size_t at = 0;
                int finite = 1;
                for (size_t i = 0; i < n_q; i++) {
                    finite &= isfinite(out[i]) != 0;
                    const double e = fabs(out[i] - ref[i]) / fmax(1.0, fabs(ref[i]));
                    if (!(e <= worst)) { worst = e; at = i; }
                }
                CHECK(finite && worst <= 3e-5, "%s isa=%s threads=%d: out[%zu]=%.8g ref %.8g",
                      desc, okv_isa_name((okv_isa)isa), pool_sizes[pi], at, out[at], ref[at]);
                if (rep == 0) {
                    memcpy(first, out, n_q * sizeof(float));
                    if (pi == 0) memcpy(single, out, n_q * sizeof(float));
                } else {
                    CHECK(memcmp(first, out, n_q * sizeof(float)) == 0,
                          "%s isa=%s threads=%d: repeat run differs", desc,
                          okv_isa_name((okv_isa)isa), pool_sizes[pi]);
                }
            }
            if (pi > 0) {
                double worst = 0;
                for (size_t i = 0; i < n_q; i++) {
                    const double e = fabs(first[i] - single[i]) / fmax(1.0, fabs(single[i]));
                    if (e > worst) worst = e;
                }
                CHECK(worst <= 1e-6, "%s isa=%s threads=%d: %.3g from single-threaded", desc,
                      okv_isa_name((okv_isa)isa), pool_sizes[pi], worst);
            }
            free(scratch);
        }
    }
    free(K); free(V); free(q); free(out); free(single); free(first); free(ref); free(sinks);
}

/* Q8_0 K/V rows widened on every level with kernels of its own: each value
 * exactly d * q (ggml's dequantization), head dims with and without a
 * partial last block. */
static void test_widen_q8(void) {
    static const okv_isa levels[] = {OKV_ISA_SCALAR, OKV_ISA_AVX2, OKV_ISA_AVX512, OKV_ISA_NEON};
    const int32_t hds[] = {32, 64, 80, 16};
    for (int hi = 0; hi < 4; hi++) {
        const int32_t hd = hds[hi], per_row = (hd + 31) / 32, nr = 5;
        block_q8_0 b[5 * 3];
        float want[5 * 80], got[5 * 80];
        for (int32_t r = 0; r < nr; r++)
            for (int32_t i = 0; i < per_row; i++) {
                block_q8_0 *x = &b[r * per_row + i];
                x->d = okv_f32_to_f16(frand() * 0.1f);
                for (int j = 0; j < 32; j++) x->qs[j] = (int8_t)(frand() * 127.0f);
                for (int j = 0; j < 32 && 32 * i + j < hd; j++)
                    want[r * hd + 32 * i + j] = okv_f16_to_f32(x->d) * (float)x->qs[j];
            }
        for (int li = 0; li < 4; li++) {
            if (!okv_cpu_has_isa(levels[li])) continue;
            okv_attend_widen_q8(b, hd, nr, got, levels[li]);
            CHECK(memcmp(got, want, sizeof(float) * (size_t)(nr * hd)) == 0, "widen q8 %s hd=%d: not d * q",
                  okv_isa_name(levels[li]), hd);
        }
    }
}

/* A query's output must not depend on which other queries share its step:
 * a rewound cache re-evaluates its last tokens in a smaller step than a
 * fresh one did, and test_model_rewind wants the same logits.  The item's
 * first row is the first visible row of its first query, so a step of other
 * tokens places a query's rows elsewhere in a block; the result must be the
 * same bits on every level.  Each position alone, then in steps of 2..n
 * ending at the last position, one thread (row splits depend on the job). */
static void test_step_invariance(void) {
    static const okv_isa levels[] = {OKV_ISA_SCALAR, OKV_ISA_AVX2, OKV_ISA_AVX512, OKV_ISA_NEON};
    typedef struct {
        okv_dtype dtype;
        int32_t hd, n_kv, group, window, ring, rows, lo_pos, last, n;
        float softcap;
    } scase;
    const scase cases[] = {
        /* tiny-gemma3's sliding layers: window 8, ring of 8 + 4 - 1 rows */
        {OKV_F32, 16, 2, 2, 8, 1, 11, 0, 99, 4, 0.0f},
        {OKV_F16, 16, 2, 2, 8, 1, 11, 0, 99, 4, 0.0f},
        /* windows wider than a block: a flat cache and a wrapped ring */
        {OKV_F32, 40, 1, 4, 45, 0, 160, 0, 150, 7, 0.0f},
        {OKV_F16, 24, 2, 1, 70, 1, 70 + 16 - 1, 0, 1000, 9, 0.0f},
        /* a soft cap, full attention from lo_pos, a head-dim tail */
        {OKV_F32, 20, 1, 3, 0, 0, 90, 9, 80, 5, 30.0f},
        {OKV_Q8_0, 32, 2, 2, 8, 1, 11, 0, 99, 4, 0.0f},
    };
    for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
        const scase *c = &cases[ci];
        const int32_t nh = c->n_kv * c->group, hd = c->hd, per_q = nh * hd;
        const size_t row_bytes = c->dtype == OKV_Q8_0 ? (size_t)(hd + 31) / 32 * sizeof(block_q8_0)
                                 : (size_t)hd * (c->dtype == OKV_F16 ? 2 : 4);
        const size_t n_rows = (size_t)c->n_kv * c->rows;
        void *K = malloc(n_rows * row_bytes), *V = malloc(n_rows * row_bytes);
        if (c->dtype == OKV_Q8_0) {
            block_q8_0 *kb = K, *vb = V;
            for (size_t i = 0; i < n_rows * row_bytes / sizeof(block_q8_0); i++) {
                kb[i].d = okv_f32_to_f16(0.02f + 0.01f * frand());
                vb[i].d = okv_f32_to_f16(0.02f + 0.01f * frand());
                for (int e = 0; e < 32; e++) {
                    kb[i].qs[e] = (int8_t)(frand() * 127.0f);
                    vb[i].qs[e] = (int8_t)(frand() * 127.0f);
                }
            }
        } else {
            fill_storage(K, c->dtype, n_rows * hd);
            fill_storage(V, c->dtype, n_rows * hd);
        }
        float *q = malloc(sizeof(float) * (size_t)c->n * per_q);
        float *alone = malloc(sizeof(float) * (size_t)c->n * per_q);
        float *out = malloc(sizeof(float) * (size_t)c->n * per_q);
        for (size_t i = 0; i < (size_t)c->n * per_q; i++) q[i] = 2.0f * frand();
        const int32_t first = c->last - c->n + 1;
        okv_attend_job job = {.k = K, .v = V, .dtype = c->dtype, .n_kv_heads = c->n_kv, .rows = c->rows,
                              .head_dim = hd, .window = c->window, .ring = c->ring, .lo_pos = c->lo_pos,
                              .n_heads = nh, .scale = 1.0f / sqrtf((float)hd), .softcap = c->softcap};
        for (int li = 0; li < 4; li++) {
            if (!okv_cpu_has_isa(levels[li])) continue;
            /* scratch for the widest step serves every smaller one */
            job.n_tokens = c->n;
            void *scratch = alloc64(okv_attend_scratch_bytes(&job, 1));
            for (int32_t t = 0; t < c->n; t++) {
                job.q = q + (size_t)t * per_q;
                job.out = alone + (size_t)t * per_q;
                job.n_tokens = 1;
                job.start = first + t;
                okv_attend_run(&job, pools[0], scratch, levels[li]);
            }
            for (int32_t n = 2; n <= c->n; n++) {
                const int32_t t0 = c->n - n;
                job.q = q + (size_t)t0 * per_q;
                job.out = out;
                job.n_tokens = n;
                job.start = first + t0;
                okv_attend_run(&job, pools[0], scratch, levels[li]);
                for (int32_t t = 0; t < n; t++)
                    CHECK(memcmp(out + (size_t)t * per_q, alone + (size_t)(t0 + t) * per_q,
                                 sizeof(float) * (size_t)per_q) == 0,
                          "step invariance %s case %zu: position %d in a step of %d from %d differs from it alone",
                          okv_isa_name(levels[li]), ci, first + t0 + t, n, first + t0);
            }
            free(scratch);
        }
        free(K); free(V); free(q); free(alone); free(out);
    }
}

int main(void) {
    test_widen_q8();
    okv_error err;
    for (int i = 0; i < 3; i++) {
        pools[i] = okv_threadpool_create(pool_sizes[i], &err);
        CHECK(pools[i] != NULL, "pool of %d: %s", pool_sizes[i], err.message);
        if (!pools[i]) return check_done();
    }
    test_step_invariance();
    const int32_t hds[] = {1, 3, 16, 64, 100, 128, 256, 512};
    const int32_t groups[] = {1, 2, 4, 8}, windows[] = {0, 2, 5, 8};
    const int32_t max_write = 16;
    /* Every head dim meets every window once and every GQA ratio once. */
    for (int dt = 0; dt < 2; dt++)
        for (int hi = 0; hi < 8; hi++)
            for (int wi = 0; wi < 4; wi++) {
                const int32_t hd = hds[hi], W = windows[wi], G = groups[(wi + hi + dt) % 4];
                const int32_t n_kv = 1 + (hi + wi) % 3;
                const float scale = 1.0f / sqrtf((float)hd) * (float)(1 + wi);
                tcase c = {.dtype = dt ? OKV_F16 : OKV_F32, .hd = hd, .n_kv = n_kv, .group = G,
                           .window = W, .ring = W > 0, .scale = scale, .sinks = (hi + wi) % 2};
                /* prefill wider than the window, ring already wrapped */
                c.n_tokens = 13;
                c.start = W ? 45 : 20;
                c.rows = W ? W + max_write - 1 : c.start + c.n_tokens;
                c.lo_pos = W ? 0 : (hi % 2) * 7;
                run_case(&c, "prefill", 0);
                /* one query far past the ring's rows */
                c.n_tokens = 1;
                c.start = W ? 1000 + hi : (hd >= 256 ? 150 : 400);
                c.rows = W ? W + max_write - 1 : c.start + 1;
                run_case(&c, "decode", 0);
                /* a few queries, still one token block */
                c.n_tokens = 3;
                c.start = W ? 77 : (hd >= 256 ? 100 : 260);
                c.rows = W ? W + max_write - 1 : c.start + 3;
                c.lo_pos = W ? 0 : 5;
                run_case(&c, "few", 0);
            }
    /* Row splits: few kv heads, many rows, so 2 and 4 threads split rows;
     * for the ring, chunks straddle the wrap. */
    for (int dt = 0; dt < 2; dt++) {
        const okv_dtype d = dt ? OKV_F16 : OKV_F32;
        for (int32_t n_kv = 1; n_kv <= 3; n_kv++) {
            tcase c = {.dtype = d, .hd = 40, .n_kv = n_kv, .group = 4, .window = 0, .ring = 0,
                       .rows = 1100, .lo_pos = 0, .start = 1099, .n_tokens = 1, .scale = 0.125f,
                       .sinks = n_kv != 1};
            run_case(&c, "split flat", 1);
            c.window = 1030; c.ring = 1; c.rows = 1030 + 4 - 1; c.start = 7000; c.n_tokens = 2;
            run_case(&c, "split ring", 1);
        }
        /* Long prefill: several token blocks, window narrower than a block. */
        tcase p = {.dtype = d, .hd = 32, .n_kv = 2, .group = 2, .window = 5, .ring = 1,
                   .rows = 5 + 70 - 1, .lo_pos = 0, .start = 200, .n_tokens = 70, .scale = 0.3f};
        run_case(&p, "long prefill ring", 1);
        p.window = 0; p.ring = 0; p.start = 0; p.rows = 70;
        run_case(&p, "long prefill flat", 1);
        /* Peaked scores: most weights underflow to zero, none may turn into NaN. */
        tcase u = {.dtype = d, .hd = 16, .n_kv = 1, .group = 2, .window = 0, .ring = 0, .rows = 600,
                   .lo_pos = 0, .start = 590, .n_tokens = 10, .scale = 60.0f};
        run_case(&u, "underflow", 1);
    }
    for (int i = 0; i < 3; i++) okv_threadpool_free(pools[i]);
    return check_done();
}
