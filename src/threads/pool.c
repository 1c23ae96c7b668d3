/* A fork-join pool: the caller publishes a job by bumping a generation
 * counter; workers spin briefly (decode runs thousands of tiny jobs per
 * second, and a condition-variable wake costs tens of microseconds), then
 * sleep on a condition variable. */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>

#include "core/error.h"
#include "threads/pool.h"

enum { SPIN_ROUNDS = 20000 };

struct okv_threadpool {
    int32_t n_threads;
    pthread_t *workers;           /* n_threads - 1 */
    pthread_mutex_t mu;
    pthread_cond_t wake;
    atomic_uint_fast64_t generation;  /* bumped once per job */
    atomic_int pending;           /* workers still running the current job */
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

static void *worker_main(void *p) {
    worker_arg wa = *(worker_arg *)p;
    free(p);
    okv_threadpool *pool = wa.pool;
    uint_fast64_t seen = 0;
    for (;;) {
        uint_fast64_t g;
        int spins = 0;
        while ((g = atomic_load_explicit(&pool->generation, memory_order_acquire)) == seen &&
               !atomic_load_explicit(&pool->stop, memory_order_acquire)) {
            if (++spins < SPIN_ROUNDS) {
                if (spins % 1024 == 0) sched_yield();
                else cpu_relax();
                continue;
            }
            pthread_mutex_lock(&pool->mu);
            while (atomic_load_explicit(&pool->generation, memory_order_acquire) == seen &&
                   !atomic_load_explicit(&pool->stop, memory_order_acquire))
                pthread_cond_wait(&pool->wake, &pool->mu);
            pthread_mutex_unlock(&pool->mu);
        }
        if (atomic_load_explicit(&pool->stop, memory_order_acquire)) return NULL;
        seen = g;
        pool->fn(pool->arg, wa.ith, pool->n_threads);
        atomic_fetch_sub_explicit(&pool->pending, 1, memory_order_acq_rel);
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
    if (n_threads < 1) {
        okv_fail(err, OKV_ERR_INVALID, "thread pool needs at least 1 thread, got %d", (int)n_threads);
        return NULL;
    }
    okv_threadpool *pool = calloc(1, sizeof *pool);
    if (!pool) { okv_fail(err, OKV_ERR_NOMEM, "out of memory creating a thread pool"); return NULL; }
    pool->n_threads = n_threads;
    pthread_mutex_init(&pool->mu, NULL);
    pthread_cond_init(&pool->wake, NULL);
    atomic_init(&pool->generation, 0);
    atomic_init(&pool->pending, 0);
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
    atomic_store_explicit(&pool->pending, pool->n_threads - 1, memory_order_relaxed);
    pthread_mutex_lock(&pool->mu);
    atomic_fetch_add_explicit(&pool->generation, 1, memory_order_release);
    pthread_cond_broadcast(&pool->wake);
    pthread_mutex_unlock(&pool->mu);
    fn(arg, 0, pool->n_threads);
    /* Yield now and then: with more threads than cores, the worker we wait
     * for may need this core to finish. */
    for (unsigned spins = 0; atomic_load_explicit(&pool->pending, memory_order_acquire) != 0; spins++) {
        if (spins % 1024 == 1023) sched_yield();
        else cpu_relax();
    }
}
