/* Decode attention speed against memcpy bandwidth measured in the same run.
 *
 * One query, 32 q heads over 8 kv heads, head_dim 128, over 4k/16k/64k rows
 * of f16 and f32 storage, on 1 and 2 threads.  Bytes counted for attention:
 * the K and V it reads, 2 * n_kv_heads * rows * head_dim * element size.
 * Bytes counted for memcpy: bytes read only (a copy of N bytes counts N,
 * not the N it also writes), from a source buffer of the same size as K+V.
 * memcpy is timed both on one thread and split over the same thread count
 * as the attention run.  The machine is shared and its bandwidth drifts, so
 * each round times the three back to back, and the ratio printed is the
 * median over rounds of (same-thread-count memcpy time / attend time).
 *
 *   usage: attend [runs [rows [isa]]]   (runs default 9, the median is reported;
 *                                        rows: only that row count, 0 all;
 *                                        isa: scalar|avx2|avx512, default the best) */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "attend/attend.h"
#include "kernels/f16.h"
#include "kernels/quant.h"
#include "offkv/offkv.h"
#include "threads/pool.h"

enum { N_KV = 8, N_HEADS = 32, HD = 128 };

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *t, int n) {
    qsort(t, (size_t)n, sizeof *t, cmp_double);
    return t[n / 2];
}

typedef struct copy_arg { char *dst; const char *src; size_t n; } copy_arg;

static void copy_job(void *p, int32_t ith, int32_t nth) {
    const copy_arg *a = p;
    const size_t lo = a->n * (size_t)ith / (size_t)nth, hi = a->n * (size_t)(ith + 1) / (size_t)nth;
    memcpy(a->dst + lo, a->src + lo, hi - lo);
}

int main(int argc, char **argv) {
    int runs = argc > 1 ? atoi(argv[1]) : 9;
    if (runs < 5) runs = 5;
    if (runs > 64) runs = 64;
    okv_isa isa = okv_cpu_best_isa();
    if (argc > 3) {
        isa = okv_isa_from_name(argv[3]);
        /* attention has scalar, AVX2 and AVX-512 kernels */
        if (isa > OKV_ISA_AVX512 || !okv_cpu_has_isa(isa)) { fprintf(stderr, "isa %s not available\n", argv[3]); return 1; }
    }
    okv_error err;
    okv_threadpool *pools[2] = {okv_threadpool_create(1, &err), okv_threadpool_create(2, &err)};
    if (!pools[0] || !pools[1]) { fprintf(stderr, "pool: %s\n", err.message); return 1; }
    const int32_t rows_list[] = {4096, 16384, 65536};

    printf("decode, 1 query, %d q heads / %d kv heads, head_dim %d, isa %s, median of %d runs\n",
           N_HEADS, N_KV, HD, okv_isa_name(isa), runs);
    printf("GB/s = 1e9 bytes read per second (memcpy of N bytes counts N); ratio = median of\n"
           "per-round memcpy(same threads) time / attend time\n");
    printf("%6s %4s %3s %9s %10s %9s %12s %12s %7s\n", "rows", "type", "thr", "KV MiB", "attend us",
           "attend", "memcpy 1thr", "memcpy Nthr", "ratio");
    const int32_t only_rows = argc > 2 ? atoi(argv[2]) : 0;
    for (int ri = 0; ri < 3; ri++)
        for (int dt = 2; dt >= 0; dt--) { /* q8_0, f16, f32 */
            const int32_t rows = rows_list[ri];
            if (only_rows && rows != only_rows) continue;
            const okv_dtype type = dt == 2 ? OKV_Q8_0 : dt ? OKV_F16 : OKV_F32;
            const size_t row_bytes = dt == 2 ? HD / 32 * sizeof(block_q8_0) : (size_t)HD * (dt ? 2 : 4);
            const size_t n_elems = (size_t)N_KV * rows * HD, n_rows = (size_t)N_KV * rows;
            const size_t bytes = 2 * n_rows * row_bytes;
            char *k = aligned_alloc(64, n_rows * row_bytes), *v = aligned_alloc(64, n_rows * row_bytes);
            char *src = aligned_alloc(64, bytes), *dst = aligned_alloc(64, bytes);
            float *q = aligned_alloc(64, sizeof(float) * N_HEADS * HD);
            float *out = aligned_alloc(64, sizeof(float) * N_HEADS * HD);
            if (!k || !v || !src || !dst || !q || !out) { fprintf(stderr, "out of memory\n"); return 1; }
            uint32_t s = 12345;
            float row[HD], neg[HD];
            for (size_t i = 0; i < n_elems; i++) {
                s = s * 1664525u + 1013904223u;
                const float x = (float)(s >> 8) / 16777216.0f - 0.5f;
                if (dt == 2) {
                    row[i % HD] = x;
                    neg[i % HD] = -x;
                    if (i % HD == HD - 1) {
                        okv_quantize_row_q8_0(row, (block_q8_0 *)(k + i / HD * row_bytes), HD);
                        okv_quantize_row_q8_0(neg, (block_q8_0 *)(v + i / HD * row_bytes), HD);
                    }
                } else if (dt) { ((okv_f16 *)k)[i] = okv_f32_to_f16(x); ((okv_f16 *)v)[i] = okv_f32_to_f16(-x); }
                else { ((float *)k)[i] = x; ((float *)v)[i] = -x; }
            }
            for (int i = 0; i < N_HEADS * HD; i++) q[i] = (float)((i * 37) % 101) / 101.0f - 0.5f;
            memset(src, 1, bytes);
            memset(dst, 0, bytes);
            okv_attend_job job = {.k = k, .v = v, .dtype = type, .n_kv_heads = N_KV,
                                  .rows = rows, .head_dim = HD, .window = 0, .ring = 0, .lo_pos = 0,
                                  .q = q, .out = out, .n_heads = N_HEADS, .n_tokens = 1,
                                  .start = rows - 1, .scale = 0.08838834764f};
            copy_arg ca = {dst, src, bytes};
            okv_parallel(pools[1], copy_job, &ca);  /* fault the pages in */
            for (int pi = 0; pi < 2; pi++) {
                const int32_t nth = okv_threadpool_size(pools[pi]);
                void *scratch = aligned_alloc(64, (okv_attend_scratch_bytes(&job, nth) + 63) / 64 * 64);
                double ta[64], tc1[64], tcn[64], ratio[64];
                okv_attend_run(&job, pools[pi], scratch, isa);
                for (int r = 0; r < runs; r++) {
                    double t0 = now();
                    okv_parallel(pools[0], copy_job, &ca);
                    tc1[r] = now() - t0;
                    t0 = now();
                    okv_parallel(pools[pi], copy_job, &ca);
                    tcn[r] = now() - t0;
                    t0 = now();
                    okv_attend_run(&job, pools[pi], scratch, isa);
                    ta[r] = now() - t0;
                    ratio[r] = tcn[r] / ta[r];
                }
                const double a_ = median(ta, runs), c1 = median(tc1, runs), cn = median(tcn, runs);
                printf("%6d %4s %3d %9.1f %10.1f %9.2f %12.2f %12.2f %6.0f%%\n", rows, dt == 2 ? "q8_0" : dt ? "f16" : "f32",
                       nth, bytes / 1048576.0, a_ * 1e6, bytes / a_ * 1e-9, bytes / c1 * 1e-9,
                       bytes / cn * 1e-9, 100.0 * median(ratio, runs));
                free(scratch);
            }
            free(k); free(v); free(src); free(dst); free(q); free(out);
        }
    okv_threadpool_free(pools[0]);
    okv_threadpool_free(pools[1]);
    return 0;
}
