/* libFuzzer target: the tokenizers, encode and decode, on every vocabulary
 * in ../shared/vocab (SentencePiece: llama-spm, phi-3, gemma3; byte-level
 * BPE with several pre-tokenizers: gpt-2, starcoder, deepseek-coder, llama3).
 *
 * Input: byte 0 picks the vocabulary, byte 1 the flags, the rest is text.
 * Checked: counting and filling agree; every id is in range and decodes;
 * decoded pieces streamed through the UTF-8 holder come out valid UTF-8;
 * byte-level BPE gives back exactly the text it was given (when the text is
 * valid UTF-8, every byte has its token and no special tokens are parsed); ids taken from the input,
 * in range or not, decode or are refused. */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "offkv/offkv.h"
#include "offkv/tokenizer.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

#define MAX_VOCABS 16
static okv_tokenizer *vocabs[MAX_VOCABS];
static int is_bpe[MAX_VOCABS];
static int n_vocabs;
/* has_byte[v][b]: vocabulary v has the byte-level token of byte b.  Some do
 * not (starcoder lacks 0xf1's "ñ"); llama.cpp then drops the byte, and so
 * does offkv, so text with such a byte cannot come back whole. */
static unsigned char has_byte[MAX_VOCABS][256];

/* GPT-2's byte-to-character map: printable Latin-1 bytes stand for
 * themselves, the rest for U+0100 upwards in byte order. */
static void mark_bytes(int v) {
    uint32_t cp_of[256];
    for (int b = 0, n = 0; b < 256; b++)
        cp_of[b] = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174) ? (uint32_t)b : 256u + (uint32_t)n++;
    for (int32_t id = 0; id < okv_tokenizer_n_vocab(vocabs[v]); id++) {
        size_t len = 0;
        const unsigned char *t = (const unsigned char *)okv_tokenizer_token_text(vocabs[v], id, &len);
        uint32_t cp;
        if (len == 1 && t[0] < 0x80) cp = t[0];
        else if (len == 2 && (t[0] >> 5) == 6 && (t[1] >> 6) == 2) cp = (uint32_t)(t[0] & 0x1f) << 6 | (t[1] & 0x3f);
        else continue;
        for (int b = 0; b < 256; b++)
            if (cp_of[b] == cp) has_byte[v][b] = 1;
    }
}

static int all_bytes_known(int v, const unsigned char *s, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (!has_byte[v][s[i]]) return 0;
    return 1;
}

static int by_name(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc; (void)argv;
    const char *shared = getenv("OKV_SHARED");
#ifdef OKV_SHARED_DEFAULT
    if (!shared) shared = OKV_SHARED_DEFAULT;
#endif
    if (!shared) shared = "../shared";
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/vocab", shared);
    DIR *d = opendir(dir);
    if (!d) {
        printf("fuzz_tokenizer: skipped: %s not found (set OKV_SHARED)\n", dir);
        return 0;
    }
    char *names[MAX_VOCABS];
    int n = 0;
    for (struct dirent *e; (e = readdir(d)) && n < MAX_VOCABS;) {
        size_t len = strlen(e->d_name);
        if (len > 5 && strcmp(e->d_name + len - 5, ".gguf") == 0) names[n++] = strdup(e->d_name);
    }
    closedir(d);
    qsort(names, (size_t)n, sizeof *names, by_name); /* a fixed order: byte 0 means the same vocabulary */
    for (int i = 0; i < n; i++) {
        char path[8192];
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        okv_error err;
        okv_gguf *g = okv_gguf_open(path, &err);
        okv_tokenizer *tok = g ? okv_tokenizer_from_gguf(g, &err) : NULL;
        if (!tok) {
            fprintf(stderr, "fuzz_tokenizer: %s: %s\n", path, err.message);
            abort();
        }
        const char *model;
        size_t mlen;
        is_bpe[n_vocabs] = okv_gguf_get_str(g, "tokenizer.ggml.model", &model, &mlen, &err) == OKV_OK &&
                           mlen == 4 && memcmp(model, "gpt2", 4) == 0;
        okv_gguf_close(g);
        vocabs[n_vocabs] = tok;
        if (is_bpe[n_vocabs]) mark_bytes(n_vocabs);
        n_vocabs++;
        free(names[i]);
    }
    return 0;
}

static int valid_utf8(const unsigned char *s, size_t n) {
    for (size_t i = 0; i < n;) {
        unsigned c = s[i];
        size_t len = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
        if (!len || i + len > n) return 0;
        uint32_t cp = len == 1 ? c : len == 2 ? (c & 0x1f) : len == 3 ? (c & 0x0f) : (c & 0x07);
        for (size_t j = 1; j < len; j++) {
            if ((s[i + j] & 0xc0) != 0x80) return 0;
            cp = (cp << 6) | (s[i + j] & 0x3f);
        }
        static const uint32_t min[5] = {0, 0, 0x80, 0x800, 0x10000};
        if (cp < min[len] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return 0;
        i += len;
    }
    return 1;
}

/* Decodes one id into *out (grown as needed); returns its length, or
 * (size_t)-1 when the tokenizer refuses it. */
static size_t piece(const okv_tokenizer *tok, int32_t id, int special, char **out, size_t *cap) {
    size_t n = 0;
    okv_error err;
    okv_status st = okv_tokenizer_token_to_piece(tok, id, special, *out, *cap, &n, &err);
    if (st == OKV_OK) return n;
    if (id < 0 || id >= okv_tokenizer_n_vocab(tok)) return (size_t)-1;
    if (n <= *cap) __builtin_trap(); /* refused with room enough */
    char *grown = realloc(*out, n);
    if (!grown) abort();
    *out = grown;
    *cap = n;
    if (okv_tokenizer_token_to_piece(tok, id, special, *out, *cap, &n, &err) != OKV_OK) __builtin_trap();
    return n;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (n_vocabs == 0 || size < 2) return 0;
    const int v = data[0] % n_vocabs;
    const okv_tokenizer *tok = vocabs[v];
    const unsigned flags = data[1] & 3u;
    const char *text = (const char *)data + 2;
    const size_t len = size - 2;
    okv_error err;
    size_t n_need = 0;
    okv_tokenizer_encode(tok, text, len, flags, NULL, 0, &n_need, &err);
    int32_t *ids = malloc((n_need + 1) * sizeof *ids);
    size_t n = 0;
    if (!ids) abort();
    if (okv_tokenizer_encode(tok, text, len, flags, ids, n_need, &n, &err) != OKV_OK || n != n_need)
        __builtin_trap();
    if (n_need > 0 &&
        okv_tokenizer_encode(tok, text, len, flags, ids, n_need - 1, &n, &err) != OKV_ERR_INVALID)
        __builtin_trap(); /* one slot short must be refused, saying the size needed */
    const int32_t n_vocab = okv_tokenizer_n_vocab(tok);
    size_t cap = 64, joined_len = 0;
    char *buf = malloc(cap), *joined = malloc(len * 4 + 64);
    size_t joined_cap = len * 4 + 64;
    if (!buf || !joined) abort();
    okv_detok_stream us = {0};
    char *streamed = NULL;
    size_t streamed_len = 0;
    for (size_t i = 0; i < n_need; i++) {
        if (ids[i] < 0 || ids[i] >= n_vocab) __builtin_trap();
        size_t k = piece(tok, ids[i], 0, &buf, &cap);
        if (k == (size_t)-1) __builtin_trap();
        if (joined_len + k > joined_cap) {
            joined_cap = (joined_len + k) * 2;
            if (!(joined = realloc(joined, joined_cap))) abort();
        }
        memcpy(joined + joined_len, buf, k);
        joined_len += k;
        if (!(streamed = realloc(streamed, streamed_len + OKV_DETOK_ROOM(k)))) abort();
        streamed_len += okv_detok_stream_feed(&us, buf, k, streamed + streamed_len);
    }
    if (!(streamed = realloc(streamed, streamed_len + 4))) abort();
    streamed_len += okv_detok_stream_finish(&us, streamed + streamed_len);
    if (!valid_utf8((const unsigned char *)streamed, streamed_len)) __builtin_trap();
    if (is_bpe[v] && !(flags & OKV_TOKENIZE_PARSE_SPECIAL) && !(flags & OKV_TOKENIZE_ADD_SPECIAL) &&
        valid_utf8((const unsigned char *)text, len) && all_bytes_known(v, (const unsigned char *)text, len) &&
        (joined_len != len || memcmp(joined, text, len) != 0))
        __builtin_trap(); /* byte-level BPE lost or changed bytes */
    /* ids straight from the input: in range they decode, out of range they are refused */
    for (size_t i = 0; i + 4 <= len && i < 64; i += 4) {
        int32_t id;
        memcpy(&id, text + i, 4);
        if (i % 8 == 0) id = (int32_t)((uint32_t)id % (uint32_t)(n_vocab + 8)) - 4;
        size_t k = piece(tok, id, (int)(id & 1), &buf, &cap);
        if ((k == (size_t)-1) != (id < 0 || id >= n_vocab)) __builtin_trap();
        size_t tl = 0;
        const char *t = okv_tokenizer_token_text(tok, id, &tl);
        if ((t == NULL) != (id < 0 || id >= n_vocab)) __builtin_trap();
        (void)okv_tokenizer_token_type(tok, id);
    }
    free(streamed);
    free(joined);
    free(buf);
    free(ids);
    return 0;
}
