/* Internal to the element-wise kernels: the per-ISA versions ops.c picks
 * from (by okv_cpu_best_isa). */
#ifndef OKV_KERNELS_OPS_IMPL_H
#define OKV_KERNELS_OPS_IMPL_H

#include <stdint.h>

#include "kernels/f16.h"

void okv_swiglu_avx2(float *y, const float *gate, const float *up, int64_t n);
void okv_silu_avx2(float *y, const float *x, int64_t n);
void okv_geglu_ggml_avx2(float *y, const float *gate, const float *up, int64_t n, const okv_f16 *table);
void okv_swiglu_neon(float *y, const float *gate, const float *up, int64_t n);
void okv_silu_neon(float *y, const float *x, int64_t n);
void okv_geglu_ggml_neon(float *y, const float *gate, const float *up, int64_t n, const okv_f16 *table);

#endif
