/* Sequences and continuous batching.
 *
 * The server holds n_parallel sequences, each with its own cache, all
 * running the one model.  One worker thread owns them: every step it admits
 * queued requests into free sequences, then evaluates one token for every
 * decoding sequence and a chunk of the prompt of every sequence still
 * prefilling, samples, and hands the text to the requests' HTTP threads.
 * Prompts are prefilled in chunks (at most cfg.chunk tokens a step, shared
 * by all prefilling sequences), so streams already running get a token every
 * step while a long prompt is read.
 *
 * Everything a request's HTTP thread sees (its text, its finish state, the
 * queue) is guarded by one mutex; the caches, samplers and token histories
 * are the worker's alone, so the mutex is never held during an eval. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "offkv/batch.h"
#include "offkv/grammar.h"
#include "offkv/threads.h"
#include "offkv/tokenizer.h"
#include "serve.h"

double srv_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Where a step's piece of text ends, and the logprob records made by then. */
typedef struct piece_end {
    size_t text, lps;
} piece_end;

struct srv_job {
    int refs;                       /* the submitter's, and the scheduler's while queued or running */
    srv_job *next;                  /* queue link */
    pthread_cond_t cv;              /* new text or the end */

    /* What was asked (immutable after submit). */
    int32_t *prompt, n_prompt, max_tokens;
    double max_predict_s;           /* srv_job_params.max_predict_s */
    bool ignore_eos;
    bool special;                   /* control tokens come out as their text (tool-call markup) */
    char *stops[SRV_MAX_STOPS];
    int n_stops;
    int32_t top_logprobs;           /* -1: none */
    srv_job *leader;                /* forks: the job whose prompt cache this one copies (a reference) */

    /* Shared with the submitter, under the mutex. */
    bool cancelled;
    srv_finish finish;
    char *text;                     /* released text: valid UTF-8, no stop string */
    size_t n_text, cap_text;
    piece_end *ends;                /* where each step's piece of text ends: one event each */
    size_t n_ends, cap_ends;
    int32_t n_gen, cached;
    int32_t n_think;                /* generated tokens that were inside reasoning */
    int32_t n_read;                 /* prompt tokens in the cache (cached ones included) */
    uint32_t progress;              /* moves when n_read does, and at admission */
    double t_read;                  /* when n_read last moved, seconds since submission */
    bool admitted;                  /* has had a sequence (a shutdown then cuts it, not refuses it) */
    double t_submit, t_admit, t_first, t_done;
    char error[256];
    bool prefilled;                 /* the prompt is in a cache (forks may copy it now) */
    int stop_hit;                   /* the stop string that ended it, 1-based (0: none) */
    srv_logprob *lps;               /* one per generated token, when asked */
    size_t n_lps, cap_lps;

    /* The worker's alone. */
    okv_sampler *sampler;
    okv_grammar *grammar;
    okv_grammar_matcher *gm;
    okv_detok_stream us;
    char *held;                     /* text that may be the start of a stop string */
    size_t n_held, cap_held;
    srv_reasoning rs;               /* where the answer stands in its reasoning markup */
    bool line_break;                /* the answer holds one (max_predict_s counts from then on) */
    int32_t think_budget;           /* -1: no limit */
    int32_t *force;                 /* the budget message's and rs.m.force's tokens, appended once the budget is spent */
    int32_t n_force, at_force;      /* at_force < n_force: appending them (at_force went in) */
};

typedef struct slot {
    okv_cache *cache;
    int32_t *hist;                  /* the tokens the cache holds, positions 0..n_hist-1 */
    int32_t n_hist;
    int32_t n_hist_seen;            /* n_hist as of the last step, for /metrics (under mu) */
    srv_job *job;                   /* NULL: free */
    int32_t n_prefilled;            /* prompt tokens in the cache */
    bool decoding;
    int32_t next_token;             /* sampled, to evaluate next */
    float *logits;
    uint64_t last_used;
} slot;

struct srv_sched {
    okv_model *model;
    const okv_tokenizer *tok;
    srv_sched_config cfg;
    int32_t n_vocab, capacity;
    slot *slots;
    okv_threadpool *pool;
    okv_batch *batch;               /* one forward pass: a token per decoding sequence + cfg.chunk prompt tokens */
    okv_batch_seq *seqs;
    const int32_t *eog;             /* tokens that end a turn: the tokenizer's (okv_tokenizer_eog) */
    int n_eog;
    pthread_mutex_t gv_mu;          /* guards gv's creation */
    okv_grammar_vocab *gv[2];       /* the vocabulary's trie, made for the first grammar; ends at eog;
                                       [1]: control tokens as their text, for jobs that show them */

    pthread_mutex_t mu;
    pthread_cond_t work;
    srv_job *q_head, *q_tail;
    int32_t n_queued, n_active;
    bool stopping, quit;
    pthread_t worker;
    bool worker_started;
    uint64_t use_counter;
    srv_sched_stats stats;
};

static bool grow(char **p, size_t *cap, size_t need) {
    if (need <= *cap) return true;
    size_t c = *cap ? *cap : 64;
    while (c < need) c *= 2;
    char *q = realloc(*p, c);
    if (!q) return false;
    *p = q;
    *cap = c;
    return true;
}

static void job_free(srv_job *j) {
    free(j->prompt);
    for (int i = 0; i < j->n_stops; i++) free(j->stops[i]);
    free(j->text);
    free(j->ends);
    free(j->held);
    free(j->lps);
    free(j->force);
    okv_sampler_free(j->sampler);
    okv_grammar_matcher_free(j->gm);
    okv_grammar_free(j->grammar);
    pthread_cond_destroy(&j->cv);
    free(j);
}

/* Drops one reference; the mutex is held. */
static void job_unref(srv_job *j) {
    if (--j->refs == 0) {
        if (j->leader) job_unref(j->leader);
        job_free(j);
    }
}

/* Ends a job as it stands; the mutex is held. */
static void job_end(srv_sched *s, srv_job *j, srv_finish f) {
    if (j->finish == SRV_RUNNING) {
        j->finish = f;
        j->t_done = srv_now() - j->t_submit;
        if (j->n_gen > 0 && j->t_done > j->t_first)
            s->stats.last_tokens_per_second = (j->n_gen - 1) / (j->t_done - j->t_first);
    }
    pthread_cond_broadcast(&j->cv);
}

int srv_sched_eog(const srv_sched *s, const int32_t **ids) {
    *ids = s->eog;
    return s->n_eog;
}

/* Fills err (when there is one) as the library's okv_fail does. */
static void sched_fail(okv_error *err, okv_status st, const char *msg) {
    if (!err) return;
    err->status = st;
    snprintf(err->message, sizeof err->message, "%s", msg);
}

static bool is_eog(const srv_sched *s, int32_t id) { return okv_tokenizer_is_eog(s->tok, id); }

static void *worker_main(void *arg);

srv_sched *srv_sched_create(okv_model *model, const srv_sched_config *cfg, okv_error *err) {
    srv_sched *s = calloc(1, sizeof *s);
    if (!s) {
        sched_fail(err, OKV_ERR_NOMEM, "out of memory for the scheduler");
        return NULL;
    }
    s->model = model;
    s->tok = okv_model_tokenizer(model);
    s->cfg = *cfg;
    s->n_vocab = okv_model_n_vocab(model);
    pthread_mutex_init(&s->mu, NULL);
    pthread_mutex_init(&s->gv_mu, NULL);
    pthread_cond_init(&s->work, NULL);
    s->stats.n_parallel = cfg->n_parallel;
    int32_t n_eog;
    s->eog = okv_tokenizer_eog(s->tok, &n_eog);
    s->n_eog = n_eog;
    s->slots = calloc((size_t)cfg->n_parallel, sizeof *s->slots);
    s->seqs = calloc((size_t)cfg->n_parallel, sizeof *s->seqs);
    if (!s->slots || !s->seqs) goto nomem;
    /* Every sequence's cache has the model's layer geometry; capacity as
     * -c says (default: the training context, at most 4096, as contexts
     * do); flat layers start small and double as the sequence grows. */
    const int32_t n_layers = okv_model_n_layers(model);
    okv_layer_geometry *geo = calloc((size_t)n_layers, sizeof *geo);
    if (!geo) goto nomem;
    for (int32_t l = 0; l < n_layers; l++) okv_model_layer_geometry(model, l, &geo[l]);
    const int32_t train = okv_model_n_ctx_train(model);
    okv_cache_config cc = {.capacity = cfg->capacity > 0 ? cfg->capacity : train > 0 && train < 4096 ? train : 4096,
                           .dtype = strcmp(cfg->kv_type, "f32") == 0    ? OKV_F32
                                    : strcmp(cfg->kv_type, "q8_0") == 0 ? OKV_Q8_0
                                                                        : OKV_F16};
    if (s->cfg.chunk > cc.capacity) s->cfg.chunk = cc.capacity;
    cc.max_write = s->cfg.chunk;
    cc.initial_capacity = cc.capacity < 256 ? cc.capacity : 256;
    s->capacity = cc.capacity;
    for (int32_t i = 0; i < cfg->n_parallel; i++) {
        slot *sl = &s->slots[i];
        if (!(sl->cache = okv_cache_create(geo, n_layers, &cc, err))) {
            free(geo);
            goto fail;
        }
        sl->hist = malloc((size_t)cc.capacity * sizeof *sl->hist);
        sl->logits = malloc((size_t)s->n_vocab * sizeof *sl->logits);
        if (!sl->hist || !sl->logits) {
            free(geo);
            goto nomem;
        }
    }
    free(geo);
    if (!(s->pool = okv_threadpool_create(cfg->n_threads, err))) goto fail;
    if (!(s->batch = okv_batch_create(model, cfg->n_parallel + s->cfg.chunk, s->pool, err))) goto fail;
    if (pthread_create(&s->worker, NULL, worker_main, s) != 0) {
        sched_fail(err, OKV_ERR_NOMEM, "cannot start the decode thread");
        goto fail;
    }
    s->worker_started = true;
    return s;
nomem:;
    char msg[96];
    snprintf(msg, sizeof msg, "out of memory for %d sequences", (int)cfg->n_parallel);
    sched_fail(err, OKV_ERR_NOMEM, msg);
fail:
    srv_sched_free(s);
    return NULL;
}

int32_t srv_sched_capacity(const srv_sched *s) { return s->capacity; }

void srv_sched_stop(srv_sched *s) {
    pthread_mutex_lock(&s->mu);
    s->stopping = true;
    while (s->q_head) {
        srv_job *j = s->q_head;
        s->q_head = j->next;
        job_end(s, j, SRV_FINISH_SHUTDOWN);
        job_unref(j);
    }
    s->q_tail = NULL;
    s->n_queued = 0;
    for (int32_t i = 0; s->slots && i < s->cfg.n_parallel; i++)
        if (s->slots[i].job) job_end(s, s->slots[i].job, SRV_FINISH_SHUTDOWN);
    pthread_cond_broadcast(&s->work);
    pthread_mutex_unlock(&s->mu);
}

void srv_sched_free(srv_sched *s) {
    if (!s) return;
    srv_sched_stop(s);
    pthread_mutex_lock(&s->mu);
    s->quit = true;
    pthread_cond_broadcast(&s->work);
    pthread_mutex_unlock(&s->mu);
    if (s->worker_started) pthread_join(s->worker, NULL);
    for (int32_t i = 0; s->slots && i < s->cfg.n_parallel; i++) {
        slot *sl = &s->slots[i];
        if (sl->job) job_unref(sl->job);
        okv_cache_release(sl->cache);
        free(sl->hist);
        free(sl->logits);
    }
    free(s->slots);
    free(s->seqs);
    okv_batch_free(s->batch);
    okv_threadpool_free(s->pool);
    okv_grammar_vocab_free(s->gv[0]);
    okv_grammar_vocab_free(s->gv[1]);
    pthread_mutex_destroy(&s->gv_mu);
    pthread_cond_destroy(&s->work);
    pthread_mutex_destroy(&s->mu);
    free(s);
}

/* The vocabulary's trie for grammars, made by the first request with one
 * (a 150 k-token vocabulary's takes tens of MB and 0.2 s: servers that
 * never see a grammar never pay); NULL with err filled when it cannot be. */
static const okv_grammar_vocab *grammar_vocab(srv_sched *s, bool special, okv_error *err) {
    pthread_mutex_lock(&s->gv_mu);
    if (!s->gv[special])
        s->gv[special] = special ? okv_grammar_vocab_create_special(s->tok, s->eog, s->n_eog, err)
                                 : okv_grammar_vocab_create(s->tok, s->eog, s->n_eog, err);
    const okv_grammar_vocab *v = s->gv[special];
    pthread_mutex_unlock(&s->gv_mu);
    return v;
}

/* A job as asked, not yet queued; NULL when out of memory or a setting
 * the sampler refuses (err says which). */
static srv_job *job_make(srv_sched *s, const srv_job_params *p, uint64_t seed, okv_error *err) {
    srv_job *j = calloc(1, sizeof *j);
    if (!j) return NULL;
    pthread_cond_init(&j->cv, NULL);
    j->refs = 2;
    j->n_prompt = p->n_prompt;
    j->max_tokens = p->max_tokens;
    j->max_predict_s = p->max_predict_s;
    j->ignore_eos = p->ignore_eos;
    j->top_logprobs = p->top_logprobs > SRV_MAX_TOP_LOGPROBS ? SRV_MAX_TOP_LOGPROBS : p->top_logprobs;
    j->special = p->special;
    j->t_submit = srv_now();
    okv_sampler_params sp = p->sampling;
    sp.seed = seed;
    /* A sequence holds at most capacity tokens, so a longer repeat_last_n
     * means the same as all of them; it sized the penalty history (up to
     * 2^30 tokens, 4 GiB) on the first token. */
    okv_sampler_controls ctl = p->controls;
    if (ctl.penalty_last_n > s->capacity) ctl.penalty_last_n = s->capacity;
    bool ok = (j->prompt = malloc((size_t)p->n_prompt * sizeof *j->prompt)) != NULL &&
              (j->sampler = okv_sampler_create(&sp, s->n_vocab, err)) != NULL &&
              okv_sampler_set_controls(j->sampler, &ctl, err) == OKV_OK &&
              okv_sampler_set_logit_bias(j->sampler, p->bias_ids, p->bias, p->n_bias, err) == OKV_OK;
    srv_reasoning_init(&j->rs, p->reasoning);
    /* A chat answer's grammar skips its leading reasoning block, whether
     * the prompt opened it (QwQ, DeepSeek R1) or the model does (Qwen 3,
     * SmolLM3, Command R7B thinking): a lazy one (tool_choice auto) so
     * that a call's opener written while the model thinks is no call;
     * another (a client's schema, a forced call) so that the model
     * reasons, then answers in the grammar (held from the first token, the
     * JSON landed inside the reasoning and the content was empty, or a
     * hybrid model could not think at all).  Where no block may come (the
     * prompt closed reasoning, or the vocabulary has no opener token:
     * srv_reasoning_may_open), such a grammar holds the answer from its
     * first token. */
    const okv_chat_reasoning_markup *rm = &j->rs.m;
    if (ok && p->grammar) {
        ok = (j->grammar = okv_grammar_parse(p->grammar, strlen(p->grammar), NULL, err)) != NULL &&
             (j->gm = p->trigger ? okv_grammar_matcher_create_lazy(j->grammar, p->trigger, strlen(p->trigger),
                                                                   p->trigger_anchored, err)
                                 : okv_grammar_matcher_create(j->grammar, err)) != NULL &&
             (!rm->open || !rm->leading || !(p->trigger || rm->starts_inside || p->reasoning_may_open) ||
              okv_grammar_matcher_skip_block(j->gm, rm->open, rm->close, rm->starts_inside, err) == OKV_OK) &&
             okv_sampler_set_grammar(j->sampler, j->gm, grammar_vocab(s, p->special, err), err) == OKV_OK;
    }
    for (int i = 0; ok && i < p->n_stops; i++) ok = (j->stops[j->n_stops++] = strdup(p->stops[i])) != NULL;
    j->think_budget = j->rs.m.open ? p->think_budget : -1;
    if (ok && j->think_budget >= 0) {
        /* The message, plain text (a client's control tokens' names stay
         * text), then the markup that ends reasoning, its special tokens as
         * tokens; both as the answer's continuation (no SPM space). */
        const char *msg = p->think_message ? p->think_message : "", *f = j->rs.m.force;
        size_t nm = 0, nf = 0;
        ok = okv_tokenizer_encode(s->tok, msg, strlen(msg), OKV_TOKENIZE_CONTINUE, NULL, 0, &nm, err) == OKV_OK &&
             okv_tokenizer_encode(s->tok, f, strlen(f), OKV_TOKENIZE_PARSE_SPECIAL | OKV_TOKENIZE_CONTINUE, NULL, 0,
                                  &nf, err) == OKV_OK;
        if (ok && !(j->force = malloc((nm + nf ? nm + nf : 1) * sizeof *j->force))) {
            sched_fail(err, OKV_ERR_NOMEM, "out of memory");
            ok = false;
        }
        ok = ok && okv_tokenizer_encode(s->tok, msg, strlen(msg), OKV_TOKENIZE_CONTINUE, j->force, nm, &nm, err) == OKV_OK &&
             okv_tokenizer_encode(s->tok, f, strlen(f), OKV_TOKENIZE_PARSE_SPECIAL | OKV_TOKENIZE_CONTINUE, j->force + nm,
                                  nf, &nf, err) == OKV_OK;
        j->n_force = j->at_force = (int32_t)(nm + nf);
    }
    if (!ok) {
        job_free(j);
        return NULL;
    }
    memcpy(j->prompt, p->prompt, (size_t)p->n_prompt * sizeof *j->prompt);
    return j;
}

bool srv_submit_forks(srv_sched *s, const srv_job_params *p, int n, srv_job **jobs, bool *busy, okv_error *err) {
    *busy = false;
    sched_fail(err, OKV_OK, "");
    for (int i = 0; i < n; i++) jobs[i] = NULL;
    for (int i = 0; i < n; i++) {
        if (!(jobs[i] = job_make(s, p, p->sampling.seed + (uint64_t)i, err))) {
            if (err && err->status == OKV_OK) sched_fail(err, OKV_ERR_NOMEM, "out of memory for the request");
            for (int k = 0; k < i; k++) job_free(jobs[k]);
            for (int k = 0; k < n; k++) jobs[k] = NULL;
            return false;
        }
        if (i > 0) {
            jobs[i]->leader = jobs[0];
            jobs[0]->refs++;
        }
    }
    pthread_mutex_lock(&s->mu);
    /* Requests wait only when no sequence is free now and the queue has room. */
    const int32_t free_slots = s->cfg.n_parallel - s->n_active;
    if (s->stopping || s->n_queued + n > free_slots + s->cfg.n_queue) {
        pthread_mutex_unlock(&s->mu);
        for (int k = n - 1; k >= 0; k--) job_free(jobs[k]);
        for (int k = 0; k < n; k++) jobs[k] = NULL;
        *busy = true;
        return false;
    }
    for (int i = 0; i < n; i++) {
        srv_job *j = jobs[i];
        if (s->q_tail) s->q_tail->next = j;
        else s->q_head = j;
        s->q_tail = j;
        s->n_queued++;
        s->stats.prompt_tokens += (uint64_t)p->n_prompt;
    }
    pthread_cond_signal(&s->work);
    pthread_mutex_unlock(&s->mu);
    return true;
}

srv_job *srv_submit(srv_sched *s, const srv_job_params *p, bool *busy, okv_error *err) {
    srv_job *j = NULL;
    return srv_submit_forks(s, p, 1, &j, busy, err) ? j : NULL;
}

size_t srv_job_logprobs(srv_sched *s, srv_job *j, size_t text_at, size_t *consumed, srv_logprob **out) {
    *out = NULL;
    pthread_mutex_lock(&s->mu);
    /* The records of the pieces that end at or before text_at; all of them
     * once the job ended and its text is read. */
    size_t upto = 0;
    if (j->finish != SRV_RUNNING && text_at >= j->n_text) upto = j->n_lps;
    else {
        size_t lo = 0, hi = j->n_ends;
        while (lo < hi) {
            const size_t mid = lo + (hi - lo) / 2;
            if (j->ends[mid].text <= text_at) lo = mid + 1;
            else hi = mid;
        }
        upto = lo ? j->ends[lo - 1].lps : 0;
    }
    size_t n = upto > *consumed ? upto - *consumed : 0;
    if (n && (*out = malloc(n * sizeof **out))) {
        memcpy(*out, j->lps + *consumed, n * sizeof **out);
        *consumed += n;
    } else {
        n = 0;
    }
    pthread_mutex_unlock(&s->mu);
    return n;
}

void srv_job_cancel(srv_sched *s, srv_job *j) {
    pthread_mutex_lock(&s->mu);
    j->cancelled = true;
    pthread_cond_signal(&s->work);
    pthread_mutex_unlock(&s->mu);
}

void srv_job_release(srv_sched *s, srv_job *j) {
    if (!j) return;
    pthread_mutex_lock(&s->mu);
    if (j->finish == SRV_RUNNING) {
        j->cancelled = true;
        pthread_cond_signal(&s->work);
    }
    job_unref(j);
    pthread_mutex_unlock(&s->mu);
}

srv_finish srv_job_poll(srv_sched *s, srv_job *j, size_t *consumed, char **text, size_t *n_text, int timeout_ms) {
    *text = NULL;
    *n_text = 0;
    pthread_mutex_lock(&s->mu);
    if (j->n_text == *consumed && j->finish == SRV_RUNNING && timeout_ms > 0) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
        ts.tv_sec += timeout_ms / 1000 + ts.tv_nsec / 1000000000L;
        ts.tv_nsec %= 1000000000L;
        pthread_cond_timedwait(&j->cv, &s->mu, &ts);
    }
    if (j->n_text > *consumed) {
        /* One piece at a time, so that a stream sends a chunk per token
         * even when its reader fell behind. */
        size_t lo = 0, hi = j->n_ends;
        while (lo < hi) {
            const size_t mid = lo + (hi - lo) / 2;
            if (j->ends[mid].text <= *consumed) lo = mid + 1;
            else hi = mid;
        }
        const size_t upto = lo < j->n_ends ? j->ends[lo].text : j->n_text;
        const size_t n = upto - *consumed;
        if ((*text = malloc(n + 1))) {
            memcpy(*text, j->text + *consumed, n);
            (*text)[n] = '\0';
            *n_text = n;
            *consumed = upto;
        }
    }
    /* The end is reported only with the last text: a finish seen while
     * text is still unread would cut the answer. */
    const srv_finish f = *consumed == j->n_text ? j->finish : SRV_RUNNING;
    pthread_mutex_unlock(&s->mu);
    return f;
}

bool srv_job_wait_admitted(srv_sched *s, srv_job *j, int timeout_ms) {
    pthread_mutex_lock(&s->mu);
    if (!j->admitted && j->finish == SRV_RUNNING && timeout_ms > 0) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
        ts.tv_sec += timeout_ms / 1000 + ts.tv_nsec / 1000000000L;
        ts.tv_nsec %= 1000000000L;
        pthread_cond_timedwait(&j->cv, &s->mu, &ts);
    }
    const bool left = j->admitted || j->finish != SRV_RUNNING;
    pthread_mutex_unlock(&s->mu);
    return left;
}

bool srv_job_progress_get(srv_sched *s, srv_job *j, uint32_t *seen, srv_job_progress *p) {
    pthread_mutex_lock(&s->mu);
    const bool moved = j->progress != *seen;
    if (moved) {
        *seen = j->progress;
        *p = (srv_job_progress){.total = j->n_prompt, .cache = j->cached, .processed = j->n_read,
                                .time_ms = (j->t_read - j->t_admit) * 1000.0};
    }
    pthread_mutex_unlock(&s->mu);
    return moved;
}

void srv_job_usage_get(srv_sched *s, srv_job *j, srv_job_usage *u) {
    pthread_mutex_lock(&s->mu);
    u->prompt_tokens = j->n_prompt;
    u->completion_tokens = j->n_gen;
    u->cached_tokens = j->cached;
    u->reasoning_tokens = j->n_think;
    u->t_first = j->t_first;
    u->t_done = j->t_done;
    /* Time in the queue: until admitted, or until now (or the end) for a job still (or last) queued. */
    u->t_queued = j->admitted ? j->t_admit : j->finish != SRV_RUNNING ? j->t_done : srv_now() - j->t_submit;
    u->admitted = j->admitted;
    u->stop_index = j->stop_hit - 1;
    snprintf(u->error, sizeof u->error, "%s", j->error);
    pthread_mutex_unlock(&s->mu);
}

void srv_sched_stats_get(srv_sched *s, srv_sched_stats *st) {
    pthread_mutex_lock(&s->mu);
    *st = s->stats;
    st->active = s->n_active;
    st->queued = s->n_queued;
    /* The K/V positions the running requests hold, of all the sequences'
     * caches could hold: a finished request's history, kept for the next
     * prompt that shares it, is given up when a request needs its sequence,
     * so it counts as free (as vLLM counts its evictable prefix blocks). */
    st->kv_used = 0;
    for (int32_t i = 0; i < s->cfg.n_parallel; i++)
        if (s->slots[i].job) st->kv_used += s->slots[i].n_hist_seen;
    st->kv_total = (int64_t)s->cfg.n_parallel * s->capacity;
    /* The prompt work ahead: what a router weighs a server's queue by
     * (requests alone say nothing of a 30000-token prompt among them).  A
     * queued prompt's part a cache already holds is known at admission only. */
    st->prompt_pending = 0;
    for (const srv_job *j = s->q_head; j; j = j->next)
        if (!j->leader) st->prompt_pending += j->n_prompt;
    for (int32_t i = 0; i < s->cfg.n_parallel; i++) {
        const srv_job *j = s->slots[i].job;
        if (j && j->n_read < j->n_prompt) st->prompt_pending += j->n_prompt - j->n_read;
    }
    pthread_mutex_unlock(&s->mu);
}

/* ---- the worker ---- */

/* Puts a waiting job into the free sequence whose tokens share the longest
 * prefix with its prompt (ties: the one used longest ago), rewinds that
 * cache to keep the shared part and leaves the rest of the prompt to
 * prefill.  The mutex is held; the caches are the worker's. */
static bool waits_for_leader(const srv_job *j) {
    return j->leader && j->leader->finish == SRV_RUNNING && !j->leader->prefilled;
}

static void admit(srv_sched *s) {
    while (s->n_active < s->cfg.n_parallel) {
        /* The first job that may start: forks wait for their leader's
         * prompt, then copy its cache (fork_followers). */
        srv_job *j = s->q_head, *prev = NULL;
        while (j && waits_for_leader(j)) {
            prev = j;
            j = j->next;
        }
        if (!j) break;
        int best = -1;
        int32_t best_lcp = -1;
        for (int32_t i = 0; i < s->cfg.n_parallel; i++) {
            slot *sl = &s->slots[i];
            if (sl->job) continue;
            int32_t lcp = 0;
            while (lcp < sl->n_hist && lcp < j->n_prompt && sl->hist[lcp] == j->prompt[lcp]) lcp++;
            if (lcp > best_lcp || (lcp == best_lcp && sl->last_used < s->slots[best].last_used)) {
                best = i;
                best_lcp = lcp;
            }
        }
        slot *sl = &s->slots[best];
        if (prev) prev->next = j->next;
        else s->q_head = j->next;
        if (s->q_tail == j) s->q_tail = prev;
        j->next = NULL;
        s->n_queued--;
        s->n_active++;
        /* At least the last prompt token is evaluated again: its logits are
         * where the answer starts. */
        int32_t keep = best_lcp < j->n_prompt - 1 ? best_lcp : j->n_prompt - 1;
        okv_error err = {0};
        if (keep < sl->n_hist) {
            /* A ring layer may no longer hold what position keep needs: then
             * the whole prompt is evaluated again. */
            if (!(keep > 0 && okv_cache_can_rewind(sl->cache, keep) &&
                  okv_cache_rewind(sl->cache, keep, &err) == OKV_OK)) {
                keep = 0;
                okv_cache_clear(sl->cache, &err);
            }
            sl->n_hist = keep;
        }
        sl->job = j;
        sl->n_hist_seen = sl->n_hist;
        sl->n_prefilled = keep;
        sl->decoding = false;
        sl->last_used = ++s->use_counter;
        j->cached = j->n_read = keep;
        j->admitted = true;
        j->t_admit = j->t_read = srv_now() - j->t_submit;
        j->progress++;
        pthread_cond_broadcast(&j->cv);
        s->stats.cached_tokens += (uint64_t)keep;
    }
}

/* Frees a slot whose job has ended; the mutex is held. */
static void detach(srv_sched *s, slot *sl) {
    job_unref(sl->job);
    sl->job = NULL;
    s->n_active--;
}

/* Adds len bytes of text to the job's held text, then moves to out what can
 * no longer become part of a stop string; when a stop string was found
 * (the text from it on is dropped), which: the first to begin, 1-based
 * (0: none). */
static int add_text(srv_job *j, const char *t, size_t len, char **out, size_t *n_out, size_t *cap_out, bool *oom) {
    if (!grow(&j->held, &j->cap_held, j->n_held + len + 1)) {
        *oom = true;
        return 0;
    }
    memcpy(j->held + j->n_held, t, len);
    j->n_held += len;
    size_t cut = j->n_held, keep_from = j->n_held;
    int stopped = 0;
    for (int k = 0; k < j->n_stops; k++) {
        const size_t sl = strlen(j->stops[k]);
        for (size_t i = 0; i + sl <= j->n_held; i++)
            if (memcmp(j->held + i, j->stops[k], sl) == 0) {
                if (i < cut) {
                    cut = i;
                    stopped = k + 1;
                }
                break;
            }
        if (stopped) continue;
        /* The longest tail of the held text that begins this stop string. */
        for (size_t n = sl - 1 < j->n_held ? sl - 1 : j->n_held; n > 0; n--)
            if (memcmp(j->held + j->n_held - n, j->stops[k], n) == 0) {
                if (j->n_held - n < keep_from) keep_from = j->n_held - n;
                break;
            }
    }
    const size_t release = stopped ? cut : keep_from;
    if (!grow(out, cap_out, *n_out + release + 1)) {
        *oom = true;
        return 0;
    }
    memcpy(*out + *n_out, j->held, release);
    *n_out += release;
    if (stopped) j->n_held = 0;
    else {
        memmove(j->held, j->held + release, j->n_held - release);
        j->n_held -= release;
    }
    return stopped;
}

/* One step's work for one sequence. */
typedef struct item {
    slot *sl;
    const int32_t *tokens;
    int32_t *positions;
    int32_t n;
    bool want_logits;
    bool prefill;                   /* reads part of the prompt */
    bool prefill_done;              /* this step finished the prompt */
    okv_status st;
    char error[256];
} item;

static void eval_one(srv_sched *s, item *it) {
    okv_error err = {0};
    const okv_batch_seq q = {.cache = it->sl->cache, .tokens = it->tokens, .positions = it->positions,
                             .n_tokens = it->n, .logits = it->want_logits ? it->sl->logits : NULL};
    it->st = okv_batch_eval(s->batch, &q, 1, &err);
    if (it->st != OKV_OK) snprintf(it->error, sizeof it->error, "%s", err.message);
}

/* Evaluates every item in one forward pass: each weight matrix is read
 * once for all the sequences.  A sequence's logits do not depend on what
 * else is in the pass (batch.h), so a failure is retried one sequence at a
 * time, and only the sequence that fails alone fails. */
static void eval_items(srv_sched *s, item *it, int n) {
    for (int i = 0; i < n; i++)
        s->seqs[i] = (okv_batch_seq){.cache = it[i].sl->cache, .tokens = it[i].tokens, .positions = it[i].positions,
                                     .n_tokens = it[i].n, .logits = it[i].want_logits ? it[i].sl->logits : NULL};
    okv_error err = {0};
    if (okv_batch_eval(s->batch, s->seqs, n, &err) == OKV_OK) {
        for (int i = 0; i < n; i++) it[i].st = OKV_OK;
        return;
    }
    for (int i = 0; i < n; i++) {
        /* After a failed pass a cache holds at most its step's start. */
        if (okv_cache_length(it[i].sl->cache) == it[i].positions[0]) {
            eval_one(s, &it[i]);
        } else {
            it[i].st = OKV_ERR_INVALID;
            snprintf(it[i].error, sizeof it[i].error, "%s", err.message);
        }
    }
}

static void cache_bytes(srv_sched *s, size_t *flat, size_t *ring) {
    *flat = *ring = 0;
    for (int32_t i = 0; i < s->cfg.n_parallel; i++) {
        const okv_cache *c = s->slots[i].cache;
        for (int32_t l = 0; l < okv_cache_n_layers(c); l++) {
            okv_layer_geometry g;
            okv_cache_layer_geometry(c, l, &g);
            if (g.kv_from > 0) continue; /* reads another layer's K/V: holds none of its own */
            if (g.window > 0) *ring += okv_cache_layer_bytes(c, l);
            else *flat += okv_cache_layer_bytes(c, l);
        }
    }
}

typedef struct outcome {
    char *text;
    size_t n, cap;
    srv_finish finish;
    int stop_hit;                   /* add_text's stop string (0: none) */
    bool made_token;                /* sampled a token that is not end-of-generation */
    bool thought;                   /* ... generated inside reasoning */
    bool has_lp;
    srv_logprob lp;
    char error[256];
} outcome;

/* After an eval: sample the next token of a sequence whose prompt is all
 * in, turn it into text, and decide whether the job ends. */
static void after_eval(srv_sched *s, slot *sl, srv_job *j, outcome *o) {
    bool oom = false, stop_string = false;
    okv_error aerr = {0};
    /* The reasoning budget spent while the answer still reasons: the
     * markup that ends reasoning comes next, a token a step, in place of
     * samples (the sampler takes each, as its penalties and a grammar
     * must; a grammar that refuses one keeps the answer to itself). */
    if (j->at_force == j->n_force && j->rs.inside && j->think_budget >= 0 && j->n_think >= j->think_budget)
        j->at_force = 0;
    int32_t id = -1;
    bool forced = false;
    if (j->at_force < j->n_force) {
        id = j->force[j->at_force++];
        forced = okv_sampler_accept(j->sampler, id, NULL) == OKV_OK;
        if (!forced) id = -1, j->at_force = j->n_force;
    }
    if (!forced && (id = okv_sampler_sample(j->sampler, sl->logits)) < 0) {
        o->finish = SRV_FINISH_ERROR;
        snprintf(o->error, sizeof o->error, "%s",
                 id == OKV_SAMPLE_NAN ? "the model's logits hold NaN (broken weights or overflowed arithmetic)"
                                      : "the grammar allows no token of the vocabulary here");
        return;
    }
    if (!forced && okv_sampler_accept(j->sampler, id, &aerr) != OKV_OK) {
        o->finish = SRV_FINISH_ERROR;
        snprintf(o->error, sizeof o->error, "sampler: %.200s", aerr.message);
        return;
    }
    if (j->top_logprobs >= 0 && (j->ignore_eos || !is_eog(s, id))) {
        /* Before sampling: the model's own distribution (OpenAI's logprobs). */
        o->has_lp = true;
        o->lp.id = id;
        o->lp.n_top = okv_logprobs(sl->logits, s->n_vocab, id, j->top_logprobs, &o->lp.logprob, o->lp.top_ids,
                                   o->lp.top_logprobs);
    }
    if (!j->ignore_eos && is_eog(s, id)) {
        o->finish = SRV_FINISH_STOP;
    } else {
        o->made_token = true;
        char small[256], *piece = small;
        size_t n = 0;
        okv_error err = {0};
        okv_status st = okv_tokenizer_token_to_piece(s->tok, id, j->special, piece, sizeof small, &n, &err);
        if (st != OKV_OK && n > sizeof small && (piece = malloc(n)))
            st = okv_tokenizer_token_to_piece(s->tok, id, j->special, piece, n, &n, &err);
        char *utf = st == OKV_OK && piece ? malloc(OKV_DETOK_ROOM(n)) : NULL;
        if (utf) {
            size_t k = okv_detok_stream_feed(&j->us, piece, n, utf);
            /* a <0x00> byte token: a NUL would end the answer's JSON string
             * there (all that followed was lost), so it shows as U+FFFD */
            char *text = utf;
            if (memchr(utf, 0, k) && (text = malloc(3 * k + 8))) {
                srv_utf8_clean(utf, k, text, 3 * k + 8);
                k = strlen(text);
            }
            o->thought = j->rs.inside; /* a token that starts inside reasoning is part of it */
            if (text) srv_reasoning_feed(&j->rs, text, k);
            if (text && memchr(text, '\n', k)) j->line_break = true;
            if (!text) oom = true;
            else if ((o->stop_hit = add_text(j, text, k, &o->text, &o->n, &o->cap, &oom)))
                o->finish = SRV_FINISH_STOP, stop_string = true;
            if (text != utf) free(text);
        } else {
            oom = true;
        }
        free(utf);
        if (piece && piece != small) free(piece);
        if (o->finish == SRV_RUNNING) {
            sl->next_token = id;
            /* The next token needs a free position to be evaluated at. */
            const bool full = sl->n_hist >= s->capacity;
            /* An editor's bound on the wait (llama.cpp's t_max_predict_ms):
             * once a line is complete, the time since the first token. */
            const bool late = j->max_predict_s > 0 && j->line_break && j->n_gen > 0 &&
                              srv_now() - j->t_submit - j->t_first > j->max_predict_s;
            if ((j->max_tokens > 0 && j->n_gen + 1 >= j->max_tokens) || full || late) o->finish = SRV_FINISH_LENGTH;
        }
    }
    if (!oom && o->finish != SRV_RUNNING) {
        /* The end: bytes of an unfinished character come out as U+FFFD, and
         * what was held back can no longer start a stop string (after a
         * stop string was found nothing is held). */
        char tail[8];
        const size_t k = okv_detok_stream_finish(&j->us, tail);
        /* after a stop string, the bytes held are past it: dropped with it */
        if (k && !stop_string && (o->stop_hit = add_text(j, tail, k, &o->text, &o->n, &o->cap, &oom)))
            o->finish = SRV_FINISH_STOP;
        if (!oom && j->n_held) {
            if (grow(&o->text, &o->cap, o->n + j->n_held + 1)) {
                memcpy(o->text + o->n, j->held, j->n_held);
                o->n += j->n_held;
                j->n_held = 0;
            } else {
                oom = true;
            }
        }
    }
    if (oom) {
        o->finish = SRV_FINISH_ERROR;
        snprintf(o->error, sizeof o->error, "out of memory for the generated text");
    }
}

/* Hands a step's outcome to its job (text, token count, the end); the
 * mutex is held. */
static void apply_outcome(srv_sched *s, slot *sl, outcome *o) {
    srv_job *j = sl->job;
    /* The logprob first: a piece of text goes out with the records made
     * up to it (a token whose text was held goes with the next piece). */
    if (o->has_lp) {
        char *lps = (char *)j->lps;
        size_t cap = j->cap_lps * sizeof *j->lps;
        if (grow(&lps, &cap, (j->n_lps + 1) * sizeof *j->lps)) {
            j->lps = (srv_logprob *)lps;
            j->cap_lps = cap / sizeof *j->lps;
            j->lps[j->n_lps++] = o->lp;
        } else {
            o->finish = SRV_FINISH_ERROR;
            snprintf(o->error, sizeof o->error, "out of memory for the logprobs");
        }
    }
    if (o->n) {
        char *ends = (char *)j->ends;
        if (grow(&j->text, &j->cap_text, j->n_text + o->n + 1) &&
            grow(&ends, &j->cap_ends, (j->n_ends + 1) * sizeof *j->ends)) {
            j->ends = (piece_end *)ends;
            memcpy(j->text + j->n_text, o->text, o->n);
            j->n_text += o->n;
            j->ends[j->n_ends++] = (piece_end){j->n_text, j->n_lps};
        } else {
            j->ends = (piece_end *)ends;
            o->finish = SRV_FINISH_ERROR;
            snprintf(o->error, sizeof o->error, "out of memory for the generated text");
        }
    }
    if (o->made_token) {
        if (j->n_gen == 0) j->t_first = srv_now() - j->t_submit;
        j->n_gen++;
        j->n_think += o->thought;
        s->stats.generated_tokens++;
    }
    if (o->finish == SRV_FINISH_ERROR) snprintf(j->error, sizeof j->error, "%s", o->error);
    if (o->finish == SRV_FINISH_STOP) j->stop_hit = o->stop_hit;
    if (o->finish != SRV_RUNNING) {
        job_end(s, j, o->finish);
        detach(s, sl);
    } else {
        pthread_cond_broadcast(&j->cv);
    }
}

/* The leader's prompt is in its cache (and its first token sampled, not
 * yet evaluated): each queued fork of it that finds a free sequence starts
 * there as a copy of that cache and samples its own first token from the
 * same logits.  A fork without a free sequence is admitted later as any
 * job.  The mutex is held. */
static void fork_followers(srv_sched *s, slot *src, const srv_job *lead) {
    for (srv_job *q = s->q_head, *prev = NULL; q;) {
        srv_job *next = q->next;
        if (q->leader != lead || q->cancelled) {
            prev = q;
            q = next;
            continue;
        }
        slot *dst = NULL;
        for (int32_t i = 0; i < s->cfg.n_parallel && !dst; i++)
            if (!s->slots[i].job && &s->slots[i] != src) dst = &s->slots[i];
        if (!dst) break;
        okv_error err = {0};
        okv_cache *c = okv_cache_fork(src->cache, &err);
        if (!c) break;
        okv_cache_release(dst->cache);
        dst->cache = c;
        memcpy(dst->hist, src->hist, (size_t)src->n_hist * sizeof *dst->hist);
        dst->n_hist = src->n_hist;
        memcpy(dst->logits, src->logits, (size_t)s->n_vocab * sizeof *dst->logits);
        if (prev) prev->next = next;
        else s->q_head = next;
        if (s->q_tail == q) s->q_tail = prev;
        q->next = NULL;
        s->n_queued--;
        s->n_active++;
        dst->job = q;
        dst->n_hist_seen = dst->n_hist;
        dst->n_prefilled = q->n_prompt;
        dst->decoding = true;
        dst->last_used = ++s->use_counter;
        q->cached = q->n_read = q->n_prompt;
        q->prefilled = true;
        q->admitted = true;
        q->t_admit = q->t_read = srv_now() - q->t_submit;
        q->progress++;
        pthread_cond_broadcast(&q->cv);
        s->stats.cached_tokens += (uint64_t)q->n_prompt;
        outcome o = {.finish = SRV_RUNNING};
        after_eval(s, dst, q, &o);
        apply_outcome(s, dst, &o);
        free(o.text);
        q = next;
    }
}

static void *worker_main(void *arg) {
    srv_sched *s = arg;
    const int32_t np = s->cfg.n_parallel;
    item *items = calloc((size_t)np, sizeof *items);
    outcome *outs = calloc((size_t)np, sizeof *outs);
    int32_t *pos = malloc((size_t)np * (size_t)s->cfg.chunk * sizeof *pos);
    pthread_mutex_lock(&s->mu);
    if (!items || !outs || !pos) {
        /* Without its scratch the worker cannot run: every request fails. */
        s->stopping = true;
        fprintf(stderr, "offkv serve: error: out of memory for the decode loop\n");
    }
    for (;;) {
        /* Ended jobs (a client gone, a shutdown) give their sequence back. */
        for (int32_t i = 0; i < np; i++) {
            slot *sl = &s->slots[i];
            if (sl->job && (sl->job->cancelled || sl->job->finish != SRV_RUNNING)) {
                job_end(s, sl->job, SRV_FINISH_STOP);
                detach(s, sl);
            }
        }
        if (s->quit) break;
        if (s->stopping) {
            pthread_cond_wait(&s->work, &s->mu);
            continue;
        }
        /* Cancelled jobs still queued leave the queue. */
        for (srv_job **pp = &s->q_head, *prev = NULL; *pp;) {
            srv_job *j = *pp;
            if (j->cancelled) {
                *pp = j->next;
                if (s->q_tail == j) s->q_tail = prev;
                s->n_queued--;
                job_end(s, j, SRV_FINISH_STOP);
                job_unref(j);
            } else {
                prev = j;
                pp = &j->next;
            }
        }
        admit(s);
        if (s->n_active == 0) {
            pthread_cond_wait(&s->work, &s->mu);
            continue;
        }
        /* Plan the step: every decoding sequence one token; prefilling ones
         * share a budget of cfg.chunk prompt tokens, in slot order. */
        int n = 0;
        int32_t budget = s->cfg.chunk;
        for (int32_t i = 0; i < np; i++) {
            slot *sl = &s->slots[i];
            srv_job *j = sl->job;
            if (!j) continue;
            item *it = &items[n];
            memset(it, 0, sizeof *it);
            it->sl = sl;
            it->positions = pos + (size_t)i * (size_t)s->cfg.chunk;
            if (sl->decoding) {
                it->tokens = &sl->next_token;
                it->n = 1;
                it->want_logits = true;
            } else {
                const int32_t left = j->n_prompt - sl->n_prefilled;
                const int32_t take = left < budget ? left : budget;
                if (take <= 0) continue;
                budget -= take;
                it->tokens = j->prompt + sl->n_prefilled;
                it->n = take;
                it->prefill = true;
                it->want_logits = take == left;
            }
            for (int32_t k = 0; k < it->n; k++) it->positions[k] = sl->n_hist + k;
            n++;
        }
        pthread_mutex_unlock(&s->mu);

        const double t0 = srv_now();
        eval_items(s, items, n);
        const double dt = srv_now() - t0;

        for (int i = 0; i < n; i++) {
            item *it = &items[i];
            slot *sl = it->sl;
            srv_job *j = sl->job;
            outcome *o = &outs[i];
            o->n = 0;
            o->finish = SRV_RUNNING;
            o->made_token = false;
            o->has_lp = false;
            o->stop_hit = 0; /* outs[] is reused step after step, by whichever jobs the step holds */
            if (it->st != OKV_OK) {
                /* The cache is at most at the step's start: start the
                 * sequence afresh so that its history stays true. */
                okv_error err = {0};
                okv_cache_clear(sl->cache, &err);
                sl->n_hist = 0;
                o->finish = SRV_FINISH_ERROR;
                snprintf(o->error, sizeof o->error, "eval failed: %.200s", it->error);
                fprintf(stderr, "offkv serve: error: %s\n", o->error);
                continue;
            }
            memcpy(sl->hist + sl->n_hist, it->tokens, (size_t)it->n * sizeof *sl->hist);
            sl->n_hist += it->n;
            if (!sl->decoding) {
                sl->n_prefilled += it->n;
                if (sl->n_prefilled < j->n_prompt) continue;
                sl->decoding = true;
                it->prefill_done = true;
            }
            after_eval(s, sl, j, o);
        }

        pthread_mutex_lock(&s->mu);
        s->stats.steps++;
        s->stats.decode_seconds += dt;
        for (int i = 0; i < n; i++) {
            slot *sl = items[i].sl;
            srv_job *j = sl->job;
            if (j->finish != SRV_RUNNING) continue; /* ended meanwhile (shutdown): freed at the loop's top */
            if (items[i].prefill_done) j->prefilled = true;
            if (items[i].prefill && items[i].st == OKV_OK) {
                j->n_read = sl->n_prefilled;
                j->t_read = srv_now() - j->t_submit;
                j->progress++;
                pthread_cond_broadcast(&j->cv);
            }
            apply_outcome(s, sl, &outs[i]);
            /* (The slot keeps its cache even when j ended at once.) */
            if (items[i].prefill_done) fork_followers(s, sl, j);
        }
        cache_bytes(s, &s->stats.cache_flat_bytes, &s->stats.cache_ring_bytes);
        for (int i = 0; i < n; i++) items[i].sl->n_hist_seen = items[i].sl->n_hist;
    }
    pthread_mutex_unlock(&s->mu);
    for (int i = 0; i < np; i++) free(outs[i].text);
    free(items);
    free(outs);
    free(pos);
    return NULL;
}
