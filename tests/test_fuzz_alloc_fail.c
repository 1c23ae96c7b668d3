/* Fuzz: every allocation that fails, while loading each architecture's
 * model, making a context, evaluating (growing the flat layers) and
 * tokenizing.  The rule: an allocation that fails is an error code
 * (OKV_ERR_NOMEM) and a message, never a crash, and leaves nothing behind.
 * tests/fuzz_alloc.h makes the k-th allocation fail for every k.
 *
 * Needs the plain build: the sanitizer build has its own allocator (skip). */
#include "check.h"

#if defined(__SANITIZE_ADDRESS__)
int main(void) {
    printf("skipped: allocation-failure injection runs in the non-sanitizer build\n");
    return CHECK_SKIP;
}
#else
#include "fuzz_alloc.h"

/* okv_sampler_accept out of memory (its penalty history, or the grammar's
 * own state) changes nothing: it used to advance the grammar before
 * growing the history, so the token stayed taken by the grammar though the
 * call failed.  The grammar "cc" (c a one-letter token's piece): after a
 * failed call c must still be taken twice.  Every allocation of the call
 * fails once, each with a fresh sampler and matcher. */
static void sampler_accept_nomem(const char *model_path) {
    okv_error err;
    fail_at = -1;
    okv_model *m = okv_model_load(model_path, NULL, &err);
    CHECK(m != NULL, "load %s: %s", model_path, err.message);
    if (!m) return;
    const okv_tokenizer *tok = okv_model_tokenizer(m);
    int32_t t = -1;
    char piece[8], c = 0;
    for (int32_t id = 0; id < okv_tokenizer_n_vocab(tok) && t < 0; id++) {
        size_t n = 0;
        if (okv_tokenizer_token_to_piece(tok, id, 0, piece, sizeof piece, &n, &err) == OKV_OK && n == 1 &&
            piece[0] >= 'a' && piece[0] <= 'z')
            t = id, c = piece[0];
    }
    CHECK(t >= 0, "a token of one letter");
    char gbnf[32];
    snprintf(gbnf, sizeof gbnf, "root ::= \"%c%c\"", c, c);
    okv_grammar *g = okv_grammar_parse(gbnf, strlen(gbnf), "root", &err);
    okv_grammar_vocab *v = g ? okv_grammar_vocab_create(tok, NULL, 0, &err) : NULL;
    CHECK(v != NULL, "grammar %s: %s", gbnf, err.message);
    const okv_sampler_params sp = {.temperature = 0, .top_k = 0, .top_p = 1, .seed = 1};
    const okv_sampler_controls ctl = {.repeat_penalty = 1.1f, .penalty_last_n = -1};
    int failed = 0;
    for (long k = 1; v && k < 64; k++) {
        okv_grammar_matcher *gm = okv_grammar_matcher_create(g, &err);
        okv_sampler *s = gm ? okv_sampler_create(&sp, okv_tokenizer_n_vocab(tok), &err) : NULL;
        if (!s || okv_sampler_set_controls(s, &ctl, &err) != OKV_OK || okv_sampler_set_grammar(s, gm, v, &err) != OKV_OK) {
            CHECK(0, "sampler with a grammar: %s", err.message);
            okv_sampler_free(s);
            okv_grammar_matcher_free(gm);
            break;
        }
        n_allocs = 0;
        fail_at = k;
        const okv_status st = okv_sampler_accept(s, t, &err);
        fail_at = -1;
        const bool done = st == OKV_OK; /* the call made fewer than k allocations */
        if (!done) {
            failed++;
            CHECK(st == OKV_ERR_NOMEM, "accept with allocation %ld failing: %s, want OKV_ERR_NOMEM", k, okv_status_name(st));
            CHECK(okv_sampler_accept(s, t, &err) == OKV_OK && okv_sampler_accept(s, t, &err) == OKV_OK,
                  "allocation %ld failed: '%c' twice after it: %s", k, c, err.message);
        }
        okv_sampler_free(s);
        okv_grammar_matcher_free(gm);
        if (done) break;
    }
    CHECK(failed >= 1, "okv_sampler_accept allocated nothing to fail");
    okv_grammar_vocab_free(v);
    okv_grammar_free(g);
    okv_model_free(m);
}

int main(void) {
    const char *shared = check_shared_dir();
    if (!shared) { printf("skipped: ../shared not found\n"); return CHECK_SKIP; }
    static const char *const models[] = {"stories260K", "tiny-llama", "tiny-gemma3", "tiny-muse-glimmer"};
    for (size_t mi = 0; mi < sizeof models / sizeof models[0]; mi++) {
        char mp[1024];
        snprintf(mp, sizeof mp, "%s/models/%s.gguf", shared, models[mi]);
        alloc_fail_all(models[mi], mp, NULL);
    }
    /* SentencePiece vocabularies from their own files */
    char vp[1024], mp[1024];
    snprintf(mp, sizeof mp, "%s/models/tiny-llama.gguf", shared);
    snprintf(vp, sizeof vp, "%s/vocab/ggml-vocab-phi-3.gguf", shared);
    alloc_fail_all("tiny-llama + phi-3 vocab", mp, vp);
    snprintf(mp, sizeof mp, "%s/models/stories260K.gguf", shared);
    sampler_accept_nomem(mp);
    return check_done();
}
#endif
