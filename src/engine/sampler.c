/* Sampling: logit_bias -> penalties -> greedy, or top-k -> softmax(logits /
 * T) -> top-p -> min_p -> one draw; with a grammar, a refused draw masks
 * the vocabulary and draws again.
 *
 * The random state is per sampler (xoshiro256** seeded through splitmix64),
 * so two samplers with one seed make the same choices and nothing is shared
 * between threads.  All scratch is sized to the vocabulary at creation. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "offkv/sampler.h"

typedef struct cand {
    float v;      /* logit, later probability weight */
    int32_t id;
} cand;

struct okv_sampler {
    okv_sampler_params p;
    okv_sampler_controls ctl;
    int32_t n_vocab;
    uint64_t rng[4];
    cand *c; /* n_vocab */
    /* Set only when something rewrites the logits. */
    float *work;            /* n_vocab: the logits after bias, penalties and mask */
    int32_t *bias_ids;
    float *bias;
    int32_t n_bias;
    int32_t *hist;          /* accepted tokens: a ring of penalty_last_n, or all of them */
    int32_t n_hist, cap_hist, hist_head;
    int32_t *count;         /* n_vocab occurrence counts, zero between calls */
    int32_t *touched;       /* the ids counted, to reset them */
    okv_grammar_matcher *gm;
    const okv_grammar_vocab *gv;
    bool *allowed;          /* n_vocab */
};

static uint64_t splitmix64(uint64_t *state) {
    uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

static uint64_t xoshiro_next(uint64_t s[4]) {
    uint64_t result = rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
}

/* Uniform in [0, 1) with 53 random bits. */
static double uniform01(uint64_t s[4]) { return (double)(xoshiro_next(s) >> 11) * 0x1.0p-53; }

okv_sampler *okv_sampler_create(const okv_sampler_params *p, int32_t n_vocab, okv_error *err) {
    okv_error_clear(err);
    if (!p) {
        okv_fail(err, OKV_ERR_INVALID, "sampler params are NULL");
        return NULL;
    }
    if (n_vocab < 1) {
        okv_fail(err, OKV_ERR_INVALID, "sampler n_vocab %d < 1", (int)n_vocab);
        return NULL;
    }
    if (isnan(p->temperature)) {
        okv_fail(err, OKV_ERR_INVALID, "sampler temperature is NaN");
        return NULL;
    }
    if (!(p->top_p > 0.0f)) { /* also catches NaN */
        okv_fail(err, OKV_ERR_INVALID, "sampler top_p %g must be > 0", (double)p->top_p);
        return NULL;
    }
    okv_sampler *s = calloc(1, sizeof *s);
    cand *c = malloc((size_t)n_vocab * sizeof *c);
    if (!s || !c) {
        free(s);
        free(c);
        okv_fail(err, OKV_ERR_NOMEM, "sampler scratch for %d tokens", (int)n_vocab);
        return NULL;
    }
    s->p = *p;
    s->n_vocab = n_vocab;
    s->c = c;
    uint64_t seed = p->seed;
    for (int i = 0; i < 4; i++) s->rng[i] = splitmix64(&seed);
    return s;
}

void okv_sampler_free(okv_sampler *s) {
    if (!s) return;
    free(s->c);
    free(s->work);
    free(s->bias_ids);
    free(s->bias);
    free(s->hist);
    free(s->count);
    free(s->touched);
    free(s->allowed);
    free(s);
}

static bool penalties_on(const okv_sampler_controls *c) {
    return c->penalty_last_n != 0 && ((c->repeat_penalty != 0.0f && c->repeat_penalty != 1.0f) ||
                                      c->presence_penalty != 0.0f || c->frequency_penalty != 0.0f);
}

/* Whether sampling must first rewrite a copy of the logits. */
static bool rewrites(const okv_sampler *s) { return s->n_bias > 0 || penalties_on(&s->ctl) || s->gm; }

static okv_status ensure_work(okv_sampler *s, okv_error *err) {
    if (!s->work && !(s->work = malloc((size_t)s->n_vocab * sizeof *s->work)))
        return okv_fail(err, OKV_ERR_NOMEM, "sampler scratch for %d tokens", (int)s->n_vocab);
    return OKV_OK;
}

okv_status okv_sampler_set_controls(okv_sampler *s, const okv_sampler_controls *c, okv_error *err) {
    okv_error_clear(err);
    if (!s || !c) return okv_fail(err, OKV_ERR_INVALID, "sampler or controls are NULL");
    if (!(c->min_p >= 0.0f && c->min_p <= 1.0f)) return okv_fail(err, OKV_ERR_INVALID, "min_p %g outside [0, 1]", (double)c->min_p);
    if (!isfinite(c->repeat_penalty) || c->repeat_penalty < 0.0f)
        return okv_fail(err, OKV_ERR_INVALID, "repeat_penalty %g must be a finite number >= 0", (double)c->repeat_penalty);
    if (!isfinite(c->presence_penalty))
        return okv_fail(err, OKV_ERR_INVALID, "presence_penalty %g is not finite", (double)c->presence_penalty);
    if (!isfinite(c->frequency_penalty))
        return okv_fail(err, OKV_ERR_INVALID, "frequency_penalty %g is not finite", (double)c->frequency_penalty);
    if (c->penalty_last_n < -1)
        return okv_fail(err, OKV_ERR_INVALID, "penalty_last_n %d < -1", (int)c->penalty_last_n);
    if (penalties_on(c)) {
        okv_status st = ensure_work(s, err);
        if (st != OKV_OK) return st;
        if (!s->count) {
            s->count = calloc((size_t)s->n_vocab, sizeof *s->count);
            s->touched = malloc((size_t)s->n_vocab * sizeof *s->touched);
            if (!s->count || !s->touched) {
                free(s->count);
                free(s->touched);
                s->count = s->touched = NULL;
                return okv_fail(err, OKV_ERR_NOMEM, "sampler penalty counts");
            }
        }
    }
    /* A new window keeps the most recent tokens of the old history. */
    if (c->penalty_last_n != s->ctl.penalty_last_n && s->n_hist) {
        int32_t n = s->n_hist, *flat = malloc((size_t)n * sizeof *flat);
        if (!flat) return okv_fail(err, OKV_ERR_NOMEM, "sampler history");
        for (int32_t i = 0; i < n; i++) flat[i] = s->hist[(s->hist_head + i) % s->cap_hist];
        free(s->hist);
        s->hist = flat;
        s->cap_hist = n;
        s->hist_head = 0;
        if (c->penalty_last_n >= 0 && n > c->penalty_last_n) {
            memmove(flat, flat + (n - c->penalty_last_n), (size_t)c->penalty_last_n * sizeof *flat);
            s->n_hist = c->penalty_last_n;
        }
    }
    s->ctl = *c;
    return OKV_OK;
}

okv_status okv_sampler_set_logit_bias(okv_sampler *s, const int32_t *ids, const float *bias, int32_t n,
                                      okv_error *err) {
    okv_error_clear(err);
    if (!s || n < 0 || (n > 0 && (!ids || !bias))) return okv_fail(err, OKV_ERR_INVALID, "logit_bias arguments are NULL or n < 0");
    for (int32_t i = 0; i < n; i++) {
        if (ids[i] < 0 || ids[i] >= s->n_vocab)
            return okv_fail(err, OKV_ERR_INVALID, "logit_bias token %d outside the vocabulary (%d tokens)", (int)ids[i],
                            (int)s->n_vocab);
        if (isnan(bias[i]) || bias[i] == INFINITY)
            return okv_fail(err, OKV_ERR_INVALID, "logit_bias of token %d is %g", (int)ids[i], (double)bias[i]);
    }
    int32_t *ni = NULL;
    float *nb = NULL;
    if (n > 0) {
        ni = malloc((size_t)n * sizeof *ni);
        nb = malloc((size_t)n * sizeof *nb);
        if (!ni || !nb || ensure_work(s, err) != OKV_OK) {
            free(ni);
            free(nb);
            return okv_fail(err, OKV_ERR_NOMEM, "logit_bias of %d tokens", (int)n);
        }
        memcpy(ni, ids, (size_t)n * sizeof *ni);
        memcpy(nb, bias, (size_t)n * sizeof *nb);
    }
    free(s->bias_ids);
    free(s->bias);
    s->bias_ids = ni;
    s->bias = nb;
    s->n_bias = n;
    return OKV_OK;
}

okv_status okv_sampler_set_grammar(okv_sampler *s, okv_grammar_matcher *m, const okv_grammar_vocab *v,
                                   okv_error *err) {
    okv_error_clear(err);
    if (!s) return okv_fail(err, OKV_ERR_INVALID, "sampler is NULL");
    if (m) {
        if (!v) return okv_fail(err, OKV_ERR_INVALID, "a grammar needs its vocabulary");
        if (okv_grammar_vocab_n_tokens(v) != s->n_vocab)
            return okv_fail(err, OKV_ERR_INVALID, "grammar vocabulary has %d tokens, the sampler %d",
                            (int)okv_grammar_vocab_n_tokens(v), (int)s->n_vocab);
        okv_status st = ensure_work(s, err);
        if (st != OKV_OK) return st;
        if (!s->allowed && !(s->allowed = malloc((size_t)s->n_vocab * sizeof *s->allowed)))
            return okv_fail(err, OKV_ERR_NOMEM, "sampler grammar mask");
    }
    s->gm = m;
    s->gv = m ? v : NULL;
    return OKV_OK;
}

okv_status okv_sampler_accept(okv_sampler *s, int32_t token, okv_error *err) {
    okv_error_clear(err);
    if (!s) return okv_fail(err, OKV_ERR_INVALID, "sampler is NULL");
    if (token < 0 || token >= s->n_vocab)
        return okv_fail(err, OKV_ERR_INVALID, "token %d outside the vocabulary (%d tokens)", (int)token, (int)s->n_vocab);
    /* room in the history first, so that a failure leaves the grammar where it was */
    const int32_t last_n = s->ctl.penalty_last_n;
    if (last_n > 0 && s->cap_hist != last_n) {
        int32_t *h = realloc(s->hist, (size_t)last_n * sizeof *h);
        if (!h) return okv_fail(err, OKV_ERR_NOMEM, "sampler history");
        s->hist = h;
        s->cap_hist = last_n;
    } else if (last_n < 0 && s->n_hist == s->cap_hist) {
        int32_t cap = s->cap_hist ? s->cap_hist * 2 : 64;
        int32_t *h = realloc(s->hist, (size_t)cap * sizeof *h);
        if (!h) return okv_fail(err, OKV_ERR_NOMEM, "sampler history");
        s->hist = h;
        s->cap_hist = cap;
    }
    if (s->gm) {
        okv_status st = okv_grammar_matcher_accept_token(s->gm, s->gv, token, err);
        if (st != OKV_OK) return st;
    }
    if (last_n == 0) return OKV_OK;
    if (last_n > 0) {
        if (s->n_hist < last_n) {
            s->hist[(s->hist_head + s->n_hist++) % last_n] = token;
        } else {
            s->hist[s->hist_head] = token;
            s->hist_head = (s->hist_head + 1) % last_n;
        }
        return OKV_OK;
    }
    s->hist[s->n_hist++] = token;
    return OKV_OK;
}

void okv_sampler_reset(okv_sampler *s, uint64_t seed) {
    if (!s) return;
    s->n_hist = 0;
    s->hist_head = 0;
    for (int i = 0; i < 4; i++) s->rng[i] = splitmix64(&seed);
}

/* Bias and penalties applied to a copy of the logits (s->work). */
static const float *rewrite(okv_sampler *s, const float *logits) {
    float *w = s->work;
    memcpy(w, logits, (size_t)s->n_vocab * sizeof *w);
    for (int32_t i = 0; i < s->n_bias; i++) w[s->bias_ids[i]] += s->bias[i];
    if (penalties_on(&s->ctl) && s->n_hist) {
        int32_t nt = 0;
        for (int32_t i = 0; i < s->n_hist; i++) {
            int32_t id = s->hist[s->cap_hist ? (s->hist_head + i) % s->cap_hist : i];
            if (s->count[id]++ == 0) s->touched[nt++] = id;
        }
        const okv_sampler_controls *c = &s->ctl;
        for (int32_t i = 0; i < nt; i++) {
            int32_t id = s->touched[i];
            if (c->repeat_penalty != 0.0f && c->repeat_penalty != 1.0f)
                w[id] = w[id] <= 0.0f ? w[id] * c->repeat_penalty : w[id] / c->repeat_penalty;
            w[id] -= (float)s->count[id] * c->frequency_penalty + c->presence_penalty;
            s->count[id] = 0;
        }
    }
    return w;
}

/* Sets the logits of the tokens the grammar refuses to -inf; the number
 * allowed. */
static int32_t mask(okv_sampler *s, float *w) {
    int32_t n = okv_grammar_matcher_mask(s->gm, s->gv, s->allowed);
    for (int32_t i = 0; i < s->n_vocab; i++)
        if (!s->allowed[i]) w[i] = -INFINITY;
    return n;
}

/* Higher logit first; equal logits by lower id, so every ordering (and
 * hence top-k, top-p and the draw) is fully determined by the logits. */
static int cand_before(const cand *a, const cand *b) {
    if (a->v != b->v) return a->v > b->v;
    return a->id < b->id;
}

static void cand_swap(cand *a, cand *b) {
    cand t = *a;
    *a = *b;
    *b = t;
}

/* Moves the k best of c[0..n) to the front, unordered (quickselect): a
 * top-k of 40 over 32000 logits should not pay for a full sort. */
static void select_top(cand *c, int32_t n, int32_t k) {
    int32_t lo = 0, hi = n - 1;
    while (lo < hi) {
        cand pivot = c[lo + (hi - lo) / 2];
        int32_t i = lo, j = hi;
        while (i <= j) {
            while (cand_before(&c[i], &pivot)) i++;
            while (cand_before(&pivot, &c[j])) j--;
            if (i <= j) cand_swap(&c[i++], &c[j--]);
        }
        if (k - 1 <= j) hi = j;
        else if (k - 1 >= i) lo = i;
        else break;
    }
}

/* Sorts c[0..n) best first.  Heapsort, not qsort: glibc's qsort may
 * malloc a merge buffer, and a sampler must not allocate per call. */
static void sift_down(cand *c, int32_t root, int32_t n) {
    for (;;) {
        int32_t child = 2 * root + 1;
        if (child >= n) return;
        /* The root is the worst, so popping roots to the back leaves the
         * best first. */
        if (child + 1 < n && cand_before(&c[child], &c[child + 1])) child++;
        if (!cand_before(&c[root], &c[child])) return;
        cand_swap(&c[child], &c[root]);
        root = child;
    }
}

static void sort_best_first(cand *c, int32_t n) {
    for (int32_t i = n / 2 - 1; i >= 0; i--) sift_down(c, i, n);
    for (int32_t end = n - 1; end > 0; end--) {
        cand_swap(&c[0], &c[end]);
        sift_down(c, 0, end);
    }
}

static int32_t argmax(const float *logits, int32_t n) {
    int32_t best = 0;
    float bv = logits[0];
    for (int32_t i = 1; i < n; i++) {
        /* The caller's logits hold no NaN, but a bias of -inf on a +inf
         * logit makes one: that token is banned, so NaN never wins and a
         * first NaN loses to anything. */
        if (logits[i] > bv || (isnan(bv) && !isnan(logits[i]))) {
            bv = logits[i];
            best = i;
        }
    }
    return best;
}

/* The weights okv_sampler_sample draws from: returns a token id when the
 * choice is certain (greedy, top-k 1, no finite logit); otherwise -1 with
 * c[0..*k) holding (weight, id), best first, summing to *total. */
static int32_t weigh(okv_sampler *s, const float *logits, int32_t *k_out, double *total_out) {
    const int32_t n = s->n_vocab;
    const okv_sampler_params *p = &s->p;
    if (p->temperature <= 0.0f || p->top_k == 1) return argmax(logits, n);

    cand *c = s->c;
    for (int32_t i = 0; i < n; i++) {
        c[i].v = isnan(logits[i]) ? -INFINITY : logits[i];
        c[i].id = i;
    }
    int32_t k = (p->top_k > 0 && p->top_k < n) ? p->top_k : n;
    if (k < n) select_top(c, n, k);
    sort_best_first(c, k);

    const float lmax = c[0].v;
    if (!isfinite(lmax)) return c[0].id; /* all -inf (or +inf): nothing to weigh */

    double total = 0.0;
    const double inv_t = 1.0 / (double)p->temperature;
    for (int32_t i = 0; i < k; i++) {
        float w = (float)exp(((double)c[i].v - (double)lmax) * inv_t);
        c[i].v = w;
        total += w;
    }

    if (p->top_p < 1.0f) {
        /* Smallest prefix (in probability order) whose mass reaches top_p. */
        const double target = (double)p->top_p * total;
        double cum = 0.0;
        int32_t keep = 0;
        while (keep < k) {
            cum += c[keep++].v;
            if (cum >= target) break;
        }
        k = keep;
        total = cum;
    }
    if (s->ctl.min_p > 0.0f) {
        /* c[0] weighs 1 (exp(0)); keep what reaches min_p of it. */
        int32_t keep = 1;
        double cum = c[0].v;
        while (keep < k && c[keep].v >= s->ctl.min_p) cum += c[keep++].v;
        k = keep;
        total = cum;
    }
    *k_out = k;
    *total_out = total;
    return -1;
}

static int32_t draw(okv_sampler *s, const float *logits) {
    int32_t k = 0;
    double total = 0.0;
    const int32_t sure = weigh(s, logits, &k, &total);
    if (sure >= 0) return sure;
    const cand *c = s->c;
    double u = uniform01(s->rng) * total;
    for (int32_t i = 0; i < k; i++) {
        u -= c[i].v;
        if (u < 0.0) return c[i].id;
    }
    return c[k - 1].id; /* rounding left u just above the summed weights */
}

static bool any_nan(const float *logits, int32_t n) {
    bool nan = false;
    for (int32_t i = 0; i < n; i++) nan |= logits[i] != logits[i];
    return nan;
}

int32_t okv_sampler_sample(okv_sampler *s, const float *logits) {
    if (!s || !logits) return OKV_SAMPLE_NONE;
    if (any_nan(logits, s->n_vocab)) return OKV_SAMPLE_NAN;
    if (!rewrites(s)) return draw(s, logits);
    float *w = (float *)rewrite(s, logits);
    int32_t id = draw(s, w);
    if (!s->gm || okv_grammar_matcher_allows(s->gm, s->gv, id)) return id;
    if (mask(s, w) == 0) return OKV_SAMPLE_NONE;
    return draw(s, w);
}

bool okv_sampler_probs(okv_sampler *s, const float *logits, float *probs) {
    if (!s || !logits || !probs || any_nan(logits, s->n_vocab)) return false;
    if (rewrites(s)) {
        float *w = (float *)rewrite(s, logits);
        if (s->gm && mask(s, w) == 0) {
            for (int32_t i = 0; i < s->n_vocab; i++) probs[i] = 0.0f;
            return true;
        }
        logits = w;
    }
    int32_t k = 0;
    double total = 0.0;
    const int32_t sure = weigh(s, logits, &k, &total);
    for (int32_t i = 0; i < s->n_vocab; i++) probs[i] = 0.0f;
    if (sure >= 0) {
        probs[sure] = 1.0f;
        return true;
    }
    for (int32_t i = 0; i < k; i++) probs[s->c[i].id] = (float)(s->c[i].v / total);
    return true;
}

int32_t okv_logprobs(const float *logits, int32_t n_vocab, int32_t token, int32_t k, float *token_logprob,
                     int32_t *top_ids, float *top_logprobs) {
    if (!logits || n_vocab < 1 || k < 0 || (k > 0 && (!top_ids || !top_logprobs)) ||
        (token_logprob && (token < 0 || token >= n_vocab)))
        return -1;
    float mx = -INFINITY;
    for (int32_t i = 0; i < n_vocab; i++)
        if (logits[i] > mx) mx = logits[i];
    double sum = 0.0;
    if (isfinite(mx))
        for (int32_t i = 0; i < n_vocab; i++) sum += exp((double)logits[i] - (double)mx);
    const double lse = isfinite(mx) ? (double)mx + log(sum) : 0.0;
    if (token_logprob) *token_logprob = (float)((double)logits[token] - lse);
    if (k > n_vocab) k = n_vocab;
    /* The k best by insertion: k is small (OpenAI allows 20). */
    int32_t have = 0;
    for (int32_t i = 0; i < n_vocab && k > 0; i++) {
        const float v = isnan(logits[i]) ? -INFINITY : logits[i];
        if (have == k && !(v > top_logprobs[k - 1])) continue;
        int32_t j = have < k ? have++ : k - 1;
        while (j > 0 && v > top_logprobs[j - 1]) {
            top_logprobs[j] = top_logprobs[j - 1];
            top_ids[j] = top_ids[j - 1];
            j--;
        }
        top_logprobs[j] = v;
        top_ids[j] = i;
    }
    for (int32_t j = 0; j < have; j++) top_logprobs[j] = (float)((double)top_logprobs[j] - lse);
    return have;
}
