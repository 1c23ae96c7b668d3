/* The tokenizer object: vocabulary tables, the split of special tokens out
 * of raw text, and the entry points.  The models themselves live in spm.c
 * and bpe.c. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "tokenizer/internal.h"

/* ---- hashing and tables ---- */

static bool table_init(str_table *tb, size_t n) {
    size_t cap = 16;
    while (cap < 2 * n) cap *= 2;
    tb->slots = malloc(cap * sizeof *tb->slots);
    if (!tb->slots) return false;
    memset(tb->slots, 0xff, cap * sizeof *tb->slots);
    tb->mask = cap - 1;
    okv_hash_key_new(&tb->key);
    return true;
}

int32_t okv_tok_find(const okv_tokenizer *t, const char *s, size_t n) {
    size_t i = (size_t)tok_text_hash(&t->by_text, s, n) & t->by_text.mask;
    for (;;) {
        int32_t id = t->by_text.slots[i];
        if (id < 0) return -1;
        size_t tn;
        const char *ts = tok_text(t, id, &tn);
        if (tn == n && memcmp(ts, s, n) == 0) return id;
        i = (i + 1) & t->by_text.mask;
    }
}

int32_t okv_tok_merge_rank(const okv_tokenizer *t, const char *l, size_t ln, const char *r,
                       size_t rn) {
    if (!t->n_merges) return -1;
    size_t i = (size_t)tok_pair_hash(&t->by_merge, l, ln, r, rn) & t->by_merge.mask;
    for (;;) {
        int32_t rank = t->by_merge.slots[i];
        if (rank < 0) return -1;
        const tok_merge *m = &t->merges[rank];
        const char *ms = t->merge_text + m->off;
        /* The split must agree too: "a b c" is the pair ("a", "b c"),
         * never ("a b", "c"). */
        if (m->split == ln && m->len == ln + 1 + rn && memcmp(ms, l, ln) == 0 &&
            memcmp(ms + ln + 1, r, rn) == 0)
            return rank;
        i = (i + 1) & t->by_merge.mask;
    }
}

bool okv_tok_ids_push(id_list *l, int32_t id) {
    if (l->n == l->cap) {
        size_t cap = l->cap ? 2 * l->cap : 64;
        int32_t *v = realloc(l->v, cap * sizeof *v);
        if (!v) return false;
        l->v = v;
        l->cap = cap;
    }
    l->v[l->n++] = id;
    return true;
}

/* ---- bigram heap ---- */

/* llama.cpp's queue orders: spm by higher score, bpe by lower rank; ties go
 * to the leftmost pair. */
static bool heap_before(const bigram_heap *h, const tok_bigram *a, const tok_bigram *b) {
    if (h->by_rank) {
        if (a->rank != b->rank) return a->rank < b->rank;
    } else {
        if (a->score != b->score) return a->score > b->score;
    }
    return a->left < b->left;
}

bool okv_tok_heap_push(bigram_heap *h, tok_bigram b) {
    if (h->n == h->cap) {
        size_t cap = h->cap ? 2 * h->cap : 64;
        tok_bigram *v = realloc(h->v, cap * sizeof *v);
        if (!v) return false;
        h->v = v;
        h->cap = cap;
    }
    size_t i = h->n++;
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (!heap_before(h, &b, &h->v[p])) break;
        h->v[i] = h->v[p];
        i = p;
    }
    h->v[i] = b;
    return true;
}

tok_bigram okv_tok_heap_pop(bigram_heap *h) {
    tok_bigram top = h->v[0];
    tok_bigram last = h->v[--h->n];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= h->n) break;
        if (c + 1 < h->n && heap_before(h, &h->v[c + 1], &h->v[c])) c++;
        if (!heap_before(h, &h->v[c], &last)) break;
        h->v[i] = h->v[c];
        i = c;
    }
    if (h->n) h->v[i] = last;
    return top;
}

/* ---- construction ---- */

void okv_tokenizer_free(okv_tokenizer *t) {
    if (!t) return;
    free(t->text);
    free(t->text_off);
    free(t->scores);
    free(t->types);
    free(t->by_text.slots);
    free(t->special);
    free(t->special_lex);
    free(t->eog);
    free(t->merge_text);
    free(t->merges);
    free(t->by_merge.slots);
    okv_pretok_free(t->pre);
    free(t);
}

static size_t str_len(const char *const *s, const size_t *lens, int32_t i) {
    return lens ? lens[i] : (s[i] ? strlen(s[i]) : 0);
}

static okv_status check_id(int32_t id, int32_t n, const char *what, okv_error *err) {
    if (id < -1 || id >= n)
        return okv_fail(err, OKV_ERR_INVALID, "tokenizer: %s %d is outside the vocabulary (0..%d, or -1)",
                        what, id, n - 1);
    return OKV_OK;
}

typedef struct special_key {
    size_t len;
    int32_t id;
} special_key;

static int special_cmp(const void *a, const void *b) {
    const special_key *x = a, *y = b;
    if (x->len != y->len) return x->len > y->len ? -1 : 1;
    return (x->id > y->id) - (x->id < y->id);
}

typedef struct lex_key {
    const unsigned char *s;
    size_t n;
    int32_t k; /* index into special */
} lex_key;

static int lex_cmp(const void *a, const void *b) {
    const lex_key *x = a, *y = b;
    const size_t n = x->n < y->n ? x->n : y->n;
    const int c = n ? memcmp(x->s, y->s, n) : 0;
    if (c) return c;
    return (x->n > y->n) - (x->n < y->n); /* a prefix first */
}

/* t->special_lex: the specials in byte order of their texts. */
static okv_status build_special_lex(okv_tokenizer *t, okv_error *err) {
    lex_key *keys = malloc(((size_t)t->n_special + 1) * sizeof *keys);
    t->special_lex = malloc(((size_t)t->n_special + 1) * sizeof *t->special_lex);
    if (!keys || !t->special_lex) {
        free(keys);
        return okv_fail(err, OKV_ERR_NOMEM, "tokenizer: out of memory");
    }
    for (int32_t k = 0; k < t->n_special; k++) {
        size_t n;
        const char *s = tok_text(t, t->special[k], &n);
        keys[k] = (lex_key){(const unsigned char *)s, n, k};
    }
    qsort(keys, (size_t)t->n_special, sizeof *keys, lex_cmp);
    for (int32_t k = 0; k < t->n_special; k++) t->special_lex[k] = keys[k].k;
    /* an empty text sorts first and matches nowhere: skipped */
    int32_t k = 0;
    for (int c = 0; c <= 256; c++) {
        while (k < t->n_special && (keys[k].n == 0 || keys[k].s[0] < c)) k++;
        t->special_first[c] = k;
    }
    free(keys);
    return OKV_OK;
}

static okv_status build_texts(okv_tokenizer *t, const okv_vocab_desc *d, okv_error *err) {
    int32_t n = d->n_tokens;
    size_t total = 0;
    for (int32_t i = 0; i < n; i++) {
        if (!d->tokens[i] && (!d->token_lens || d->token_lens[i]))
            return okv_fail(err, OKV_ERR_INVALID, "tokenizer: token %d is NULL", i);
        size_t len = str_len(d->tokens, d->token_lens, i);
        total += len ? len : 32;
        if (total > UINT32_MAX - 64)
            return okv_fail(err, OKV_ERR_INVALID, "tokenizer: token texts exceed 4 GiB");
    }
    t->text = malloc(total ? total : 1);
    t->text_off = malloc(((size_t)n + 1) * sizeof *t->text_off);
    if (!t->text || !t->text_off) return okv_fail(err, OKV_ERR_NOMEM, "tokenizer: out of memory");
    uint32_t off = 0;
    for (int32_t i = 0; i < n; i++) {
        t->text_off[i] = off;
        size_t len = str_len(d->tokens, d->token_lens, i);
        if (len) {
            memcpy(t->text + off, d->tokens[i], len);
            off += (uint32_t)len;
        } else {
            /* llama.cpp's name for an empty token, so it stays unique. */
            off += (uint32_t)snprintf(t->text + off, 32, "[EMPTY_%d]", (int)i);
        }
    }
    t->text_off[n] = off;
    if (!table_init(&t->by_text, (size_t)n))
        return okv_fail(err, OKV_ERR_NOMEM, "tokenizer: out of memory");
    for (int32_t id = 0; id < n; id++) {
        size_t len;
        const char *s = tok_text(t, id, &len);
        size_t i = (size_t)tok_text_hash(&t->by_text, s, len) & t->by_text.mask;
        while (t->by_text.slots[i] >= 0) {
            int32_t other = t->by_text.slots[i];
            size_t on;
            const char *os = tok_text(t, other, &on);
            if (on == len && memcmp(os, s, len) == 0)
                return okv_fail(err, OKV_ERR_INVALID,
                                "tokenizer: tokens %d and %d are both \"%.*s\"", (int)other,
                                (int)id, (int)(len > 64 ? 64 : len), s);
            i = (i + 1) & t->by_text.mask;
        }
        t->by_text.slots[i] = id;
    }
    return OKV_OK;
}

static okv_status build_merges(okv_tokenizer *t, const okv_vocab_desc *d, okv_error *err) {
    if (d->n_merges < 0)
        return okv_fail(err, OKV_ERR_INVALID, "tokenizer: n_merges %d < 0", (int)d->n_merges);
    if (d->n_merges > 0 && !d->merges)
        return okv_fail(err, OKV_ERR_INVALID, "tokenizer: %d merges but merges is NULL",
                        (int)d->n_merges);
    size_t total = 0;
    for (int32_t i = 0; i < d->n_merges; i++) {
        if (!d->merges[i] && (!d->merge_lens || d->merge_lens[i]))
            return okv_fail(err, OKV_ERR_INVALID, "tokenizer: merge %d is NULL", (int)i);
        total += str_len(d->merges, d->merge_lens, i);
        if (total > UINT32_MAX)
            return okv_fail(err, OKV_ERR_INVALID, "tokenizer: merge texts exceed 4 GiB");
    }
    t->merge_text = malloc(total ? total : 1);
    t->merges = malloc(((size_t)d->n_merges + 1) * sizeof *t->merges);
    if (!t->merge_text || !t->merges || !table_init(&t->by_merge, (size_t)d->n_merges))
        return okv_fail(err, OKV_ERR_NOMEM, "tokenizer: out of memory");
    uint32_t off = 0;
    for (int32_t r = 0; r < d->n_merges; r++) {
        size_t len = str_len(d->merges, d->merge_lens, r);
        const char *s = d->merges[r];
        memcpy(t->merge_text + off, s, len);
        /* As llama.cpp: split at the first space after the first byte. */
        const char *sp = len > 1 ? memchr(s + 1, ' ', len - 1) : NULL;
        t->merges[r] = (tok_merge){off, (uint32_t)len, sp ? (uint32_t)(sp - s) : 0};
        off += (uint32_t)len;
        if (!sp) continue; /* llama.cpp keys it as ("", ""), which never matches */
        size_t i = (size_t)tok_pair_hash(&t->by_merge, s, sp - s, sp + 1, len - (size_t)(sp - s) - 1) &
                   t->by_merge.mask;
        bool dup = false;
        while (t->by_merge.slots[i] >= 0) {
            const tok_merge *m = &t->merges[t->by_merge.slots[i]];
            if (m->len == len && m->split == t->merges[r].split &&
                memcmp(t->merge_text + m->off, s, len) == 0) {
                dup = true; /* the first (lowest) rank wins, as with emplace */
                break;
            }
            i = (i + 1) & t->by_merge.mask;
        }
        if (!dup) t->by_merge.slots[i] = r;
    }
    t->n_merges = d->n_merges;
    /* GPT-2's table: printable bytes stand for themselves, the rest take
     * code points 256, 257, ... in byte order. */
    for (int i = 0; i < 324; i++) t->cp_byte[i] = -1;
    uint32_t next = 256;
    for (int b = 0; b < 256; b++) {
        bool self = (b >= 0x21 && b <= 0x7e) || (b >= 0xa1 && b <= 0xac) || (b >= 0xae);
        t->byte_cp[b] = self ? (uint32_t)b : next++;
        t->cp_byte[t->byte_cp[b]] = (int16_t)b;
    }
    return OKV_OK;
}

/* The bound behind okv_tokenizer_encode_max's refusal before any work.
 * SentencePiece: an id stands for at most the longest token's bytes of the
 * escaped text, which is never shorter than the input (invalid bytes become
 * byte tokens or the unknown token, one id each).  Byte-level BPE: input
 * decodes to code points as llama.cpp decodes it, overlong forms included,
 * so up to 4 input bytes may become 1 byte of text: 4 x the longest token;
 * and only when no byte can be dropped, that is when every byte-level
 * character and every merge's result is a token (otherwise a piece that is
 * no token falls apart into single bytes, and those that are no tokens
 * either give no id at all). */
static size_t bytes_per_id(const okv_tokenizer *t) {
    size_t most = 4;
    for (int32_t i = 0; i < t->n_tokens; i++) {
        const size_t n = t->text_off[i + 1] - t->text_off[i];
        if (n > most) most = n;
    }
    if (t->model == TOK_SPM) return most;
    for (int b = 0; b < 256; b++) {
        char c[4];
        if (okv_tok_find(t, c, okv_tok_utf8_put(t->byte_cp[b], c)) < 0) return 0;
    }
    for (int32_t r = 0; r < t->n_merges; r++) {
        const tok_merge *m = &t->merges[r];
        const char *s = t->merge_text + m->off;
        if (!m->split) continue; /* never applied */
        char buf[512];
        const size_t ln = m->split, rn = m->len - m->split - 1;
        if (ln + rn > sizeof buf) return 0;
        memcpy(buf, s, ln);
        memcpy(buf + ln, s + ln + 1, rn);
        if (okv_tok_find(t, buf, ln + rn) < 0) return 0;
    }
    return 4 * most;
}

okv_tokenizer *okv_tokenizer_create(const okv_vocab_desc *d, okv_error *err) {
    okv_error_clear(err);
    if (!d || !d->model) {
        okv_fail(err, OKV_ERR_INVALID, "tokenizer: %s is NULL", d ? "desc->model" : "desc");
        return NULL;
    }
    tok_model model;
    if (strcmp(d->model, "llama") == 0) {
        model = TOK_SPM;
    } else if (strcmp(d->model, "gpt2") == 0) {
        model = TOK_BPE;
    } else {
        okv_fail(err, OKV_ERR_UNSUPPORTED,
                 "tokenizer: model \"%s\" is not supported (known: llama, gpt2)", d->model);
        return NULL;
    }
    if (d->n_tokens < 1 || !d->tokens) {
        okv_fail(err, OKV_ERR_INVALID, "tokenizer: need n_tokens >= 1 and tokens (got %d, %s)",
                 (int)d->n_tokens, d->tokens ? "tokens" : "NULL");
        return NULL;
    }
    okv_tokenizer *t = calloc(1, sizeof *t);
    if (!t) {
        okv_fail(err, OKV_ERR_NOMEM, "tokenizer: out of memory");
        return NULL;
    }
    t->model = model;
    int32_t n = t->n_tokens = d->n_tokens;
    okv_status st = build_texts(t, d, err);
    if (st) goto fail;

    t->scores = calloc((size_t)n, sizeof *t->scores);
    t->types = malloc((size_t)n);
    if (!t->scores || !t->types) {
        st = okv_fail(err, OKV_ERR_NOMEM, "tokenizer: out of memory");
        goto fail;
    }
    if (d->scores) memcpy(t->scores, d->scores, (size_t)n * sizeof *t->scores);
    for (int32_t i = 0; i < n; i++) {
        int32_t ty = d->types ? d->types[i] : OKV_TOKEN_NORMAL;
        if (ty < OKV_TOKEN_UNDEFINED || ty > OKV_TOKEN_BYTE) {
            st = okv_fail(err, OKV_ERR_INVALID, "tokenizer: token %d has type %d (0..6 known)",
                          (int)i, (int)ty);
            goto fail;
        }
        t->types[i] = (uint8_t)ty;
    }

    if ((st = check_id(d->bos_id, n, "bos_id", err)) || (st = check_id(d->eos_id, n, "eos_id", err)) ||
        (st = check_id(d->unk_id, n, "unk_id", err)) || (st = check_id(d->pad_id, n, "pad_id", err)))
        goto fail;
    t->bos_id = d->bos_id;
    t->eos_id = d->eos_id;
    t->unk_id = d->unk_id;
    t->pad_id = d->pad_id;

    bool bos_default = model == TOK_SPM;
    if (model == TOK_BPE) {
        const char *pre = d->pre ? d->pre : "default";
        if ((st = okv_pretok_create(pre, &t->pre, &t->ignore_merges, &bos_default, err))) goto fail;
        if ((st = build_merges(t, d, err))) goto fail;
    }
    t->add_bos = d->add_bos < 0 ? bos_default : d->add_bos != 0;
    t->add_eos = d->add_eos < 0 ? false : d->add_eos != 0;
    t->add_space_prefix = model == TOK_SPM && (d->add_space_prefix < 0 || d->add_space_prefix);
    if (t->add_bos && t->bos_id < 0) {
        st = okv_fail(err, OKV_ERR_INVALID, "tokenizer: add_bos is set but there is no bos_id");
        goto fail;
    }
    if (t->add_eos && t->eos_id < 0) {
        st = okv_fail(err, OKV_ERR_INVALID, "tokenizer: add_eos is set but there is no eos_id");
        goto fail;
    }

    if ((st = okv_tok_build_fim(t, d, err)) || (st = okv_tok_build_eog(t, d, err))) goto fail;

    t->special = malloc((size_t)n * sizeof *t->special);
    special_key *keys = malloc((size_t)n * sizeof *keys);
    if (!t->special || !keys) {
        free(keys);
        st = okv_fail(err, OKV_ERR_NOMEM, "tokenizer: out of memory");
        goto fail;
    }
    for (int32_t i = 0; i < n; i++) {
        uint8_t ty = t->types[i];
        if (ty == OKV_TOKEN_CONTROL || ty == OKV_TOKEN_USER_DEFINED || ty == OKV_TOKEN_UNKNOWN)
            keys[t->n_special++] = (special_key){t->text_off[i + 1] - t->text_off[i], i};
    }
    /* Longest first, so "<|im_start|>" wins over "<|im"; then by id, where
     * llama.cpp's unstable sort leaves the order unspecified. */
    qsort(keys, (size_t)t->n_special, sizeof *keys, special_cmp);
    for (int32_t k = 0; k < t->n_special; k++) t->special[k] = keys[k].id;
    free(keys);
    if ((st = build_special_lex(t, err))) goto fail;
    t->bytes_per_id = bytes_per_id(t);
    return t;

fail:
    okv_tokenizer_free(t);
    (void)st;
    return NULL;
}

/* ---- encoding ---- */

typedef struct fragment {
    int32_t id; /* a whole token, or -1 for raw text */
    size_t off, len;
} fragment;

typedef struct frag_list {
    fragment *v;
    size_t n, cap;
} frag_list;

static bool frag_push(frag_list *l, fragment f) {
    if (l->n == l->cap) {
        size_t cap = l->cap ? 2 * l->cap : 16;
        fragment *v = realloc(l->v, cap * sizeof *v);
        if (!v) return false;
        l->v = v;
        l->cap = cap;
    }
    l->v[l->n++] = f;
    return true;
}

/* The byte at depth d of special k's text (-1 past its end: it sorts
 * first, as a prefix does). */
static int lex_byte(const okv_tokenizer *t, int32_t k, size_t d) {
    size_t n;
    const unsigned char *s = (const unsigned char *)tok_text(t, t->special[k], &n);
    return d < n ? s[d] : -1;
}

/* The first of special_lex[lo, hi) (sorted at depth d) whose byte d is
 * above c; hi when none is. */
static int32_t first_above(const okv_tokenizer *t, int32_t lo, int32_t hi, size_t d, int c) {
    while (lo < hi) {
        const int32_t m = lo + (hi - lo) / 2;
        if (lex_byte(t, t->special_lex[m], d) <= c) lo = m + 1;
        else hi = m;
    }
    return lo;
}

/* present[k]: whether special k's text occurs in text.  At each position,
 * the specials beginning with its byte (a table), then those matching the
 * text so far, narrowed by binary search a byte at a time. */
static void specials_present(const okv_tokenizer *t, const unsigned char *text, size_t len, bool *present) {
    const int32_t *lex = t->special_lex;
    for (size_t i = 0; i < len; i++) {
        int32_t lo = t->special_first[text[i]], hi = t->special_first[text[i] + 1];
        for (size_t d = 1; lo < hi; d++) {
            /* entries that end here match whole (they sort first) */
            while (lo < hi && lex_byte(t, lex[lo], d) < 0) present[lex[lo++]] = true;
            if (lo >= hi || i + d >= len) break;
            const int c = text[i + d];
            const int32_t from = first_above(t, lo, hi, d, c - 1);
            hi = first_above(t, from, hi, d, c);
            lo = from;
        }
    }
}

/* Splits special tokens out of the raw text, one token at a time, longest
 * first (llama.cpp's tokenizer_st_partition, without the per-model
 * lstrip/rstrip attributes that GGUF files do not carry). */
static bool partition(const okv_tokenizer *t, const char *text, size_t len, bool parse_special,
                      frag_list *out) {
    frag_list cur = {0}, next = {0};
    if (len && !frag_push(&cur, (fragment){-1, 0, len})) return false;
    /* Only the specials the text holds are searched for (a piece of the
     * text holds no other). */
    bool *present = t->n_special && len ? calloc((size_t)t->n_special, sizeof *present) : NULL;
    if (t->n_special && len && !present) {
        free(cur.v);
        return false;
    }
    if (present) specials_present(t, (const unsigned char *)text, len, present);
    for (int32_t k = 0; k < t->n_special && cur.n; k++) {
        if (!present[k]) continue;
        int32_t id = t->special[k];
        uint8_t ty = t->types[id];
        if (!parse_special && (ty == OKV_TOKEN_CONTROL || ty == OKV_TOKEN_UNKNOWN)) continue;
        size_t tn;
        const char *ts = tok_text(t, id, &tn);
        next.n = 0;
        for (size_t f = 0; f < cur.n; f++) {
            fragment fr = cur.v[f];
            if (fr.id >= 0 || fr.len < tn) {
                if (!frag_push(&next, fr)) goto nomem;
                continue;
            }
            size_t pos = fr.off, end = fr.off + fr.len;
            for (;;) {
                const char *hit = memmem(text + pos, end - pos, ts, tn);
                if (!hit) break;
                size_t at = (size_t)(hit - text);
                if (at > pos && !frag_push(&next, (fragment){-1, pos, at - pos})) goto nomem;
                if (!frag_push(&next, (fragment){id, 0, 0})) goto nomem;
                pos = at + tn;
            }
            if (pos < end && !frag_push(&next, (fragment){-1, pos, end - pos})) goto nomem;
        }
        frag_list tmp = cur;
        cur = next;
        next = tmp;
    }
    free(next.v);
    free(present);
    *out = cur;
    return true;
nomem:
    free(cur.v);
    free(next.v);
    free(present);
    return false;
}

/* SentencePiece sees spaces as U+2581, and a leading one when the text
 * starts the input or follows a special token. */
static char *spm_escape(const char *s, size_t len, bool prefix, size_t *out_len) {
    size_t n = prefix ? 3 : 0;
    for (size_t i = 0; i < len; i++) n += s[i] == ' ' ? 3 : 1;
    char *buf = malloc(n ? n : 1);
    if (!buf) return NULL;
    size_t o = 0;
    if (prefix) {
        memcpy(buf, "\xe2\x96\x81", 3);
        o = 3;
    }
    for (size_t i = 0; i < len; i++) {
        if (s[i] == ' ') {
            memcpy(buf + o, "\xe2\x96\x81", 3);
            o += 3;
        } else {
            buf[o++] = s[i];
        }
    }
    *out_len = n;
    return buf;
}

/* The most input bytes one token can stand for: no more than the bytes of
 * its text (SPM's U+2581 and GPT-2's printable code points are as long as
 * or longer than the bytes they stand for; a byte token's "<0xXX>" and the
 * unknown token, which can stand for one character of up to 4 bytes, are
 * covered by the floor of 4). */
/* okv_tokenizer_encode and okv_tokenizer_encode_max: bounded says max is
 * a limit on the text's ids (stop once past it), not only the room in ids. */
static okv_status encode(const okv_tokenizer *t, const char *text, size_t len, unsigned flags, int32_t *ids,
                         size_t max, size_t *n_out, bool bounded, okv_error *err) {
    okv_error_clear(err);
    if (!t || (!text && len) || !n_out || (!ids && max))
        return okv_fail(err, OKV_ERR_INVALID, "tokenizer_encode: NULL %s",
                        !t ? "tokenizer" : !n_out ? "n_out" : (!text && len) ? "text" : "ids");
    if (flags & ~(OKV_TOKENIZE_ADD_SPECIAL | OKV_TOKENIZE_PARSE_SPECIAL | OKV_TOKENIZE_CONTINUE))
        return okv_fail(err, OKV_ERR_INVALID, "tokenizer_encode: unknown flags 0x%x", flags);
    *n_out = 0;
    bool add_special = flags & OKV_TOKENIZE_ADD_SPECIAL;
    if (bounded && t->bytes_per_id) {
        /* A text longer than max ids can stand for, known before any work. */
        const size_t at_least = len / t->bytes_per_id + (len % t->bytes_per_id != 0);
        if (at_least > max) {
            *n_out = at_least;
            return okv_fail(err, OKV_ERR_INVALID, "tokenizer_encode: the text needs at least %zu ids, more than %zu",
                            at_least, max);
        }
    }
    id_list out = {0};
    frag_list frags = {0};
    okv_status st = OKV_OK;
    if (!partition(t, text, len, flags & OKV_TOKENIZE_PARSE_SPECIAL, &frags)) goto nomem;
    if (add_special && t->add_bos && !okv_tok_ids_push(&out, t->bos_id)) goto nomem;
    bool prev_special = !(flags & OKV_TOKENIZE_CONTINUE);
    for (size_t f = 0; f < frags.n; f++) {
        fragment fr = frags.v[f];
        if (fr.id >= 0) {
            if (!okv_tok_ids_push(&out, fr.id)) goto nomem;
            prev_special = true;
            continue;
        }
        if (t->model == TOK_SPM) {
            size_t elen;
            char *esc = spm_escape(text + fr.off, fr.len, t->add_space_prefix && prev_special, &elen);
            if (!esc) goto nomem;
            int no_byte = -1;
            bool ok = okv_spm_encode(t, esc, elen, &out, &no_byte);
            free(esc);
            if (!ok && no_byte >= 0) {
                st = okv_fail(err, OKV_ERR_UNSUPPORTED,
                              "tokenizer_encode: byte 0x%02X has no token (no <0x%02X>, no "
                              "one-byte token, no unk_id)",
                              no_byte, no_byte);
                goto done;
            }
            if (!ok) goto nomem;
        } else {
            if ((st = okv_bpe_encode(t, text + fr.off, fr.len, &out, bounded ? max : SIZE_MAX, err))) goto done;
        }
        prev_special = false;
        if (bounded && out.n > max) {
            /* The rest can only add ids. */
            *n_out = out.n;
            st = okv_fail(err, OKV_ERR_INVALID, "tokenizer_encode: the text needs at least %zu ids, more than %zu",
                          out.n, max);
            goto done;
        }
    }
    if (add_special && t->add_eos && !okv_tok_ids_push(&out, t->eos_id)) goto nomem;
    *n_out = out.n;
    if ((ids || bounded) && max < out.n) {
        st = okv_fail(err, OKV_ERR_INVALID,
                      "tokenizer_encode: the text needs %zu ids but the output holds %zu",
                      out.n, max);
        goto done;
    }
    if (ids && out.n) memcpy(ids, out.v, out.n * sizeof *ids);
    goto done;
nomem:
    st = okv_fail(err, OKV_ERR_NOMEM, "tokenizer_encode: out of memory");
done:
    free(out.v);
    free(frags.v);
    return st;
}

okv_status okv_tokenizer_encode(const okv_tokenizer *t, const char *text, size_t len, unsigned flags, int32_t *ids,
                                size_t max, size_t *n_out, okv_error *err) {
    return encode(t, text, len, flags, ids, max, n_out, false, err);
}

okv_status okv_tokenizer_encode_max(const okv_tokenizer *t, const char *text, size_t len, unsigned flags,
                                    int32_t *ids, size_t max, size_t *n_out, okv_error *err) {
    return encode(t, text, len, flags, ids, max, n_out, true, err);
}

/* ---- decoding ---- */

static int hexval(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
}

static okv_status put_bytes(const char *s, size_t n, char *buf, size_t cap, size_t *n_out,
                            okv_error *err) {
    *n_out = n;
    if (n > cap)
        return okv_fail(err, OKV_ERR_INVALID, "token_to_piece: the piece is %zu bytes, buf holds %zu",
                        n, cap);
    if (n) memcpy(buf, s, n);
    return OKV_OK;
}

/* A normal token's piece: its text with the model's encoding of spaces
 * (SPM's U+2581) or bytes (GPT-2's byte characters) undone, written to buf
 * when buf is not NULL; returns its length. */
static size_t unmap_piece(const okv_tokenizer *t, const char *s, size_t n, char *buf) {
    size_t o = 0;
    for (size_t i = 0; i < n;) {
        const char *piece = s + i;
        size_t pn = 1;
        char byte;
        if (t->model == TOK_SPM) {
            if (n - i >= 3 && memcmp(s + i, "\xe2\x96\x81", 3) == 0) {
                piece = " ";
                i += 3;
            } else {
                i += 1;
            }
        } else {
            uint32_t cp;
            const size_t used = okv_tok_utf8_next(s + i, n - i, &cp);
            if (cp < 324 && t->cp_byte[cp] >= 0) {
                byte = (char)t->cp_byte[cp];
                piece = &byte;
            } else {
                pn = used; /* not a byte-level character: its bytes pass through */
            }
            i += used;
        }
        if (buf) memcpy(buf + o, piece, pn);
        o += pn;
    }
    return o;
}

okv_status okv_tokenizer_token_to_piece(const okv_tokenizer *t, int32_t id, int special,
                                        char *buf, size_t cap, size_t *n_out, okv_error *err) {
    okv_error_clear(err);
    if (!t || !n_out || (!buf && cap))
        return okv_fail(err, OKV_ERR_INVALID, "token_to_piece: NULL %s",
                        !t ? "tokenizer" : !n_out ? "n_out" : "buf");
    *n_out = 0;
    if (id < 0 || id >= t->n_tokens)
        return okv_fail(err, OKV_ERR_INVALID, "token_to_piece: id %d is outside 0..%d", (int)id,
                        (int)t->n_tokens - 1);
    size_t n;
    const char *s = tok_text(t, id, &n);
    switch ((okv_token_type)t->types[id]) {
    case OKV_TOKEN_CONTROL:
    case OKV_TOKEN_UNKNOWN:
        if (!special) return OKV_OK;
        return put_bytes(s, n, buf, cap, n_out, err);
    case OKV_TOKEN_USER_DEFINED:
        return put_bytes(s, n, buf, cap, n_out, err);
    case OKV_TOKEN_BYTE:
        if (n == 6 && memcmp(s, "<0x", 3) == 0 && s[5] == '>' && hexval(s[3]) >= 0 &&
            hexval(s[4]) >= 0) {
            char b = (char)(hexval(s[3]) * 16 + hexval(s[4]));
            return put_bytes(&b, 1, buf, cap, n_out, err);
        }
        return put_bytes(s, n, buf, cap, n_out, err);
    case OKV_TOKEN_NORMAL:
        break;
    case OKV_TOKEN_UNDEFINED:
    case OKV_TOKEN_UNUSED:
        return OKV_OK; /* llama.cpp prints nothing for these */
    }
    /* A normal token.  Its piece is never longer than its stored text, so
     * only a buf shorter than that needs a count first: a refusal writes
     * nothing. */
    if (n > cap) {
        const size_t need = unmap_piece(t, s, n, NULL);
        if (need > cap) {
            *n_out = need;
            return okv_fail(err, OKV_ERR_INVALID, "token_to_piece: the piece is %zu bytes, buf holds %zu", need,
                            cap);
        }
    }
    *n_out = unmap_piece(t, s, n, buf);
    return OKV_OK;
}

const char *okv_tokenizer_token_text(const okv_tokenizer *t, int32_t id, size_t *len) {
    if (!t || id < 0 || id >= t->n_tokens) {
        if (len) *len = 0;
        return NULL;
    }
    size_t n;
    const char *s = tok_text(t, id, &n);
    if (len) *len = n;
    return s;
}

okv_token_type okv_tokenizer_token_type(const okv_tokenizer *t, int32_t id) {
    if (!t || id < 0 || id >= t->n_tokens) return OKV_TOKEN_UNDEFINED;
    return (okv_token_type)t->types[id];
}

int32_t okv_tokenizer_n_vocab(const okv_tokenizer *t) { return t ? t->n_tokens : 0; }
int32_t okv_tokenizer_bos(const okv_tokenizer *t) { return t ? t->bos_id : -1; }
int32_t okv_tokenizer_eos(const okv_tokenizer *t) { return t ? t->eos_id : -1; }
int okv_tokenizer_adds_bos(const okv_tokenizer *t) { return t && t->add_bos; }
int okv_tokenizer_adds_eos(const okv_tokenizer *t) { return t && t->add_eos; }
