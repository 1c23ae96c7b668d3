/* GGUF v3 writer.  Metadata is serialized as it is added (so a later failure
 * cannot leave half a pair behind); tensors are recorded and laid out only
 * when written, each padded to the alignment, in the order added. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "offkv/outfile.h"
#include "gguf/bytes.h"
#include "offkv/gguf.h"

typedef struct {
    char *name;
    okv_ggml_type type;
    int32_t n_dims;
    int64_t ne[4];
    const void *data;
    okv_gguf_fill_fn fill;
    void *user;
    uint64_t n_bytes;
} wtensor;

struct okv_gguf_writer {
    uint8_t *kv; /* serialized pairs, back to back */
    size_t kv_len, kv_cap;
    char **keys;
    int64_t n_kv, keys_cap;
    wtensor *tensors;
    int64_t n_tensors, tensors_cap;
    uint32_t alignment;
};

okv_gguf_writer *okv_gguf_writer_create(okv_error *err) {
    okv_gguf_writer *w = calloc(1, sizeof *w);
    if (!w) {
        okv_fail(err, OKV_ERR_NOMEM, "out of memory for a GGUF writer");
        return NULL;
    }
    w->alignment = 32;
    okv_error_clear(err);
    return w;
}

void okv_gguf_writer_free(okv_gguf_writer *w) {
    if (!w) return;
    for (int64_t i = 0; i < w->n_kv; i++) free(w->keys[i]);
    for (int64_t i = 0; i < w->n_tensors; i++) free(w->tensors[i].name);
    free(w->keys);
    free(w->tensors);
    free(w->kv);
    free(w);
}

/* Grows *p (elements of size elem, capacity *cap) to hold need elements. */
static bool grow(void **p, int64_t *cap, int64_t need, size_t elem) {
    if (need <= *cap) return true;
    int64_t n = *cap ? *cap * 2 : 16;
    while (n < need) n *= 2;
    void *q = realloc(*p, (size_t)n * elem);
    if (!q) return false;
    *p = q;
    *cap = n;
    return true;
}

static okv_status check_key(const okv_gguf_writer *w, const char *key, okv_error *err) {
    if (!w) return okv_fail(err, OKV_ERR_INVALID, "NULL GGUF writer");
    if (!key || !key[0]) return okv_fail(err, OKV_ERR_INVALID, "GGUF writer: NULL or empty key");
    for (int64_t i = 0; i < w->n_kv; i++)
        if (strcmp(w->keys[i], key) == 0)
            return okv_fail(err, OKV_ERR_INVALID, "GGUF writer: key '%.200s' added twice", key);
    okv_error_clear(err); /* each add starts here; a later failure refills err */
    return OKV_OK;
}

/* Bytes one value of type t takes in the file (value points to the C
 * object, as for add_scalar), 0 for types the writer cannot store. */
static size_t value_size(okv_gguf_type t, const void *value) {
    if (t == OKV_GGUF_STRING) return 8 + strlen(*(const char *const *)value);
    return (size_t)okv_gguf_fixed_size((uint32_t)t);
}

/* Serializes one value of type t from its C object; returns bytes written. */
static size_t put_value(uint8_t *p, okv_gguf_type t, const void *v) {
    switch (t) {
    case OKV_GGUF_U8: p[0] = *(const uint8_t *)v; return 1;
    case OKV_GGUF_I8: p[0] = (uint8_t)*(const int8_t *)v; return 1;
    case OKV_GGUF_BOOL: p[0] = *(const bool *)v ? 1 : 0; return 1;
    case OKV_GGUF_U16: {
        uint16_t x = *(const uint16_t *)v;
        p[0] = (uint8_t)x;
        p[1] = (uint8_t)(x >> 8);
        return 2;
    }
    case OKV_GGUF_I16: {
        uint16_t x = (uint16_t)*(const int16_t *)v;
        p[0] = (uint8_t)x;
        p[1] = (uint8_t)(x >> 8);
        return 2;
    }
    case OKV_GGUF_U32: okv_st32(p, *(const uint32_t *)v); return 4;
    case OKV_GGUF_I32: okv_st32(p, (uint32_t)*(const int32_t *)v); return 4;
    case OKV_GGUF_F32: {
        uint32_t x;
        memcpy(&x, v, 4);
        okv_st32(p, x);
        return 4;
    }
    case OKV_GGUF_U64: okv_st64(p, *(const uint64_t *)v); return 8;
    case OKV_GGUF_I64: okv_st64(p, (uint64_t)*(const int64_t *)v); return 8;
    case OKV_GGUF_F64: {
        uint64_t x;
        memcpy(&x, v, 8);
        okv_st64(p, x);
        return 8;
    }
    case OKV_GGUF_STRING: {
        const char *s = *(const char *const *)v;
        size_t n = strlen(s);
        okv_st64(p, n);
        memcpy(p + 8, s, n);
        return 8 + n;
    }
    default: return 0;
    }
}

/* C object size of one element of type t in a caller's array. */
static size_t c_size(okv_gguf_type t) {
    switch (t) {
    case OKV_GGUF_BOOL: return sizeof(bool);
    case OKV_GGUF_STRING: return sizeof(const char *);
    default: return (size_t)okv_gguf_fixed_size((uint32_t)t);
    }
}

/* Appends key, type and value bytes (value_len of them, made by put) as
 * one pair; all validation is done by the caller, so only memory can fail. */
static okv_status append_pair(okv_gguf_writer *w, const char *key, okv_gguf_type t,
                              size_t value_len, okv_gguf_type elem, const void *values, uint64_t n,
                              okv_error *err) {
    size_t klen = strlen(key);
    size_t need = 8 + klen + 4 + value_len;
    char *kcopy = malloc(klen + 1);
    int64_t cap = (int64_t)w->kv_cap;
    void *kvp = w->kv, *keysp = w->keys;
    bool ok = kcopy && grow(&kvp, &cap, (int64_t)(w->kv_len + need), 1);
    w->kv = kvp;
    w->kv_cap = (size_t)cap;
    ok = ok && grow(&keysp, &w->keys_cap, w->n_kv + 1, sizeof *w->keys);
    w->keys = keysp;
    if (!ok) {
        free(kcopy);
        return okv_fail(err, OKV_ERR_NOMEM, "GGUF writer: out of memory adding '%.200s'", key);
    }
    memcpy(kcopy, key, klen + 1);
    uint8_t *p = w->kv + w->kv_len;
    okv_st64(p, klen);
    memcpy(p + 8, key, klen);
    p += 8 + klen;
    okv_st32(p, (uint32_t)t);
    p += 4;
    if (t == OKV_GGUF_ARRAY) {
        okv_st32(p, (uint32_t)elem);
        okv_st64(p + 4, n);
        p += 12;
        size_t step = c_size(elem);
        for (uint64_t i = 0; i < n; i++) p += put_value(p, elem, (const char *)values + i * step);
    } else {
        put_value(p, t, values);
    }
    w->kv_len += need;
    w->keys[w->n_kv++] = kcopy;
    return OKV_OK;
}

okv_status okv_gguf_writer_add_scalar(okv_gguf_writer *w, const char *key, okv_gguf_type t,
                                      const void *value, okv_error *err) {
    okv_status st = check_key(w, key, err);
    if (st) return st;
    if (t < OKV_GGUF_U8 || t > OKV_GGUF_F64 || t == OKV_GGUF_ARRAY)
        return okv_fail(err, OKV_ERR_INVALID, "GGUF writer: '%.200s': %d is not a scalar type", key, (int)t);
    if (!value || (t == OKV_GGUF_STRING && !*(const char *const *)value))
        return okv_fail(err, OKV_ERR_INVALID, "GGUF writer: '%.200s': NULL value", key);
    if (strcmp(key, "general.alignment") == 0) {
        uint32_t a = t == OKV_GGUF_U32 ? *(const uint32_t *)value : 0;
        if (t != OKV_GGUF_U32 || a == 0 || (a & (a - 1)) != 0)
            return okv_fail(err, OKV_ERR_INVALID,
                            "GGUF writer: general.alignment must be a u32 nonzero power of two");
        st = append_pair(w, key, t, value_size(t, value), t, value, 1, err);
        if (!st) w->alignment = a;
        return st;
    }
    return append_pair(w, key, t, value_size(t, value), t, value, 1, err);
}

okv_status okv_gguf_writer_add_array(okv_gguf_writer *w, const char *key, okv_gguf_type elem,
                                     const void *values, uint64_t n, okv_error *err) {
    okv_status st = check_key(w, key, err);
    if (st) return st;
    if (elem < OKV_GGUF_U8 || elem > OKV_GGUF_F64 || elem == OKV_GGUF_ARRAY)
        return okv_fail(err, OKV_ERR_INVALID, "GGUF writer: '%.200s': %d is not an array element type",
                        key, (int)elem);
    if (!values && n)
        return okv_fail(err, OKV_ERR_INVALID, "GGUF writer: '%.200s': NULL values", key);
    if (strcmp(key, "general.alignment") == 0)
        return okv_fail(err, OKV_ERR_INVALID, "GGUF writer: general.alignment must be a u32");
    size_t step = c_size(elem), len = 12;
    for (uint64_t i = 0; i < n; i++) {
        const void *v = (const char *)values + i * step;
        if (elem == OKV_GGUF_STRING && !*(const char *const *)v)
            return okv_fail(err, OKV_ERR_INVALID, "GGUF writer: '%.200s': NULL string at %" PRIu64, key, i);
        size_t vs = value_size(elem, v);
        if (len > SIZE_MAX / 2 - vs)
            return okv_fail(err, OKV_ERR_INVALID, "GGUF writer: '%.200s': array too large", key);
        len += vs;
    }
    return append_pair(w, key, OKV_GGUF_ARRAY, len, elem, values, n, err);
}

okv_status okv_gguf_writer_add_u32(okv_gguf_writer *w, const char *key, uint32_t v, okv_error *err) {
    return okv_gguf_writer_add_scalar(w, key, OKV_GGUF_U32, &v, err);
}
okv_status okv_gguf_writer_add_i32(okv_gguf_writer *w, const char *key, int32_t v, okv_error *err) {
    return okv_gguf_writer_add_scalar(w, key, OKV_GGUF_I32, &v, err);
}
okv_status okv_gguf_writer_add_u64(okv_gguf_writer *w, const char *key, uint64_t v, okv_error *err) {
    return okv_gguf_writer_add_scalar(w, key, OKV_GGUF_U64, &v, err);
}
okv_status okv_gguf_writer_add_f32(okv_gguf_writer *w, const char *key, float v, okv_error *err) {
    return okv_gguf_writer_add_scalar(w, key, OKV_GGUF_F32, &v, err);
}
okv_status okv_gguf_writer_add_bool(okv_gguf_writer *w, const char *key, bool v, okv_error *err) {
    return okv_gguf_writer_add_scalar(w, key, OKV_GGUF_BOOL, &v, err);
}
okv_status okv_gguf_writer_add_str(okv_gguf_writer *w, const char *key, const char *s, okv_error *err) {
    return okv_gguf_writer_add_scalar(w, key, OKV_GGUF_STRING, &s, err);
}

static okv_status add_tensor(okv_gguf_writer *w, const char *name, okv_ggml_type type, int32_t n_dims,
                             const int64_t *ne, const void *data, okv_gguf_fill_fn fill, void *user,
                             okv_error *err) {
    if (!w) return okv_fail(err, OKV_ERR_INVALID, "NULL GGUF writer");
    okv_error_clear(err); /* a later failure refills err */
    if (!name || !name[0]) return okv_fail(err, OKV_ERR_INVALID, "GGUF writer: NULL or empty tensor name");
    for (int64_t i = 0; i < w->n_tensors; i++)
        if (strcmp(w->tensors[i].name, name) == 0)
            return okv_fail(err, OKV_ERR_INVALID, "GGUF writer: tensor '%.200s' added twice", name);
    if (!data && !fill)
        return okv_fail(err, OKV_ERR_INVALID, "GGUF writer: tensor '%.200s': no data", name);
    const char *tn = okv_ggml_type_name((int32_t)type);
    if (!tn)
        return okv_fail(err, OKV_ERR_INVALID, "GGUF writer: tensor '%.200s': unknown ggml type %d", name,
                        (int)type);
    if (n_dims < 1 || n_dims > 4 || !ne)
        return okv_fail(err, OKV_ERR_INVALID, "GGUF writer: tensor '%.200s': n_dims %d outside 1..4",
                        name, (int)n_dims);
    for (int32_t d = 0; d < n_dims; d++)
        if (ne[d] < 1)
            return okv_fail(err, OKV_ERR_INVALID, "GGUF writer: tensor '%.200s': ne[%d] = %" PRId64 " < 1",
                            name, (int)d, ne[d]);
    if (ne[0] % okv_ggml_block_size((int32_t)type) != 0)
        return okv_fail(err, OKV_ERR_INVALID,
                        "GGUF writer: tensor '%.200s': ne[0] = %" PRId64 " not a multiple of the %s block size %" PRId64,
                        name, ne[0], tn, okv_ggml_block_size((int32_t)type));
    uint64_t bytes = okv_ggml_row_size((int32_t)type, ne[0]); /* 0 here: the row overflowed */
    for (int32_t d = 1; d < n_dims; d++) {
        if (bytes == 0 || bytes > (uint64_t)INT64_MAX / (uint64_t)ne[d])
            return okv_fail(err, OKV_ERR_INVALID, "GGUF writer: tensor '%.200s': size overflows", name);
        bytes *= (uint64_t)ne[d];
    }
    if (bytes == 0)
        return okv_fail(err, OKV_ERR_INVALID, "GGUF writer: tensor '%.200s': size overflows", name);
    size_t nlen = strlen(name);
    char *copy = malloc(nlen + 1);
    void *tp = w->tensors;
    bool ok = copy && grow(&tp, &w->tensors_cap, w->n_tensors + 1, sizeof *w->tensors);
    w->tensors = tp;
    if (!ok) {
        free(copy);
        return okv_fail(err, OKV_ERR_NOMEM, "GGUF writer: out of memory adding tensor '%.200s'", name);
    }
    memcpy(copy, name, nlen + 1);
    wtensor *t = &w->tensors[w->n_tensors++];
    *t = (wtensor){.name = copy, .type = type, .n_dims = n_dims, .data = data, .fill = fill,
                   .user = user, .n_bytes = bytes};
    for (int d = 0; d < 4; d++) t->ne[d] = d < n_dims ? ne[d] : 1;
    return OKV_OK;
}

okv_status okv_gguf_writer_add_tensor(okv_gguf_writer *w, const char *name, okv_ggml_type type,
                                      int32_t n_dims, const int64_t *ne, const void *data,
                                      okv_error *err) {
    if (!data) return okv_fail(err, OKV_ERR_INVALID, "GGUF writer: tensor '%.200s': NULL data", name ? name : "(null)");
    return add_tensor(w, name, type, n_dims, ne, data, NULL, NULL, err);
}

okv_status okv_gguf_writer_add_tensor_fn(okv_gguf_writer *w, const char *name, okv_ggml_type type,
                                         int32_t n_dims, const int64_t *ne, okv_gguf_fill_fn fill,
                                         void *user, okv_error *err) {
    if (!fill) return okv_fail(err, OKV_ERR_INVALID, "GGUF writer: tensor '%.200s': NULL fill", name ? name : "(null)");
    return add_tensor(w, name, type, n_dims, ne, NULL, fill, user, err);
}

/* ---- output ---- */

/* Where bytes go: a FILE, a buffer of the right size, or nowhere (only
 * counting, to size the buffer). */
typedef struct {
    FILE *f;
    uint8_t *buf;
    uint64_t pos;
    const char *path;
    okv_error *err;
} sink;

static okv_status put(sink *s, const void *p, size_t n) {
    if (s->f) {
        if (n && fwrite(p, 1, n, s->f) != n)
            return okv_fail(s->err, OKV_ERR_IO, "writing '%.200s': %s", s->path, strerror(errno));
    } else if (s->buf && n) {
        memcpy(s->buf + s->pos, p, n);
    }
    s->pos += n;
    return OKV_OK;
}

static okv_status put_u32(sink *s, uint32_t v) {
    uint8_t b[4];
    okv_st32(b, v);
    return put(s, b, 4);
}

static okv_status put_u64(sink *s, uint64_t v) {
    uint8_t b[8];
    okv_st64(b, v);
    return put(s, b, 8);
}

static okv_status pad(sink *s, uint64_t align) {
    static const uint8_t zeros[64];
    uint64_t n = (align - s->pos % align) % align;
    okv_status st = OKV_OK;
    while (n && !st) {
        size_t k = n < sizeof zeros ? (size_t)n : sizeof zeros;
        st = put(s, zeros, k);
        n -= k;
    }
    return st;
}

static uint64_t align_up(uint64_t x, uint64_t a) { return (x + a - 1) / a * a; }

/* Writes the whole file to s.  With a counting sink the fill callbacks are
 * not called: only s->pos matters. */
static okv_status emit(const okv_gguf_writer *w, sink *s) {
    okv_status st = put(s, "GGUF", 4);
    if (!st) st = put_u32(s, 3);
    if (!st) st = put_u64(s, (uint64_t)w->n_tensors);
    if (!st) st = put_u64(s, (uint64_t)w->n_kv);
    if (!st) st = put(s, w->kv, w->kv_len);
    uint64_t offset = 0;
    for (int64_t i = 0; i < w->n_tensors && !st; i++) {
        const wtensor *t = &w->tensors[i];
        size_t nlen = strlen(t->name);
        st = put_u64(s, nlen);
        if (!st) st = put(s, t->name, nlen);
        if (!st) st = put_u32(s, (uint32_t)t->n_dims);
        for (int32_t d = 0; d < t->n_dims && !st; d++) st = put_u64(s, (uint64_t)t->ne[d]);
        if (!st) st = put_u32(s, (uint32_t)t->type);
        if (!st) st = put_u64(s, offset);
        offset += align_up(t->n_bytes, w->alignment);
    }
    if (!st && w->n_tensors) st = pad(s, w->alignment);
    for (int64_t i = 0; i < w->n_tensors && !st; i++) {
        const wtensor *t = &w->tensors[i];
        if (t->data) {
            st = put(s, t->data, t->n_bytes);
        } else if (s->buf) {
            st = t->fill(t->user, t->name, s->buf + s->pos, t->n_bytes, s->err);
            s->pos += t->n_bytes;
        } else if (s->f) {
            void *tmp = malloc(t->n_bytes ? t->n_bytes : 1);
            if (!tmp)
                return okv_fail(s->err, OKV_ERR_NOMEM, "GGUF writer: out of memory for tensor '%.200s'", t->name);
            st = t->fill(t->user, t->name, tmp, t->n_bytes, s->err);
            if (!st) st = put(s, tmp, t->n_bytes);
            free(tmp);
        } else {
            s->pos += t->n_bytes;
        }
        if (!st) st = pad(s, w->alignment);
    }
    return st;
}

okv_status okv_gguf_writer_to_memory(const okv_gguf_writer *w, void **data, size_t *size,
                                     okv_error *err) {
    if (!w || !data || !size) return okv_fail(err, OKV_ERR_INVALID, "okv_gguf_writer_to_memory: NULL argument");
    sink count = {.err = err};
    okv_status st = emit(w, &count);
    if (st) return st;
    if (count.pos > SIZE_MAX)
        return okv_fail(err, OKV_ERR_NOMEM, "GGUF writer: %" PRIu64 " bytes do not fit memory", count.pos);
    uint8_t *buf = malloc(count.pos ? (size_t)count.pos : 1);
    if (!buf) return okv_fail(err, OKV_ERR_NOMEM, "GGUF writer: out of memory for %" PRIu64 " bytes", count.pos);
    sink s = {.buf = buf, .err = err};
    st = emit(w, &s);
    if (st) {
        free(buf);
        return st;
    }
    *data = buf;
    *size = (size_t)s.pos;
    okv_error_clear(err);
    return OKV_OK;
}

okv_status okv_gguf_writer_size(const okv_gguf_writer *w, uint64_t *size, okv_error *err) {
    if (!w || !size) return okv_fail(err, OKV_ERR_INVALID, "okv_gguf_writer_size: NULL argument");
    sink count = {.err = err};
    okv_status st = emit(w, &count);
    if (st) return st;
    *size = count.pos;
    okv_error_clear(err);
    return OKV_OK;
}

okv_status okv_gguf_writer_write(const okv_gguf_writer *w, const char *path, okv_error *err) {
    if (!w || !path) return okv_fail(err, OKV_ERR_INVALID, "okv_gguf_writer_write: NULL argument");
    okv_outfile out;
    okv_status st = okv_outfile_open(&out, path, err);
    if (st) return st;
    sink s = {.f = out.f, .path = path, .err = err};
    if ((st = emit(w, &s)) != OKV_OK) {
        okv_outfile_discard(&out);
        return st;
    }
    if ((st = okv_outfile_commit(&out, err)) != OKV_OK) return st;
    okv_error_clear(err);
    return OKV_OK;
}
