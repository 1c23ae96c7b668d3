/* Saved sequences: the file format of include/offkv/prompt_cache.h, above
 * the cache (which knows rows by logical position, not files).
 *
 * Loading reads and checks everything into a blank twin of the cache first
 * and hands its state over only at the end (okv_cache_adopt), so a refused
 * file leaves the cache as it was. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cache/cache_impl.h"
#include "core/error.h"
#include "offkv/outfile.h"
#include "gguf/bytes.h"
#include "offkv/prompt_cache.h"

static const char MAGIC[8] = {'O', 'F', 'F', 'K', 'V', 'S', 'E', 'Q'};

enum {
    HEAD_BYTES = 48,  /* magic, version, dtype, fingerprint, six int32 */
    LAYER_BYTES = 28  /* n_kv_heads, head_dim, window, rows, first, row bytes, kv_from (a sharing
                         layer holds no rows of its own and has none in the file) */
};

#define FNV_OFFSET 0xcbf29ce484222325ull
#define FNV_PRIME 0x100000001b3ull

static uint64_t fnv(uint64_t h, const void *data, size_t n) {
    const uint8_t *p = data;
    for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * FNV_PRIME;
    return h;
}

/* Every okv_dtype by name: a type from a newer writer (or a damaged file) is "unknown". */
static const char *dtype_name(uint32_t t) {
    return t == OKV_F16 ? "f16" : t == OKV_F32 ? "f32" : t == OKV_Q8_0 ? "q8_0" : "unknown";
}

/* ---- saving ---- */

typedef struct writer {
    FILE *f;
    uint64_t hash;
    bool ok;
} writer;

static void put(writer *w, const void *data, size_t n) {
    if (!w->ok || n == 0) return;
    w->hash = fnv(w->hash, data, n);
    if (fwrite(data, 1, n, w->f) != n) w->ok = false;
}

static void put32(writer *w, uint32_t v) {
    uint8_t b[4];
    okv_st32(b, v);
    put(w, b, 4);
}

okv_status okv_cache_save(const okv_cache *c, const char *path, uint64_t fingerprint, const int32_t *tokens,
                          int32_t n_tokens, okv_error *err) {
    if (!c || !path) return okv_fail(err, OKV_ERR_INVALID, "save: %s is NULL", c ? "path" : "cache");
    if (n_tokens != 0 && n_tokens != c->length)
        return okv_fail(err, OKV_ERR_INVALID, "save: %d tokens for a sequence of length %d (give 0 or all)",
                        (int)n_tokens, (int)c->length);
    if (n_tokens > 0 && !tokens) return okv_fail(err, OKV_ERR_INVALID, "save: tokens is NULL");
    if (c->step_open) return okv_fail(err, OKV_ERR_BUSY, "save: a step is open on the cache");

    /* The largest layer's packed rows, reused for every layer. */
    size_t buf_bytes = 0;
    for (int32_t i = 0; i < c->n_layers; i++) {
        const int32_t n = c->layers[i].geom.kv_from ? 0 : c->length - okv_cache_first_held(c, i);
        const size_t b = (size_t)c->layers[i].geom.n_kv_heads * (size_t)(n > 0 ? n : 0) * okv_cache_row_bytes(c, i);
        if (b > buf_bytes) buf_bytes = b;
    }
    void *kb = malloc(buf_bytes ? buf_bytes : 1), *vb = malloc(buf_bytes ? buf_bytes : 1);
    if (!kb || !vb) {
        free(kb);
        free(vb);
        return okv_fail(err, OKV_ERR_NOMEM, "save: out of memory for %zu bytes of rows", 2 * buf_bytes);
    }
    okv_outfile out = {0};
    okv_status st = okv_outfile_open(&out, path, err);
    if (st != OKV_OK) {
        free(kb);
        free(vb);
        return st;
    }
    writer w = {.f = out.f, .hash = FNV_OFFSET, .ok = true};
    put(&w, MAGIC, sizeof MAGIC);
    put32(&w, OKV_SEQ_FILE_VERSION);
    put32(&w, (uint32_t)c->cfg.dtype);
    uint8_t fp[8];
    okv_st64(fp, fingerprint);
    put(&w, fp, 8);
    put32(&w, (uint32_t)c->n_layers);
    put32(&w, (uint32_t)c->cfg.capacity);
    put32(&w, (uint32_t)c->cfg.max_write);
    put32(&w, (uint32_t)c->length);
    put32(&w, (uint32_t)c->high_water);
    put32(&w, (uint32_t)n_tokens);
    for (int32_t i = 0; i < c->n_layers; i++) {
        const okv_layer_geometry *g = &c->layers[i].geom;
        put32(&w, (uint32_t)g->n_kv_heads);
        put32(&w, (uint32_t)g->head_dim);
        put32(&w, (uint32_t)g->window);
        put32(&w, (uint32_t)okv_cache_rows(c, i));
        put32(&w, (uint32_t)okv_cache_first_held(c, i));
        put32(&w, (uint32_t)okv_cache_row_bytes(c, i));
        put32(&w, (uint32_t)g->kv_from);
    }
    for (int32_t i = 0; i < n_tokens; i++) put32(&w, (uint32_t)tokens[i]);
    for (int32_t i = 0; i < c->n_layers && w.ok; i++) {
        const int32_t lo = okv_cache_first_held(c, i), n = c->length - lo;
        if (n <= 0 || c->layers[i].geom.kv_from) continue;
        if ((st = okv_cache_read_rows(c, i, lo, n, kb, vb, err)) != OKV_OK) break;
        const size_t bytes = (size_t)c->layers[i].geom.n_kv_heads * (size_t)n * okv_cache_row_bytes(c, i);
        put(&w, kb, bytes);
        put(&w, vb, bytes);
    }
    free(kb);
    free(vb);
    if (st == OKV_OK) {
        uint8_t sum[8];
        okv_st64(sum, w.hash);
        put(&w, sum, 8);
        if (!w.ok) st = okv_fail(err, OKV_ERR_IO, "save: writing '%s': %s", path, strerror(errno));
    }
    if (st != OKV_OK) {
        okv_outfile_discard(&out);
        return st;
    }
    if ((st = okv_outfile_commit(&out, err)) != OKV_OK) return st;
    okv_error_clear(err);
    return OKV_OK;
}

/* ---- loading ---- */

typedef struct reader {
    FILE *f;
    const char *path;
    uint64_t hash, pos, size;
} reader;

static okv_status get(reader *r, void *data, size_t n, const char *what, okv_error *err) {
    if (n == 0) return OKV_OK;
    if (n > r->size - r->pos)
        return okv_fail(err, OKV_ERR_FORMAT, "load '%s': truncated: %s at byte %" PRIu64 " needs %zu bytes, the file has %" PRIu64,
                        r->path, what, r->pos, n, r->size);
    if (fread(data, 1, n, r->f) != n)
        return okv_fail(err, OKV_ERR_IO, "load '%s': reading %s: %s", r->path, what, strerror(errno));
    r->hash = fnv(r->hash, data, n);
    r->pos += n;
    return OKV_OK;
}

/* True when the file's bytes do not hash to its stored checksum.  Read
 * only when a header field differs from the cache: a flipped bit in the
 * header should be named as corruption, not as another model or shape. */
static bool checksum_fails(reader *r) {
    if (r->size < 8 || fseek(r->f, 0, SEEK_SET) != 0) return false;
    uint64_t h = FNV_OFFSET, left = r->size - 8;
    uint8_t buf[1 << 16];
    while (left > 0) {
        const size_t n = left < sizeof buf ? (size_t)left : sizeof buf;
        if (fread(buf, 1, n, r->f) != n) return false;
        h = fnv(h, buf, n);
        left -= n;
    }
    return fread(buf, 1, 8, r->f) == 8 && okv_ld64(buf) != h;
}

/* Compares one header field with what the cache (or model) has. */
#define EXPECT(field, have, want)                                                                          \
    do {                                                                                                  \
        if ((int64_t)(have) != (int64_t)(want)) {                                                        \
            st = okv_fail(err, OKV_ERR_INVALID, "load '%s': made for a cache with %s %" PRId64 ", this one has %" PRId64, \
                          path, field, (int64_t)(have), (int64_t)(want));                                \
            goto done;                                                                                    \
        }                                                                                                 \
    } while (0)

okv_status okv_cache_load(okv_cache *c, const char *path, uint64_t fingerprint, int32_t *tokens,
                          int32_t max_tokens, int32_t *n_tokens, okv_error *err) {
    if (!c || !path) return okv_fail(err, OKV_ERR_INVALID, "load: %s is NULL", c ? "path" : "cache");
    if (c->step_open) return okv_fail(err, OKV_ERR_BUSY, "load: a step is open on the cache");
    okv_status st = OKV_OK;
    okv_cache *twin = NULL;
    uint8_t *layer_tab = NULL;
    int32_t *toks = NULL;
    void *kb = NULL, *vb = NULL;
    reader r = {.path = path, .hash = FNV_OFFSET};
    /* Opened without blocking and checked before any read: a FIFO (or a
     * device) would otherwise block in the open until a writer comes. */
    struct stat sb;
    const int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0 || fstat(fd, &sb) != 0) {
        st = okv_fail(err, OKV_ERR_IO, "load '%s': %s", path, strerror(errno));
        if (fd >= 0) close(fd);
        goto done;
    }
    if (!S_ISREG(sb.st_mode)) {
        st = okv_fail(err, OKV_ERR_IO, "load '%s': not a regular file", path);
        close(fd);
        goto done;
    }
    if (!(r.f = fdopen(fd, "rb"))) {
        st = okv_fail(err, OKV_ERR_IO, "load '%s': %s", path, strerror(errno));
        close(fd);
        goto done;
    }
    r.size = (uint64_t)sb.st_size;

    uint8_t h[HEAD_BYTES];
    if ((st = get(&r, h, sizeof h, "the header", err))) goto done;
    if (memcmp(h, MAGIC, sizeof MAGIC) != 0) {
        st = okv_fail(err, OKV_ERR_FORMAT, "load '%s': not a saved sequence (magic is not OFFKVSEQ)", path);
        goto done;
    }
    const uint32_t version = okv_ld32(h + 8), dtype = okv_ld32(h + 12);
    if (version != OKV_SEQ_FILE_VERSION) {
        st = okv_fail(err, OKV_ERR_UNSUPPORTED, "load '%s': format version %" PRIu32 ", this build reads version %d",
                      path, version, OKV_SEQ_FILE_VERSION);
        goto done;
    }
    const uint64_t fp = okv_ld64(h + 16);
    if (fp != fingerprint) {
        st = okv_fail(err, OKV_ERR_INVALID,
                      "load '%s': made with another model (fingerprint %016" PRIx64 ", this model's is %016" PRIx64 ")",
                      path, fp, fingerprint);
        goto done;
    }
    if (dtype != (uint32_t)c->cfg.dtype) {
        st = okv_fail(err, OKV_ERR_INVALID, "load '%s': K/V stored as %s (type %" PRIu32 "), this cache stores %s", path,
                      dtype_name(dtype), dtype, dtype_name((uint32_t)c->cfg.dtype));
        goto done;
    }
    const int32_t n_layers = (int32_t)okv_ld32(h + 24), capacity = (int32_t)okv_ld32(h + 28),
                  max_write = (int32_t)okv_ld32(h + 32), length = (int32_t)okv_ld32(h + 36),
                  high_water = (int32_t)okv_ld32(h + 40), ntok = (int32_t)okv_ld32(h + 44);
    EXPECT("layers", n_layers, c->n_layers);
    EXPECT("capacity", capacity, c->cfg.capacity);
    EXPECT("max_write", max_write, c->cfg.max_write);
    if (length < 0 || high_water < length || high_water > capacity) {
        st = okv_fail(err, OKV_ERR_FORMAT, "load '%s': length %d and high water %d do not fit capacity %d", path,
                      (int)length, (int)high_water, (int)capacity);
        goto done;
    }
    if (ntok != 0 && ntok != length) {
        st = okv_fail(err, OKV_ERR_FORMAT, "load '%s': %d tokens for a sequence of length %d", path, (int)ntok,
                      (int)length);
        goto done;
    }
    if (ntok > 0 && tokens && ntok > max_tokens) {
        st = okv_fail(err, OKV_ERR_INVALID, "load '%s': %d tokens, room for %d", path, (int)ntok, (int)max_tokens);
        goto done;
    }

    /* The layer table: the same shapes as this cache, rows that make sense. */
    layer_tab = malloc((size_t)n_layers * LAYER_BYTES);
    int32_t *flat_rows = calloc((size_t)n_layers, sizeof *flat_rows);
    toks = flat_rows; /* freed below; reused for tokens afterwards */
    if (!layer_tab || !flat_rows) {
        st = okv_fail(err, OKV_ERR_NOMEM, "load '%s': out of memory", path);
        goto done;
    }
    if ((st = get(&r, layer_tab, (size_t)n_layers * LAYER_BYTES, "the layer table", err))) goto done;
    uint64_t data_bytes = 0;
    size_t buf_bytes = 0;
    for (int32_t i = 0; i < n_layers; i++) {
        const uint8_t *e = layer_tab + (size_t)i * LAYER_BYTES;
        const okv_layer_geometry *g = &c->layers[i].geom;
        const int32_t heads = (int32_t)okv_ld32(e), hd = (int32_t)okv_ld32(e + 4), win = (int32_t)okv_ld32(e + 8),
                      rows = (int32_t)okv_ld32(e + 12), first = (int32_t)okv_ld32(e + 16);
        const uint32_t rb = okv_ld32(e + 20);
        char field[64];
        snprintf(field, sizeof field, "layer %d kv heads", (int)i);
        EXPECT(field, heads, g->n_kv_heads);
        snprintf(field, sizeof field, "layer %d head_dim", (int)i);
        EXPECT(field, hd, g->head_dim);
        snprintf(field, sizeof field, "layer %d window", (int)i);
        EXPECT(field, win, g->window);
        snprintf(field, sizeof field, "layer %d row bytes", (int)i);
        EXPECT(field, rb, okv_cache_row_bytes(c, i));
        snprintf(field, sizeof field, "layer %d kv_from", (int)i);
        EXPECT(field, (int32_t)okv_ld32(e + 24), g->kv_from);
        if (g->kv_from) { /* its rows are its donor's, and so is its first position */
            flat_rows[i] = 0;
            const int32_t donor_first = (int32_t)okv_ld32(layer_tab + (size_t)(g->kv_from - 1) * LAYER_BYTES + 16);
            if (rows != 0 || first != donor_first) {
                st = okv_fail(err, OKV_ERR_FORMAT,
                              "load '%s': layer %d shares layer %d's K/V but has %d rows from position %d (the donor's "
                              "from %d)",
                              path, (int)i, (int)g->kv_from - 1, (int)rows, (int)first, (int)donor_first);
                goto done;
            }
            continue;
        }
        const int32_t want_rows = g->window > 0 ? okv_ring_rows(g, &c->cfg) : rows;
        /* rows is checked before it is subtracted: a hostile value would overflow. */
        const bool rows_fit = rows == want_rows && rows >= 0 && rows <= capacity && (g->window > 0 || rows >= length);
        const int32_t want_first = rows_fit && g->window > 0 && high_water > rows ? high_water - rows : 0;
        if (!rows_fit || first != want_first) {
            st = okv_fail(err, OKV_ERR_FORMAT,
                          "load '%s': layer %d: %d rows from position %d do not fit a sequence of length %d "
                          "(high water %d)",
                          path, (int)i, (int)rows, (int)first, (int)length, (int)high_water);
            goto done;
        }
        /* A writer's ring always holds the window before its length (every
         * rewind and step keeps it so); a file whose high water says it
         * does not would leave the next query reading rows never stored. */
        if (g->window > 0 && first > 0 && first > length - g->window + 1) {
            st = okv_fail(err, OKV_ERR_FORMAT,
                          "load '%s': layer %d: a ring holding positions from %d (high water %d) lacks the window "
                          "of %d before length %d",
                          path, (int)i, (int)first, (int)high_water, (int)g->window, (int)length);
            goto done;
        }
        flat_rows[i] = g->window > 0 ? 0 : rows;
        const int32_t n = length - first > 0 ? length - first : 0;
        const size_t b = (size_t)heads * (size_t)n * rb;
        data_bytes += 2 * (uint64_t)b;
        if (b > buf_bytes) buf_bytes = b;
    }
    /* Size check before reading rows: a truncated or padded file is named as such. */
    const uint64_t want = HEAD_BYTES + (uint64_t)n_layers * LAYER_BYTES + 4 * (uint64_t)ntok + data_bytes + 8;
    if (r.size != want) {
        st = okv_fail(err, OKV_ERR_FORMAT, "load '%s': %s: the file has %" PRIu64 " bytes, its header says %" PRIu64,
                      path, r.size < want ? "truncated" : "extra bytes", r.size, want);
        goto done;
    }
    if (!(twin = okv_cache_blank_like(c, flat_rows, err))) {
        st = err ? err->status : OKV_ERR_NOMEM;
        goto done;
    }
    free(flat_rows);
    toks = malloc((size_t)(ntok > 0 ? ntok : 1) * sizeof *toks);
    kb = malloc(buf_bytes ? buf_bytes : 1);
    vb = malloc(buf_bytes ? buf_bytes : 1);
    if (!toks || !kb || !vb) {
        st = okv_fail(err, OKV_ERR_NOMEM, "load '%s': out of memory for %zu bytes of rows", path, 2 * buf_bytes);
        goto done;
    }
    for (int32_t i = 0; i < ntok; i++) {
        uint8_t b[4];
        if ((st = get(&r, b, 4, "the tokens", err))) goto done;
        toks[i] = (int32_t)okv_ld32(b);
    }
    for (int32_t i = 0; i < n_layers; i++) {
        if (c->layers[i].geom.kv_from) continue;
        const int32_t first = (int32_t)okv_ld32(layer_tab + (size_t)i * LAYER_BYTES + 16), n = length - first;
        if (n <= 0) continue;
        const size_t bytes = (size_t)c->layers[i].geom.n_kv_heads * (size_t)n * okv_cache_row_bytes(c, i);
        if ((st = get(&r, kb, bytes, "K rows", err)) || (st = get(&r, vb, bytes, "V rows", err))) goto done;
        if ((st = okv_cache_write_rows(twin, i, first, n, kb, vb, err))) goto done;
    }
    const uint64_t sum = r.hash;
    uint8_t sb8[8];
    if ((st = get(&r, sb8, 8, "the checksum", err))) goto done;
    if (okv_ld64(sb8) != sum) {
        st = okv_fail(err, OKV_ERR_FORMAT, "load '%s': checksum %016" PRIx64 " does not match the contents (%016" PRIx64 "): the file is corrupt",
                      path, okv_ld64(sb8), sum);
        goto done;
    }
    okv_cache_set_extent(twin, length, high_water);
    if ((st = okv_cache_adopt(c, twin, err))) goto done;
    if (tokens && ntok > 0) memcpy(tokens, toks, (size_t)ntok * sizeof *toks);
    if (n_tokens) *n_tokens = ntok;
    okv_error_clear(err);
done:
    if (st == OKV_ERR_INVALID && r.f && checksum_fails(&r))
        st = okv_fail(err, OKV_ERR_FORMAT, "load '%s': the file is corrupt (its checksum does not match its bytes)",
                      path);
    if (r.f) fclose(r.f);
    okv_cache_release(twin);
    free(layer_tab);
    free(toks);
    free(kb);
    free(vb);
    return st;
}
