/* Internal: running one parallel job on a thread pool. */
#ifndef OKV_THREADS_POOL_H
#define OKV_THREADS_POOL_H

#include "offkv/threads.h"

/* A job body: called once on each of nth threads with ith = 0 .. nth-1.
 * Splitting work by (ith, nth) alone keeps results independent of timing. */
typedef void (*okv_job_fn)(void *arg, int32_t ith, int32_t nth);

/* Runs fn on every thread of pool (the caller is thread 0) and returns when
 * all are done.  A NULL pool runs fn(arg, 0, 1) on the caller's thread. */
void okv_parallel(okv_threadpool *pool, okv_job_fn fn, void *arg);

#endif
