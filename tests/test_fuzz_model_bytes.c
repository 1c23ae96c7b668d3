/* Fuzz: random byte damage in the metadata and tensor-info regions of every
 * shared model.  The rule: bad input is an error code and a message naming
 * the problem; the library never crashes, aborts or asserts on user input.
 * So each damaged copy must either load, make a context and evaluate a few
 * tokens (finite or not: the weights may be nonsense, but no crash), or fail
 * with an error status and a non-empty message.  Run under the sanitizer
 * build (OKV_SANITIZE=ON) to catch out-of-bounds reads.
 *
 * Deterministic: fixed seeds.  OKV_FUZZ_ITERS=N overrides the number of
 * mutations per model (default keeps the test well under 10 s with ASan). */
#include <fcntl.h>
#include <stdint.h>
#include <unistd.h>

#include "check.h"
#include "golden.h"
#include "offkv/offkv.h"

static uint64_t rng_state;
static uint64_t rnd(void) { /* splitmix64 */
    uint64_t z = (rng_state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* Offset of the first tensor-info entry and of the data section. */
static int regions(const char *data, size_t size, size_t *ti_start, size_t *data_start) {
    okv_error err;
    okv_gguf *g = okv_gguf_open_memory(data, size, &err);
    if (!g) return 0;
    const okv_gguf_tensor *t0 = okv_gguf_tensor_at(g, 0);
    size_t lowest = size;
    for (int64_t i = 0; i < okv_gguf_n_tensors(g); i++) {
        const okv_gguf_tensor *t = okv_gguf_tensor_at(g, i);
        size_t at = (size_t)((const char *)t->data - data) - (size_t)t->offset;
        if (at < lowest) lowest = at;
    }
    /* the first tensor's entry starts with its name's u64 length */
    size_t nlen = strlen(t0->name);
    const char *p = NULL;
    for (size_t off = 24; off + 8 + nlen <= size; off++) {
        uint64_t l;
        memcpy(&l, data + off, 8);
        if (l == nlen && memcmp(data + off + 8, t0->name, nlen) == 0) {
            /* the tensor-info entry, not a metadata string equal to it */
            p = data + off;
        }
        if (off >= lowest) break;
    }
    okv_gguf_close(g);
    if (!p) return 0;
    *ti_start = (size_t)(p - data);
    *data_start = lowest;
    return 1;
}

static const uint64_t interesting[] = {0, 1, 2, 0x7f, 0x80, 0xff, 0x7fff, 0xffff, 0x7fffffff, 0x80000000,
                                       0xffffffff, 0x100000000ull, 0x7fffffffffffffffull, 0xffffffffffffffffull,
                                       513, 4096, 1u << 20, 1u << 30};

/* Applies one random mutation in [lo, hi) of buf. */
static void mutate(char *buf, size_t lo, size_t hi) {
    size_t at = lo + (size_t)(rnd() % (hi - lo));
    switch (rnd() % 5) {
    case 0: buf[at] ^= (char)(1u << (rnd() % 8)); break;
    case 1: buf[at] = (char)rnd(); break;
    case 2: { /* an interesting value as u32 or u64 */
        uint64_t v = interesting[rnd() % (sizeof interesting / sizeof interesting[0])];
        size_t w = rnd() % 2 ? 4 : 8;
        if (at + w > hi) at = hi - w;
        memcpy(buf + at, &v, w);
        break;
    }
    case 3: { /* a small increment or decrement of a u32 */
        uint32_t v;
        if (at + 4 > hi) at = hi - 4;
        memcpy(&v, buf + at, 4);
        v += (uint32_t)(rnd() % 17) - 8;
        memcpy(buf + at, &v, 4);
        break;
    }
    default: /* a few random bytes */
        for (int k = 0; k < 4 && at + (size_t)k < hi; k++) buf[at + k] = (char)rnd();
        break;
    }
}

/* Offsets of the scalar metadata values (u32, i32, f32, bool) in data:
 * the key's bytes, then its u32 type, then the value. */
typedef struct scalar_at { size_t off; int type; } scalar_at;

static size_t find_scalars(const char *data, size_t size, scalar_at *out, size_t cap) {
    okv_error err;
    okv_gguf *g = okv_gguf_open_memory(data, size, &err);
    if (!g) return 0;
    size_t n = 0;
    for (int64_t i = 0; i < okv_gguf_n_kv(g) && n < cap; i++) {
        okv_gguf_type t = okv_gguf_kv_type(g, i);
        if (t != OKV_GGUF_U32 && t != OKV_GGUF_I32 && t != OKV_GGUF_F32 && t != OKV_GGUF_BOOL) continue;
        const char *key = okv_gguf_key(g, i);
        size_t kl = strlen(key);
        const char *at = memmem(data, size, key, kl);
        if (!at) continue;
        out[n].off = (size_t)(at - data) + kl + 4;
        out[n].type = t;
        n++;
    }
    okv_gguf_close(g);
    return n;
}

/* Overwrites one scalar value with an interesting one of its size. */
static void mutate_scalar(char *buf, const scalar_at *s) {
    static const uint32_t u[] = {0, 1, 2, 3, 7, 8, 15, 16, 17, 31, 32, 33, 63, 64, 65, 127, 128, 255, 256, 511, 512,
                                 513, 1023, 1024, 4095, 4096, 65535, 65536, 1u << 20, (1u << 20) + 1, 1u << 22,
                                 (1u << 22) + 1, 1u << 30, (1u << 30) + 1, 0x7fffffff, 0x80000000, 0xffffffff};
    static const float f[] = {0.0f, -0.0f, 1.0f, -1.0f, 1e-30f, 1e30f, 3.4e38f, -3.4e38f, 1e-45f, 0.5f, 2.0f,
                              10000.0f, -10000.0f};
    if (s->type == OKV_GGUF_BOOL) {
        buf[s->off] = (char)(rnd() % 3);
    } else if (s->type == OKV_GGUF_F32 && rnd() % 2) {
        float v = f[rnd() % (sizeof f / sizeof f[0])];
        memcpy(buf + s->off, &v, 4);
    } else {
        uint32_t v = u[rnd() % (sizeof u / sizeof u[0])];
        memcpy(buf + s->off, &v, 4);
    }
}

static int n_loaded, n_failed, n_evals;

/* Loads path; evaluates 3 tokens if it loads.  Checks the error contract. */
static void try_model(const char *path, const char *what, size_t iter) {
    okv_error err;
    memset(&err, 0, sizeof err);
    okv_model *m = okv_model_load(path, NULL, &err);
    if (!m) {
        n_failed++;
        CHECK(err.status != OKV_OK && err.message[0] != '\0', "%s #%zu: NULL model without an error (%s '%s')",
              what, iter, okv_status_name(err.status), err.message);
        return;
    }
    n_loaded++;
    const char *opts[] = {"capacity", "64", "max_write", "4", NULL};
    okv_context *ctx = okv_context_create(m, opts, NULL, &err);
    if (!ctx) {
        CHECK(err.status != OKV_OK && err.message[0] != '\0', "%s #%zu: NULL context without an error", what, iter);
        okv_model_free(m);
        return;
    }
    int32_t nv = okv_model_n_vocab(m);
    int32_t toks[3] = {0, nv > 1 ? 1 : 0, nv - 1}, pos[3] = {0, 1, 2};
    float *logits = malloc(sizeof(float) * 3 * (size_t)nv);
    okv_status st = okv_context_eval(ctx, toks, pos, 3, logits, &err);
    CHECK(st == OKV_OK || err.message[0] != '\0', "%s #%zu: eval failed without a message", what, iter);
    if (st == OKV_OK) n_evals++;
    free(logits);
    okv_context_free(ctx);
    okv_model_free(m);
}

int main(void) {
    const char *shared = check_shared_dir();
    if (!shared) { printf("skipped: ../shared not found\n"); return CHECK_SKIP; }
    static const char *const models[] = {"stories260K", "aidreams260K", "tiny-llama", "tiny-gemma3",
                                         "tiny-gemma3-allswa", "tiny-muse-glimmer"};
    size_t iters = 400;
    if (getenv("OKV_FUZZ_ITERS")) iters = (size_t)strtoull(getenv("OKV_FUZZ_ITERS"), NULL, 10);
    uint64_t seed0 = getenv("OKV_FUZZ_SEED") ? strtoull(getenv("OKV_FUZZ_SEED"), NULL, 10) : 1;
    const char *tmp = "test_fuzz_model_bytes.tmp.gguf";
    for (size_t mi = 0; mi < sizeof models / sizeof models[0]; mi++) {
        char path[1024];
        snprintf(path, sizeof path, "%s/models/%s.gguf", shared, models[mi]);
        size_t size;
        char *data = golden_read(path, &size);
        CHECK(data != NULL, "read %s", path);
        if (!data) continue;
        size_t ti = 0, ds = 0;
        if (!regions(data, size, &ti, &ds)) {
            CHECK(0, "%s: cannot find the metadata and tensor-info regions", models[mi]);
            free(data);
            continue;
        }
        /* Only the header and tables go to the file each time: the data
         * section is written once and never changes. */
        int fd = open(tmp, O_RDWR | O_CREAT | O_TRUNC, 0644);
        CHECK(fd >= 0 && write(fd, data, size) == (ssize_t)size, "write %s", tmp);
        char *buf = malloc(ds);
        scalar_at scalars[64];
        size_t n_scalars = find_scalars(data, size, scalars, 64);
        CHECK(n_scalars >= 5, "%s: only %zu scalar keys found", models[mi], n_scalars);
        for (size_t it = 0; it < iters; it++) {
            rng_state = seed0 * 1000003u + mi * 7919u + it;
            memcpy(buf, data, ds);
            /* half in the metadata (its first 2 KiB and its last 1 KiB,
             * where the scalar hyperparameters are; and 1 in 6 overwriting
             * scalar values with interesting ones), half in the tensor
             * info */
            size_t lo = 24, hi = ti;
            uint64_t r = rnd() % 6;
            if (r == 0 && hi > lo + 2048) hi = lo + 2048;
            if (r == 1 && hi > lo + 1024) lo = hi - 1024;
            if (r >= 3) { lo = ti; hi = ds; }
            int n_mut = 1 + (int)(rnd() % 3);
            if (r == 2 && n_scalars) { /* values of the hyperparameters, in place */
                for (int k = 0; k < n_mut; k++) mutate_scalar(buf, &scalars[rnd() % n_scalars]);
            } else {
                for (int k = 0; k < n_mut; k++) mutate(buf, lo, hi);
            }
            if (pwrite(fd, buf, ds, 0) != (ssize_t)ds) break;
            if (getenv("OKV_FUZZ_VERBOSE")) fprintf(stderr, "%s #%zu\n", models[mi], it);
            try_model(tmp, models[mi], it);
        }
        close(fd);
        free(buf);
        free(data);
    }
    printf("%d loaded (%d evaluated), %d refused\n", n_loaded, n_evals, n_failed);
    remove(tmp);
    return check_done();
}
