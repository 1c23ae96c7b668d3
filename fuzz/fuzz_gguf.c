/* libFuzzer target: the GGUF reader over arbitrary bytes.
 *
 * okv_gguf_open_memory must refuse a malformed file with OKV_ERR_FORMAT (or
 * NOMEM) and a message; a file it accepts must answer every getter within
 * bounds.  So every key is read through every typed getter, every array's
 * first and last elements are read, and every tensor's bytes are touched. */
#include <stdint.h>
#include <string.h>

#include "offkv/gguf.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static volatile uint8_t sink;

static void read_value(const okv_gguf *g, const char *key) {
    okv_error err;
    uint32_t u32; int32_t i32; uint64_t u64; int64_t i64; float f; double d; bool b;
    const char *s; size_t len;
    char buf[16];
    okv_gguf_get_u32(g, key, &u32, &err);
    okv_gguf_get_i32(g, key, &i32, &err);
    okv_gguf_get_u64(g, key, &u64, &err);
    okv_gguf_get_i64(g, key, &i64, &err);
    okv_gguf_get_f32(g, key, &f, &err);
    okv_gguf_get_f64(g, key, &d, &err);
    okv_gguf_get_bool(g, key, &b, &err);
    if (okv_gguf_get_str(g, key, &s, &len, &err) == OKV_OK && len) sink ^= (uint8_t)(s[0] ^ s[len - 1]);
    okv_gguf_get_str_buf(g, key, buf, sizeof buf, &err);
    okv_gguf_type et;
    uint64_t n;
    if (okv_gguf_get_array(g, key, &et, &n, &err) != OKV_OK || n == 0) return;
    const uint64_t at[3] = {0, n / 2, n - 1};
    for (int j = 0; j < 3; j++) {
        if (okv_gguf_array_str(g, key, at[j], &s, &len, &err) == OKV_OK && len)
            sink ^= (uint8_t)(s[0] ^ s[len - 1]);
        okv_gguf_array_i64(g, key, at[j], &i64, &err);
        okv_gguf_array_u64(g, key, at[j], &u64, &err);
        okv_gguf_array_f32(g, key, at[j], &f, &err);
        okv_gguf_array_f64(g, key, at[j], &d, &err);
        okv_gguf_array_bool(g, key, at[j], &b, &err);
    }
    /* one past the end must be refused, not read */
    if (okv_gguf_array_i64(g, key, n, &i64, &err) == OKV_OK) __builtin_trap();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    okv_error err;
    okv_gguf *g = okv_gguf_open_memory(data, size, &err);
    if (!g) {
        /* refused: with a status and a message saying why */
        if (err.status == OKV_OK || err.message[0] == '\0') __builtin_trap();
        return 0;
    }
    sink ^= (uint8_t)(okv_gguf_version(g) + okv_gguf_alignment(g));
    const int64_t n_kv = okv_gguf_n_kv(g);
    for (int64_t i = 0; i < n_kv; i++) {
        const char *key = okv_gguf_key(g, i);
        if (!key || okv_gguf_find_key(g, key) != i) __builtin_trap();
        sink ^= (uint8_t)okv_gguf_type_name(okv_gguf_kv_type(g, i))[0];
        read_value(g, key);
    }
    const int64_t n_t = okv_gguf_n_tensors(g);
    for (int64_t i = 0; i < n_t; i++) {
        const okv_gguf_tensor *t = okv_gguf_tensor_at(g, i);
        if (!t || okv_gguf_find_tensor(g, t->name) != i) __builtin_trap();
        if (t->n_bytes) {
            const uint8_t *p = t->data;
            sink ^= (uint8_t)(p[0] ^ p[t->n_bytes - 1]);
        }
        /* an accepted shape can be sized (an extent of 0 is a tensor of no bytes) */
        if (t->ne[0] > 0 && okv_ggml_row_size(t->type, t->ne[0]) == 0) __builtin_trap();
    }
    if (okv_gguf_tensor_at(g, n_t) || okv_gguf_key(g, n_kv)) __builtin_trap();
    okv_gguf_close(g);
    return 0;
}
