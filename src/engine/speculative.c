/* Speculative decoding (include/offkv/speculative.h): draft, verify in one
 * target eval, keep the agreeing prefix plus the target's own token, rewind
 * both caches to it. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "offkv/speculative.h"
#include "offkv/tokenizer.h"

enum { MAX_DRAFT = 64 };

struct okv_speculator {
    okv_context *target, *draft;
    okv_spec_config cfg;
    bool greedy;
    int32_t n_vocab, capacity;
    okv_sampler *tsmp, *dsmp;  /* the target's and the draft's distributions */
    uint64_t rng[4];
    int32_t *hist;             /* the sequence, capacity + 1 */
    int32_t n;                 /* its length */
    int32_t draft_valid;       /* the draft cache holds hist[0..draft_valid) and nothing else */
    int32_t *toks, *pos;       /* scratch: K + 1, or the draft's max_write */
    float *tlogits;            /* (K + 1) x n_vocab */
    float *dlogits;            /* n_vocab */
    float *p;                  /* n_vocab: the target's distribution of one row */
    float *q;                  /* K x n_vocab: the draft's, per proposal (sampling only) */
    int32_t rest, rest_len;    /* steps the draft sits out, and the length of the last rest */
    okv_spec_stats stats;
};

/* A draft unsure of its first proposal (p_min) sits out the next steps,
 * 1, 2, 4 .. up to this many while it stays unsure, and catches up on the
 * tokens it missed in one chunked eval: on text it cannot predict, plain
 * decoding plus a little, instead of a draft eval per token. */
enum { MAX_REST = 16 };

static uint64_t splitmix64(uint64_t *state) {
    uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

static double uniform01(uint64_t s[4]) {
    const uint64_t result = rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return (double)(result >> 11) * 0x1.0p-53;
}

/* Draws from weights w[0..n) (not necessarily normalised) with u in [0, 1). */
static int32_t draw(const float *w, int32_t n, double u) {
    double total = 0.0;
    int32_t last = -1;
    for (int32_t i = 0; i < n; i++)
        if (w[i] > 0.0f) {
            total += w[i];
            last = i;
        }
    if (last < 0) return 0;
    double x = u * total;
    for (int32_t i = 0; i < n; i++) {
        if (!(w[i] > 0.0f)) continue;
        x -= w[i];
        if (x < 0.0) return i;
    }
    return last; /* rounding left x just above the summed weights */
}

int32_t okv_spec_accept(const float *p, const float *q, int32_t n_vocab, int32_t drafted, double u_accept,
                        double u_resample, bool *accepted) {
    if (!p || !accepted || n_vocab < 1 || drafted < 0 || drafted >= n_vocab) return -1;
    const double qd = q ? q[drafted] : 1.0, pd = p[drafted];
    if (u_accept * qd < pd) {
        *accepted = true;
        return drafted;
    }
    *accepted = false;
    /* Residual max(0, p - q), walked twice (sum, then draw) to allocate nothing. */
    double total = 0.0;
    for (int32_t i = 0; i < n_vocab; i++) {
        const double r = (double)p[i] - (q ? (double)q[i] : (i == drafted ? 1.0 : 0.0));
        if (r > 0.0) total += r;
    }
    if (!(total > 0.0)) return draw(p, n_vocab, u_resample);
    double x = u_resample * total;
    int32_t last = drafted;
    for (int32_t i = 0; i < n_vocab; i++) {
        const double r = (double)p[i] - (q ? (double)q[i] : (i == drafted ? 1.0 : 0.0));
        if (!(r > 0.0)) continue;
        last = i;
        x -= r;
        if (x < 0.0) return i;
    }
    return last;
}

/* OKV_OK when the two tokenizers have the same tokens, else a message
 * naming the first that differs. */
static okv_status same_vocab(const okv_model *t, const okv_model *d, okv_error *err) {
    const okv_tokenizer *a = okv_model_tokenizer(t), *b = okv_model_tokenizer(d);
    const int32_t na = okv_model_n_vocab(t), nb = okv_model_n_vocab(d);
    const int32_t n = na < nb ? na : nb;
    for (int32_t i = 0; i < n; i++) {
        size_t la = 0, lb = 0;
        const char *sa = okv_tokenizer_token_text(a, i, &la), *sb = okv_tokenizer_token_text(b, i, &lb);
        if (!sa || !sb || la != lb || memcmp(sa, sb, la) != 0)
            return okv_fail(err, OKV_ERR_INVALID,
                            "speculative: the draft's vocabulary differs from the target's at token %d "
                            "(target '%.*s', draft '%.*s')",
                            (int)i, sa ? (int)(la < 40 ? la : 40) : 0, sa ? sa : "", sb ? (int)(lb < 40 ? lb : 40) : 0,
                            sb ? sb : "");
    }
    if (na != nb)
        return okv_fail(err, OKV_ERR_INVALID,
                        "speculative: the draft's vocabulary differs from the target's at token %d "
                        "(target has %d tokens, draft %d)",
                        (int)n, (int)na, (int)nb);
    return OKV_OK;
}

void okv_speculator_free(okv_speculator *s) {
    if (!s) return;
    okv_sampler_free(s->tsmp);
    okv_sampler_free(s->dsmp);
    free(s->hist);
    free(s->toks);
    free(s->pos);
    free(s->tlogits);
    free(s->dlogits);
    free(s->p);
    free(s->q);
    free(s);
}

/* Whether any layer of c is a sliding-window ring. */
static bool has_ring(const okv_cache *c) {
    okv_layer_geometry g;
    for (int32_t l = 0; okv_cache_layer_geometry(c, l, &g); l++)
        if (g.window > 0) return true;
    return false;
}

/* A draft eval's error, said to be the draft's. */
static okv_status draft_failed(okv_error *err, okv_status st) {
    if (!err) return st;
    char was[sizeof err->message];
    memcpy(was, err->message, sizeof was);
    return okv_fail(err, st, "speculative step: draft: %s", was);
}

okv_speculator *okv_speculator_create(okv_context *target, okv_context *draft, const okv_spec_config *cfg,
                                      okv_error *err) {
    if (!target || !cfg) {
        okv_fail(err, OKV_ERR_INVALID, "speculative: %s is NULL", target ? "config" : "target context");
        return NULL;
    }
    if (cfg->n_draft < 1 || cfg->n_draft > MAX_DRAFT) {
        okv_fail(err, OKV_ERR_INVALID, "speculative: n_draft %d outside 1..%d", (int)cfg->n_draft, MAX_DRAFT);
        return NULL;
    }
    if (cfg->lookup_ngram < 0) {
        okv_fail(err, OKV_ERR_INVALID, "speculative: lookup_ngram %d < 0", (int)cfg->lookup_ngram);
        return NULL;
    }
    if (!(cfg->p_min >= 0.0f && cfg->p_min <= 1.0f)) {
        okv_fail(err, OKV_ERR_INVALID, "speculative: p_min %g outside 0..1", (double)cfg->p_min);
        return NULL;
    }
    if ((draft != NULL) == (cfg->lookup_ngram > 0)) {
        okv_fail(err, OKV_ERR_INVALID, "speculative: give a draft context or lookup_ngram > 0, not %s",
                 draft ? "both" : "neither");
        return NULL;
    }
    const okv_model *tm = okv_context_model(target);
    if (draft) {
        if (okv_context_cache(draft) == okv_context_cache(target)) {
            okv_fail(err, OKV_ERR_INVALID, "speculative: the draft context shares the target's cache; it needs its own");
            return NULL;
        }
        if (same_vocab(tm, okv_context_model(draft), err)) return NULL;
    }
    const int32_t K = cfg->n_draft, mw = okv_context_max_write(target);
    if (mw < K + 1) {
        okv_fail(err, OKV_ERR_INVALID,
                 "speculative: the target context's max_write %d is below n_draft + 1 = %d (it evaluates the last "
                 "token and %d proposals at once)",
                 (int)mw, (int)(K + 1), (int)K);
        return NULL;
    }
    okv_cache_config tc;
    okv_cache_get_config(okv_context_cache(target), &tc);
    if (draft) {
        /* The draft holds the same sequence: a smaller one would fail every
         * step near its end while the target still had room. */
        okv_cache_config dc;
        okv_cache_get_config(okv_context_cache(draft), &dc);
        if (dc.capacity < tc.capacity) {
            okv_fail(err, OKV_ERR_INVALID,
                     "speculative: the draft context's capacity %d is below the target's %d (it holds the same sequence)",
                     (int)dc.capacity, (int)tc.capacity);
            return NULL;
        }
        /* Its rings must take back the proposals the target rejects, as the
         * target's must (else every rejection clears the draft and it
         * re-reads the whole sequence: quadratic). */
        if (dc.max_write < K + 1 && has_ring(okv_context_cache(draft))) {
            okv_fail(err, OKV_ERR_INVALID,
                     "speculative: the draft context's max_write %d is below n_draft + 1 = %d, and its sliding-window "
                     "layers could not take back rejected proposals",
                     (int)dc.max_write, (int)(K + 1));
            return NULL;
        }
    }
    okv_speculator *s = calloc(1, sizeof *s);
    if (!s) {
        okv_fail(err, OKV_ERR_NOMEM, "speculative: out of memory");
        return NULL;
    }
    s->target = target;
    s->draft = draft;
    s->cfg = *cfg;
    s->greedy = cfg->sampling.temperature <= 0.0f || cfg->sampling.top_k == 1;
    s->n_vocab = okv_model_n_vocab(tm);
    s->capacity = tc.capacity;
    uint64_t seed = cfg->sampling.seed ^ 0x5eca1a7e5eca1a7eull; /* not the caller's sampler's stream */
    for (int i = 0; i < 4; i++) s->rng[i] = splitmix64(&seed);
    const int32_t scratch = draft && okv_context_max_write(draft) > K + 1 ? okv_context_max_write(draft) : K + 1;
    const size_t V = (size_t)s->n_vocab;
    s->tsmp = okv_sampler_create(&cfg->sampling, s->n_vocab, err);
    /* not after a failed one: the second would clear err */
    s->dsmp = draft && s->tsmp ? okv_sampler_create(&cfg->sampling, s->n_vocab, err) : NULL;
    s->hist = malloc(((size_t)tc.capacity + 1) * sizeof *s->hist);
    s->toks = malloc((size_t)scratch * sizeof *s->toks);
    s->pos = malloc((size_t)scratch * sizeof *s->pos);
    s->tlogits = malloc((size_t)(K + 1) * V * sizeof *s->tlogits);
    s->dlogits = draft ? malloc(V * sizeof *s->dlogits) : NULL;
    s->p = s->greedy ? NULL : malloc(V * sizeof *s->p);
    s->q = draft && !s->greedy ? malloc((size_t)K * V * sizeof *s->q) : NULL;
    if (!s->tsmp || (draft && !s->dsmp)) {
        okv_speculator_free(s);
        return NULL;
    }
    if (!s->hist || !s->toks || !s->pos || !s->tlogits || (draft && !s->dlogits) || (!s->greedy && !s->p) ||
        (draft && !s->greedy && !s->q)) {
        okv_speculator_free(s);
        okv_fail(err, OKV_ERR_NOMEM, "speculative: out of memory for %d x %d logits", (int)(K + 1), (int)V);
        return NULL;
    }
    okv_error_clear(err);
    return s;
}

okv_status okv_speculator_reset(okv_speculator *s, const int32_t *tokens, int32_t n, okv_error *err) {
    if (!s || !tokens) return okv_fail(err, OKV_ERR_INVALID, "speculative reset: NULL argument");
    if (n < 1 || n > s->capacity + 1)
        return okv_fail(err, OKV_ERR_INVALID, "speculative reset: %d tokens outside 1..capacity + 1 = %d", (int)n,
                        (int)(s->capacity + 1));
    for (int32_t i = 0; i < n; i++)
        if (tokens[i] < 0 || tokens[i] >= s->n_vocab)
            return okv_fail(err, OKV_ERR_INVALID, "speculative reset: token %d at index %d is outside the vocabulary (%d)",
                            (int)tokens[i], (int)i, (int)s->n_vocab);
    const int32_t len = okv_cache_length(okv_context_cache(s->target));
    if (len != n - 1)
        return okv_fail(err, OKV_ERR_INVALID,
                        "speculative reset: the target's cache holds %d positions; it must hold all but the last of "
                        "the %d tokens",
                        (int)len, (int)n);
    if (s->draft) {
        okv_status st = okv_cache_clear(okv_context_cache(s->draft), err);
        if (st) return st;
    }
    memcpy(s->hist, tokens, (size_t)n * sizeof *tokens);
    s->n = n;
    s->draft_valid = 0;
    s->rest = s->rest_len = 0;
    okv_error_clear(err);
    return OKV_OK;
}

void okv_speculator_get_stats(const okv_speculator *s, okv_spec_stats *out) {
    if (s && out) *out = s->stats;
}

/* Prompt lookup: the tokens after the most recent earlier occurrence of the
 * last N tokens, at most k of them; returns how many. */
static int32_t lookup(const okv_speculator *s, int32_t k, int32_t *d) {
    const int32_t N = s->cfg.lookup_ngram, n = s->n;
    const int32_t *h = s->hist;
    if (n < N + 1) return 0;
    for (int32_t j = n - N - 1; j >= 0; j--) {
        if (memcmp(h + j, h + n - N, (size_t)N * sizeof *h) != 0) continue;
        int32_t m = 0;
        while (m < k && j + N + m < n) {
            d[m] = h[j + N + m];
            m++;
        }
        return m;
    }
    return 0;
}

/* The softmax probability of the largest of logits l[0..n). */
static double top_prob(const float *l, int32_t n) {
    float mx = l[0];
    for (int32_t i = 1; i < n; i++) mx = l[i] > mx ? l[i] : mx;
    double z = 0.0;
    for (int32_t i = 0; i < n; i++) z += exp((double)l[i] - (double)mx);
    return 1.0 / z;
}

/* The speculator's samplers have no grammar, so the one way they refuse
 * to pick is a NaN logit.  pos is the position the token would take. */
static okv_status nan_logits(okv_error *err, const char *which, int32_t pos) {
    return okv_fail(err, OKV_ERR_NUMERIC,
                    "speculative step: the %s model's logits for position %d hold NaN (broken weights or "
                    "overflowed arithmetic)",
                    which, (int)pos);
}

/* Brings the draft's cache to rows for hist[0..n) and its logits after them. */
static okv_status draft_catch_up(okv_speculator *s, okv_error *err) {
    const int32_t chunk = okv_context_max_write(s->draft);
    okv_status st;
    while (s->draft_valid < s->n) {
        const int32_t start = s->draft_valid;
        const int32_t len = s->n - start < chunk ? s->n - start : chunk;
        for (int32_t i = 0; i < len; i++) s->pos[i] = start + i;
        const bool last = start + len == s->n;
        if ((st = okv_context_eval_last(s->draft, s->hist + start, s->pos, len, last ? s->dlogits : NULL, err)))
            return draft_failed(err, st);
        s->draft_valid = start + len;
    }
    return OKV_OK;
}

/* Rewinds the draft's cache to keep; clears it when its rings cannot. */
static void draft_rewind(okv_speculator *s, int32_t keep) {
    okv_cache *dc = okv_context_cache(s->draft);
    const int32_t len = okv_cache_length(dc);
    if (keep > len) keep = len;
    if (keep < len && okv_cache_can_rewind(dc, keep) && okv_cache_rewind(dc, keep, NULL) == OKV_OK) {
        s->draft_valid = keep;
    } else if (keep < len) {
        okv_cache_clear(dc, NULL);
        s->draft_valid = 0;
    } else {
        s->draft_valid = keep;
    }
}

okv_status okv_speculator_step(okv_speculator *s, int32_t max_new, int32_t *out, int32_t *n_out, okv_error *err) {
    if (!s || !out || !n_out) return okv_fail(err, OKV_ERR_INVALID, "speculative step: NULL argument");
    if (max_new < 1) return okv_fail(err, OKV_ERR_INVALID, "speculative step: max_new %d < 1", (int)max_new);
    if (s->n < 1) return okv_fail(err, OKV_ERR_INVALID, "speculative step: no sequence (call okv_speculator_reset)");
    okv_cache *tc = okv_context_cache(s->target);
    const int32_t n = s->n;
    if (okv_cache_length(tc) != n - 1)
        return okv_fail(err, OKV_ERR_INVALID,
                        "speculative step: the target's cache holds %d positions, the sequence %d tokens (changed "
                        "since the last call?)",
                        (int)okv_cache_length(tc), (int)n);
    if (n - 1 >= s->capacity)
        return okv_fail(err, OKV_ERR_POSITION, "speculative step: the context is full (%d positions)", (int)s->capacity);
    if (s->draft && s->draft_valid > okv_cache_length(okv_context_cache(s->draft)))
        s->draft_valid = okv_cache_length(okv_context_cache(s->draft));

    int32_t K = s->cfg.n_draft;
    if (K > max_new - 1) K = max_new - 1;
    if (K > s->capacity - n) K = s->capacity - n;
    if (K < 0) K = 0;
    const size_t V = (size_t)s->n_vocab;
    int32_t *d = s->toks + 1; /* proposals follow the last token in the target's eval */
    int32_t nd = 0;
    okv_status st = OKV_OK;

    if (K > 0 && !s->draft) {
        nd = lookup(s, K, d);
    } else if (K > 0 && s->rest > 0) {
        s->rest--;
    } else if (K > 0) {
        okv_cache *dc = okv_context_cache(s->draft);
        if (okv_cache_length(dc) > s->draft_valid) draft_rewind(s, s->draft_valid);
        if ((st = draft_catch_up(s, err))) goto fail;
        /* Whether the draft stops depends on its own distribution only,
         * never on the target's, so the kept tokens keep the target's law. */
        const double p_min = s->cfg.p_min;
        while (nd < K) {
            if (s->greedy) {
                if ((d[nd] = okv_sampler_sample(s->dsmp, s->dlogits)) < 0) {
                    st = nan_logits(err, "draft", n + nd);
                    goto fail;
                }
                if (p_min > 0.0 && top_prob(s->dlogits, s->n_vocab) < p_min) break;
            } else {
                float *q = s->q + (size_t)nd * V;
                if (!okv_sampler_probs(s->dsmp, s->dlogits, q)) {
                    st = nan_logits(err, "draft", n + nd);
                    goto fail;
                }
                float qmax = 0.0f;
                for (size_t i = 0; i < V; i++) qmax = q[i] > qmax ? q[i] : qmax;
                if (p_min > 0.0 && qmax < p_min) break;
                d[nd] = draw(q, s->n_vocab, uniform01(s->rng));
            }
            if (++nd == K) break;
            const int32_t p = n + nd - 1;
            if ((st = okv_context_eval_last(s->draft, &d[nd - 1], &p, 1, s->dlogits, err))) {
                st = draft_failed(err, st);
                goto fail;
            }
        }
        s->rest_len = nd > 0 ? 0 : s->rest_len ? (s->rest_len * 2 < MAX_REST ? s->rest_len * 2 : MAX_REST) : 1;
        s->rest = s->rest_len;
    }

    /* Verify: the last token and the proposals in one target eval. */
    s->toks[0] = s->hist[n - 1];
    for (int32_t i = 0; i <= nd; i++) s->pos[i] = n - 1 + i;
    if ((st = okv_context_eval(s->target, s->toks, s->pos, nd + 1, s->tlogits, err))) goto fail;

    int32_t a = 0, next = -1;
    for (; a < nd; a++) {
        const float *row = s->tlogits + (size_t)a * V;
        if (s->greedy) {
            const int32_t t = okv_sampler_sample(s->tsmp, row);
            if (t < 0) {
                st = nan_logits(err, "target", n + a);
                goto fail;
            }
            if (t != d[a]) {
                next = t;
                break;
            }
        } else {
            if (!okv_sampler_probs(s->tsmp, row, s->p)) {
                st = nan_logits(err, "target", n + a);
                goto fail;
            }
            bool ok = false;
            const double u1 = uniform01(s->rng), u2 = uniform01(s->rng);
            const int32_t t = okv_spec_accept(s->p, s->q ? s->q + (size_t)a * V : NULL, s->n_vocab, d[a], u1, u2, &ok);
            if (!ok) {
                next = t;
                break;
            }
        }
    }
    if (next < 0) { /* every proposal kept: the target's token after the last */
        const float *row = s->tlogits + (size_t)nd * V;
        if (s->greedy) {
            next = okv_sampler_sample(s->tsmp, row);
        } else {
            next = okv_sampler_probs(s->tsmp, row, s->p) ? draw(s->p, s->n_vocab, uniform01(s->rng)) : -1;
        }
        if (next < 0) {
            st = nan_logits(err, "target", n + nd);
            goto fail;
        }
    }

    /* The target keeps hist[0..n) and the a accepted proposals. */
    const int32_t keep = n + a;
    if (keep < okv_cache_length(tc)) {
        if (!okv_cache_can_rewind(tc, keep)) {
            st = okv_fail(err, OKV_ERR_POSITION, "speculative step: the target's cache cannot rewind to %d", (int)keep);
            goto fail;
        }
        if ((st = okv_cache_rewind(tc, keep, err))) goto fail;
    }
    for (int32_t i = 0; i < a; i++) {
        out[i] = d[i];
        s->hist[n + i] = d[i];
    }
    out[a] = next;
    s->hist[n + a] = next;
    s->n = n + a + 1;
    *n_out = a + 1;
    /* The draft's proposals past the accepted ones are not the sequence. */
    if (s->draft) draft_rewind(s, keep);
    s->stats.steps++;
    s->stats.drafted += nd;
    s->stats.accepted += a;
    s->stats.generated += a + 1;
    okv_error_clear(err);
    return OKV_OK;
fail:
    /* Leave the sequence as it was: the target at n - 1 positions (a failed
     * eval already left it at most there), the draft at its valid prefix. */
    if (okv_cache_length(tc) > n - 1 && okv_cache_can_rewind(tc, n - 1)) okv_cache_rewind(tc, n - 1, NULL);
    if (s->draft) draft_rewind(s, s->draft_valid);
    return st;
}
