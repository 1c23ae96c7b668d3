/* SentencePiece ("llama") tokenizer: the merge rules on small vocabularies
 * built by hand, byte fallback, special tokens, buffers and errors; then
 * llama.cpp's expected ids for the real llama-spm and phi-3 vocabularies. */
#include "tokenizer_util.h"

#define SP "\xe2\x96\x81" /* U+2581, SentencePiece's space */

/* A vocabulary of: <unk> <s> </s>, then the given normal tokens with their
 * scores, then (when bytes) the 256 byte tokens <0x00>..<0xFF>. */
typedef struct hand_vocab {
    const char *tokens[600];
    float scores[600];
    int32_t types[600];
    char bytes[256][8];
    int32_t n;
} hand_vocab;

static void hv_add(hand_vocab *v, const char *s, float score, int32_t type) {
    v->tokens[v->n] = s;
    v->scores[v->n] = score;
    v->types[v->n] = type;
    v->n++;
}

static okv_tokenizer *hv_make(hand_vocab *v, const char *const *normal, const float *scores,
                              int n_normal, int bytes, int add_space_prefix, okv_error *err) {
    v->n = 0;
    hv_add(v, "<unk>", 0, OKV_TOKEN_UNKNOWN);
    hv_add(v, "<s>", 0, OKV_TOKEN_CONTROL);
    hv_add(v, "</s>", 0, OKV_TOKEN_CONTROL);
    for (int i = 0; i < n_normal; i++) hv_add(v, normal[i], scores[i], OKV_TOKEN_NORMAL);
    for (int b = 0; bytes && b < 256; b++) {
        snprintf(v->bytes[b], sizeof v->bytes[b], "<0x%02X>", b);
        hv_add(v, v->bytes[b], 0, OKV_TOKEN_BYTE);
    }
    okv_vocab_desc d = {
        .model = "llama", .n_tokens = v->n, .tokens = v->tokens, .scores = v->scores,
        .types = v->types, .bos_id = 1, .eos_id = 2, .unk_id = 0, .pad_id = -1,
        .add_bos = -1, .add_eos = -1, .add_space_prefix = add_space_prefix,
    };
    return okv_tokenizer_create(&d, err);
}

/* Normal tokens start at id 3; byte token b is 3 + n_normal + b. */
#define ID(i) (3 + (i))

static void test_merge_order(void) {
    okv_error err;
    hand_vocab v;
    /* The pair whose token scores highest merges first, wherever it is. */
    {
        const char *tok[] = {"a", "b", "c", "ab", "bc"};
        const float sc[] = {-5, -5, -5, -2, -1};
        okv_tokenizer *t = hv_make(&v, tok, sc, 5, 0, 0, &err);
        CHECK(t != NULL, "create: %s", err.message);
        CHECK_IDS(t, "abc", 0, ID(0), ID(4));           /* a bc: bc scores higher */
        okv_tokenizer_free(t);
        const float sc2[] = {-5, -5, -5, -1, -2};
        t = hv_make(&v, tok, sc2, 5, 0, 0, &err);
        CHECK_IDS(t, "abc", 0, ID(3), ID(2));           /* ab c */
        okv_tokenizer_free(t);
    }
    /* Equal scores: the leftmost pair merges first. */
    {
        const char *tok[] = {"a", "b", "ab", "ba"};
        const float sc[] = {-5, -5, -1, -1};
        okv_tokenizer *t = hv_make(&v, tok, sc, 4, 0, 0, &err);
        CHECK_IDS(t, "aba", 0, ID(2), ID(0));           /* ab a, not a ba */
        CHECK_IDS(t, "bab", 0, ID(3), ID(1));           /* ba b, not b ab */
        okv_tokenizer_free(t);
    }
    /* Merges grow: a merged symbol merges again, and pairs queued before
     * a neighbour changed are not applied to the changed text. */
    {
        const char *tok[] = {"h", "e", "l", "o", "he", "ll", "hell", "hello", "lo"};
        const float sc[] = {-9, -9, -9, -9, -3, -1, -2, -0.5f, -0.8f};
        okv_tokenizer *t = hv_make(&v, tok, sc, 9, 0, 0, &err);
        /* ll (-1) is best among he/el/ll/lo? lo scores -0.8, so "l lo"
         * happens first at "llo" -> h e l lo; then he -> he l lo; no hel. */
        CHECK_IDS(t, "hello", 0, ID(4), ID(2), ID(8));
        CHECK_IDS(t, "hell", 0, ID(6));                 /* he + ll -> hell */
        okv_tokenizer_free(t);
    }
}

static void test_spaces_and_bytes(void) {
    okv_error err;
    hand_vocab v;
    const char *tok[] = {SP, "h", "i", SP "h", SP "hi", "hi", "é"};
    const float sc[] = {-9, -9, -9, -3, -1, -2, -9};
    okv_tokenizer *t = hv_make(&v, tok, sc, 7, 1, -1, &err);
    CHECK(t != NULL, "create: %s", err.message);
    /* The default prefix space; spaces inside become U+2581 too. */
    CHECK_IDS(t, "hi", 0, ID(4));
    CHECK_IDS(t, "hi hi", 0, ID(4), ID(4));
    CHECK_IDS(t, " hi", 0, ID(0), ID(4));
    int32_t none[4];
    CHECK(tu_encode(t, "", 0, none) == 0, "empty text gave ids");
    CHECK_IDS(t, "", OKV_TOKENIZE_ADD_SPECIAL, 1);
    /* A character with no token falls back to its bytes' tokens. */
    CHECK_IDS(t, "\xc3\xa8", 0, ID(0), ID(7 + 0xC3), ID(7 + 0xA8));
    CHECK_IDS(t, "\xc3\xa9", 0, ID(0), ID(6));
    /* Invalid UTF-8: a lone continuation byte is its own byte token. */
    CHECK_IDS(t, "\xa9hi", 0, ID(0), ID(7 + 0xA9), ID(5));
    /* BOS from ADD_SPECIAL (add_bos defaults on for llama), never EOS. */
    CHECK_IDS(t, "hi", OKV_TOKENIZE_ADD_SPECIAL, 1, ID(4));
    okv_tokenizer_free(t);

    /* Without the prefix. */
    t = hv_make(&v, tok, sc, 7, 1, 0, &err);
    CHECK_IDS(t, "hi", 0, ID(5));
    CHECK_IDS(t, "hi hi", 0, ID(5), ID(4));
    okv_tokenizer_free(t);

    /* Without byte tokens the unknown token stands in, per byte. */
    t = hv_make(&v, tok, sc, 7, 0, -1, &err);
    CHECK_IDS(t, "\xc3\xa8hi", 0, ID(0), 0, 0, ID(5));
    okv_tokenizer_free(t);

    /* Without either, the call fails and says which byte. */
    const char *toks[] = {"<s>", "a"};
    okv_vocab_desc d = {.model = "llama", .n_tokens = 2, .tokens = toks, .bos_id = 0,
                        .eos_id = -1, .unk_id = -1, .pad_id = -1, .add_bos = -1,
                        .add_eos = -1, .add_space_prefix = 0};
    t = okv_tokenizer_create(&d, &err);
    CHECK(t != NULL, "create: %s", err.message);
    size_t n;
    int32_t ids[8];
    okv_status st = okv_tokenizer_encode(t, "ab", 2, 0, ids, 8, &n, &err);
    CHECK_STATUS(st, OKV_ERR_UNSUPPORTED, err);
    CHECK(strstr(err.message, "0x62") != NULL, "message names the byte: %s", err.message);
    okv_tokenizer_free(t);
}

static void test_special_and_pieces(void) {
    okv_error err;
    hand_vocab v;
    const char *tok[] = {SP, "<", "s", ">", "x", SP "x", "<|u|>"};
    const float sc[] = {-9, -9, -9, -9, -9, -1, -9};
    okv_tokenizer *t = hv_make(&v, tok, sc, 7, 1, -1, &err);
    CHECK(t != NULL, "create: %s", err.message);
    v.types[3 + 6] = OKV_TOKEN_USER_DEFINED;
    okv_tokenizer_free(t);
    okv_vocab_desc d = {.model = "llama", .n_tokens = v.n, .tokens = v.tokens, .scores = v.scores,
                        .types = v.types, .bos_id = 1, .eos_id = 2, .unk_id = 0, .pad_id = -1,
                        .add_bos = 1, .add_eos = 1, .add_space_prefix = -1};
    t = okv_tokenizer_create(&d, &err);
    CHECK(t != NULL, "create: %s", err.message);
    /* Control text is plain text unless PARSE_SPECIAL. */
    CHECK_IDS(t, "<s>x", 0, ID(0), ID(1), ID(2), ID(3), ID(4));
    /* Parsed, it is the token, and the text after it gets a prefix space. */
    CHECK_IDS(t, "<s>x", OKV_TOKENIZE_PARSE_SPECIAL, 1, ID(5));
    /* User-defined tokens are always whole, parse or not. */
    CHECK_IDS(t, "x<|u|>x", 0, ID(5), ID(6), ID(5));
    CHECK_IDS(t, "x", OKV_TOKENIZE_ADD_SPECIAL, 1, ID(5), 2);

    /* Pieces: U+2581 back to a space, bytes to bytes, control tokens
     * silent unless asked for. */
    char buf[64];
    int32_t ids[] = {ID(5), ID(7 + 0xC3), ID(7 + 0xA9), ID(6), 1, 0};
    size_t n = tu_decode(t, ids, 6, 0, buf, sizeof buf);
    CHECK(n == 9 && memcmp(buf, " x\xc3\xa9<|u|>", 9) == 0, "pieces gave \"%s\"", buf);
    n = tu_decode(t, ids, 6, 1, buf, sizeof buf);
    CHECK(strcmp(buf, " x\xc3\xa9<|u|><s><unk>") == 0, "special pieces gave \"%s\"", buf);

    size_t k = 99;
    okv_status st = okv_tokenizer_token_to_piece(t, ID(5), 0, buf, 1, &k, &err);
    CHECK_STATUS(st, OKV_ERR_INVALID, err);
    CHECK(k == 2, "needed size %zu, want 2", k);
    st = okv_tokenizer_token_to_piece(t, v.n, 0, buf, sizeof buf, &k, &err);
    CHECK_STATUS(st, OKV_ERR_INVALID, err);
    st = okv_tokenizer_token_to_piece(t, -1, 0, buf, sizeof buf, &k, &err);
    CHECK_STATUS(st, OKV_ERR_INVALID, err);

    /* Output sizes: a count-only call, then too small a buffer. */
    int32_t out[4];
    st = okv_tokenizer_encode(t, "x x x x", 7, OKV_TOKENIZE_ADD_SPECIAL, NULL, 0, &n, &err);
    CHECK(st == OKV_OK && n == 6, "count: %s, %zu", okv_status_name(st), n);
    st = okv_tokenizer_encode(t, "x x x x", 7, OKV_TOKENIZE_ADD_SPECIAL, out, 4, &n, &err);
    CHECK_STATUS(st, OKV_ERR_INVALID, err);
    CHECK(n == 6 && strstr(err.message, "6") && strstr(err.message, "4"),
          "too small: n %zu, \"%s\"", n, err.message);
    st = okv_tokenizer_encode(t, "x", 1, 0x80, out, 4, &n, &err);
    CHECK_STATUS(st, OKV_ERR_INVALID, err);

    CHECK(okv_tokenizer_n_vocab(t) == v.n, "n_vocab %d", okv_tokenizer_n_vocab(t));
    CHECK(okv_tokenizer_bos(t) == 1 && okv_tokenizer_eos(t) == 2, "bos/eos");
    CHECK(okv_tokenizer_adds_bos(t) && okv_tokenizer_adds_eos(t), "adds bos/eos");
    CHECK(okv_tokenizer_token_type(t, ID(6)) == OKV_TOKEN_USER_DEFINED, "type");
    okv_tokenizer_free(t);
}

static void test_bad_vocabs(void) {
    okv_error err;
    const char *toks[] = {"<unk>", "a", "b", "a"};
    okv_vocab_desc d = {.model = "llama", .n_tokens = 3, .tokens = toks, .bos_id = -1,
                        .eos_id = -1, .unk_id = 0, .pad_id = -1, .add_bos = 0,
                        .add_eos = 0, .add_space_prefix = -1};
    okv_tokenizer *t = okv_tokenizer_create(&d, &err);
    CHECK(t != NULL, "create: %s", err.message);
    okv_tokenizer_free(t);

    okv_vocab_desc bad = d;
    bad.model = "wordpiece";
    CHECK(okv_tokenizer_create(&bad, &err) == NULL && err.status == OKV_ERR_UNSUPPORTED &&
              strstr(err.message, "wordpiece"),
          "unknown model: %s", err.message);
    bad = d;
    bad.n_tokens = 4;
    CHECK(okv_tokenizer_create(&bad, &err) == NULL && err.status == OKV_ERR_INVALID &&
              strstr(err.message, "1 and 3"),
          "duplicate token: %s", err.message);
    bad = d;
    bad.bos_id = 3;
    CHECK(okv_tokenizer_create(&bad, &err) == NULL && err.status == OKV_ERR_INVALID &&
              strstr(err.message, "bos_id"),
          "bos out of range: %s", err.message);
    bad = d;
    bad.add_bos = -1; /* llama's default adds a BOS, and there is none */
    CHECK(okv_tokenizer_create(&bad, &err) == NULL && err.status == OKV_ERR_INVALID &&
              strstr(err.message, "bos"),
          "add_bos without bos: %s", err.message);
    int32_t types[] = {2, 1, 9};
    bad = d;
    bad.types = types;
    CHECK(okv_tokenizer_create(&bad, &err) == NULL && err.status == OKV_ERR_INVALID &&
              strstr(err.message, "type 9"),
          "bad type: %s", err.message);
    bad = d;
    bad.n_tokens = 0;
    CHECK(okv_tokenizer_create(&bad, &err) == NULL && err.status == OKV_ERR_INVALID, "empty");
    CHECK(okv_tokenizer_create(NULL, &err) == NULL && err.status == OKV_ERR_INVALID, "NULL");
    okv_tokenizer_free(NULL);
}

/* A GGUF in memory with the given tokenizer keys, read back. */
static okv_tokenizer *from_memory_gguf(int with_model, uint32_t pad, int32_t bad_type,
                                       okv_error *err) {
    okv_gguf_writer *w = okv_gguf_writer_create(err);
    if (!w) return NULL;
    const char *toks[] = {"<unk>", "<s>", "</s>", SP "a", "a"};
    float scores[] = {0, 0, 0, -1, -2};
    int32_t types[] = {2, 3, 3, 1, bad_type};
    if (with_model) okv_gguf_writer_add_str(w, "tokenizer.ggml.model", "llama", err);
    okv_gguf_writer_add_array(w, "tokenizer.ggml.tokens", OKV_GGUF_STRING, toks, 5, err);
    okv_gguf_writer_add_array(w, "tokenizer.ggml.scores", OKV_GGUF_F32, scores, 5, err);
    okv_gguf_writer_add_array(w, "tokenizer.ggml.token_type", OKV_GGUF_I32, types, 5, err);
    okv_gguf_writer_add_u32(w, "tokenizer.ggml.padding_token_id", pad, err);
    void *data = NULL;
    size_t size = 0;
    okv_tokenizer *t = NULL;
    if (okv_gguf_writer_to_memory(w, &data, &size, err) == OKV_OK) {
        okv_gguf *g = okv_gguf_open_memory(data, size, err);
        if (g) t = okv_tokenizer_from_gguf(g, err);
        okv_gguf_close(g);
    }
    free(data);
    okv_gguf_writer_free(w);
    return t;
}

static void test_from_gguf(void) {
    okv_error err;
    /* Keys absent take llama.cpp's defaults; a padding id of -1 written
     * as u32 is out of range and ignored, as llama.cpp ignores it. */
    okv_tokenizer *t = from_memory_gguf(1, 4294967295u, 1, &err);
    CHECK(t != NULL, "from gguf: %s", err.message);
    if (t) {
        CHECK(okv_tokenizer_bos(t) == 1 && okv_tokenizer_eos(t) == 2 && okv_tokenizer_adds_bos(t),
              "llama defaults: bos %d eos %d", okv_tokenizer_bos(t), okv_tokenizer_eos(t));
        CHECK_IDS(t, "a", OKV_TOKENIZE_ADD_SPECIAL, 1, 3);
        okv_tokenizer_free(t);
    }
    /* A token type outside 0..6 reads as UNDEFINED, as in llama.cpp. */
    t = from_memory_gguf(1, 0, 77, &err);
    CHECK(t && okv_tokenizer_token_type(t, 4) == OKV_TOKEN_UNDEFINED, "type 77: %s", err.message);
    okv_tokenizer_free(t);
    t = from_memory_gguf(0, 0, 1, &err);
    CHECK(t == NULL && err.status == OKV_ERR_NOT_FOUND && strstr(err.message, "tokenizer.ggml.model"),
          "no model key: %s", err.message);
    okv_tokenizer_free(t);
    CHECK(okv_tokenizer_from_gguf(NULL, &err) == NULL && err.status == OKV_ERR_INVALID, "NULL file");
}

/* Many special tokens that share prefixes (as gemma3's 6 000 <unusedN>):
 * the specials split out of random texts are those a plain reference
 * finds: each in turn, longest first then by id, splitting what is still
 * raw text (llama.cpp's partition).  (Only the specials a text holds are
 * searched for now; a miss or a wrong prefix would show here.) */
static void ref_partition(const char *text, char **specials, const int32_t *ids, int n_sp, int32_t *out, int *n_out) {
    enum { MAXF = 512 };
    struct { int32_t id; size_t off, len; } cur[MAXF], next[MAXF];
    int nc = 1;
    cur[0].id = -1, cur[0].off = 0, cur[0].len = strlen(text);
    for (int k = 0; k < n_sp; k++) {
        const size_t tn = strlen(specials[k]);
        int nn = 0;
        for (int f = 0; f < nc; f++) {
            if (cur[f].id >= 0) {
                next[nn++] = cur[f];
                continue;
            }
            size_t pos = cur[f].off, end = cur[f].off + cur[f].len;
            for (size_t i = pos; i + tn <= end;) {
                if (memcmp(text + i, specials[k], tn) == 0) {
                    if (i > pos) next[nn].id = -1, next[nn].off = pos, next[nn].len = i - pos, nn++;
                    next[nn].id = ids[k], next[nn].off = i, next[nn].len = tn, nn++;
                    pos = i = i + tn;
                } else {
                    i++;
                }
            }
            if (pos < end) next[nn].id = -1, next[nn].off = pos, next[nn].len = end - pos, nn++;
        }
        memcpy(cur, next, (size_t)nn * sizeof *cur);
        nc = nn;
    }
    *n_out = 0;
    for (int f = 0; f < nc; f++)
        if (cur[f].id >= 0) out[(*n_out)++] = cur[f].id;
}

static void test_many_specials(void) {
    enum { N_SP = 300 };
    static hand_vocab v;
    static char names[N_SP][16];
    const char *tok[11 + N_SP] = {SP, "a", "b", "<", ">", "u", "x", "y", "1", "2", "3"};
    float sc[11 + N_SP];
    for (int i = 0; i < 11 + N_SP; i++) sc[i] = -5;
    for (int i = 0; i < N_SP; i++) {
        snprintf(names[i], sizeof names[i], i < N_SP - 2 ? "<u%d>" : i == N_SP - 2 ? "<x>" : "<x><y>", i);
        tok[11 + i] = names[i];
    }
    okv_error err;
    okv_tokenizer *t = hv_make(&v, tok, sc, 11 + N_SP, 0, 0, &err);
    CHECK(t != NULL, "create: %s", err.message);
    okv_tokenizer_free(t);
    for (int i = 0; i < N_SP; i++) v.types[3 + 11 + i] = OKV_TOKEN_USER_DEFINED;
    okv_vocab_desc d = {.model = "llama", .n_tokens = v.n, .tokens = v.tokens, .scores = v.scores,
                        .types = v.types, .bos_id = 1, .eos_id = 2, .unk_id = 0, .pad_id = -1,
                        .add_bos = 0, .add_eos = 0, .add_space_prefix = 0};
    t = okv_tokenizer_create(&d, &err);
    CHECK(t != NULL, "create: %s", err.message);
    if (!t) return;
    /* the reference's order: longest first, then by id */
    char *order[N_SP];
    int32_t order_id[N_SP];
    for (int i = 0; i < N_SP; i++) order[i] = names[i], order_id[i] = 3 + 11 + i;
    for (int i = 1; i < N_SP; i++)
        for (int j = i; j > 0 && strlen(order[j]) > strlen(order[j - 1]); j--) {
            char *ts = order[j];
            order[j] = order[j - 1], order[j - 1] = ts;
            const int32_t ti = order_id[j];
            order_id[j] = order_id[j - 1], order_id[j - 1] = ti;
        }
    static const char *const parts[] = {"<u1", "2>", "<u12>", "<u1>", "3>", "<u", ">", "ab", "<x>", "<y>", "<x><y>", "<", "<u29", "9>", "<u2", "0"};
    uint64_t seed = 7;
    int bad = 0;
    for (int round = 0; round < 300; round++) {
        char text[256] = "";
        for (int p = 0; p < 12; p++) {
            seed = seed * 6364136223846793005ull + 1442695040888963407ull;
            strcat(text, parts[(seed >> 33) % (sizeof parts / sizeof *parts)]);
        }
        int32_t want[64], got[256];
        int n_want;
        ref_partition(text, order, order_id, N_SP, want, &n_want);
        size_t n = 0;
        okv_status st = okv_tokenizer_encode(t, text, strlen(text), 0, got, 256, &n, &err);
        int n_got = 0;
        for (size_t i = 0; st == OKV_OK && i < n; i++)
            if (got[i] >= 3 + 11) got[n_got++] = got[i];
        if (st != OKV_OK || n_got != n_want || memcmp(got, want, (size_t)n_want * sizeof *want) != 0)
            if (bad++ < 3) fprintf(stderr, "  '%s': %d specials, the reference %d\n", text, n_got, n_want);
    }
    CHECK(bad == 0, "%d of 300 texts split their specials other than the reference", bad);
    okv_tokenizer_free(t);
}

int main(void) {
    test_merge_order();
    test_spaces_and_bytes();
    test_special_and_pieces();
    test_many_specials();
    test_bad_vocabs();
    test_from_gguf();

    const char *shared = check_shared_dir();
    if (!shared) {
        printf("skipped: ../shared not found (hand-built cases only)\n");
        return check_done() ? 1 : CHECK_SKIP;
    }
    const char *names[] = {"llama-spm", "phi-3"};
    for (int i = 0; i < 2; i++) {
        int total = 0;
        int passed = tu_run_vocab(shared, names[i], 1, &total);
        printf("%s: %d/%d strings give llama.cpp's ids\n", names[i], passed, total);
        CHECK(total == 46, "%s: %d test strings, want 46", names[i], total);
    }

    /* The prompt of the stories260K goldens, as llama.cpp tokenized it. */
    char path[4096];
    snprintf(path, sizeof path, "%s/models/stories260K.gguf", shared);
    okv_error err;
    okv_gguf *g = okv_gguf_open(path, &err);
    CHECK(g != NULL, "open %s: %s", path, err.message);
    okv_tokenizer *t = g ? okv_tokenizer_from_gguf(g, &err) : NULL;
    CHECK(!g || t, "stories260K tokenizer: %s", err.message);
    if (t) {
        CHECK_IDS(t, "Once upon a time", OKV_TOKENIZE_ADD_SPECIAL, 1, 403, 407, 261, 378);
        /* The same sentence's tail as a continuation (the server's forced
         * markup after generated text): no space prefix of its own, so it
         * gets llama.cpp's ids of that tail within the whole. */
        CHECK_IDS(t, " upon a time", OKV_TOKENIZE_CONTINUE, 407, 261, 378);
        okv_tokenizer_free(t);
    }
    okv_gguf_close(g);
    return check_done();
}
