/* Speculative decoding (offkv/speculative.h).
 *
 *  - okv_spec_accept: with fixed target p and draft q over a small
 *    vocabulary, drafting from q and accepting or resampling gives tokens
 *    distributed as p (chi-square over many seeds), for draft distributions
 *    far from p, with zeros on either side, and for certain proposals
 *    (q NULL, as prompt lookup makes them).
 *  - Greedy on every shared model family: the tokens are exactly the
 *    plain decode's, with the model as its own draft, with another model of
 *    the same vocabulary, with a draft that agrees only partly (the same
 *    weights with a sliding window), with prompt lookup, and with rings
 *    wrapping many times in the target and the draft.
 *  - Sampling: runs, stays in the vocabulary, and its counts add up.
 *  - Refusals: another vocabulary (naming the token), a target max_write
 *    below K + 1, a draft smaller than the target or whose rings cannot
 *    take back K, both or neither drafter, a cache changed behind its back. */
#include <math.h>
#include <stdint.h>

#include "check.h"
#include "offkv/offkv.h"
#include "offkv/speculative.h"

/* ---- okv_spec_accept ---- */

static uint64_t sm64(uint64_t *s) {
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static double u01(uint64_t *s) { return (double)(sm64(s) >> 11) * 0x1.0p-53; }

static int32_t draw_from(const float *w, int32_t n, double u) {
    double x = u;
    for (int32_t i = 0; i < n; i++) {
        x -= w[i];
        if (x < 0.0) return i;
    }
    return n - 1;
}

enum { V = 6, TRIALS = 100000 };

/* Drafts from q (or proposes `fixed` when q is NULL), accepts or resamples,
 * and returns the chi-square statistic of the outcomes against p; also the
 * acceptance rate. */
static double chi_square(const float *p, const float *q, int32_t fixed, uint64_t seed, double *accept_rate) {
    long count[V] = {0}, acc = 0;
    for (long t = 0; t < TRIALS; t++) {
        uint64_t s = seed + (uint64_t)t * 0x9e3779b97f4a7c15ull; /* one seed per trial */
        const int32_t d = q ? draw_from(q, V, u01(&s)) : fixed;
        bool ok = false;
        const int32_t tok = okv_spec_accept(p, q, V, d, u01(&s), u01(&s), &ok);
        if (tok < 0 || tok >= V) return INFINITY;
        count[tok]++;
        acc += ok;
    }
    double chi = 0.0;
    for (int i = 0; i < V; i++) {
        const double e = (double)p[i] * TRIALS;
        if (e == 0.0) {
            if (count[i]) return INFINITY; /* a token the target never draws */
            continue;
        }
        chi += ((double)count[i] - e) * ((double)count[i] - e) / e;
    }
    if (accept_rate) *accept_rate = (double)acc / TRIALS;
    return chi;
}

static void test_accept_distribution(void) {
    /* 5 degrees of freedom (one zero cell removes one where present):
     * chi-square's 0.999 quantile is 20.5, so an honest sampler fails this
     * about once in a thousand seeds; the seeds are fixed. */
    const double LIMIT = 20.5;
    static const float p[V] = {0.40f, 0.25f, 0.15f, 0.10f, 0.07f, 0.03f};
    static const float q_far[V] = {0.05f, 0.05f, 0.10f, 0.20f, 0.25f, 0.35f};
    static const float q_zero[V] = {0.50f, 0.50f, 0.0f, 0.0f, 0.0f, 0.0f};  /* the draft never proposes 2..5 */
    static const float p_zero[V] = {0.0f, 0.30f, 0.30f, 0.0f, 0.40f, 0.0f}; /* the target never draws 0, 3, 5 */
    double rate = 0.0, chi;
    chi = chi_square(p, q_far, 0, 1, &rate);
    CHECK(chi < LIMIT, "draft far from target: chi-square %.2f >= %.1f", chi, LIMIT);
    /* Acceptance = sum min(p, q) = 0.05+0.05+0.10+0.10+0.07+0.03 = 0.40. */
    CHECK(fabs(rate - 0.40) < 0.01, "acceptance %.4f, expected sum min(p, q) = 0.40", rate);
    chi = chi_square(p, q_zero, 0, 2, &rate);
    CHECK(chi < LIMIT, "draft with zeros: chi-square %.2f", chi);
    chi = chi_square(p_zero, q_far, 0, 3, &rate);
    CHECK(chi < LIMIT, "target with zeros: chi-square %.2f", chi);
    chi = chi_square(p, p, 0, 4, &rate);
    CHECK(chi < LIMIT && rate == 1.0, "draft equal to target: chi-square %.2f, acceptance %.4f (want 1)", chi, rate);
    for (int32_t fixed = 0; fixed < V; fixed += 5) {
        chi = chi_square(p, NULL, fixed, 5 + (uint64_t)fixed, &rate);
        CHECK(chi < LIMIT, "certain proposal %d: chi-square %.2f", (int)fixed, chi);
        CHECK(fabs(rate - p[fixed]) < 0.01, "certain proposal %d accepted at %.4f, expected p = %.2f", (int)fixed, rate,
              (double)p[fixed]);
    }
    /* Total variation of a draw's empirical distribution from p, on one
     * more pair, as a second, plainer bound. */
    long count[V] = {0};
    uint64_t s = 77;
    for (long t = 0; t < TRIALS; t++) {
        bool ok;
        count[okv_spec_accept(p, q_far, V, draw_from(q_far, V, u01(&s)), u01(&s), u01(&s), &ok)]++;
    }
    double tv = 0.0;
    for (int i = 0; i < V; i++) tv += fabs((double)count[i] / TRIALS - p[i]) / 2;
    CHECK(tv < 0.01, "total variation from p: %.4f", tv);
    /* Bad arguments. */
    bool ok;
    CHECK(okv_spec_accept(NULL, q_far, V, 0, 0.5, 0.5, &ok) == -1, "NULL p");
    CHECK(okv_spec_accept(p, q_far, V, V, 0.5, 0.5, &ok) == -1, "drafted outside");
    CHECK(okv_spec_accept(p, q_far, V, 0, 0.5, 0.5, NULL) == -1, "NULL accepted");
}

/* ---- on models ---- */

static const char *shared;

static okv_model *load(const char *name, const char *window) {
    char path[4096];
    snprintf(path, sizeof path, "%s/models/%s.gguf", shared, name);
    const char *opts[] = {"sliding_window", window, NULL};
    okv_error err;
    okv_model *m = okv_model_load(path, window ? opts : NULL, &err);
    CHECK(m != NULL, "load %s: %s", path, err.message);
    return m;
}

static okv_context *context(okv_model *m, int32_t max_write, int32_t capacity) {
    char mw[16], cap[16];
    snprintf(mw, sizeof mw, "%d", (int)max_write);
    snprintf(cap, sizeof cap, "%d", (int)capacity);
    const char *opts[] = {"max_write", mw, "capacity", cap, "initial_capacity", "16", "n_threads", "2", NULL};
    okv_error err;
    okv_context *c = okv_context_create(m, opts, NULL, &err);
    CHECK(c != NULL, "context: %s", err.message);
    return c;
}

enum { PROMPT = 19, GEN = 80, CAP = 256, K = 4 };

static void prompt_tokens(int32_t *ids, uint64_t seed, int32_t n_vocab) {
    ids[0] = 1;
    for (int i = 1; i < PROMPT; i++) ids[i] = 3 + (int32_t)(sm64(&seed) % (uint64_t)(n_vocab - 3));
    /* repeat a stretch, so prompt lookup finds something */
    for (int i = 12; i < PROMPT; i++) ids[i] = ids[i - 9];
}

/* Evaluates the prompt and samples the first token; returns it. */
static int32_t start(okv_context *ctx, okv_sampler *smp, const int32_t *ids, float *logits) {
    int32_t pos[PROMPT];
    for (int i = 0; i < PROMPT; i++) pos[i] = i;
    okv_error err;
    const int32_t mw = okv_context_max_write(ctx);
    for (int32_t at = 0; at < PROMPT; at += mw) {
        const int32_t n = PROMPT - at < mw ? PROMPT - at : mw;
        okv_status st = okv_context_eval_last(ctx, ids + at, pos + at, n, logits, &err);
        CHECK_STATUS(st, OKV_OK, err);
    }
    return okv_sampler_sample(smp, logits);
}

/* Plain greedy decode: GEN tokens after the prompt. */
static void plain(okv_model *m, const int32_t *ids, int32_t *out) {
    okv_context *ctx = context(m, K + 1, CAP);
    const okv_sampler_params sp = {.temperature = 0, .top_p = 1};
    okv_sampler *smp = okv_sampler_create(&sp, okv_model_n_vocab(m), NULL);
    float *logits = malloc(sizeof(float) * (size_t)okv_model_n_vocab(m));
    out[0] = start(ctx, smp, ids, logits);
    okv_error err;
    for (int i = 1; i < GEN; i++) {
        const int32_t p = PROMPT + i - 1;
        okv_status st = okv_context_eval_last(ctx, &out[i - 1], &p, 1, logits, &err);
        CHECK_STATUS(st, OKV_OK, err);
        out[i] = okv_sampler_sample(smp, logits);
    }
    free(logits);
    okv_sampler_free(smp);
    okv_context_free(ctx);
}

/* Speculative decode of GEN tokens (draft model dm, or lookup when NULL). */
static okv_spec_stats speculate_p(okv_model *m, okv_model *dm, int32_t lookup, const okv_sampler_params *sp,
                                  float p_min, const int32_t *ids, int32_t *out) {
    okv_context *ctx = context(m, K + 1, CAP);
    okv_context *dctx = dm ? context(dm, 8, CAP) : NULL;
    okv_sampler *smp = okv_sampler_create(sp, okv_model_n_vocab(m), NULL);
    float *logits = malloc(sizeof(float) * (size_t)okv_model_n_vocab(m));
    okv_spec_stats ss = {0};
    okv_error err;
    const okv_spec_config cfg = {.n_draft = K, .lookup_ngram = lookup, .sampling = *sp, .p_min = p_min};
    okv_speculator *s = okv_speculator_create(ctx, dctx, &cfg, &err);
    CHECK(s != NULL, "speculator: %s", err.message);
    int32_t seq[PROMPT + GEN];
    memcpy(seq, ids, sizeof(int32_t) * PROMPT);
    seq[PROMPT] = out[0] = start(ctx, smp, ids, logits);
    if (s) {
        okv_status st = okv_speculator_reset(s, seq, PROMPT + 1, &err);
        CHECK_STATUS(st, OKV_OK, err);
        int n = 1;
        while (n < GEN) {
            int32_t got[K + 1], n_got = 0;
            st = okv_speculator_step(s, GEN - n, got, &n_got, &err);
            CHECK_STATUS(st, OKV_OK, err);
            if (st) break;
            CHECK(n_got >= 1 && n_got <= K + 1 && n_got <= GEN - n, "step returned %d tokens", (int)n_got);
            for (int i = 0; i < n_got && n < GEN; i++) out[n++] = got[i];
            /* The target holds every token but the last. */
            CHECK(okv_cache_length(okv_context_cache(ctx)) == PROMPT + n - 1, "target length %d, want %d",
                  (int)okv_cache_length(okv_context_cache(ctx)), PROMPT + n - 1);
        }
        okv_speculator_get_stats(s, &ss);
        CHECK(ss.generated == ss.accepted + ss.steps && ss.accepted <= ss.drafted, "stats: %lld generated, %lld accepted, %lld steps, %lld drafted",
              (long long)ss.generated, (long long)ss.accepted, (long long)ss.steps, (long long)ss.drafted);
    }
    okv_speculator_free(s);
    free(logits);
    okv_sampler_free(smp);
    okv_context_free(dctx);
    okv_context_free(ctx);
    return ss;
}

static okv_spec_stats speculate(okv_model *m, okv_model *dm, int32_t lookup, const okv_sampler_params *sp,
                                const int32_t *ids, int32_t *out) {
    return speculate_p(m, dm, lookup, sp, 0.0f, ids, out);
}

/* p_min: a draft stops at proposals it is unsure of (and, unsure of the
 * first, sits out a few steps); greedy text stays the plain decode's. */
static void test_p_min(void) {
    okv_model *m = load("stories260K", NULL), *w = load("stories260K", "8"), *rnd = load("tiny-llama", NULL);
    if (!m || !w || !rnd) goto out;
    int32_t ids[PROMPT], ref[GEN], got[GEN];
    prompt_tokens(ids, 42, okv_model_n_vocab(m));
    plain(m, ids, ref);
    const okv_sampler_params sp = {.temperature = 0, .top_p = 1};
    const okv_spec_stats all = speculate_p(m, w, 0, &sp, 0.0f, ids, got);
    CHECK(memcmp(got, ref, sizeof ref) == 0 && all.drafted >= (int64_t)K * (all.steps - 1),
          "p_min 0 proposes K every step: %lld drafted in %lld steps", (long long)all.drafted, (long long)all.steps);
    const okv_spec_stats sure = speculate_p(m, w, 0, &sp, 0.5f, ids, got);
    CHECK(memcmp(got, ref, sizeof ref) == 0, "p_min 0.5: tokens differ from plain decode");
    CHECK(sure.drafted < all.drafted && sure.accepted * all.drafted > all.accepted * sure.drafted,
          "p_min 0.5 drafts fewer, keeps a larger share: %lld/%lld against %lld/%lld", (long long)sure.accepted,
          (long long)sure.drafted, (long long)all.accepted, (long long)all.drafted);
    /* the model as its own draft agrees on every proposal, also after the
     * steps it sat out (it must catch up on the tokens it missed) */
    const okv_spec_stats twin = speculate_p(m, m, 0, &sp, 0.5f, ids, got);
    CHECK(memcmp(got, ref, sizeof ref) == 0 && twin.accepted == twin.drafted && twin.drafted > 0 &&
              twin.drafted < (int64_t)K * twin.steps,
          "own draft, p_min 0.5: %lld of %lld kept in %lld steps", (long long)twin.accepted, (long long)twin.drafted,
          (long long)twin.steps);
    /* a random draft is sure of nothing: it sits out, and the target decodes alone */
    const okv_spec_stats none = speculate_p(m, rnd, 0, &sp, 0.5f, ids, got);
    CHECK(memcmp(got, ref, sizeof ref) == 0 && none.drafted == 0, "random draft, p_min 0.5: %lld drafted",
          (long long)none.drafted);
    printf("p_min: 0 -> %lld/%lld kept, 0.5 -> %lld/%lld, random draft at 0.5 -> %lld drafted; same tokens\n",
           (long long)all.accepted, (long long)all.drafted, (long long)sure.accepted, (long long)sure.drafted,
           (long long)none.drafted);
out:
    okv_model_free(m);
    okv_model_free(w);
    okv_model_free(rnd);
}

static void greedy_case(const char *target, const char *twin, const char *draft, const char *draft_window,
                        const char *target_window) {
    okv_model *m = load(target, target_window);
    okv_model *self = load(twin, NULL);
    okv_model *d = load(draft, draft_window);
    if (!m || !self || !d) goto out;
    int32_t ids[PROMPT], ref[GEN], got[GEN];
    prompt_tokens(ids, 42, okv_model_n_vocab(m));
    plain(m, ids, ref);
    const okv_sampler_params sp = {.temperature = 0, .top_p = 1};
    okv_model *drafts[2] = {self, d};
    const char *names[2] = {twin, draft};
    for (int i = 0; i < 2; i++) {
        memset(got, 0xff, sizeof got);
        okv_spec_stats ss = speculate(m, drafts[i], 0, &sp, ids, got);
        int first = -1;
        for (int j = 0; j < GEN && first < 0; j++)
            if (got[j] != ref[j]) first = j;
        CHECK(first < 0, "%s%s with draft %s%s: token %d is %d, plain decode says %d", target,
              target_window ? " (windowed)" : "", names[i], i && draft_window ? " (windowed)" : "", first,
              first >= 0 ? (int)got[first] : 0, first >= 0 ? (int)ref[first] : 0);
        printf("%-18s%s draft %-18s%s: %3lld drafted, %3lld accepted, %2lld target evals: same tokens\n", target,
               target_window ? "+w8" : "   ", names[i], i && draft_window ? "+w8" : "   ", (long long)ss.drafted,
               (long long)ss.accepted, (long long)ss.steps);
    }
    memset(got, 0xff, sizeof got);
    okv_spec_stats ss = speculate(m, NULL, 2, &sp, ids, got);
    CHECK(memcmp(got, ref, sizeof ref) == 0, "%s with prompt lookup: tokens differ from plain decode", target);
    printf("%-18s%s lookup 2                 : %3lld drafted, %3lld accepted, %2lld target evals: same tokens\n", target,
           target_window ? "+w8" : "   ", (long long)ss.drafted, (long long)ss.accepted, (long long)ss.steps);
out:
    okv_model_free(m);
    okv_model_free(self);
    okv_model_free(d);
}

static void test_sampling(void) {
    okv_model *m = load("stories260K", NULL), *d = load("stories260K", "8");
    if (!m || !d) goto out;
    int32_t ids[PROMPT], got[GEN];
    prompt_tokens(ids, 7, okv_model_n_vocab(m));
    const okv_sampler_params sp = {.temperature = 0.9f, .top_k = 40, .top_p = 0.95f, .seed = 3};
    okv_spec_stats ss = speculate(m, d, 0, &sp, ids, got);
    bool in_vocab = true;
    for (int i = 0; i < GEN; i++) in_vocab &= got[i] >= 0 && got[i] < okv_model_n_vocab(m);
    CHECK(in_vocab, "sampled tokens outside the vocabulary");
    CHECK(ss.accepted > 0 && ss.accepted < ss.drafted, "sampling with a windowed draft: %lld of %lld accepted",
          (long long)ss.accepted, (long long)ss.drafted);
    ss = speculate(m, NULL, 1, &sp, ids, got);
    CHECK(ss.steps > 0, "sampling with lookup");
out:
    okv_model_free(m);
    okv_model_free(d);
}

static void test_refusals(void) {
    okv_model *m = load("stories260K", NULL), *other = load("aidreams260K", NULL);
    if (!m || !other) goto out;
    okv_context *t = context(m, K + 1, CAP), *d = context(other, 8, CAP), *small = context(m, K, CAP);
    okv_error err;
    okv_spec_config cfg = {.n_draft = K, .sampling = {.temperature = 0, .top_p = 1}};
    CHECK(okv_speculator_create(t, d, &cfg, &err) == NULL && err.status == OKV_ERR_INVALID &&
              strstr(err.message, "token 259"),
          "another vocabulary: %s", err.message);
    cfg.lookup_ngram = 2;
    CHECK(okv_speculator_create(small, NULL, &cfg, &err) == NULL && strstr(err.message, "max_write 4"),
          "max_write below K + 1: %s", err.message);
    CHECK(okv_speculator_create(t, d, &cfg, &err) == NULL && strstr(err.message, "both"), "both drafters: %s",
          err.message);
    cfg.lookup_ngram = 0;
    CHECK(okv_speculator_create(t, NULL, &cfg, &err) == NULL && strstr(err.message, "neither"), "no drafter: %s",
          err.message);
    CHECK(okv_speculator_create(t, t, &cfg, &err) == NULL && strstr(err.message, "own"), "shared cache: %s",
          err.message);
    static const float bad_p[] = {-0.1f, 1.5f, NAN};
    for (int i = 0; i < 3; i++) {
        cfg.p_min = bad_p[i];
        CHECK(okv_speculator_create(t, d, &cfg, &err) == NULL && strstr(err.message, "p_min"), "p_min %g: %s",
              (double)bad_p[i], err.message);
    }
    cfg.p_min = 0;
    cfg.n_draft = 0;
    cfg.lookup_ngram = 2;
    CHECK(okv_speculator_create(t, NULL, &cfg, &err) == NULL && strstr(err.message, "n_draft 0"), "K 0: %s",
          err.message);
    cfg.n_draft = K;
    cfg.lookup_ngram = 0;
    /* A draft holds the same sequence as the target, and its rings take
     * back what the target rejects (a flat draft may write 1 at a time). */
    okv_model *swa = load("tiny-gemma3-allswa", NULL);
    okv_context *short_draft = context(m, K + 1, CAP / 2), *ring_draft = swa ? context(swa, K, CAP) : NULL,
                *flat_draft = context(m, 1, CAP);
    CHECK(okv_speculator_create(t, short_draft, &cfg, &err) == NULL && err.status == OKV_ERR_INVALID &&
              strstr(err.message, "capacity 128 is below the target's 256"),
          "a draft smaller than the target: %s", err.message);
    CHECK(!ring_draft || (okv_speculator_create(t, ring_draft, &cfg, &err) == NULL &&
                          strstr(err.message, "max_write 4 is below n_draft + 1 = 5")),
          "a ring draft that cannot take back K: %s", err.message);
    okv_speculator *flat = okv_speculator_create(t, flat_draft, &cfg, &err);
    CHECK(flat != NULL, "a flat draft writing 1 at a time: %s", err.message);
    okv_speculator_free(flat);
    okv_context_free(short_draft);
    okv_context_free(ring_draft);
    okv_context_free(flat_draft);
    okv_model_free(swa);
    cfg.lookup_ngram = 2;
    okv_speculator *s = okv_speculator_create(t, NULL, &cfg, &err);
    CHECK(s != NULL, "lookup speculator: %s", err.message);
    const int32_t toks[3] = {1, 5, 6}, pos[2] = {0, 1};
    CHECK_STATUS(okv_speculator_reset(s, toks, 3, &err), OKV_ERR_INVALID, err); /* target holds 0, not 2 */
    CHECK_STATUS(okv_context_eval(t, toks, pos, 2, NULL, &err), OKV_OK, err);
    CHECK_STATUS(okv_speculator_reset(s, toks, 3, &err), OKV_OK, err);
    okv_cache_rewind(okv_context_cache(t), 1, &err);
    int32_t out[K + 1], n_out = 0;
    CHECK_STATUS(okv_speculator_step(s, 4, out, &n_out, &err), OKV_ERR_INVALID, err);
    CHECK(strstr(err.message, "changed"), "message: %s", err.message);
    okv_speculator_free(s);
    okv_context_free(t);
    okv_context_free(d);
    okv_context_free(small);
out:
    okv_model_free(m);
    okv_model_free(other);
}

int main(void) {
    test_accept_distribution();
    shared = check_shared_dir();
    if (!shared) {
        printf("skipped (speculative decoding on models): ../shared not found\n");
        return check_done();
    }
    /* Every family as its own draft and with another model of the shared
     * 512-token vocabulary; windows of 8 with max_write 5 (12-row rings)
     * wrap every few steps over 99 positions. */
    greedy_case("stories260K", "stories260K", "stories260K", "8", NULL);   /* windowed draft: agrees partly */
    greedy_case("stories260K", "stories260K", "tiny-gemma3", NULL, "8");  /* windowed target with rings */
    greedy_case("tiny-llama", "tiny-llama", "stories260K", NULL, NULL);
    greedy_case("tiny-gemma3", "tiny-gemma3", "tiny-muse-glimmer", NULL, NULL);
    greedy_case("tiny-gemma3-allswa", "tiny-gemma3-allswa", "tiny-gemma3", NULL, NULL);
    greedy_case("tiny-muse-glimmer", "tiny-muse-glimmer", "tiny-llama", NULL, NULL);
    test_sampling();
    test_p_min();
    test_refusals();
    return check_done();
}
