/* offkv bench: prompt processing (pp: one eval of P tokens) and text
 * generation (tg: N evals of one token) speed, in llama-bench's terms and
 * table.  Each test starts from an empty cache (or, with -d D, from a cache
 * holding D tokens), runs once unmeasured to warm caches and pages, then R
 * times; t/s is the median ± the standard deviation over those R.
 *
 * llama-bench refills the depth before every run; here the D tokens are
 * evaluated once and every run rewinds the cache to length D, which leaves
 * the same cache state for far less time (a 4096-token fill costs more than
 * the runs it precedes).  Where a ring layer cannot rewind that far, the
 * cache is cleared and filled again.
 *
 * --verify K adds the cost of speculative verification: evals of K tokens
 * that each compute all K tokens' logits (what checking a draft of K - 1
 * tokens plus the next one takes), as many as fit in the tg test's N tokens,
 * and states one such eval in single decode steps (the tg test's median):
 * every speculative speedup is bounded by tokens accepted per that cost. */
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
            "evals) from an empty cache, or from D cached tokens with -d D; prints llama-bench's table,\n"
            "t/s = median +- standard deviation.\n\n"
            "  -m, --model FILE      GGUF model\n"
            "  -p, --n-prompt P      prompt tokens, one eval (default 512; 0 skips pp)\n"
            "  -n, --n-gen N         generated tokens (default 128; 0 skips tg)\n"
            "  -t, --threads N       threads (default 2)\n"
            "  -r, --repetitions R   measured runs per test (default 3), after one warmup run\n"
            "  -d, --n-depth D       tokens already in the cache when each test starts (default 0);\n"
            "                        filled once (again before each run where a sliding-window layer\n"
            "                        cannot rewind to it), not timed; the test column says e.g. 'tg128 @ d4096'\n"
            "  --kv-type T           K/V cache storage: f16 (default), f32 or q8_0\n"
            "  --verify K            also time evals of K tokens with all K logits (speculative\n"
            "                        verification: a draft of K-1 and one more), N/K of them per run,\n"
            "                        and print one's cost in single decode steps (needs -n > 0)\n"
            "  --turns               before each run (warm-up included; the first one does the -d fill)\n"
            "                        wait for a line on stdin, and after it print its t/s on stderr:\n"
            "                        lets a harness interleave another engine's runs (make bench-peer)\n"
            "  -h, --help            this help\n");
}

typedef struct bench {
    okv_context *ctx;
    int32_t *tok, *pos; /* depth + the longest test: tokens and their positions 0, 1, ... */
    float *logits;      /* n_vocab floats, or verify x n_vocab */
    int32_t depth, fill_chunk, verify;
} bench;

/* Evaluates tokens 0 .. depth-1 into an empty cache, fill_chunk at a time,
 * without the output layer (nothing reads those logits).  A fill of several
 * chunks shows how far it has got on a terminal (depth 32768 of a 7B model
 * takes minutes, before every test). */
static bool fill(const char *cmd, bench *b) {
    okv_error err = {0};
    double t0 = cli_now();
    const bool show = b->depth > b->fill_chunk;
    for (int32_t p = 0; p < b->depth; p += b->fill_chunk) {
        int32_t n = b->depth - p < b->fill_chunk ? b->depth - p : b->fill_chunk;
        if (show) cli_status("offkv %s: filling the cache: %d of %d tokens", cmd, (int)p, (int)b->depth);
        if (okv_context_eval_last(b->ctx, b->tok + p, b->pos + p, n, NULL, &err) != OKV_OK) {
            if (show) cli_status_clear();
            cli_error(cmd, "depth fill at %d: %s", (int)p, err.message);
            return false;
        }
    }
    if (show) cli_status_clear();
    if (b->depth > 0) fprintf(stderr, "offkv bench: depth %d filled in %.2f s (not timed)\n", (int)b->depth, cli_now() - t0);
    return true;
}

/* Leaves the cache holding exactly the depth tokens: an empty cache for depth
 * 0; otherwise a rewind to the depth when the cache can, else a refill. */
static bool reset(const char *cmd, bench *b) {
    okv_error err = {0};
    okv_cache *c = okv_context_cache(b->ctx);
    int32_t len = okv_cache_length(c);
    if (b->depth > 0 && len == b->depth) return true;
    if (b->depth > 0 && len > b->depth && okv_cache_can_rewind(c, b->depth)) {
        if (okv_cache_rewind(c, b->depth, &err) == OKV_OK) return true;
        cli_error(cmd, "rewind to %d: %s", (int)b->depth, err.message);
        return false;
    }
    if (okv_cache_clear(c, &err) != OKV_OK) {
        cli_error(cmd, "clear: %s", err.message);
        return false;
    }
    return fill(cmd, b);
}

static bool run_pp(const char *cmd, bench *b, int32_t n, double *sec) {
    okv_error err = {0};
    if (!reset(cmd, b)) return false;
    double t0 = cli_now();
    if (okv_context_eval_last(b->ctx, b->tok + b->depth, b->pos + b->depth, n, b->logits, &err) != OKV_OK) {
        cli_error(cmd, "pp eval: %s", err.message);
        return false;
    }
    *sec = cli_now() - t0;
    return true;
}

static bool run_tg(const char *cmd, bench *b, int32_t n, double *sec) {
    okv_error err = {0};
    if (!reset(cmd, b)) return false;
    double t0 = cli_now();
    for (int32_t i = b->depth; i < b->depth + n; i++) {
        if (okv_context_eval_last(b->ctx, &b->tok[i], &b->pos[i], 1, b->logits, &err) != OKV_OK) {
            cli_error(cmd, "tg eval at %d: %s", (int)i, err.message);
            return false;
        }
    }
    *sec = cli_now() - t0;
    return true;
}

/* n / verify evals of verify tokens each (at least one), every one
 * computing all its tokens' logits, positions advancing as in tg. */
static bool run_verify(const char *cmd, bench *b, int32_t n, double *sec) {
    okv_error err = {0};
    if (!reset(cmd, b)) return false;
    const int32_t evals = n / b->verify > 0 ? n / b->verify : 1;
    double t0 = cli_now();
    for (int32_t e = 0; e < evals; e++) {
        const int32_t i = b->depth + e * b->verify;
        if (okv_context_eval(b->ctx, &b->tok[i], &b->pos[i], b->verify, b->logits, &err) != OKV_OK) {
            cli_error(cmd, "verify eval at %d: %s", (int)i, err.message);
            return false;
        }
    }
    *sec = cli_now() - t0;
    return true;
}

/* --turns: another program (bench/peer's harness) runs its engine between
 * ours, so both see the same stretch of a noisy machine.  Before each run we
 * say so and wait for its go: one line on stdin. */
static bool take_turn(const char *cmd) {
    fprintf(stderr, "offkv bench: waiting for a line on stdin\n");
    fflush(stderr);
    int c;
    while ((c = getchar()) != EOF && c != '\n') {}
    if (c == EOF) {
        cli_error(cmd, "--turns: stdin ended while waiting for a turn");
        return false;
    }
    return true;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* llama-bench's model column: "llama 1.1B Q4_0"-style, from the file. */
static void describe(const char *path, const okv_model *m, char *name, size_t cap, double *params) {
    /* llama.cpp's file types (llama_ftype) */
    static const char *const ftypes[] = {"all F32", "F16",    "Q4_0",   "Q4_1",   "?",      "?",      "?",
                                         "Q8_0",    "Q5_0",   "Q5_1",   "Q2_K",   "Q3_K_S", "Q3_K_M", "Q3_K_L",
                                         "Q4_K_S",  "Q4_K_M", "Q5_K_S", "Q5_K_M", "Q6_K"};
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
        else if (f == 32)
            ft = "BF16";
        else if (f == 38)
            ft = "MXFP4 MoE"; /* llama.cpp's name for LLAMA_FTYPE_MOSTLY_MXFP4_MOE */
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
    int32_t n_prompt = 512, n_gen = 128, threads = 2, reps = 3, depth = 0, verify = 0;
    int kv = 0;
    bool turns = false;
    cli_seen seen = {0};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (cli_is(a, "-h", "--help")) { usage(stdout); return CLI_OK; }
        if (!cli_once(&seen, cmd, a)) return CLI_USAGE;
        if (cli_is(a, "--turns", NULL)) {
            turns = true;
            continue;
        }
        if (!(cli_is(a, "-m", "--model") || cli_is(a, "-p", "--n-prompt") || cli_is(a, "-n", "--n-gen") ||
              cli_is(a, "-t", "--threads") || cli_is(a, "-r", "--repetitions") || cli_is(a, "-d", "--n-depth") ||
              cli_is(a, "--kv-type", NULL) || cli_is(a, "--verify", NULL)))
            return cli_unknown(cmd, a);
        if (!(v = cli_value(cmd, argc, argv, &i))) return CLI_USAGE;
        bool ok = true;
        if (cli_is(a, "-m", "--model")) model = v;
        else if (cli_is(a, "-p", "--n-prompt")) ok = cli_int(cmd, a, v, 0, 1 << 20, &n_prompt);
        else if (cli_is(a, "-n", "--n-gen")) ok = cli_int(cmd, a, v, 0, 1 << 20, &n_gen);
        else if (cli_is(a, "-t", "--threads")) ok = cli_int(cmd, a, v, 1, 1024, &threads);
        else if (cli_is(a, "-r", "--repetitions")) ok = cli_int(cmd, a, v, 1, 1000, &reps);
        /* depth + test must fit the int32 positions and a context: 1 << 24 is far beyond any model */
        else if (cli_is(a, "-d", "--n-depth")) ok = cli_int(cmd, a, v, 0, 1 << 24, &depth);
        else if (cli_is(a, "--verify", NULL)) ok = cli_int(cmd, a, v, 1, 256, &verify);
        else ok = cli_choice(cmd, a, v, cli_kv_types, &kv);
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
    if (verify > 0 && n_gen == 0) {
        cli_error(cmd, "--verify %d needs the tg test (-n > 0): its cost is stated in decode steps", (int)verify);
        return CLI_USAGE;
    }
    int rc = CLI_FAIL;
    bench b = {0};
    double *sec = NULL;
    okv_model *m = cli_load_model(cmd, model, 0, threads, &rc);
    if (!m) goto done;
    rc = CLI_FAIL;
    /* the verify test's evals cover at least one eval of verify tokens */
    const int32_t n_verify = verify > 0 ? (n_gen / verify > 0 ? n_gen / verify : 1) * verify : 0;
    int32_t longest = n_prompt > n_gen ? n_prompt : n_gen;
    if (n_verify > longest) longest = n_verify;
    /* The fill evaluates the depth in chunks as long as the prompt test's
     * eval (at least 512, as llama.cpp's default batch): a tg-only run with
     * max_write 1 would otherwise fill one token at a time. */
    b.depth = depth;
    b.fill_chunk = depth < 512 ? depth : 512;
    if (b.fill_chunk < n_prompt) b.fill_chunk = n_prompt;
    b.verify = verify;
    int32_t max_write = b.fill_chunk > 0 ? b.fill_chunk : 1;
    if (max_write < verify) max_write = verify;
    const int32_t total = depth + longest;
    cli_ctx_opts o = {.n_threads = threads, .capacity = total, .max_write = max_write, .kv_type = cli_kv_types[kv]};
    if (!(b.ctx = cli_context(cmd, m, &o))) goto done;
    const int32_t n_vocab = okv_model_n_vocab(m);
    b.tok = malloc((size_t)total * sizeof *b.tok);
    b.pos = malloc((size_t)total * sizeof *b.pos);
    b.logits = malloc((size_t)n_vocab * (size_t)(verify > 1 ? verify : 1) * sizeof *b.logits);
    sec = malloc((size_t)reps * sizeof *sec);
    if (!b.tok || !b.pos || !b.logits || !sec) {
        cli_error(cmd, "out of memory");
        goto done;
    }
    for (int32_t i = 0; i < total; i++) b.pos[i] = i;
    /* Random tokens, as llama-bench uses: speed does not depend on them. */
    uint64_t x = 42;
    for (int32_t i = 0; i < total; i++) {
        x += 0x9e3779b97f4a7c15ull;
        uint64_t z = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        b.tok[i] = (int32_t)((z ^ (z >> 31)) % (uint64_t)n_vocab);
    }

    char name[64], size[32];
    double params;
    describe(model, m, name, sizeof name, &params);
    cli_bytes(okv_model_weight_bytes(m), size, sizeof size);
    printf("| %-24s | %10s | %10s | %-7s | %7s | %6s | %16s | %20s |\n", "model", "size", "params", "backend",
           "threads", "kv", "test", "t/s");
    /* markdown alignment row: a trailing ':' right-aligns the column */
    static const int widths[] = {24, 10, 10, 7, 7, 6, 16, 20};
    static const bool right[] = {false, true, true, false, true, false, true, true};
    for (int c = 0; c < 8; c++) {
        printf("| ");
        for (int k = 0; k < widths[c] - right[c]; k++) putchar('-');
        printf(right[c] ? ": " : " ");
    }
    printf("|\n");
    if (!cli_flush_stdout(cmd)) goto done;
    double tg_median = 0, verify_median = 0;
    for (int test = 0; test < 3; test++) {
        int32_t n = test == 0 ? n_prompt : test == 1 ? n_gen : verify > 0 ? n_verify : 0;
        if (n == 0) continue;
        char tname[48];
        int at = test == 2 ? snprintf(tname, sizeof tname, "verify%d", (int)verify)
                           : snprintf(tname, sizeof tname, "%s%d", test == 0 ? "pp" : "tg", (int)n);
        if (depth > 0) snprintf(tname + at, sizeof tname - (size_t)at, " @ d%d", (int)depth);
        bool (*fn)(const char *, bench *, int32_t, double *) = test == 0 ? run_pp : test == 1 ? run_tg : run_verify;
        double mean = 0, var = 0;
        for (int32_t r = -1; r < reps; r++) { /* r = -1: the warm-up */
            double s;
            if (turns && !take_turn(cmd)) goto done;
            if (!fn(cmd, &b, n, &s)) goto done;
            if (turns) {
                if (r < 0) fprintf(stderr, "offkv bench: %s warm-up: %.2f t/s\n", tname, n / s);
                else fprintf(stderr, "offkv bench: %s run %d: %.2f t/s\n", tname, (int)r + 1, n / s);
            }
            if (r < 0) continue;
            sec[r] = n / s; /* tokens per second */
            mean += sec[r] / reps;
        }
        for (int32_t r = 0; r < reps; r++) var += (sec[r] - mean) * (sec[r] - mean);
        double sd = reps > 1 ? sqrt(var / (reps - 1)) : 0.0;
        qsort(sec, (size_t)reps, sizeof *sec, cmp_double);
        double median = reps % 2 ? sec[reps / 2] : 0.5 * (sec[reps / 2 - 1] + sec[reps / 2]);
        if (test == 1) tg_median = median;
        if (test == 2) verify_median = median;
        char ts[48], pstr[32];
        snprintf(ts, sizeof ts, "%.2f ± %.2f", median, sd);
        if (params >= 1e9) snprintf(pstr, sizeof pstr, "%.2f B", params / 1e9);
        else snprintf(pstr, sizeof pstr, "%.2f M", params / 1e6);
        /* "±" is two bytes in UTF-8: widen the field by one so columns line up */
        printf("| %-24s | %10s | %10s | %-7s | %7d | %6s | %16s | %21s |\n", name, size, pstr, "CPU", (int)threads,
               cli_kv_types[kv], tname, ts);
        if (!cli_flush_stdout(cmd)) goto done;
    }
    /* tokens per second: a verify eval takes verify / verify_median s, a
     * decode step 1 / tg_median s */
    if (verify > 0 && verify_median > 0)
        printf("\nverify%d: one eval of %d tokens with all their logits costs %.2f single decode steps "
               "(tg%d median %.2f t/s, verify%d median %.2f t/s)\n",
               (int)verify, (int)verify, verify * tg_median / verify_median, (int)n_gen, tg_median, (int)verify,
               verify_median);
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
