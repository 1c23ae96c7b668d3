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

#ifdef __cplusplus
}
#endif
#endif
