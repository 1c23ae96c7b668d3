/* The matmul driver: checks the call, quantizes activations into scratch,
 * and shares output rows out between threads; the per-ISA files do the math. */
#include <stdatomic.h>

#include "core/error.h"
#include "kernels/cpu.h"
#include "kernels/matmul_impl.h"
#include "threads/pool.h"

int okv_mm_kernel_available(okv_mm_kernel kern) {
    switch (kern) {
    case OKV_MM_SCALAR: return 1;
    case OKV_MM_AVX2: return okv_cpu_has_isa(OKV_ISA_AVX2);
    case OKV_MM_AVX512: return okv_cpu_has_isa(OKV_ISA_AVX512);
    case OKV_MM_AVX512_VNNI: return okv_cpu_has_avx512vnni();
    case OKV_MM_KERNEL_COUNT: break;
    }
    return 0;
}

/* The ISA a kernel needs (okv_cpu_best_isa may cap below the hardware). */
static okv_isa kernel_isa(okv_mm_kernel kern) {
    switch (kern) {
    case OKV_MM_SCALAR: return OKV_ISA_SCALAR;
    case OKV_MM_AVX2: return OKV_ISA_AVX2;
    case OKV_MM_AVX512:
    case OKV_MM_AVX512_VNNI:
    case OKV_MM_KERNEL_COUNT: break;
    }
    return OKV_ISA_AVX512;
}

okv_mm_kernel okv_mm_kernel_best(void) {
    const okv_isa cap = okv_cpu_best_isa();
    for (int k = OKV_MM_KERNEL_COUNT - 1; k > 0; k--)
        if (kernel_isa((okv_mm_kernel)k) <= cap && okv_mm_kernel_available((okv_mm_kernel)k))
            return (okv_mm_kernel)k;
    return OKV_MM_SCALAR;
}

const char *okv_mm_kernel_name(okv_mm_kernel kern) {
    switch (kern) {
    case OKV_MM_SCALAR: return "scalar";
    case OKV_MM_AVX2: return "avx2";
    case OKV_MM_AVX512: return "avx512";
    case OKV_MM_AVX512_VNNI: return "avx512vnni";
    case OKV_MM_KERNEL_COUNT: break;
    }
    return "unknown";
}

/* Fewest columns for which a kernel's block pass is used: with 8 columns
 * the panel conversion cost more than it saved (F16 5632x2048, one thread:
 * ~50 against ~70 GFLOP/s), with 16 it gained ~10%. */
enum { MM_BLOCK_MIN_N = 16 };

/* Row chunks per thread and column block: enough that a thread that starts
 * late costs little, few enough that taking one (an atomic add) is noise. */
enum { MM_CHUNKS_PER_THREAD = 8 };

static int is_quantized(int wtype) { return wtype == OKV_GGML_Q8_0 || wtype == OKV_GGML_Q4_0; }

size_t okv_matmul_scratch_bytes(int wtype, int64_t k, int64_t n) {
    if (!is_quantized(wtype) || k < 1 || n < 1 || k % OKV_QK) return 0;
    /* scales first (4-byte values), then the int8 values; 64 bytes of slack
     * for aligning the start */
    return (size_t)n * ((size_t)(k / OKV_QK) * sizeof(float) + (size_t)k) + 64;
}

typedef struct mm_job {
    okv_mm_ctx ctx[OKV_MM_MAX_OPS];
    okv_mm_tile_fn tile[OKV_MM_MAX_OPS];
    okv_mm_block_fn block[OKV_MM_MAX_OPS]; /* NULL: tile by tile */
    int64_t chunk_rows[OKV_MM_MAX_OPS];    /* rows per work item */
    int64_t items[OKV_MM_MAX_OPS];         /* work items per product */
    atomic_llong next;                     /* next work item, over all products */
    int n_ops;
    okv_mm_quant_fn quant;
    int8_t *xq;  /* writable views of ctx[].xq and ctx[].xd */
    float *xd;
} mm_job;

static void quant_job(void *p, int32_t ith, int32_t nth) {
    mm_job *job = p;
    const okv_mm_ctx *c = &job->ctx[0];
    const int64_t nb = c->k / OKV_QK;
    for (int64_t j = ith; j < c->n; j += nth)
        job->quant(c->x + j * c->k, c->k, job->xq + j * c->k, job->xd + j * nb);
}

/* Rows r0 .. r1-1 by the column block from cb. */
static void run_item(const okv_mm_ctx *c, okv_mm_tile_fn tile, okv_mm_block_fn block, int64_t r0, int64_t r1,
                     int64_t cb) {
    const int64_t cb_end = cb + MM_COL_BLOCK < c->n ? cb + MM_COL_BLOCK : c->n;
    if (block) {
        block(c, r0, r1, cb, cb_end);
        return;
    }
    for (int64_t r = r0; r < r1; r += MM_TR) {
        const int nr = (int)(r1 - r < MM_TR ? r1 - r : MM_TR);
        for (int64_t j = cb; j < cb_end; j += MM_TC) {
            const int nc = (int)(cb_end - j < MM_TC ? cb_end - j : MM_TC);
            tile(c, r, nr, j, nc);
        }
    }
}

/* Threads take work items (product, column block, row chunk), in that
 * order, from a shared counter: a thread that wakes late or is preempted
 * leaves its rows to the others instead of making them wait at the join.
 * Which thread computes a tile then depends on timing, but not what it
 * computes: every output goes through the same operations in any tile. */
static void tile_job(void *p, int32_t ith, int32_t nth) {
    (void)ith;
    (void)nth;
    mm_job *job = p;
    for (;;) {
        int64_t item = atomic_fetch_add_explicit(&job->next, 1, memory_order_relaxed);
        int i = 0;
        while (i < job->n_ops && item >= job->items[i]) item -= job->items[i++];
        if (i == job->n_ops) return;
        const okv_mm_ctx *c = &job->ctx[i];
        const int64_t n_chunks = (c->rows + job->chunk_rows[i] - 1) / job->chunk_rows[i];
        const int64_t r0 = (item % n_chunks) * job->chunk_rows[i];
        const int64_t r1 = r0 + job->chunk_rows[i] < c->rows ? r0 + job->chunk_rows[i] : c->rows;
        run_item(c, job->tile[i], job->block[i], r0, r1, (item / n_chunks) * MM_COL_BLOCK);
    }
}

static okv_mm_tile_fn tile_for(okv_mm_kernel kern, int wtype) {
    switch (kern) {
    case OKV_MM_SCALAR: return okv_mm_tile_scalar(wtype);
    case OKV_MM_AVX2: return okv_mm_tile_avx2(wtype);
    case OKV_MM_AVX512: return okv_mm_tile_avx512(wtype);
    case OKV_MM_AVX512_VNNI: return okv_mm_tile_avx512vnni(wtype);
    case OKV_MM_KERNEL_COUNT: break;
    }
    return NULL;
}

okv_status okv_matmul_multi_with(okv_mm_kernel kern, okv_threadpool *pool, const okv_mm_op *ops, int n_ops,
                                 int64_t k, const float *x, int64_t n, void *scratch, okv_error *err) {
    if (!ops || n_ops < 1 || n_ops > OKV_MM_MAX_OPS)
        return okv_fail(err, OKV_ERR_INVALID, "matmul: %d products in a group (1 to %d)", n_ops, OKV_MM_MAX_OPS);
    if ((int)kern < 0 || kern >= OKV_MM_KERNEL_COUNT || !okv_mm_kernel_available(kern))
        return okv_fail(err, OKV_ERR_UNSUPPORTED, "matmul: kernel %s cannot run on this processor",
                        okv_mm_kernel_name(kern));
    mm_job job = {.n_ops = n_ops};
    atomic_init(&job.next, 0);
    int any_quantized = 0;
    for (int i = 0; i < n_ops; i++) {
        const okv_mm_op *op = &ops[i];
        if (!op->w || !x || !op->y) return okv_fail(err, OKV_ERR_INVALID, "matmul: NULL weight, input or output");
        if (op->rows < 1 || k < 1 || n < 1)
            return okv_fail(err, OKV_ERR_INVALID, "matmul: rows %lld, k %lld, n %lld must be >= 1",
                            (long long)op->rows, (long long)k, (long long)n);
        if (!okv_ggml_type_supported(op->wtype))
            return okv_fail(err, OKV_ERR_INVALID, "matmul: unsupported weight type %d", op->wtype);
        const size_t wrow = okv_ggml_row_size(op->wtype, k);
        if (wrow == 0)
            return okv_fail(err, OKV_ERR_INVALID, "matmul: k = %lld is not a multiple of %lld for %s",
                            (long long)k, (long long)okv_ggml_block_size(op->wtype),
                            okv_ggml_type_name(op->wtype));
        if (is_quantized(op->wtype) && !scratch)
            return okv_fail(err, OKV_ERR_INVALID, "matmul: %s weights need scratch",
                            okv_ggml_type_name(op->wtype));
        job.tile[i] = tile_for(kern, op->wtype);
        if (!job.tile[i])
            return okv_fail(err, OKV_ERR_UNSUPPORTED, "matmul: kernel %s has no %s path",
                            okv_mm_kernel_name(kern), okv_ggml_type_name(op->wtype));
        /* a block pass converts each float weight once per column block,
         * which pays from a few columns on; decode keeps the plain tiles */
        if (n >= MM_BLOCK_MIN_N && (kern == OKV_MM_AVX512 || kern == OKV_MM_AVX512_VNNI))
            job.block[i] = okv_mm_block_avx512(op->wtype);
        job.ctx[i] = (okv_mm_ctx){.w = op->w, .wrow = wrow, .rows = op->rows, .k = k, .n = n, .x = x, .y = op->y};
        /* about MM_CHUNKS_PER_THREAD items per thread and column block, in
         * whole 8-row strips (the block pass's panel height) */
        const int64_t per = op->rows / ((int64_t)okv_threadpool_size(pool) * MM_CHUNKS_PER_THREAD);
        job.chunk_rows[i] = per < 8 ? 8 : (per + 7) / 8 * 8;
        job.items[i] = (op->rows + job.chunk_rows[i] - 1) / job.chunk_rows[i] * ((n + MM_COL_BLOCK - 1) / MM_COL_BLOCK);
        any_quantized |= is_quantized(op->wtype);
    }
    job.quant = kern == OKV_MM_SCALAR ? okv_mm_quantize_act_scalar : okv_mm_quantize_act_avx2;

    if (any_quantized) {
        /* Q8_0 and Q4_0 take the same 8-bit activations: quantized once for
         * the whole group */
        uintptr_t a = ((uintptr_t)scratch + 63) & ~(uintptr_t)63;
        job.xd = (float *)a;
        job.xq = (int8_t *)(job.xd + n * (k / OKV_QK));
        for (int i = 0; i < n_ops; i++) {
            job.ctx[i].xd = job.xd;
            job.ctx[i].xq = job.xq;
        }
        /* one fork-join for a single column costs more than quantizing it */
        if (n >= 2 * okv_threadpool_size(pool)) okv_parallel(pool, quant_job, &job);
        else quant_job(&job, 0, 1);
    }
    okv_parallel(pool, tile_job, &job);
    return OKV_OK;
}

okv_status okv_matmul_multi(okv_threadpool *pool, const okv_mm_op *ops, int n_ops, int64_t k, const float *x,
                            int64_t n, void *scratch, okv_error *err) {
    return okv_matmul_multi_with(okv_mm_kernel_best(), pool, ops, n_ops, k, x, n, scratch, err);
}

okv_status okv_matmul_with(okv_mm_kernel kern, okv_threadpool *pool, int wtype, const void *w,
                           int64_t rows, int64_t k, const float *x, int64_t n, float *y,
                           void *scratch, okv_error *err) {
    const okv_mm_op op = {.wtype = wtype, .w = w, .rows = rows, .y = y};
    return okv_matmul_multi_with(kern, pool, &op, 1, k, x, n, scratch, err);
}

okv_status okv_matmul(okv_threadpool *pool, int wtype, const void *w, int64_t rows, int64_t k,
                      const float *x, int64_t n, float *y, void *scratch, okv_error *err) {
    return okv_matmul_with(okv_mm_kernel_best(), pool, wtype, w, rows, k, x, n, y, scratch, err);
}
