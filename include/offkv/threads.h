/* offkv — thread pools.
 *
 * The engine never starts threads of its own: the caller creates a pool of
 * the size it wants and hands it to the calls that may use it.  A pool of n
 * threads runs work on n-1 workers plus the calling thread. */
#ifndef OFFKV_THREADS_H
#define OFFKV_THREADS_H

#include <stdint.h>
#include "offkv/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct okv_threadpool okv_threadpool;

/* Creates a pool that runs parallel work on n_threads threads, the calling
 * thread included (n_threads = 1: the caller's thread only, no workers are
 * started).  n_threads < 1 or > 2^20 - 1 is OKV_ERR_INVALID; failing to start a worker is
 * OKV_ERR_NOMEM.  Returns NULL on error.  The caller owns the pool and frees
 * it with okv_threadpool_free.  A pool runs one parallel job at a time: do
 * not share it between threads that issue work concurrently. */
okv_threadpool *okv_threadpool_create(int32_t n_threads, okv_error *err);

/* Stops the workers and frees the pool.  NULL is a no-op.  No call that uses
 * the pool may be in progress. */
void okv_threadpool_free(okv_threadpool *pool);

/* Number of threads work is spread over (1 for a NULL pool). */
int32_t okv_threadpool_size(const okv_threadpool *pool);

/* A job body: called once for each share ith = 0 .. nth-1, each share by
 * one thread (which one, and whether one thread runs several shares one
 * after another, depends on timing).  Splitting work by (ith, nth) alone
 * keeps results independent of timing; a share must not wait for another
 * share (no barriers inside a job). */
typedef void (*okv_job_fn)(void *arg, int32_t ith, int32_t nth);

/* Runs fn's nth = okv_threadpool_size(pool) shares on the pool's threads
 * (the caller's among them) and returns when all are done: the engine's own
 * kernels run so, and a program can spread its own work (offkv synth fills
 * tensors so) over the pool it already made.  A NULL pool runs fn(arg, 0, 1)
 * on the caller's thread.  As every use of a pool, not concurrently with
 * other work on the same pool. */
void okv_parallel(okv_threadpool *pool, okv_job_fn fn, void *arg);

#ifdef __cplusplus
}
#endif
#endif
