/* The model option n_threads: the repacking at load runs on that many
 * threads, in pieces of rows (about 4 MiB of the file each).  offkv synth
 * writes a model whose matrices span several pieces (a 16000-token output
 * matrix, a feed-forward of 8192), in Q4_0, Q8_0 and F16.  Checks:
 *
 *  1. Loaded on 1, 2 and 3 threads, the logits are bit-identical: each
 *     byte is copied the same way whichever thread copies it.
 *  2. Against the same file with repack off (the file's own layout read by
 *     ggml's kernels, no pieces at all), the logits differ only by float
 *     summation order: a piece copied to the wrong rows, or a row left out,
 *     moves them by the logits' whole range.
 *  3. Progress on 3 threads: "reading" then "repacking", each never going
 *     back, the repacking ending at its total, every call on the loading
 *     thread (okv_model_progress's promise).
 *  4. n_threads 0, 1025, "two" and "" are OKV_ERR_INVALID naming the
 *     option, as the context's n_threads is. */
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "offkv/offkv.h"

enum { N_TOK = 16 };

static float *logits_of(const char *path, const char *threads, const char *repack, int *n_vocab) {
    okv_error err = {0};
    const char *mopts[] = {"n_threads", threads, "repack", repack, NULL};
    okv_model *m = okv_model_load(path, mopts, &err);
    if (!m) {
        CHECK(0, "load %s (n_threads %s, repack %s): %s", path, threads, repack, err.message);
        return NULL;
    }
    const char *opts[] = {"max_write", "8", "kv_type", "f32", "capacity", "32", "n_threads", "2", NULL};
    okv_context *ctx = okv_context_create(m, opts, NULL, &err);
    const int V = *n_vocab = okv_model_n_vocab(m);
    float *out = malloc(sizeof(float) * N_TOK * (size_t)V);
    int32_t toks[8], pos[8];
    for (int s = 0; ctx && s < N_TOK; s += 8) {
        for (int i = 0; i < 8; i++) {
            toks[i] = 3 + (s + i) * 997 % (V - 3);
            pos[i] = s + i;
        }
        if (okv_context_eval(ctx, toks, pos, 8, out + (size_t)s * V, &err)) CHECK(0, "eval: %s", err.message);
    }
    CHECK(ctx != NULL, "context: %s", err.message);
    okv_context_free(ctx);
    okv_model_free(m);
    return out;
}

typedef struct progress_log {
    pthread_t loader;
    int calls, foreign, backwards, stages;
    char stage[2][16];
    uint64_t last, total;
} progress_log;

static void on_progress(void *user, const char *stage, uint64_t done, uint64_t total) {
    progress_log *p = user;
    p->calls++;
    if (!pthread_equal(pthread_self(), p->loader)) p->foreign++;
    if (p->stages == 0 || strcmp(p->stage[p->stages - 1], stage) != 0) {
        if (p->stages < 2) snprintf(p->stage[p->stages], sizeof p->stage[0], "%s", stage);
        p->stages++;
        p->last = 0;
    }
    if (done < p->last) p->backwards++;
    p->last = done;
    p->total = total;
}

int main(void) {
    const char *bin = getenv("OKV_BIN");
    if (!bin) {
        printf("skipped: OKV_BIN (the build folder) not set\n");
        return CHECK_SKIP;
    }
    const char *types[] = {"q4_0", "q8_0", "f16"};
    for (int ti = 0; ti < 3; ti++) {
        char path[64], cmd[4096];
        snprintf(path, sizeof path, "test_model_load_threads.%s.tmp.gguf", types[ti]);
        snprintf(cmd, sizeof cmd,
                 "'%s/offkv' synth --arch llama --n-embd 1024 --n-layer 1 --n-head 8 --n-head-kv 4 --n-ff 8192 "
                 "--n-vocab 16000 --type %s --seed 5 -o %s 2> /dev/null",
                 bin, types[ti], path);
        const int synth = system(cmd);
        CHECK(synth == 0, "synth: %s", cmd);
        if (synth != 0) continue;
        int V = 0;
        float *one = logits_of(path, "1", "on", &V), *two = logits_of(path, "2", "on", &V),
              *three = logits_of(path, "3", "on", &V), *off = logits_of(path, "3", "off", &V);
        if (one && two && three && off) {
            const size_t n = (size_t)N_TOK * V;
            CHECK(!memcmp(one, two, n * sizeof *one) && !memcmp(one, three, n * sizeof *one),
                  "%s: logits loaded on 1, 2 and 3 threads differ", types[ti]);
            double lo = 1e30, hi = -1e30, d = 0;
            for (size_t i = 0; i < n; i++) {
                lo = fmin(lo, off[i]);
                hi = fmax(hi, off[i]);
                d = fmax(d, fabs(three[i] - off[i]));
            }
            printf("%-5s repacked on 3 threads vs repack off: max |diff| %.3g of a logit range %.3g\n", types[ti], d,
                   hi - lo);
            CHECK(hi > lo && d <= 0.005 * (hi - lo), "%s: repacked on 3 threads vs repack off: max diff %g, range %g",
                  types[ti], d, hi - lo);
        }
        free(one);
        free(two);
        free(three);
        free(off);
        if (ti == 0) {
            progress_log p = {.loader = pthread_self()};
            okv_error err = {0};
            const char *mopts[] = {"n_threads", "3", NULL};
            okv_model *m = okv_model_load_progress(path, mopts, on_progress, &p, &err);
            CHECK(m && p.stages == 2 && !strcmp(p.stage[0], "reading") && !strcmp(p.stage[1], "repacking") &&
                      p.last == p.total && p.total > 0 && !p.foreign && !p.backwards,
                  "progress on 3 threads: %d stages (%s, %s), %d calls, %d from another thread, %d backwards, "
                  "ends at %llu of %llu: %s",
                  p.stages, p.stage[0], p.stage[1], p.calls, p.foreign, p.backwards, (unsigned long long)p.last,
                  (unsigned long long)p.total, m ? "loaded" : err.message);
            okv_model_free(m);
            const char *bad[] = {"0", "1025", "two", ""};
            for (int b = 0; b < 4; b++) {
                const char *o[] = {"n_threads", bad[b], NULL};
                okv_model *x = okv_model_load(path, o, &err);
                CHECK(!x && err.status == OKV_ERR_INVALID && strstr(err.message, "n_threads"),
                      "n_threads '%s': want OKV_ERR_INVALID naming it, got %s", bad[b], x ? "a model" : err.message);
                okv_model_free(x);
            }
        }
        remove(path);
    }
    return check_done();
}
