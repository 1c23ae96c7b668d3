/* Byte-level BPE as llama.cpp's llm_tokenizer_bpe does it: pre-tokenize
 * into words of GPT-2 byte characters, then within each word repeatedly
 * apply the lowest-ranked merge among adjacent pairs (leftmost on a tie). */
#include <stdlib.h>

#include "core/error.h"
#include "tokenizer/internal.h"

static bool add_bigram(const okv_tokenizer *t, const char *w, const tok_symbol *sym,
                       int32_t left, int32_t right, bigram_heap *heap) {
    if (left < 0 || right < 0) return true;
    int32_t rank = okv_tok_merge_rank(t, w + sym[left].off, sym[left].n, w + sym[right].off,
                                  sym[right].n);
    if (rank < 0) return true;
    return okv_tok_heap_push(heap, (tok_bigram){left, right, 0.0f, rank, sym[left].n + sym[right].n});
}

/* Merges one word and appends its ids. */
static bool bpe_word(const okv_tokenizer *t, const char *w, size_t len, tok_symbol *sym,
                     bigram_heap *heap, id_list *out) {
    if (t->ignore_merges) {
        int32_t id = okv_tok_find(t, w, len);
        if (id >= 0) return okv_tok_ids_push(out, id);
    }
    const int32_t n_sym = tok_split_chars(w, len, sym);
    heap->n = 0;
    for (int32_t i = 1; i < n_sym; i++)
        if (!add_bigram(t, w, sym, i - 1, i, heap)) return false;
    while (heap->n) {
        tok_bigram b = okv_tok_heap_pop(heap);
        tok_symbol *l = &sym[b.left], *r = &sym[b.right];
        /* Stale when either side has changed since the pair was queued. */
        if (l->n == 0 || r->n == 0 || l->n + r->n != b.size) continue;
        l->n += r->n;
        r->n = 0;
        l->next = r->next;
        if (r->next >= 0) sym[r->next].prev = b.left;
        if (!add_bigram(t, w, sym, l->prev, b.left, heap)) return false;
        if (!add_bigram(t, w, sym, b.left, l->next, heap)) return false;
    }
    for (int32_t i = 0; n_sym && i != -1; i = sym[i].next) {
        int32_t id = okv_tok_find(t, w + sym[i].off, sym[i].n);
        if (id >= 0) {
            if (!okv_tok_ids_push(out, id)) return false;
            continue;
        }
        /* No token: llama.cpp tries each byte of the text alone and drops
         * the ones that are not tokens either. */
        for (size_t j = 0; j < sym[i].n; j++) {
            int32_t bid = okv_tok_find(t, w + sym[i].off + j, 1);
            if (bid >= 0 && !okv_tok_ids_push(out, bid)) return false;
        }
    }
    return true;
}

okv_status okv_bpe_encode(const okv_tokenizer *t, const char *text, size_t len, id_list *out, size_t limit,
                          okv_error *err) {
    char *words;
    size_t *ends, n_words;
    okv_status st = okv_pretok_split(t, text, len, &words, &ends, &n_words, err);
    if (st) return st;
    size_t longest = 0;
    for (size_t i = 0, start = 0; i < n_words; start = ends[i++])
        if (ends[i] - start > longest) longest = ends[i] - start;
    tok_symbol *sym = malloc((longest ? longest : 1) * sizeof *sym);
    bigram_heap heap = {.by_rank = true};
    if (!sym) goto nomem;
    for (size_t i = 0, start = 0; i < n_words && out->n <= limit; start = ends[i++])
        if (!bpe_word(t, words + start, ends[i] - start, sym, &heap, out)) goto nomem;
    goto done;
nomem:
    st = okv_fail(err, OKV_ERR_NOMEM, "tokenizer_encode: out of memory");
done:
    free(sym);
    free(heap.v);
    free(words);
    free(ends);
    return st;
}
