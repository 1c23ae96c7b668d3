/* Regression tests for what the hostile-user probe found in the C API:
 * stale step handles (commit twice, abort after commit, abort twice, attend
 * after commit, a late abort of an old step while a new one is open), a
 * NaN attention scale, calls that left an old error in err on success, and
 * okv_model_load on a FIFO blocking forever. */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "offkv/offkv.h"

enum { HD = 8, NKV = 2, NH = 4 };
static okv_layer_geometry GEO[2] = {{NKV, HD, 0, 0}, {NKV, HD, 4, 0}};

static okv_cache *make_cache(void) {
    okv_cache_config cfg = {.capacity = 64, .initial_capacity = 4, .max_write = 4, .dtype = OKV_F32};
    okv_error err;
    okv_cache *c = okv_cache_create(GEO, 2, &cfg, &err);
    CHECK(c != NULL, "create: %s", err.message);
    return c;
}

static float q[4 * NH * HD], k[4 * NKV * HD], v[4 * NKV * HD], out[4 * NH * HD];

/* Attends every layer of s; the status of the last call. */
static okv_status attend_all(okv_step *s, okv_error *err) {
    okv_status st = OKV_OK;
    for (int l = 0; l < 2 && st == OKV_OK; l++)
        st = okv_update_and_attend(s, l, q, NH, k, v, OKV_F32, 0.35f, out, err);
    return st;
}

static okv_step *begin_at(okv_cache *c, int32_t start, int32_t n) {
    int32_t pos[4];
    for (int32_t i = 0; i < n; i++) pos[i] = start + i;
    okv_error err;
    okv_step *s = okv_step_begin(c, pos, n, NULL, &err);
    CHECK(s != NULL, "begin at %d: %s", (int)start, err.message);
    return s;
}

static void stale_handles(void) {
    for (size_t i = 0; i < sizeof q / sizeof q[0]; i++) q[i] = (float)sin((double)i);
    for (size_t i = 0; i < sizeof k / sizeof k[0]; i++) k[i] = v[i] = (float)cos((double)i);
    okv_cache *c = make_cache();
    if (!c) return;
    okv_error err;

    /* commit twice */
    okv_step *s = begin_at(c, 0, 2);
    CHECK_STATUS(attend_all(s, &err), OKV_OK, err);
    CHECK_STATUS(okv_step_commit(s, &err), OKV_OK, err);
    CHECK_STATUS(okv_step_commit(s, &err), OKV_ERR_INVALID, err);
    CHECK(strstr(err.message, "stale") != NULL, "second commit names a stale handle: %s", err.message);
    CHECK(okv_cache_length(c) == 2, "length %d after a second commit, want 2", (int)okv_cache_length(c));

    /* abort after commit, abort twice: no-ops */
    okv_step_abort(s);
    CHECK(okv_cache_length(c) == 2, "length after abort-after-commit");
    okv_step *t = begin_at(c, 2, 2);
    okv_step_abort(t);
    okv_step_abort(t);
    CHECK(okv_cache_length(c) == 2, "length after abort twice");

    /* attend after commit */
    CHECK_STATUS(okv_update_and_attend(s, 0, q, NH, k, v, OKV_F32, 0.35f, out, &err), OKV_ERR_INVALID, err);

    /* A late abort, commit or attend through an old handle while another
     * step is open must leave that step alone: it still commits. */
    okv_step *now = begin_at(c, 2, 2);
    CHECK(now != s && now != t, "each begin hands out a new handle");
    okv_step_abort(s);
    okv_step_abort(t);
    CHECK_STATUS(okv_step_commit(t, &err), OKV_ERR_INVALID, err);
    CHECK_STATUS(okv_update_and_attend(s, 0, q, NH, k, v, OKV_F32, 0.35f, out, &err), OKV_ERR_INVALID, err);
    CHECK_STATUS(attend_all(now, &err), OKV_OK, err);
    CHECK_STATUS(okv_step_commit(now, &err), OKV_OK, err);
    CHECK(okv_cache_length(c) == 4, "the open step survived the stale calls: length %d, want 4",
          (int)okv_cache_length(c));

    /* The stale handle's cache reference was dropped once, at its commit:
     * releasing ours frees the cache (ASan reports a leak otherwise). */
    okv_cache_release(c);
}

static void nan_scale(void) {
    okv_cache *c = make_cache();
    if (!c) return;
    okv_error err;
    const float bad[] = {NAN, INFINITY, -INFINITY};
    for (int i = 0; i < 3; i++) {
        okv_step *s = begin_at(c, 0, 1);
        CHECK_STATUS(okv_update_and_attend(s, 0, q, NH, k, v, OKV_F32, bad[i], out, &err), OKV_ERR_INVALID, err);
        CHECK(strstr(err.message, "scale") != NULL, "names the scale: %s", err.message);
        CHECK_STATUS(okv_step_commit(s, &err), OKV_ERR_INVALID, err);
        okv_step_abort(s);
    }
    CHECK(okv_cache_length(c) == 0, "nothing committed");
    okv_cache_release(c);
}

/* Every call that succeeds clears err, whatever it held (status.h). */
static void stale(okv_error *err) {
    err->status = OKV_ERR_IO;
    snprintf(err->message, sizeof err->message, "an old error");
}
#define CHECK_CLEARED(call_ok, err, what)                                                                   \
    CHECK((call_ok) && (err).status == OKV_OK && (err).message[0] == '\0', "%s left '%s' (%s)", what, \
          (err).message, okv_status_name((err).status))

static void success_clears_err(void) {
    okv_error err;
    okv_cache_config cfg = {.capacity = 16, .initial_capacity = 4, .max_write = 4, .dtype = OKV_F16};
    stale(&err);
    okv_cache *c = okv_cache_create(GEO, 2, &cfg, &err);
    CHECK_CLEARED(c != NULL, err, "okv_cache_create");
    stale(&err);
    okv_threadpool *pool = okv_threadpool_create(2, &err);
    CHECK_CLEARED(pool != NULL, err, "okv_threadpool_create");
    okv_factory *f = okv_factory_create();
    stale(&err);
    CHECK_CLEARED(okv_register_cpu_cache_builders(f, &err) == OKV_OK, err, "okv_register_cpu_cache_builders");
    stale(&err);
    okv_cache *b = okv_factory_build(f, "cpu", "single", GEO, 2, &cfg, &err);
    CHECK_CLEARED(b != NULL, err, "okv_factory_build");
    okv_registry *r = okv_registry_create();
    stale(&err);
    CHECK_CLEARED(okv_registry_install(r, "k", b, &err) == OKV_OK, err, "okv_registry_install");
    stale(&err);
    CHECK_CLEARED(okv_registry_remove(r, "k", &err) == OKV_OK, err, "okv_registry_remove");
    int32_t pos[1] = {0};
    stale(&err);
    okv_step *s = okv_step_begin(c, pos, 1, pool, &err);
    CHECK_CLEARED(s != NULL, err, "okv_step_begin");
    stale(&err);
    CHECK_CLEARED(attend_all(s, &err) == OKV_OK, err, "okv_update_and_attend");
    stale(&err);
    CHECK_CLEARED(okv_step_commit(s, &err) == OKV_OK, err, "okv_step_commit");
    stale(&err);
    CHECK_CLEARED(okv_cache_rewind(c, 0, &err) == OKV_OK, err, "okv_cache_rewind");
    stale(&err);
    CHECK_CLEARED(okv_cache_clear(c, &err) == OKV_OK, err, "okv_cache_clear");
    okv_plan plan;
    stale(&err);
    CHECK_CLEARED(okv_cache_plan(c, 1, 0, 2, &plan, &err) == OKV_OK, err, "okv_cache_plan");

    stale(&err);
    okv_gguf_writer *w = okv_gguf_writer_create(&err);
    CHECK_CLEARED(w != NULL, err, "okv_gguf_writer_create");
    stale(&err);
    CHECK_CLEARED(okv_gguf_writer_add_u32(w, "a.u32", 7, &err) == OKV_OK, err, "okv_gguf_writer_add_u32");
    stale(&err);
    CHECK_CLEARED(okv_gguf_writer_add_str(w, "a.str", "x", &err) == OKV_OK, err, "okv_gguf_writer_add_str");
    const float data[4] = {1, 2, 3, 4};
    const int64_t ne[1] = {4};
    stale(&err);
    CHECK_CLEARED(okv_gguf_writer_add_tensor(w, "t", OKV_GGML_F32, 1, ne, data, &err) == OKV_OK, err,
                  "okv_gguf_writer_add_tensor");
    void *bytes = NULL;
    size_t n_bytes = 0;
    stale(&err);
    CHECK_CLEARED(okv_gguf_writer_to_memory(w, &bytes, &n_bytes, &err) == OKV_OK, err, "okv_gguf_writer_to_memory");
    stale(&err);
    okv_gguf *mem = bytes ? okv_gguf_open_memory(bytes, n_bytes, &err) : NULL;
    CHECK_CLEARED(mem != NULL, err, "okv_gguf_open_memory");
    okv_gguf_close(mem);
    free(bytes);
    okv_gguf_writer_free(w);

    const char *shared = check_shared_dir();
    if (shared) {
        char path[1024];
        snprintf(path, sizeof path, "%s/models/stories260K.gguf", shared);
        stale(&err);
        okv_gguf *g = okv_gguf_open(path, &err);
        CHECK_CLEARED(g != NULL, err, "okv_gguf_open");
        uint32_t u;
        stale(&err);
        CHECK_CLEARED(okv_gguf_get_u32(g, "llama.block_count", &u, &err) == OKV_OK, err, "okv_gguf_get_u32");
        okv_gguf_close(g);
        stale(&err);
        okv_model *m = okv_model_load(path, NULL, &err);
        CHECK_CLEARED(m != NULL, err, "okv_model_load");
        stale(&err);
        okv_context *ctx = m ? okv_context_create(m, NULL, NULL, &err) : NULL;
        CHECK_CLEARED(ctx != NULL, err, "okv_context_create");
        if (ctx) {
            int32_t tok[1] = {1};
            float *logits = malloc(sizeof(float) * (size_t)okv_model_n_vocab(m));
            stale(&err);
            CHECK_CLEARED(okv_context_eval(ctx, tok, pos, 1, logits, &err) == OKV_OK, err, "okv_context_eval");
            free(logits);
        }
        if (m) {
            int32_t ids[16];
            size_t n_ids = 0;
            stale(&err);
            CHECK_CLEARED(okv_tokenizer_encode(okv_model_tokenizer(m), "Once", 4, 0, ids, 16, &n_ids, &err) == OKV_OK,
                          err, "okv_tokenizer_encode");
        }
        okv_context_free(ctx);
        okv_model_free(m);
    } else {
        printf("skipped the model calls: ../shared not found\n");
    }
    okv_registry_free(r);
    okv_cache_release(b);
    okv_factory_free(f);
    okv_threadpool_free(pool);
    okv_cache_release(c);
}

/* okv_model_load on a FIFO must refuse at once; it used to block in open()
 * until a writer came.  The load runs on a thread; if it is still blocked
 * after 5 s, opening the FIFO's write end releases it and the test fails. */
typedef struct {
    const char *path;
    okv_model *m;
    okv_error err;
    _Atomic int done; /* read by the main thread while the loader runs: volatile is no synchronization */
} fifo_job;

static void *load_fifo(void *arg) {
    fifo_job *j = arg;
    j->m = okv_model_load(j->path, NULL, &j->err);
    j->done = 1;
    return NULL;
}

static void fifo_refused(void) {
    char path[] = "test_probe_api.fifo";
    unlink(path);
    if (mkfifo(path, 0600) != 0) {
        printf("skipped the FIFO check: mkfifo: %s\n", strerror(errno));
        return;
    }
    fifo_job j = {.path = path};
    pthread_t th;
    pthread_create(&th, NULL, load_fifo, &j);
    for (int i = 0; i < 500 && !j.done; i++) nanosleep(&(struct timespec){0, 10 * 1000 * 1000}, NULL);
    const int blocked = !j.done;
    if (blocked) {
        int fd = open(path, O_WRONLY | O_NONBLOCK);
        if (fd >= 0) close(fd);
    }
    pthread_join(th, NULL);
    CHECK(!blocked, "okv_model_load on a FIFO blocked for 5 s");
    CHECK(j.m == NULL && j.err.status == OKV_ERR_IO && strstr(j.err.message, "FIFO"),
          "a FIFO is refused with OKV_ERR_IO naming it: %s (%s)", j.err.message, okv_status_name(j.err.status));
    okv_model_free(j.m);
    unlink(path);
}

int main(void) {
    stale_handles();
    nan_scale();
    success_clears_err();
    fifo_refused();
    return check_done();
}
