/* bench/batch: what one decode step of okv_batch_eval costs with 1, 2, 4
 * and 8 sequences (one token each), measured interleaved (1, 2, 4, 8, 1,
 * 2, ...) so that a busy machine's noise falls on every size alike.  The
 * ratio "tokens/s vs 1" is the most a server decoding that many streams
 * together can gain.
 *
 *   build/bench/batch MODEL.gguf [threads] [rounds]     */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "offkv/batch.h"
#include "offkv/offkv.h"

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

enum { MAX_SEQ = 8, PROMPT = 8 };

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s MODEL.gguf [threads] [rounds]\n", argv[0]);
        return 2;
    }
    const int threads = argc > 2 ? atoi(argv[2]) : 2, rounds = argc > 3 ? atoi(argv[3]) : 8;
    okv_error err = {0};
    okv_model *m = okv_model_load(argv[1], NULL, &err);
    if (!m) {
        fprintf(stderr, "%s: %s\n", argv[1], err.message);
        return 1;
    }
    const int32_t nl = okv_model_n_layers(m), nv = okv_model_n_vocab(m);
    okv_layer_geometry *geo = calloc((size_t)nl, sizeof *geo);
    for (int32_t l = 0; l < nl; l++) okv_model_layer_geometry(m, l, &geo[l]);
    const okv_cache_config cc = {.capacity = 4096, .initial_capacity = 256, .max_write = PROMPT, .dtype = OKV_F16};
    okv_cache *caches[MAX_SEQ];
    okv_threadpool *pool = okv_threadpool_create(threads, &err);
    okv_batch *b = okv_batch_create(m, MAX_SEQ * PROMPT, pool, &err);
    float *logits = malloc((size_t)MAX_SEQ * (size_t)nv * sizeof *logits);
    int32_t tok[MAX_SEQ][PROMPT], pos[MAX_SEQ][PROMPT], len[MAX_SEQ];
    okv_batch_seq seqs[MAX_SEQ];
    for (int s = 0; s < MAX_SEQ; s++) {
        caches[s] = okv_cache_create(geo, nl, &cc, &err);
        for (int i = 0; i < PROMPT; i++) tok[s][i] = 1 + (s * 31 + i * 7) % (nv - 1), pos[s][i] = i;
        seqs[s] = (okv_batch_seq){.cache = caches[s], .tokens = tok[s], .positions = pos[s], .n_tokens = PROMPT,
                                  .logits = logits + (size_t)s * (size_t)nv};
        len[s] = PROMPT;
    }
    if (!pool || !b || okv_batch_eval(b, seqs, MAX_SEQ, &err) != OKV_OK) {
        fprintf(stderr, "setup: %s\n", err.message);
        return 1;
    }
    static const int sizes[] = {1, 2, 4, 8};
    double total[4] = {0};
    for (int r = 0; r < rounds; r++)
        for (int k = 0; k < 4; k++) {
            const int n = sizes[k];
            for (int s = 0; s < n; s++) {
                pos[s][0] = len[s]++;
                seqs[s].n_tokens = 1;
            }
            const double t0 = now();
            if (okv_batch_eval(b, seqs, n, &err) != OKV_OK) {
                fprintf(stderr, "step: %s\n", err.message);
                return 1;
            }
            total[k] += now() - t0;
        }
    printf("%s, %d threads, %d steps per size (interleaved)\n", okv_model_describe(m), threads, rounds);
    printf("| sequences | ms per step | tokens/s | vs 1 |\n|---:|---:|---:|---:|\n");
    for (int k = 0; k < 4; k++)
        printf("| %d | %.1f | %.1f | %.2fx |\n", sizes[k], total[k] / rounds * 1e3, sizes[k] * rounds / total[k],
               (sizes[k] / total[k]) / (1 / total[0]));
    for (int s = 0; s < MAX_SEQ; s++) okv_cache_release(caches[s]);
    okv_batch_free(b);
    okv_threadpool_free(pool);
    free(logits);
    free(geo);
    okv_model_free(m);
    return 0;
}
