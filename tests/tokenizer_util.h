/* Test support for the tokenizer tests: building small vocabularies, and
 * running llama.cpp's vocab test files (NAME.gguf.inp / NAME.gguf.out). */
#ifndef OKV_TESTS_TOKENIZER_UTIL_H
#define OKV_TESTS_TOKENIZER_UTIL_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "golden.h"
#include "offkv/offkv.h"

/* The tokenizer of a GGUF file (CHECKed; NULL on failure). */
static inline okv_tokenizer *tu_tokenizer_file(const char *path) {
    okv_error err = {0};
    okv_gguf *g = okv_gguf_open(path, &err);
    okv_tokenizer *t = g ? okv_tokenizer_from_gguf(g, &err) : NULL;
    okv_gguf_close(g); /* the tokenizer copies what it needs */
    CHECK(t != NULL, "tokenizer of %s: %s", path, err.message);
    return t;
}

/* Writes a SentencePiece vocabulary of n tokens (types[i]: okv_token_type)
 * to path, with the u32 keys keys[i] = vals[i] (n_keys of them, names under
 * tokenizer.ggml.); false after a CHECK failure. */
static inline bool tu_write_spm_vocab(const char *path, const char *const *tokens, const int32_t *types, uint64_t n,
                                      const char *const *keys, const uint32_t *vals, int n_keys) {
    okv_error err = {0};
    okv_gguf_writer *w = okv_gguf_writer_create(&err);
    bool ok = w && okv_gguf_writer_add_str(w, "general.architecture", "llama", &err) == OKV_OK &&
              okv_gguf_writer_add_str(w, "tokenizer.ggml.model", "llama", &err) == OKV_OK &&
              okv_gguf_writer_add_array(w, "tokenizer.ggml.tokens", OKV_GGUF_STRING, tokens, n, &err) == OKV_OK &&
              okv_gguf_writer_add_array(w, "tokenizer.ggml.token_type", OKV_GGUF_I32, types, n, &err) == OKV_OK;
    for (int i = 0; ok && i < n_keys; i++) {
        char key[128];
        snprintf(key, sizeof key, "tokenizer.ggml.%s", keys[i]);
        ok = okv_gguf_writer_add_u32(w, key, vals[i], &err) == OKV_OK;
    }
    ok = ok && okv_gguf_writer_write(w, path, &err) == OKV_OK;
    okv_gguf_writer_free(w);
    CHECK(ok, "writing %s: %s", path, err.message);
    return ok;
}

/* The tokenizer of shared/vocab/ggml-vocab-NAME.gguf. */
static inline okv_tokenizer *tu_shared_vocab(const char *shared, const char *name) {
    char path[4096];
    snprintf(path, sizeof path, "%s/vocab/ggml-vocab-%s.gguf", shared, name);
    return tu_tokenizer_file(path);
}

/* Encodes NUL-terminated text with flags into ids (at most 256). */
static inline size_t tu_encode(const okv_tokenizer *t, const char *text, unsigned flags,
                               int32_t *ids) {
    okv_error err;
    size_t n = 0;
    okv_status st = okv_tokenizer_encode(t, text, strlen(text), flags, ids, 256, &n, &err);
    CHECK(st == OKV_OK, "encode \"%s\": %s", text, err.message);
    return st == OKV_OK ? n : 0;
}

/* CHECKs that text encodes to want[0..n_want). */
#define CHECK_IDS(t, text, flags, ...)                                                       \
    do {                                                                                     \
        const int32_t want_[] = {__VA_ARGS__};                                               \
        int32_t got_[256];                                                                   \
        size_t n_ = tu_encode((t), (text), (flags), got_);                                   \
        size_t nw_ = sizeof want_ / sizeof want_[0];                                         \
        int same_ = n_ == nw_ && memcmp(got_, want_, n_ * sizeof *got_) == 0;                \
        char s_[512];                                                                        \
        size_t o_ = 0;                                                                       \
        for (size_t i_ = 0; i_ < n_ && o_ < sizeof s_ - 16; i_++)                            \
            o_ += (size_t)snprintf(s_ + o_, sizeof s_ - o_, " %d", (int)got_[i_]);           \
        s_[o_] = 0;                                                                          \
        CHECK(same_, "\"%s\" gave%s", (text), s_);                                          \
    } while (0)

/* Joins the pieces of ids[0..n) into buf (NUL-terminated); returns the
 * length. */
static inline size_t tu_decode(const okv_tokenizer *t, const int32_t *ids, size_t n, int special,
                               char *buf, size_t cap) {
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        size_t k = 0;
        okv_error err;
        okv_status st = okv_tokenizer_token_to_piece(t, ids[i], special, buf + o, cap - 1 - o, &k, &err);
        if (st != OKV_OK) {
            CHECK(st == OKV_OK, "piece of %d: %s", (int)ids[i], err.message);
            break;
        }
        o += k;
    }
    buf[o] = 0;
    return o;
}

/* Runs every test string of shared/vocab/ggml-vocab-NAME.gguf.inp through a
 * tokenizer made from the GGUF file, as llama.cpp's test-tokenizer-0 does
 * (no BOS/EOS, special tokens not parsed), CHECKing the ids against .out
 * and, for each, that the pieces join back into the input (with the
 * leading space a SentencePiece prefix adds, when strip_prefix).  Returns
 * the number of strings that matched; *n_total gets how many there were. */
static inline int tu_run_vocab(const char *shared, const char *name, int strip_prefix,
                               int *n_total) {
    char path[4096];
    *n_total = 0;
    okv_error err;
    okv_tokenizer *t = tu_shared_vocab(shared, name);
    if (!t) return 0;
    size_t in_len, out_len;
    snprintf(path, sizeof path, "%s/vocab/ggml-vocab-%s.gguf.inp", shared, name);
    char *inp = golden_read(path, &in_len);
    snprintf(path, sizeof path, "%s/vocab/ggml-vocab-%s.gguf.out", shared, name);
    char *out = golden_read(path, &out_len);
    CHECK(inp && out, "read %s(.inp)", path);
    int passed = 0;
    const char *sep = "\n__ggml_vocab_test__\n";
    size_t sep_len = strlen(sep);
    char *p = inp, *line = out;
    while (inp && out && p < inp + in_len) {
        char *q = strstr(p, sep);
        size_t len = q ? (size_t)(q - p) : strlen(p);
        char *eol = line ? strchr(line, '\n') : NULL;
        CHECK(line && *line, "%s: .out has fewer lines than .inp has strings", name);
        if (!line || !*line) break;
        if (eol) *eol = 0;
        int32_t want[1024];
        size_t n_want = 0;
        for (char *s = line, *e;; s = e) {
            long v = strtol(s, &e, 10);
            if (e == s || n_want == 1024) break;
            want[n_want++] = (int32_t)v;
        }
        line = eol ? eol + 1 : NULL;
        (*n_total)++;

        size_t n = 0;
        okv_status st = okv_tokenizer_encode(t, p, len, 0, NULL, 0, &n, &err);
        int32_t *got = malloc((n ? n : 1) * sizeof *got);
        if (st == OKV_OK && got) st = okv_tokenizer_encode(t, p, len, 0, got, n, &n, &err);
        int same = st == OKV_OK && got && n == n_want && memcmp(got, want, n * sizeof *got) == 0;
        if (same) {
            passed++;
        } else {
            char s[1024];
            size_t o = 0;
            for (size_t i = 0; got && i < n && o < sizeof s - 16; i++)
                o += (size_t)snprintf(s + o, sizeof s - o, " %d", (int)got[i]);
            s[o] = 0;
            CHECK(same, "%s: \"%.*s\" gave%s (%s)", name, (int)len, p, s, err.message);
        }
        if (same) {
            /* A byte-level or byte-fallback vocabulary loses nothing: the
             * pieces give the input back. */
            size_t cap = 4 * len + 16;
            char *dec = malloc(cap);
            size_t dn = dec ? tu_decode(t, got, n, 0, dec, cap) : 0;
            const char *back = dec;
            if (dec && strip_prefix && dn > 0 && dec[0] == ' ') back++, dn--;
            CHECK(dec && dn == len && memcmp(back, p, len) == 0, "%s: \"%.*s\" decodes to \"%s\"",
                  name, (int)len, p, dec ? back : "(no memory)");
            free(dec);
        }
        free(got);
        if (!q) break;
        p = q + sep_len;
    }
    free(inp);
    free(out);
    okv_tokenizer_free(t);
    return passed;
}

#endif
