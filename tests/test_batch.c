/* Batched evaluation (okv_batch_eval): several sequences, each in its own
 * cache, through one forward pass.  A sequence's logits must be
 * bit-identical to its run alone (okv_context_eval, one context per
 * sequence), whatever else is in the batch and in which slot, through
 * prefill chunks and decode steps mixed in one call, on a flat model and on
 * models with ring layers that wrap, and on mixture-of-experts models.  And every check comes before any
 * write: a refused sequence leaves all of them as they were. */
#include <math.h>
#include <stdint.h>

#include "check.h"
#include "offkv/offkv.h"

enum { N_SEQ = 5, LEN = 40 };

static uint64_t rng_state = 7;
static uint32_t rnd(void) {
    rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
    return (uint32_t)(rng_state >> 33);
}

static okv_cache *new_cache(const okv_model *m) {
    okv_layer_geometry geo[64];
    const int32_t nl = okv_model_n_layers(m);
    for (int32_t i = 0; i < nl && i < 64; i++) okv_model_layer_geometry(m, i, &geo[i]);
    okv_cache_config cfg = {.capacity = 128, .initial_capacity = 4, .max_write = 16, .dtype = OKV_F16};
    okv_error err;
    okv_cache *c = okv_cache_create(geo, nl, &cfg, &err);
    CHECK(c != NULL, "cache: %s", err.message);
    return c;
}

/* Each sequence's tokens, and the schedule: at round r, sequence s writes
 * take[r][s] tokens (0: sits out). */
static int32_t toks[N_SEQ][LEN];
static const int take[][N_SEQ] = {
    {7, 1, 0, 16, 3}, {1, 1, 5, 1, 13}, {0, 9, 1, 1, 1}, {1, 1, 16, 0, 1}, {12, 1, 1, 1, 1},
    {1, 16, 1, 9, 1}, {1, 1, 1, 1, 16}, {16, 0, 1, 1, 1}, {1, 1, 14, 1, 3},
};
enum { ROUNDS = sizeof take / sizeof take[0] };

/* Runs the schedule; order[k] is the sequence in slot k.  logits[s] gets
 * sequence s's all-row logits at each position. */
static void run_batched(const okv_model *m, okv_threadpool *pool, const int *order, float *logits[N_SEQ]) {
    okv_error err;
    const int32_t nv = okv_model_n_vocab(m);
    okv_batch *b = okv_batch_create(m, 80, pool, &err);
    CHECK(b != NULL, "batch: %s", err.message);
    okv_cache *c[N_SEQ];
    for (int s = 0; s < N_SEQ; s++) c[s] = new_cache(m);
    int32_t done[N_SEQ] = {0}, pos[N_SEQ][LEN];
    for (int s = 0; s < N_SEQ; s++)
        for (int i = 0; i < LEN; i++) pos[s][i] = i;
    for (int r = 0; r < ROUNDS && b; r++) {
        okv_batch_seq seqs[N_SEQ];
        int n = 0;
        for (int k = 0; k < N_SEQ; k++) {
            const int s = order[k];
            int t = take[r][s];
            if (done[s] + t > LEN) t = LEN - done[s];
            if (t == 0) continue;
            /* all rows' logits for some, the last row's for others: both paths */
            const bool all = (s + r) % 2 == 0;
            seqs[n++] = (okv_batch_seq){.cache = c[s], .tokens = toks[s] + done[s], .positions = pos[s] + done[s],
                                        .n_tokens = t,
                                        .logits = logits[s] + (size_t)(all ? done[s] : done[s] + t - 1) * nv,
                                        .all_logits = all};
            done[s] += t;
        }
        if (n) CHECK_STATUS(okv_batch_eval(b, seqs, n, &err), OKV_OK, err);
    }
    for (int s = 0; s < N_SEQ; s++) {
        CHECK(okv_cache_length(c[s]) == done[s], "sequence %d length %d, want %d", s, (int)okv_cache_length(c[s]),
              (int)done[s]);
        okv_cache_release(c[s]);
    }
    okv_batch_free(b);
}

/* The rows both runs computed (last rows of each batched step at least)
 * must be equal to the bit. */
static int compare(const float *alone, const float *batched, int32_t nv, const char *what) {
    int bad = 0;
    for (int i = 0; i < LEN; i++) {
        const float *a = alone + (size_t)i * nv, *b = batched + (size_t)i * nv;
        if (isnan(b[0])) continue; /* a row the batched run did not ask for */
        if (memcmp(a, b, sizeof(float) * (size_t)nv) != 0) bad++;
    }
    CHECK(bad == 0, "%s: %d rows differ from the sequence run alone", what, bad);
    return bad;
}

static void invariance_of(const char *path, const char *name) {
    okv_error err;
    okv_model *m = okv_model_load(path, NULL, &err);
    CHECK(m != NULL, "%s: %s", name, err.message);
    if (!m) return;
    const int32_t nv = okv_model_n_vocab(m);
    for (int s = 0; s < N_SEQ; s++)
        for (int i = 0; i < LEN; i++) toks[s][i] = i == 0 ? 1 : 3 + (int32_t)(rnd() % (uint32_t)(nv - 3));
    okv_threadpool *pool = okv_threadpool_create(2, &err);

    /* Alone: one context per sequence, 16-token chunks. */
    float *alone[N_SEQ], *batched[N_SEQ];
    const size_t bytes = sizeof(float) * (size_t)LEN * nv;
    for (int s = 0; s < N_SEQ; s++) {
        alone[s] = malloc(bytes);
        batched[s] = malloc(bytes);
        const char *opts[] = {"n_threads", "2", "max_write", "16", "capacity", "128", "initial_capacity", "4",
                              "kv_type", "f16", NULL};
        okv_context *ctx = okv_context_create(m, opts, NULL, &err);
        CHECK(ctx != NULL, "context: %s", err.message);
        int32_t pos[LEN];
        for (int i = 0; i < LEN; i++) pos[i] = i;
        for (int start = 0; ctx && start < LEN; start += 16) {
            const int t = LEN - start < 16 ? LEN - start : 16;
            CHECK_STATUS(okv_context_eval(ctx, toks[s] + start, pos + start, t, alone[s] + (size_t)start * nv, &err),
                         OKV_OK, err);
        }
        okv_context_free(ctx);
    }
    static const int orders[3][N_SEQ] = {{0, 1, 2, 3, 4}, {4, 3, 2, 1, 0}, {2, 0, 4, 1, 3}};
    for (int o = 0; o < 3; o++) {
        for (int s = 0; s < N_SEQ; s++)
            for (size_t i = 0; i < (size_t)LEN * nv; i++) batched[s][i] = NAN;
        run_batched(m, pool, orders[o], batched);
        for (int s = 0; s < N_SEQ; s++) {
            char what[128];
            snprintf(what, sizeof what, "%s, order %d, sequence %d", name, o, s);
            compare(alone[s], batched[s], nv, what);
        }
    }
    for (int s = 0; s < N_SEQ; s++) {
        free(alone[s]);
        free(batched[s]);
    }
    okv_threadpool_free(pool);
    okv_model_free(m);
}

static void invariance(const char *shared, const char *name) {
    char path[1024];
    snprintf(path, sizeof path, "%s/models/%s.gguf", shared, name);
    invariance_of(path, name);
}

static void refusals(const char *shared) {
    char path[1024];
    snprintf(path, sizeof path, "%s/models/stories260K.gguf", shared);
    okv_error err;
    okv_model *m = okv_model_load(path, NULL, &err);
    if (!m) {
        CHECK(0, "load: %s", err.message);
        return;
    }
    okv_batch *b = okv_batch_create(m, 8, NULL, &err);
    okv_cache *c[3] = {new_cache(m), new_cache(m), new_cache(m)};
    int32_t t[8] = {1, 5, 6, 7, 8, 9, 10, 11}, p[8] = {0, 1, 2, 3, 4, 5, 6, 7};
    float *logits = malloc(sizeof(float) * (size_t)okv_model_n_vocab(m));
    okv_batch_seq ok = {.cache = c[0], .tokens = t, .positions = p, .n_tokens = 2, .logits = logits};
    CHECK_STATUS(okv_batch_eval(b, &ok, 1, &err), OKV_OK, err);

    okv_batch_seq s[3] = {{c[0], t, p + 2, 2, NULL, false}, {c[1], t, p, 2, NULL, false}, {c[2], t, p, 2, NULL, false}};
    /* sequence 2 starts past its length: POSITION, naming it; nobody moves */
    s[2].positions = p + 3;
    CHECK_STATUS(okv_batch_eval(b, s, 3, &err), OKV_ERR_POSITION, err);
    CHECK(strstr(err.message, "sequence 2") != NULL, "names the sequence: %s", err.message);
    CHECK(okv_cache_length(c[0]) == 2 && okv_cache_length(c[1]) == 0 && okv_cache_length(c[2]) == 0,
          "a refused batch changed lengths: %d %d %d", (int)okv_cache_length(c[0]), (int)okv_cache_length(c[1]),
          (int)okv_cache_length(c[2]));
    s[2].positions = p;
    s[1].cache = c[0];
    CHECK_STATUS(okv_batch_eval(b, s, 3, &err), OKV_ERR_INVALID, err);
    CHECK(strstr(err.message, "same cache") != NULL, "the same cache twice: %s", err.message);
    s[1].cache = c[1];
    s[1].n_tokens = 6; /* 2 + 6 + 2 rows > 8 */
    CHECK_STATUS(okv_batch_eval(b, s, 3, &err), OKV_ERR_INVALID, err);
    CHECK(strstr(err.message, "max_rows") != NULL, "too many rows: %s", err.message);
    s[1].n_tokens = 2;
    int32_t bad_tok[2] = {1, 99999};
    s[2].tokens = bad_tok;
    CHECK_STATUS(okv_batch_eval(b, s, 3, &err), OKV_ERR_INVALID, err);
    CHECK(strstr(err.message, "99999") != NULL, "a token outside the vocabulary: %s", err.message);
    s[2].tokens = t;
    okv_layer_geometry g = {.n_kv_heads = 1, .head_dim = 8, .window = 0};
    okv_cache_config cfg = {.capacity = 16, .initial_capacity = 4, .max_write = 4, .dtype = OKV_F16};
    okv_cache *other = okv_cache_create(&g, 1, &cfg, &err);
    s[2].cache = other;
    CHECK_STATUS(okv_batch_eval(b, s, 3, &err), OKV_ERR_INVALID, err);
    CHECK(strstr(err.message, "layers") != NULL, "a cache of another geometry: %s", err.message);
    s[2].cache = c[2];
    CHECK(okv_cache_length(c[0]) == 2 && okv_cache_length(c[1]) == 0 && okv_cache_length(c[2]) == 0,
          "refusals changed lengths");
    CHECK_STATUS(okv_batch_eval(b, s, 3, &err), OKV_OK, err);
    CHECK(okv_cache_length(c[0]) == 4 && okv_cache_length(c[1]) == 2 && okv_cache_length(c[2]) == 2,
          "then it runs");
    CHECK(okv_batch_create(m, 0, NULL, &err) == NULL && err.status == OKV_ERR_INVALID, "max_rows 0");
    okv_cache_release(other);
    for (int i = 0; i < 3; i++) okv_cache_release(c[i]);
    free(logits);
    okv_batch_free(b);
    okv_model_free(m);
}

int main(void) {
    const char *shared = check_shared_dir();
    if (!shared) { printf("skipped: ../shared not found\n"); return CHECK_SKIP; }
    /* flat layers only; rings of window 8 that wrap (capacity 128 > 8 + 16 - 1) */
    invariance(shared, "stories260K");
    invariance(shared, "tiny-gemma3");
    invariance(shared, "tiny-muse-glimmer");
    /* the 2026 families: biases, Q/K norms, NoPE layers, soft caps, fused weights */
    invariance(shared, "tiny-qwen2");
    invariance(shared, "tiny-qwen3");
    invariance(shared, "tiny-smollm3");
    invariance(shared, "tiny-gemma2");
    invariance(shared, "tiny-phi3");
    /* mixture of experts: each expert multiplies the rows the batch routes
     * to it at once, so how many rows it takes (and which) depends on the
     * other sequences; a sequence's logits must not (random tokens route
     * the five sequences to different experts) */
    invariance(shared, "tiny-qwen3moe");
    invariance(shared, "tiny-gpt-oss");
    invariance(shared, "tiny-gpt-oss-mx");
    /* three experts a token: a sum of three outputs depends on its order,
     * which must be the row's own (best expert first), not the batch's */
    const char *bin = getenv("OKV_BIN");
    if (bin) {
        char cmd[1200];
        const char *path = "test_batch.moe3.tmp.gguf";
        snprintf(cmd, sizeof cmd, "'%s/offkv' synth --arch qwen3moe --n-layer 2 --n-expert 6 --n-expert-used 3 "
                 "--seed 3 -o %s 2>/dev/null", bin, path);
        CHECK(system(cmd) == 0, "synth: %s", cmd);
        invariance_of(path, "synth qwen3moe, 3 of 6 experts");
        remove(path);
    } else {
        printf("OKV_BIN not set: the 3-expert synth model is skipped\n");
    }
    refusals(shared);
    return check_done();
}
