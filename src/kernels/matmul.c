/* The matmul driver: checks the call, quantizes activations into scratch,
 * and shares output rows out between threads; the per-ISA files do the math,
 * and kernels/wtype.c says which kernel serves which weight type. */
#include <stdatomic.h>

#include "core/error.h"
#include "kernels/cpu.h"
#include "kernels/matmul_impl.h"
#include "kernels/q4_0x16.h"
#include "kernels/q4_Kx16.h"
#include "kernels/q6_Kx16.h"
#include "kernels/wtype.h"
#include "kernels/x16.h"
#include "kernels/x16mm.h"
#include "threads/pool.h"

/* Row chunks per thread and column block: enough that a thread that starts
 * late costs little, few enough that taking one (an atomic add) is noise. */
enum { MM_CHUNKS_PER_THREAD = 8 };

/* The activation format of a weight type, OKV_ACT_F32 for unknown ones. */
static okv_act_fmt act_of(int wtype) {
    return okv_wtype_runnable(wtype) ? okv_wtype_get(wtype)->act : OKV_ACT_F32;
}

/* Bytes per activation column in format f (k already checked to be whole
 * blocks of the format). */
static size_t act_col_bytes(okv_act_fmt f, int64_t k) {
    switch (f) {
    case OKV_ACT_Q8_0: return (size_t)(k / OKV_QK) * sizeof(float) + (size_t)k;
    case OKV_ACT_Q8_1: return (size_t)(k / OKV_QK) * sizeof(block_q8_1);
    case OKV_ACT_Q8_K: return (size_t)(k / OKV_QK_K) * sizeof(block_q8_K);
    case OKV_ACT_Q8_0X16: return (size_t)okv_x16_groups(k) * sizeof(block_act_q8_0x16);
    case OKV_ACT_Q8_KX16: return (size_t)okv_x16_groups(k) * sizeof(block_act_q8_Kx16);
    case OKV_ACT_Q8_KX16S: return (size_t)(k / OKV_QK_K) * sizeof(block_act_q8_Kx16s);
    case OKV_ACT_Q8_0P: return (size_t)(k / OKV_QK) * sizeof(float) + (size_t)k;
    case OKV_ACT_Q8_KP: return (size_t)(k / OKV_QK) * 2 * sizeof(float) + (size_t)k;
    case OKV_ACT_F32: case OKV_ACT_COUNT: break;
    }
    return 0;
}

size_t okv_matmul_scratch_bytes(int wtype, int64_t k, int64_t n) {
    const okv_act_fmt f = act_of(wtype);
    if (f == OKV_ACT_F32 || k < 1 || n < 1 || okv_wtype_row_size(wtype, k) == 0) return 0;
    /* 64 bytes of slack for aligning the start */
    return (size_t)n * act_col_bytes(f, k) + 64;
}

/* Work items [front, back) of one share, packed as front << 32 | back, on
 * a cache line of its own: the threads claim from their ranges at once.
 * (32 bits hold any count of items: each has at least 8 rows by a column,
 * so 2^32 of them would need 128 GiB of outputs.) */
typedef struct mm_range {
    _Alignas(64) atomic_ullong fb;
} mm_range;

/* Shares with a range of their own; a larger pool's other shares only take
 * from the ends of these. */
enum { MM_MAX_RANGES = 32 };

typedef struct mm_job {
    okv_mm_ctx ctx[OKV_MM_MAX_OPS];
    okv_mm_tile_fn tile[OKV_MM_MAX_OPS];
    okv_mm_block_fn block[OKV_MM_MAX_OPS]; /* NULL: tile by tile */
    int64_t chunk_rows[OKV_MM_MAX_OPS];    /* rows per work item */
    int64_t items[OKV_MM_MAX_OPS];         /* work items per product */
    mm_range range[MM_MAX_RANGES];         /* each share's run of work items */
    int n_ranges;
    int n_ops;
    okv_act_fmt fmt;   /* the activations quant_job writes */
    okv_isa kern;
    uint8_t *act;      /* aligned scratch */
    const float *x;    /* the input, [n_act][k] (okv_matmul_multi) or [n_ops][k] (okv_matmul_each) */
    int64_t k;
    int64_t n_act;     /* activation columns in act */
    const int64_t *col; /* okv_matmul_each: act column j is column col[j] of x; NULL: column j */
} mm_job;

static void quant_job(void *p, int32_t ith, int32_t nth) {
    mm_job *job = p;
    const int64_t k = job->k;
    for (int64_t j = ith; j < job->n_act; j += nth) {
        const float *x = job->x + (job->col ? job->col[j] : j) * k;
        switch (job->fmt) {
        case OKV_ACT_Q8_0: {
            int8_t *xq = (int8_t *)(job->act + (size_t)job->n_act * (size_t)(k / OKV_QK) * sizeof(float));
            float *xd = (float *)job->act;
            okv_mm_quantize_act(job->kern, x, k, xq + j * k, xd + j * (k / OKV_QK));
            break;
        }
        case OKV_ACT_Q8_1:
            okv_quantize_row_q8_1(x, (block_q8_1 *)(job->act + (size_t)j * act_col_bytes(job->fmt, k)), k);
            break;
        case OKV_ACT_Q8_K: {
            block_q8_K *y = (block_q8_K *)(job->act + (size_t)j * act_col_bytes(job->fmt, k));
            okv_mm_quantize_q8_K(job->kern, x, y, k);
            break;
        }
        case OKV_ACT_Q8_0X16:
            okv_quantize_act_q8_0x16(job->kern, x, k, (block_act_q8_0x16 *)(job->act + (size_t)j * act_col_bytes(job->fmt, k)));
            break;
        case OKV_ACT_Q8_KX16:
            okv_quantize_act_q8_Kx16(job->kern, x, k, (block_act_q8_Kx16 *)(job->act + (size_t)j * act_col_bytes(job->fmt, k)));
            break;
        case OKV_ACT_Q8_KX16S:
            okv_quantize_act_q8_Kx16s(job->kern, x, k, (block_act_q8_Kx16s *)(job->act + (size_t)j * act_col_bytes(job->fmt, k)));
            break;
        case OKV_ACT_Q8_0P:
            /* each: every op's column alone (n 1), as its tiles read it */
            if (job->col) okv_quantize_act_q8_0p(job->kern, x, k, job->act + (size_t)j * act_col_bytes(job->fmt, k),
                                                 act_col_bytes(job->fmt, k), 1, 0);
            else okv_quantize_act_q8_0p(job->kern, x, k, job->act, act_col_bytes(job->fmt, k), job->n_act, j);
            break;
        case OKV_ACT_Q8_KP:
            if (job->col) okv_quantize_act_q8_Kp(job->kern, x, k, job->act + (size_t)j * act_col_bytes(job->fmt, k),
                                                 act_col_bytes(job->fmt, k), 1, 0);
            else okv_quantize_act_q8_Kp(job->kern, x, k, job->act, act_col_bytes(job->fmt, k), job->n_act, j);
            break;
        case OKV_ACT_F32: case OKV_ACT_COUNT: break;
        }
    }
}

/* Every ISA's quantizer gives the scalar one's bits (test_matmul, test_quant):
 * the SIMD ones only go faster. */
void okv_mm_quantize_act(okv_isa kern, const float *x, int64_t k, int8_t *q, float *d) {
    (void)kern; /* a scalar-only build has no other */
#if defined(OKV_X86)
    if (okv_isa_is_x86(kern)) { okv_mm_quantize_act_avx2(x, k, q, d); return; }
#endif
#if defined(OKV_ARM)
    if (okv_isa_is_arm(kern)) { okv_mm_quantize_act_neon(x, k, q, d); return; }
#endif
    okv_mm_quantize_act_scalar(x, k, q, d);
}

void okv_mm_quantize_q8_K(okv_isa kern, const float *x, block_q8_K *y, int64_t k) {
    (void)kern;
#if defined(OKV_X86)
    if (okv_isa_is_x86(kern)) { okv_mm_quantize_q8_K_avx2(x, y, k); return; }
#endif
#if defined(OKV_ARM)
    if (okv_isa_is_arm(kern)) { okv_mm_quantize_q8_K_neon(x, y, k); return; }
#endif
    okv_quantize_row_q8_K(x, y, k);
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

/* Takes range r's first item (or, back, its last); -1 when it is empty. */
static int64_t claim(mm_range *r, int back) {
    unsigned long long s = atomic_load_explicit(&r->fb, memory_order_relaxed);
    for (;;) {
        const uint32_t front = (uint32_t)(s >> 32), end = (uint32_t)s;
        if (front >= end) return -1;
        const unsigned long long t = back ? s - 1 : s + (1ull << 32);
        if (atomic_compare_exchange_weak_explicit(&r->fb, &s, t, memory_order_relaxed, memory_order_relaxed))
            return back ? (int64_t)end - 1 : (int64_t)front;
    }
}

/* Work item (product, column block, row chunk), counted over all products. */
static void run_work_item(const mm_job *job, int64_t item) {
    int i = 0;
    while (item >= job->items[i]) item -= job->items[i++];
    const okv_mm_ctx *c = &job->ctx[i];
    const int64_t n_chunks = (c->rows + job->chunk_rows[i] - 1) / job->chunk_rows[i];
    const int64_t r0 = (item % n_chunks) * job->chunk_rows[i];
    const int64_t r1 = r0 + job->chunk_rows[i] < c->rows ? r0 + job->chunk_rows[i] : c->rows;
    run_item(c, job->tile[i], job->block[i], r0, r1, (item / n_chunks) * MM_COL_BLOCK);
}

/* The work items are cut into one run per share, which its thread takes
 * from the front: one thread reads consecutive rows, so the hardware
 * prefetcher's stream and the kernels' software prefetch (into the next
 * rows) carry on from item to item.  A thread whose run is done takes the
 * others' last items, so one that wakes late or is preempted leaves its
 * rows to the rest instead of making them wait at the join.  (One counter
 * for all threads balanced as well, but dealt each thread every other
 * chunk: a Qwen3-MoE decode, 384 chunks of ~57 KB a layer, ran about a
 * fifth slower.)  Which thread computes a tile then depends on timing, but
 * not what it computes: every output goes through the same operations in
 * any tile. */
static void tile_job(void *p, int32_t ith, int32_t nth) {
    (void)nth;
    mm_job *job = p;
    const int own = ith < job->n_ranges;
    int64_t item;
    if (own)
        while ((item = claim(&job->range[ith], 0)) >= 0) run_work_item(job, item);
    for (int d = own; d < job->n_ranges; d++) {
        mm_range *r = &job->range[(ith + d) % job->n_ranges];
        while ((item = claim(r, 1)) >= 0) run_work_item(job, item);
    }
}

/* Checks one product of a group. */
static okv_status check_op(const okv_mm_op *op, int64_t k, const float *x, int64_t n, const void *scratch,
                           okv_error *err) {
    if (!op->w || !x || !op->y) return okv_fail(err, OKV_ERR_INVALID, "matmul: NULL weight, input or output");
    if (op->rows < 1 || k < 1 || n < 1)
        return okv_fail(err, OKV_ERR_INVALID, "matmul: rows %lld, k %lld, n %lld must be >= 1",
                        (long long)op->rows, (long long)k, (long long)n);
    if (!okv_wtype_runnable(op->wtype))
        return okv_fail(err, OKV_ERR_INVALID, "matmul: unsupported weight type %d (%s)", op->wtype,
                        okv_wtype_get(op->wtype) ? okv_wtype_get(op->wtype)->name : "unknown");
    const okv_wtype *wt = okv_wtype_get(op->wtype);
    if (okv_wtype_row_size(op->wtype, k) == 0)
        return okv_fail(err, OKV_ERR_INVALID, "matmul: k = %lld is not a multiple of %lld for %s",
                        (long long)k, (long long)(wt->unit ? wt->unit : wt->block), wt->name);
    if (act_of(op->wtype) != OKV_ACT_F32 && !scratch)
        return okv_fail(err, OKV_ERR_INVALID, "matmul: %s weights need scratch", wt->name);
    return OKV_OK;
}

/* Runs the products of ops whose activation format is fmt (with the float
 * ones when also_float), after quantizing the activations into scratch.
 * each (okv_matmul_each): op o multiplies column o of x alone (n is 1). */
static void run_format(okv_isa kern, okv_threadpool *pool, const okv_mm_op *ops, int n_ops, int64_t k,
                       const float *x, int64_t n, void *scratch, okv_act_fmt fmt, int also_float, int each) {
    int64_t cols[OKV_MM_MAX_OPS];
    mm_job job = {.n_ops = 0, .fmt = fmt, .kern = kern, .x = x, .k = k, .n_act = each ? 0 : n,
                  .col = each ? cols : NULL};
    job.act = (uint8_t *)(((uintptr_t)scratch + 63) & ~(uintptr_t)63);
    if (each) /* the columns of this format's quantized ops, in slot order */
        for (int o = 0; o < n_ops; o++)
            if (act_of(ops[o].wtype) == fmt && fmt != OKV_ACT_F32) cols[job.n_act++] = o;
    for (int o = 0, slot = 0; o < n_ops; o++) {
        const okv_mm_op *op = &ops[o];
        const okv_act_fmt f = act_of(op->wtype);
        if (f != fmt && !(also_float && f == OKV_ACT_F32)) continue;
        const int i = job.n_ops++;
        /* each: the op's column of x, and its slot in the activations */
        const int64_t xc = each ? o : 0, ac = each && f != OKV_ACT_F32 ? slot++ : 0;
        job.tile[i] = okv_wtype_tile(op->wtype, kern);
        /* a block pass reads each weight once for all the block's columns,
         * which pays from its type's block_min_n columns on; decode (one
         * column) keeps the plain tiles */
        const int64_t min_n = okv_wtype_get(op->wtype)->block_min_n;
        job.block[i] = n >= (min_n > 2 ? min_n : 2) ? okv_wtype_block(op->wtype, kern) : NULL;
        job.ctx[i] = (okv_mm_ctx){.w = op->w, .wrow = okv_wtype_row_size(op->wtype, k), .rows = op->rows,
                                  .k = k, .n = n, .x = x + xc * k, .y = op->y};
        if (f == OKV_ACT_Q8_0) {
            job.ctx[i].xd = (const float *)job.act + ac * (k / OKV_QK);
            job.ctx[i].xq = (const int8_t *)(job.act + (size_t)job.n_act * (size_t)(k / OKV_QK) * sizeof(float)) + ac * k;
        } else if (f != OKV_ACT_F32) {
            job.ctx[i].xa = job.act + (size_t)ac * act_col_bytes(f, k);
            job.ctx[i].xa_col = act_col_bytes(f, k);
        }
        /* about MM_CHUNKS_PER_THREAD items per thread and column block, in
         * whole 8-row strips (the block pass's panel height) */
        const int64_t per = op->rows / ((int64_t)okv_threadpool_size(pool) * MM_CHUNKS_PER_THREAD);
        job.chunk_rows[i] = per < 8 ? 8 : (per + 7) / 8 * 8;
        job.items[i] = (op->rows + job.chunk_rows[i] - 1) / job.chunk_rows[i] * ((n + MM_COL_BLOCK - 1) / MM_COL_BLOCK);
    }
    if (job.n_ops == 0) return;
    if (fmt != OKV_ACT_F32) {
        /* one fork-join for a single column costs more than quantizing it
         * (each: a few short columns, less than one fork-join) */
        if (!each && n >= 2 * okv_threadpool_size(pool)) okv_parallel(pool, quant_job, &job);
        else quant_job(&job, 0, 1);
    }
    int64_t total = 0;
    for (int i = 0; i < job.n_ops; i++) total += job.items[i];
    const int32_t nth = okv_threadpool_size(pool);
    job.n_ranges = nth < MM_MAX_RANGES ? (int)nth : MM_MAX_RANGES;
    for (int r = 0; r < job.n_ranges; r++) {
        const unsigned long long front = (unsigned long long)(total * r / job.n_ranges),
                                 end = (unsigned long long)(total * (r + 1) / job.n_ranges);
        atomic_init(&job.range[r].fb, front << 32 | end);
    }
    okv_parallel(pool, tile_job, &job);
}

/* okv_matmul_multi_with, and okv_matmul_each_with when each (n is 1). */
static okv_status run_ops(okv_isa kern, okv_threadpool *pool, const okv_mm_op *ops, int n_ops, int64_t k,
                          const float *x, int64_t n, void *scratch, int each, okv_error *err) {
    if (!ops || n_ops < 1 || n_ops > OKV_MM_MAX_OPS)
        return okv_fail(err, OKV_ERR_INVALID, "matmul: %d products in a group (1 to %d)", n_ops, OKV_MM_MAX_OPS);
    if ((int)kern < 0 || kern >= OKV_ISA_COUNT || !okv_cpu_has_isa(kern))
        return okv_fail(err, OKV_ERR_UNSUPPORTED, "matmul: kernel %s cannot run on this processor",
                        okv_isa_name(kern));
    int need[OKV_ACT_COUNT] = {0};
    for (int i = 0; i < n_ops; i++) {
        okv_status st = check_op(&ops[i], k, x, n, scratch, err);
        if (st) return st;
        need[act_of(ops[i].wtype)] = 1;
    }
    /* One pass per activation format the group needs, each quantizing the
     * activations once into the shared scratch; float weights ride along
     * with the first pass.  A group of one format (Q/K/V of a layer in one
     * weight type) is a single fork-join; a Q4_K_M layer's Q4_Kx16 and
     * Q6_Kx16 take two formats (Q8_Kx16, Q8_Kx16s), so two. */
    int first = 1;
    for (int f = OKV_ACT_Q8_0; f < OKV_ACT_COUNT; f++) {
        if (!need[f]) continue;
        run_format(kern, pool, ops, n_ops, k, x, n, scratch, (okv_act_fmt)f, first, each);
        first = 0;
    }
    if (first) run_format(kern, pool, ops, n_ops, k, x, n, scratch, OKV_ACT_F32, 1, each);
    return OKV_OK;
}

okv_status okv_matmul_multi_with(okv_isa kern, okv_threadpool *pool, const okv_mm_op *ops, int n_ops,
                                 int64_t k, const float *x, int64_t n, void *scratch, okv_error *err) {
    return run_ops(kern, pool, ops, n_ops, k, x, n, scratch, 0, err);
}

okv_status okv_matmul_each_with(okv_isa kern, okv_threadpool *pool, const okv_mm_op *ops, int n_ops, int64_t k,
                                const float *x, void *scratch, okv_error *err) {
    return run_ops(kern, pool, ops, n_ops, k, x, 1, scratch, 1, err);
}

okv_status okv_matmul_each(okv_threadpool *pool, const okv_mm_op *ops, int n_ops, int64_t k, const float *x,
                           void *scratch, okv_error *err) {
    return okv_matmul_each_with(okv_cpu_best_isa(), pool, ops, n_ops, k, x, scratch, err);
}

okv_status okv_matmul_multi(okv_threadpool *pool, const okv_mm_op *ops, int n_ops, int64_t k, const float *x,
                            int64_t n, void *scratch, okv_error *err) {
    return okv_matmul_multi_with(okv_cpu_best_isa(), pool, ops, n_ops, k, x, n, scratch, err);
}

okv_status okv_matmul_with(okv_isa kern, okv_threadpool *pool, int wtype, const void *w,
                           int64_t rows, int64_t k, const float *x, int64_t n, float *y,
                           void *scratch, okv_error *err) {
    const okv_mm_op op = {.wtype = wtype, .w = w, .rows = rows, .y = y};
    return okv_matmul_multi_with(kern, pool, &op, 1, k, x, n, scratch, err);
}

okv_status okv_matmul(okv_threadpool *pool, int wtype, const void *w, int64_t rows, int64_t k,
                      const float *x, int64_t n, float *y, void *scratch, okv_error *err) {
    return okv_matmul_with(okv_cpu_best_isa(), pool, wtype, w, rows, k, x, n, y, scratch, err);
}
