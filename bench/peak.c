/* The compute peak of this machine's cores: FMA and int8 dot-product
 * operations per second, per core and over all cores, for each instruction
 * set the matmul kernels use, so a prefill rate (flops per second) can be
 * stated as a share of what the cores can do at all.
 *
 *   build/bench/peak [threads]     (default: 1, then every core)
 *
 * Each line runs independent chains of one instruction sequence (enough
 * chains to cover its latency on the two FMA ports of current x86 cores)
 * and counts operations as the kernels' rates count them: an FMA lane is 2
 * flops (multiply and add), an int8 product added into a sum is 2 ops.
 *   fma256    vfmadd231ps ymm                     16 flop per instruction
 *   fma512    vfmadd231ps zmm                     32
 *   i8 avx2   vpmaddubsw + vpmaddwd + vpaddd ymm  64 ops per sequence (the
 *             AVX2 kernels' int8 dot product: no single instruction for it)
 *   i8 avxvnni vpdpbusd ymm (AVX-VNNI)            64
 *   i8 avx512 vpmaddubsw + vpmaddwd + vpaddd zmm 128
 *   i8 vnni512 vpdpbusd zmm (AVX512-VNNI)        128
 * "wall" is the best of the runs by the clock; "cpu" divides by the CPU
 * seconds the process got (median), which holds still when other work
 * shares the cores. */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "kernels/cpu.h"
#include "offkv/offkv.h"
#include "threads/pool.h"

static double now(clockid_t id) {
    struct timespec ts;
    clock_gettime(id, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* The x86 kernels only (elsewhere the table is empty, saying so). */
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define OKV_PEAK_X86 1

/* Every kernel runs `iters` steps of 12 independent chains and returns a
 * value that depends on all of them (so nothing is optimized away). */
enum { CHAINS = 12 };

/* Keeps GCC from hoisting a loop-invariant operation out of the loop. */
#define OPAQUE(v) __asm__ volatile("" : "+x"(v))
#define OPAQUE512(v) __asm__ volatile("" : "+v"(v))

OKV_TARGET_AVX2 static float fma256(long iters) {
    __m256 acc[CHAINS];
    __m256 a = _mm256_set1_ps(0.999f), b = _mm256_set1_ps(1e-6f);
    for (int c = 0; c < CHAINS; c++) acc[c] = _mm256_set1_ps((float)c);
    for (long i = 0; i < iters; i++)
        for (int c = 0; c < CHAINS; c++) acc[c] = _mm256_fmadd_ps(acc[c], a, b);
    __m256 s = acc[0];
    for (int c = 1; c < CHAINS; c++) s = _mm256_add_ps(s, acc[c]);
    return _mm256_cvtss_f32(s);
}

OKV_TARGET_AVX512 static float fma512(long iters) {
    __m512 acc[CHAINS];
    __m512 a = _mm512_set1_ps(0.999f), b = _mm512_set1_ps(1e-6f);
    for (int c = 0; c < CHAINS; c++) acc[c] = _mm512_set1_ps((float)c);
    for (long i = 0; i < iters; i++)
        for (int c = 0; c < CHAINS; c++) acc[c] = _mm512_fmadd_ps(acc[c], a, b);
    __m512 s = acc[0];
    for (int c = 1; c < CHAINS; c++) s = _mm512_add_ps(s, acc[c]);
    return _mm512_reduce_add_ps(s);
}

/* 6 chains here: each has its own second operand (else GCC computes the
 * product once for all of them), and AVX2 has 16 registers. */
enum { I8_CHAINS = 6 };

OKV_TARGET_AVX2 static float i8_avx2(long iters) {
    __m256i acc[I8_CHAINS], b[I8_CHAINS];
    __m256i a = _mm256_set1_epi8(3);
    const __m256i ones = _mm256_set1_epi16(1);
    for (int c = 0; c < I8_CHAINS; c++) {
        acc[c] = _mm256_set1_epi32(c);
        b[c] = _mm256_set1_epi8((char)(c + 2));
    }
    for (long i = 0; i < iters; i++) {
        OPAQUE(a);
        for (int c = 0; c < I8_CHAINS; c++)
            acc[c] = _mm256_add_epi32(acc[c], _mm256_madd_epi16(_mm256_maddubs_epi16(a, b[c]), ones));
    }
    __m256i s = acc[0];
    for (int c = 1; c < I8_CHAINS; c++) s = _mm256_add_epi32(s, acc[c]);
    return (float)_mm256_extract_epi32(s, 0);
}

__attribute__((target("avx2,avxvnni"))) static float i8_avxvnni(long iters) {
    __m256i acc[CHAINS];
    const __m256i a = _mm256_set1_epi8(3), b = _mm256_set1_epi8(-5);
    for (int c = 0; c < CHAINS; c++) acc[c] = _mm256_set1_epi32(c);
    for (long i = 0; i < iters; i++)
        for (int c = 0; c < CHAINS; c++) acc[c] = _mm256_dpbusd_avx_epi32(acc[c], a, b);
    __m256i s = acc[0];
    for (int c = 1; c < CHAINS; c++) s = _mm256_add_epi32(s, acc[c]);
    return (float)_mm256_extract_epi32(s, 0);
}

OKV_TARGET_AVX512 static float i8_avx512(long iters) {
    __m512i acc[CHAINS], b[CHAINS];
    __m512i a = _mm512_set1_epi8(3);
    const __m512i ones = _mm512_set1_epi16(1);
    for (int c = 0; c < CHAINS; c++) {
        acc[c] = _mm512_set1_epi32(c);
        b[c] = _mm512_set1_epi8((char)(c + 2));
    }
    for (long i = 0; i < iters; i++) {
        OPAQUE512(a);
        for (int c = 0; c < CHAINS; c++)
            acc[c] = _mm512_add_epi32(acc[c], _mm512_madd_epi16(_mm512_maddubs_epi16(a, b[c]), ones));
    }
    __m512i s = acc[0];
    for (int c = 1; c < CHAINS; c++) s = _mm512_add_epi32(s, acc[c]);
    return (float)_mm512_cvtsi512_si32(s); /* the sums wrap: no reduction in C ints */
}

OKV_TARGET_AVX512VNNI static float i8_vnni512(long iters) {
    __m512i acc[CHAINS];
    const __m512i a = _mm512_set1_epi8(3), b = _mm512_set1_epi8(-5);
    for (int c = 0; c < CHAINS; c++) acc[c] = _mm512_set1_epi32(c);
    for (long i = 0; i < iters; i++)
        for (int c = 0; c < CHAINS; c++) acc[c] = _mm512_dpbusd_epi32(acc[c], a, b);
    __m512i s = acc[0];
    for (int c = 1; c < CHAINS; c++) s = _mm512_add_epi32(s, acc[c]);
    return (float)_mm512_cvtsi512_si32(s); /* the sums wrap: no reduction in C ints */
}

#endif

typedef struct kernel {
    const char *name, *unit;
    float (*fn)(long iters);
    int chains;
    double ops_per_step; /* per chain and iteration */
    int (*have)(void);
} kernel;

#ifdef OKV_PEAK_X86
static int have_avx2(void) { return okv_cpu_has_isa(OKV_ISA_AVX2); }
static int have_avx512(void) { return okv_cpu_has_isa(OKV_ISA_AVX512); }
static int have_vnni512(void) { return okv_cpu_has_isa(OKV_ISA_AVX512_VNNI); }
static int have_avxvnni(void) {
    __builtin_cpu_init();
    return okv_cpu_has_isa(OKV_ISA_AVX2) && __builtin_cpu_supports("avxvnni");
}

static const kernel kernels[] = {
    {"fma256", "GFLOP/s", fma256, CHAINS, 16, have_avx2},
    {"fma512", "GFLOP/s", fma512, CHAINS, 32, have_avx512},
    {"i8 avx2", "Gop/s", i8_avx2, I8_CHAINS, 64, have_avx2},
    {"i8 avxvnni", "Gop/s", i8_avxvnni, CHAINS, 64, have_avxvnni},
    {"i8 avx512", "Gop/s", i8_avx512, CHAINS, 128, have_avx512},
    {"i8 vnni512", "Gop/s", i8_vnni512, CHAINS, 128, have_vnni512},
};
#else
static int have_none(void) { return 0; }
static const kernel kernels[] = {{"none", "", NULL, 0, 0, have_none}};
#endif

typedef struct run_arg {
    const kernel *k;
    long iters;
    float sink[64 * 16];
} run_arg;

static void run_job(void *p, int32_t ith, int32_t nth) {
    (void)nth;
    run_arg *a = p;
    a->sink[ith * 16] = a->k->fn(a->iters);
}

enum { REPS = 5 };

static void measure(okv_threadpool *pool, const kernel *k) {
    const int nt = okv_threadpool_size(pool);
    run_arg a = {.k = k, .iters = 1000};
    /* grow the run to about 0.1 s of one core */
    for (;;) {
        const double t0 = now(CLOCK_PROCESS_CPUTIME_ID);
        okv_parallel(pool, run_job, &a);
        const double dt = (now(CLOCK_PROCESS_CPUTIME_ID) - t0) / nt;
        if (dt > 0.1 || a.iters > (1L << 40)) break;
        a.iters *= dt > 0.01 ? (long)(0.12 / dt) + 1 : 10;
    }
    double best = 0, cpu[REPS];
    for (int r = 0; r < REPS; r++) {
        const double w0 = now(CLOCK_MONOTONIC), c0 = now(CLOCK_PROCESS_CPUTIME_ID);
        okv_parallel(pool, run_job, &a);
        const double w = now(CLOCK_MONOTONIC) - w0, c = now(CLOCK_PROCESS_CPUTIME_ID) - c0;
        const double ops = (double)a.iters * k->chains * k->ops_per_step * nt;
        if (ops / w > best) best = ops / w;
        cpu[r] = ops / c;
    }
    qsort(cpu, REPS, sizeof cpu[0], cmp_double);
    printf("%-11s %2d thread(s)  %8.1f %-7s wall (best of %d)  %8.1f per core  %8.1f per CPU-second\n", k->name, nt,
           best / 1e9, k->unit, REPS, best / 1e9 / nt, cpu[REPS / 2] / 1e9);
}

int main(int argc, char **argv) {
    const long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    int counts[2] = {1, ncpu > 1 ? (int)ncpu : 0};
    if (argc > 1) {
        counts[0] = atoi(argv[1]);
        counts[1] = 0;
        if (counts[0] < 1 || counts[0] > 64) {
            fprintf(stderr, "peak: threads %s must be 1 to 64\n", argv[1]);
            return 2;
        }
    }
    printf("peak compute: best ISA %s (OKV_ISA caps the kernels, not this benchmark)\n",
           okv_isa_name(okv_cpu_best_isa()));
#ifndef OKV_PEAK_X86
    printf("peak: no kernels for this architecture yet (x86 only)\n");
#endif
    for (int i = 0; i < 2 && counts[i]; i++) {
        okv_threadpool *pool = okv_threadpool_create(counts[i], NULL);
        if (!pool) return 1;
        for (size_t j = 0; j < sizeof kernels / sizeof kernels[0]; j++)
            if (kernels[j].have()) measure(pool, &kernels[j]);
        okv_threadpool_free(pool);
    }
    return 0;
}
