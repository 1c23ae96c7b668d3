/* okv_tokenizer_encode_max (issue 15, item 4: a 4 MB prompt cost 15 s of
 * tokenizing before the server refused it for a 128-position context).
 *  - On llama.cpp's tokenizer test texts (../shared/vocab, SPM and BPE
 *    vocabularies), with max the exact count it gives the same ids as
 *    okv_tokenizer_encode, and with max one less it is OKV_ERR_INVALID with
 *    *n_out above max (never a silent cut).
 *  - The same on random byte strings full of what shrinks or vanishes in
 *    tokenizing (overlong UTF-8 such as F0 80 80 AD for '-', a byte a
 *    vocabulary has no token for, like starcoder's F1): the refusal's
 *    count must stay a lower bound, so a text that fits is never refused.
 *  - token_to_piece into too small a buffer gives the size, writes nothing.
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

/* The tokenizer of ../shared/vocab/ggml-vocab-NAME.gguf (its file in *g,
 * open while the tokenizer lives), or NULL after a failed CHECK. */
static okv_tokenizer *open_vocab(const char *shared, const char *name, okv_gguf **g, char *path, size_t cap) {
    snprintf(path, cap, "%s/vocab/ggml-vocab-%s.gguf", shared, name);
    okv_error err;
    *g = okv_gguf_open(path, &err);
    okv_tokenizer *t = *g ? okv_tokenizer_from_gguf(*g, &err) : NULL;
    CHECK(t != NULL, "%s: %s", name, err.message);
    if (!t) {
        okv_gguf_close(*g);
        *g = NULL;
    }
    return t;
}

static void one_vocab(const char *shared, const char *name) {
    char path[1024];
    okv_error err;
    okv_gguf *g;
    okv_tokenizer *t = open_vocab(shared, name, &g, path, sizeof path);
    if (!t) return;
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

/* Random texts of pieces that shrink (overlong forms), vanish (bytes
 * without tokens in some vocabularies) or grow (invalid bytes): encode's
 * count n is accepted as a limit, and n - 1 is refused with a count in
 * n - 1 .. n. */
static void odd_bytes(const char *shared, const char *name) {
    char path[1024];
    okv_error err;
    okv_gguf *g;
    okv_tokenizer *t = open_vocab(shared, name, &g, path, sizeof path);
    static const char *const pieces[] = {"\xF0\x80\x80\xAD", "\xE0\x80\xAF", "\xC0\xAF", "\xF1", "\xF1\xF1\xF1",
                                         "-", "--", " ", "a", "\xFF", "\xED\xA0\x80", "\xE2\x96\x81"};
    const int n_kinds = (int)(sizeof pieces / sizeof pieces[0]);
    uint64_t rng = 0x9e3779b97f4a7c15ull;
    int bad = 0;
    /* First runs of one piece, 1 to 196 long in steps of 5 (a run of
     * overlong dashes is one gpt-oss token: 280 bytes, 1 id); then random
     * mixtures. */
    for (int c = 0; t && c < n_kinds * 40 + 300; c++) {
        char text[2048];
        size_t len = 0;
        rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
        const bool run = c < n_kinds * 40;
        const size_t n_pieces = run ? 1 + 5 * ((size_t)c % 40) : 1 + rng % 400;
        const uint64_t mix = rng;
        for (size_t k = 0; k < n_pieces; k++) {
            rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
            /* Mostly one piece per text, so long runs of it form. */
            const char *pc = run ? pieces[c / 40]
                                 : pieces[(rng % 4 == 0 ? rng >> 8 : mix >> 8) % (uint64_t)n_kinds];
            const size_t pl = strlen(pc);
            if (len + pl >= sizeof text) break;
            memcpy(text + len, pc, pl);
            len += pl;
        }
        size_t need = 0, n = 0;
        if (okv_tokenizer_encode(t, text, len, 0, NULL, 0, &need, &err) != OKV_OK) continue; /* no byte token (SPM) */
        int32_t *ids = malloc((need + 1) * sizeof *ids);
        okv_status st = okv_tokenizer_encode_max(t, text, len, 0, ids, need, &n, &err);
        if (st != OKV_OK || n != need) {
            if (bad++ < 3) CHECK(0, "%s: %zu bytes needing %zu ids refused with room for them: %s", name, len, need, err.message);
        } else if (need > 0) {
            st = okv_tokenizer_encode_max(t, text, len, 0, ids, need - 1, &n, &err);
            if ((st != OKV_ERR_INVALID || n <= need - 1 || n > need) && bad++ < 3)
                CHECK(0, "%s: %zu bytes needing %zu ids, room for one less: status %d, count %zu", name, len, need,
                      (int)st, n);
        }
        free(ids);
    }
    CHECK(bad == 0, "%s: %d odd texts misjudged", name, bad);
    okv_tokenizer_free(t);
    okv_gguf_close(g);
}

/* token_to_piece with too small a buffer says the size and writes nothing
 * (it wrote the piece's first bytes). */
static void piece_refusal(const char *shared, const char *name) {
    char path[1024];
    okv_gguf *g;
    okv_tokenizer *t = open_vocab(shared, name, &g, path, sizeof path);
    okv_error err;
    int tried = 0;
    for (int32_t id = 1000; t && id < okv_tokenizer_n_vocab(t) && tried < 20; id++) {
        char full[256], buf[8] = "#######";
        size_t n = 0, k = 0;
        if (okv_tokenizer_token_type(t, id) != OKV_TOKEN_NORMAL ||
            okv_tokenizer_token_to_piece(t, id, 0, full, sizeof full, &n, &err) != OKV_OK || n < 4)
            continue;
        tried++;
        okv_status st = okv_tokenizer_token_to_piece(t, id, 0, buf, 2, &k, &err);
        CHECK(st == OKV_ERR_INVALID && k == n && strcmp(buf, "#######") == 0,
              "%s id %d: a %zu-byte piece into 2 bytes: status %d, size %zu, buf '%s'", name, (int)id, n, (int)st, k, buf);
    }
    CHECK(tried == 20, "%s: %d pieces of 4 bytes or more", name, tried);
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
    static const char *const odd[] = {"gpt-oss", "starcoder", "llama3", "qwen3", "gpt-2", "llama-spm", "gemma3"};
    for (size_t i = 0; i < sizeof odd / sizeof odd[0]; i++) odd_bytes(shared, odd[i]);
    piece_refusal(shared, "llama3");
    piece_refusal(shared, "llama-spm");
    return check_done();
}
