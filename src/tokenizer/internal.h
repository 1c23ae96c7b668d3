/* Internal: the tokenizer's tables and the pieces its algorithms share. */
#ifndef OKV_TOKENIZER_INTERNAL_H
#define OKV_TOKENIZER_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "core/hash.h"
#include "offkv/tokenizer.h"

typedef enum tok_model { TOK_SPM, TOK_BPE } tok_model;

/* Open-addressing table of int32 values keyed by strings that live
 * elsewhere (the caller's key callback reads them). */
typedef struct str_table {
    int32_t *slots;   /* -1 = empty */
    size_t mask;      /* capacity - 1, capacity a power of two */
    okv_hash_key key; /* the file chooses the strings: see core/hash.h */
} str_table;

typedef struct tok_merge {
    uint32_t off;   /* into the merge arena */
    uint32_t len;
    uint32_t split; /* length of the left part; the right starts at split + 1 */
} tok_merge;

struct pretok; /* compiled pre-tokenizer regexes (pretok.c) */

struct okv_tokenizer {
    tok_model model;
    int32_t n_tokens;
    char *text;          /* all token strings, back to back */
    uint32_t *text_off;  /* n_tokens + 1 offsets into text */
    float *scores;       /* n_tokens */
    uint8_t *types;      /* n_tokens okv_token_type */
    str_table by_text;   /* token string -> id */

    int32_t bos_id, eos_id, unk_id, pad_id;
    bool add_bos, add_eos, add_space_prefix;
    int32_t *eog; /* the ids that end a generation, ascending (eog.c) */
    int32_t n_eog;
    int32_t fim[OKV_FIM_N]; /* fill-in-the-middle ids by okv_fim_role, -1: none (fim.c) */

    /* Tokens split out of raw text before the model runs, longest first:
     * control, user-defined and unknown tokens (llama.cpp's special cache). */
    int32_t *special;
    int32_t n_special;
    /* Indexes into special, their texts in byte order: one pass over a text
     * finds the specials it holds (gemma3's 6 000 were each searched for
     * through the whole text: 1.2 MB took 7 s). */
    int32_t *special_lex;
    int32_t special_first[257]; /* special_lex[special_first[c] .. special_first[c + 1]) begin with byte c */

    /* gpt2 only */
    char *merge_text;
    tok_merge *merges;
    int32_t n_merges;
    str_table by_merge;  /* (left, right) -> rank */
    bool ignore_merges;  /* a pre-token that is itself a token skips the merges */
    /* At most how many bytes of input one id can stand for, so a text of
     * len bytes needs at least len / this ids; 0 when no such bound holds
     * (a BPE vocabulary that can drop bytes: see tokenizer.c). */
    size_t bytes_per_id;
    struct pretok *pre;
    uint32_t byte_cp[256];   /* byte -> code point of GPT-2's printable mapping */
    int16_t cp_byte[324];    /* and back (-1: not a mapped code point) */
};

/* ---- string table ---- */

/* The slot hashes of a token text and of a merge's (left, right) pair. */
static inline uint64_t tok_text_hash(const str_table *tb, const char *s, size_t n) { return okv_hash(&tb->key, s, n); }
static inline uint64_t tok_pair_hash(const str_table *tb, const char *l, size_t ln, const char *r, size_t rn) {
    char buf[128]; /* most pairs: one hash of "left right" */
    if (ln + rn < sizeof buf) {
        memcpy(buf, l, ln);
        buf[ln] = ' ';
        memcpy(buf + ln + 1, r, rn);
        return okv_hash(&tb->key, buf, ln + 1 + rn);
    }
    return okv_hash(&tb->key, l, ln) * 0x9e3779b97f4a7c15ull + okv_hash(&tb->key, r, rn);
}

/* Id of the token whose text is s[0..n), or -1. */
int32_t okv_tok_find(const okv_tokenizer *t, const char *s, size_t n);

/* Fills t->fim from d's fim_ids and t's texts (fim.c); needs the texts. */
okv_status okv_tok_build_fim(okv_tokenizer *t, const okv_vocab_desc *d, okv_error *err);

/* Fills t->eog from t's texts, its EOS, d's eog_ids and the FIM pad,
 * repository and file separator (eog.c); needs the texts, ids and t->fim
 * set. */
okv_status okv_tok_build_eog(okv_tokenizer *t, const okv_vocab_desc *d, okv_error *err);

/* Rank of merging left and right, or -1. */
int32_t okv_tok_merge_rank(const okv_tokenizer *t, const char *l, size_t ln, const char *r, size_t rn);

static inline const char *tok_text(const okv_tokenizer *t, int32_t id, size_t *n) {
    *n = t->text_off[id + 1] - t->text_off[id];
    return t->text + t->text_off[id];
}

/* Bytes of the UTF-8 sequence that lead byte c starts, by its high nibble,
 * as llama.cpp counts (a stray continuation byte counts as one). */
static inline size_t tok_utf8_len(unsigned char c) {
    static const uint8_t lookup[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
    return lookup[c >> 4];
}

/* ---- growable id list ---- */

typedef struct id_list {
    int32_t *v;
    size_t n, cap;
} id_list;

bool okv_tok_ids_push(id_list *l, int32_t id);

/* ---- symbols and the bigram heap both models merge with ---- */

typedef struct tok_symbol {
    int32_t prev, next;
    size_t off, n; /* bytes of the text being merged */
} tok_symbol;

/* Splits s[0..len) into one symbol per UTF-8 character (a truncated final
 * sequence is one symbol), linked as a list; returns the count.  sym holds
 * at least len entries. */
static inline int32_t tok_split_chars(const char *s, size_t len, tok_symbol *sym) {
    int32_t n_sym = 0;
    for (size_t off = 0; off < len;) {
        size_t n = tok_utf8_len((unsigned char)s[off]);
        if (n > len - off) n = len - off;
        sym[n_sym] = (tok_symbol){n_sym - 1, off + n == len ? -1 : n_sym + 1, off, n};
        n_sym++;
        off += n;
    }
    return n_sym;
}

typedef struct tok_bigram {
    int32_t left, right;
    float score; /* spm: higher merges first */
    int32_t rank; /* bpe: lower merges first */
    size_t size;
} tok_bigram;

typedef struct bigram_heap {
    tok_bigram *v;
    size_t n, cap;
    bool by_rank; /* bpe order, else spm order */
} bigram_heap;

bool okv_tok_heap_push(bigram_heap *h, tok_bigram b);
tok_bigram okv_tok_heap_pop(bigram_heap *h);

/* ---- the models ---- */

/* SentencePiece: appends the ids of text[0..len) (already escaped: spaces
 * are U+2581) to out.  Returns false when memory runs out, or with
 * *no_byte set to the byte no token can stand for. */
bool okv_spm_encode(const okv_tokenizer *t, const char *text, size_t len, id_list *out,
                int *no_byte);

/* Byte-level BPE: pre-tokenizes text[0..len) and appends the ids of each
 * piece, stopping after the piece that takes out past limit ids (SIZE_MAX:
 * all of them).  Returns an okv_status (pretok failures carry a message). */
okv_status okv_bpe_encode(const okv_tokenizer *t, const char *text, size_t len, id_list *out, size_t limit,
                          okv_error *err);

/* ---- pre-tokenizer (pretok.c) ---- */

/* Compiles the regexes pre names; OKV_ERR_UNSUPPORTED for an unknown name.
 * *ignore_merges and *add_bos_default get llama.cpp's per-name flags. */
okv_status okv_pretok_create(const char *name, struct pretok **out, bool *ignore_merges,
                         bool *add_bos_default, okv_error *err);
void okv_pretok_free(struct pretok *p);

/* Splits text[0..len) into words as llama.cpp's unicode_regex_split does,
 * each word already mapped to GPT-2's printable byte characters.  On OKV_OK
 * *buf holds the words back to back and (*ends)[i] is where word i ends; the
 * caller frees both. */
okv_status okv_pretok_split(const okv_tokenizer *t, const char *text, size_t len, char **buf,
                        size_t **ends, size_t *n_words, okv_error *err);

/* Appends the UTF-8 encoding of code point cp to dst; returns bytes written. */
size_t okv_tok_utf8_put(uint32_t cp, char *dst);

/* Decodes the code point at s[0..n) (n >= 1) as llama.cpp does and returns
 * the bytes it takes; an invalid or truncated sequence is U+FFFD taking
 * one byte. */
size_t okv_tok_utf8_next(const char *s, size_t n, uint32_t *cp);

/* Decodes text into code points as llama.cpp does: each invalid byte is
 * U+FFFD.  cps must have room for len entries; returns the count. */
size_t okv_tok_utf8_decode(const char *text, size_t len, uint32_t *cps);

#endif
