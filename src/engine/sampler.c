/* Sampling: greedy, or top-k -> softmax(logits / T) -> top-p -> one draw.
 *
 * The random state is per sampler (xoshiro256** seeded through splitmix64),
 * so two samplers with one seed make the same choices and nothing is shared
 * between threads.  All scratch is sized to the vocabulary at creation. */
#include <math.h>
#include <stdlib.h>

#include "core/error.h"
#include "offkv/sampler.h"

typedef struct cand {
    float v;      /* logit, later probability weight */
    int32_t id;
} cand;

struct okv_sampler {
    okv_sampler_params p;
    int32_t n_vocab;
    uint64_t rng[4];
    cand *c; /* n_vocab */
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
    free(s);
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
        /* NaN never wins; a first NaN loses to anything. */
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
    *k_out = k;
    *total_out = total;
    return -1;
}

int32_t okv_sampler_sample(okv_sampler *s, const float *logits) {
    if (!s || !logits) return -1;
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

bool okv_sampler_probs(okv_sampler *s, const float *logits, float *probs) {
    if (!s || !logits || !probs) return false;
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
