/* Elementwise kernels against their formulas evaluated in double. */
#include <math.h>

#include <string.h>

#include "check.h"
#include "kernels/cpu.h"
#include "kernels/ops.h"

static uint64_t rng_state = 0xDEADBEEFCAFEull;
static float frand(void) {
    rng_state ^= rng_state << 13; rng_state ^= rng_state >> 7; rng_state ^= rng_state << 17;
    return (float)((rng_state >> 40) * (2.0 / (1ull << 24)) - 1.0);
}

static double gelu_d(double x) { return 0.5 * x * (1.0 + tanh(sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x))); }

static void test_rmsnorm(void) {
    enum { N = 67, H = 3, D = 16 };
    float x[N], g[N], y[N];
    for (int i = 0; i < N; i++) { x[i] = frand() * 4.0f; g[i] = 1.0f + frand(); }
    const float eps = 1e-5f;
    double ss = 0;
    for (int i = 0; i < N; i++) ss += (double)x[i] * x[i];
    const double s = 1.0 / sqrt(ss / N + eps);
    okv_rmsnorm(y, x, N, g, eps);
    int bad = 0;
    for (int i = 0; i < N; i++) bad += fabs(y[i] - x[i] * s * g[i]) > 1e-6 * (1 + fabs(x[i] * s * g[i]));
    CHECK(bad == 0, "%d rmsnorm values off", bad);
    okv_rmsnorm(x, x, N, NULL, eps); /* in place, no gain */
    bad = 0;
    for (int i = 0; i < N; i++) bad += fabs(x[i] * g[i] - y[i]) > 1e-6 * (1 + fabs(y[i]));
    CHECK(bad == 0, "%d in-place rmsnorm values off", bad);

    float hx[H * D], hy[H * D], hg[D];
    for (int i = 0; i < H * D; i++) hx[i] = frand() * (float)(1 + i / D);
    for (int i = 0; i < D; i++) hg[i] = frand();
    okv_rmsnorm_heads(hy, hx, H, D, hg, 1e-6f);
    bad = 0;
    for (int h = 0; h < H; h++) {
        double q = 0;
        for (int i = 0; i < D; i++) q += (double)hx[h * D + i] * hx[h * D + i];
        double sc = 1.0 / sqrt(q / D + 1e-6);
        for (int i = 0; i < D; i++) {
            double want = hx[h * D + i] * sc * hg[i];
            bad += fabs(hy[h * D + i] - want) > 1e-6 * (1 + fabs(want));
        }
    }
    CHECK(bad == 0, "%d per-head rmsnorm values off", bad);
}

/* theta_i = pos * base^(-2i/n_rot) in double; the f32 recurrence drifts by
 * about (i + 2) ulps of theta, so the bound grows with theta and i. */
static void test_rope(int neox) {
    enum { H = 3, D = 16, R = 12 };
    const float ff[R / 2] = {1.0f, 1.0f, 2.0f, 4.0f, 8.0f, 1.5f};
    const int positions[] = {0, 1, 7, 100, 3000};
    for (int use_ff = 0; use_ff < 2; use_ff++) {
        for (size_t pi = 0; pi < sizeof positions / sizeof positions[0]; pi++) {
            const int pos = positions[pi];
            okv_rope rope = {.n_rot = R, .freq_base = 10000.0f, .freq_scale = use_ff ? 0.25f : 1.0f,
                             .freq_factors = use_ff ? ff : NULL};
            float cs[R], x[H * D], x0[H * D];
            for (int i = 0; i < H * D; i++) x0[i] = x[i] = frand();
            okv_rope_cache(&rope, pos, cs);
            if (neox) okv_rope_neox(x, H, D, R, cs);
            else okv_rope_normal(x, H, D, R, cs);
            int bad = 0;
            for (int h = 0; h < H; h++) {
                const float *a = x0 + h * D;
                const float *b = x + h * D;
                for (int i = 0; i < R / 2; i++) {
                    double th = pos * pow(10000.0, -2.0 * i / R) * rope.freq_scale / (use_ff ? ff[i] : 1.0);
                    int i0 = neox ? i : 2 * i, i1 = neox ? i + R / 2 : 2 * i + 1;
                    double w0 = a[i0] * cos(th) - a[i1] * sin(th);
                    double w1 = a[i0] * sin(th) + a[i1] * cos(th);
                    double tol = (fabs(a[i0]) + fabs(a[i1])) * (fabs(th) * (i + 3) * 0x1p-23 + 0x1p-21);
                    bad += fabs(b[i0] - w0) > tol || fabs(b[i1] - w1) > tol;
                }
                for (int i = R; i < D; i++) bad += b[i] != a[i]; /* not rotated */
            }
            CHECK(bad == 0, "rope %s pos %d ff %d: %d values off", neox ? "neox" : "normal", pos, use_ff, bad);
            if (pos == 0) CHECK(memcmp(x, x0, sizeof x) == 0, "position 0 is the identity");
        }
    }
    /* the two forms pair different elements: rotate a unit vector at 90 deg */
    okv_rope rope = {.n_rot = 4, .freq_base = 10000.0f, .freq_scale = 1.0f};
    float cs[4];
    okv_rope_cache(&rope, 1, cs);
    float v[4] = {1, 0, 0, 0};
    if (neox) okv_rope_neox(v, 1, 4, 4, cs);
    else okv_rope_normal(v, 1, 4, 4, cs);
    /* pair 0 angle is pos * base^0 = 1 rad: (cos 1, sin 1) lands at (0,1) or (0,2) */
    int partner = neox ? 2 : 1;
    CHECK(fabsf(v[0] - cosf(1.0f)) < 1e-7f && fabsf(v[partner] - sinf(1.0f)) < 1e-7f,
          "%s pairs x0 with x%d: %g %g %g %g", neox ? "neox" : "normal", partner, v[0], v[1], v[2], v[3]);
}

static void test_activations(void) {
    enum { N = 200 };
    float x[N], u[N], y[N];
    for (int i = 0; i < N; i++) { x[i] = frand() * 12.0f; u[i] = frand() * 2.0f; }
    x[0] = 0.0f; x[1] = -10.0f; x[2] = 10.0f; x[3] = -11.0f; x[4] = 12.5f; x[5] = 1.0f;
    int bad = 0;
    okv_silu(y, x, N);
    for (int i = 0; i < N; i++) { double w = x[i] / (1 + exp(-(double)x[i])); bad += fabs(y[i] - w) > 1e-6 * (1 + fabs(w)); }
    CHECK(bad == 0, "silu: %d off", bad);
    bad = 0;
    okv_swiglu(y, x, u, N);
    for (int i = 0; i < N; i++) { double w = x[i] / (1 + exp(-(double)x[i])) * u[i]; bad += fabs(y[i] - w) > 1e-6 * (1 + fabs(w)); }
    CHECK(bad == 0, "swiglu: %d off", bad);
    bad = 0;
    okv_sigmoid(y, x, N);
    for (int i = 0; i < N; i++) { double w = 1 / (1 + exp(-(double)x[i])); bad += fabs(y[i] - w) > 1e-6; }
    CHECK(bad == 0, "sigmoid: %d off", bad);
    bad = 0;
    okv_gelu(y, x, N);
    for (int i = 0; i < N; i++) bad += fabs(y[i] - gelu_d(x[i])) > 1e-6 * (1 + fabs(x[i]));
    CHECK(bad == 0, "gelu: %d off", bad);
    bad = 0;
    okv_geglu(y, x, u, N);
    for (int i = 0; i < N; i++) bad += fabs(y[i] - gelu_d(x[i]) * u[i]) > 2e-6 * (1 + fabs(x[i]));
    CHECK(bad == 0, "geglu: %d off", bad);

    /* llama.cpp's table GELU: f16 in, f16 out.  The f16 of the double GELU
     * may differ by one f16 step where f32 rounding lands on the other side
     * of a tie; anything more is an error. */
    okv_f16 *table = malloc(sizeof(okv_f16) * 65536);
    okv_gelu_table_init(table);
    float yt[N], yn[N];
    okv_gelu_ggml(yt, x, N, table);
    okv_gelu_ggml(yn, x, N, NULL);
    CHECK(memcmp(yt, yn, sizeof yt) == 0, "table and on-the-fly GELU differ");
    CHECK(yt[0] == 0.0f && yt[1] == 0.0f && yt[2] == 10.0f && yt[3] == 0.0f && yt[4] == 12.5f,
          "clamps: %g %g %g %g %g", yt[0], yt[1], yt[2], yt[3], yt[4]);
    /* gelu(1) = 0.841192; f16 steps near it are 2^-11: 1723/2048 = 0.84130859 */
    CHECK(yt[5] == 0.84130859375f, "gelu_ggml(1) = %.9g", yt[5]);
    int exact = 0, off = 0;
    for (int i = 0; i < N; i++) {
        if (x[i] <= -10 || x[i] >= 10) continue;
        okv_f16 want = okv_f32_to_f16((float)gelu_d(okv_f16_to_f32(okv_f32_to_f16(x[i]))));
        okv_f16 got = okv_f32_to_f16(yt[i]);
        if (got == want) exact++;
        else if (abs((int)got - (int)want) == 1) off++;
        else CHECK(0, "gelu_ggml(%g) = %g, want %g", x[i], yt[i], okv_f16_to_f32(want));
    }
    CHECK(off * 20 < exact, "%d of %d one step off", off, exact + off);
    float yg[N];
    okv_geglu_ggml(yg, x, u, N, table);
    bad = 0;
    for (int i = 0; i < N; i++) bad += yg[i] != (x[i] <= -10.0f ? 0.0f : yt[i] * u[i]);
    CHECK(bad == 0, "geglu_ggml: %d off", bad);
    free(table);
}

static void test_softmax_softcap(void) {
    enum { N = 50 };
    float x[N], y[N];
    for (int i = 0; i < N; i++) x[i] = frand() * 30.0f;
    x[7] = 1000.0f; /* large: subtracting the max keeps exp finite */
    memcpy(y, x, sizeof x);
    okv_softmax(y, N);
    double sum = 0, m = 1000.0;
    for (int i = 0; i < N; i++) sum += exp(x[i] - m);
    int bad = 0;
    for (int i = 0; i < N; i++) bad += fabs(y[i] - exp(x[i] - m) / sum) > 1e-6;
    CHECK(bad == 0 && y[7] > 0.99f, "softmax: %d off", bad);

    okv_softcap(y, x, N, 30.0f);
    bad = 0;
    for (int i = 0; i < N; i++) bad += fabs(y[i] - 30.0 * tanh(x[i] / 30.0)) > 1e-5;
    CHECK(bad == 0 && fabsf(y[7] - 30.0f) < 1e-5f, "softcap: %d off", bad);

    float a[5] = {1, 2, 3, 4, 5}, b[5] = {0.5f, -1, 2, 0, 3}, o[5];
    okv_add(o, a, b, 5);
    CHECK(o[0] == 1.5f && o[1] == 1 && o[4] == 8, "add");
    okv_mul(o, a, b, 5);
    CHECK(o[0] == 0.5f && o[1] == -2 && o[4] == 15, "mul");
    okv_scale(o, a, -2.0f, 5);
    CHECK(o[0] == -2 && o[4] == -10, "scale");
}

/* The vector silu (ops_avx2.c on x86, ops_neon.c on aarch64) modelled one
 * element at a time: the same correctly rounded steps (fmaf for the fused
 * ones, nearbyintf to nearest even, 2^n exact), so the kernels must give
 * these bits on both families. */
static float silu_model(float x) {
    const float t = fminf(fmaxf(-x, -87.0f), 88.0f);
    const float n = nearbyintf(t * 1.44269504088896341f);
    float r = fmaf(-n, 0.693359375f, t);
    r = fmaf(-n, -2.12194440e-4f, r);
    float p = 1.0f / 5040.0f;
    const float c[7] = {1.0f / 720.0f, 1.0f / 120.0f, 1.0f / 24.0f, 1.0f / 6.0f, 0.5f, 1.0f, 1.0f};
    for (int i = 0; i < 7; i++) p = fmaf(p, r, c[i]);
    return x / (1.0f + p * ldexpf(1.0f, (int)n));
}

/* llama.cpp's table GEGLU, vectorized where the processor allows: every
 * element has the bits of the formula written here (x rounded to f16 by
 * okv_f32_to_f16, that table entry widened, times up; 0 at or below -10,
 * x up at or above 10), for every f16 value as input and every point
 * halfway between two neighbours (where round-to-nearest-even decides),
 * whatever n and offset. */
static void test_geglu_ggml_bits(void) {
    enum { N = 2 * 65536 + 8 };
    static float x[N], u[N], y[N], yc[N];
    okv_f16 *table = malloc(sizeof(okv_f16) * 65536);
    okv_gelu_table_init(table);
    for (uint32_t h = 0; h < 65536; h++) {
        const float f = okv_f16_to_f32((okv_f16)h), next = okv_f16_to_f32((okv_f16)(h + 1));
        x[2 * h] = f;
        /* the midpoint (exact in f32), where h + 1 is a neighbour */
        x[2 * h + 1] = (h & 0x7FFF) < 0x7BFF ? 0.5f * (f + next) : f;
    }
    const float edge[8] = {-10.0f, 10.0f, -9.999999f, 9.999999f, -10.000001f, 10.000001f, NAN, -INFINITY};
    memcpy(x + 2 * 65536, edge, sizeof edge);
    for (int i = 0; i < N; i++) u[i] = (float)(i % 13) * 0.25f - 1.375f;
    okv_geglu_ggml(y, x, u, N, table);
    int bad = 0;
    for (int i = 0; i < N; i++) {
        const float want = x[i] <= -10.0f ? 0.0f
                           : x[i] >= 10.0f ? x[i] * u[i]
                                           : okv_f16_to_f32(table[okv_f32_to_f16(x[i])]) * u[i];
        if (isnan(want) ? !isnan(y[i]) : memcmp(&want, &y[i], sizeof want) != 0) {
            if (bad++ < 3) printf("geglu_ggml(%.9g, %g) = %.9g, want %.9g\n", x[i], u[i], y[i], want);
        }
    }
    CHECK(bad == 0, "geglu_ggml (%s): %d of %d elements differ from the formula's bits", okv_isa_name(okv_cpu_best_isa()),
          bad, (int)N);
    for (int i = 0, len = 1; i < N; i += len, len = len % 9 + 1)
        okv_geglu_ggml(yc + i, x + i, u + i, i + len <= N ? len : N - i, table);
    CHECK(memcmp(y, yc, sizeof y) == 0, "geglu_ggml: chunked and whole differ");
    free(table);
}

/* Where a vector silu runs (any SIMD level), every element has the model's
 * bits, whatever n and its index (chunks of a prefill agree with the whole). */
static void test_silu_bits(void) {
    if (okv_cpu_best_isa() == OKV_ISA_SCALAR) {
        printf("silu bits: the scalar level runs expf, skipped\n");
        return;
    }
    enum { N = 203 };
    float x[N], u[N], y[N], yc[N];
    for (int i = 0; i < N; i++) { x[i] = frand() * 100.0f; u[i] = frand() * 2.0f; }
    x[0] = 0.0f; x[1] = -87.5f; x[2] = 88.5f; x[3] = -1e-30f; x[4] = 3.0f;
    okv_silu(y, x, N);
    int bad = 0;
    for (int i = 0; i < N; i++) bad += memcmp(&y[i], &(float){silu_model(x[i])}, sizeof(float)) != 0;
    CHECK(bad == 0, "silu (%s): %d elements differ from the model's bits", okv_isa_name(okv_cpu_best_isa()), bad);
    okv_swiglu(y, x, u, N);
    bad = 0;
    for (int i = 0; i < N; i++) bad += memcmp(&y[i], &(float){silu_model(x[i]) * u[i]}, sizeof(float)) != 0;
    CHECK(bad == 0, "swiglu (%s): %d elements differ from the model's bits", okv_isa_name(okv_cpu_best_isa()), bad);
    /* chunks of 1..9 elements at odd offsets */
    for (int i = 0, len = 1; i < N; i += len, len = len % 9 + 1) okv_swiglu(yc + i, x + i, u + i, i + len <= N ? len : N - i);
    CHECK(memcmp(y, yc, sizeof y) == 0, "swiglu: chunked and whole differ");
}

int main(void) {
    test_rmsnorm();
    test_rope(0);
    test_rope(1);
    test_activations();
    test_silu_bits();
    test_geglu_ggml_bits();
    test_softmax_softcap();
    return check_done();
}
