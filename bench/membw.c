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

/* 16-byte vectors (SSE2, in every x86-64 build): wide loads, so the loop is
 * bound by memory rather than by load instructions. */
typedef uint64_t v2u __attribute__((vector_size(16)));

static void read_job(void *p, int32_t ith, int32_t nth) {
    read_arg *a = p;
    size_t lo = a->n * (size_t)ith / (size_t)nth, hi = a->n * (size_t)(ith + 1) / (size_t)nth;
    /* even bounds: 16-byte aligned vectors (malloc's block is), and the
     * neighbouring thread rounds the shared bound the same way */
    lo = (lo + 1) & ~(size_t)1;
    hi = hi == a->n ? hi : (hi + 1) & ~(size_t)1;
    const v2u *v = (const v2u *)(a->p + lo);
    size_t nv = (hi - lo) / 2, i = 0;
    /* four independent sums: not one add chain */
    v2u s0 = {0, 0}, s1 = s0, s2 = s0, s3 = s0;
    for (; i + 4 <= nv; i += 4) {
        s0 += v[i];
        s1 += v[i + 1];
        s2 += v[i + 2];
        s3 += v[i + 3];
    }
    for (; i < nv; i++) s0 += v[i];
    v2u s = s0 + s1 + s2 + s3;
    uint64_t t = s[0] + s[1];
    for (size_t j = lo + 2 * nv; j < hi; j++) t += a->p[j];
    a->sums[ith * 8] = t;
}

int main(int argc, char **argv) {
    int threads = argc > 1 ? atoi(argv[1]) : 2, runs = argc > 2 ? atoi(argv[2]) : 5;
    long mib = argc > 3 ? atol(argv[3]) : 1024;
    if (threads < 1 || threads > 64 || runs < 1 || runs > 100 || mib < 1) {
        fprintf(stderr, "usage: membw [threads 1..64] [runs 1..100] [MiB >= 1]\n");
        return 2;
    }
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
        printf("%d thread(s), %ld MiB buffer, median of %d: %.3f s per pass (checksum %llu)\n", threads, mib, runs,
               t[runs / 2], (unsigned long long)check);
        printf("read GB/s: %.2f\n", (double)bytes / t[runs / 2] / 1e9);
    }
    free(ra);
    okv_threadpool_free(pool);
    free(buf);
    return ra ? 0 : 1;
}
