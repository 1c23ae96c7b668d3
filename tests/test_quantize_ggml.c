/* The quantizers of src/kernels/quantize.c against llama.cpp itself, and
 * `offkv synth --type` against llama-quantize's per-tensor mixes.
 *
 * 1. Byte-exactness: ../shared/models/tiny-llama256-f32.gguf is the F32
 *    source of tiny-llama256-{q4_k_m,...}.gguf, written by llama-quantize
 *    (no importance matrix).  Every tensor of every quantized file is
 *    quantized again here from the F32 source, row by row, with our
 *    quantizer for that tensor's type, and the bytes must be equal.
 * 2. The mixes: `offkv synth` with the shape and seed that made the F32
 *    source and each --type must give the same tensor list as the matching
 *    llama-quantize file: same names, shapes and types, the same
 *    general.file_type, and (since the weights are the same) the same bytes.
 * 3. Hand-built rows (zeros, constants, one large outlier, random) through
 *    every quantizer and back through a dequantizer written here from the
 *    block layouts alone: finite, and within each format's error.
 * Parts 1 and 2 need ../shared and say so when it is absent; part 2 also
 * needs $OKV_BIN (ctest sets it), as do the checks of synth's --help and of
 * its fallbacks for rows that are not whole blocks. */
#include <fcntl.h>
#include <math.h>
#include <spawn.h>
#include <stdint.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "kernels/quantize.h"
#include "offkv/offkv.h"

extern char **environ;

/* ------------------------------------------------------------------ */
/* An independent dequantizer, from the layouts in quant.h             */

static float h2f(okv_f16 h) { return okv_f16_to_f32(h); }

/* 6-bit scale and min j of a q4_K/q5_K block (12 packed bytes). */
static void k4_scale_min(const uint8_t *s, int j, int *sc, int *m) {
    if (j < 4) {
        *sc = s[j] & 63;
        *m = s[j + 4] & 63;
    } else {
        *sc = (s[j + 4] & 15) | ((s[j - 4] >> 6) << 4);
        *m = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
    }
}

/* 2-bit field of value v (0..255) in the q2_K/q3_K qs layout: byte
 * 32*(v/128) + v%32, bits 2*((v%128)/32). */
static int qs2(const uint8_t *qs, int v) { return (qs[32 * (v / 128) + v % 32] >> (2 * ((v % 128) / 32))) & 3; }

static void dequant(int type, const void *src, float *y, int64_t k) {
    for (int64_t b = 0; b < k / okv_ggml_block_size(type); b++) {
        switch (type) {
        case OKV_GGML_Q4_1: {
            const block_q4_1 *p = (const block_q4_1 *)src + b;
            for (int j = 0; j < 32; j++)
                y[32 * b + j] = (float)((p->qs[j % 16] >> (4 * (j / 16))) & 15) * h2f(p->d) + h2f(p->m);
            break;
        }
        case OKV_GGML_Q5_0: case OKV_GGML_Q5_1: {
            const int is1 = type == OKV_GGML_Q5_1;
            const block_q5_0 *p0 = (const block_q5_0 *)src + b;
            const block_q5_1 *p1 = (const block_q5_1 *)src + b;
            const uint8_t *qs = is1 ? p1->qs : p0->qs, *qh = is1 ? p1->qh : p0->qh;
            for (int j = 0; j < 32; j++) {
                const int q = ((qs[j % 16] >> (4 * (j / 16))) & 15) | (((qh[j / 8] >> (j % 8)) & 1) << 4);
                y[32 * b + j] = is1 ? (float)q * h2f(p1->d) + h2f(p1->m) : (float)(q - 16) * h2f(p0->d);
            }
            break;
        }
        case OKV_GGML_Q2_K: {
            const block_q2_K *p = (const block_q2_K *)src + b;
            for (int v = 0; v < 256; v++)
                y[256 * b + v] = h2f(p->d) * (float)(p->scales[v / 16] & 15) * (float)qs2(p->qs, v) -
                                 h2f(p->dmin) * (float)(p->scales[v / 16] >> 4);
            break;
        }
        case OKV_GGML_Q3_K: {
            const block_q3_K *p = (const block_q3_K *)src + b;
            for (int v = 0; v < 256; v++) {
                const int j = v / 16;
                const int lo = j < 8 ? p->scales[j] & 15 : p->scales[j - 8] >> 4;
                const int sc = (lo | (((p->scales[8 + j % 4] >> (2 * (j / 4))) & 3) << 4)) - 32;
                const int q = qs2(p->qs, v) + 4 * ((p->hmask[v % 32] >> (v / 32)) & 1) - 4;
                y[256 * b + v] = h2f(p->d) * (float)sc * (float)q;
            }
            break;
        }
        case OKV_GGML_Q4_K: case OKV_GGML_Q5_K: {
            const int is5 = type == OKV_GGML_Q5_K;
            const block_q4_K *p4 = (const block_q4_K *)src + b;
            const block_q5_K *p5 = (const block_q5_K *)src + b;
            const float d = h2f(is5 ? p5->d : p4->d), dmin = h2f(is5 ? p5->dmin : p4->dmin);
            const uint8_t *sc = is5 ? p5->scales : p4->scales, *qs = is5 ? p5->qs : p4->qs;
            for (int v = 0; v < 256; v++) {
                int s, m;
                k4_scale_min(sc, v / 32, &s, &m);
                /* 64 values per 32 bytes: low nibbles first, then high */
                int q = (qs[32 * (v / 64) + v % 32] >> (4 * ((v / 32) % 2))) & 15;
                if (is5) q |= ((p5->qh[v % 32] >> (v / 32)) & 1) << 4;
                y[256 * b + v] = d * (float)s * (float)q - dmin * (float)m;
            }
            break;
        }
        case OKV_GGML_Q6_K: {
            const block_q6_K *p = (const block_q6_K *)src + b;
            for (int v = 0; v < 256; v++) {
                const int half = v / 128, r = v % 128, quarter = r / 32, l = r % 32;
                const uint8_t lo = p->ql[64 * half + 32 * (quarter % 2) + l] >> (4 * (quarter / 2));
                const int q = ((lo & 15) | (((p->qh[32 * half + l] >> (2 * quarter)) & 3) << 4)) - 32;
                y[256 * b + v] = h2f(p->d) * (float)p->scales[v / 16] * (float)q;
            }
            break;
        }
        }
    }
}

/* ------------------------------------------------------------------ */
/* Hand-built rows                                                     */

static const int new_types[] = {OKV_GGML_Q4_1, OKV_GGML_Q5_0, OKV_GGML_Q5_1, OKV_GGML_Q2_K,
                                OKV_GGML_Q3_K, OKV_GGML_Q4_K, OKV_GGML_Q5_K, OKV_GGML_Q6_K};

/* Largest error allowed, as a fraction of the largest |x| of the block (32
 * values) or super-block (256): half a quantization step of the format with
 * its coarsest scale (a K-quant's sub-block scale is itself quantized, to 4
 * or 6 bits, so a small sub-block beside a large one may lose all its levels
 * and keep only its min), with some slack for the f16 rounding of d and m. */
static double tolerance(int type) {
    switch (type) {
    case OKV_GGML_Q4_1: return 2.0 / 15 / 2 * 1.05;  /* range <= 2 amax, 15 steps */
    case OKV_GGML_Q5_0: return 1.0 / 16 * 1.05;      /* +amax clamps to 15/16 of it */
    case OKV_GGML_Q5_1: return 2.0 / 31 / 2 * 1.05;
    case OKV_GGML_Q2_K: return 0.55; /* 3 steps over the range, 4-bit scales */
    case OKV_GGML_Q3_K: return 0.30;
    case OKV_GGML_Q4_K: return 0.12;
    case OKV_GGML_Q5_K: return 0.06;
    case OKV_GGML_Q6_K: return 0.03;
    }
    return 0;
}

/* Plus an absolute floor: d (and dmin) are f16, which rounds a scale
 * below 2^-24 to a subnormal step or to zero, so a block of tiny values may
 * lose up to half that step times the largest factor d is multiplied by
 * (level times sub-block scale). */
static double floor_error(int type) {
    const double half_step = 0x1p-25;
    switch (type) {
    case OKV_GGML_Q4_1: return 15 * half_step;
    case OKV_GGML_Q5_0: return 16 * half_step;
    case OKV_GGML_Q5_1: return 31 * half_step;
    case OKV_GGML_Q2_K: return (15 * 3 + 15) * half_step;
    case OKV_GGML_Q3_K: return 32 * 4 * half_step;
    case OKV_GGML_Q4_K: return (63 * 15 + 63) * half_step;
    case OKV_GGML_Q5_K: return (63 * 31 + 63) * half_step;
    case OKV_GGML_Q6_K: return 128 * 32 * half_step;
    }
    return 0;
}

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static float frand(void) { /* uniform in [-1, 1) */
    rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17;
    return (float)((double)(rng >> 40) * (2.0 / (1 << 24)) - 1.0);
}

static void round_trip(const char *what, const float *x, int64_t k) {
    unsigned char q[1024 * 2];
    float y[1024];
    for (size_t t = 0; t < sizeof new_types / sizeof new_types[0]; t++) {
        const int type = new_types[t];
        const int64_t bs = okv_ggml_block_size(type);
        CHECK(okv_quantize_row(type, x, q, k), "%s %s: quantize refused", what, okv_ggml_type_name(type));
        dequant(type, q, y, k);
        double worst = 0;
        int64_t worst_at = -1, n_bad = 0;
        for (int64_t b = 0; b < k / bs; b++) {
            float amax = 0;
            for (int64_t j = 0; j < bs; j++) amax = fmaxf(amax, fabsf(x[b * bs + j]));
            for (int64_t j = b * bs; j < (b + 1) * bs; j++) {
                if (!isfinite(y[j])) { n_bad++; continue; }
                const double e = fabs((double)y[j] - x[j]);
                /* an all-zero block must come back exactly */
                const double lim = amax == 0 ? 0 : tolerance(type) * amax + floor_error(type);
                if (e > lim) n_bad++;
                if (amax > 0 && e / amax > worst) { worst = e / amax; worst_at = j; }
            }
        }
        CHECK(n_bad == 0, "%s %s: %lld values non-finite or off by more than %.3g of the block max + %.3g (worst %.3g at %lld)",
              what, okv_ggml_type_name(type), (long long)n_bad, tolerance(type), floor_error(type), worst,
              (long long)worst_at);
    }
}

static void test_hand_rows(void) {
    enum { K = 512 };
    float x[K];
    memset(x, 0, sizeof x);
    round_trip("zeros", x, K);
    for (int i = 0; i < K; i++) x[i] = 0.37f;
    round_trip("constant 0.37", x, K);
    for (int i = 0; i < K; i++) x[i] = -2.5f;
    round_trip("constant -2.5", x, K);
    for (int i = 0; i < K; i++) x[i] = 3e-7f; /* below f16's normal range */
    round_trip("constant 3e-7", x, K);
    for (int i = 0; i < K; i++) x[i] = 0.01f * frand();
    x[77] = 1000.0f;
    x[300] = -500.0f;
    round_trip("outliers", x, K);
    for (int i = 0; i < K; i++) x[i] = frand();
    round_trip("uniform", x, K);
    for (int i = 0; i < K; i++) x[i] = i < 256 ? 0.0f : frand() * 3.0f; /* one zero super-block */
    round_trip("half zero", x, K);

    /* a constant row keeps its value (asymmetric formats store it as the min
     * or as scale * top level; symmetric ones as the most negative level) */
    for (int i = 0; i < K; i++) x[i] = 0.37f;
    block_q4_1 b41[K / 32];
    okv_quantize_row_q4_1(x, b41, K);
    CHECK(b41[0].d == 0 && h2f(b41[0].m) == h2f(okv_f32_to_f16(0.37f)), "q4_1 constant: d %#x m %#x", b41[0].d,
          b41[0].m);
    block_q6_K b6[K / 256];
    memset(x, 0, sizeof x);
    okv_quantize_row_q6_K(x, b6, K);
    const unsigned char *raw = (const unsigned char *)b6;
    size_t nonzero = 0;
    for (size_t i = 0; i < sizeof b6; i++) nonzero += raw[i] != 0;
    CHECK(nonzero == 0, "q6_K of zeros is all zero bytes (%zu are not)", nonzero);
    CHECK(!okv_quantize_row(OKV_GGML_Q4_K, x, b6, 128), "q4_K refuses a 128-value row");
    CHECK(!okv_quantize_row(OKV_GGML_IQ4_NL, x, b6, 256), "no iq4_nl quantizer");
}

/* ------------------------------------------------------------------ */
/* Byte-exactness against llama-quantize                               */

static const char *const file_tags[] = {"q4_k_m", "q5_k_m", "q6_k", "q3_k_m", "q2_k", "q4_1", "q5_0", "q5_1"};
/* llama_ftype of each file (general.file_type), which synth must write too */
static const uint32_t file_ftypes[] = {15, 17, 18, 12, 10, 3, 8, 9};
enum { N_FILES = sizeof file_tags / sizeof file_tags[0] };

/* Compares one tensor; returns 1 if equal.  On a difference, counts the
 * differing blocks and describes the first one in first (if still empty). */
static int compare_tensor(const okv_gguf_tensor *q, const okv_gguf_tensor *src, long *diff_blocks, char *first,
                          size_t cap) {
    const int64_t k = q->ne[0], rows = q->ne[1] * q->ne[2] * q->ne[3];
    const size_t row_bytes = okv_ggml_row_size(q->type, k), bsz = okv_ggml_type_size(q->type);
    unsigned char *buf = malloc(row_bytes ? row_bytes : 1);
    int same = 1;
    for (int64_t r = 0; r < rows && buf; r++) {
        const float *x = (const float *)src->data + r * k;
        if (!okv_quantize_row(q->type, x, buf, k)) {
            if (!first[0]) snprintf(first, cap, "%s: no quantizer for %s", q->name, okv_ggml_type_name(q->type));
            same = 0;
            break;
        }
        const unsigned char *want = (const unsigned char *)q->data + (size_t)r * row_bytes;
        if (memcmp(buf, want, row_bytes) == 0) continue;
        same = 0;
        for (size_t b = 0; b < row_bytes / bsz; b++) {
            if (memcmp(buf + b * bsz, want + b * bsz, bsz) == 0) continue;
            (*diff_blocks)++;
            if (!first[0]) {
                size_t o = 0;
                while (buf[b * bsz + o] == want[b * bsz + o]) o++;
                snprintf(first, cap, "%s row %lld block %zu byte %zu: ours %#04x, llama-quantize's %#04x", q->name,
                         (long long)r, b, o, buf[b * bsz + o], want[b * bsz + o]);
            }
        }
    }
    free(buf);
    return same && buf;
}

static void test_byte_exact(const char *shared) {
    char path[4096];
    okv_error err = {0};
    snprintf(path, sizeof path, "%s/models/tiny-llama256-f32.gguf", shared);
    okv_gguf *src = okv_gguf_open(path, &err);
    CHECK(src != NULL, "open %s: %s", path, err.message);
    if (!src) return;
    for (int f = 0; f < N_FILES; f++) {
        snprintf(path, sizeof path, "%s/models/tiny-llama256-%s.gguf", shared, file_tags[f]);
        okv_gguf *g = okv_gguf_open(path, &err);
        CHECK(g != NULL, "open %s: %s", path, err.message);
        if (!g) continue;
        int match[OKV_GGML_TYPE_END] = {0}, total[OKV_GGML_TYPE_END] = {0};
        long diff_blocks[OKV_GGML_TYPE_END] = {0};
        char first[OKV_GGML_TYPE_END][256];
        memset(first, 0, sizeof first);
        for (int64_t i = 0; i < okv_gguf_n_tensors(g); i++) {
            const okv_gguf_tensor *q = okv_gguf_tensor_at(g, i);
            const int64_t si = okv_gguf_find_tensor(src, q->name);
            const okv_gguf_tensor *s = okv_gguf_tensor_at(src, si);
            CHECK(s && s->type == OKV_GGML_F32 && memcmp(s->ne, q->ne, sizeof q->ne) == 0,
                  "%s: %s has no F32 source of its shape", file_tags[f], q->name);
            if (!s || s->type != OKV_GGML_F32 || memcmp(s->ne, q->ne, sizeof q->ne) != 0) continue;
            total[q->type]++;
            match[q->type] += compare_tensor(q, s, &diff_blocks[q->type], first[q->type], sizeof first[q->type]);
        }
        printf("%-7s byte-exact against llama-quantize:", file_tags[f]);
        for (int t = 0; t < OKV_GGML_TYPE_END; t++)
            if (total[t]) printf(" %s %d/%d", okv_ggml_type_name(t), match[t], total[t]);
        printf("\n");
        for (int t = 0; t < OKV_GGML_TYPE_END; t++) {
            if (!total[t]) continue;
            CHECK(match[t] == total[t], "%s: %s: %d of %d tensors differ, %ld blocks; first: %s", file_tags[f],
                  okv_ggml_type_name(t), total[t] - match[t], total[t], diff_blocks[t], first[t]);
        }
        okv_gguf_close(g);
    }
    okv_gguf_close(src);
}

/* ------------------------------------------------------------------ */
/* offkv synth --type against the same files                           */

static char bin[4096], dir[4096];
static char out_text[1 << 16], err_text[1 << 16];

static void slurp(const char *path, char *buf, size_t cap) {
    FILE *f = fopen(path, "rb");
    size_t n = f ? fread(buf, 1, cap - 1, f) : 0;
    buf[n] = '\0';
    if (f) fclose(f);
}

/* Runs offkv with argv (NULL-terminated, argv[0] unused); returns its exit
 * status (-1 if it did not exit) with its output in out_text / err_text. */
static int offkv(const char **argv) {
    argv[0] = bin;
    char o[4200], e[4200];
    snprintf(o, sizeof o, "%s/out.txt", dir);
    snprintf(e, sizeof e, "%s/err.txt", dir);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, o, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_addopen(&fa, 2, e, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    pid_t pid;
    int rc = posix_spawn(&pid, bin, &fa, NULL, (char *const *)argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    out_text[0] = err_text[0] = '\0';
    if (rc != 0) return -1;
    int status = 0;
    waitpid(pid, &status, 0);
    slurp(o, out_text, sizeof out_text);
    slurp(e, err_text, sizeof err_text);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static void test_help(void) {
    const char *argv[] = {NULL, "synth", "--help", NULL};
    CHECK(offkv(argv) == 0, "synth --help: %s", err_text);
    static const char *const names[] = {"f32", "f16", "q8_0", "q4_0", "q4_1", "q5_0", "q5_1",
                                        "q2_k", "q3_k_m", "q4_k_m", "q5_k_m", "q6_k"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        CHECK(strstr(out_text, names[i]) != NULL, "synth --help does not list %s:\n%s", names[i], out_text);
    /* the file types are llama-quantize's names: q4_k alone is not one */
    char never[4300];
    snprintf(never, sizeof never, "%s/never.gguf", dir);
    const char *bad[] = {NULL, "synth", "--type", "q4_k", "-o", never, NULL};
    const int rc = offkv(bad);
    CHECK(rc == 2, "synth --type q4_k: exit %d, want 2 (usage): %s", rc, err_text);
}

static void test_mixes(const char *shared) {
    okv_error err = {0};
    for (int f = 0; f < N_FILES; f++) {
        char want_path[4096], got_path[4300];
        snprintf(want_path, sizeof want_path, "%s/models/tiny-llama256-%s.gguf", shared, file_tags[f]);
        snprintf(got_path, sizeof got_path, "%s/synth-%s.gguf", dir, file_tags[f]);
        const char *argv[] = {NULL, "synth", "--n-embd", "256", "--n-layer", "4", "--n-head", "8", "--n-head-kv",
                              "4", "--n-ff", "768", "--n-vocab", "512", "--seed", "11", "--type", file_tags[f],
                              "-o", got_path, NULL};
        CHECK(offkv(argv) == 0, "synth --type %s: %s", file_tags[f], err_text);
        okv_gguf *want = okv_gguf_open(want_path, &err);
        CHECK(want != NULL, "open %s: %s", want_path, err.message);
        okv_gguf *got = okv_gguf_open(got_path, &err);
        CHECK(got != NULL, "open %s: %s", got_path, err.message);
        if (want && got) {
            const int64_t n = okv_gguf_n_tensors(want);
            int same_type = 0, same_bytes = 0;
            CHECK(okv_gguf_n_tensors(got) == n, "%s: synth wrote %lld tensors, llama-quantize %lld", file_tags[f],
                  (long long)okv_gguf_n_tensors(got), (long long)n);
            for (int64_t i = 0; i < n; i++) {
                const okv_gguf_tensor *w = okv_gguf_tensor_at(want, i);
                const okv_gguf_tensor *s = okv_gguf_tensor_at(got, okv_gguf_find_tensor(got, w->name));
                const int ok = s && s->type == w->type && memcmp(s->ne, w->ne, sizeof w->ne) == 0;
                CHECK(ok, "%s: %s is %s in synth's file, %s in llama-quantize's", file_tags[f], w->name,
                      s ? okv_ggml_type_name(s->type) : "missing", okv_ggml_type_name(w->type));
                same_type += ok;
                same_bytes += ok && s->n_bytes == w->n_bytes && memcmp(s->data, w->data, w->n_bytes) == 0;
            }
            uint32_t ft_want = 0, ft_got = 1;
            CHECK(okv_gguf_get_u32(want, "general.file_type", &ft_want, &err) == OKV_OK && ft_want == file_ftypes[f],
                  "%s: llama-quantize's file_type %u", file_tags[f], ft_want);
            CHECK(okv_gguf_get_u32(got, "general.file_type", &ft_got, &err) == OKV_OK && ft_got == ft_want,
                  "%s: synth's general.file_type %u, llama-quantize's %u", file_tags[f], ft_got, ft_want);
            printf("%-7s synth mix: %d/%lld tensor types as llama-quantize's, %d/%lld byte-equal, file_type %u/%u\n",
                   file_tags[f], same_type, (long long)n, same_bytes, (long long)n, ft_got, ft_want);
            CHECK(same_bytes == n, "%s: %lld tensors of synth's file differ from llama-quantize's", file_tags[f],
                  (long long)(n - same_bytes));
        }
        okv_gguf_close(want);
        okv_gguf_close(got);
        remove(got_path);
    }
}

/* Shapes the shared files do not cover, against llama_tensor_get_type as
 * read in src/llama-quant.cpp: rows of 64 and 172 values (not whole
 * super-blocks) fall back to 32-value types or f16, and a tied token_embd
 * takes the output's rule. */
static void test_mix_fallbacks(void) {
    char path[4300];
    snprintf(path, sizeof path, "%s/synth-fallback.gguf", dir);
    static const struct {
        const char *type, *arch;
        const char *name[4];
        int want[4];
    } cases[] = {
        /* n_embd 64: token_embd q4_K -> q5_0; output q8_0 (its row is not
         * whole q4_K blocks); ffn_down's 172-value rows: f16; layer 1 of 2
         * is a use_more_bits layer: attn_v q6_K -> q8_0 */
        {"q4_k_m", "llama", {"token_embd.weight", "output.weight", "blk.0.ffn_down.weight", "blk.1.attn_v.weight"},
         {OKV_GGML_Q5_0, OKV_GGML_Q8_0, OKV_GGML_F16, OKV_GGML_Q8_0}},
        /* gemma3 is tied: token_embd gets the output's q8_0; q2_K/q3_K -> q4_0 */
        {"q2_k", "gemma3", {"token_embd.weight", "blk.0.attn_q.weight", "blk.0.attn_v.weight", "blk.1.attn_output.weight"},
         {OKV_GGML_Q8_0, OKV_GGML_Q4_0, OKV_GGML_Q4_0, OKV_GGML_Q4_0}},
        /* legacy mixes keep the 32-value type; output q6_K -> q8_0 */
        {"q5_1", "llama", {"token_embd.weight", "output.weight", "blk.0.ffn_gate.weight", "blk.0.ffn_down.weight"},
         {OKV_GGML_Q5_1, OKV_GGML_Q8_0, OKV_GGML_Q5_1, OKV_GGML_F16}},
        {"q5_k_m", "llama", {"token_embd.weight", "blk.0.attn_v.weight", "blk.0.attn_k.weight", "output.weight"},
         {OKV_GGML_Q5_1, OKV_GGML_Q5_1, OKV_GGML_Q5_1, OKV_GGML_Q8_0}},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        const char *argv[] = {NULL, "synth", "--arch", cases[c].arch, "--type", cases[c].type, "-o", path, NULL};
        CHECK(offkv(argv) == 0, "synth --type %s: %s", cases[c].type, err_text);
        okv_error err = {0};
        okv_gguf *g = okv_gguf_open(path, &err);
        CHECK(g != NULL, "open %s: %s", path, err.message);
        for (int i = 0; g && i < 4; i++) {
            const okv_gguf_tensor *t = okv_gguf_tensor_at(g, okv_gguf_find_tensor(g, cases[c].name[i]));
            CHECK(t && (int)t->type == cases[c].want[i], "%s %s: %s is %s, want %s", cases[c].arch, cases[c].type,
                  cases[c].name[i], t ? okv_ggml_type_name(t->type) : "missing",
                  okv_ggml_type_name(cases[c].want[i]));
        }
        okv_gguf_close(g);
    }
    remove(path);
}

int main(void) {
    test_hand_rows();
    const char *shared = check_shared_dir();
    if (shared) test_byte_exact(shared);
    else printf("skipped: ../shared not found (the byte-exact and mix checks against llama-quantize)\n");
    const char *b = getenv("OKV_BIN");
    if (!b) {
        printf("skipped: OKV_BIN not set, so no offkv synth checks (ctest sets it to the build folder)\n");
        return check_done();
    }
    snprintf(bin, sizeof bin, "%s/offkv", b);
    snprintf(dir, sizeof dir, "%s/test-quantize-XXXXXX", b);
    if (!mkdtemp(dir)) {
        printf("cannot make a scratch folder under %s\n", b);
        return 1;
    }
    test_help();
    test_mix_fallbacks();
    if (shared) test_mixes(shared);
    char p[4300];
    snprintf(p, sizeof p, "%s/out.txt", dir);
    remove(p);
    snprintf(p, sizeof p, "%s/err.txt", dir);
    remove(p);
    rmdir(dir);
    return check_done();
}
