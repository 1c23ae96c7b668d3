/* Internal to src/attend: the per-ISA pieces of the attention kernel.
 *
 * The driver (attend.c) walks one work item's key range in blocks of at most
 * OKV_ATTEND_BR physically contiguous rows, cut at multiples of OKV_ATTEND_BR
 * positions, position x in lane x % OKV_ATTEND_BR of a query's scores (so a
 * query's sums do not depend on the other queries of its step), and calls
 * three kernels per block:
 * scores for every query of the item, an online-softmax update per query, and
 * the weighted sum of V rows.  Each K and V row of a block is thus fetched
 * from memory once for all the item's queries (all heads of one GQA group,
 * and for prefill several tokens). */
#ifndef OKV_ATTEND_ATTEND_IMPL_H
#define OKV_ATTEND_ATTEND_IMPL_H

#include <math.h>
#include <stdint.h>

#include "kernels/cpu.h"

/* Rows per block: 32 keeps a block's K and V (f32, head_dim 128: 32 KiB)
 * near L1 between the score pass and the V pass, and fits a 32-bit lane mask. */
#define OKV_ATTEND_BR 32

/* Weights below 2^-64 of the running maximum are dropped as exact zeros, so
 * no denormal ever enters the sums (denormals cost microcode assists).  With
 * under 2^31 rows the dropped mass is below 2^-33 of the total, far under
 * f32 rounding. */
#define OKV_ATTEND_EXP_FLOOR (-64.0f)

static inline float okv_attend_exp2_scalar(float x) {
    return x < OKV_ATTEND_EXP_FLOOR ? 0.0f : exp2f(x);
}

/* Scores: S[q * BR + r] = dot(qs[q * hdp ..], K row r) for q < nq, r < nr,
 * in log2 units where qs rows are pre-scaled by scale * log2(e) (in natural
 * ones with a softcap, whose qs carry scale alone: attend.c converts after
 * the cap).  qs rows are zero-padded to hdp (a multiple of 16); K rows are
 * hd elements of storage type (f16 if f16 nonzero, else f32), row r at
 * k + r * hd.  S is the block's first lane (any float in a row of BR), so
 * nothing else of a row may be written; the accumulate kernel reads P from
 * the same place. */
typedef void (*okv_attend_scores_fn)(const float *qs, int32_t nq, int32_t hdp, const void *k,
                                     int f16, int32_t hd, int32_t nr, float *S);

/* Online-softmax update of one query over one block: rows lo..hi (0 <= lo <=
 * hi < BR) are visible.  Replaces s[0 .. BR) by the weights exp2(s - m_new)
 * (zero outside lo..hi), updates *m and *l, and returns the factor the
 * query's accumulator must be scaled by. */
typedef float (*okv_attend_softmax_fn)(float *s, int32_t lo, int32_t hi, float *m, float *l);

/* acc[q * hdp + d] = acc[q * hdp + d] * corr[q] + sum_r P[q * BR + r] * V[r][d]
 * for q < nq, d < hdp (lanes d >= hd see zeros from V). */
typedef void (*okv_attend_accum_fn)(float *acc, int32_t nq, int32_t hdp, const float *P,
                                    const float *corr, const void *v, int f16, int32_t hd,
                                    int32_t nr);

/* Widens nr Q8_0 rows of hd values, each row ceil(hd / 32) blocks stored
 * back to back, into nr rows of hd floats (the padding dropped), each value
 * exactly d * q as ggml dequantizes. */
void okv_attend_widen_q8(const void *rows, int32_t hd, int32_t nr, float *dst, okv_isa isa);

typedef struct okv_attend_kernels {
    okv_attend_scores_fn scores;
    okv_attend_softmax_fn softmax;
    okv_attend_accum_fn accum;
} okv_attend_kernels;

extern const okv_attend_kernels okv_attend_kernels_scalar;
#if defined(__x86_64__) || defined(__i386__)
#define OKV_ATTEND_HAVE_X86 1
extern const okv_attend_kernels okv_attend_kernels_avx2;
extern const okv_attend_kernels okv_attend_kernels_avx512;
#endif
#if defined(OKV_ARM)
extern const okv_attend_kernels okv_attend_kernels_neon;
#endif

#endif
