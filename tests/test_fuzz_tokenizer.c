/* Fuzz: okv_tokenizer_encode / token_to_piece on every shared vocabulary
 * with random bytes, invalid UTF-8, embedded NULs, very long inputs and
 * too-small buffers.  The rule: bad input is an error with a message, never
 * a crash; a too-small buffer is OKV_ERR_INVALID with the size needed and
 * nothing written past it.  And where the vocabulary promises it (byte
 * fallback for SentencePiece, byte-level BPE), valid UTF-8 must come back
 * exactly from the pieces of its ids (SentencePiece adds its one leading
 * space).  Fixed seeds; OKV_FUZZ_ITERS overrides the count. */
#include <stdint.h>

#include "check.h"
#include "offkv/offkv.h"

static uint64_t rng_state;
static uint64_t rnd(void) {
    uint64_t z = (rng_state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static size_t put_utf8(char *o, uint32_t cp) {
    if (cp < 0x80) { o[0] = (char)cp; return 1; }
    if (cp < 0x800) { o[0] = (char)(0xC0 | cp >> 6); o[1] = (char)(0x80 | (cp & 63)); return 2; }
    if (cp < 0x10000) {
        o[0] = (char)(0xE0 | cp >> 12); o[1] = (char)(0x80 | ((cp >> 6) & 63)); o[2] = (char)(0x80 | (cp & 63));
        return 3;
    }
    o[0] = (char)(0xF0 | cp >> 18); o[1] = (char)(0x80 | ((cp >> 12) & 63));
    o[2] = (char)(0x80 | ((cp >> 6) & 63)); o[3] = (char)(0x80 | (cp & 63));
    return 4;
}

/* Random valid UTF-8 of about n bytes: ASCII words and whitespace, Latin,
 * Greek, CJK, emoji, combining marks, digits, punctuation, NUL. */
static size_t gen_utf8(char *o, size_t n) {
    static const uint32_t ranges[][2] = {{'a', 'z'}, {'A', 'Z'}, {'0', '9'}, {' ', ' '}, {'!', '/'}, {'\t', '\r'},
                                         {0xC0, 0x17F}, {0x391, 0x3C9}, {0x4E00, 0x4FFF}, {0x1F600, 0x1F64F},
                                         {0x300, 0x36F}, {0x0, 0x0}, {0x3040, 0x30FF}, {0x10000, 0x3FFFF},
                                         {0xE000, 0xF8FF}, {0x2000, 0x206F}};
    size_t o_n = 0;
    while (o_n + 4 <= n) {
        size_t r = rnd() % (sizeof ranges / sizeof ranges[0]);
        uint32_t cp = ranges[r][0] + (uint32_t)(rnd() % (ranges[r][1] - ranges[r][0] + 1));
        if (cp >= 0xD800 && cp < 0xE000) cp = 'x';
        if (cp == 0x2581) cp = 'y'; /* SentencePiece's space stand-in decodes as a space */
        o_n += put_utf8(o + o_n, cp);
    }
    return o_n;
}

/* Random bytes, mostly invalid UTF-8: lone continuation bytes, truncated
 * sequences, overlongs, surrogates, 0xF5..0xFF. */
static size_t gen_bad(char *o, size_t n) {
    static const char *const bits[] = {"\x80", "\xbf", "\xc0\x80", "\xc1\xbf", "\xe0\x80\x80", "\xed\xa0\x80",
                                       "\xf4\x90\x80\x80", "\xf5", "\xff", "\xfe", "\xe2\x82", "\xf0\x9f\x98",
                                       "\xc3", "a", " ", "\n", "<s>", "</s>", "<|endoftext|>", "<0x41>"};
    size_t o_n = 0;
    while (o_n < n) {
        if (rnd() % 3 == 0) {
            o[o_n++] = (char)rnd();
        } else {
            const char *b = bits[rnd() % (sizeof bits / sizeof bits[0])];
            size_t l = strlen(b);
            if (o_n + l > n) break;
            memcpy(o + o_n, b, l);
            o_n += l;
        }
    }
    return o_n;
}

typedef struct vocab { const char *name; bool spm; } vocab;

static int32_t ids[1 << 20];
static char text[1 << 20], back[1 << 21];

/* Encodes with every flag combination and size; checks the contract.
 * Returns the number of ids for flags 0, or -1 on an error. */
static long encode_checked(const okv_tokenizer *t, const char *s, size_t len, const char *what) {
    long n0 = -1;
    for (unsigned flags = 0; flags < 4; flags++) {
        okv_error err;
        size_t n = 12345;
        okv_status st = okv_tokenizer_encode(t, s, len, flags, NULL, 0, &n, &err);
        if (st != OKV_OK) {
            CHECK(err.message[0] != '\0', "%s: count-only encode failed without a message", what);
            continue;
        }
        size_t need = n;
        if (need > sizeof ids / sizeof ids[0] - 8) continue;
        /* too small by one: INVALID, size reported, nothing written */
        if (need > 0) {
            for (size_t i = 0; i < need; i++) ids[i] = -77;
            st = okv_tokenizer_encode(t, s, len, flags, ids, need - 1, &n, &err);
            bool untouched = true;
            for (size_t i = 0; i < need; i++) untouched &= ids[i] == -77;
            CHECK(st == OKV_ERR_INVALID && n == need && err.message[0], "%s: short buffer: %s n %zu need %zu", what,
                  okv_status_name(st), n, need);
            CHECK(untouched, "%s: short buffer of %zu ids was written to", what, need - 1);
        }
        ids[need] = -77;
        st = okv_tokenizer_encode(t, s, len, flags, ids, need, &n, &err);
        CHECK(st == OKV_OK && n == need && ids[need] == -77, "%s: encode into %zu: %s n %zu (%s)", what, need,
              okv_status_name(st), n, err.message);
        int32_t nv = okv_tokenizer_n_vocab(t);
        bool in_range = true;
        for (size_t i = 0; i < n && st == OKV_OK; i++) in_range &= ids[i] >= 0 && ids[i] < nv;
        CHECK(in_range, "%s: flags %u: an id outside the vocabulary", what, flags);
        if (flags == 0 && st == OKV_OK) n0 = (long)n;
    }
    return n0;
}

/* Joins the pieces of ids[0..n); checks the too-small path of each piece. */
static size_t detok(const okv_tokenizer *t, size_t n, const char *what) {
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        okv_error err;
        size_t got = 0;
        okv_status st = okv_tokenizer_token_to_piece(t, ids[i], 0, back + o, sizeof back - o, &got, &err);
        CHECK(st == OKV_OK, "%s: token_to_piece %d: %s", what, (int)ids[i], err.message);
        if (st != OKV_OK) return o;
        if (got > 0) {
            char small[64];
            memset(small, 0x55, sizeof small);
            size_t need = 0;
            if (got - 1 < sizeof small - 1) {
                st = okv_tokenizer_token_to_piece(t, ids[i], 0, small, got - 1, &need, &err);
                CHECK(st == OKV_ERR_INVALID && need == got && (unsigned char)small[got - 1] == 0x55,
                      "%s: piece of %d into %zu bytes: %s need %zu", what, (int)ids[i], got - 1,
                      okv_status_name(st), need);
            }
        }
        o += got;
    }
    return o;
}

int main(void) {
    const char *shared = check_shared_dir();
    if (!shared) { printf("skipped: ../shared not found\n"); return CHECK_SKIP; }
    static const vocab vocabs[] = {{"llama-spm", true}, {"phi-3", true}, {"gpt-2", false},
                                   {"starcoder", false}, {"deepseek-coder", false}};
    size_t iters = 60;
    if (getenv("OKV_FUZZ_ITERS")) iters = (size_t)strtoull(getenv("OKV_FUZZ_ITERS"), NULL, 10);
    for (size_t vi = 0; vi < sizeof vocabs / sizeof vocabs[0]; vi++) {
        const vocab *v = &vocabs[vi];
        char path[1024];
        snprintf(path, sizeof path, "%s/vocab/ggml-vocab-%s.gguf", shared, v->name);
        okv_error err;
        okv_gguf *g = okv_gguf_open(path, &err);
        okv_tokenizer *t = g ? okv_tokenizer_from_gguf(g, &err) : NULL;
        CHECK(t != NULL, "%s: %s", v->name, err.message);
        okv_gguf_close(g);
        if (!t) continue;
        char what[128];
        int mismatches = 0, skipped = 0;
        /* Bytes a byte-level vocabulary has a one-byte token for.  A byte
         * without one is dropped, as llama.cpp drops it (starcoder lacks
         * some lead bytes of 4-byte sequences): no round trip promised. */
        bool has_byte[256] = {0};
        for (int32_t id = 0; id < okv_tokenizer_n_vocab(t); id++) {
            char pb[8];
            size_t pn = 0;
            if (okv_tokenizer_token_to_piece(t, id, 0, pb, sizeof pb, &pn, &err) == OKV_OK && pn == 1)
                has_byte[(unsigned char)pb[0]] = true;
        }
        for (size_t it = 0; it < iters; it++) {
            rng_state = 77 + vi * 100003u + it;
            size_t want = 1 + (size_t)(rnd() % 200);
            /* valid UTF-8: round trip */
            size_t len = gen_utf8(text, want);
            snprintf(what, sizeof what, "%s utf8 #%zu", v->name, it);
            long n = encode_checked(t, text, len, what);
            CHECK(n >= 0, "%s: valid UTF-8 did not encode", what);
            bool promised = true;
            for (size_t k = 0; k < len && !v->spm; k++) promised &= has_byte[(unsigned char)text[k]];
            skipped += !promised;
            if (n >= 0 && promised) {
                okv_tokenizer_encode(t, text, len, 0, ids, sizeof ids / sizeof ids[0], &(size_t){0}, &err);
                size_t bn = detok(t, (size_t)n, what);
                /* SentencePiece adds one leading space (add_space_prefix) */
                const char *b = back;
                if (v->spm && bn > 0 && back[0] == ' ') { b++; bn--; }
                if (bn != len || memcmp(b, text, len) != 0) {
                    size_t d = 0;
                    while (d < len && d < bn && b[d] == text[d]) d++;
                    if (mismatches++ < 3) {
                        char hex[64] = "";
                        for (size_t k = d; k < d + 8 && k < len; k++)
                            snprintf(hex + strlen(hex), sizeof hex - strlen(hex), "%02x ", (unsigned char)text[k]);
                        CHECK(0, "%s: round trip of %zu bytes gave %zu bytes; first difference at byte %zu: %s", what,
                              len, bn, d, hex);
                    }
                }
            }
            /* invalid UTF-8 and random bytes: only no crash and the contract */
            len = gen_bad(text, want);
            snprintf(what, sizeof what, "%s bad #%zu", v->name, it);
            encode_checked(t, text, len, what);
        }
        CHECK(mismatches == 0, "%s: %d round-trip mismatches", v->name, mismatches);
        CHECK(skipped * 2 < (int)iters + 1, "%s: %d of %zu round trips skipped", v->name, skipped, iters);
        /* very long inputs */
        static const char *const fills[] = {"a", " ", "\n", "\xe4\xb8\x80", "ab1 ", "\x80", "\xff\xfe", "<s>"};
        for (size_t k = 0; k < sizeof fills / sizeof fills[0]; k++) {
            size_t fl = strlen(fills[k]), len = 0;
            while (len + fl <= 16384) { memcpy(text + len, fills[k], fl); len += fl; }
            for (unsigned flags = 0; flags < 4; flags += 3) {
                size_t need = 0, got = 0;
                okv_status st = okv_tokenizer_encode(t, text, len, flags, ids, sizeof ids / sizeof ids[0], &need, &err);
                CHECK(st == OKV_OK || err.message[0], "%s long '%s': %s without a message", v->name, fills[k],
                      okv_status_name(st));
                if (st == OKV_OK && need > 1) {
                    st = okv_tokenizer_encode(t, text, len, flags, ids, need / 2, &got, &err);
                    CHECK(st == OKV_ERR_INVALID && got == need, "%s long '%s': half buffer: %s", v->name, fills[k],
                          okv_status_name(st));
                }
            }
        }
        /* NULL and empty arguments */
        size_t n = 0;
        CHECK(okv_tokenizer_encode(t, NULL, 0, 0, NULL, 0, &n, &err) == OKV_OK && n == 0, "%s: empty: %s", v->name,
              err.message);
        CHECK(okv_tokenizer_encode(t, NULL, 5, 0, ids, 8, &n, &err) == OKV_ERR_INVALID, "%s: NULL text", v->name);
        CHECK(okv_tokenizer_encode(t, "a", 1, 0, NULL, 8, &n, &err) == OKV_ERR_INVALID, "%s: NULL ids", v->name);
        CHECK(okv_tokenizer_encode(t, "a", 1, 0, ids, 8, NULL, &err) == OKV_ERR_INVALID, "%s: NULL n_out", v->name);
        CHECK(okv_tokenizer_encode(t, "a", 1, 8, ids, 8, &n, &err) == OKV_ERR_INVALID, "%s: bad flags", v->name);
        char b4[4];
        CHECK(okv_tokenizer_token_to_piece(t, -1, 0, b4, 4, &n, &err) == OKV_ERR_INVALID, "%s: id -1", v->name);
        CHECK(okv_tokenizer_token_to_piece(t, okv_tokenizer_n_vocab(t), 1, b4, 4, &n, &err) == OKV_ERR_INVALID,
              "%s: id n_vocab", v->name);
        CHECK(okv_tokenizer_token_to_piece(t, 0, 1, NULL, 4, &n, &err) == OKV_ERR_INVALID, "%s: NULL buf", v->name);
        /* every token's piece, special or not, through a zero-size buffer first */
        for (int32_t id = 0; id < okv_tokenizer_n_vocab(t); id++) {
            for (int sp = 0; sp < 2; sp++) {
                size_t need = 0, got = 0;
                okv_status st = okv_tokenizer_token_to_piece(t, id, sp, NULL, 0, &need, &err);
                CHECK(st == OKV_OK || (st == OKV_ERR_INVALID && need > 0), "%s: piece %d sized: %s", v->name,
                      (int)id, err.message);
                st = okv_tokenizer_token_to_piece(t, id, sp, back, need, &got, &err);
                CHECK(st == OKV_OK && got == need, "%s: piece %d into its size %zu: %s", v->name, (int)id, need,
                      err.message);
            }
        }
        okv_tokenizer_free(t);
    }
    return check_done();
}
