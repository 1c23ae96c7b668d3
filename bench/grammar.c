/* bench/grammar: what a JSON-schema constraint costs per decoded token on a
 * large vocabulary (Qwen 3's 151 k tokens by default).  It walks a valid
 * document token by token (as a model writing it would) and times, per
 * token:
 *   check  okv_grammar_matcher_allows for the sampled token: the whole cost
 *          when the draw is allowed (the usual case for a trained model);
 *   mask   okv_grammar_matcher_mask over the vocabulary, as after a refused
 *          draw, with the matcher's cache of recent states (warm);
 *   cold   the same walk without the cache (a fresh clone each time): the
 *          worst case;
 *   accept okv_grammar_matcher_accept_token.
 * Compare with the budget: 10 % of one decode step (a 1.1B Q4_0 model at
 * ~30 ms/token on 2 cores is 3 ms).
 *
 * With -m MODEL (e.g. a synthetic TinyLlama-1.1B-shaped Q4_0 model with
 * Qwen 3's vocabulary: offkv synth ... --vocab ggml-vocab-qwen3.gguf) it
 * then generates -n tokens (default 128) plainly and under a schema in
 * lockstep, -r times (default 5), and prints the median tokens/s of each
 * and their ratio: the cost of constrained decoding end to end.  Twice:
 * under the schema above, whose strings random weights fill for ever (most
 * draws allowed), and under one of short strings (see SCHEMA_SHORT), where
 * they must walk the structure (most draws refused, the mask computed).
 *
 *   build/bench/grammar [VOCAB.gguf] [-m MODEL.gguf] [-t threads] [-n tokens] [-r runs] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "offkv/offkv.h"
#include "offkv/grammar.h"
#include "offkv/sampler.h"

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static const char SCHEMA[] =
    "{\"type\":\"object\",\"properties\":{"
    "\"name\":{\"type\":\"string\"},"
    "\"age\":{\"type\":\"integer\",\"minimum\":0,\"maximum\":150},"
    "\"email\":{\"type\":\"string\",\"pattern\":\"^[a-z.]+@[a-z]+\\\\.[a-z]{2,3}$\"},"
    "\"born\":{\"type\":\"string\",\"format\":\"date\"},"
    "\"tags\":{\"type\":\"array\",\"items\":{\"type\":\"string\"},\"maxItems\":5},"
    "\"address\":{\"type\":\"object\",\"properties\":{\"street\":{\"type\":\"string\"},\"city\":{\"type\":\"string\"},"
    "\"zip\":{\"type\":\"string\",\"pattern\":\"^[0-9]{5}$\"}},\"required\":[\"street\",\"city\"]},"
    "\"score\":{\"type\":\"number\"},\"active\":{\"type\":\"boolean\"},"
    "\"role\":{\"enum\":[\"admin\",\"editor\",\"viewer\"]}},"
    "\"required\":[\"name\",\"age\",\"email\"]}";

/* The same object with short strings (maxLength 12) and at most two tags:
 * random weights then have to leave each string soon and walk through the
 * structure, enum and numbers, where most draws are refused and masked,
 * and documents complete (the matcher restarts). */
static const char SCHEMA_SHORT[] =
    "{\"type\":\"object\",\"properties\":{"
    "\"name\":{\"type\":\"string\",\"maxLength\":12},"
    "\"age\":{\"type\":\"integer\",\"minimum\":0,\"maximum\":150},"
    "\"born\":{\"type\":\"string\",\"format\":\"date\"},"
    "\"tags\":{\"type\":\"array\",\"items\":{\"type\":\"string\",\"maxLength\":12},\"maxItems\":2},"
    "\"address\":{\"type\":\"object\",\"properties\":{\"street\":{\"type\":\"string\",\"maxLength\":12},"
    "\"city\":{\"type\":\"string\",\"maxLength\":12}},\"required\":[\"street\",\"city\"]},"
    "\"score\":{\"type\":\"number\"},\"active\":{\"type\":\"boolean\"},"
    "\"role\":{\"enum\":[\"admin\",\"editor\",\"viewer\"]}},"
    "\"required\":[\"name\",\"age\",\"role\"]}";

static const char DOC[] =
    "{\"name\": \"Ada Lovelace, Countess of Lovelace, who wrote the first published program\", \"age\": 36, "
    "\"email\": \"ada.lovelace@analytical.org\", \"born\": \"1815-12-10\", "
    "\"tags\": [\"mathematics\", \"poetical science\", \"Bernoulli numbers\"], "
    "\"address\": {\"street\": \"12 St James's Square\", \"city\": \"London\", \"zip\": \"12345\"}, "
    "\"score\": 99.5, \"active\": false, \"role\": \"editor\"}";

/* One sequence being generated: its context, sampler and (constrained)
 * grammar matcher, and the time its steps took. */
typedef struct gen {
    okv_context *ctx;
    okv_sampler *s;
    okv_grammar_matcher *m; /* NULL: plain */
    int32_t tk;
    double wall, cpu, sampling; /* sampling: okv_sampler_sample + accept (+ the matcher's restart) */
    int restarts;
    size_t used;
    char text[4096];
} gen;

static double cpu_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static bool gen_start(gen *g, okv_model *model, const okv_tokenizer *tok, const okv_grammar_vocab *v,
                      okv_grammar_matcher *m, int threads, int n) {
    okv_error err;
    char tbuf[16], cbuf[16];
    snprintf(tbuf, sizeof tbuf, "%d", threads);
    snprintf(cbuf, sizeof cbuf, "%d", n + 8);
    const char *opts[] = {"n_threads", tbuf, "capacity", cbuf, NULL};
    okv_sampler_params sp = {.temperature = 0.8f, .top_k = 40, .top_p = 0.95f, .seed = 1};
    memset(g, 0, sizeof *g);
    g->m = m;
    g->ctx = okv_context_create(model, opts, NULL, &err);
    g->s = g->ctx ? okv_sampler_create(&sp, okv_tokenizer_n_vocab(tok), &err) : NULL;
    if (!g->s || (m && okv_sampler_set_grammar(g->s, m, v, &err) != OKV_OK)) {
        fprintf(stderr, "generate: %s\n", err.message);
        return false;
    }
    if (m) okv_grammar_matcher_reset(m);
    g->tk = okv_tokenizer_bos(tok) >= 0 ? okv_tokenizer_bos(tok) : 0;
    return true;
}

static void gen_end(gen *g) {
    okv_sampler_free(g->s);
    okv_context_free(g->ctx);
}

/* One token: eval, sample, accept; timed.  Random weights rarely finish a
 * document, but when one completes (an end token, or nothing left to
 * write) the matcher restarts, so every step stays constrained. */
static bool gen_step(gen *g, const okv_tokenizer *tok, const okv_grammar_vocab *v, float *logits, int32_t pos) {
    okv_error err;
    const double w0 = now(), c0 = cpu_now();
    if (okv_context_eval_last(g->ctx, &g->tk, &pos, 1, logits, &err) != OKV_OK) {
        fprintf(stderr, "eval: %s\n", err.message);
        return false;
    }
    const double s0 = now();
    const int32_t id = okv_sampler_sample(g->s, logits);
    if (g->m) {
        if (id < 0 || okv_sampler_accept(g->s, id, &err) != OKV_OK) {
            fprintf(stderr, "step %d: the grammar allowed nothing, or refused its own draw (%d): %s\n", (int)pos,
                    (int)id, err.message);
            return false;
        }
        if (okv_grammar_vocab_is_end(v, id) || okv_grammar_matcher_must_end(g->m)) {
            okv_grammar_matcher_reset(g->m);
            g->restarts++;
        }
    }
    g->sampling += now() - s0;
    g->wall += now() - w0;
    g->cpu += cpu_now() - c0;
    size_t got = 0;
    if (g->used + 1 < sizeof g->text &&
        okv_tokenizer_token_to_piece(tok, id, 0, g->text + g->used, sizeof g->text - g->used - 1, &got, &err) == OKV_OK)
        g->text[g->used += got] = '\0';
    g->tk = id;
    return true;
}

static int cmp_double(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Plain and constrained generation of n tokens from BOS, in lockstep (one
 * token of each in turn, which goes first alternating), so that the load
 * of a shared machine falls on both alike; reps runs, each on fresh
 * contexts.  Prints the median tokens/s (wall and per CPU-second) of each
 * and their ratios. */
static int generate(const char *label, okv_model *model, const okv_tokenizer *tok, const okv_grammar_vocab *v,
                    okv_grammar_matcher *m, int threads, int n, int reps) {
    const int32_t n_vocab = okv_tokenizer_n_vocab(tok);
    /* per run: wall plain, wall constrained, cpu plain, cpu constrained, their ratio, the sampling's share */
    double *r = malloc((size_t)reps * 6 * sizeof *r);
    float *logits = malloc((size_t)n_vocab * sizeof *logits);
    int rc = 0, restarts = 0;
    gen *pg = malloc(sizeof *pg), *cg = malloc(sizeof *cg);
    if (!r || !logits || !pg || !cg) return 1;
    for (int k = 0; k < reps && rc == 0; k++) {
        if (!gen_start(pg, model, tok, v, NULL, threads, n) || !gen_start(cg, model, tok, v, m, threads, n)) rc = 1;
        for (int32_t pos = 0; pos < n && rc == 0; pos++) {
            gen *first = (pos + k) & 1 ? cg : pg, *second = first == pg ? cg : pg;
            if (!gen_step(first, tok, v, logits, pos) || !gen_step(second, tok, v, logits, pos)) rc = 1;
        }
        if (rc == 0) {
            r[k] = n / pg->wall;
            r[reps + k] = n / cg->wall;
            r[2 * reps + k] = n / pg->cpu;
            r[3 * reps + k] = n / cg->cpu;
            r[4 * reps + k] = pg->wall / cg->wall;
            /* The grammar's own time, measured around the sampler alone:
             * far less exposed to the machine's load than whole steps. */
            r[5 * reps + k] = (cg->sampling - pg->sampling) / pg->wall;
            restarts += cg->restarts;
            printf("%s run %d: plain %.2f, constrained %.2f tokens/s (ratio %.3f); sampling %.3f vs %.3f ms/token\n",
                   label, k, r[k], r[reps + k], r[4 * reps + k], pg->sampling * 1e3 / n, cg->sampling * 1e3 / n);
            if (k == reps - 1) printf("%s: last constrained text: %.240s\n", label, cg->text);
        }
        gen_end(pg);
        gen_end(cg);
    }
    if (rc == 0) {
        double med[6];
        for (int q = 0; q < 6; q++) {
            qsort(r + q * reps, (size_t)reps, sizeof *r, cmp_double);
            med[q] = r[q * reps + reps / 2];
        }
        printf("%s: %d tokens x %d runs, %d threads, %d restarts; median tokens/s plain %.2f, constrained %.2f "
               "(ratio %.3f: costs %.1f %%); per CPU-second plain %.2f, constrained %.2f (ratio %.3f: costs %.1f %%)\n",
               label, n, reps, threads, restarts, med[0], med[1], med[1] / med[0], 100.0 * (1.0 - med[1] / med[0]),
               med[2], med[3], med[3] / med[2], 100.0 * (1.0 - med[3] / med[2]));
        printf("%s: median of the runs' ratios %.3f (costs %.1f %%); the constrained sampler's extra time is %.1f %% "
               "of a plain step\n", label, med[4], 100.0 * (1.0 - med[4]), 100.0 * med[5]);
    }
    free(r);
    free(logits);
    free(pg);
    free(cg);
    return rc;
}

int main(int argc, char **argv) {
    const char *vocab_path = "../shared/vocab/ggml-vocab-qwen3.gguf", *model_path = NULL;
    int threads = 2, n_gen = 128, reps = 5;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-m") && i + 1 < argc) model_path = argv[++i];
        else if (!strcmp(argv[i], "-t") && i + 1 < argc) threads = atoi(argv[++i]);
        else if (!strcmp(argv[i], "-n") && i + 1 < argc) n_gen = atoi(argv[++i]);
        else if (!strcmp(argv[i], "-r") && i + 1 < argc) reps = atoi(argv[++i]);
        else vocab_path = argv[i];
    }
    if (n_gen < 1 || reps < 1) {
        fprintf(stderr, "-n and -r take a positive count\n");
        return 2;
    }
    okv_error err;
    okv_model *model = NULL;
    okv_tokenizer *own_tok = NULL;
    const okv_tokenizer *tok;
    if (model_path) {
        model = okv_model_load(model_path, NULL, &err);
        if (!model) {
            fprintf(stderr, "%s: %s\n", model_path, err.message);
            return 1;
        }
        tok = okv_model_tokenizer(model);
    } else {
        okv_gguf *g = okv_gguf_open(vocab_path, &err);
        if (!g || !(own_tok = okv_tokenizer_from_gguf(g, &err))) {
            fprintf(stderr, "%s: %s\n", vocab_path, err.message);
            return 1;
        }
        okv_gguf_close(g);
        tok = own_tok;
    }
    const int32_t n_vocab = okv_tokenizer_n_vocab(tok);
    double t0 = now();
    okv_grammar_vocab *v = okv_grammar_vocab_create(tok, NULL, 0, &err);
    const double t_vocab = now() - t0;
    char *gbnf = okv_json_schema_to_gbnf(SCHEMA, strlen(SCHEMA), &err);
    okv_grammar *gr = gbnf ? okv_grammar_parse(gbnf, strlen(gbnf), NULL, &err) : NULL;
    okv_grammar_matcher *m = gr ? okv_grammar_matcher_create(gr, &err) : NULL;
    if (!v || !m) {
        fprintf(stderr, "setup: %s\n", err.message);
        return 1;
    }
    int rc = 0;
    int32_t ids[1024];
    size_t n = 0;
    if (okv_tokenizer_encode(tok, DOC, strlen(DOC), 0, ids, 1024, &n, &err) != OKV_OK) {
        fprintf(stderr, "encode: %s\n", err.message);
        return 1;
    }
    bool *allowed = malloc((size_t)n_vocab);
    double t_check = 0, t_mask = 0, t_cold = 0, t_accept = 0;
    long allowed_total = 0;
    const int walks = 3;
    for (int r = 0; r < walks; r++) {
        okv_grammar_matcher_reset(m);
        for (size_t i = 0; i < n; i++) {
            double a = now();
            bool ok = okv_grammar_matcher_allows(m, v, ids[i]);
            double b = now();
            allowed_total += okv_grammar_matcher_mask(m, v, allowed);
            double c = now();
            okv_grammar_matcher *fresh = okv_grammar_matcher_clone(m, &err);
            double d = now();
            okv_grammar_matcher_mask(fresh, v, allowed);
            double e = now();
            okv_grammar_matcher_free(fresh);
            if (!ok || !allowed[ids[i]]) {
                fprintf(stderr, "token %zu (%d) refused: the document does not fit the schema\n", i, (int)ids[i]);
                return 1;
            }
            double f = now();
            okv_grammar_matcher_accept_token(m, v, ids[i], &err);
            t_accept += now() - f;
            t_check += b - a;
            t_mask += c - b;
            t_cold += e - d;
        }
    }
    const double per = 1e3 / (double)(n * (size_t)walks);
    printf("vocabulary %d tokens, trie %s built in %.0f ms; schema -> %d rules; document %zu tokens\n", (int)n_vocab,
           model_path ? model_path : vocab_path, t_vocab * 1e3, (int)okv_grammar_n_rules(gr), n);
    printf("per token: check %.4f ms, accept %.4f ms, mask (cached) %.3f ms, mask (cold) %.3f ms; %.0f tokens allowed on average\n",
           t_check * per, t_accept * per, t_mask * per, t_cold * per, (double)allowed_total / (double)(n * (size_t)walks));
    printf("sampled-token path (check + accept): %.4f ms; every draw refused (check + mask + accept): %.3f ms\n",
           (t_check + t_accept) * per, (t_check + t_mask + t_accept) * per);

    if (model) {
        rc = generate("long strings", model, tok, v, m, threads, n_gen, reps);
        char *gbnf2 = rc ? NULL : okv_json_schema_to_gbnf(SCHEMA_SHORT, strlen(SCHEMA_SHORT), &err);
        okv_grammar *gr2 = gbnf2 ? okv_grammar_parse(gbnf2, strlen(gbnf2), NULL, &err) : NULL;
        okv_grammar_matcher *m2 = gr2 ? okv_grammar_matcher_create(gr2, &err) : NULL;
        if (!rc && !m2) {
            fprintf(stderr, "short-strings schema: %s\n", err.message);
            rc = 1;
        }
        if (!rc) rc = generate("short strings", model, tok, v, m2, threads, n_gen, reps);
        okv_grammar_matcher_free(m2);
        okv_grammar_free(gr2);
        free(gbnf2);
    }
    free(allowed);
    okv_grammar_matcher_free(m);
    okv_grammar_free(gr);
    free(gbnf);
    okv_grammar_vocab_free(v);
    okv_tokenizer_free(own_tok);
    okv_model_free(model);
    return rc;
}
