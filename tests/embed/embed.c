/* An outside program, built by tests/install.sh against an installed offkv
 * through pkg-config alone (static and shared): checks that the headers and
 * the library it linked agree on the version, and when given a model, runs
 * four greedy tokens from "Once upon a time" and prints them. */
#include <offkv/offkv.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv) {
    if (strcmp(okv_version(), OKV_VERSION_STRING) != 0 || okv_version_number() != OKV_VERSION_NUMBER) {
        fprintf(stderr, "embed: headers %s, library %s\n", OKV_VERSION_STRING, okv_version());
        return 1;
    }
    printf("offkv %s\n", okv_version());
    if (argc < 2) return 0;
    okv_error err;
    okv_model *m = okv_model_load(argv[1], NULL, &err);
    if (!m) { fprintf(stderr, "embed: %s\n", err.message); return 1; }
    const okv_tokenizer *tok = okv_model_tokenizer(m);
    const char *prompt = "Once upon a time";
    int32_t ids[64], pos[64];
    size_t n = 0;
    okv_context *ctx = okv_context_create(m, NULL, NULL, &err);
    if (!ctx || okv_tokenizer_encode(tok, prompt, strlen(prompt), OKV_TOKENIZE_ADD_SPECIAL, ids, 60, &n, &err)) {
        fprintf(stderr, "embed: %s\n", err.message);
        return 1;
    }
    const int32_t n_vocab = okv_model_n_vocab(m);
    float *logits = malloc(sizeof(float) * (size_t)n_vocab);
    for (size_t i = 0; i < n; i++) pos[i] = (int32_t)i;
    int rc = 0;
    for (int step = 0; step < 4 && !rc; step++) {
        if (okv_context_eval_last(ctx, step ? &ids[n - 1] : ids, step ? &pos[n - 1] : pos, step ? 1 : (int32_t)n,
                                  logits, &err) != OKV_OK) {
            fprintf(stderr, "embed: %s\n", err.message);
            rc = 1;
            break;
        }
        int32_t best = 0;
        for (int32_t v = 1; v < n_vocab; v++) if (logits[v] > logits[best]) best = v;
        char piece[64];
        size_t len = 0;
        okv_tokenizer_token_to_piece(tok, best, 0, piece, sizeof piece, &len, NULL);
        printf("%.*s", (int)len, piece);
        ids[n] = best;
        pos[n] = (int32_t)n;
        n++;
    }
    printf("\n");
    free(logits);
    okv_context_free(ctx);
    okv_model_free(m);
    return rc;
}
