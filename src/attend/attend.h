/* Internal: the attention kernel behind okv_update_and_attend.
 *
 * The cache code writes a step's K/V rows into storage, then hands the
 * kernel one layer: where its rows are, how logical positions map to rows,
 * and the step's queries.  The kernel never changes storage. */
#ifndef OKV_ATTEND_ATTEND_H
#define OKV_ATTEND_ATTEND_H

#include <stddef.h>
#include <stdint.h>

#include "offkv/cache.h"
#include "kernels/cpu.h"

typedef struct okv_attend_job {
    /* storage of one layer: K and V each [n_kv_heads][rows][head_dim] of dtype */
    const void *k, *v;
    okv_dtype dtype;
    int32_t n_kv_heads, rows, head_dim;
    int32_t window;   /* 0: full attention; W > 0: query p sees p-W+1 .. p */
    int32_t ring;     /* nonzero: position p lives in row p % rows; zero: in row p */
    int32_t lo_pos;   /* lowest position held (no query reads below it) */
    /* the step's queries: q and out are [n_tokens][n_heads][head_dim] f32 */
    const float *q;
    float *out;
    int32_t n_heads, n_tokens;
    int32_t start;    /* position of query 0; query t is at start + t */
    float scale;
    float softcap;    /* > 0: scores s = scale q.k become softcap tanh(s / softcap) */
    /* NULL, or one logit per query head (gpt-oss's attention sinks): it
     * joins every softmax denominator of that head, unscaled, and attends
     * to nothing */
    const float *sinks;
} okv_attend_job;

/* Scratch bytes okv_attend_run needs for this job on nth threads. */
size_t okv_attend_scratch_bytes(const okv_attend_job *job, int32_t nth);

/* Computes out = softmax(scale * q k^T, masked by position) v for every
 * query and head (with a sink, the denominator gains exp(sink[h])).  Query head h reads kv head h / (n_heads / n_kv_heads).
 * scratch holds okv_attend_scratch_bytes(job, okv_threadpool_size(pool))
 * bytes, 64-byte aligned.  The split of work depends only on the job and the
 * thread count, so results are bit-identical run to run. */
void okv_attend_run(const okv_attend_job *job, okv_threadpool *pool, void *scratch, okv_isa isa);

#endif
