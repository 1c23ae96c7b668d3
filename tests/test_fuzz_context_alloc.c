/* Fuzz: context options that ask for absurd memory.  The rule: an
 * allocation that fails is an error (OKV_ERR_NOMEM or OKV_ERR_INVALID) with
 * a message, never a crash, and leaves nothing behind (LeakSanitizer checks
 * that in the sanitizer build).  A request the machine can grant (pages are
 * not touched until used) may succeed; then the context must still run.
 *
 * The sanitizer build needs allocator_may_return_null=1 for a huge malloc to
 * return NULL instead of ASan reporting it: set below. */
#include <stdint.h>

#include "check.h"
#include "offkv/offkv.h"

const char *__asan_default_options(void);
const char *__asan_default_options(void) { return "allocator_may_return_null=1"; }

static void try_opts(okv_model *m, const char *const *opts, const char *what) {
    okv_error err;
    memset(&err, 0, sizeof err);
    okv_context *ctx = okv_context_create(m, opts, NULL, &err);
    if (!ctx) {
        CHECK((err.status == OKV_ERR_NOMEM || err.status == OKV_ERR_INVALID) && err.message[0],
              "%s: refused with %s '%s'", what, okv_status_name(err.status), err.message);
        return;
    }
    int32_t toks[2] = {1, 2}, pos[2] = {0, 1};
    float *logits = malloc(sizeof(float) * 2 * (size_t)okv_model_n_vocab(m));
    okv_status st = okv_context_eval(ctx, toks, pos, 2, logits, &err);
    CHECK(st == OKV_OK || err.message[0], "%s: eval %s without a message", what, okv_status_name(st));
    free(logits);
    okv_context_free(ctx);
}

int main(void) {
    const char *shared = check_shared_dir();
    if (!shared) { printf("skipped: ../shared not found\n"); return CHECK_SKIP; }
    static const char *const models[] = {"tiny-llama", "tiny-gemma3", "tiny-muse-glimmer"};
    for (size_t i = 0; i < sizeof models / sizeof models[0]; i++) {
        char path[1024];
        snprintf(path, sizeof path, "%s/models/%s.gguf", shared, models[i]);
        okv_error err;
        okv_model *m = okv_model_load(path, NULL, &err);
        CHECK(m != NULL, "%s: %s", path, err.message);
        if (!m) continue;
        /* flat layers of 2^30 rows from the start: hundreds of GiB */
        const char *a[] = {"capacity", "1073741824", "initial_capacity", "1073741824", "kv_type", "f32", NULL};
        try_opts(m, a, "capacity and initial_capacity 2^30");
        /* a ring as large as its window allows, plus a wide step */
        const char *b[] = {"capacity", "1073741824", "max_write", "1048576", "initial_capacity", "0", NULL};
        try_opts(m, b, "max_write 2^20");
        /* out of range: refused as INVALID naming the option */
        const char *c[] = {"capacity", "1073741825", NULL};
        okv_context *ctx = okv_context_create(m, c, NULL, &err);
        CHECK(!ctx && err.status == OKV_ERR_INVALID && strstr(err.message, "capacity"), "capacity 2^30+1: %s",
              err.message);
        okv_context_free(ctx);
        const char *d[] = {"max_write", "0", NULL};
        ctx = okv_context_create(m, d, NULL, &err);
        CHECK(!ctx && err.status == OKV_ERR_INVALID && strstr(err.message, "max_write"), "max_write 0: %s",
              err.message);
        okv_context_free(ctx);
        const char *e[] = {"n_threads", "100000", NULL};
        ctx = okv_context_create(m, e, NULL, &err);
        CHECK(!ctx && err.status == OKV_ERR_INVALID && strstr(err.message, "n_threads"), "n_threads 100000: %s",
              err.message);
        okv_context_free(ctx);
        okv_model_free(m);
    }
    return check_done();
}
