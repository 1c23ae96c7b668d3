/* Internal: weight-matrix products, the bulk of a forward pass.
 *
 *   y[j][r] = sum_i W[r][i] * x[j][i]     r < rows, i < k, j < n
 *
 * W is row-major in one of the ggml types of quant.h, each row
 * okv_ggml_row_size(type, k) bytes, exactly as a GGUF tensor stores it
 * (ne0 = k, ne1 = rows), or in one of offkv's sixteen-wide layouts that the
 * model repacks Q4_0, Q5_0, Q8_0, Q4_K, Q5_K, Q6_K and MXFP4 into (OKV_WT_* in
 * kernels/wtype.h; rows of okv_wtype_row_size(type, k) bytes; their
 * activations are the same 8-bit values, regrouped: kernels/x16.h).  x and
 * y are f32, one activation column per token.
 *
 * Like ggml, quantized weights are multiplied by activations quantized once
 * per call to 8 bits, in the format the weight type names (kernels/wtype.h):
 *   Q8_0 (Q8_0, Q4_0, Q5_0 weights): blocks of 32, d = amax/127 rounded to
 *        f16, q = nearest-even(x * 127/amax): ggml's x86 quantizer;
 *   Q8_1 (Q4_1, Q5_1): the same values, plus s = d * sum(q) for the weights'
 *        offsets m;
 *   Q8_K (the K-quants): blocks of 256, ggml's quantize_row_q8_K;
 * with integer dot products per block.  F32, F16 and BF16 weights are
 * widened to f32 and multiplied with the f32 activations as they are.
 *
 * Output rows are shared out between threads in chunks taken as threads come
 * free, and every output element is computed by the same sequence of
 * operations whatever tile, chunk or thread computes it: the result depends
 * on the kernel alone, never on threads, timing or n. */
#ifndef OKV_KERNELS_MATMUL_H
#define OKV_KERNELS_MATMUL_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/cpu.h"
#include "offkv/status.h"
#include "offkv/threads.h"

/* The kernels come in one variant per okv_isa (kernels/cpu.h): the scalar
 * one everywhere, SIMD ones where the processor has them.  A variant that
 * lacks a weight type's kernel uses that of the ISA it includes
 * (okv_isa_fallback). */

/* Bytes of scratch okv_matmul needs for this shape: the quantized
 * activations of the weight type's format (0 for F32/F16/BF16 weights, where
 * scratch may be NULL).  Any alignment is fine: the product
 * aligns inside the buffer.  0 also for an unknown type or a bad shape. */
size_t okv_matmul_scratch_bytes(int wtype, int64_t k, int64_t n);

/* y = W x as above, with the best kernel.  x is [n][k], y is [n][rows]; y
 * must not overlap x or W.  scratch holds okv_matmul_scratch_bytes(wtype, k, n)
 * bytes.  pool may be NULL (the caller's thread).  Errors (nothing written to
 * y): OKV_ERR_INVALID for NULL pointers, rows/k/n < 1, an unknown wtype, a k
 * that is not whole blocks of the type (32 or 256 values), or missing
 * scratch. */
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

/* Q, K, V and a gate make four; a mixture of experts' decode row groups the
 * gate and up products of up to sixteen experts (moe.c). */
enum { OKV_MM_MAX_OPS = 32 };

/* Several products of one input x ([n][k]), e.g. Q, K and V: the activations
 * are quantized once per activation format the group needs, and the products
 * of each format run in one fork-join (one for the whole group unless it mixes
 * formats, e.g. Q4_0 with Q4_K), with results bit-identical to one okv_matmul
 * per weight.  The formats take turns in the scratch, which holds the largest
 * okv_matmul_scratch_bytes of the group; no y may overlap x or a W.  Errors
 * as okv_matmul (nothing written), and OKV_ERR_INVALID for n_ops outside
 * 1..OKV_MM_MAX_OPS. */
okv_status okv_matmul_multi(okv_threadpool *pool, const okv_mm_op *ops, int n_ops, int64_t k, const float *x,
                            int64_t n, void *scratch, okv_error *err);

/* Products of different inputs of one width, one column each: op i
 * multiplies column i of x ([n_ops][k]) into op->y (op->rows floats), e.g.
 * a decode row's experts' down products, each of its own activation.  The
 * columns are quantized in one pass per activation format and the products
 * of a format run in one fork-join, with results bit-identical to one
 * okv_matmul per op with n = 1.  scratch holds the largest
 * okv_matmul_scratch_bytes(wtype, k, n_ops) of the ops; no y may overlap x
 * or a W.  Errors as okv_matmul_multi. */
okv_status okv_matmul_each(okv_threadpool *pool, const okv_mm_op *ops, int n_ops, int64_t k, const float *x,
                           void *scratch, okv_error *err);

/* The same with a chosen kernel (a model runs its products at the level it
 * was loaded for, its "isa" option; tests and benchmarks try each);
 * OKV_ERR_UNSUPPORTED when kern cannot run here. */
okv_status okv_matmul_with(okv_isa kern, okv_threadpool *pool, int wtype, const void *w,
                           int64_t rows, int64_t k, const float *x, int64_t n, float *y,
                           void *scratch, okv_error *err);

okv_status okv_matmul_multi_with(okv_isa kern, okv_threadpool *pool, const okv_mm_op *ops, int n_ops,
                                 int64_t k, const float *x, int64_t n, void *scratch, okv_error *err);

okv_status okv_matmul_each_with(okv_isa kern, okv_threadpool *pool, const okv_mm_op *ops, int n_ops, int64_t k,
                                const float *x, void *scratch, okv_error *err);

#endif
