/* A fork-join pool: the caller publishes a job by bumping a generation
 * counter; workers spin briefly (decode runs thousands of tiny jobs per
 * second, and a condition-variable wake costs tens of microseconds), then
 * sleep on a condition variable.
 *
 * A job's shares (ith = 0 .. nth-1) are claimed, not assigned: the caller
 * and the workers take them from one counter, so each runs exactly once,
 * by whichever thread claims it.  The caller never waits for a worker that
 * has not started: when a worker wakes late or is descheduled (a busy
 * machine, more threads than free cores), the caller runs its share too and
 * returns as soon as every claimed share is done. */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>

#include "core/error.h"
#include "threads/pool.h"

enum { SPIN_ROUNDS = 20000 };

/* state = generation << SHARE_BITS | next unclaimed share */
#define SHARE_BITS 20
#define SHARE_MASK ((UINT64_C(1) << SHARE_BITS) - 1)
#define MAX_THREADS ((int32_t)SHARE_MASK)

struct okv_threadpool {
    int32_t n_threads;
    pthread_t *workers;           /* n_threads - 1 */
    pthread_mutex_t mu;
    pthread_cond_t wake;
    atomic_uint_fast64_t state;   /* the job's generation and its next share */
    atomic_int done;              /* shares of the current job finished */
    atomic_bool stop;
    okv_job_fn fn;
    void *arg;
};

typedef struct worker_arg { okv_threadpool *pool; int32_t ith; } worker_arg;

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

/* Claims and runs shares of the job of generation gen (s: a recent state)
 * until none is left or a newer job has replaced it.  fn and arg are read
 * after a successful claim, whose acquire pairs with the publishing store. */
static void run_shares(okv_threadpool *pool, uint_fast64_t s, uint_fast64_t gen) {
    for (;;) {
        if ((s >> SHARE_BITS) != gen || (int32_t)(s & SHARE_MASK) >= pool->n_threads) return;
        if (atomic_compare_exchange_weak_explicit(&pool->state, &s, s + 1, memory_order_acq_rel,
                                                  memory_order_acquire)) {
            pool->fn(pool->arg, (int32_t)(s & SHARE_MASK), pool->n_threads);
            atomic_fetch_add_explicit(&pool->done, 1, memory_order_release);
            s = atomic_load_explicit(&pool->state, memory_order_acquire);
        }
    }
}

static void *worker_main(void *p) {
    worker_arg wa = *(worker_arg *)p;
    free(p);
    okv_threadpool *pool = wa.pool;
    uint_fast64_t seen = 0;
    for (;;) {
        uint_fast64_t s;
        int spins = 0;
        while (((s = atomic_load_explicit(&pool->state, memory_order_acquire)) >> SHARE_BITS) == seen &&
               !atomic_load_explicit(&pool->stop, memory_order_acquire)) {
            if (++spins < SPIN_ROUNDS) {
                if (spins % 1024 == 0) sched_yield();
                else cpu_relax();
                continue;
            }
            pthread_mutex_lock(&pool->mu);
            while ((atomic_load_explicit(&pool->state, memory_order_acquire) >> SHARE_BITS) == seen &&
                   !atomic_load_explicit(&pool->stop, memory_order_acquire))
                pthread_cond_wait(&pool->wake, &pool->mu);
            pthread_mutex_unlock(&pool->mu);
        }
        if (atomic_load_explicit(&pool->stop, memory_order_acquire)) return NULL;
        seen = s >> SHARE_BITS;
        run_shares(pool, s, seen);
    }
}

static void stop_workers(okv_threadpool *pool, int32_t n_started) {
    pthread_mutex_lock(&pool->mu);
    atomic_store_explicit(&pool->stop, true, memory_order_release);
    pthread_cond_broadcast(&pool->wake);
    pthread_mutex_unlock(&pool->mu);
    for (int32_t i = 0; i < n_started; i++) pthread_join(pool->workers[i], NULL);
}

okv_threadpool *okv_threadpool_create(int32_t n_threads, okv_error *err) {
    if (n_threads < 1 || n_threads > MAX_THREADS) {
        okv_fail(err, OKV_ERR_INVALID, "thread pool needs 1 to %d threads, got %d", (int)MAX_THREADS,
                 (int)n_threads);
        return NULL;
    }
    okv_threadpool *pool = calloc(1, sizeof *pool);
    if (!pool) { okv_fail(err, OKV_ERR_NOMEM, "out of memory creating a thread pool"); return NULL; }
    pool->n_threads = n_threads;
    pthread_mutex_init(&pool->mu, NULL);
    pthread_cond_init(&pool->wake, NULL);
    atomic_init(&pool->state, 0);
    atomic_init(&pool->done, 0);
    atomic_init(&pool->stop, false);
    if (n_threads > 1) {
        pool->workers = calloc((size_t)n_threads - 1, sizeof *pool->workers);
        if (!pool->workers) goto nomem;
        for (int32_t i = 0; i < n_threads - 1; i++) {
            worker_arg *wa = malloc(sizeof *wa);
            if (!wa || (wa->pool = pool, wa->ith = i + 1,
                        pthread_create(&pool->workers[i], NULL, worker_main, wa) != 0)) {
                free(wa);
                stop_workers(pool, i);
                okv_fail(err, OKV_ERR_NOMEM, "could not start worker thread %d of %d", (int)i + 1,
                         (int)n_threads);
                goto fail;
            }
        }
    }
    okv_error_clear(err);
    return pool;
nomem:
    okv_fail(err, OKV_ERR_NOMEM, "out of memory creating a thread pool of %d", (int)n_threads);
fail:
    pthread_mutex_destroy(&pool->mu);
    pthread_cond_destroy(&pool->wake);
    free(pool->workers);
    free(pool);
    return NULL;
}

void okv_threadpool_free(okv_threadpool *pool) {
    if (!pool) return;
    stop_workers(pool, pool->n_threads - 1);
    pthread_mutex_destroy(&pool->mu);
    pthread_cond_destroy(&pool->wake);
    free(pool->workers);
    free(pool);
}

int32_t okv_threadpool_size(const okv_threadpool *pool) { return pool ? pool->n_threads : 1; }

void okv_parallel(okv_threadpool *pool, okv_job_fn fn, void *arg) {
    if (!pool || pool->n_threads == 1) {
        fn(arg, 0, 1);
        return;
    }
    pool->fn = fn;
    pool->arg = arg;
    atomic_store_explicit(&pool->done, 0, memory_order_relaxed);
    const uint_fast64_t gen = (atomic_load_explicit(&pool->state, memory_order_relaxed) >> SHARE_BITS) + 1;
    const uint_fast64_t s = gen << SHARE_BITS;
    pthread_mutex_lock(&pool->mu);
    atomic_store_explicit(&pool->state, s, memory_order_release);
    pthread_cond_broadcast(&pool->wake);
    pthread_mutex_unlock(&pool->mu);
    run_shares(pool, s, gen);
    /* Every share is claimed now; wait for those still running elsewhere,
     * yielding now and then: with more threads than cores, the worker we
     * wait for may need this core to finish. */
    for (unsigned spins = 0; atomic_load_explicit(&pool->done, memory_order_acquire) != pool->n_threads; spins++) {
        if (spins % 1024 == 1023) sched_yield();
        else cpu_relax();
    }
}
