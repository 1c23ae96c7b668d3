/* The sequence contract: which steps are accepted, what rewind and clear
 * do, what a failed or aborted step leaves behind, one open step at a time,
 * reference counting, config errors, the registry and the factory. */
#include "check.h"
#include "seqref.h"
#include "cache/cache_impl.h"

static const double TOL = 2e-5;

static okv_layer_geometry GEO[2] = {{2, 8, 0, 0}, {1, 8, 4, 0}};
static int32_t HEADS[2] = {4, 2};

static int make(seqref *s, int32_t capacity, int32_t initial, int32_t max_write) {
    okv_cache_config cfg = {.capacity = capacity, .initial_capacity = initial, .max_write = max_write,
                            .dtype = OKV_F32};
    okv_error err;
    if (!seq_init(s, GEO, HEADS, 2, &cfg, OKV_F32, 1234, &err)) {
        CHECK(0, "create: %s", err.message);
        return 0;
    }
    return 1;
}

static int contains(const char *msg, const char *what) { return strstr(msg, what) != NULL; }

static void position_checks(void) {
    seqref s;
    if (!make(&s, 32, 2, 4)) return;
    okv_error err;
    CHECK_STATUS(seq_step(&s, 0, 4, &err), OKV_OK, err);
    CHECK_STATUS(seq_step(&s, 4, 2, &err), OKV_OK, err);
    const int32_t len = okv_cache_length(s.cache);
    const uint64_t gen = okv_cache_generation(s.cache);
    const int32_t rows = okv_cache_rows(s.cache, 0);
    int32_t pos[8];

    /* n_tokens < 1 is invalid; the rest are position errors naming the number. */
    pos[0] = 6;
    CHECK(okv_step_begin(s.cache, pos, 0, NULL, &err) == NULL && err.status == OKV_ERR_INVALID, "n=0");
    CHECK(okv_step_begin(s.cache, NULL, 1, NULL, &err) == NULL && err.status == OKV_ERR_INVALID, "NULL");
    for (int i = 0; i < 5; i++) pos[i] = 6 + i;
    CHECK(okv_step_begin(s.cache, pos, 5, NULL, &err) == NULL && err.status == OKV_ERR_POSITION &&
              contains(err.message, "5"),
          "more than max_write: %s", err.message);
    pos[0] = 7;
    CHECK(okv_step_begin(s.cache, pos, 1, NULL, &err) == NULL && err.status == OKV_ERR_POSITION &&
              contains(err.message, "7"),
          "skip past length: %s", err.message);
    pos[0] = -3;
    CHECK(okv_step_begin(s.cache, pos, 1, NULL, &err) == NULL && err.status == OKV_ERR_POSITION &&
              contains(err.message, "-3"),
          "negative: %s", err.message);
    pos[0] = 6; pos[1] = 8;
    CHECK(okv_step_begin(s.cache, pos, 2, NULL, &err) == NULL && err.status == OKV_ERR_POSITION &&
              contains(err.message, "8"),
          "not consecutive: %s", err.message);
    pos[0] = 6; pos[1] = 6;
    CHECK(okv_step_begin(s.cache, pos, 2, NULL, &err) == NULL && err.status == OKV_ERR_POSITION,
          "repeated position");
    CHECK(okv_cache_length(s.cache) == len && okv_cache_generation(s.cache) == gen &&
              okv_cache_rows(s.cache, 0) == rows,
          "a refused step changed the cache");

    /* Past the capacity. */
    for (int32_t p = 6; p < 30; p++) CHECK_STATUS(seq_step(&s, p, 1, &err), OKV_OK, err);
    for (int i = 0; i < 3; i++) pos[i] = 30 + i;
    CHECK(okv_step_begin(s.cache, pos, 3, NULL, &err) == NULL && err.status == OKV_ERR_POSITION &&
              contains(err.message, "33"),
          "past capacity: %s", err.message);
    CHECK_STATUS(seq_step(&s, 30, 2, &err), OKV_OK, err);
    CHECK(okv_cache_rows(s.cache, 0) == 32, "capped rows %d", okv_cache_rows(s.cache, 0));
    CHECK(s.max_err < TOL, "max err %g", s.max_err);
    seq_free(&s);
}

/* A ring of window 4 and max_write 2 holds 5 rows; after writing 0..19 a
 * query at pos needs pos-3.., and rows still hold 15..19, so pos >= 18. */
static void rewind_checks(void) {
    seqref s;
    if (!make(&s, 64, 0, 2)) return;
    okv_error err;
    for (int32_t p = 0; p < 20; p += 2) CHECK_STATUS(seq_step(&s, p, 2, &err), OKV_OK, err);
    CHECK(okv_cache_can_rewind(s.cache, 0), "0 always");
    CHECK(!okv_cache_can_rewind(s.cache, 17), "17 is gone from the ring");
    CHECK(okv_cache_can_rewind(s.cache, 18) && okv_cache_can_rewind(s.cache, 20), "18..20 held");
    CHECK(!okv_cache_can_rewind(s.cache, 21) && !okv_cache_can_rewind(s.cache, -1), "outside");
    CHECK_STATUS(okv_cache_rewind(s.cache, 17, &err), OKV_ERR_POSITION, err);
    CHECK(contains(err.message, "17"), "message: %s", err.message);
    CHECK(okv_cache_length(s.cache) == 20, "refused rewind changed length");
    int32_t pos[2] = {16, 17};
    CHECK(okv_step_begin(s.cache, pos, 2, NULL, &err) == NULL && err.status == OKV_ERR_POSITION,
          "re-run from a position the ring lost");

    /* Continue from a rewind: the rewound positions are replaced. */
    CHECK_STATUS(okv_cache_rewind(s.cache, 18, &err), OKV_OK, err);
    s.length = 18;
    CHECK(okv_cache_length(s.cache) == 18, "length after rewind");
    for (int32_t p = 18; p < 30; p++) CHECK_STATUS(seq_step(&s, p, 1, &err), OKV_OK, err);
    /* Re-running a step rewinds: start 28 < length 30, length becomes 30 again
     * at 28+2, and 29 then continues. */
    CHECK_STATUS(seq_step(&s, 28, 2, &err), OKV_OK, err);
    CHECK(okv_cache_length(s.cache) == 30, "after re-run %d", okv_cache_length(s.cache));
    CHECK_STATUS(seq_step(&s, 29, 1, &err), OKV_OK, err);
    CHECK(okv_cache_length(s.cache) == 30, "a re-run shortens to start+n: %d", okv_cache_length(s.cache));

    /* Clear: everything forgotten, replay from empty matches the reference. */
    CHECK_STATUS(okv_cache_clear(s.cache, &err), OKV_OK, err);
    s.length = 0;
    CHECK(okv_cache_length(s.cache) == 0, "clear");
    CHECK(!okv_cache_can_rewind(s.cache, 1) && okv_cache_can_rewind(s.cache, 0), "after clear");
    for (int32_t p = 0; p < 12; p += 2) CHECK_STATUS(seq_step(&s, p, 2, &err), OKV_OK, err);
    CHECK(okv_cache_can_rewind(s.cache, 10) && !okv_cache_can_rewind(s.cache, 9),
          "clear must forget the old high water");
    CHECK(s.max_err < TOL, "max err %g", s.max_err);
    seq_free(&s);
}

static int fail_budget;
static void *failing_alloc(void *user, size_t bytes) {
    (void)user;
    if (fail_budget-- <= 0) return NULL;
    return malloc(bytes);
}

/* Failures before a write leave everything as it was; after a write the
 * length drops to the step's start. */
static void failure_checks(void) {
    seqref s;
    if (!make(&s, 64, 1, 4)) return;
    okv_error err;
    CHECK_STATUS(seq_step(&s, 0, 3, &err), OKV_OK, err);
    const int32_t rows = okv_cache_rows(s.cache, 0);
    int32_t pos[4] = {3, 4, 5, 6};
    float q[4 * 4 * 8] = {0}, k[4 * 2 * 8] = {0}, o[4 * 4 * 8];

    /* Bad layer, bad head count, NULL, unknown kv type: refused, no write, commit refuses. */
    okv_step *st = okv_step_begin(s.cache, pos, 1, NULL, &err);
    CHECK(st != NULL, "begin: %s", err.message);
    CHECK_STATUS(okv_update_and_attend(st, 2, q, 4, k, k, OKV_F32, 1, o, &err), OKV_ERR_INVALID, err);
    CHECK_STATUS(okv_update_and_attend(st, 0, q, 3, k, k, OKV_F32, 1, o, &err), OKV_ERR_INVALID, err);
    CHECK(contains(err.message, "3"), "names the head count: %s", err.message);
    CHECK_STATUS(okv_update_and_attend(st, 0, NULL, 4, k, k, OKV_F32, 1, o, &err), OKV_ERR_INVALID, err);
    CHECK_STATUS(okv_update_and_attend(st, 0, q, 4, k, k, (okv_dtype)7, 1, o, &err), OKV_ERR_INVALID, err);
    CHECK_STATUS(okv_step_commit(st, &err), OKV_ERR_INVALID, err);
    okv_step_abort(st);
    CHECK(okv_cache_length(s.cache) == 3 && okv_cache_rows(s.cache, 0) == rows, "untouched");

    /* Not every layer attended: commit refuses, the step stays open. */
    st = okv_step_begin(s.cache, pos, 1, NULL, &err);
    CHECK_STATUS(seq_attend(&s, st, 0, 3, 1, &err), OKV_OK, err);
    CHECK_STATUS(okv_step_commit(st, &err), OKV_ERR_INVALID, err);
    CHECK(contains(err.message, "1"), "names the layer: %s", err.message);
    /* A layer twice is refused too. */
    CHECK_STATUS(okv_update_and_attend(st, 0, q, 4, k, k, OKV_F32, 1, o, &err), OKV_ERR_INVALID, err);
    okv_step_abort(st); /* after a write: length := min(length, start) = 3 */
    CHECK(okv_cache_length(s.cache) == 3, "abort after write at the end: %d", okv_cache_length(s.cache));

    /* An aborted re-run that wrote drops the length to its start. */
    CHECK_STATUS(seq_step(&s, 3, 3, &err), OKV_OK, err);
    int32_t rerun[2] = {4, 5};
    st = okv_step_begin(s.cache, rerun, 2, NULL, &err);
    CHECK_STATUS(seq_attend(&s, st, 1, 4, 2, &err), OKV_OK, err);
    okv_step_abort(st);
    s.length = 4;
    CHECK(okv_cache_length(s.cache) == 4, "aborted re-run: length %d, want 4", okv_cache_length(s.cache));
    CHECK_STATUS(seq_step(&s, 4, 2, &err), OKV_OK, err);

    /* An allocation failure while growing leaves length, rows, generation and
     * contents as they were; the next try grows. */
    const int32_t len = okv_cache_length(s.cache), rows_before = okv_cache_rows(s.cache, 0);
    const uint64_t gen_before = okv_cache_generation(s.cache);
    okv_cache_set_alloc_hook(s.cache, failing_alloc, NULL);
    int32_t grow_pos[4] = {6, 7, 8, 9};
    fail_budget = 0;
    st = okv_step_begin(s.cache, grow_pos, 4, NULL, &err);
    CHECK(st == NULL && err.status == OKV_ERR_NOMEM, "injected failure not reported");
    if (st) okv_step_abort(st);
    fail_budget = 1; /* K succeeds, V fails */
    st = okv_step_begin(s.cache, grow_pos, 4, NULL, &err);
    CHECK(st == NULL && err.status == OKV_ERR_NOMEM, "second injected failure not reported");
    CHECK(okv_cache_length(s.cache) == len && okv_cache_rows(s.cache, 0) == rows_before &&
              okv_cache_generation(s.cache) == gen_before,
          "failed growth changed the cache");
    okv_cache_set_alloc_hook(s.cache, NULL, NULL);
    CHECK_STATUS(seq_step(&s, 6, 4, &err), OKV_OK, err); /* contents intact: matches reference */
    CHECK(okv_cache_rows(s.cache, 0) > rows_before, "grew after the failure");

    /* Growth is kept even when the step is aborted before writing. */
    for (int32_t p = 10; p < 16; p += 2) CHECK_STATUS(seq_step(&s, p, 2, &err), OKV_OK, err);
    int32_t p16[4] = {16, 17, 18, 19};
    const int32_t r16 = okv_cache_rows(s.cache, 0);
    const uint64_t g16 = okv_cache_generation(s.cache);
    st = okv_step_begin(s.cache, p16, 4, NULL, &err);
    okv_step_abort(st);
    CHECK(r16 == 16 && okv_cache_rows(s.cache, 0) == 32 && okv_cache_generation(s.cache) != g16,
          "growth kept: %d -> %d", r16, okv_cache_rows(s.cache, 0));
    CHECK(okv_cache_length(s.cache) == 16, "abort without write keeps length");
    CHECK_STATUS(seq_step(&s, 16, 4, &err), OKV_OK, err);
    CHECK(s.max_err < TOL, "max err %g", s.max_err);
    seq_free(&s);
}

/* Abort without a write keeps can_rewind as it was; abort after writing
 * counts the written rows against the rings. */
static void abort_history(void) {
    seqref s;
    if (!make(&s, 64, 0, 2)) return;
    okv_error err;
    for (int32_t p = 0; p < 10; p += 2) CHECK_STATUS(seq_step(&s, p, 2, &err), OKV_OK, err);
    /* ring: window 4, 5 rows, high water 10: pos >= 8 rewindable (need pos-3 >= 5). */
    CHECK(okv_cache_can_rewind(s.cache, 8) && !okv_cache_can_rewind(s.cache, 7), "before");
    int32_t pos[2] = {10, 11};
    okv_step *st = okv_step_begin(s.cache, pos, 2, NULL, &err);
    okv_step_abort(st);
    CHECK(okv_cache_can_rewind(s.cache, 8), "abort without write changed can_rewind");
    st = okv_step_begin(s.cache, pos, 2, NULL, &err);
    CHECK_STATUS(seq_attend(&s, st, 1, 10, 2, &err), OKV_OK, err); /* ring layer written */
    okv_step_abort(st);
    CHECK(okv_cache_length(s.cache) == 10, "length %d", okv_cache_length(s.cache));
    /* high water 12: needs pos-3 >= 7, so 10 only. */
    CHECK(!okv_cache_can_rewind(s.cache, 9) && okv_cache_can_rewind(s.cache, 10),
          "aborted writes must count against the ring");
    seq_free(&s);
}

static void busy_and_refs(void) {
    seqref s;
    if (!make(&s, 16, 4, 4)) return;
    okv_error err;
    int32_t pos[1] = {0};
    okv_step *st = okv_step_begin(s.cache, pos, 1, NULL, &err);
    CHECK(okv_step_begin(s.cache, pos, 1, NULL, &err) == NULL && err.status == OKV_ERR_BUSY, "second step");
    CHECK_STATUS(okv_cache_rewind(s.cache, 0, &err), OKV_ERR_BUSY, err);
    CHECK_STATUS(okv_cache_clear(s.cache, &err), OKV_ERR_BUSY, err);
    /* The step keeps the cache alive after its owner lets go. */
    okv_cache *c = s.cache;
    okv_cache_retain(c);
    okv_cache_release(c);
    okv_cache_release(s.cache);
    s.cache = NULL;
    CHECK_STATUS(seq_attend(&s, st, 0, 0, 1, &err), OKV_OK, err);
    CHECK_STATUS(seq_attend(&s, st, 1, 0, 1, &err), OKV_OK, err);
    CHECK_STATUS(okv_step_commit(st, &err), OKV_OK, err);
    CHECK(s.max_err < TOL, "max err %g", s.max_err);
    seq_free(&s);
    CHECK_STATUS(okv_step_commit(NULL, &err), OKV_ERR_INVALID, err);
    okv_step_abort(NULL);
}

static void config_errors(void) {
    okv_error err;
    okv_cache_config ok = {.capacity = 8, .initial_capacity = 2, .max_write = 2, .dtype = OKV_F32};
    okv_layer_geometry good = {1, 4, 0, 0};
    struct { okv_layer_geometry g; okv_cache_config cfg; int32_t n; const char *what; } bad[] = {
        {{0, 4, 0, 0}, ok, 1, "n_kv_heads"},
        {{1, 0, 0, 0}, ok, 1, "head_dim"},
        {{1, 513, 0, 0}, ok, 1, "head_dim"},
        {{1, 4, -1, 0}, ok, 1, "window"},
        {good, {.capacity = 0, .max_write = 1}, 1, "capacity"},
        {good, {.capacity = 8, .max_write = 0}, 1, "max_write"},
        {good, {.capacity = 8, .max_write = 1, .dtype = (okv_dtype)5}, 1, "dtype"},
        {good, ok, 0, "n_layers"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        okv_cache *c = okv_cache_create(&bad[i].g, bad[i].n, &bad[i].cfg, &err);
        CHECK(c == NULL && err.status == OKV_ERR_INVALID && contains(err.message, bad[i].what),
              "case %zu (%s): %s", i, bad[i].what, err.message);
        okv_cache_release(c);
    }
    CHECK(okv_cache_create(NULL, 1, &ok, &err) == NULL && err.status == OKV_ERR_INVALID, "NULL layers");
    CHECK(okv_cache_create(&good, 1, NULL, &err) == NULL && err.status == OKV_ERR_INVALID, "NULL cfg");
    /* initial_capacity is clamped; a huge window is clamped to the capacity. */
    okv_cache_config big = {.capacity = 8, .initial_capacity = 100, .max_write = 2, .dtype = OKV_F16};
    okv_layer_geometry two[2] = {{1, 4, 0, 0}, {2, 4, 1000, 0}};
    okv_cache *c = okv_cache_create(two, 2, &big, &err);
    CHECK(c && okv_cache_rows(c, 0) == 8 && okv_cache_rows(c, 1) == 8, "clamps");
    CHECK(okv_cache_bytes(c) == 2 * (1 * 8 * 4 + 2 * 8 * 4) * 2, "bytes %zu", okv_cache_bytes(c));
    CHECK(okv_cache_rows(c, 2) == -1 && okv_cache_rows(NULL, 0) == -1, "bad layer rows");
    okv_cache_release(c);
    /* A window smaller than capacity: window + max_write - 1 rows, from the start. */
    okv_layer_geometry ring = {1, 4, 3, 0};
    okv_cache_config cfg = {.capacity = 100, .initial_capacity = 0, .max_write = 5, .dtype = OKV_F32};
    c = okv_cache_create(&ring, 1, &cfg, &err);
    CHECK(c && okv_cache_rows(c, 0) == 7, "ring rows %d", okv_cache_rows(c, 0));
    okv_cache_release(c);
}

static void registry_and_factory(void) {
    okv_error err;
    okv_layer_geometry g = {1, 4, 0, 0};
    okv_cache_config cfg = {.capacity = 8, .initial_capacity = 0, .max_write = 2, .dtype = OKV_F32};
    okv_factory *f = okv_factory_create();
    CHECK(okv_factory_build(f, "cpu", "single", &g, 1, &cfg, &err) == NULL && err.status == OKV_ERR_NOT_FOUND,
          "factory starts empty");
    CHECK_STATUS(okv_register_cpu_cache_builders(f, &err), OKV_OK, err);
    CHECK_STATUS(okv_register_cpu_cache_builders(f, &err), OKV_ERR_INVALID, err);
    CHECK(okv_factory_build(f, "cpu", "paged", &g, 1, &cfg, &err) == NULL &&
              err.status == OKV_ERR_NOT_FOUND && contains(err.message, "paged"),
          "unknown kind: %s", err.message);
    okv_layer_geometry bad = {1, 600, 0, 0};
    CHECK(okv_factory_build(f, "cpu", "single", &bad, 1, &cfg, &err) == NULL &&
              err.status == OKV_ERR_INVALID,
          "builder errors pass through");
    okv_cache *c = okv_factory_build(f, "cpu", "single", &g, 1, &cfg, &err);
    CHECK(c != NULL, "build: %s", err.message);

    okv_registry *r = okv_registry_create();
    CHECK_STATUS(okv_registry_install(r, "seq0", c, &err), OKV_OK, err);
    CHECK_STATUS(okv_registry_install(r, "seq0", c, &err), OKV_ERR_INVALID, err);
    CHECK(okv_registry_get(r, "seq0") == c && okv_registry_get(r, "nope") == NULL, "get");
    CHECK_STATUS(okv_registry_remove(r, "nope", &err), OKV_ERR_NOT_FOUND, err);
    CHECK_STATUS(okv_registry_install(r, "seq1", c, &err), OKV_OK, err);
    CHECK_STATUS(okv_registry_remove(r, "seq0", &err), OKV_OK, err);
    CHECK(okv_registry_get(r, "seq0") == NULL && okv_registry_get(r, "seq1") == c, "after remove");
    okv_cache_release(c); /* the registry still holds it */
    CHECK(okv_cache_length(okv_registry_get(r, "seq1")) == 0, "registry kept its reference");
    okv_registry_free(r); /* releases; ASan reports a leak or a double free */
    okv_factory_free(f);
    CHECK(strcmp(okv_status_name(OKV_ERR_BUSY), "OKV_ERR_BUSY") == 0, "status names");
}

int main(void) {
    position_checks();
    rewind_checks();
    failure_checks();
    abort_history();
    busy_and_refs();
    config_errors();
    registry_and_factory();
    return check_done();
}
