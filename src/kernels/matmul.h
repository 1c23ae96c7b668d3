/* Internal: weight-matrix products, the bulk of a forward pass.
 *
 *   y[j][r] = sum_i W[r][i] * x[j][i]     r < rows, i < k, j < n
 *
 * W is row-major in one of the ggml types of quant.h, each row
 * okv_ggml_row_size(type, k) bytes, exactly as a GGUF tensor stores it
 * (ne0 = k, ne1 = rows).  x and y are f32, one activation column per token.
 *
 * Like ggml, Q8_0 and Q4_0 weights are multiplied by activations quantized
 * once per call to 8 bits (blocks of 32, d = amax/127 rounded to f16,
 * q = nearest-even(x * 127/amax): ggml's x86 activation quantizer), with
 * integer dot products per block.  F32, F16 and BF16 weights are widened to
 * f32 and multiplied with the f32 activations as they are.
 *
 * Output rows are shared out between threads in chunks taken as threads come
 * free, and every output element is computed by the same sequence of
 * operations whatever tile, chunk or thread computes it: the result depends
 * on the kernel alone, never on threads, timing or n. */
#ifndef OKV_KERNELS_MATMUL_H
#define OKV_KERNELS_MATMUL_H

#include <stddef.h>
#include <stdint.h>

#include "offkv/status.h"
#include "offkv/threads.h"

/* The instruction-set variants of the product.  Different kernels may round
 * differently (the order of float sums differs); integer parts are exact. */
typedef enum okv_mm_kernel {
    OKV_MM_SCALAR = 0,
    OKV_MM_AVX2 = 1,        /* AVX2 + FMA + F16C */
    OKV_MM_AVX512 = 2,      /* AVX-512 F/BW/VL/DQ */
    OKV_MM_AVX512_VNNI = 3, /* the above + AVX512-VNNI (same results as OKV_MM_AVX512) */
    OKV_MM_KERNEL_COUNT = 4
} okv_mm_kernel;

/* 1 if kern can run on this processor. */
int okv_mm_kernel_available(okv_mm_kernel kern);

/* The fastest kernel this processor runs, within okv_cpu_best_isa's cap
 * (the OKV_ISA environment variable). */
okv_mm_kernel okv_mm_kernel_best(void);

const char *okv_mm_kernel_name(okv_mm_kernel kern);

/* Bytes of scratch okv_matmul needs for this shape (0 for F32/F16/BF16
 * weights, where scratch may be NULL).  Any alignment is fine: the product
 * aligns inside the buffer.  0 also for an unknown type or a bad shape. */
size_t okv_matmul_scratch_bytes(int wtype, int64_t k, int64_t n);

/* y = W x as above, with the best kernel.  x is [n][k], y is [n][rows]; y
 * must not overlap x or W.  scratch holds okv_matmul_scratch_bytes(wtype, k, n)
 * bytes.  pool may be NULL (the caller's thread).  Errors (nothing written to
 * y): OKV_ERR_INVALID for NULL pointers, rows/k/n < 1, an unknown wtype, a k
 * that is not a multiple of 32 for Q8_0/Q4_0, or missing scratch. */
okv_status okv_matmul(okv_threadpool *pool, int wtype, const void *w, int64_t rows, int64_t k,
                      const float *x, int64_t n, float *y, void *scratch, okv_error *err);

/* One weight of a group that multiplies the same input: y = W x, W with
 * rows rows of the group's k. */
typedef struct okv_mm_op {
    int wtype;
    const void *w;
    int64_t rows;
    float *y;
} okv_mm_op;

enum { OKV_MM_MAX_OPS = 4 }; /* Q, K, V and a gate is the most a layer has */

/* Several products of one input x ([n][k]), e.g. Q, K and V: the activations
 * are quantized once and all products run in one fork-join, with results
 * bit-identical to one okv_matmul per weight.  scratch holds the largest
 * okv_matmul_scratch_bytes of the group; no y may overlap x or a W.  Errors
 * as okv_matmul (nothing written), and OKV_ERR_INVALID for n_ops outside
 * 1..OKV_MM_MAX_OPS. */
okv_status okv_matmul_multi(okv_threadpool *pool, const okv_mm_op *ops, int n_ops, int64_t k, const float *x,
                            int64_t n, void *scratch, okv_error *err);

/* The same with a chosen kernel (tests and benchmarks try each);
 * OKV_ERR_UNSUPPORTED when kern cannot run here. */
okv_status okv_matmul_with(okv_mm_kernel kern, okv_threadpool *pool, int wtype, const void *w,
                           int64_t rows, int64_t k, const float *x, int64_t n, float *y,
                           void *scratch, okv_error *err);

okv_status okv_matmul_multi_with(okv_mm_kernel kern, okv_threadpool *pool, const okv_mm_op *ops, int n_ops,
                                 int64_t k, const float *x, int64_t n, void *scratch, okv_error *err);

#endif
