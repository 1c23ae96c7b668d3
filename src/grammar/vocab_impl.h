/* Internal: a vocabulary's pieces and their byte trie, for the matcher.
 *
 * The trie is stored in preorder: node i's subtree is i .. end[i]-1, so its
 * first child is i + 1 and the next sibling of child c is end[c]; skipping
 * a refused prefix is one jump.  Node 0 is the root (no byte). */
#ifndef OKV_GRAMMAR_VOCAB_IMPL_H
#define OKV_GRAMMAR_VOCAB_IMPL_H

#include <stdbool.h>
#include <stdint.h>

#include "offkv/grammar.h"

struct okv_grammar_vocab {
    int32_t n_tokens;
    char *bytes;       /* every piece, back to back */
    size_t *off;       /* n_tokens offsets into bytes */
    uint32_t *len;     /* n_tokens lengths (0: never allowed, unless an end token) */
    bool *is_end;      /* n_tokens */
    int32_t n_end;
    int32_t *end_ids;
    int32_t n_nodes;
    uint8_t *byte;     /* n_nodes: the byte on the edge into the node */
    int32_t *end;      /* n_nodes: one past the node's subtree */
    int32_t *tok_first; /* n_nodes: first index into sorted of the tokens ending here */
    int32_t *tok_n;    /* n_nodes: how many */
    int32_t *sorted;   /* token ids with a piece, ordered by piece */
};

#endif
