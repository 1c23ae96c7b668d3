/* GGUF reader.  okv_gguf_open* walks the whole file once, checking every
 * length against the bytes left before trusting it, and records where each
 * value and tensor lies; the getters then only index what was validated. */
#include <errno.h>
#include <fcntl.h>
#include <float.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/error.h"
#include "gguf/bytes.h"
#include "offkv/gguf.h"

#define GGUF_DEFAULT_ALIGNMENT 32u
/* Arrays of arrays are legal but nothing uses them; a bound keeps a crafted
 * file from recursing the stack away. */
#define GGUF_MAX_DEPTH 8

typedef struct {
    char *key;
    uint32_t type;
    uint64_t pos;       /* the value; for arrays, the first element */
    uint32_t elem;      /* arrays: element type */
    uint64_t n;         /* arrays: element count */
    uint64_t *str_pos;  /* arrays of strings: where each element starts */
} kv_entry;

typedef struct {
    const char *name;
    int64_t idx;
} name_index;

struct okv_gguf {
    const uint8_t *base;
    uint64_t size;
    void *map; /* non-NULL when okv_gguf_open mapped the file */
    uint32_t version, alignment;
    int64_t n_kv, n_tensors;
    kv_entry *kv;
    okv_gguf_tensor *tensors;
    name_index *kv_sorted, *tensor_sorted;
};

/* The parse cursor.  ctx names what is being read ("metadata 'x'",
 * "tensor #3") so every message says where the file went wrong. */
typedef struct {
    const uint8_t *base;
    uint64_t size, pos;
    okv_error *err;
    char ctx[192];
} cursor;

static okv_status need(cursor *c, uint64_t n, const char *field) {
    if (n > c->size - c->pos)
        return okv_fail(c->err, OKV_ERR_FORMAT,
                        "%s: %s at offset %" PRIu64 " needs %" PRIu64
                        " bytes, past end of file (size %" PRIu64 ")",
                        c->ctx, field, c->pos, n, c->size);
    return OKV_OK;
}

static okv_status rd_u32(cursor *c, uint32_t *v, const char *field) {
    okv_status st = need(c, 4, field);
    if (st) return st;
    *v = okv_ld32(c->base + c->pos);
    c->pos += 4;
    return OKV_OK;
}

static okv_status rd_u64(cursor *c, uint64_t *v, const char *field) {
    okv_status st = need(c, 8, field);
    if (st) return st;
    *v = okv_ld64(c->base + c->pos);
    c->pos += 8;
    return OKV_OK;
}

/* A string: u64 length, then the bytes.  *start is where the bytes begin. */
static okv_status rd_str(cursor *c, uint64_t *start, uint64_t *len, const char *field) {
    uint64_t at = c->pos, n;
    okv_status st = rd_u64(c, &n, field);
    if (st) return st;
    if (n > c->size - c->pos)
        return okv_fail(c->err, OKV_ERR_FORMAT,
                        "%s: %s %" PRIu64 " at offset %" PRIu64
                        " runs past end of file (size %" PRIu64 ")",
                        c->ctx, field, n, at, c->size);
    *start = c->pos;
    *len = n;
    c->pos += n;
    return OKV_OK;
}

/* Copies a name (key or tensor name) out of the file, NUL-terminated; a NUL
 * inside it would make lookups by C string silently wrong, so it is an error. */
static okv_status rd_name(cursor *c, char **out, const char *field) {
    uint64_t start = 0, len = 0;
    okv_status st = rd_str(c, &start, &len, field);
    if (st) return st;
    if (memchr(c->base + start, 0, len))
        return okv_fail(c->err, OKV_ERR_FORMAT, "%s: %s at offset %" PRIu64 " contains a NUL byte",
                        c->ctx, field, start);
    char *s = malloc(len + 1);
    if (!s) return okv_fail(c->err, OKV_ERR_NOMEM, "%s: out of memory for %s", c->ctx, field);
    memcpy(s, c->base + start, len);
    s[len] = '\0';
    *out = s;
    return OKV_OK;
}

static okv_status skip_value(cursor *c, uint32_t type, int depth);

/* An array's element type and count, then its elements.  If e is non-NULL
 * (a top-level value) the array is recorded there, with an index of its
 * strings so that element i is a constant-time lookup. */
static okv_status skip_array(cursor *c, int depth, kv_entry *e) {
    uint32_t elem;
    uint64_t n;
    okv_status st = rd_u32(c, &elem, "array element type");
    if (!st) st = rd_u64(c, &n, "array count");
    if (st) return st;
    if (elem > OKV_GGUF_F64)
        return okv_fail(c->err, OKV_ERR_FORMAT, "%s: unknown array element type %" PRIu32, c->ctx,
                        elem);
    if (e) {
        e->elem = elem;
        e->n = n;
        e->pos = c->pos;
    }
    uint64_t fixed = okv_gguf_fixed_size(elem);
    if (fixed) {
        if (n > (c->size - c->pos) / fixed)
            return okv_fail(c->err, OKV_ERR_FORMAT,
                            "%s: array count %" PRIu64 " of %s at offset %" PRIu64
                            " runs past end of file (size %" PRIu64 ")",
                            c->ctx, n, okv_gguf_type_name((okv_gguf_type)elem), c->pos, c->size);
        c->pos += n * fixed;
        return OKV_OK;
    }
    /* Strings take at least 8 bytes, arrays 12: a count beyond what the
     * rest of the file could hold is refused before anything is allocated. */
    uint64_t min = elem == OKV_GGUF_STRING ? 8 : 12;
    if (n > (c->size - c->pos) / min)
        return okv_fail(c->err, OKV_ERR_FORMAT,
                        "%s: array count %" PRIu64 " of %s at offset %" PRIu64
                        " cannot fit in the file (size %" PRIu64 ")",
                        c->ctx, n, okv_gguf_type_name((okv_gguf_type)elem), c->pos, c->size);
    if (e && elem == OKV_GGUF_STRING) {
        e->str_pos = malloc((n ? n : 1) * sizeof *e->str_pos);
        if (!e->str_pos)
            return okv_fail(c->err, OKV_ERR_NOMEM, "%s: out of memory indexing %" PRIu64 " strings",
                            c->ctx, n);
    }
    for (uint64_t i = 0; i < n; i++) {
        if (e && e->str_pos) e->str_pos[i] = c->pos;
        st = skip_value(c, elem, depth + 1);
        if (st) return st;
    }
    return OKV_OK;
}

static okv_status skip_value(cursor *c, uint32_t type, int depth) {
    uint64_t fixed = okv_gguf_fixed_size(type);
    if (fixed) {
        okv_status st = need(c, fixed, okv_gguf_type_name((okv_gguf_type)type));
        if (!st) c->pos += fixed;
        return st;
    }
    if (type == OKV_GGUF_STRING) {
        uint64_t start = 0, len = 0;
        return rd_str(c, &start, &len, "string length");
    }
    if (type == OKV_GGUF_ARRAY) {
        if (depth >= GGUF_MAX_DEPTH)
            return okv_fail(c->err, OKV_ERR_FORMAT, "%s: arrays nested deeper than %d", c->ctx,
                            GGUF_MAX_DEPTH);
        return skip_array(c, depth, NULL);
    }
    return okv_fail(c->err, OKV_ERR_FORMAT, "%s: unknown value type %" PRIu32, c->ctx, type);
}

static int cmp_name(const void *a, const void *b) {
    return strcmp(((const name_index *)a)->name, ((const name_index *)b)->name);
}

/* Sorts names for binary search, and reports the first duplicate (or NULL). */
static const char *sort_names(name_index *ix, int64_t n) {
    qsort(ix, (size_t)n, sizeof *ix, cmp_name);
    for (int64_t i = 1; i < n; i++)
        if (strcmp(ix[i - 1].name, ix[i].name) == 0) return ix[i].name;
    return NULL;
}

static int64_t find_name(const name_index *ix, int64_t n, const char *name) {
    if (!name || n == 0) return -1;
    name_index probe = {name, 0};
    const name_index *hit = bsearch(&probe, ix, (size_t)n, sizeof *ix, cmp_name);
    return hit ? hit->idx : -1;
}

static okv_status parse_kv(okv_gguf *g, cursor *c) {
    for (int64_t i = 0; i < g->n_kv; i++) {
        kv_entry *e = &g->kv[i];
        snprintf(c->ctx, sizeof c->ctx, "metadata #%" PRId64, i);
        okv_status st = rd_name(c, &e->key, "key length");
        if (st) return st;
        snprintf(c->ctx, sizeof c->ctx, "metadata '%.150s'", e->key);
        st = rd_u32(c, &e->type, "value type");
        if (st) return st;
        e->pos = c->pos;
        if (e->type == OKV_GGUF_ARRAY)
            st = skip_array(c, 1, e);
        else
            st = skip_value(c, e->type, 0);
        if (st) return st;
    }
    g->kv_sorted = malloc((size_t)(g->n_kv ? g->n_kv : 1) * sizeof *g->kv_sorted);
    if (!g->kv_sorted) return okv_fail(c->err, OKV_ERR_NOMEM, "out of memory indexing metadata");
    for (int64_t i = 0; i < g->n_kv; i++) g->kv_sorted[i] = (name_index){g->kv[i].key, i};
    const char *dup = sort_names(g->kv_sorted, g->n_kv);
    if (dup) return okv_fail(c->err, OKV_ERR_FORMAT, "metadata: duplicate key '%.200s'", dup);

    if (okv_gguf_find_key(g, "general.alignment") >= 0) {
        uint32_t a = 0;
        okv_status st = okv_gguf_get_u32(g, "general.alignment", &a, c->err);
        if (st) return st;
        if (a == 0 || (a & (a - 1)) != 0)
            return okv_fail(c->err, OKV_ERR_FORMAT,
                            "metadata 'general.alignment': %" PRIu32 " is not a nonzero power of two", a);
        g->alignment = a;
    }
    return OKV_OK;
}

static okv_status parse_tensor_info(okv_gguf *g, cursor *c) {
    for (int64_t i = 0; i < g->n_tensors; i++) {
        okv_gguf_tensor *t = &g->tensors[i];
        char *name = NULL;
        snprintf(c->ctx, sizeof c->ctx, "tensor #%" PRId64, i);
        okv_status st = rd_name(c, &name, "name length");
        if (st) return st;
        t->name = name;
        snprintf(c->ctx, sizeof c->ctx, "tensor '%.150s'", name);
        uint32_t n_dims, type;
        st = rd_u32(c, &n_dims, "n_dims");
        if (st) return st;
        if (n_dims < 1 || n_dims > 4)
            return okv_fail(c->err, OKV_ERR_FORMAT, "%s: n_dims %" PRIu32 " outside 1..4", c->ctx,
                            n_dims);
        t->n_dims = (int32_t)n_dims;
        for (int d = 0; d < 4; d++) t->ne[d] = 1;
        for (uint32_t d = 0; d < n_dims; d++) {
            uint64_t ne;
            st = rd_u64(c, &ne, "ne");
            if (st) return st;
            if (ne > (uint64_t)INT64_MAX)
                return okv_fail(c->err, OKV_ERR_FORMAT, "%s: ne[%" PRIu32 "] = %" PRIu64 " too large",
                                c->ctx, d, ne);
            t->ne[d] = (int64_t)ne;
        }
        st = rd_u32(c, &type, "type");
        if (st) return st;
        if (type >= OKV_GGML_TYPE_END || !okv_ggml_type_name((int32_t)type))
            return okv_fail(c->err, OKV_ERR_FORMAT, "%s: unknown ggml type %" PRIu32, c->ctx, type);
        t->type = (okv_ggml_type)type;
        st = rd_u64(c, &t->offset, "data offset");
        if (st) return st;
    }
    return OKV_OK;
}

/* With every description read, the data section's start is known: now each
 * tensor's shape, size and byte range can be checked. */
static okv_status place_tensors(okv_gguf *g, cursor *c) {
    uint64_t a = g->alignment;
    uint64_t start = (c->pos + a - 1) / a * a; /* pos <= size < 2^63: no overflow */
    for (int64_t i = 0; i < g->n_tensors; i++) {
        okv_gguf_tensor *t = &g->tensors[i];
        const char *tn = okv_ggml_type_name(t->type);
        int64_t blk = okv_ggml_block_size(t->type);
        if (t->ne[0] % blk != 0)
            return okv_fail(c->err, OKV_ERR_FORMAT,
                            "tensor '%.150s': ne[0] = %" PRId64 " is not a multiple of the %s block size %" PRId64,
                            t->name, t->ne[0], tn, blk);
        uint64_t bytes = okv_ggml_row_size(t->type, t->ne[0]);
        bool row_overflow = t->ne[0] != 0 && bytes == 0;
        for (int d = 1; d < 4; d++) {
            uint64_t ne = (uint64_t)t->ne[d];
            if (row_overflow || (ne != 0 && bytes > UINT64_MAX / ne))
                return okv_fail(c->err, OKV_ERR_FORMAT,
                                "tensor '%.150s': shape %" PRId64 " x %" PRId64 " x %" PRId64 " x %" PRId64
                                " of %s overflows",
                                t->name, t->ne[0], t->ne[1], t->ne[2], t->ne[3], tn);
            bytes *= ne;
        }
        if (t->offset % a != 0)
            return okv_fail(c->err, OKV_ERR_FORMAT,
                            "tensor '%.150s': data offset %" PRIu64 " is not a multiple of the alignment %" PRIu64,
                            t->name, t->offset, a);
        if (start > c->size || t->offset > c->size - start || bytes > c->size - start - t->offset)
            return okv_fail(c->err, OKV_ERR_FORMAT,
                            "tensor '%.150s': data offset %" PRIu64 " + %" PRIu64
                            " bytes past end of file (data section at %" PRIu64 ", size %" PRIu64 ")",
                            t->name, t->offset, bytes, start, c->size);
        t->n_bytes = (size_t)bytes;
        t->data = g->base + start + t->offset;
    }
    g->tensor_sorted = malloc((size_t)(g->n_tensors ? g->n_tensors : 1) * sizeof *g->tensor_sorted);
    if (!g->tensor_sorted) return okv_fail(c->err, OKV_ERR_NOMEM, "out of memory indexing tensors");
    for (int64_t i = 0; i < g->n_tensors; i++) g->tensor_sorted[i] = (name_index){g->tensors[i].name, i};
    const char *dup = sort_names(g->tensor_sorted, g->n_tensors);
    if (dup) return okv_fail(c->err, OKV_ERR_FORMAT, "duplicate tensor name '%.200s'", dup);
    return OKV_OK;
}

static okv_status parse(okv_gguf *g, okv_error *err) {
    cursor c = {.base = g->base, .size = g->size, .pos = 0, .err = err};
    snprintf(c.ctx, sizeof c.ctx, "GGUF header");
    if (g->size < 4 || memcmp(g->base, "GGUF", 4) != 0)
        return okv_fail(err, OKV_ERR_FORMAT, "GGUF header: bad magic (not a GGUF file)");
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    /* The header is read byte by byte (bytes.h), but tensor data is used in
     * place as the host's floats and integers. */
    return okv_fail(err, OKV_ERR_UNSUPPORTED,
                    "GGUF: this processor is big-endian; offkv uses GGUF's little-endian tensor data in place "
                    "and runs on little-endian processors only");
#endif
    c.pos = 4;
    okv_status st = rd_u32(&c, &g->version, "version");
    if (st) return st;
    if (g->version != 2 && g->version != 3) {
        /* A big-endian file reads as a version with its high byte set. */
        if ((g->version & 0xffff) == 0)
            return okv_fail(err, OKV_ERR_FORMAT,
                            "GGUF header: version field 0x%08" PRIx32 " looks big-endian; only little-endian files are supported",
                            g->version);
        return okv_fail(err, OKV_ERR_FORMAT,
                        "GGUF header: unsupported version %" PRIu32 " (supported: 2, 3)", g->version);
    }
    uint64_t n_tensors, n_kv;
    st = rd_u64(&c, &n_tensors, "n_tensors");
    if (!st) st = rd_u64(&c, &n_kv, "n_kv");
    if (st) return st;
    /* Minimum encodings: a tensor info is 32 bytes (name length, n_dims,
     * one ne, type, offset), a pair 13 (key length, type, one byte). */
    uint64_t left = g->size - c.pos;
    if (n_tensors > left / 32)
        return okv_fail(err, OKV_ERR_FORMAT,
                        "GGUF header: n_tensors %" PRIu64 " cannot fit in a file of %" PRIu64 " bytes",
                        n_tensors, g->size);
    if (n_kv > left / 13)
        return okv_fail(err, OKV_ERR_FORMAT,
                        "GGUF header: n_kv %" PRIu64 " cannot fit in a file of %" PRIu64 " bytes", n_kv,
                        g->size);
    g->n_kv = (int64_t)n_kv;
    g->kv = calloc(n_kv ? n_kv : 1, sizeof *g->kv);
    if (!g->kv) return okv_fail(err, OKV_ERR_NOMEM, "out of memory for %" PRIu64 " metadata pairs", n_kv);
    st = parse_kv(g, &c);
    if (st) return st;
    g->n_tensors = (int64_t)n_tensors;
    g->tensors = calloc(n_tensors ? n_tensors : 1, sizeof *g->tensors);
    if (!g->tensors) return okv_fail(err, OKV_ERR_NOMEM, "out of memory for %" PRIu64 " tensors", n_tensors);
    st = parse_tensor_info(g, &c);
    if (!st) st = place_tensors(g, &c);
    return st;
}

static okv_gguf *open_bytes(const void *data, uint64_t size, void *map, okv_error *err) {
    okv_gguf *g = calloc(1, sizeof *g);
    if (!g) {
        if (map) munmap(map, size);
        okv_fail(err, OKV_ERR_NOMEM, "out of memory opening GGUF");
        return NULL;
    }
    g->base = data;
    g->size = size;
    g->map = map;
    g->alignment = GGUF_DEFAULT_ALIGNMENT;
    if (parse(g, err) != OKV_OK) {
        okv_gguf_close(g);
        return NULL;
    }
    okv_error_clear(err);
    return g;
}

okv_gguf *okv_gguf_open_memory(const void *data, size_t size, okv_error *err) {
    if (!data && size) {
        okv_fail(err, OKV_ERR_INVALID, "okv_gguf_open_memory: NULL data with size %zu", size);
        return NULL;
    }
    static const uint8_t empty[1];
    return open_bytes(data ? data : empty, size, NULL, err);
}

static const char *file_kind(mode_t mode) {
    if (S_ISFIFO(mode)) return "FIFO";
    if (S_ISDIR(mode)) return "directory";
    if (S_ISCHR(mode)) return "character device";
    if (S_ISSOCK(mode)) return "socket";
    return "special file";
}

okv_gguf *okv_gguf_open(const char *path, okv_error *err) {
    if (!path) {
        okv_fail(err, OKV_ERR_INVALID, "okv_gguf_open: NULL path");
        return NULL;
    }
    /* Non-blocking, so that a FIFO (or a device that waits) cannot hang the
     * open; the type is checked before anything is read. */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) {
        okv_fail(err, OKV_ERR_IO, "cannot open '%s': %s", path, strerror(errno));
        return NULL;
    }
    struct stat sb;
    if (fstat(fd, &sb) != 0) {
        okv_fail(err, OKV_ERR_IO, "cannot stat '%s': %s", path, strerror(errno));
        close(fd);
        return NULL;
    }
    if (!S_ISREG(sb.st_mode) && !S_ISBLK(sb.st_mode)) {
        okv_fail(err, OKV_ERR_IO, "'%s' is not a regular file (it is a %s)", path, file_kind(sb.st_mode));
        close(fd);
        return NULL;
    }
    if (S_ISBLK(sb.st_mode)) {
        /* A block device's size is where its end is, not st_size. */
        off_t end = lseek(fd, 0, SEEK_END);
        sb.st_size = end > 0 ? end : 0;
    }
    if (sb.st_size == 0) {
        close(fd);
        okv_fail(err, OKV_ERR_FORMAT, "'%s': empty file, not a GGUF file", path);
        return NULL;
    }
    void *map = mmap(NULL, (size_t)sb.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    int map_errno = errno;
    close(fd);
    if (map == MAP_FAILED) {
        okv_fail(err, OKV_ERR_IO, "cannot map '%s': %s", path, strerror(map_errno));
        return NULL;
    }
    okv_gguf *g = open_bytes(map, (uint64_t)sb.st_size, map, err);
    if (!g && err) {
        /* Say which file: a model load names several. */
        char msg[sizeof err->message + 512];
        snprintf(msg, sizeof msg, "%.500s: %s", path, err->message);
        size_t n = strlen(msg) < sizeof err->message - 1 ? strlen(msg) : sizeof err->message - 1;
        memcpy(err->message, msg, n);
        err->message[n] = '\0';
    }
    return g;
}

void okv_gguf_close(okv_gguf *g) {
    if (!g) return;
    for (int64_t i = 0; g->kv && i < g->n_kv; i++) {
        free(g->kv[i].key);
        free(g->kv[i].str_pos);
    }
    for (int64_t i = 0; g->tensors && i < g->n_tensors; i++) free((char *)g->tensors[i].name);
    free(g->kv);
    free(g->tensors);
    free(g->kv_sorted);
    free(g->tensor_sorted);
    if (g->map) munmap(g->map, (size_t)g->size);
    free(g);
}

uint32_t okv_gguf_version(const okv_gguf *g) { return g ? g->version : 0; }
uint32_t okv_gguf_alignment(const okv_gguf *g) { return g ? g->alignment : 0; }
int64_t okv_gguf_n_kv(const okv_gguf *g) { return g ? g->n_kv : 0; }
int64_t okv_gguf_n_tensors(const okv_gguf *g) { return g ? g->n_tensors : 0; }

const char *okv_gguf_key(const okv_gguf *g, int64_t i) {
    return g && i >= 0 && i < g->n_kv ? g->kv[i].key : NULL;
}

int64_t okv_gguf_find_key(const okv_gguf *g, const char *key) {
    return g && g->kv_sorted ? find_name(g->kv_sorted, g->n_kv, key) : -1;
}

okv_gguf_type okv_gguf_kv_type(const okv_gguf *g, int64_t i) {
    return g && i >= 0 && i < g->n_kv ? (okv_gguf_type)g->kv[i].type : OKV_GGUF_NONE;
}

const char *okv_gguf_type_name(okv_gguf_type t) {
    static const char *const names[] = {"u8",   "i8",     "u16",   "i16", "u32", "i32", "f32",
                                        "bool", "string", "array", "u64", "i64", "f64"};
    return t >= 0 && t <= OKV_GGUF_F64 ? names[t] : "?";
}

int64_t okv_gguf_find_tensor(const okv_gguf *g, const char *name) {
    return g && g->tensor_sorted ? find_name(g->tensor_sorted, g->n_tensors, name) : -1;
}

const okv_gguf_tensor *okv_gguf_tensor_at(const okv_gguf *g, int64_t i) {
    return g && i >= 0 && i < g->n_tensors ? &g->tensors[i] : NULL;
}

/* ---- typed access ---- */

static okv_status lookup(const okv_gguf *g, const char *key, const kv_entry **e, okv_error *err) {
    if (!g || !key) return okv_fail(err, OKV_ERR_INVALID, "NULL GGUF handle or key");
    int64_t i = okv_gguf_find_key(g, key);
    if (i < 0) return okv_fail(err, OKV_ERR_NOT_FOUND, "metadata key '%.200s' not found", key);
    *e = &g->kv[i];
    /* Every getter starts here: a later check that fails refills err, so a
     * getter that succeeds leaves it clear (status.h's promise). */
    okv_error_clear(err);
    return OKV_OK;
}

/* An integer of any width, as sign + magnitude so u64 and i64 both fit. */
typedef struct {
    bool neg;
    uint64_t mag;
} wide_int;

static bool load_int(const uint8_t *p, uint32_t type, wide_int *v) {
    int64_t s;
    switch (type) {
    case OKV_GGUF_U8: *v = (wide_int){false, p[0]}; return true;
    case OKV_GGUF_U16: *v = (wide_int){false, okv_ld16(p)}; return true;
    case OKV_GGUF_U32: *v = (wide_int){false, okv_ld32(p)}; return true;
    case OKV_GGUF_U64: *v = (wide_int){false, okv_ld64(p)}; return true;
    case OKV_GGUF_I8: s = (int8_t)p[0]; break;
    case OKV_GGUF_I16: s = (int16_t)okv_ld16(p); break;
    case OKV_GGUF_I32: s = (int32_t)okv_ld32(p); break;
    case OKV_GGUF_I64: s = (int64_t)okv_ld64(p); break;
    default: return false;
    }
    /* -(uint64_t)s is the magnitude even for INT64_MIN. */
    *v = s < 0 ? (wide_int){true, -(uint64_t)s} : (wide_int){false, (uint64_t)s};
    return true;
}

/* Range-checks v against [-(neg_max), pos_max] and says why not. */
static okv_status fit_int(wide_int v, uint64_t neg_max, uint64_t pos_max, const char *what,
                          const char *want, okv_error *err) {
    if (v.neg ? v.mag <= neg_max : v.mag <= pos_max) return OKV_OK;
    return okv_fail(err, OKV_ERR_FORMAT, "%s: value %s%" PRIu64 " does not fit %s", what,
                    v.neg ? "-" : "", v.mag, want);
}

static okv_status get_int(const okv_gguf *g, const char *key, wide_int *v, okv_error *err) {
    const kv_entry *e;
    okv_status st = lookup(g, key, &e, err);
    if (st) return st;
    if (!load_int(g->base + e->pos, e->type, v))
        return okv_fail(err, OKV_ERR_FORMAT, "metadata '%.200s' is %s, want an integer", key,
                        okv_gguf_type_name((okv_gguf_type)e->type));
    return OKV_OK;
}

#define WHAT_KEY(buf, key) (snprintf(buf, sizeof buf, "metadata '%.200s'", key), buf)

okv_status okv_gguf_get_u32(const okv_gguf *g, const char *key, uint32_t *out, okv_error *err) {
    wide_int v;
    char what[224];
    okv_status st = get_int(g, key, &v, err);
    if (!st) st = fit_int(v, 0, UINT32_MAX, WHAT_KEY(what, key), "u32", err);
    if (!st && out) *out = (uint32_t)v.mag;
    return st;
}

okv_status okv_gguf_get_i32(const okv_gguf *g, const char *key, int32_t *out, okv_error *err) {
    wide_int v;
    char what[224];
    okv_status st = get_int(g, key, &v, err);
    if (!st) st = fit_int(v, (uint64_t)INT32_MAX + 1, INT32_MAX, WHAT_KEY(what, key), "i32", err);
    if (!st && out) *out = v.neg ? (int32_t)(-(int64_t)(v.mag - 1) - 1) : (int32_t)v.mag;
    return st;
}

okv_status okv_gguf_get_u64(const okv_gguf *g, const char *key, uint64_t *out, okv_error *err) {
    wide_int v;
    char what[224];
    okv_status st = get_int(g, key, &v, err);
    if (!st) st = fit_int(v, 0, UINT64_MAX, WHAT_KEY(what, key), "u64", err);
    if (!st && out) *out = v.mag;
    return st;
}

static int64_t to_i64(wide_int v) {
    return v.neg ? -(int64_t)(v.mag - 1) - 1 : (int64_t)v.mag;
}

okv_status okv_gguf_get_i64(const okv_gguf *g, const char *key, int64_t *out, okv_error *err) {
    wide_int v;
    char what[224];
    okv_status st = get_int(g, key, &v, err);
    if (!st) st = fit_int(v, (uint64_t)INT64_MAX + 1, INT64_MAX, WHAT_KEY(what, key), "i64", err);
    if (!st && out) *out = to_i64(v);
    return st;
}

static okv_status load_f32(const uint8_t *p, uint32_t type, float *out, const char *what,
                           okv_error *err) {
    if (type == OKV_GGUF_F32) {
        *out = okv_ldf32(p);
        return OKV_OK;
    }
    if (type == OKV_GGUF_F64) {
        double d = okv_ldf64(p);
        if (isfinite(d) && (d > FLT_MAX || d < -FLT_MAX))
            return okv_fail(err, OKV_ERR_FORMAT, "%s: f64 value %g does not fit f32", what, d);
        *out = (float)d;
        return OKV_OK;
    }
    return okv_fail(err, OKV_ERR_FORMAT, "%s is %s, want a float", what,
                    okv_gguf_type_name((okv_gguf_type)type));
}

okv_status okv_gguf_get_f32(const okv_gguf *g, const char *key, float *out, okv_error *err) {
    const kv_entry *e;
    char what[224];
    float f = 0;
    okv_status st = lookup(g, key, &e, err);
    if (!st) st = load_f32(g->base + e->pos, e->type, &f, WHAT_KEY(what, key), err);
    if (!st && out) *out = f;
    return st;
}

/* An f32 or f64 value as a double: exact for both. */
static okv_status load_f64(const uint8_t *p, uint32_t type, double *out, const char *what, okv_error *err) {
    if (type == OKV_GGUF_F32 || type == OKV_GGUF_F64) {
        *out = type == OKV_GGUF_F32 ? (double)okv_ldf32(p) : okv_ldf64(p);
        return OKV_OK;
    }
    return okv_fail(err, OKV_ERR_FORMAT, "%s is %s, want a float", what, okv_gguf_type_name((okv_gguf_type)type));
}

okv_status okv_gguf_get_f64(const okv_gguf *g, const char *key, double *out, okv_error *err) {
    const kv_entry *e;
    char what[224];
    double d = 0;
    okv_status st = lookup(g, key, &e, err);
    if (!st) st = load_f64(g->base + e->pos, e->type, &d, WHAT_KEY(what, key), err);
    if (!st && out) *out = d;
    return st;
}

okv_status okv_gguf_get_bool(const okv_gguf *g, const char *key, bool *out, okv_error *err) {
    const kv_entry *e;
    okv_status st = lookup(g, key, &e, err);
    if (st) return st;
    if (e->type != OKV_GGUF_BOOL)
        return okv_fail(err, OKV_ERR_FORMAT, "metadata '%.200s' is %s, want bool", key,
                        okv_gguf_type_name((okv_gguf_type)e->type));
    if (out) *out = g->base[e->pos] != 0;
    return OKV_OK;
}

/* The string whose length field is at pos (validated at open). */
static void load_str(const okv_gguf *g, uint64_t pos, const char **s, size_t *len) {
    if (s) *s = (const char *)g->base + pos + 8;
    if (len) *len = (size_t)okv_ld64(g->base + pos);
}

okv_status okv_gguf_get_str(const okv_gguf *g, const char *key, const char **s, size_t *len,
                            okv_error *err) {
    const kv_entry *e;
    okv_status st = lookup(g, key, &e, err);
    if (st) return st;
    if (e->type != OKV_GGUF_STRING)
        return okv_fail(err, OKV_ERR_FORMAT, "metadata '%.200s' is %s, want string", key,
                        okv_gguf_type_name((okv_gguf_type)e->type));
    load_str(g, e->pos, s, len);
    return OKV_OK;
}

okv_status okv_gguf_get_str_buf(const okv_gguf *g, const char *key, char *buf, size_t cap,
                                okv_error *err) {
    if (!buf || cap == 0) return okv_fail(err, OKV_ERR_INVALID, "okv_gguf_get_str_buf: no buffer");
    buf[0] = '\0';
    const char *s = NULL;
    size_t len = 0;
    okv_status st = okv_gguf_get_str(g, key, &s, &len, err);
    if (st) return st;
    if (len >= cap)
        return okv_fail(err, OKV_ERR_INVALID, "metadata '%.200s': %zu-byte string does not fit a %zu-byte buffer",
                        key, len, cap);
    memcpy(buf, s, len);
    buf[len] = '\0';
    return OKV_OK;
}

okv_status okv_gguf_get_array(const okv_gguf *g, const char *key, okv_gguf_type *elem_type,
                              uint64_t *n, okv_error *err) {
    const kv_entry *e;
    okv_status st = lookup(g, key, &e, err);
    if (st) return st;
    if (e->type != OKV_GGUF_ARRAY)
        return okv_fail(err, OKV_ERR_FORMAT, "metadata '%.200s' is %s, want array", key,
                        okv_gguf_type_name((okv_gguf_type)e->type));
    if (elem_type) *elem_type = (okv_gguf_type)e->elem;
    if (n) *n = e->n;
    return OKV_OK;
}

/* Finds array key and the bytes of its element i, checking the element kind
 * ("string", "integer", "float", "bool") against accept(). */
static okv_status array_elem(const okv_gguf *g, const char *key, uint64_t i, bool (*accept)(uint32_t),
                             const char *want, const kv_entry **ep, const uint8_t **p,
                             okv_error *err) {
    const kv_entry *e;
    okv_status st = okv_gguf_get_array(g, key, NULL, NULL, err);
    if (st) return st;
    lookup(g, key, &e, err);
    if (!accept(e->elem))
        return okv_fail(err, OKV_ERR_FORMAT, "metadata '%.200s' is an array of %s, want %s", key,
                        okv_gguf_type_name((okv_gguf_type)e->elem), want);
    if (i >= e->n)
        return okv_fail(err, OKV_ERR_INVALID, "metadata '%.200s': index %" PRIu64 " outside array of %" PRIu64,
                        key, i, e->n);
    *ep = e;
    *p = e->elem == OKV_GGUF_STRING ? g->base + e->str_pos[i]
                                    : g->base + e->pos + i * okv_gguf_fixed_size(e->elem);
    return OKV_OK;
}

static bool is_string(uint32_t t) { return t == OKV_GGUF_STRING; }
static bool is_int(uint32_t t) {
    wide_int v;
    static const uint8_t zero[8];
    return load_int(zero, t, &v);
}
static bool is_float(uint32_t t) { return t == OKV_GGUF_F32 || t == OKV_GGUF_F64; }
static bool is_bool(uint32_t t) { return t == OKV_GGUF_BOOL; }

okv_status okv_gguf_array_str(const okv_gguf *g, const char *key, uint64_t i, const char **s,
                              size_t *len, okv_error *err) {
    const kv_entry *e = NULL;
    const uint8_t *p = NULL;
    okv_status st = array_elem(g, key, i, is_string, "strings", &e, &p, err);
    if (!st) load_str(g, (uint64_t)(p - g->base), s, len);
    return st;
}

/* Element i of an array of numbers (accept: its element types): where it
 * is, its type, and its name for errors (what, 256 bytes). */
static okv_status array_num(const okv_gguf *g, const char *key, uint64_t i, bool (*accept)(uint32_t),
                            const char *want, const uint8_t **p, uint32_t *type, char *what, okv_error *err) {
    const kv_entry *e = NULL;
    okv_status st = array_elem(g, key, i, accept, want, &e, p, err);
    if (st) return st;
    *type = e->elem;
    snprintf(what, 256, "metadata '%.200s'[%" PRIu64 "]", key, i);
    return OKV_OK;
}

/* Element i of an array of integers, whatever their width. */
static okv_status array_wide(const okv_gguf *g, const char *key, uint64_t i, wide_int *v, char *what,
                             okv_error *err) {
    const uint8_t *p = NULL;
    uint32_t t = 0;
    okv_status st = array_num(g, key, i, is_int, "integers", &p, &t, what, err);
    if (!st) load_int(p, t, v);
    return st;
}

okv_status okv_gguf_array_i64(const okv_gguf *g, const char *key, uint64_t i, int64_t *out,
                              okv_error *err) {
    char what[256];
    wide_int v;
    okv_status st = array_wide(g, key, i, &v, what, err);
    if (!st && !(st = fit_int(v, (uint64_t)INT64_MAX + 1, INT64_MAX, what, "i64", err)) && out) *out = to_i64(v);
    return st;
}

okv_status okv_gguf_array_u64(const okv_gguf *g, const char *key, uint64_t i, uint64_t *out,
                              okv_error *err) {
    char what[256];
    wide_int v;
    okv_status st = array_wide(g, key, i, &v, what, err);
    if (!st && !(st = fit_int(v, 0, UINT64_MAX, what, "u64", err)) && out) *out = v.mag;
    return st;
}

/* Element i of an array of floats (f32 or f64) as a double; narrow: it must
 * fit a float, as okv_gguf_array_f32 returns it. */
static okv_status array_float(const okv_gguf *g, const char *key, uint64_t i, bool narrow, double *d,
                              okv_error *err) {
    const uint8_t *p = NULL;
    uint32_t t = 0;
    char what[256];
    float f = 0;
    okv_status st = array_num(g, key, i, is_float, "floats", &p, &t, what, err);
    if (!st) st = narrow ? load_f32(p, t, &f, what, err) : load_f64(p, t, d, what, err);
    if (!st && narrow) *d = f;
    return st;
}

okv_status okv_gguf_array_f32(const okv_gguf *g, const char *key, uint64_t i, float *out,
                              okv_error *err) {
    double d = 0;
    okv_status st = array_float(g, key, i, true, &d, err);
    if (!st && out) *out = (float)d;
    return st;
}

okv_status okv_gguf_array_f64(const okv_gguf *g, const char *key, uint64_t i, double *out,
                              okv_error *err) {
    double d = 0;
    okv_status st = array_float(g, key, i, false, &d, err);
    if (!st && out) *out = d;
    return st;
}

okv_status okv_gguf_array_bool(const okv_gguf *g, const char *key, uint64_t i, bool *out,
                               okv_error *err) {
    const kv_entry *e = NULL;
    const uint8_t *p = NULL;
    okv_status st = array_elem(g, key, i, is_bool, "bools", &e, &p, err);
    if (!st && out) *out = p[0] != 0;
    return st;
}
