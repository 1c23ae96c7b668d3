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

static okv_status okv_fail_test(okv_error *err, const char *name) {
    if (err) {
        err->status = OKV_ERR_UNSUPPORTED;
        snprintf(err->message, sizeof err->message, "fill refused '%s'", name);
    }
    return OKV_ERR_UNSUPPORTED;
}

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


/* ---- the ggml type table, against ggml-common.h's block structs ---- */

static void test_types(void) {
    CHECK(okv_ggml_type_size(OKV_GGML_Q8_0) == 34 && okv_ggml_block_size(OKV_GGML_Q8_0) == 32, "q8_0");
    CHECK(okv_ggml_type_size(OKV_GGML_Q4_0) == 18 && okv_ggml_block_size(OKV_GGML_Q4_0) == 32, "q4_0");
    CHECK(okv_ggml_type_size(OKV_GGML_BF16) == 2 && okv_ggml_block_size(OKV_GGML_BF16) == 1, "bf16");
    CHECK(okv_ggml_type_size(OKV_GGML_Q4_K) == 144 && okv_ggml_block_size(OKV_GGML_Q4_K) == 256, "q4_K");
    CHECK(okv_ggml_type_size(OKV_GGML_Q6_K) == 210, "q6_K %zu", okv_ggml_type_size(OKV_GGML_Q6_K));
    CHECK(okv_ggml_type_size(OKV_GGML_IQ4_XS) == 136, "iq4_xs");
    CHECK(strcmp(okv_ggml_type_name(30), "bf16") == 0, "type 30");
    CHECK(okv_ggml_type_name(4) == NULL && okv_ggml_type_name(31) == NULL && okv_ggml_type_name(-1) == NULL &&
              okv_ggml_type_name(OKV_GGML_TYPE_END) == NULL,
          "removed or out-of-range types have names");
    CHECK(okv_ggml_row_size(OKV_GGML_Q8_0, 64) == 68, "q8_0 row of 64");
    CHECK(okv_ggml_row_size(OKV_GGML_Q8_0, 33) == 0, "q8_0 row of 33");
    CHECK(okv_ggml_row_size(OKV_GGML_F16, 7) == 14, "f16 row of 7");
    CHECK(okv_ggml_row_size(OKV_GGML_F32, INT64_MAX) == 0, "overflowing row");
}

/* ---- writer round trip ---- */

static okv_status fill_ramp(void *user, const char *name, void *dst, size_t n, okv_error *err) {
    (void)name;
    (void)err;
    int *calls = user;
    (*calls)++;
    for (size_t i = 0; i < n; i++) ((uint8_t *)dst)[i] = (uint8_t)(i * 7 + 1);
    return OKV_OK;
}

static okv_status fill_fail(void *user, const char *name, void *dst, size_t n, okv_error *err) {
    (void)user;
    (void)dst;
    (void)n;
    return okv_fail_test(err, name);
}

typedef struct {
    float f32[16];
    uint16_t f16[4];
    uint16_t bf16[6];
    uint8_t q8[2 * 34];
    uint8_t q4[2 * 18];
} tensor_data;

/* A writer holding every scalar type, every array kind, and one tensor of
 * each compute type plus one filled by callback. */
static okv_gguf_writer *make_writer(tensor_data *td, int *fill_calls, uint32_t alignment) {
    okv_error err;
    okv_gguf_writer *w = okv_gguf_writer_create(&err);
    if (!w) return NULL;
    uint8_t u8 = 255;
    int8_t i8 = -128;
    uint16_t u16 = 65535;
    int16_t i16 = -32768;
    int64_t i64 = INT64_MIN;
    double f64 = 0.25;
    double big = 1e300;
    okv_status st = OKV_OK;
    if (alignment) st |= okv_gguf_writer_add_u32(w, "general.alignment", alignment, &err);
    st |= okv_gguf_writer_add_str(w, "general.architecture", "llama", &err);
    st |= okv_gguf_writer_add_scalar(w, "t.u8", OKV_GGUF_U8, &u8, &err);
    st |= okv_gguf_writer_add_scalar(w, "t.i8", OKV_GGUF_I8, &i8, &err);
    st |= okv_gguf_writer_add_scalar(w, "t.u16", OKV_GGUF_U16, &u16, &err);
    st |= okv_gguf_writer_add_scalar(w, "t.i16", OKV_GGUF_I16, &i16, &err);
    st |= okv_gguf_writer_add_u32(w, "t.u32", UINT32_MAX, &err);
    st |= okv_gguf_writer_add_i32(w, "t.i32", INT32_MIN, &err);
    st |= okv_gguf_writer_add_f32(w, "t.f32", -1.5f, &err);
    st |= okv_gguf_writer_add_bool(w, "t.bool", true, &err);
    st |= okv_gguf_writer_add_str(w, "t.str", "h\xc3\xa9llo", &err);
    st |= okv_gguf_writer_add_u64(w, "t.u64", UINT64_MAX, &err);
    st |= okv_gguf_writer_add_scalar(w, "t.i64", OKV_GGUF_I64, &i64, &err);
    st |= okv_gguf_writer_add_scalar(w, "t.f64", OKV_GGUF_F64, &f64, &err);
    st |= okv_gguf_writer_add_scalar(w, "t.f64big", OKV_GGUF_F64, &big, &err);
    st |= okv_gguf_writer_add_str(w, "t.empty", "", &err);
    const char *strs[] = {"a", "", "ccc"};
    int32_t ints[] = {-1, 0, INT32_MAX};
    float floats[] = {0.5f, -2.0f};
    bool bools[] = {true, false, true, true};
    uint64_t u64s[] = {UINT64_MAX, 5};
    uint8_t u8s[] = {9, 200};
    double f64s[] = {3.0};
    st |= okv_gguf_writer_add_array(w, "a.str", OKV_GGUF_STRING, strs, 3, &err);
    st |= okv_gguf_writer_add_array(w, "a.i32", OKV_GGUF_I32, ints, 3, &err);
    st |= okv_gguf_writer_add_array(w, "a.f32", OKV_GGUF_F32, floats, 2, &err);
    st |= okv_gguf_writer_add_array(w, "a.bool", OKV_GGUF_BOOL, bools, 4, &err);
    st |= okv_gguf_writer_add_array(w, "a.u64", OKV_GGUF_U64, u64s, 2, &err);
    st |= okv_gguf_writer_add_array(w, "a.u8", OKV_GGUF_U8, u8s, 2, &err);
    st |= okv_gguf_writer_add_array(w, "a.f64", OKV_GGUF_F64, f64s, 1, &err);
    st |= okv_gguf_writer_add_array(w, "a.none", OKV_GGUF_I32, NULL, 0, &err);

    for (int i = 0; i < 16; i++) td->f32[i] = (float)i - 7.25f;
    for (int i = 0; i < 4; i++) td->f16[i] = (uint16_t)(0x3c00 + i);
    for (int i = 0; i < 6; i++) td->bf16[i] = (uint16_t)(0x3f80 + i);
    for (int i = 0; i < (int)sizeof td->q8; i++) td->q8[i] = (uint8_t)(i * 3);
    for (int i = 0; i < (int)sizeof td->q4; i++) td->q4[i] = (uint8_t)(255 - i);
    st |= okv_gguf_writer_add_tensor(w, "w.f32", OKV_GGML_F32, 2, (int64_t[]){8, 2}, td->f32, &err);
    st |= okv_gguf_writer_add_tensor(w, "w.f16", OKV_GGML_F16, 1, (int64_t[]){4}, td->f16, &err);
    st |= okv_gguf_writer_add_tensor(w, "w.bf16", OKV_GGML_BF16, 3, (int64_t[]){2, 3, 1}, td->bf16, &err);
    st |= okv_gguf_writer_add_tensor(w, "w.q8_0", OKV_GGML_Q8_0, 2, (int64_t[]){32, 2}, td->q8, &err);
    st |= okv_gguf_writer_add_tensor(w, "w.q4_0", OKV_GGML_Q4_0, 4, (int64_t[]){64, 1, 1, 1}, td->q4, &err);
    st |= okv_gguf_writer_add_tensor_fn(w, "w.fill", OKV_GGML_F32, 1, (int64_t[]){5}, fill_ramp, fill_calls, &err);
    CHECK(st == OKV_OK, "building the writer: %s", err.message);
    return w;
}

static void check_round_trip(okv_gguf *g, const tensor_data *td, uint32_t alignment) {
    okv_error err;
    uint32_t u32;
    int32_t i32;
    uint64_t u64;
    int64_t i64;
    float f;
    bool b;
    const char *s;
    size_t len;
    CHECK(okv_gguf_version(g) == 3, "version");
    CHECK(okv_gguf_alignment(g) == (alignment ? alignment : 32), "alignment %u", okv_gguf_alignment(g));
    CHECK(okv_gguf_n_kv(g) == (alignment ? 24 : 23), "n_kv %" PRId64, okv_gguf_n_kv(g));
    const char *names[] = {"t.u8", "t.i8", "t.u16", "t.i16", "t.u32", "t.i32", "t.f32",
                           "t.bool", "t.str", "a.str", "t.u64", "t.i64", "t.f64"};
    for (int t = 0; t <= OKV_GGUF_F64; t++) {
        int64_t i = okv_gguf_find_key(g, names[t]);
        CHECK(i >= 0 && okv_gguf_kv_type(g, i) == (okv_gguf_type)t, "%s: type %s", names[t],
              okv_gguf_type_name(okv_gguf_kv_type(g, i)));
        CHECK(i < 0 || strcmp(okv_gguf_key(g, i), names[t]) == 0, "key %" PRId64, i);
    }
    CHECK(okv_gguf_key(g, okv_gguf_n_kv(g)) == NULL && okv_gguf_kv_type(g, -1) == OKV_GGUF_NONE, "bad index");

    CHECK_STATUS(okv_gguf_get_u32(g, "t.u8", &u32, &err), OKV_OK, err);
    CHECK(u32 == 255, "u8 %u", u32);
    CHECK_STATUS(okv_gguf_get_i32(g, "t.i8", &i32, &err), OKV_OK, err);
    CHECK(i32 == -128, "i8 %d", i32);
    CHECK_STATUS(okv_gguf_get_u32(g, "t.i8", &u32, &err), OKV_ERR_FORMAT, err);
    CHECK_MSG(err, "-128");
    CHECK_STATUS(okv_gguf_get_u32(g, "t.u16", &u32, &err), OKV_OK, err);
    CHECK(u32 == 65535, "u16 %u", u32);
    CHECK_STATUS(okv_gguf_get_i32(g, "t.i16", &i32, &err), OKV_OK, err);
    CHECK(i32 == -32768, "i16 %d", i32);
    CHECK_STATUS(okv_gguf_get_u32(g, "t.u32", &u32, &err), OKV_OK, err);
    CHECK(u32 == UINT32_MAX, "u32 %u", u32);
    CHECK_STATUS(okv_gguf_get_i32(g, "t.u32", &i32, &err), OKV_ERR_FORMAT, err);
    CHECK_STATUS(okv_gguf_get_i32(g, "t.i32", &i32, &err), OKV_OK, err);
    CHECK(i32 == INT32_MIN, "i32 %d", i32);
    CHECK_STATUS(okv_gguf_get_i64(g, "t.i32", &i64, &err), OKV_OK, err);
    CHECK(i64 == INT32_MIN, "i32 as i64 %" PRId64, i64);
    CHECK_STATUS(okv_gguf_get_u64(g, "t.u64", &u64, &err), OKV_OK, err);
    CHECK(u64 == UINT64_MAX, "u64");
    CHECK_STATUS(okv_gguf_get_i64(g, "t.u64", &i64, &err), OKV_ERR_FORMAT, err);
    CHECK_STATUS(okv_gguf_get_u32(g, "t.u64", &u32, &err), OKV_ERR_FORMAT, err);
    CHECK_STATUS(okv_gguf_get_i64(g, "t.i64", &i64, &err), OKV_OK, err);
    CHECK(i64 == INT64_MIN, "i64 %" PRId64, i64);
    CHECK_STATUS(okv_gguf_get_u64(g, "t.i64", &u64, &err), OKV_ERR_FORMAT, err);
    CHECK_STATUS(okv_gguf_get_f32(g, "t.f32", &f, &err), OKV_OK, err);
    CHECK(f == -1.5f, "f32 %g", f);
    CHECK_STATUS(okv_gguf_get_f32(g, "t.f64", &f, &err), OKV_OK, err);
    CHECK(f == 0.25f, "f64 %g", f);
    CHECK_STATUS(okv_gguf_get_f32(g, "t.f64big", &f, &err), OKV_ERR_FORMAT, err);
    double d = 0;
    CHECK_STATUS(okv_gguf_get_f64(g, "t.f64big", &d, &err), OKV_OK, err); /* exact: no f32 range */
    CHECK(d == 1e300, "f64 as double %g", d);
    CHECK_STATUS(okv_gguf_get_f64(g, "t.f32", &d, &err), OKV_OK, err);
    CHECK(d == -1.5, "f32 as double %g", d);
    CHECK_STATUS(okv_gguf_get_f64(g, "t.u8", &d, &err), OKV_ERR_FORMAT, err);
    CHECK_STATUS(okv_gguf_get_bool(g, "t.bool", &b, &err), OKV_OK, err);
    CHECK(b == true, "bool");
    CHECK_STATUS(okv_gguf_get_bool(g, "t.u8", &b, &err), OKV_ERR_FORMAT, err);
    CHECK_STATUS(okv_gguf_get_str(g, "t.str", &s, &len, &err), OKV_OK, err);
    CHECK(len == 6 && memcmp(s, "h\xc3\xa9llo", 6) == 0, "str '%.*s'", (int)len, s);
    char buf[7];
    CHECK_STATUS(okv_gguf_get_str_buf(g, "t.str", buf, sizeof buf, &err), OKV_OK, err);
    CHECK(strcmp(buf, "h\xc3\xa9llo") == 0, "str buf '%s'", buf);
    CHECK_STATUS(okv_gguf_get_str_buf(g, "t.str", buf, 6, &err), OKV_ERR_INVALID, err);
    CHECK(buf[0] == '\0', "buffer not emptied");
    CHECK_STATUS(okv_gguf_get_str(g, "t.empty", &s, &len, &err), OKV_OK, err);
    CHECK(len == 0, "empty string len %zu", len);

    okv_gguf_type et;
    uint64_t n;
    CHECK_STATUS(okv_gguf_get_array(g, "a.str", &et, &n, &err), OKV_OK, err);
    CHECK(et == OKV_GGUF_STRING && n == 3, "a.str");
    const char *want[] = {"a", "", "ccc"};
    for (uint64_t i = 0; i < 3; i++) {
        CHECK_STATUS(okv_gguf_array_str(g, "a.str", i, &s, &len, &err), OKV_OK, err);
        CHECK(len == strlen(want[i]) && memcmp(s, want[i], len) == 0, "a.str[%" PRIu64 "]", i);
    }
    int32_t ints[] = {-1, 0, INT32_MAX};
    for (uint64_t i = 0; i < 3; i++) {
        CHECK_STATUS(okv_gguf_array_i64(g, "a.i32", i, &i64, &err), OKV_OK, err);
        CHECK(i64 == ints[i], "a.i32[%" PRIu64 "] = %" PRId64, i, i64);
    }
    CHECK_STATUS(okv_gguf_array_i64(g, "a.i32", 3, &i64, &err), OKV_ERR_INVALID, err);
    CHECK_STATUS(okv_gguf_array_f32(g, "a.f32", 1, &f, &err), OKV_OK, err);
    CHECK(f == -2.0f, "a.f32[1] %g", f);
    CHECK_STATUS(okv_gguf_array_f32(g, "a.f64", 0, &f, &err), OKV_OK, err);
    CHECK(f == 3.0f, "a.f64[0] %g", f);
    CHECK_STATUS(okv_gguf_array_f32(g, "a.i32", 0, &f, &err), OKV_ERR_FORMAT, err);
    CHECK_STATUS(okv_gguf_array_f64(g, "a.f64", 0, &d, &err), OKV_OK, err);
    CHECK(d == 3.0, "a.f64[0] as double %g", d);
    CHECK_STATUS(okv_gguf_array_f64(g, "a.i32", 0, &d, &err), OKV_ERR_FORMAT, err);
    CHECK_STATUS(okv_gguf_array_u64(g, "a.i32", 2, &u64, &err), OKV_OK, err);
    CHECK(u64 == INT32_MAX, "a.i32[2] as u64 %" PRIu64, u64);
    CHECK_STATUS(okv_gguf_array_u64(g, "a.i32", 0, &u64, &err), OKV_ERR_FORMAT, err); /* -1 */
    CHECK_STATUS(okv_gguf_array_u64(g, "a.f32", 0, &u64, &err), OKV_ERR_FORMAT, err);
    int bits = 0;
    for (uint64_t i = 0; i < 4; i++) {
        CHECK_STATUS(okv_gguf_array_bool(g, "a.bool", i, &b, &err), OKV_OK, err);
        bits |= b << i;
    }
    CHECK(bits == 0xd, "a.bool bits 0x%x", bits);
    CHECK_STATUS(okv_gguf_array_i64(g, "a.u64", 0, &i64, &err), OKV_ERR_FORMAT, err);
    CHECK_MSG(err, "a.u64");
    CHECK_STATUS(okv_gguf_array_i64(g, "a.u64", 1, &i64, &err), OKV_OK, err);
    CHECK(i64 == 5, "a.u64[1]");
    CHECK_STATUS(okv_gguf_array_i64(g, "a.u8", 1, &i64, &err), OKV_OK, err);
    CHECK(i64 == 200, "a.u8[1]");
    CHECK_STATUS(okv_gguf_get_array(g, "a.none", &et, &n, &err), OKV_OK, err);
    CHECK(et == OKV_GGUF_I32 && n == 0, "empty array");
    CHECK_STATUS(okv_gguf_get_array(g, "t.u8", &et, &n, &err), OKV_ERR_FORMAT, err);
    CHECK_STATUS(okv_gguf_array_str(g, "nope", 0, &s, &len, &err), OKV_ERR_NOT_FOUND, err);

    struct { const char *name; okv_ggml_type type; int32_t n_dims; int64_t ne[4]; const void *data; size_t n; } want_t[] = {
        {"w.f32", OKV_GGML_F32, 2, {8, 2, 1, 1}, td->f32, sizeof td->f32},
        {"w.f16", OKV_GGML_F16, 1, {4, 1, 1, 1}, td->f16, sizeof td->f16},
        {"w.bf16", OKV_GGML_BF16, 3, {2, 3, 1, 1}, td->bf16, sizeof td->bf16},
        {"w.q8_0", OKV_GGML_Q8_0, 2, {32, 2, 1, 1}, td->q8, sizeof td->q8},
        {"w.q4_0", OKV_GGML_Q4_0, 4, {64, 1, 1, 1}, td->q4, sizeof td->q4},
    };
    CHECK(okv_gguf_n_tensors(g) == 6, "n_tensors %" PRId64, okv_gguf_n_tensors(g));
    uint32_t a = okv_gguf_alignment(g);
    for (int k = 0; k < 5; k++) {
        const okv_gguf_tensor *t = okv_gguf_tensor_at(g, okv_gguf_find_tensor(g, want_t[k].name));
        CHECK(t != NULL, "%s missing", want_t[k].name);
        if (!t) continue;
        CHECK(t->type == want_t[k].type && t->n_dims == want_t[k].n_dims &&
                  memcmp(t->ne, want_t[k].ne, sizeof t->ne) == 0,
              "%s shape", t->name);
        CHECK(t->n_bytes == want_t[k].n && memcmp(t->data, want_t[k].data, t->n_bytes) == 0, "%s data",
              t->name);
        CHECK(t->offset % a == 0, "%s offset %" PRIu64 " not %u-aligned", t->name, t->offset, a);
    }
    const okv_gguf_tensor *t = okv_gguf_tensor_at(g, 5);
    CHECK(t && strcmp(t->name, "w.fill") == 0 && t->n_bytes == 20, "w.fill");
    if (t) {
        int ok = 1;
        for (size_t i = 0; i < t->n_bytes; i++) ok &= ((const uint8_t *)t->data)[i] == (uint8_t)(i * 7 + 1);
        CHECK(ok, "w.fill data");
    }
}

static void test_writer(void) {
    okv_error err;
    tensor_data td;
    for (int pass = 0; pass < 2; pass++) {
        uint32_t alignment = pass ? 64 : 0;
        int fills = 0;
        okv_gguf_writer *w = make_writer(&td, &fills, alignment);
        CHECK(w != NULL, "writer");
        if (!w) return;
        void *buf = NULL;
        size_t size = 0;
        CHECK_STATUS(okv_gguf_writer_to_memory(w, &buf, &size, &err), OKV_OK, err);
        CHECK(fills == 1, "fill called %d times for one write", fills);
        okv_gguf *g = buf ? okv_gguf_open_memory(buf, size, &err) : NULL;
        CHECK(g != NULL, "reading back: %s", err.message);
        if (g) check_round_trip(g, &td, alignment);
        okv_gguf_close(g);
        free(buf);

        const char *path = pass ? "test_gguf_a64.gguf" : "test_gguf_a32.gguf";
        CHECK_STATUS(okv_gguf_writer_write(w, path, &err), OKV_OK, err);
        g = okv_gguf_open(path, &err);
        CHECK(g != NULL, "reading %s back: %s", path, err.message);
        if (g) check_round_trip(g, &td, alignment);
        okv_gguf_close(g);
        remove(path);

        CHECK_STATUS(okv_gguf_writer_write(w, "/nonexistent-dir/x.gguf", &err), OKV_ERR_IO, err);
        CHECK_MSG(err, "/nonexistent-dir/x.gguf");

        /* Refusals leave the writer as it was. */
        CHECK_STATUS(okv_gguf_writer_add_u32(w, "t.u8", 1, &err), OKV_ERR_INVALID, err);
        CHECK_MSG(err, "t.u8");
        CHECK_STATUS(okv_gguf_writer_add_u32(w, "", 1, &err), OKV_ERR_INVALID, err);
        CHECK_STATUS(okv_gguf_writer_add_scalar(w, "x", OKV_GGUF_ARRAY, &alignment, &err), OKV_ERR_INVALID, err);
        CHECK_STATUS(okv_gguf_writer_add_array(w, "x", (okv_gguf_type)13, &alignment, 1, &err), OKV_ERR_INVALID, err);
        CHECK_STATUS(okv_gguf_writer_add_tensor(w, "w.f32", OKV_GGML_F32, 1, (int64_t[]){1}, td.f32, &err),
                     OKV_ERR_INVALID, err);
        CHECK_STATUS(okv_gguf_writer_add_tensor(w, "x", OKV_GGML_Q8_0, 1, (int64_t[]){33}, td.q8, &err),
                     OKV_ERR_INVALID, err);
        CHECK_MSG(err, "block size");
        CHECK_STATUS(okv_gguf_writer_add_tensor(w, "x", OKV_GGML_F32, 5, (int64_t[]){1, 1, 1, 1, 1}, td.f32, &err),
                     OKV_ERR_INVALID, err);
        CHECK_STATUS(okv_gguf_writer_add_tensor(w, "x", OKV_GGML_F32, 1, (int64_t[]){0}, td.f32, &err),
                     OKV_ERR_INVALID, err);
        CHECK_STATUS(okv_gguf_writer_add_tensor(w, "x", (okv_ggml_type)4, 1, (int64_t[]){1}, td.f32, &err),
                     OKV_ERR_INVALID, err);
        CHECK_STATUS(okv_gguf_writer_add_tensor(w, "x", OKV_GGML_F32, 4,
                                                (int64_t[]){INT64_MAX, INT64_MAX, 2, 2}, td.f32, &err),
                     OKV_ERR_INVALID, err);
        void *buf2 = NULL;
        size_t size2 = 0;
        CHECK_STATUS(okv_gguf_writer_to_memory(w, &buf2, &size2, &err), OKV_OK, err);
        g = buf2 ? okv_gguf_open_memory(buf2, size2, &err) : NULL;
        CHECK(g != NULL, "after refusals: %s", err.message);
        if (g) check_round_trip(g, &td, alignment);
        okv_gguf_close(g);
        free(buf2);
        okv_gguf_writer_free(w);
    }

    okv_gguf_writer *w = okv_gguf_writer_create(&err);
    CHECK_STATUS(okv_gguf_writer_add_u32(w, "general.alignment", 48, &err), OKV_ERR_INVALID, err);
    CHECK_STATUS(okv_gguf_writer_add_u32(w, "general.alignment", 0, &err), OKV_ERR_INVALID, err);
    CHECK_STATUS(okv_gguf_writer_add_i32(w, "general.alignment", 32, &err), OKV_ERR_INVALID, err);
    /* A failing fill aborts the write, says why, and leaves no file. */
    CHECK_STATUS(okv_gguf_writer_add_tensor_fn(w, "bad", OKV_GGML_F32, 1, (int64_t[]){4}, fill_fail, NULL, &err),
                 OKV_OK, err);
    CHECK_STATUS(okv_gguf_writer_write(w, "test_gguf_fail.gguf", &err), OKV_ERR_UNSUPPORTED, err);
    CHECK_MSG(err, "fill refused 'bad'");
    FILE *f = fopen("test_gguf_fail.gguf", "rb");
    CHECK(f == NULL, "partial file left behind");
    if (f) fclose(f);
    okv_gguf_writer_free(w);
}


/* ---- the corrupt-file suite ---- */

/* A small valid file to break: two tensors, strings, an array. */
static uint8_t *base_file(size_t *size) {
    static const float a[16] = {1};
    static const uint8_t b[68] = {0};
    okv_error err;
    okv_gguf_writer *w = okv_gguf_writer_create(&err);
    okv_status st = okv_gguf_writer_add_u32(w, "general.alignment", 32, &err);
    st |= okv_gguf_writer_add_u32(w, "test.count", 7, &err);
    st |= okv_gguf_writer_add_array(w, "test.list", OKV_GGUF_I32, (int32_t[]){1, 2, 3}, 3, &err);
    st |= okv_gguf_writer_add_str(w, "test.name", "hello", &err);
    st |= okv_gguf_writer_add_tensor(w, "weight.a", OKV_GGML_F32, 2, (int64_t[]){8, 2}, a, &err);
    st |= okv_gguf_writer_add_tensor(w, "weight.b", OKV_GGML_Q8_0, 2, (int64_t[]){32, 2}, b, &err);
    void *buf = NULL;
    if (!st) st = okv_gguf_writer_to_memory(w, &buf, size, &err);
    okv_gguf_writer_free(w);
    CHECK(st == OKV_OK, "base file: %s", err.message);
    return buf;
}

/* Offset just past the first occurrence of needle (a key or tensor name),
 * i.e. where the field that follows it starts. */
static size_t after(const uint8_t *buf, size_t size, const char *needle) {
    const uint8_t *p = memmem(buf, size, needle, strlen(needle));
    if (!p) {
        fprintf(stderr, "'%s' not in the base file\n", needle);
        exit(1);
    }
    return (size_t)(p - buf) + strlen(needle);
}

static void put32(uint8_t *p, uint32_t v) {
    for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static void put64(uint8_t *p, uint64_t v) {
    for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}

/* Opens size bytes of data from an exactly-sized copy (so ASan sees any
 * read past the end) and returns the status; err gets the message. */
static okv_status open_copy(const uint8_t *data, size_t size, okv_error *err) {
    uint8_t *copy = malloc(size ? size : 1);
    if (!copy) return OKV_ERR_NOMEM;
    if (size) memcpy(copy, data, size);
    okv_gguf *g = okv_gguf_open_memory(copy, size, err);
    okv_status st = g ? OKV_OK : err->status;
    okv_gguf_close(g);
    free(copy);
    return st;
}

/* The file, broken by patch, must be OKV_ERR_FORMAT naming both needles. */
static void expect_format(const uint8_t *buf, size_t size, const char *what, const char *needle1,
                          const char *needle2) {
    okv_error err = {0};
    okv_status st = open_copy(buf, size, &err);
    CHECK(st == OKV_ERR_FORMAT, "%s: status %s (%s)", what, okv_status_name(st), err.message);
    CHECK(strstr(err.message, needle1) != NULL, "%s: message '%s' lacks '%s'", what, err.message, needle1);
    CHECK(!needle2 || strstr(err.message, needle2) != NULL, "%s: message '%s' lacks '%s'", what,
          err.message, needle2);
}

static void test_corrupt_fields(void) {
    size_t size = 0;
    uint8_t *base = base_file(&size);
    if (!base) return;
    uint8_t *b = malloc(size);
    okv_error err;
    CHECK(open_copy(base, size, &err) == OKV_OK, "base file does not open: %s", err.message);
#define RESET() memcpy(b, base, size)

    RESET(); b[0] = 'X';
    expect_format(b, size, "bad magic", "magic", NULL);
    expect_format(b, 3, "3-byte file", "magic", NULL);
    expect_format(b, 0, "empty file", "magic", NULL);
    RESET(); put32(b + 4, 1);
    expect_format(b, size, "version 1", "version 1", NULL);
    RESET(); put32(b + 4, 4);
    expect_format(b, size, "version 4", "version 4", NULL);
    RESET(); put32(b + 4, 0x03000000);
    expect_format(b, size, "big-endian", "big-endian", NULL);
    RESET(); put32(b + 4, 2);
    CHECK(open_copy(b, size, &err) == OKV_OK, "version 2 refused: %s", err.message);

    RESET(); put64(b + 8, (uint64_t)1 << 62);
    expect_format(b, size, "n_tensors 2^62", "n_tensors 4611686018427387904", NULL);
    RESET(); put64(b + 16, (uint64_t)1 << 62);
    expect_format(b, size, "n_kv 2^62", "n_kv 4611686018427387904", NULL);
    RESET(); put64(b + 16, 5); /* one pair more than written: eats the tensor infos */
    expect_format(b, size, "n_kv + 1", "past end of file", NULL);
    RESET(); put64(b + 8, 3);
    expect_format(b, size, "n_tensors + 1", "tensor", NULL);

    size_t name_val = after(base, size, "test.name") + 4;
    RESET(); put64(b + name_val, (uint64_t)1 << 62);
    expect_format(b, size, "string length 2^62", "'test.name'", "string length 4611686018427387904");
    RESET(); put64(b + name_val, UINT64_MAX);
    expect_format(b, size, "string length 2^64-1", "'test.name'", "string length");

    size_t list_type = after(base, size, "test.list");
    /* 2^62 i32s are 2^64 bytes: a count * size that wraps to 0 would pass. */
    RESET(); put64(b + list_type + 8, (uint64_t)1 << 62);
    expect_format(b, size, "array count 2^62", "'test.list'", "array count 4611686018427387904");
    RESET(); put32(b + list_type + 4, 99);
    expect_format(b, size, "array element type 99", "'test.list'", "unknown array element type 99");
    RESET(); put32(b + after(base, size, "test.count"), 13);
    expect_format(b, size, "value type 13", "'test.count'", "unknown value type 13");

    size_t align_val = after(base, size, "general.alignment") + 4;
    RESET(); put32(b + align_val, 48);
    expect_format(b, size, "alignment 48", "general.alignment", "power of two");
    RESET(); put32(b + align_val, 0);
    expect_format(b, size, "alignment 0", "general.alignment", "power of two");
    RESET(); put32(b + align_val - 4, OKV_GGUF_F32);
    expect_format(b, size, "alignment as f32", "general.alignment", "want an integer");

    RESET(); memcpy(b + after(base, size, "test.name") - 9, "test.list", 9);
    expect_format(b, size, "duplicate key", "duplicate key 'test.list'", NULL);
    RESET(); b[after(base, size, "test.name") - 5] = '\0';
    expect_format(b, size, "NUL in key", "NUL", NULL);

    size_t a_dims = after(base, size, "weight.a");
    size_t b_dims = after(base, size, "weight.b");
    RESET(); put32(b + a_dims, 0);
    expect_format(b, size, "n_dims 0", "'weight.a'", "n_dims 0");
    RESET(); put32(b + a_dims, 5);
    expect_format(b, size, "n_dims 5", "'weight.a'", "n_dims 5");
    RESET(); put64(b + a_dims + 4, (uint64_t)1 << 40); put64(b + a_dims + 12, (uint64_t)1 << 40);
    expect_format(b, size, "ne product overflow", "'weight.a'", "overflows");
    RESET(); put64(b + a_dims + 4, (uint64_t)1 << 62);
    expect_format(b, size, "row bytes overflow", "'weight.a'", "overflows");
    RESET(); put64(b + a_dims + 12, (uint64_t)1 << 63);
    expect_format(b, size, "ne[1] 2^63", "'weight.a'", "ne[1]");
    RESET(); put64(b + a_dims + 12, 1000);
    expect_format(b, size, "ne[1] too big for the data", "'weight.a'", "past end of file");
    RESET(); put32(b + a_dims + 20, 99);
    expect_format(b, size, "tensor type 99", "'weight.a'", "unknown ggml type 99");
    RESET(); put32(b + a_dims + 20, 4); /* Q4_2, removed from ggml */
    expect_format(b, size, "tensor type 4", "'weight.a'", "unknown ggml type 4");
    RESET(); put64(b + b_dims + 4, 16);
    expect_format(b, size, "q8_0 ne[0] 16", "'weight.b'", "block size 32");
    size_t b_off = b_dims + 4 + 16 + 4;
    RESET(); put64(b + b_off, (uint64_t)1 << 20);
    expect_format(b, size, "offset past end", "'weight.b'", "data offset 1048576 + 68 bytes past end of file");
    RESET(); put64(b + b_off, UINT64_MAX - 31); /* 32-aligned; offset + size wraps */
    expect_format(b, size, "offset wraps", "'weight.b'", "past end of file");
    RESET(); put64(b + b_off, 68);
    expect_format(b, size, "misaligned offset", "'weight.b'", "alignment 32");
    RESET(); memcpy(b + a_dims - 8, "weight.b", 8);
    expect_format(b, size, "duplicate tensor", "duplicate tensor name 'weight.b'", NULL);
    RESET(); b[a_dims - 1] = '\0';
    expect_format(b, size, "NUL in tensor name", "NUL", NULL);

    /* Every prefix that loses any data is corrupt (the padding after the
     * last tensor is not data). */
    okv_gguf *whole = okv_gguf_open_memory(base, size, &err);
    const okv_gguf_tensor *last = okv_gguf_tensor_at(whole, 1);
    size_t end = last ? (size_t)((const uint8_t *)last->data - base) + last->n_bytes : size;
    okv_gguf_close(whole);
    CHECK(end > size - 32 && end <= size, "last tensor ends at %zu of %zu", end, size);
    int bad = 0;
    for (size_t cut = 0; cut < end; cut++) {
        okv_status st = open_copy(base, cut, &err);
        if (st != OKV_ERR_FORMAT || !err.message[0]) {
            if (!bad) CHECK(0, "prefix of %zu bytes: %s (%s)", cut, okv_status_name(st), err.message);
            bad++;
        }
    }
    CHECK(bad == 0, "%d of %zu prefixes not OKV_ERR_FORMAT", bad, end);

    /* Random byte damage: opening must stay clean (OK or FORMAT), and a
     * file that still opens must be safe to read everywhere. */
    uint64_t rng = 0x9e3779b97f4a7c15ull;
    int unclean = 0;
    for (int iter = 0; iter < 4000; iter++) {
        RESET();
        int n = 1 + (int)(rng % 4);
        for (int k = 0; k < n; k++) {
            rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
            size_t at = (size_t)(rng % (size - 64)); /* the header, metadata and infos */
            b[at] = (uint8_t)(rng >> 40);
        }
        uint8_t *copy = malloc(size);
        memcpy(copy, b, size);
        okv_gguf *g = okv_gguf_open_memory(copy, size, &err);
        if (!g && err.status != OKV_ERR_FORMAT) unclean++;
        for (int64_t i = 0; g && i < okv_gguf_n_kv(g); i++) {
            const char *k = okv_gguf_key(g, i), *s;
            size_t len;
            int64_t v;
            float f;
            uint64_t cnt = 0;
            okv_gguf_get_i64(g, k, &v, &err);
            okv_gguf_get_f32(g, k, &f, &err);
            okv_gguf_get_str(g, k, &s, &len, &err);
            if (okv_gguf_get_array(g, k, NULL, &cnt, &err) == OKV_OK)
                for (uint64_t j = 0; j < cnt; j++) {
                    okv_gguf_array_i64(g, k, j, &v, &err);
                    okv_gguf_array_str(g, k, j, &s, &len, &err);
                }
        }
        unsigned sum = 0;
        for (int64_t i = 0; g && i < okv_gguf_n_tensors(g); i++) {
            const okv_gguf_tensor *t = okv_gguf_tensor_at(g, i);
            for (size_t j = 0; j < t->n_bytes; j++) sum += ((const uint8_t *)t->data)[j];
        }
        (void)sum;
        okv_gguf_close(g);
        free(copy);
    }
    CHECK(unclean == 0, "%d damaged files failed with a status other than FORMAT", unclean);
#undef RESET
    free(b);
    free(base);
}

/* A hand-made byte stream, for what the writer will not produce. */
typedef struct {
    uint8_t b[4096];
    size_t n;
} bytes;
static void b32(bytes *x, uint32_t v) { put32(x->b + x->n, v); x->n += 4; }
static void b64(bytes *x, uint64_t v) { put64(x->b + x->n, v); x->n += 8; }
static void bstr(bytes *x, const char *s) {
    b64(x, strlen(s));
    memcpy(x->b + x->n, s, strlen(s));
    x->n += strlen(s);
}
static void bheader(bytes *x, uint32_t version, uint64_t n_tensors, uint64_t n_kv) {
    memcpy(x->b, "GGUF", 4);
    x->n = 4;
    b32(x, version);
    b64(x, n_tensors);
    b64(x, n_kv);
}

static void test_nested_arrays(void) {
    okv_error err;
    /* v2 file: an array of arrays ([[1, 2], ["x"]]) is skipped correctly and
     * the pair after it reads fine. */
    bytes x;
    bheader(&x, 2, 0, 2);
    bstr(&x, "nest");
    b32(&x, OKV_GGUF_ARRAY);
    b32(&x, OKV_GGUF_ARRAY);
    b64(&x, 2);
    b32(&x, OKV_GGUF_I32);
    b64(&x, 2);
    b32(&x, 1);
    b32(&x, 2);
    b32(&x, OKV_GGUF_STRING);
    b64(&x, 1);
    bstr(&x, "x");
    bstr(&x, "after");
    b32(&x, OKV_GGUF_U32);
    b32(&x, 42);
    okv_gguf *g = okv_gguf_open_memory(x.b, x.n, &err);
    CHECK(g != NULL, "nested arrays: %s", err.message);
    if (g) {
        uint32_t v = 0;
        okv_gguf_type et;
        uint64_t n;
        int64_t i64;
        CHECK(okv_gguf_version(g) == 2, "version %u", okv_gguf_version(g));
        CHECK_STATUS(okv_gguf_get_u32(g, "after", &v, &err), OKV_OK, err);
        CHECK(v == 42, "after = %u", v);
        CHECK_STATUS(okv_gguf_get_array(g, "nest", &et, &n, &err), OKV_OK, err);
        CHECK(et == OKV_GGUF_ARRAY && n == 2, "nest: %s x %" PRIu64, okv_gguf_type_name(et), n);
        CHECK_STATUS(okv_gguf_array_i64(g, "nest", 0, &i64, &err), OKV_ERR_FORMAT, err);
        okv_gguf_close(g);
    }
    /* Arrays nested 100 deep: refused, not recursed into. */
    bheader(&x, 3, 0, 1);
    bstr(&x, "deep");
    b32(&x, OKV_GGUF_ARRAY);
    for (int i = 0; i < 100; i++) {
        b32(&x, OKV_GGUF_ARRAY);
        b64(&x, 1);
    }
    b32(&x, OKV_GGUF_U8);
    b64(&x, 0);
    g = okv_gguf_open_memory(x.b, x.n, &err);
    CHECK(g == NULL && err.status == OKV_ERR_FORMAT, "100-deep arrays: %s", err.message);
    CHECK_MSG(err, "'deep'");
    CHECK_MSG(err, "nested");
    /* A string array whose count outruns the file, before any allocation. */
    bheader(&x, 3, 0, 1);
    bstr(&x, "strs");
    b32(&x, OKV_GGUF_ARRAY);
    b32(&x, OKV_GGUF_STRING);
    b64(&x, (uint64_t)1 << 62);
    g = okv_gguf_open_memory(x.b, x.n, &err);
    CHECK(g == NULL && err.status == OKV_ERR_FORMAT, "2^62 strings: %s", err.message);
    CHECK_MSG(err, "array count 4611686018427387904");
    /* No tensors and no data section: fine even without padding. */
    bheader(&x, 3, 0, 0);
    g = okv_gguf_open_memory(x.b, x.n, &err);
    CHECK(g != NULL && okv_gguf_n_kv(g) == 0 && okv_gguf_n_tensors(g) == 0, "empty GGUF: %s", err.message);
    okv_gguf_close(g);
    g = okv_gguf_open_memory(NULL, 4, &err);
    CHECK(g == NULL && err.status == OKV_ERR_INVALID, "NULL data accepted");
}

/* stories260K cut at every 1/64th of its size. */
static void test_truncated_model(const char *shared) {
    char path[4096];
    snprintf(path, sizeof path, "%s/models/stories260K.gguf", shared);
    size_t size = 0;
    uint8_t *buf = read_whole(path, &size);
    CHECK(buf != NULL, "read %s", path);
    if (!buf) return;
    for (int k = 0; k < 64; k++) {
        size_t cut = size / 64 * (size_t)k;
        okv_error err = {0};
        okv_status st = open_copy(buf, cut, &err);
        CHECK(st == OKV_ERR_FORMAT, "cut at %zu/%zu: %s", cut, size, okv_status_name(st));
        CHECK(strstr(err.message, "past end of file") || strstr(err.message, "magic") ||
                  strstr(err.message, "cannot fit"),
              "cut at %zu: message '%s'", cut, err.message);
        /* Past the metadata, the message names the tensor that lost its data. */
        if (k >= 8) CHECK(strstr(err.message, "tensor '") != NULL, "cut at %zu: '%s'", cut, err.message);
    }
    okv_error err;
    CHECK(open_copy(buf, size, &err) == OKV_OK, "whole file: %s", err.message);
    CHECK(open_copy(buf, size - 1, &err) == OKV_ERR_FORMAT, "one byte short: %s", err.message);
    CHECK_MSG(err, "tensor 'blk.4.ffn_norm.weight': data offset");
    free(buf);
}

int main(void) {
    const char *shared = check_shared_dir();
    test_types();
    test_writer();
    test_corrupt_fields();
    test_nested_arrays();
    if (shared) {
        test_real_files(shared);
        test_truncated_model(shared);
    }
    else printf("skipped: ../shared not found\n");
    return check_done();
}
