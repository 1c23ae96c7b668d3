/* Matrix products per weight type: GFLOP/s and GB/s of weight bytes read,
 * beside memcpy and a plain read of memory measured in the same run.
 *
 * Decode reads every weight once per token from memory (a 1B model is larger
 * than any cache), so the matvec runs cycle through enough copies of the
 * matrix (>= 512 MiB) that each call reads from DRAM, not from L3.
 *
 *   build/bench/matmul [reps] [kernel] [type] [n] [threads] [k] [hot]
 *     kernel: scalar|avx2|avxvnni|avx512|avx512vnni; type: a layout's name, q4_0 (ggml's),
 *     q4_0x16 (the repacked one a model multiplies with), q4_K, f16, ... (default all);
 *     n: only the 2048xk and 5632xk products with n columns (prefill: 64 or more);
 *     threads: only that many (default 1 and 2);
 *     k: their row length (default 2048; gpt-oss's is 2880, whose Q8_0 and
 *     MXFP4 rows end in a compact group: 3072 reads what a padded one would);
 *     hot: 1 measures one (1024 x threads) x k matrix from cache instead, the
 *     n-column kernel's compute ceiling
 *
 * The "hot" line multiplies one small matrix (1024 rows per thread) over and
 * over from cache: the kernel's compute ceiling for decode. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/hugemem.h"
#include "kernels/matmul.h"
#include "kernels/mxfp4x16.h"
#include "kernels/q4_0x16.h"
#include "kernels/q4_Kx16.h"
#include "kernels/q5_0x16.h"
#include "kernels/q6_Kx16.h"
#include "kernels/q8_0x16.h"
#include "kernels/quantize.h"
#include "kernels/quant.h"
#include "kernels/wtype.h"
#include "kernels/x16mm.h"
#include "offkv/offkv.h"
#include "threads/pool.h"

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* CPU seconds of the whole process (all threads): on a machine shared with
 * other work, flops per CPU second hold still where wall-clock rates
 * follow the load. */
static double cpu_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return v[n / 2];
}

static uint64_t rng_state = 88172645463325252ull;
static float frand(void) {
    rng_state ^= rng_state << 13; rng_state ^= rng_state >> 7; rng_state ^= rng_state << 17;
    return (float)((rng_state >> 40) * (2.0 / (1ull << 24)) - 1.0);
}

enum { POOL_BYTES = 512 << 20 };

typedef struct read_arg { const uint64_t *p; size_t n; uint64_t sums[64]; } read_arg;

static void read_job(void *p, int32_t ith, int32_t nth) {
    read_arg *a = p;
    size_t lo = a->n * (size_t)ith / (size_t)nth, hi = a->n * (size_t)(ith + 1) / (size_t)nth;
    uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    for (size_t i = lo; i + 4 <= hi; i += 4) { s0 += a->p[i]; s1 += a->p[i + 1]; s2 += a->p[i + 2]; s3 += a->p[i + 3]; }
    a->sums[ith * 8] = s0 + s1 + s2 + s3;
}

typedef struct copy_arg { uint8_t *dst; const uint8_t *src; size_t n; } copy_arg;

static void copy_job(void *p, int32_t ith, int32_t nth) {
    copy_arg *a = p;
    size_t lo = a->n * (size_t)ith / (size_t)nth, hi = a->n * (size_t)(ith + 1) / (size_t)nth;
    memcpy(a->dst + lo, a->src + lo, hi - lo);
}

static void peers(okv_threadpool *pool, int reps) {
    const size_t n = 256u << 20;
    uint8_t *a = malloc(n), *b = malloc(n);
    if (!a || !b) { free(a); free(b); return; }
    memset(a, 1, n);
    memset(b, 2, n);
    double tc[64], tr[64];
    for (int r = 0; r < reps; r++) {
        copy_arg ca = {b, a, n};
        double t = now();
        okv_parallel(pool, copy_job, &ca);
        tc[r] = now() - t;
        read_arg ra = {.p = (const uint64_t *)a, .n = n / 8};
        t = now();
        okv_parallel(pool, read_job, &ra);
        tr[r] = now() - t;
        if (ra.sums[0] == 42) printf(" ");
    }
    printf("peers, %d thread(s): memcpy %.1f GB/s (bytes copied; %.1f GB/s of traffic), read %.1f GB/s\n",
           okv_threadpool_size(pool), n / median(tc, reps) / 1e9, 2 * n / median(tc, reps) / 1e9,
           n / median(tr, reps) / 1e9);
    free(a);
    free(b);
}

/* The formats offkv has no quantizer for: random bytes with small f16
 * scales (d, and m or dmin) at their offsets in each block. */
static void fill_random(int type, uint8_t *dst, size_t bytes) {
    static const struct { int type, d_off, m_off; } offs[] = {
        {OKV_GGML_Q4_1, 0, 2}, {OKV_GGML_Q5_0, 0, -1}, {OKV_GGML_Q5_1, 0, 2}, {OKV_GGML_Q2_K, 80, 82},
        {OKV_GGML_Q3_K, 108, -1}, {OKV_GGML_Q4_K, 0, 2}, {OKV_GGML_Q5_K, 0, 2}, {OKV_GGML_Q6_K, 208, -1}};
    for (size_t i = 0; i < bytes; i++) dst[i] = (uint8_t)((frand() + 1.0f) * 127.99f);
    const size_t bs = okv_ggml_type_size(type);
    for (size_t o = 0; o < sizeof offs / sizeof offs[0]; o++) {
        if (offs[o].type != type) continue;
        for (size_t b = 0; b < bytes / bs; b++) {
            const okv_f16 d = okv_f32_to_f16(0.01f * frand()), m = okv_f32_to_f16(0.02f * frand());
            memcpy(dst + b * bs + offs[o].d_off, &d, 2);
            if (offs[o].m_off >= 0) memcpy(dst + b * bs + offs[o].m_off, &m, 2);
        }
    }
}

/* hot: one copy of the matrix, read again and again from cache: the
 * kernel's compute ceiling, which decode needs well above the memory's. */
static void bench(okv_isa kern, okv_threadpool *pool, int type, int64_t rows, int64_t k, int64_t n, int reps,
                  int hot) {
    const size_t mbytes = okv_wtype_row_size(type, k) * (size_t)rows;
    int copies = n <= 16 && !hot ? (int)((POOL_BYTES + mbytes - 1) / mbytes) : 1;
    /* in huge pages, as the model's weights are (model.c's repack_weights
     * says why: with 4 KiB pages an F16 row of 2048 values is a page) */
    uint8_t *w = okv_huge_alloc(mbytes * (size_t)copies);
    float *row = malloc(sizeof(float) * (size_t)k);
    /* 64-byte aligned as the model's activations (engine/batch.c): malloc's
     * large blocks start 16 bytes into a page, and half the 32-byte loads of
     * AVX2's float block pass then crossed a cache line (5% slower). */
    float *x = aligned_alloc(64, (sizeof(float) * (size_t)(k * n) + 63) & ~(size_t)63);
    float *y = malloc(sizeof(float) * (size_t)(rows * n));
    size_t sb = okv_matmul_scratch_bytes(type, k, n);
    void *scratch = sb ? malloc(sb) : NULL;
    if (!w || !row || !x || !y || (sb && !scratch)) { printf("out of memory\n"); goto done; }
    const size_t rb = okv_wtype_row_size(type, k);
    for (int64_t r = 0; r < rows; r++) {
        for (int64_t i = 0; i < k; i++) row[i] = frand();
        uint8_t *dst = w + (size_t)r * rb;
        switch (type) {
        case OKV_GGML_F32: memcpy(dst, row, rb); break;
        case OKV_GGML_F16: okv_f32_to_f16_row((okv_f16 *)dst, row, k); break;
        case OKV_GGML_BF16: okv_f32_to_bf16_row((okv_bf16 *)dst, row, k); break;
        case OKV_GGML_Q8_0: okv_quantize_row_q8_0(row, (block_q8_0 *)dst, k); break;
        case OKV_GGML_Q4_0: okv_quantize_row_q4_0(row, (block_q4_0 *)dst, k); break;
        case OKV_WT_Q8_0X16: {
            block_q8_0 tmp[OKV_X16_BLOCKS * 64]; /* k <= 32768 */
            okv_quantize_row_q8_0(row, tmp, k);
            okv_repack_q8_0x16(dst, tmp, 1, k);
            break;
        }
        case OKV_WT_Q6_KX16: {
            block_q6_K tmp[128]; /* k <= 32768 */
            okv_quantize_row_q6_K(row, tmp, k);
            okv_repack_q6_Kx16(dst, tmp, 1, k);
            break;
        }
        case OKV_WT_Q5_0X16: {
            block_q5_0 tmp[OKV_X16_BLOCKS * 64]; /* k <= 32768 */
            okv_quantize_row_q5_0(row, tmp, k);
            okv_repack_q5_0x16(dst, tmp, 1, k);
            break;
        }
        case OKV_WT_Q5_KX16: {
            block_q5_K tmp[128]; /* k <= 32768 */
            okv_quantize_row_q5_K(row, tmp, k);
            okv_repack_q5_Kx16(dst, tmp, 1, k);
            break;
        }
        case OKV_WT_Q4_KX16: {
            block_q4_K tmp[128]; /* k <= 32768 */
            okv_quantize_row_q4_K(row, tmp, k);
            okv_repack_q4_Kx16(dst, tmp, 1, k);
            break;
        }
        case OKV_WT_Q4_KX16MM: {
            block_q4_K tmp[128]; /* k <= 32768 */
            okv_quantize_row_q4_K(row, tmp, k);
            okv_repack_q4_Kx16mm(dst, tmp, 1, k);
            break;
        }
        case OKV_WT_Q4_0X16: {
            block_q4_0 tmp[OKV_X16_BLOCKS * 64]; /* k <= 32768 */
            okv_quantize_row_q4_0(row, tmp, k);
            okv_repack_q4_0x16(dst, tmp, 1, k);
            break;
        }
        case OKV_WT_Q4_0X16MM: {
            block_q4_0 tmp[OKV_X16_BLOCKS * 64]; /* k <= 32768 */
            okv_quantize_row_q4_0(row, tmp, k);
            okv_repack_q4_0x16mm(dst, tmp, 1, k);
            break;
        }
        case OKV_WT_Q8_0X16MM: {
            block_q8_0 tmp[OKV_X16_BLOCKS * 64]; /* k <= 32768 */
            okv_quantize_row_q8_0(row, tmp, k);
            okv_repack_q8_0x16mm(dst, tmp, 1, k);
            break;
        }
        case OKV_WT_MXFP4X16: {
            /* no MXFP4 quantizer: random nibbles, exponents near 2^0 */
            block_mxfp4 tmp[OKV_X16_BLOCKS * 64]; /* k <= 32768 */
            fill_random(OKV_GGML_MXFP4, (uint8_t *)tmp, sizeof(block_mxfp4) * (size_t)(k / OKV_QK));
            for (int64_t b = 0; b < k / OKV_QK; b++) tmp[b].e = (uint8_t)(120 + b % 16);
            okv_repack_mxfp4x16(dst, tmp, 1, k);
            break;
        }
        default: fill_random(type, dst, rb); break;
        }
    }
    for (int c = 1; c < copies; c++) memcpy(w + (size_t)c * mbytes, w, mbytes);
    for (int64_t i = 0; i < k * n; i++) x[i] = frand();
    double t[256], tc[256];
    int runs = n == 1 ? reps * 4 : reps;
    if (runs > 256) runs = 256;
    for (int r = -copies; r < runs; r++) { /* the first pass over the copies warms page tables */
        double t0 = now(), c0 = cpu_now();
        okv_status st = okv_matmul_with(kern, pool, type, w + (size_t)((r + copies) % copies) * mbytes, rows, k,
                                        x, n, y, scratch, NULL);
        double dt = now() - t0, dc = cpu_now() - c0;
        if (st != OKV_OK) { printf("%s: matmul failed (%d)\n", okv_wtype_get(type)->name, st); goto done; }
        if (r >= 0) { t[r] = dt; tc[r] = dc; }
    }
    double tm = median(t, runs), tcm = median(tc, runs), best = t[0]; /* median() sorted t */
    const double flop = 2.0 * (double)rows * (double)k * (double)n;
    /* best: the fastest run, which a loud neighbour on a shared host can
     * only slow down; the figure to compare two builds of a kernel by */
    printf("%-5s %5lldx%-5lld n=%-3lld t=%d  %8.3f ms  %7.1f GFLOP/s  %6.1f GB/s weights  %7.1f GFLOP/cpu-s  best %7.1f GFLOP/s%s\n",
           okv_wtype_get(type)->name, (long long)rows, (long long)k, (long long)n, okv_threadpool_size(pool),
           tm * 1e3, flop / tm / 1e9, (double)mbytes / tm / 1e9, flop / tcm / 1e9, flop / best / 1e9,
           hot ? " (hot: in cache)" : "");
done:
    free(w); free(row); free(x); free(y); free(scratch);
}

static bool is_mm(int t) { return t == OKV_WT_Q4_0X16MM || t == OKV_WT_Q8_0X16MM || t == OKV_WT_Q4_KX16MM; }

int main(int argc, char **argv) {
    int reps = argc > 1 ? atoi(argv[1]) : 7;
    if (reps < 1) reps = 1;
    if (reps > 64) reps = 64;
    okv_isa kern = okv_cpu_best_isa();
    if (argc > 2) {
        kern = okv_isa_from_name(argv[2]);
        if (kern == OKV_ISA_COUNT) { printf("kernel '%s': not a kernel name (scalar, avx2, avxvnni, avx512, ...)\n", argv[2]); return 1; }
    }
    if (!okv_cpu_has_isa(kern)) { printf("kernel %s not available\n", okv_isa_name(kern)); return 1; }
    const int types[] = {OKV_WT_Q4_0X16, OKV_WT_Q8_0X16, OKV_WT_Q4_0X16MM, OKV_WT_Q8_0X16MM, OKV_WT_Q4_KX16MM, OKV_WT_Q4_KX16, OKV_WT_Q5_KX16, OKV_WT_Q6_KX16, OKV_WT_MXFP4X16, OKV_WT_Q5_0X16, OKV_GGML_Q4_0, OKV_GGML_Q8_0, OKV_GGML_F16, OKV_GGML_BF16, OKV_GGML_F32,
                         OKV_GGML_Q4_K, OKV_GGML_Q6_K, OKV_GGML_Q5_K, OKV_GGML_Q3_K, OKV_GGML_Q2_K,
                         OKV_GGML_Q4_1, OKV_GGML_Q5_0, OKV_GGML_Q5_1};
    /* the SMMLA layouts run only their scalar kernel below i8mm (a model never
     * keeps them there): measured when i8mm runs or when named */
    const bool skip_mm = kern != OKV_ISA_I8MM && argc <= 3;
    const int64_t only_n = argc > 4 ? atoll(argv[4]) : 0;
    const int only_t = argc > 5 ? atoi(argv[5]) : 0;
    const int64_t only_k = argc > 6 ? atoll(argv[6]) : 2048;
    const int only_hot = argc > 7 && atoi(argv[7]) == 1;
    if (argc > 3) {
        int found = 0;
        for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++) found |= !strcmp(argv[3], okv_wtype_get(types[ti])->name);
        if (!found) { printf("type '%s': not one this benchmark measures (q4_0x16, q8_0x16, mxfp4x16, f16, ...)\n", argv[3]); return 1; }
    }
    if (only_k < 32 || only_k > 32768 || only_k % 32 != 0) { /* the repacking buffers' 32768 */
        printf("k %lld: not a multiple of 32 within 32..32768\n", (long long)only_k);
        return 1;
    }
    printf("kernel %s, median of %d runs (x4 for n=1)\n", okv_isa_name(kern), reps);
    for (int nt = 1; nt <= 2; nt++) {
        if (only_t > 0 && nt != only_t) continue;
        okv_threadpool *pool = okv_threadpool_create(nt, NULL);
        if (!pool) return 1;
        if (only_n > 0) {
            for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++)
                if (okv_wtype_row_size(types[ti], only_k) && /* rows of whole blocks of the type */
                    ((argc <= 3 && !(skip_mm && is_mm(types[ti]))) ||
                     (argc > 3 && !strcmp(argv[3], okv_wtype_get(types[ti])->name)))) {
                    if (only_hot) {
                        bench(kern, pool, types[ti], 1024 * nt, only_k, only_n, reps, 1);
                        continue;
                    }
                    bench(kern, pool, types[ti], 2048, only_k, only_n, reps, 0);
                    bench(kern, pool, types[ti], 5632, only_k, only_n, reps, 0);
                }
            okv_threadpool_free(pool);
            continue;
        }
        peers(pool, reps);
        for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++) {
            if (argc > 3 && strcmp(argv[3], okv_wtype_get(types[ti])->name)) continue;
            if (skip_mm && is_mm(types[ti])) continue;
            bench(kern, pool, types[ti], 2048, 2048, 1, reps, 0);
            bench(kern, pool, types[ti], 5632, 2048, 1, reps, 0);
            bench(kern, pool, types[ti], 1024 * nt, 2048, 1, reps, 1);
            /* batched decode: a few columns, weights still from DRAM */
            for (int64_t n = 2; n <= 16; n *= 2) bench(kern, pool, types[ti], 5632, 2048, n, reps, 0);
            bench(kern, pool, types[ti], 5632, 2048, 64, reps, 0);
        }
        okv_threadpool_free(pool);
    }
    return 0;
}
