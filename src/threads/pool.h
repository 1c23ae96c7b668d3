/* Internal: running one parallel job on a thread pool. */
#ifndef OKV_THREADS_POOL_H
#define OKV_THREADS_POOL_H

#include "offkv/threads.h"

/* A job body: called once for each share ith = 0 .. nth-1, each share by
 * one thread (which one, and whether one thread runs several shares one
 * after another, depends on timing).  Splitting work by (ith, nth) alone
 * keeps results independent of timing; a share must not wait for another
 * share (no barriers inside a job). */
typedef void (*okv_job_fn)(void *arg, int32_t ith, int32_t nth);

/* Runs fn's nth = okv_threadpool_size(pool) shares on the pool's threads
 * (the caller's among them) and returns when all are done.  A NULL pool runs fn(arg, 0, 1) on the caller's thread. */
void okv_parallel(okv_threadpool *pool, okv_job_fn fn, void *arg);

#endif
