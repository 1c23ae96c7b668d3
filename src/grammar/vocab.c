/* A vocabulary's pieces as a byte trie (see vocab_impl.h), built once per
 * model so that masking walks shared prefixes once instead of once per
 * token: on a 150 k-token vocabulary, a refused first byte drops every
 * token that starts with it in one step. */
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "grammar/vocab_impl.h"

typedef struct piece {
    const char *p;
    uint32_t len;
    int32_t id;
} piece;

static int piece_cmp(const void *a, const void *b) {
    const piece *x = a, *y = b;
    uint32_t n = x->len < y->len ? x->len : y->len;
    int c = memcmp(x->p, y->p, n);
    if (c) return c;
    if (x->len != y->len) return x->len < y->len ? -1 : 1;
    return x->id < y->id ? -1 : x->id > y->id;
}

void okv_grammar_vocab_free(okv_grammar_vocab *v) {
    if (!v) return;
    free(v->bytes);
    free(v->off);
    free(v->len);
    free(v->is_end);
    free(v->end_ids);
    free(v->node);
    free(v->sorted);
    free(v);
}

int32_t okv_grammar_vocab_n_tokens(const okv_grammar_vocab *v) { return v ? v->n_tokens : 0; }

bool okv_grammar_vocab_is_end(const okv_grammar_vocab *v, int32_t id) {
    return v && id >= 0 && id < v->n_tokens && v->is_end[id];
}

static okv_grammar_vocab *vocab_create(const okv_tokenizer *tok, const int32_t *end_ids, int32_t n_end, int special,
                                       okv_error *err) {
    okv_error_clear(err);
    if (!tok) {
        okv_fail(err, OKV_ERR_INVALID, "tokenizer is NULL");
        return NULL;
    }
    const int32_t n = okv_tokenizer_n_vocab(tok);
    if (!end_ids || n_end <= 0) end_ids = okv_tokenizer_eog(tok, &n_end);
    for (int32_t i = 0; i < n_end; i++) {
        if (end_ids[i] < 0 || end_ids[i] >= n) {
            okv_fail(err, OKV_ERR_INVALID, "end token %d outside the vocabulary (%d tokens)", (int)end_ids[i], (int)n);
            return NULL;
        }
    }
    okv_grammar_vocab *v = calloc(1, sizeof *v);
    piece *pc = NULL;
    if (!v) goto nomem;
    v->n_tokens = n;
    v->off = malloc((size_t)n * sizeof *v->off);
    v->len = malloc((size_t)n * sizeof *v->len);
    v->is_end = calloc((size_t)n, sizeof *v->is_end);
    v->end_ids = malloc((size_t)(n_end ? n_end : 1) * sizeof *v->end_ids);
    if (!v->off || !v->len || !v->is_end || !v->end_ids) goto nomem;
    v->n_end = n_end;
    for (int32_t i = 0; i < n_end; i++) {
        v->end_ids[i] = end_ids[i];
        v->is_end[end_ids[i]] = true;
    }

    /* The pieces, back to back. */
    size_t cap = (size_t)n * 8 + 64, used = 0;
    v->bytes = malloc(cap);
    if (!v->bytes) goto nomem;
    for (int32_t i = 0; i < n; i++) {
        size_t got = 0;
        okv_error e2;
        okv_status st = okv_tokenizer_token_to_piece(tok, i, special, v->bytes + used, cap - used, &got, &e2);
        if (st != OKV_OK && got > cap - used) {
            size_t ncap = (cap + got) * 2;
            char *b = realloc(v->bytes, ncap);
            if (!b) goto nomem;
            v->bytes = b;
            cap = ncap;
            st = okv_tokenizer_token_to_piece(tok, i, special, v->bytes + used, cap - used, &got, &e2);
        }
        if (st != OKV_OK) {
            okv_fail(err, st, "token %d: %s", (int)i, e2.message);
            okv_grammar_vocab_free(v);
            return NULL;
        }
        v->off[i] = used;
        v->len[i] = v->is_end[i] ? 0 : (uint32_t)got;
        used += got;
    }

    /* Sorted pieces, then the preorder trie: each piece adds the nodes past
     * its common prefix with the previous one. */
    int32_t n_p = 0;
    pc = malloc((size_t)n * sizeof *pc);
    if (!pc) goto nomem;
    for (int32_t i = 0; i < n; i++)
        if (v->len[i]) pc[n_p++] = (piece){v->bytes + v->off[i], v->len[i], i};
    qsort(pc, (size_t)n_p, sizeof *pc, piece_cmp);
    size_t max_nodes = 1;
    uint32_t max_len = 0;
    for (int32_t i = 0; i < n_p; i++) {
        max_nodes += pc[i].len;
        if (pc[i].len > max_len) max_len = pc[i].len;
    }
    v->node = calloc(max_nodes + 1, sizeof *v->node);
    v->sorted = malloc((size_t)(n_p ? n_p : 1) * sizeof *v->sorted);
    int32_t *path = malloc(((size_t)max_len + 1) * sizeof *path);
    if (!v->node || !v->sorted || !path) {
        free(path);
        goto nomem;
    }
    okv_trie_node *nd = v->node;
    int32_t nodes = 1;
    path[0] = 0;
    uint32_t depth = 0; /* depth of the path's deepest node */
    for (int32_t i = 0; i < n_p; i++) {
        v->sorted[i] = pc[i].id;
        uint32_t lcp = 0;
        if (i > 0) {
            uint32_t m = pc[i].len < pc[i - 1].len ? pc[i].len : pc[i - 1].len;
            while (lcp < m && pc[i].p[lcp] == pc[i - 1].p[lcp]) lcp++;
        }
        while (depth > lcp) nd[path[depth--]].end = nodes;
        for (uint32_t d = lcp; d < pc[i].len; d++) {
            nd[nodes].byte = (uint8_t)pc[i].p[d];
            path[++depth] = nodes++;
        }
        int32_t at = path[depth];
        if (nd[at].tok_n++ == 0) nd[at].tok_first = i;
    }
    while (depth > 0) nd[path[depth--]].end = nodes;
    nd[0].end = nodes;
    v->n_nodes = nodes;
    /* Tokens before each node in preorder (a subtree's tokens are then
     * sorted[sub_first .. node[end].sub_first)), and the bytes below each
     * node, children first: what lets a walk take a whole subtree at once. */
    int32_t before = 0;
    for (int32_t c = 0; c < nodes; c++) {
        nd[c].sub_first = before;
        before += nd[c].tok_n;
    }
    nd[nodes].sub_first = before;
    nd[nodes].end = nodes + 1;
    for (int32_t c = nodes - 1; c >= 0; c--) {
        for (int32_t ch = c + 1; ch < nd[c].end; ch = nd[ch].end) {
            const uint8_t b = nd[ch].byte;
            nd[c].below[0] |= nd[ch].below[0];
            nd[c].below[1] |= nd[ch].below[1];
            nd[c].high_below |= nd[ch].high_below || b >= 0x80;
            if (b < 0x80) nd[c].below[b >> 6] |= 1ull << (b & 63);
        }
    }
    free(path);
    free(pc);
    return v;

nomem:
    free(pc);
    okv_grammar_vocab_free(v);
    okv_fail(err, OKV_ERR_NOMEM, "grammar vocabulary");
    return NULL;
}

okv_grammar_vocab *okv_grammar_vocab_create(const okv_tokenizer *tok, const int32_t *end_ids, int32_t n_end,
                                            okv_error *err) {
    return vocab_create(tok, end_ids, n_end, 0, err);
}

okv_grammar_vocab *okv_grammar_vocab_create_special(const okv_tokenizer *tok, const int32_t *end_ids, int32_t n_end,
                                                    okv_error *err) {
    return vocab_create(tok, end_ids, n_end, 1, err);
}
