/* Loading models: the real files' metadata becomes the right cache
 * geometry, and damaged files (a weight of the wrong type, a wrong shape, a
 * missing tensor or key, an unknown architecture, a truncated file) are
 * clean errors that name the problem. */
#include "check.h"
#include "golden.h"
#include "offkv/offkv.h"

static const char *shared;

/* Writes data with one patch applied to a temporary file under build/. */
static const char *patched(const char *data, size_t size, const char *find, size_t find_len, size_t skip,
                           const void *bytes, size_t n) {
    static char path[256];
    snprintf(path, sizeof path, "test_model_load.tmp.gguf");
    const char *at = memmem(data, size, find, find_len);
    if (!at) return NULL;
    char *copy = malloc(size);
    memcpy(copy, data, size);
    memcpy(copy + (at - data) + skip, bytes, n);
    FILE *f = fopen(path, "wb");
    fwrite(copy, 1, size, f);
    fclose(f);
    free(copy);
    return path;
}

static void expect_error(const char *path, okv_status want, const char *needle, const char *what) {
    okv_error err = {0};
    okv_model *m = path ? okv_model_load(path, NULL, &err) : NULL;
    CHECK(path && !m && err.status == want && strstr(err.message, needle),
          "%s: got %s '%s', want %s naming '%s'", what, okv_status_name(err.status), err.message,
          okv_status_name(want), needle);
    okv_model_free(m);
}

/* What a load reported to its progress function. */
typedef struct seen_progress {
    char stages[4][16];
    int n_stages, calls, bad;
    uint64_t last_done[4], total[4];
} seen_progress;

static void on_progress(void *user, const char *stage, uint64_t done, uint64_t total) {
    seen_progress *s = user;
    s->calls++;
    if (s->n_stages == 0 || strcmp(s->stages[s->n_stages - 1], stage) != 0) {
        if (s->n_stages == 4) { s->bad++; return; }
        snprintf(s->stages[s->n_stages], sizeof s->stages[0], "%s", stage);
        s->last_done[s->n_stages] = 0;
        s->total[s->n_stages++] = total;
    }
    const int k = s->n_stages - 1;
    if (done < s->last_done[k] || done > total || total != s->total[k]) s->bad++;
    s->last_done[k] = done;
}

/* okv_model_load_progress: a "reading" stage over every tensor of the file
 * (all of them are the model's: a loader refuses unused ones), counted
 * here from the file itself, then "repacking" when matrices are copied;
 * each stage only grows and ends at its total. */
static void check_progress(void) {
    char path[1024];
    struct { const char *model; const char *repack; bool repacks; } cases[] = {
        {"tiny-llama256-q6_k", "on", true}, {"tiny-llama256-q6_k", "off", false}, {"tiny-gpt-oss-mx", "on", true},
        {"tiny-llama256-f32", "on", true}, /* copied as it is, into huge pages */
        {"tiny-llama256-f32", "off", false},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        snprintf(path, sizeof path, "%s/models/%s.gguf", shared, cases[i].model);
        okv_error err = {0};
        okv_gguf *g = okv_gguf_open(path, &err);
        CHECK(g != NULL, "%s: %s", cases[i].model, err.message);
        if (!g) continue;
        uint64_t file_bytes = 0;
        for (int64_t t = 0; t < okv_gguf_n_tensors(g); t++) file_bytes += okv_gguf_tensor_at(g, t)->n_bytes;
        okv_gguf_close(g);
        const char *opts[] = {"repack", cases[i].repack, NULL};
        seen_progress s = {0};
        okv_model *m = okv_model_load_progress(path, opts, on_progress, &s, &err);
        CHECK(m != NULL, "%s: %s", cases[i].model, err.message);
        const int want_stages = cases[i].repacks ? 2 : 1;
        CHECK(s.n_stages == want_stages && !s.bad && !strcmp(s.stages[0], "reading") &&
                  (want_stages == 1 || !strcmp(s.stages[1], "repacking")),
              "%s repack %s: %d stages (%s, %s), %d calls, %d out of order", cases[i].model, cases[i].repack, s.n_stages,
              s.stages[0], s.n_stages > 1 ? s.stages[1] : "-", s.calls, s.bad);
        CHECK(s.total[0] == file_bytes && s.last_done[0] == file_bytes, "%s: read %llu of %llu bytes, the file's tensors %llu",
              cases[i].model, (unsigned long long)s.last_done[0], (unsigned long long)s.total[0], (unsigned long long)file_bytes);
        if (want_stages == 2)
            CHECK(s.total[1] > 0 && s.total[1] <= file_bytes && s.last_done[1] == s.total[1], "%s: repacked %llu of %llu bytes",
                  cases[i].model, (unsigned long long)s.last_done[1], (unsigned long long)s.total[1]);
        okv_model_free(m);
    }
    okv_error err = {0};
    CHECK(!okv_model_load_progress(NULL, NULL, on_progress, NULL, &err) && err.status == OKV_ERR_INVALID, "NULL path: %s",
          okv_status_name(err.status));
}

/* Tensor info after the name: n_dims u32, ne[n_dims] u64, type u32. */
static size_t type_offset(const char *name, int n_dims) { return strlen(name) + 4 + 8 * (size_t)n_dims; }

int main(void) {
    shared = check_shared_dir();
    if (!shared) { printf("skipped: ../shared not found\n"); return CHECK_SKIP; }
    char path[1024];
    okv_error err;

    check_progress();

    /* Geometry from metadata. */
    struct { const char *model; int layers, kv, hd; int windows[8]; } geo[] = {
        {"stories260K", 5, 4, 8, {0, 0, 0, 0, 0}},
        {"tiny-llama", 4, 2, 16, {0, 0, 0, 0}},
        {"tiny-gemma3", 6, 2, 16, {8, 8, 8, 8, 8, 0}},
        {"tiny-gemma3-allswa", 6, 2, 16, {8, 8, 8, 8, 8, 8}},
        {"tiny-muse-glimmer", 8, 2, 16, {8, 8, 8, 0, 8, 8, 8, 0}},
    };
    for (size_t i = 0; i < sizeof geo / sizeof geo[0]; i++) {
        snprintf(path, sizeof path, "%s/models/%s.gguf", shared, geo[i].model);
        okv_model *m = okv_model_load(path, NULL, &err);
        CHECK(m != NULL, "%s: %s", geo[i].model, err.message);
        if (!m) continue;
        CHECK(okv_model_n_layers(m) == geo[i].layers, "%s layers %d", geo[i].model, okv_model_n_layers(m));
        for (int l = 0; l < geo[i].layers; l++) {
            okv_layer_geometry g;
            okv_model_layer_geometry(m, l, &g);
            CHECK(g.n_kv_heads == geo[i].kv && g.head_dim == geo[i].hd && g.window == geo[i].windows[l],
                  "%s layer %d: (%d, %d, %d)", geo[i].model, l, g.n_kv_heads, g.head_dim, g.window);
        }
        okv_model_free(m);
    }
    /* --sliding-window for a llama file that lacks the key. */
    snprintf(path, sizeof path, "%s/models/tiny-llama.gguf", shared);
    const char *sw[] = {"sliding_window", "8", NULL};
    okv_model *m = okv_model_load(path, sw, &err);
    okv_layer_geometry g = {0};
    CHECK(m && okv_model_layer_geometry(m, 3, &g) && g.window == 8, "sliding_window option: %d", g.window);
    okv_model_free(m);
    const char *bad_opt[] = {"sliding_windw", "8", NULL};
    CHECK(!okv_model_load(path, bad_opt, &err) && err.status == OKV_ERR_INVALID && strstr(err.message, "sliding_windw"),
          "unknown model option: %s", err.message);
    const char *bad_val[] = {"sliding_window", "-3", NULL};
    CHECK(!okv_model_load(path, bad_val, &err) && err.status == OKV_ERR_INVALID && strstr(err.message, "-3"),
          "bad window value: %s", err.message);
    /* The matrix products' level: a name that is none is refused as a bad
     * value, the other family's as one this processor cannot run; scalar
     * runs everywhere. */
    const char *isa_scalar[] = {"isa", "scalar", NULL}, *isa_auto[] = {"isa", "auto", NULL};
    const char *isa_typo[] = {"isa", "avx3", NULL};
#if defined(__x86_64__) || defined(__i386__)
    const char *isa_other[] = {"isa", "neon", NULL};
#else
    const char *isa_other[] = {"isa", "avx2", NULL};
#endif
    for (int i = 0; i < 2; i++) {
        m = okv_model_load(path, i ? isa_auto : isa_scalar, &err);
        CHECK(m != NULL, "isa %s: %s", i ? "auto" : "scalar", m ? "" : err.message);
        /* the level the products run at, as the model says */
        const char *want = i ? "products at " : "products at scalar";
        CHECK(m && strstr(okv_model_describe(m), want), "isa %s: '%s' lacks '%s'", i ? "auto" : "scalar",
              m ? okv_model_describe(m) : "", want);
        okv_model_free(m);
    }
    CHECK(!okv_model_load(path, isa_typo, &err) && err.status == OKV_ERR_INVALID && strstr(err.message, "avx3"),
          "unknown isa: %s", err.message);
    CHECK(!okv_model_load(path, isa_other, &err) && err.status == OKV_ERR_UNSUPPORTED &&
              strstr(err.message, isa_other[1]),
          "isa of the other family: %s", err.message);
    expect_error("/nonexistent/model.gguf", OKV_ERR_IO, "/nonexistent/model.gguf", "missing file");

    /* Damaged copies of stories260K. */
    snprintf(path, sizeof path, "%s/models/stories260K.gguf", shared);
    size_t size;
    char *data = golden_read(path, &size);
    CHECK(data != NULL, "read %s", path);
    if (!data) return check_done();
    const uint32_t i32_type = 26, f16_type = 1;
    const char *q = "blk.0.attn_q.weight", *norm = "blk.0.attn_norm.weight";
    expect_error(patched(data, size, q, strlen(q), type_offset(q, 2), &i32_type, 4), OKV_ERR_UNSUPPORTED,
                 "blk.0.attn_q.weight", "matrix of type i32");
    expect_error(patched(data, size, norm, strlen(norm), type_offset(norm, 1), &f16_type, 4), OKV_ERR_FORMAT,
                 "blk.0.attn_norm.weight", "norm of type f16");
    const uint64_t rows32 = 32;
    expect_error(patched(data, size, q, strlen(q), strlen(q) + 4 + 8, &rows32, 8), OKV_ERR_FORMAT,
                 "blk.0.attn_q.weight", "wrong shape");
    expect_error(patched(data, size, "blk.2.ffn_up.weight", 19, 0, "blk.2.ffn_UP", 12), OKV_ERR_FORMAT,
                 "blk.2.ffn_up.weight", "missing tensor");
    expect_error(patched(data, size, "llama.block_count", 17, 0, "llama.block_kount", 17), OKV_ERR_FORMAT,
                 "llama.block_count", "missing key");
    expect_error(patched(data, size, "\x05\0\0\0\0\0\0\0llama", 13, 8, "llamb", 5), OKV_ERR_UNSUPPORTED,
                 "llamb", "unknown architecture");
    /* Truncated at every 1/64th of the file: each a clean error. */
    int clean = 0;
    for (int k = 1; k < 64; k++) {
        FILE *f = fopen("test_model_load.tmp.gguf", "wb");
        fwrite(data, 1, size * (size_t)k / 64, f);
        fclose(f);
        okv_model *t = okv_model_load("test_model_load.tmp.gguf", NULL, &err);
        clean += !t && err.status == OKV_ERR_FORMAT;
        okv_model_free(t);
    }
    CHECK(clean == 63, "%d of 63 truncations gave OKV_ERR_FORMAT", clean);
    remove("test_model_load.tmp.gguf");
    free(data);
    return check_done();
}
