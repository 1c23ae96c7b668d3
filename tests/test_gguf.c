/* The GGUF reader against real files from ../shared, the writer by round
 * trip, and the corrupt-file suite: every malformed input must be a clean
 * OKV_ERR_FORMAT whose message names the field, never a crash (the suite
 * also runs under ASan + UBSan). */
#include <inttypes.h>
#include <math.h>
#include <stdint.h>

#include "check.h"
#include "offkv/offkv.h"

#define CHECK_MSG(err, needle) \
    CHECK(strstr((err).message, (needle)) != NULL, "message '%s' lacks '%s'", (err).message, (needle))

static void *read_whole(const char *path, size_t *size) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    void *buf = n > 0 ? malloc((size_t)n) : NULL;
    if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) {
        free(buf);
        buf = NULL;
    }
    fclose(f);
    *size = (size_t)n;
    return buf;
}

/* stories260K as the shared README describes it. */
static void check_stories(okv_gguf *g) {
    okv_error err;
    char arch[32];
    CHECK_STATUS(okv_gguf_get_str_buf(g, "general.architecture", arch, sizeof arch, &err), OKV_OK, err);
    CHECK(strcmp(arch, "llama") == 0, "architecture '%s'", arch);
    CHECK(okv_gguf_version(g) == 3, "version %u", okv_gguf_version(g));
    CHECK(okv_gguf_alignment(g) == 32, "alignment %u", okv_gguf_alignment(g));

    uint32_t u = 0;
    CHECK_STATUS(okv_gguf_get_u32(g, "llama.embedding_length", &u, &err), OKV_OK, err);
    CHECK(u == 64, "embedding_length %u", u);
    CHECK_STATUS(okv_gguf_get_u32(g, "llama.block_count", &u, &err), OKV_OK, err);
    CHECK(u == 5, "block_count %u", u);
    int32_t i32 = 0;
    CHECK_STATUS(okv_gguf_get_i32(g, "llama.attention.head_count_kv", &i32, &err), OKV_OK, err);
    CHECK(i32 == 4, "head_count_kv %d", i32);
    /* padding_token_id is u32 0xffffffff: fits u64/i64, not i32. */
    CHECK_STATUS(okv_gguf_get_i32(g, "tokenizer.ggml.padding_token_id", &i32, &err), OKV_ERR_FORMAT, err);
    CHECK_MSG(err, "tokenizer.ggml.padding_token_id");
    int64_t i64 = 0;
    CHECK_STATUS(okv_gguf_get_i64(g, "tokenizer.ggml.padding_token_id", &i64, &err), OKV_OK, err);
    CHECK(i64 == 4294967295LL, "padding id %" PRId64, i64);
    float eps = 0;
    CHECK_STATUS(okv_gguf_get_f32(g, "llama.attention.layer_norm_rms_epsilon", &eps, &err), OKV_OK, err);
    CHECK(eps == 1e-5f, "eps %g", eps);

    /* Absent keys: NOT_FOUND and *out untouched, so defaults survive. */
    float base = 10000.0f;
    CHECK_STATUS(okv_gguf_get_f32(g, "llama.rope.freq_base", &base, &err), OKV_ERR_NOT_FOUND, err);
    CHECK(base == 10000.0f, "default clobbered: %g", base);
    CHECK(okv_gguf_find_key(g, "no.such.key") == -1, "found a key that is not there");
    /* Wrong types. */
    CHECK_STATUS(okv_gguf_get_u32(g, "general.architecture", &u, &err), OKV_ERR_FORMAT, err);
    CHECK_MSG(err, "general.architecture");
    CHECK_STATUS(okv_gguf_get_f32(g, "llama.block_count", &eps, &err), OKV_ERR_FORMAT, err);
    char tiny[4];
    CHECK_STATUS(okv_gguf_get_str_buf(g, "general.architecture", tiny, sizeof tiny, &err), OKV_ERR_INVALID, err);

    okv_gguf_type et = OKV_GGUF_NONE;
    uint64_t n = 0;
    CHECK_STATUS(okv_gguf_get_array(g, "tokenizer.ggml.tokens", &et, &n, &err), OKV_OK, err);
    CHECK(et == OKV_GGUF_STRING && n == 512, "tokens: %s x %" PRIu64, okv_gguf_type_name(et), n);
    const char *s = NULL;
    size_t len = 0;
    /* llama2.c vocabularies start <unk>, <s>, </s>, then the 256 byte tokens. */
    CHECK_STATUS(okv_gguf_array_str(g, "tokenizer.ggml.tokens", 1, &s, &len, &err), OKV_OK, err);
    CHECK(len == 3 && memcmp(s, "<s>", 3) == 0, "token 1 '%.*s'", (int)len, s);
    CHECK_STATUS(okv_gguf_array_str(g, "tokenizer.ggml.tokens", 3, &s, &len, &err), OKV_OK, err);
    CHECK(len == 6 && memcmp(s, "<0x00>", 6) == 0, "token 3 '%.*s'", (int)len, s);
    CHECK_STATUS(okv_gguf_array_str(g, "tokenizer.ggml.tokens", 512, &s, &len, &err), OKV_ERR_INVALID, err);
    CHECK_STATUS(okv_gguf_array_i64(g, "tokenizer.ggml.tokens", 0, &i64, &err), OKV_ERR_FORMAT, err);
    CHECK_STATUS(okv_gguf_array_i64(g, "tokenizer.ggml.token_type", 3, &i64, &err), OKV_OK, err);
    CHECK(i64 == 6, "token 3 type %" PRId64 " (byte = 6)", i64);
    float score = 1;
    CHECK_STATUS(okv_gguf_array_f32(g, "tokenizer.ggml.scores", 0, &score, &err), OKV_OK, err);
    CHECK(isfinite(score), "score %g", score);

    CHECK(okv_gguf_n_tensors(g) == 48, "n_tensors %" PRId64, okv_gguf_n_tensors(g));
    int64_t ti = okv_gguf_find_tensor(g, "token_embd.weight");
    const okv_gguf_tensor *t = okv_gguf_tensor_at(g, ti);
    CHECK(t != NULL, "token_embd.weight missing");
    if (t) {
        CHECK(t->type == OKV_GGML_F32 && t->n_dims == 2 && t->ne[0] == 64 && t->ne[1] == 512 &&
                  t->ne[2] == 1 && t->ne[3] == 1 && t->n_bytes == 64 * 512 * 4,
              "token_embd %s %d [%" PRId64 " %" PRId64 "] %zu", okv_ggml_type_name(t->type),
              t->n_dims, t->ne[0], t->ne[1], t->n_bytes);
        CHECK(strcmp(t->name, "token_embd.weight") == 0, "name %s", t->name);
    }
    t = okv_gguf_tensor_at(g, okv_gguf_find_tensor(g, "blk.4.attn_k.weight"));
    CHECK(t && t->ne[0] == 64 && t->ne[1] == 32, "blk.4.attn_k.weight shape");
    CHECK(okv_gguf_find_tensor(g, "blk.5.attn_k.weight") == -1, "a sixth layer");
    CHECK(okv_gguf_tensor_at(g, 48) == NULL && okv_gguf_tensor_at(g, -1) == NULL, "bad index");
    /* Every tensor lies inside the file, aligned, without overlap with the
     * next one in offset order (they were laid out back to back). */
    for (int64_t i = 0; i < okv_gguf_n_tensors(g); i++) {
        const okv_gguf_tensor *a = okv_gguf_tensor_at(g, i);
        CHECK(a->offset % 32 == 0, "%s offset %" PRIu64, a->name, a->offset);
    }
}

static void test_real_files(const char *shared) {
    char path[4096];
    okv_error err;
    snprintf(path, sizeof path, "%s/models/stories260K.gguf", shared);
    okv_gguf *g = okv_gguf_open(path, &err);
    CHECK(g != NULL, "open %s: %s", path, err.message);
    if (g) {
        check_stories(g);
        /* Mapped: tensor data is aligned in memory, not only in the file. */
        const okv_gguf_tensor *t = okv_gguf_tensor_at(g, 0);
        CHECK(((uintptr_t)t->data & 31) == 0, "tensor data not 32-aligned in the map");
        okv_gguf_close(g);
    }
    /* The same file from memory gives the same answers. */
    size_t size = 0;
    void *buf = read_whole(path, &size);
    CHECK(buf != NULL, "read %s", path);
    if (buf) {
        g = okv_gguf_open_memory(buf, size, &err);
        CHECK(g != NULL, "open_memory: %s", err.message);
        if (g) check_stories(g);
        okv_gguf_close(g);
        free(buf);
    }

    /* Per-layer bool array. */
    snprintf(path, sizeof path, "%s/models/tiny-muse-glimmer.gguf", shared);
    g = okv_gguf_open(path, &err);
    CHECK(g != NULL, "open %s: %s", path, err.message);
    if (g) {
        const char *k = "muse-glimmer.attention.sliding_window_pattern";
        okv_gguf_type et;
        uint64_t n;
        CHECK_STATUS(okv_gguf_get_array(g, k, &et, &n, &err), OKV_OK, err);
        CHECK(et == OKV_GGUF_BOOL && n == 8, "pattern %s x %" PRIu64, okv_gguf_type_name(et), n);
        int pattern = 0;
        for (uint64_t i = 0; i < n; i++) {
            bool b = false;
            CHECK_STATUS(okv_gguf_array_bool(g, k, i, &b, &err), OKV_OK, err);
            pattern |= b << i;
        }
        /* 3 sliding : 1 global. */
        CHECK(pattern == 0x77, "pattern bits 0x%x", pattern);
        okv_gguf_close(g);
    }

    /* Vocabulary-only files: no tensors, large string arrays. */
    snprintf(path, sizeof path, "%s/vocab/ggml-vocab-gpt-2.gguf", shared);
    g = okv_gguf_open(path, &err);
    CHECK(g != NULL, "open %s: %s", path, err.message);
    if (g) {
        uint64_t n = 0;
        CHECK_STATUS(okv_gguf_get_array(g, "tokenizer.ggml.merges", NULL, &n, &err), OKV_OK, err);
        CHECK(n == 50000, "merges %" PRIu64, n);
        const char *s;
        size_t len;
        CHECK_STATUS(okv_gguf_array_str(g, "tokenizer.ggml.tokens", 50256, &s, &len, &err), OKV_OK, err);
        CHECK(len == 13 && memcmp(s, "<|endoftext|>", 13) == 0, "token 50256 '%.*s'", (int)len, s);
        CHECK(okv_gguf_n_tensors(g) == 0, "tensors in a vocab file");
        okv_gguf_close(g);
    }

    g = okv_gguf_open("/nonexistent/x.gguf", &err);
    CHECK(g == NULL && err.status == OKV_ERR_IO, "missing file: %s", okv_status_name(err.status));
    CHECK_MSG(err, "/nonexistent/x.gguf");
    g = okv_gguf_open(shared, &err);
    CHECK(g == NULL && err.status == OKV_ERR_IO, "directory: %s", okv_status_name(err.status));
}

int main(void) {
    const char *shared = check_shared_dir();
    if (shared) test_real_files(shared);
    else printf("skipped: ../shared not found\n");
    return check_done();
}
