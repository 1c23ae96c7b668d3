/* offkv bench: prompt processing (pp: one eval of P tokens) and text
 * generation (tg: N evals of one token) speed, in llama-bench's terms and
 * table.  Each test starts from an empty cache, runs once unmeasured to
 * warm caches and pages, then R times; t/s is the median ± the standard
 * deviation over those R. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "offkv/gguf.h"

static void usage(FILE *f) {
    fprintf(f,
            "usage: offkv bench -m MODEL [flags]\n"
            "Measures prompt processing (ppP: P tokens in one eval) and generation (tgN: N one-token\n"
            "evals) from an empty cache; prints llama-bench's table, t/s = median +- standard deviation.\n\n"
            "  -m, --model FILE      GGUF model\n"
            "  -p, --n-prompt P      prompt tokens, one eval (default 512; 0 skips pp)\n"
            "  -n, --n-gen N         generated tokens (default 128; 0 skips tg)\n"
            "  -t, --threads N       threads (default 2)\n"
            "  -r, --repetitions R   measured runs per test (default 3), after one warmup run\n"
            "  --kv-type T           K/V cache storage: f16 (default), f32 or q8_0\n"
            "  -h, --help            this help\n");
}

typedef struct bench {
    okv_context *ctx;
    int32_t *tok, *pos;
    float *logits;
} bench;

static bool run_pp(const char *cmd, bench *b, int32_t n, double *sec) {
    okv_error err = {0};
    if (okv_cache_clear(okv_context_cache(b->ctx), &err) != OKV_OK) {
        cli_error(cmd, "clear: %s", err.message);
        return false;
    }
    for (int32_t i = 0; i < n; i++) b->pos[i] = i;
    double t0 = cli_now();
    if (okv_context_eval_last(b->ctx, b->tok, b->pos, n, b->logits, &err) != OKV_OK) {
        cli_error(cmd, "pp eval: %s", err.message);
        return false;
    }
    *sec = cli_now() - t0;
    return true;
}

static bool run_tg(const char *cmd, bench *b, int32_t n, double *sec) {
    okv_error err = {0};
    if (okv_cache_clear(okv_context_cache(b->ctx), &err) != OKV_OK) {
        cli_error(cmd, "clear: %s", err.message);
        return false;
    }
    double t0 = cli_now();
    for (int32_t i = 0; i < n; i++) {
        if (okv_context_eval_last(b->ctx, &b->tok[i], &i, 1, b->logits, &err) != OKV_OK) {
            cli_error(cmd, "tg eval at %d: %s", (int)i, err.message);
            return false;
        }
    }
    *sec = cli_now() - t0;
    return true;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* llama-bench's model column: "llama 1.1B Q4_0"-style, from the file. */
static void describe(const char *path, const okv_model *m, char *name, size_t cap, double *params) {
    static const char *const ftypes[] = {"all F32", "F16", "Q4_0", "Q4_1", "?", "?", "?", "Q8_0"};
    *params = 0;
    const char *ft = "?";
    okv_gguf *g = okv_gguf_open(path, NULL);
    if (g) {
        for (int64_t i = 0; i < okv_gguf_n_tensors(g); i++) {
            const okv_gguf_tensor *t = okv_gguf_tensor_at(g, i);
            *params += (double)t->ne[0] * (double)t->ne[1] * (double)t->ne[2] * (double)t->ne[3];
        }
        uint32_t f = 99;
        if (okv_gguf_get_u32(g, "general.file_type", &f, NULL) == OKV_OK && f < sizeof ftypes / sizeof *ftypes)
            ft = ftypes[f];
        okv_gguf_close(g);
    }
    double p = *params;
    char size[32];
    if (p >= 1e9) snprintf(size, sizeof size, "%.1fB", p / 1e9);
    else if (p >= 1e6) snprintf(size, sizeof size, "%.0fM", p / 1e6);
    else snprintf(size, sizeof size, "%.0fK", p / 1e3);
    snprintf(name, cap, "%s %s %s", okv_model_arch(m), size, ft);
}

int cmd_bench(int argc, char **argv) {
    const char *cmd = "bench", *model = NULL, *v;
    int32_t n_prompt = 512, n_gen = 128, threads = 2, reps = 3;
    int kv = 0;
    static const char *const kv_types[] = {"f16", "f32", "q8_0", NULL};
    cli_seen seen = {0};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (cli_is(a, "-h", "--help")) { usage(stdout); return CLI_OK; }
        if (!cli_once(&seen, cmd, a)) return CLI_USAGE;
        if (!(cli_is(a, "-m", "--model") || cli_is(a, "-p", "--n-prompt") || cli_is(a, "-n", "--n-gen") ||
              cli_is(a, "-t", "--threads") || cli_is(a, "-r", "--repetitions") || cli_is(a, "--kv-type", NULL)))
            return cli_unknown(cmd, a);
        if (!(v = cli_value(cmd, argc, argv, &i))) return CLI_USAGE;
        bool ok = true;
        if (cli_is(a, "-m", "--model")) model = v;
        else if (cli_is(a, "-p", "--n-prompt")) ok = cli_int(cmd, a, v, 0, 1 << 20, &n_prompt);
        else if (cli_is(a, "-n", "--n-gen")) ok = cli_int(cmd, a, v, 0, 1 << 20, &n_gen);
        else if (cli_is(a, "-t", "--threads")) ok = cli_int(cmd, a, v, 1, 1024, &threads);
        else if (cli_is(a, "-r", "--repetitions")) ok = cli_int(cmd, a, v, 1, 1000, &reps);
        else ok = cli_choice(cmd, a, v, kv_types, &kv);
        if (!ok) return CLI_USAGE;
    }
    if (!model) {
        cli_error(cmd, "-m MODEL is required (see offkv bench --help)");
        return CLI_USAGE;
    }
    if (n_prompt == 0 && n_gen == 0) {
        cli_error(cmd, "-p 0 and -n 0: nothing to measure");
        return CLI_USAGE;
    }
    int rc = CLI_FAIL;
    bench b = {0};
    double *sec = NULL;
    okv_model *m = cli_load_model(cmd, model, 0, &rc);
    if (!m) goto done;
    rc = CLI_FAIL;
    const int32_t longest = n_prompt > n_gen ? n_prompt : n_gen;
    cli_ctx_opts o = {.n_threads = threads, .capacity = longest, .max_write = n_prompt > 0 ? n_prompt : 1,
                      .kv_type = kv_types[kv]};
    if (!(b.ctx = cli_context(cmd, m, &o))) goto done;
    const int32_t n_vocab = okv_model_n_vocab(m);
    b.tok = malloc((size_t)longest * sizeof *b.tok);
    b.pos = malloc((size_t)longest * sizeof *b.pos);
    b.logits = malloc((size_t)n_vocab * sizeof *b.logits);
    sec = malloc((size_t)reps * sizeof *sec);
    if (!b.tok || !b.pos || !b.logits || !sec) {
        cli_error(cmd, "out of memory");
        goto done;
    }
    /* Random tokens, as llama-bench uses: speed does not depend on them. */
    uint64_t x = 42;
    for (int32_t i = 0; i < longest; i++) {
        x += 0x9e3779b97f4a7c15ull;
        uint64_t z = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        b.tok[i] = (int32_t)((z ^ (z >> 31)) % (uint64_t)n_vocab);
    }

    char name[64], size[32];
    double params;
    describe(model, m, name, sizeof name, &params);
    cli_bytes(okv_model_weight_bytes(m), size, sizeof size);
    printf("| %-24s | %10s | %10s | %-7s | %7s | %6s | %10s | %20s |\n", "model", "size", "params", "backend",
           "threads", "kv", "test", "t/s");
    /* markdown alignment row: a trailing ':' right-aligns the column */
    static const int widths[] = {24, 10, 10, 7, 7, 6, 10, 20};
    static const bool right[] = {false, true, true, false, true, false, true, true};
    for (int c = 0; c < 8; c++) {
        printf("| ");
        for (int k = 0; k < widths[c] - right[c]; k++) putchar('-');
        printf(right[c] ? ": " : " ");
    }
    printf("|\n");
    fflush(stdout);
    for (int test = 0; test < 2; test++) {
        int32_t n = test == 0 ? n_prompt : n_gen;
        if (n == 0) continue;
        double warm;
        bool (*fn)(const char *, bench *, int32_t, double *) = test == 0 ? run_pp : run_tg;
        if (!fn(cmd, &b, n, &warm)) goto done;
        double mean = 0, var = 0;
        for (int32_t r = 0; r < reps; r++) {
            double s;
            if (!fn(cmd, &b, n, &s)) goto done;
            sec[r] = n / s; /* tokens per second */
            mean += sec[r] / reps;
        }
        for (int32_t r = 0; r < reps; r++) var += (sec[r] - mean) * (sec[r] - mean);
        double sd = reps > 1 ? sqrt(var / (reps - 1)) : 0.0;
        qsort(sec, (size_t)reps, sizeof *sec, cmp_double);
        double median = reps % 2 ? sec[reps / 2] : 0.5 * (sec[reps / 2 - 1] + sec[reps / 2]);
        char tname[32], ts[48], pstr[32];
        snprintf(tname, sizeof tname, "%s%d", test == 0 ? "pp" : "tg", (int)n);
        snprintf(ts, sizeof ts, "%.2f ± %.2f", median, sd);
        if (params >= 1e9) snprintf(pstr, sizeof pstr, "%.2f B", params / 1e9);
        else snprintf(pstr, sizeof pstr, "%.2f M", params / 1e6);
        /* "±" is two bytes in UTF-8: widen the field by one so columns line up */
        printf("| %-24s | %10s | %10s | %-7s | %7d | %6s | %10s | %21s |\n", name, size, pstr, "CPU", (int)threads,
               kv_types[kv], tname, ts);
        fflush(stdout);
    }
    rc = CLI_OK;
done:
    free(sec);
    free(b.tok);
    free(b.pos);
    free(b.logits);
    okv_context_free(b.ctx);
    okv_model_free(m);
    return rc;
}
