/* The sampler: greedy and its equivalents (top-k 1, a tiny top-p), tie
 * breaking, seeded reproducibility, and the drawn frequencies against the
 * softmax they should follow (chi-square with a fixed seed, so the test is
 * deterministic yet fails if the weighting, the cuts or the RNG are off). */
#include <math.h>
#include <stdint.h>

#include "check.h"
#include "offkv/sampler.h"

static okv_sampler *make(float temp, int32_t top_k, float top_p, uint64_t seed, int32_t n) {
    okv_sampler_params p = {temp, top_k, top_p, seed};
    okv_error err;
    okv_sampler *s = okv_sampler_create(&p, n, &err);
    CHECK(s != NULL, "create: %s", err.message);
    return s;
}

/* Deterministic pseudo-random logits in [-4, 4), quantized to 1/8 so that
 * ties are common. */
static void fill_logits(float *l, int32_t n, uint64_t seed) {
    uint64_t x = seed;
    for (int32_t i = 0; i < n; i++) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        l[i] = (float)((int)(x >> 58) - 32) / 8.0f;
    }
}

static int32_t ref_argmax(const float *l, int32_t n) {
    int32_t b = 0;
    for (int32_t i = 1; i < n; i++)
        if (l[i] > l[b]) b = i;
    return b;
}

static void test_create_errors(void) {
    okv_error err;
    okv_sampler_params p = {1.0f, 0, 1.0f, 1};
    CHECK(okv_sampler_create(&p, 0, &err) == NULL && err.status == OKV_ERR_INVALID, "n_vocab 0");
    CHECK(strstr(err.message, "n_vocab") != NULL, "message '%s'", err.message);
    p.top_p = 0.0f;
    CHECK(okv_sampler_create(&p, 4, &err) == NULL && err.status == OKV_ERR_INVALID, "top_p 0");
    CHECK(strstr(err.message, "top_p") != NULL, "message '%s'", err.message);
    p.top_p = NAN;
    CHECK(okv_sampler_create(&p, 4, &err) == NULL && err.status == OKV_ERR_INVALID, "top_p NaN");
    p.top_p = 1.0f;
    p.temperature = NAN;
    CHECK(okv_sampler_create(&p, 4, &err) == NULL && err.status == OKV_ERR_INVALID, "temp NaN");
    CHECK(strstr(err.message, "temperature") != NULL, "message '%s'", err.message);
    CHECK(okv_sampler_create(NULL, 4, &err) == NULL && err.status == OKV_ERR_INVALID, "NULL params");
    okv_sampler_free(NULL);
}

static void test_greedy(void) {
    const float tie[6] = {1.0f, 3.0f, -2.0f, 3.0f, 2.0f, 3.0f};
    okv_sampler *s = make(0.0f, 0, 1.0f, 7, 6);
    CHECK(okv_sampler_sample(s, tie) == 1, "tie goes to the lowest id, got %d", okv_sampler_sample(s, tie));
    okv_sampler_free(s);
    s = make(-1.0f, 0, 1.0f, 7, 6);
    CHECK(okv_sampler_sample(s, tie) == 1, "negative temperature is greedy");
    okv_sampler_free(s);
}

/* A NaN logit means the model's output is broken: no token is drawn from
 * it, greedy or not, and the random state is left for the next call. */
static void test_nan_logits(void) {
    const float nan_last[4] = {-5.0f, -1.0f, 2.0f, NAN};
    const float fine[4] = {0.5f, 0.1f, 0.4f, 0.3f};
    okv_sampler *g = make(0.0f, 0, 1.0f, 7, 4);
    CHECK(okv_sampler_sample(g, nan_last) == OKV_SAMPLE_NAN, "greedy over a NaN logit: %d",
          okv_sampler_sample(g, nan_last));
    float probs[4] = {9, 9, 9, 9};
    CHECK(!okv_sampler_probs(g, nan_last, probs) && probs[0] == 9 && probs[3] == 9,
          "probs of NaN logits: false, probs untouched");
    okv_sampler_free(g);

    okv_sampler *a = make(1.0f, 0, 1.0f, 11, 4), *b = make(1.0f, 0, 1.0f, 11, 4);
    CHECK(okv_sampler_sample(a, nan_last) == OKV_SAMPLE_NAN, "sampling over a NaN logit");
    int same = 0;
    for (int i = 0; i < 50; i++) same += okv_sampler_sample(a, fine) == okv_sampler_sample(b, fine);
    CHECK(same == 50, "a refused NaN draw consumed random state: %d / 50 draws agree", same);
    okv_sampler_free(a);
    okv_sampler_free(b);

    /* A -inf bias on a +inf logit makes NaN inside the sampler: the token
     * is banned, not an error. */
    const float inf_logit[3] = {INFINITY, -1.0f, 0.5f};
    const int32_t ban = 0;
    const float minus_inf = -INFINITY;
    okv_sampler *h = make(0.0f, 0, 1.0f, 7, 3);
    okv_error err;
    CHECK(okv_sampler_set_logit_bias(h, &ban, &minus_inf, 1, &err) == OKV_OK, "bias: %s", err.message);
    CHECK(okv_sampler_sample(h, inf_logit) == 2, "a banned +inf logit never wins, got %d",
          okv_sampler_sample(h, inf_logit));
    okv_sampler_free(h);
}

/* top_k = 1 and a tiny top_p both leave one candidate: always the argmax
 * with ties to the lowest id, whatever the temperature and the draws. */
static void test_greedy_equivalents(void) {
    enum { N = 1000 };
    static float l[N];
    okv_sampler *k1 = make(1.5f, 1, 1.0f, 11, N);
    okv_sampler *p0 = make(1.5f, 0, 1e-6f, 12, N);
    okv_sampler *k1p = make(0.7f, 1, 0.5f, 13, N);
    int bad_k = 0, bad_p = 0, bad_kp = 0;
    for (int t = 0; t < 200; t++) {
        fill_logits(l, N, (uint64_t)t + 100);
        int32_t want = ref_argmax(l, N);
        bad_k += okv_sampler_sample(k1, l) != want;
        bad_p += okv_sampler_sample(p0, l) != want;
        bad_kp += okv_sampler_sample(k1p, l) != want;
    }
    CHECK(bad_k == 0, "top_k 1 differed from greedy %d times", bad_k);
    CHECK(bad_p == 0, "top_p 1e-6 differed from greedy %d times", bad_p);
    CHECK(bad_kp == 0, "top_k 1 + top_p differed from greedy %d times", bad_kp);
    okv_sampler_free(k1);
    okv_sampler_free(p0);
    okv_sampler_free(k1p);
}

static void test_reproducible(void) {
    enum { N = 512, DRAWS = 500 };
    static float l[N];
    okv_sampler *a = make(0.8f, 40, 0.9f, 42, N);
    okv_sampler *b = make(0.8f, 40, 0.9f, 42, N);
    okv_sampler *c = make(0.8f, 40, 0.9f, 43, N);
    int same_ab = 1, same_ac = 1;
    for (int t = 0; t < DRAWS; t++) {
        fill_logits(l, N, (uint64_t)t % 7);
        int32_t x = okv_sampler_sample(a, l), y = okv_sampler_sample(b, l), z = okv_sampler_sample(c, l);
        same_ab &= x == y;
        same_ac &= x == z;
    }
    CHECK(same_ab, "same seed gave different choices");
    CHECK(!same_ac, "seeds 42 and 43 gave identical %d choices", DRAWS);
    okv_sampler_free(a);
    okv_sampler_free(b);
    okv_sampler_free(c);
}

/* Draws `draws` tokens and returns the chi-square statistic of the counts
 * against the expected probabilities `want` (0 where no draw may land:
 * such a draw makes the result infinite). */
static double chi_square(okv_sampler *s, const float *logits, const double *want, int n, int draws) {
    int count[8] = {0};
    for (int i = 0; i < draws; i++) {
        int32_t id = okv_sampler_sample(s, logits);
        if (id < 0 || id >= n) return INFINITY;
        count[id]++;
    }
    double chi = 0.0;
    for (int i = 0; i < n; i++) {
        if (want[i] == 0.0) {
            if (count[i]) return INFINITY;
            continue;
        }
        double e = want[i] * draws, d = count[i] - e;
        chi += d * d / e;
    }
    return chi;
}

static void test_frequencies(void) {
    const double pr[4] = {0.1, 0.2, 0.3, 0.4};
    float l[4];
    for (int i = 0; i < 4; i++) l[i] = (float)log(pr[i]) + 3.0f; /* an offset softmax ignores */
    const int draws = 40000;
    /* 99.9th percentiles of chi-square: 3 dof 16.27, 1 dof 10.83. */

    okv_sampler *s = make(1.0f, 0, 1.0f, 2024, 4);
    double chi = chi_square(s, l, pr, 4, draws);
    CHECK(chi < 16.27, "temperature 1: chi-square %.2f (3 dof)", chi);
    okv_sampler_free(s);

    /* T = 0.5 squares the probabilities: 1, 4, 9, 16 over 30. */
    const double sq[4] = {1 / 30.0, 4 / 30.0, 9 / 30.0, 16 / 30.0};
    s = make(0.5f, 0, 1.0f, 99, 4);
    chi = chi_square(s, l, sq, 4, draws);
    CHECK(chi < 16.27, "temperature 0.5: chi-square %.2f (3 dof)", chi);
    okv_sampler_free(s);

    /* top_k 2 keeps 0.4 and 0.3: renormalized 4/7, 3/7. */
    const double k2[4] = {0, 0, 3 / 7.0, 4 / 7.0};
    s = make(1.0f, 2, 1.0f, 5, 4);
    chi = chi_square(s, l, k2, 4, draws);
    CHECK(chi < 10.83, "top_k 2: chi-square %.2f (1 dof)", chi);
    okv_sampler_free(s);

    /* top_p 0.6: 0.4 alone falls short, 0.4 + 0.3 reaches it. */
    s = make(1.0f, 0, 0.6f, 6, 4);
    chi = chi_square(s, l, k2, 4, draws);
    CHECK(chi < 10.83, "top_p 0.6: chi-square %.2f (1 dof)", chi);
    okv_sampler_free(s);

    /* top_p 0.35: 0.4 alone reaches it. */
    const double p1[4] = {0, 0, 0, 1};
    s = make(1.0f, 0, 0.35f, 8, 4);
    chi = chi_square(s, l, p1, 4, 1000);
    CHECK(chi == 0.0, "top_p 0.35: chi-square %.2f", chi);
    okv_sampler_free(s);

    /* And the test can tell a wrong distribution: the T = 1 draws do not
     * pass as uniform. */
    const double uni[4] = {0.25, 0.25, 0.25, 0.25};
    s = make(1.0f, 0, 1.0f, 2024, 4);
    chi = chi_square(s, l, uni, 4, draws);
    CHECK(chi > 16.27, "T = 1 draws look uniform (chi-square %.2f)", chi);
    okv_sampler_free(s);
}

/* top_k over a larger vocabulary (the quickselect path): with a huge
 * temperature every one of the k best is drawn, nothing else ever is. */
static void test_top_k_set(void) {
    enum { N = 3000, K = 5 };
    static float l[N];
    fill_logits(l, N, 77);
    for (int i = 0; i < N; i++) l[i] += (float)i * 1e-5f; /* distinct, so the top 5 are clear */
    int32_t top[K];
    for (int j = 0; j < K; j++) {
        int32_t b = -1;
        for (int32_t i = 0; i < N; i++) {
            int taken = 0;
            for (int q = 0; q < j; q++) taken |= top[q] == i;
            if (!taken && (b < 0 || l[i] > l[b])) b = i;
        }
        top[j] = b;
    }
    okv_sampler *s = make(1e6f, K, 1.0f, 3, N);
    int seen[K] = {0}, outside = 0;
    for (int t = 0; t < 2000; t++) {
        int32_t id = okv_sampler_sample(s, l);
        int hit = 0;
        for (int j = 0; j < K; j++)
            if (top[j] == id) seen[j]++, hit = 1;
        outside += !hit;
    }
    CHECK(outside == 0, "%d draws outside the top %d", outside, K);
    for (int j = 0; j < K; j++) CHECK(seen[j] > 250, "top token %d drawn %d of 2000 times", top[j], seen[j]);
    okv_sampler_free(s);
}

/* ---- the controls, against plain reference implementations ---- */

/* llama.cpp's penalties over a window of tokens, written out plainly. */
static void ref_penalties(float *l, int32_t n, const int32_t *hist, int32_t nh, float rep, float freq, float pres) {
    for (int32_t id = 0; id < n; id++) {
        int count = 0;
        for (int32_t i = 0; i < nh; i++) count += hist[i] == id;
        if (!count) continue;
        l[id] = l[id] <= 0 ? l[id] * rep : l[id] / rep;
        l[id] -= (float)count * freq + pres;
    }
}

/* The distribution after the controls, by the reference: softmax of the
 * rewritten logits (T = 1), min_p on the result. */
static void ref_probs(const float *l, int32_t n, float min_p, double *p) {
    double mx = -INFINITY, sum = 0;
    for (int32_t i = 0; i < n; i++) mx = l[i] > mx ? l[i] : mx;
    for (int32_t i = 0; i < n; i++) sum += p[i] = exp(l[i] - mx);
    double cut = min_p; /* the best token's weight is exp(0) = 1 */
    double kept = 0;
    for (int32_t i = 0; i < n; i++) {
        if (p[i] < cut) p[i] = 0;
        kept += p[i];
    }
    for (int32_t i = 0; i < n; i++) p[i] /= kept;
    (void)sum;
}

static void test_controls(void) {
    enum { N = 64 };
    float l[N], want[N];
    fill_logits(l, N, 5);
    const int32_t hist[] = {3, 7, 3, 9, 3, 60, 7};
    okv_sampler *s = make(1.0f, 0, 1.0f, 1, N);
    okv_error err;
    okv_sampler_controls c = {.min_p = 0.05f, .repeat_penalty = 1.3f, .presence_penalty = 0.4f,
                              .frequency_penalty = 0.25f, .penalty_last_n = 5};
    CHECK(okv_sampler_set_controls(s, &c, &err) == OKV_OK, "controls: %s", err.message);
    const int32_t bias_ids[] = {1, 2, 9};
    const float bias[] = {2.5f, -INFINITY, -1.0f};
    CHECK(okv_sampler_set_logit_bias(s, bias_ids, bias, 3, &err) == OKV_OK, "bias: %s", err.message);
    for (int i = 0; i < 7; i++) CHECK(okv_sampler_accept(s, hist[i], &err) == OKV_OK, "accept: %s", err.message);
    /* Reference: bias, then the penalties over the last 5 tokens. */
    memcpy(want, l, sizeof l);
    for (int i = 0; i < 3; i++) want[bias_ids[i]] += bias[i];
    ref_penalties(want, N, hist + 2, 5, 1.3f, 0.25f, 0.4f);
    double pr[N];
    ref_probs(want, N, 0.05f, pr);
    float got[N];
    CHECK(okv_sampler_probs(s, l, got), "probs");
    double worst = 0;
    for (int i = 0; i < N; i++) worst = fmax(worst, fabs(got[i] - pr[i]));
    CHECK(worst < 1e-5, "probabilities after bias + penalties + min_p differ from the reference by %g", worst);
    CHECK(got[2] == 0.0f, "a -inf bias bans token 2");
    int zeros = 0;
    for (int i = 0; i < N; i++) zeros += pr[i] == 0;
    CHECK(zeros > 5, "min_p cut %d tokens (a useless case otherwise)", zeros);
    /* Draws follow it (chi-square over the tokens the reference keeps). */
    int count[N] = {0};
    const int draws = 40000;
    for (int i = 0; i < draws; i++) {
        int32_t id = okv_sampler_sample(s, l);
        if (id >= 0 && id < N) count[id]++;
    }
    double chi = 0;
    int dof = -1, outside = 0;
    for (int i = 0; i < N; i++) {
        if (pr[i] == 0) {
            outside += count[i];
            continue;
        }
        double e = pr[i] * draws, d = count[i] - e;
        chi += d * d / e;
        dof++;
    }
    CHECK(outside == 0, "%d draws outside min_p's set", outside);
    /* 99.9th percentile of chi-square is below dof + 4 sqrt(2 dof) + 10. */
    CHECK(chi < dof + 4 * sqrt(2.0 * dof) + 10, "chi-square %.1f with %d dof", chi, dof);
    okv_sampler_free(s);

    /* penalty_last_n -1: every accepted token; greedy sees the penalties. */
    float g2[4] = {2.0f, 1.9f, -1.0f, 0.5f};
    s = make(0.0f, 0, 1.0f, 1, 4);
    okv_sampler_controls c2 = {.repeat_penalty = 1.1f, .penalty_last_n = -1};
    CHECK(okv_sampler_set_controls(s, &c2, &err) == OKV_OK, "controls: %s", err.message);
    CHECK(okv_sampler_sample(s, g2) == 0, "greedy picks 0 before any penalty");
    okv_sampler_accept(s, 0, &err);
    CHECK(okv_sampler_sample(s, g2) == 1, "2.0 / 1.1 < 1.9: greedy moves to 1");
    okv_sampler_reset(s, 1);
    CHECK(okv_sampler_sample(s, g2) == 0, "reset forgets the history");
    okv_sampler_free(s);

    /* Bad values name the field and change nothing. */
    s = make(1.0f, 0, 1.0f, 1, 4);
    okv_sampler_controls badc = {.min_p = 1.5f};
    CHECK(okv_sampler_set_controls(s, &badc, &err) == OKV_ERR_INVALID && strstr(err.message, "min_p"), "min_p 1.5: %s", err.message);
    badc = (okv_sampler_controls){.repeat_penalty = NAN};
    CHECK(okv_sampler_set_controls(s, &badc, &err) == OKV_ERR_INVALID && strstr(err.message, "repeat_penalty"), "%s", err.message);
    badc = (okv_sampler_controls){.penalty_last_n = -2};
    CHECK(okv_sampler_set_controls(s, &badc, &err) == OKV_ERR_INVALID && strstr(err.message, "penalty_last_n"), "%s", err.message);
    const int32_t out_id = 4;
    const float b1 = 1.0f, bn = NAN;
    CHECK(okv_sampler_set_logit_bias(s, &out_id, &b1, 1, &err) == OKV_ERR_INVALID && strstr(err.message, "token 4"), "%s", err.message);
    const int32_t in_id = 1;
    CHECK(okv_sampler_set_logit_bias(s, &in_id, &bn, 1, &err) == OKV_ERR_INVALID && strstr(err.message, "token 1"), "%s", err.message);
    CHECK(okv_sampler_accept(s, 9, &err) == OKV_ERR_INVALID, "accept out of range");
    okv_sampler_free(s);
}

static void test_logprobs(void) {
    enum { N = 300 };
    float l[N];
    fill_logits(l, N, 11);
    l[17] = 9.0f;
    l[200] = 9.0f; /* a tie: the lower id first */
    double mx = -INFINITY, sum = 0;
    for (int i = 0; i < N; i++) mx = l[i] > mx ? l[i] : mx;
    for (int i = 0; i < N; i++) sum += exp(l[i] - mx);
    int32_t ids[5];
    float lp[5], tlp;
    CHECK(okv_logprobs(l, N, 42, 5, &tlp, ids, lp) == 5, "5 top entries");
    CHECK(fabs(tlp - (l[42] - mx - log(sum))) < 1e-5, "token logprob %g", tlp);
    CHECK(ids[0] == 17 && ids[1] == 200, "ties by id: %d %d", ids[0], ids[1]);
    for (int j = 0; j < 5; j++) {
        CHECK(fabs(lp[j] - (l[ids[j]] - mx - log(sum))) < 1e-5, "top %d logprob", j);
        int better = 0;
        for (int i = 0; i < N; i++) better += l[i] > l[ids[j]];
        CHECK(better <= j, "top %d: %d tokens have a higher logit", j, better);
    }
    CHECK(okv_logprobs(l, N, 42, 0, &tlp, NULL, NULL) == 0, "k 0");
    CHECK(okv_logprobs(l, N, N, 0, &tlp, NULL, NULL) == -1, "token out of range");
    CHECK(okv_logprobs(l, 3, 0, 10, &tlp, ids, lp) == 3, "k beyond the vocabulary");
}

int main(void) {
    test_controls();
    test_logprobs();
    test_create_errors();
    test_greedy();
    test_nan_logits();
    test_greedy_equivalents();
    test_reproducible();
    test_frequencies();
    test_top_k_set();
    return check_done();
}
