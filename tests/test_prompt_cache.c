/* Saved sequences (offkv/prompt_cache.h).
 *
 *  - Cache level (no shared data needed): save and load round trips of
 *    flat and ring layers, f16 and f32: the same rows, length, high water
 *    and rewind limits, and a loaded cache attends as the saved one would.
 *  - Model level, every shared family: save at the interesting points
 *    (empty, mid-prefill, after a ring wrap, after a rewind), load into
 *    another context's cache, continue; the logits are bit-identical to an
 *    uninterrupted run with the same steps.
 *  - Refusals: truncated at many points, extra bytes, each header field
 *    changed (magic, version, fingerprint, dtype, layers, capacity,
 *    max_write, length, a layer's geometry), a flipped data byte or token,
 *    another model, another cache config, a missing file.  Each is refused
 *    with a message naming what differs, and the cache it was loaded into
 *    is exactly as before: rows, length, limits, and its next logits.
 *  - Odd paths and types: a FIFO or a folder is refused at once (the load
 *    must not block waiting for a writer), and a file of another storage
 *    type names both types (q8_0 included). */
#include <signal.h>
#include <stdint.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "offkv/prompt_cache.h"
#include "seqref.h"

static char dir[4096];

static void path_in(char *buf, size_t cap, const char *name) { snprintf(buf, cap, "%s/%s", dir, name); }

static void cache_level(okv_dtype dtype) {
    const okv_layer_geometry geo[3] = {{.n_kv_heads = 2, .head_dim = 8, .window = 0},
                                       {.n_kv_heads = 1, .head_dim = 16, .window = 6},
                                       {.n_kv_heads = 2, .head_dim = 8, .window = 3}};
    const int32_t heads[3] = {4, 2, 2};
    const okv_cache_config cfg = {.capacity = 128, .initial_capacity = 4, .max_write = 4, .dtype = dtype};
    const int32_t points[] = {0, 3, 11, 30, 57, 8};
    const double tol = dtype == OKV_F16 ? 2e-3 : 1e-5;
    char file[4200];
    path_in(file, sizeof file, "cache.seq");
    for (size_t i = 0; i < sizeof points / sizeof points[0]; i++) {
        okv_error err;
        seqref a;
        CHECK(seq_init(&a, geo, heads, 3, &cfg, OKV_F32, 300 + i, &err), "init: %s", err.message);
        CHECK(seq_steps_to(&a, points[i], 3, &err), "to %d: %s", (int)points[i], err.message);
        if (points[i] == 57) {
            CHECK_STATUS(okv_cache_rewind(a.cache, 55, &err), OKV_OK, err);
            a.length = 55;
        }
        if (points[i] == 8) { /* wrapped rings, then a shorter history from 0: its ring rows are saved */
            CHECK(seq_steps_to(&a, 40, 4, &err), "to 40: %s", err.message);
            CHECK_STATUS(okv_cache_rewind(a.cache, 0, &err), OKV_OK, err);
            a.length = 0;
            CHECK(seq_steps_to(&a, 8, 3, &err), "refill: %s", err.message);
        }
        CHECK_STATUS(okv_cache_save(a.cache, file, 0x1234, NULL, 0, &err), OKV_OK, err);
        /* Load over a cache that already holds something else. */
        seqref b;
        CHECK(seq_init(&b, geo, heads, 3, &cfg, OKV_F32, 700 + i, &err), "init: %s", err.message);
        CHECK(seq_steps_to(&b, 9, 4, &err), "b: %s", err.message);
        int32_t nt = -1;
        CHECK_STATUS(okv_cache_load(b.cache, file, 0x1234, NULL, 0, &nt, &err), OKV_OK, err);
        CHECK(nt == 0, "no tokens were saved, %d loaded", (int)nt);
        CHECK(seq_same_rows(a.cache, b.cache), "save at %d: loaded rows differ", (int)points[i]);
        CHECK(seq_same_rewind_limits(a.cache, b.cache), "save at %d: rewind limits differ", (int)points[i]);
        /* b's reference becomes a's history; then both continue alike. */
        for (int32_t l = 0; l < 3; l++) {
            const size_t n = (size_t)cfg.capacity * geo[l].n_kv_heads * geo[l].head_dim * sizeof(float);
            memcpy(b.hist_k[l], a.hist_k[l], n);
            memcpy(b.hist_v[l], a.hist_v[l], n);
        }
        b.length = a.length;
        b.high_water = a.high_water;
        b.max_err = 0;
        CHECK(seq_steps_to(&b, b.length + 30, 3, &err) && b.max_err <= tol, "save at %d: continuing the loaded cache: %s, error %g",
              (int)points[i], err.message, b.max_err);
        seq_free(&a);
        seq_free(&b);
    }
}

/* ---- model level ---- */

static const char *shared;

static okv_model *load(const char *name, const char *window) {
    char path[4096];
    snprintf(path, sizeof path, "%s/models/%s.gguf", shared, name);
    const char *opts[] = {"sliding_window", window, NULL};
    okv_error err;
    okv_model *m = okv_model_load(path, window ? opts : NULL, &err);
    CHECK(m != NULL, "load %s: %s", path, err.message);
    return m;
}

enum { MW = 5, T = 70 };

/* Issue 15 (items 2 and 11): what a hostile user passes as a prompt cache. */
static void odd_files(void) {
    const okv_layer_geometry geo[1] = {{.n_kv_heads = 1, .head_dim = 32, .window = 0}};
    okv_cache_config cfg = {.capacity = 64, .initial_capacity = 64, .max_write = 4, .dtype = OKV_F16};
    okv_error err;
    okv_cache *f16 = okv_cache_create(geo, 1, &cfg, &err);
    cfg.dtype = OKV_Q8_0;
    okv_cache *q8 = okv_cache_create(geo, 1, &cfg, &err);
    CHECK(f16 && q8, "create: %s", err.message);
    if (!f16 || !q8) goto out;
    char f16_file[4200], q8_file[4200], fifo[4200];
    path_in(f16_file, sizeof f16_file, "f16.seq");
    path_in(q8_file, sizeof q8_file, "q8.seq");
    path_in(fifo, sizeof fifo, "fifo.seq");
    CHECK_STATUS(okv_cache_save(f16, f16_file, 7, NULL, 0, &err), OKV_OK, err);
    CHECK_STATUS(okv_cache_save(q8, q8_file, 7, NULL, 0, &err), OKV_OK, err);
    CHECK_STATUS(okv_cache_load(q8, f16_file, 7, NULL, 0, NULL, &err), OKV_ERR_INVALID, err);
    CHECK(strstr(err.message, "stored as f16 (type 1), this cache stores q8_0"), "message: %s", err.message);
    CHECK_STATUS(okv_cache_load(f16, q8_file, 7, NULL, 0, NULL, &err), OKV_ERR_INVALID, err);
    CHECK(strstr(err.message, "stored as q8_0 (type 2), this cache stores f16"), "message: %s", err.message);
    /* A FIFO: an open for reading would wait for a writer forever; the
     * alarm's default action ends the test (a failure) if it does. */
    CHECK(mkfifo(fifo, 0600) == 0, "mkfifo %s", fifo);
    alarm(30);
    CHECK_STATUS(okv_cache_load(f16, fifo, 7, NULL, 0, NULL, &err), OKV_ERR_IO, err);
    alarm(0);
    CHECK(strstr(err.message, "not a regular file") && strstr(err.message, "fifo.seq"), "message: %s", err.message);
    CHECK_STATUS(okv_cache_load(f16, dir, 7, NULL, 0, NULL, &err), OKV_ERR_IO, err);
    CHECK(strstr(err.message, "not a regular file"), "message: %s", err.message);
    remove(fifo);
out:
    okv_cache_release(f16);
    okv_cache_release(q8);
}

static okv_context *context(okv_model *m, int32_t max_write) {
    char mw[16];
    snprintf(mw, sizeof mw, "%d", (int)max_write);
    const char *opts[] = {"max_write", mw, "capacity", "128", "initial_capacity", "8", "n_threads", "2", NULL};
    okv_error err;
    okv_context *c = okv_context_create(m, opts, NULL, &err);
    CHECK(c != NULL, "context: %s", err.message);
    return c;
}

/* Evaluates toks[from..to) in steps of MW; logits (to - from rows) if not NULL. */
static bool run(okv_context *ctx, const int32_t *toks, int32_t from, int32_t to, float *logits) {
    const int32_t V = okv_model_n_vocab(okv_context_model(ctx));
    for (int32_t at = from; at < to; at += MW) {
        const int32_t n = to - at < MW ? to - at : MW;
        int32_t pos[MW];
        for (int32_t i = 0; i < n; i++) pos[i] = at + i;
        okv_error err;
        okv_status st = okv_context_eval(ctx, toks + at, pos, n, logits ? logits + (size_t)(at - from) * V : NULL, &err);
        CHECK_STATUS(st, OKV_OK, err);
        if (st) return false;
    }
    return true;
}

static void tokens(int32_t *t, int32_t n, uint64_t seed, int32_t V) {
    for (int32_t i = 0; i < n; i++) {
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        t[i] = 1 + (int32_t)((seed >> 33) % (uint64_t)(V - 1));
    }
}

static void model_case(const char *name, const char *window) {
    okv_model *m = load(name, window);
    if (!m) return;
    const int32_t V = okv_model_n_vocab(m);
    const uint64_t fp = okv_model_fingerprint(m);
    int32_t x[T], alt[T];
    tokens(x, T, 11, V);
    tokens(alt, T, 12, V);
    float *got = malloc(sizeof(float) * V * T), *ref = malloc(sizeof(float) * V * T);
    char file[4200];
    path_in(file, sizeof file, "model.seq");
    /* save point, and for the rewind case the length before rewinding */
    const struct { int32_t at, before; const char *what; } pts[] = {
        {0, 0, "empty"}, {13, 0, "mid-prefill"}, {40, 0, "after ring wraps"}, {46, 50, "after a rewind"}};
    for (size_t i = 0; i < sizeof pts / sizeof pts[0]; i++) {
        okv_error err;
        const int32_t at = pts[i].at, before = pts[i].before;
        /* Saved: run to the point (past it and back for the rewind case), save. */
        okv_context *a = context(m, MW);
        run(a, x, 0, before ? before : at, NULL);
        if (before) CHECK_STATUS(okv_cache_rewind(okv_context_cache(a), at, &err), OKV_OK, err);
        int32_t saved_toks[T];
        memcpy(saved_toks, x, sizeof saved_toks);
        CHECK_STATUS(okv_cache_save(okv_context_cache(a), file, fp, x, at, &err), OKV_OK, err);
        /* Loaded into another context, which then continues with other tokens. */
        okv_context *b = context(m, MW);
        run(b, alt, 0, 17, NULL); /* something to replace */
        int32_t back[T], nb = -1;
        CHECK_STATUS(okv_cache_load(okv_context_cache(b), file, fp, back, T, &nb, &err), OKV_OK, err);
        CHECK(nb == at && memcmp(back, x, sizeof(int32_t) * (size_t)at) == 0, "%s %s: tokens back: %d", name,
              pts[i].what, (int)nb);
        CHECK(seq_same_rows(okv_context_cache(a), okv_context_cache(b)), "%s %s: rows", name, pts[i].what);
        CHECK(seq_same_rewind_limits(okv_context_cache(a), okv_context_cache(b)), "%s %s: rewind limits", name, pts[i].what);
        int32_t cont[T];
        memcpy(cont, x, sizeof cont);
        memcpy(cont + at, alt + at, sizeof(int32_t) * (size_t)(T - at));
        run(b, cont, at, T, got);
        /* Uninterrupted: the same steps in one context. */
        okv_context *c = context(m, MW);
        run(c, x, 0, before ? before : at, NULL);
        if (before) okv_cache_rewind(okv_context_cache(c), at, &err);
        run(c, cont, at, T, ref);
        CHECK(memcmp(got, ref, sizeof(float) * V * (size_t)(T - at)) == 0,
              "%s%s saved %s (%d): continuing the loaded cache is not bit-identical", name, window ? "+w" : "",
              pts[i].what, (int)at);
        okv_context_free(a);
        okv_context_free(b);
        okv_context_free(c);
    }
    printf("%-18s%s saved empty, mid-prefill, after ring wraps, after a rewind: loaded and continued bit-identically\n",
           name, window ? "+w8" : "   ");
    free(got);
    free(ref);
    okv_model_free(m);
}

/* ---- refusals ---- */

static void *read_whole(const char *path, size_t *size) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    void *buf = malloc((size_t)n + 16);
    if (fread(buf, 1, (size_t)n, f) != (size_t)n) n = 0;
    fclose(f);
    *size = (size_t)n;
    return buf;
}

static void write_whole(const char *path, const void *data, size_t n) {
    FILE *f = fopen(path, "wb");
    if (f) {
        if (n) fwrite(data, 1, n, f);
        fclose(f);
    }
}

static void put32(uint8_t *p, uint32_t v) {
    for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}

/* Rewrites the trailing checksum (FNV-1a 64 of every byte before it, as
 * the format says), so an edited file reads as one a writer made. */
static void reseal(uint8_t *file, size_t size) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i + 8 < size; i++) h = (h ^ file[i]) * 0x100000001b3ull;
    for (int i = 0; i < 8; i++) file[size - 8 + i] = (uint8_t)(h >> (8 * i));
}

/* Loads path into ctx's cache expecting a refusal with status want and a
 * message containing needle; the cache must be exactly as before, which
 * twin (a context that ran the same tokens) witnesses: same rows, and the same logits
 * for the next token. */
static void refused(okv_context *ctx, okv_context *twin, const char *path, uint64_t fp, okv_status want,
                    const char *needle, const char *what) {
    okv_error err;
    int32_t toks[256], n = -7;
    okv_status st = okv_cache_load(okv_context_cache(ctx), path, fp, toks, 256, &n, &err);
    CHECK(st == want, "%s: status %s, want %s (%s)", what, okv_status_name(st), okv_status_name(want), err.message);
    CHECK(strstr(err.message, needle) != NULL, "%s: message lacks '%s': %s", what, needle, err.message);
    CHECK(n == -7, "%s: n_tokens written on failure", what);
    CHECK(seq_same_rows(okv_context_cache(ctx), okv_context_cache(twin)) &&
              seq_same_rewind_limits(okv_context_cache(ctx), okv_context_cache(twin)),
          "%s: the refused load changed the cache", what);
}

static void refusals(void) {
    okv_model *m = load("tiny-gemma3", NULL), *other = load("tiny-llama", NULL);
    if (!m || !other) goto out;
    const int32_t V = okv_model_n_vocab(m);
    const uint64_t fp = okv_model_fingerprint(m);
    CHECK(fp != okv_model_fingerprint(other), "two models, one fingerprint");
    okv_model *again = load("tiny-gemma3", NULL), *windowed = load("stories260K", "8"), *stories = load("stories260K", NULL);
    CHECK(again && fp == okv_model_fingerprint(again), "the same file loaded twice has two fingerprints");
    CHECK(windowed && stories && okv_model_fingerprint(windowed) != okv_model_fingerprint(stories),
          "a sliding_window option does not change the fingerprint");
    okv_model_free(again);
    okv_model_free(windowed);
    okv_model_free(stories);
    int32_t x[T], y[T];
    tokens(x, T, 21, V);
    tokens(y, T, 22, V);
    char good[4200], bad[4200];
    path_in(good, sizeof good, "good.seq");
    path_in(bad, sizeof bad, "bad.seq");
    okv_error err;
    okv_context *src = context(m, MW);
    run(src, x, 0, 40, NULL);
    CHECK_STATUS(okv_cache_save(okv_context_cache(src), good, fp, x, 40, &err), OKV_OK, err);
    /* The victim holds another sequence; its twin is a fork of it. */
    okv_context *ctx = context(m, MW), *twin = context(m, MW);
    run(ctx, y, 0, 23, NULL);
    run(twin, y, 0, 23, NULL);
    size_t size = 0;
    uint8_t *file = read_whole(good, &size), *buf = malloc(size + 16);
    const size_t head = 48, entry = 28, table = head + entry * (size_t)okv_model_n_layers(m), toks_end = table + 4 * 40;
    /* Truncated anywhere. */
    const size_t cuts[] = {0, 5, 8, 47, 48, 60, table - 1, table, toks_end - 2, toks_end + 1, (size + toks_end) / 2,
                           size - 9, size - 1};
    for (size_t i = 0; i < sizeof cuts / sizeof cuts[0]; i++) {
        write_whole(bad, file, cuts[i]);
        char what[64];
        snprintf(what, sizeof what, "truncated at %zu of %zu", cuts[i], size);
        refused(ctx, twin, bad, fp, OKV_ERR_FORMAT, "truncated", what);
    }
    memcpy(buf, file, size);
    buf[size] = 0;
    write_whole(bad, buf, size + 1);
    refused(ctx, twin, bad, fp, OKV_ERR_FORMAT, "extra bytes", "one byte too many");
    /* Header fields, one at a time.  sealed: the checksum is rewritten, as
     * for a file saved by another model or cache, which names the field;
     * else the same edit is damage, named as such. */
    const struct { size_t off; uint32_t value; bool sealed; okv_status st; const char *needle; } fields[] = {
        {0, 0x4b464f58, 0, OKV_ERR_FORMAT, "magic"},
        {8, 2, 0, OKV_ERR_UNSUPPORTED, "version 2"},
        {12, 0, 1, OKV_ERR_INVALID, "stored as f32"},
        {12, 2, 1, OKV_ERR_INVALID, "stored as q8_0 (type 2)"},
        {12, 9, 1, OKV_ERR_INVALID, "stored as unknown (type 9)"},
        {16, 0xdeadbeef, 1, OKV_ERR_INVALID, "another model"},
        {24, 5, 1, OKV_ERR_INVALID, "layers 5"},
        {28, 4096, 1, OKV_ERR_INVALID, "capacity 4096"},
        {32, 4, 1, OKV_ERR_INVALID, "max_write 4"},
        {36, 39, 0, OKV_ERR_FORMAT, "tokens for a sequence of length 39"},
        {36, 41, 0, OKV_ERR_FORMAT, "length 41 and high water 40"},
        {44, 0, 0, OKV_ERR_FORMAT, "extra bytes"}, /* no tokens: 160 bytes too many */
        {head + 4, 32, 1, OKV_ERR_INVALID, "layer 0 head_dim 32"},
        {head + 8, 0, 1, OKV_ERR_INVALID, "layer 0 window 0"},
        {head + entry + 12, 77, 0, OKV_ERR_FORMAT, "layer 1: 77 rows"},
        {head + entry + 12, 0x80000007, 1, OKV_ERR_FORMAT, "layer 1: -2147483641 rows"}, /* overflowed once */
        {head + entry + 16, 0x8000000d, 1, OKV_ERR_FORMAT, "rows from position -2147483635"},
        {head + 24, 1, 1, OKV_ERR_INVALID, "layer 0 kv_from 1"},
        {12, 0, 0, OKV_ERR_FORMAT, "corrupt"},
        {16, 0xdeadbeef, 0, OKV_ERR_FORMAT, "corrupt"},
        {28, 4096, 0, OKV_ERR_FORMAT, "corrupt"},
        {head + 8, 0, 0, OKV_ERR_FORMAT, "corrupt"},
        {table + 8, 3, 0, OKV_ERR_FORMAT, "checksum"},         /* a token */
        {toks_end + 100, 0x3c003c00, 0, OKV_ERR_FORMAT, "checksum"}, /* K rows */
        {size - 20, 0x12345678, 0, OKV_ERR_FORMAT, "checksum"},      /* V rows */
        {size - 8, 0, 0, OKV_ERR_FORMAT, "checksum"},                /* the checksum itself */
    };
    for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++) {
        memcpy(buf, file, size);
        put32(buf + fields[i].off, fields[i].value);
        if (fields[i].sealed) reseal(buf, size);
        write_whole(bad, buf, size);
        char what[64];
        snprintf(what, sizeof what, "byte %zu set to %#x%s", fields[i].off, (unsigned)fields[i].value,
                 fields[i].sealed ? " (sealed)" : "");
        refused(ctx, twin, bad, fp, fields[i].st, fields[i].needle, what);
    }
    /* A consistent, sealed file whose high water is past what its rings
     * hold for its length: loaded, the next query would read rows the file
     * never stored. */
    {
        memcpy(buf, file, size);
        const uint32_t hw = 40 + 20;
        put32(buf + 40, hw);
        for (int32_t l = 0; l < okv_model_n_layers(m); l++) {
            const uint8_t *e = buf + head + entry * (size_t)l;
            const uint32_t win = (uint32_t)e[8] | (uint32_t)e[9] << 8, rows = (uint32_t)e[12] | (uint32_t)e[13] << 8;
            if (win > 0) put32(buf + head + entry * (size_t)l + 16, hw - rows);
        }
        reseal(buf, size);
        write_whole(bad, buf, size);
        refused(ctx, twin, bad, fp, OKV_ERR_FORMAT, "lacks the window", "high water 60 for length 40");
    }
    /* Another model's fingerprint; a cache of another config; no file. */
    refused(ctx, twin, good, okv_model_fingerprint(other), OKV_ERR_INVALID, "another model", "another model");
    okv_context *other_mw = context(m, MW + 1);
    okv_context *other_twin = context(m, MW + 1);
    refused(other_mw, other_twin, good, fp, OKV_ERR_INVALID, "max_write 5, this one has 6", "another max_write");
    char none[4200];
    path_in(none, sizeof none, "no-such.seq");
    refused(ctx, twin, none, fp, OKV_ERR_IO, "no-such.seq", "a missing file");
    /* After all that, the victim still continues exactly as its twin. */
    float *a = malloc(sizeof(float) * V * 10), *b = malloc(sizeof(float) * V * 10);
    run(ctx, y, 23, 33, a);
    run(twin, y, 23, 33, b);
    CHECK(memcmp(a, b, sizeof(float) * V * 10) == 0, "after refused loads the cache's logits changed");
    /* Saving refuses nonsense and leaves an existing file whole when it cannot write. */
    CHECK_STATUS(okv_cache_save(okv_context_cache(ctx), good, fp, y, 5, &err), OKV_ERR_INVALID, err);
    CHECK(strstr(err.message, "5 tokens for a sequence of length 33"), "message: %s", err.message);
    size_t after = 0;
    uint8_t *again_bytes = read_whole(good, &after);
    CHECK(after == size && memcmp(again_bytes, file, size) == 0, "a refused save touched the file");
    free(again_bytes);
    CHECK_STATUS(okv_cache_save(okv_context_cache(ctx), "/nonexistent-dir/x.seq", fp, NULL, 0, &err), OKV_ERR_IO, err);
    okv_context_free(other_mw);
    okv_context_free(other_twin);
    okv_context_free(src);
    okv_context_free(ctx);
    okv_context_free(twin);
    free(a);
    free(b);
    free(file);
    free(buf);
out:
    okv_model_free(m);
    okv_model_free(other);
}

int main(void) {
    const char *b = getenv("OKV_BIN");
    snprintf(dir, sizeof dir, "%s/test-prompt-cache-XXXXXX", b ? b : "/tmp");
    if (!mkdtemp(dir)) {
        printf("cannot make a scratch folder %s\n", dir);
        return 1;
    }
    cache_level(OKV_F16);
    cache_level(OKV_F32);
    odd_files();
    shared = check_shared_dir();
    if (!shared) {
        printf("skipped (saved sequences of real models): ../shared not found\n");
    } else {
        model_case("stories260K", NULL);
        model_case("stories260K", "8");
        model_case("tiny-llama", NULL);
        model_case("tiny-gemma3", NULL);
        model_case("tiny-gemma3-allswa", NULL);
        model_case("tiny-muse-glimmer", NULL);
        model_case("tiny-qwen2", NULL);
        model_case("tiny-qwen3", NULL);
        model_case("tiny-smollm3", NULL);
        model_case("tiny-gemma2", NULL);
        model_case("tiny-phi3", NULL);
        refusals();
    }
    if (check_failed_ == 0) {
        char cmd[4300];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
        if (system(cmd) != 0) fprintf(stderr, "note: could not remove %s\n", dir);
    }
    return check_done();
}
