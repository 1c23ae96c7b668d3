/* Review: arithmetic overflow in the cache's size and position checks.
 *
 * Issue 2, semantics 1 and 9 (and include/offkv/cache.h, okv_cache_create):
 * invalid configurations are errors, failing storage is OKV_ERR_NOMEM, and
 * okv_cache_bytes is *exactly* the sum of 2*n_kv_heads*rows*head_dim*elem.
 * Every dimension below is individually valid (n_kv_heads >= 1, head_dim in
 * 1..512, capacity >= 1), so creation must either succeed with storage of the
 * stated size or fail cleanly (OKV_ERR_NOMEM / OKV_ERR_INVALID) -- never
 * succeed with a buffer smaller than the layout, never crash.
 *
 * Culprit: src/cache/storage.c okv_storage_new computes
 *   bytes = n_kv_heads * rows * head_dim * elem
 * in size_t with no overflow check, and cache_alloc rounds (bytes + 63) & ~63,
 * which wraps to 0 near SIZE_MAX; src/cache/cache.c okv_cache_bytes has the
 * same unchecked product.
 *
 * Issue 2, semantic 2 (positions): a position past the end must be
 * OKV_ERR_POSITION and "never UB".  src/cache/plan.c okv_check_positions
 * computes `start + i` in int32_t, which overflows (undefined behaviour) for a
 * start near INT32_MAX; that case only shows up under
 * -fsanitize=undefined (the second half of `make test`).
 *
 * Each case runs in a child process so that a crash is reported as a failed
 * CHECK instead of ending the program. */
#include <limits.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "offkv/offkv.h"

/* Runs fn in a child; returns its exit status, or 128 + signal if it died. */
static int in_child(int (*fn)(void)) {
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid == 0) _exit(fn());
    int st = 0;
    if (pid < 0 || waitpid(pid, &st, 0) != pid) return -1;
    if (WIFSIGNALED(st)) return 128 + WTERMSIG(st);
    return WEXITSTATUS(st);
}

/* Exit codes of the children. */
enum { OK_REFUSED = 0, CREATED_SHORT = 10, WRONG_STATUS = 11, POS_WRONG = 12 };

static int expect_refused(const okv_layer_geometry *g, const okv_cache_config *cfg, const char *what) {
    okv_error err = {0};
    okv_cache *c = okv_cache_create(g, 1, cfg, &err);
    if (c) {
        /* The true size does not fit in size_t, so no value okv_cache_bytes
         * can return is right. */
        fprintf(stderr, "  %s: created; rows %d, okv_cache_bytes %zu (the layout needs > 2^64 bytes)\n",
                what, okv_cache_rows(c, 0), okv_cache_bytes(c));
        okv_cache_release(c);
        return CREATED_SHORT;
    }
    if (err.status != OKV_ERR_NOMEM && err.status != OKV_ERR_INVALID) {
        fprintf(stderr, "  %s: status %s (%s)\n", what, okv_status_name(err.status), err.message);
        return WRONG_STATUS;
    }
    return OK_REFUSED;
}

/* A flat layer of 2^30 kv heads x 2^30 rows x 512 dims of f32: 2^71 bytes
 * per K, which wraps to exactly 0 in size_t.  Today the cache is created
 * with a 64-byte buffer, okv_cache_rows 2^30 and okv_cache_bytes 0. */
static int flat_wraps_to_zero(void) {
    okv_layer_geometry g = {1 << 30, 512, 0, 0};
    okv_cache_config cfg = {.capacity = 1 << 30, .initial_capacity = 1 << 30, .max_write = 1,
                            .dtype = OKV_F32};
    return expect_refused(&g, &cfg, "flat 2^30 heads x 2^30 rows x 512 f32");
}

/* The same through a ring: window 2^30 gives min(W + max_write - 1,
 * capacity) = 2^30 rows from creation; 2^25 heads x 512 dims x f32 makes
 * 2^66 bytes, again 0 mod 2^64. */
static int ring_wraps_to_zero(void) {
    okv_layer_geometry g = {1 << 25, 512, 1 << 30, 0};
    okv_cache_config cfg = {.capacity = 1 << 30, .initial_capacity = 0, .max_write = 1, .dtype = OKV_F32};
    return expect_refused(&g, &cfg, "ring 2^25 heads x 2^30 rows x 512 f32");
}

/* 577545073 heads x 31252369 rows x 511 dims = 2^63 - 1 elements; in f16
 * that is 2^64 - 2 bytes, which fits size_t, but cache_alloc's rounding to
 * 64 bytes wraps it to 0, aligned_alloc hands back 64 bytes, and
 * okv_storage_new's memset of 2^64 - 2 bytes crashes inside
 * okv_cache_create (SIGSEGV today). */
static int rounding_wraps(void) {
    okv_layer_geometry g = {577545073, 511, 0, 0};
    okv_cache_config cfg = {.capacity = 31252369, .initial_capacity = 31252369, .max_write = 1,
                            .dtype = OKV_F16};
    return expect_refused(&g, &cfg, "flat 577545073 heads x 31252369 rows x 511 f16");
}

/* Positions {INT32_MAX, INT32_MIN}: not consecutive and ending past any
 * capacity.  Must be OKV_ERR_POSITION without undefined behaviour; under
 * UBSan today: "plan.c: signed integer overflow: 1 + 2147483647". */
static int positions_near_int_max(void) {
    okv_layer_geometry g = {1, 4, 0, 0};
    okv_cache_config cfg = {.capacity = INT32_MAX, .initial_capacity = 0, .max_write = 4, .dtype = OKV_F32};
    okv_cache *c = okv_cache_create(&g, 1, &cfg, NULL);
    if (!c) return POS_WRONG;
    okv_error err = {0};
    int32_t pos[2] = {INT32_MAX, INT32_MIN};
    okv_step *s = okv_step_begin(c, pos, 2, NULL, &err);
    int rc = !s && err.status == OKV_ERR_POSITION ? OK_REFUSED : POS_WRONG;
    if (s) okv_step_abort(s);
    okv_cache_release(c);
    return rc;
}

int main(void) {
    int rc;
    rc = in_child(flat_wraps_to_zero);
    CHECK(rc == OK_REFUSED, "flat layer whose K/V size wraps size_t to 0: child result %d "
                            "(10 = created with a short buffer; >128 = died by a signal)", rc);
    rc = in_child(ring_wraps_to_zero);
    CHECK(rc == OK_REFUSED, "ring layer whose K/V size wraps size_t to 0: child result %d", rc);
    rc = in_child(rounding_wraps);
    CHECK(rc == OK_REFUSED, "K/V size 2^64-2 (64-byte rounding wraps): child result %d "
                            "(139 = SIGSEGV in okv_cache_create)", rc);
    rc = in_child(positions_near_int_max);
    CHECK(rc == OK_REFUSED, "positions {INT32_MAX, INT32_MIN}: child result %d "
                            "(nonzero under -fsanitize=undefined: signed overflow in plan.c)", rc);
    return check_done();
}
