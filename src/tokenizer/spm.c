/* SentencePiece-style encoding as llama.cpp's llm_tokenizer_spm does it:
 * start from UTF-8 characters, repeatedly merge the adjacent pair whose
 * concatenation is the vocabulary token with the highest score (leftmost on
 * a tie), then spell every symbol that is not a token as byte tokens. */
#include <stdlib.h>

#include "tokenizer/internal.h"

/* Queues the pair (left, right) if their concatenation is a token. */
static bool try_bigram(const okv_tokenizer *t, const char *text, const tok_symbol *sym,
                       int32_t left, int32_t right, bigram_heap *heap) {
    if (left < 0 || right < 0) return true;
    size_t n = sym[left].n + sym[right].n;
    int32_t id = okv_tok_find(t, text + sym[left].off, n);
    if (id < 0) return true;
    return okv_tok_heap_push(heap, (tok_bigram){left, right, t->scores[id], 0, n});
}

/* The id standing for one byte: <0xXX>, else a one-byte token, else unk. */
static int32_t byte_token(const okv_tokenizer *t, unsigned char b) {
    static const char hex[] = "0123456789ABCDEF";
    char name[6] = {'<', '0', 'x', hex[b >> 4], hex[b & 15], '>'};
    int32_t id = okv_tok_find(t, name, 6);
    if (id < 0) id = okv_tok_find(t, (const char *)&b, 1);
    if (id < 0) id = t->unk_id;
    return id;
}

bool okv_spm_encode(const okv_tokenizer *t, const char *text, size_t len, id_list *out,
                int *no_byte) {
    if (!len) return true;
    tok_symbol *sym = malloc(len * sizeof *sym);
    bigram_heap heap = {.by_rank = false};
    bool ok = false;
    if (!sym) return false;
    const int32_t n_sym = tok_split_chars(text, len, sym);
    for (int32_t i = 1; i < n_sym; i++)
        if (!try_bigram(t, text, sym, i - 1, i, &heap)) goto done;

    while (heap.n) {
        tok_bigram b = okv_tok_heap_pop(&heap);
        tok_symbol *l = &sym[b.left], *r = &sym[b.right];
        /* A pair queued before one side merged with something else is stale:
         * its sides no longer add up to the text it was queued for. */
        if (l->n == 0 || r->n == 0 || l->n + r->n != b.size) continue;
        l->n += r->n;
        r->n = 0;
        l->next = r->next;
        if (r->next >= 0) sym[r->next].prev = b.left;
        if (!try_bigram(t, text, sym, l->prev, b.left, &heap)) goto done;
        if (!try_bigram(t, text, sym, b.left, l->next, &heap)) goto done;
    }

    for (int32_t i = 0; i != -1; i = sym[i].next) {
        const char *s = text + sym[i].off;
        int32_t id = okv_tok_find(t, s, sym[i].n);
        if (id >= 0) {
            if (!okv_tok_ids_push(out, id)) goto done;
            continue;
        }
        /* Merged symbols are always tokens, so only a single character can
         * get here: spell it in bytes. */
        for (size_t j = 0; j < sym[i].n; j++) {
            int32_t bid = byte_token(t, (unsigned char)s[j]);
            if (bid < 0) {
                *no_byte = (unsigned char)s[j];
                goto done;
            }
            if (!okv_tok_ids_push(out, bid)) goto done;
        }
    }
    ok = true;
done:
    free(sym);
    free(heap.v);
    return ok;
}
