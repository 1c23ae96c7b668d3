/* Memory read bandwidth: T threads sum disjoint halves (thirds, ...) of a
 * 1 GiB buffer, far larger than any cache, as decode reads its weights.
 * The median over the runs is the number `make bench-peer` divides weight
 * and K/V bytes per token by to get each type's decode roofline.
 *
 *   build/bench/membw [threads (2)] [runs (5)] [MiB (1024)]
 * Last line: "read GB/s: X" (10^9 bytes per second), for scripts. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "offkv/offkv.h"
#include "threads/pool.h"

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* sums[] one cache line apart, so the threads' results do not share a line */
typedef struct read_arg { const uint64_t *p; size_t n; uint64_t sums[64 * 8]; } read_arg;

/* The widest loads the CPU has (the engines' kernels use them too): with
 * 16-byte loads one thread on a busy machine was bound by its load
 * instructions (3.7 GB/s against 6.5 with 64-byte loads), and the roofline
 * came out too low.  Four independent sums, not one add chain.  The vector
 * types are only 8-byte aligned, so a thread's range may start anywhere;
 * ranges split at multiples of 8 words, so each vector lies in one. */
#define READ_KERNEL(name, bytes, attr)                                                   \
    typedef uint64_t name##_v __attribute__((vector_size(bytes), aligned(8)));        \
    attr static uint64_t name(const uint64_t *p, size_t n) {                           \
        const size_t w = bytes / 8;                                                    \
        const name##_v *v = (const name##_v *)p;                                       \
        name##_v s0 = {0}, s1 = s0, s2 = s0, s3 = s0;                                  \
        size_t i = 0, nv = n / w;                                                      \
        for (; i + 4 <= nv; i += 4) {                                                  \
            s0 += v[i];                                                                \
            s1 += v[i + 1];                                                            \
            s2 += v[i + 2];                                                            \
            s3 += v[i + 3];                                                            \
        }                                                                              \
        for (; i < nv; i++) s0 += v[i];                                                \
        name##_v s = s0 + s1 + s2 + s3;                                                \
        uint64_t t = 0;                                                                \
        for (size_t k = 0; k < w; k++) t += s[k];                                      \
        for (size_t j = nv * w; j < n; j++) t += p[j];                                 \
        return t;                                                                      \
    }
READ_KERNEL(read_sse2, 16, )
#if defined(__x86_64__)
READ_KERNEL(read_avx2, 32, __attribute__((target("avx2"))))
READ_KERNEL(read_avx512, 64, __attribute__((target("avx512f"))))
#endif

static uint64_t (*read_fn)(const uint64_t *, size_t) = read_sse2;
static const char *read_name = "sse2";

static void read_job(void *p, int32_t ith, int32_t nth) {
    read_arg *a = p;
    size_t lo = a->n * (size_t)ith / (size_t)nth, hi = a->n * (size_t)(ith + 1) / (size_t)nth;
    lo &= ~(size_t)7;
    hi = hi == a->n ? hi : hi & ~(size_t)7;
    a->sums[ith * 8] = read_fn(a->p + lo, hi - lo);
}

int main(int argc, char **argv) {
    int threads = argc > 1 ? atoi(argv[1]) : 2, runs = argc > 2 ? atoi(argv[2]) : 5;
    long mib = argc > 3 ? atol(argv[3]) : 1024;
    if (threads < 1 || threads > 64 || runs < 1 || runs > 100 || mib < 1) {
        fprintf(stderr, "usage: membw [threads 1..64] [runs 1..100] [MiB >= 1]\n");
        return 2;
    }
#if defined(__x86_64__)
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f")) read_fn = read_avx512, read_name = "avx512";
    else if (__builtin_cpu_supports("avx2")) read_fn = read_avx2, read_name = "avx2";
#endif
    const size_t bytes = (size_t)mib << 20;
    uint64_t *buf = malloc(bytes);
    okv_error err = {0};
    okv_threadpool *pool = okv_threadpool_create(threads, &err);
    if (!buf || !pool) {
        fprintf(stderr, "membw: %s\n", buf ? err.message : "out of memory");
        free(buf);
        return 1;
    }
    /* written once, so every page is backed before the timed reads */
    memset(buf, 1, bytes);
    read_arg *ra = calloc(1, sizeof *ra);
    double t[100];
    uint64_t check = 0;
    for (int r = 0; r < runs && ra; r++) {
        ra->p = buf;
        ra->n = bytes / sizeof *buf;
        double t0 = now();
        okv_parallel(pool, read_job, ra);
        t[r] = now() - t0;
        for (int k = 0; k < threads; k++) check += ra->sums[k * 8];
    }
    if (ra) {
        qsort(t, (size_t)runs, sizeof *t, cmp_double);
        printf("%d thread(s), %s loads, %ld MiB buffer, median of %d: %.3f s per pass (checksum %llu)\n", threads,
               read_name, mib, runs, t[runs / 2], (unsigned long long)check);
        printf("read GB/s: %.2f\n", (double)bytes / t[runs / 2] / 1e9);
    }
    free(ra);
    okv_threadpool_free(pool);
    free(buf);
    return ra ? 0 : 1;
}
