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
 * ~30 ms/token on 2 cores is 3 ms).  With -m MODEL it also times that
 * model's plain decode step and sampling with and without the grammar on
 * its real logits.
 *
 *   build/bench/grammar [VOCAB.gguf] [-m MODEL.gguf] [-t threads]     */
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
    "\"score\":{\"type\":\"number\"},\"active\":{\"type\":\"boolean\"}},"
    "\"required\":[\"name\",\"age\",\"email\"]}";

static const char DOC[] =
    "{\"name\": \"Ada Lovelace, Countess of Lovelace, who wrote the first published program\", \"age\": 36, "
    "\"email\": \"ada.lovelace@analytical.org\", \"born\": \"1815-12-10\", "
    "\"tags\": [\"mathematics\", \"poetical science\", \"Bernoulli numbers\"], "
    "\"address\": {\"street\": \"12 St James's Square\", \"city\": \"London\", \"zip\": \"12345\"}, "
    "\"score\": 99.5, \"active\": false}";

int main(int argc, char **argv) {
    const char *vocab_path = "../shared/vocab/ggml-vocab-qwen3.gguf", *model_path = NULL;
    int threads = 2;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-m") && i + 1 < argc) model_path = argv[++i];
        else if (!strcmp(argv[i], "-t") && i + 1 < argc) threads = atoi(argv[++i]);
        else vocab_path = argv[i];
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
    int32_t ids[1024];
    size_t n = 0;
    if (okv_tokenizer_encode(tok, DOC, strlen(DOC), 0, ids, 1024, &n, &err) != OKV_OK) {
        fprintf(stderr, "encode: %s\n", err.message);
        return 1;
    }
    bool *allowed = malloc((size_t)n_vocab);
    double t_check = 0, t_mask = 0, t_cold = 0, t_accept = 0;
    long allowed_total = 0;
    const int reps = 3;
    for (int r = 0; r < reps; r++) {
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
    const double per = 1e3 / (double)(n * (size_t)reps);
    printf("vocabulary %d tokens, trie %s built in %.0f ms; schema -> %d rules; document %zu tokens\n", (int)n_vocab,
           model_path ? model_path : vocab_path, t_vocab * 1e3, (int)okv_grammar_n_rules(gr), n);
    printf("per token: check %.4f ms, accept %.4f ms, mask (cached) %.3f ms, mask (cold) %.3f ms; %.0f tokens allowed on average\n",
           t_check * per, t_accept * per, t_mask * per, t_cold * per, (double)allowed_total / (double)(n * (size_t)reps));
    printf("sampled-token path (check + accept): %.4f ms; every draw refused (check + mask + accept): %.3f ms\n",
           (t_check + t_accept) * per, (t_check + t_mask + t_accept) * per);

    if (model) {
        /* Real logits: a decode step, then sampling with and without the
         * grammar (top_k 40, T 0.8, as `offkv run`). */
        char tbuf[16];
        snprintf(tbuf, sizeof tbuf, "%d", threads);
        const char *opts[] = {"n_threads", tbuf, NULL};
        okv_context *ctx = okv_context_create(model, opts, NULL, &err);
        float *logits = malloc((size_t)n_vocab * sizeof *logits);
        okv_sampler_params sp = {.temperature = 0.8f, .top_k = 40, .top_p = 0.95f, .seed = 1};
        okv_sampler *plain = okv_sampler_create(&sp, n_vocab, &err), *con = okv_sampler_create(&sp, n_vocab, &err);
        okv_grammar_matcher_reset(m);
        okv_sampler_set_grammar(con, m, v, &err);
        int32_t tk = okv_tokenizer_bos(tok) >= 0 ? okv_tokenizer_bos(tok) : 0, pos = 0;
        double t_eval = 0, t_plain = 0, t_con = 0;
        int steps = 0, refused = 0;
        for (; steps < 64 && ctx; steps++) {
            double a = now();
            if (okv_context_eval_last(ctx, &tk, &pos, 1, logits, &err) != OKV_OK) break;
            double b = now();
            okv_sampler_sample(plain, logits);
            double c = now();
            refused += !okv_grammar_matcher_allows(m, v, okv_sampler_sample(plain, logits));
            double d = now();
            int32_t id = okv_sampler_sample(con, logits);
            double e = now();
            if (id < 0 || okv_sampler_accept(con, id, &err) != OKV_OK || okv_grammar_vocab_is_end(v, id)) break;
            t_eval += b - a;
            t_plain += c - b;
            t_con += e - d;
            tk = id;
            pos++;
        }
        if (steps) {
            printf("model: decode %.2f ms/token; sampling %.3f ms plain, %.3f ms constrained (%d of %d plain draws "
                   "refused); constrained decoding costs %.1f %% of plain tokens/s\n",
                   t_eval * 1e3 / steps, t_plain * 1e3 / steps, t_con * 1e3 / steps, refused, steps,
                   100.0 * (t_con - t_plain) / (t_eval + t_plain));
        }
        free(logits);
        okv_sampler_free(plain);
        okv_sampler_free(con);
        okv_context_free(ctx);
    }
    free(allowed);
    okv_grammar_matcher_free(m);
    okv_grammar_free(gr);
    free(gbnf);
    okv_grammar_vocab_free(v);
    okv_tokenizer_free(own_tok);
    okv_model_free(model);
    return 0;
}
