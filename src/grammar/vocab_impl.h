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

/* One node: what a walk reads at a node. */
typedef struct okv_trie_node {
    uint64_t below[2]; /* the ASCII bytes on edges anywhere below the node */
    int32_t end;       /* one past the node's subtree */
    int32_t tok_first; /* first index into sorted of the tokens ending here */
    int32_t tok_n;     /* how many */
    int32_t sub_first; /* index into sorted of the subtree's first token (preorder = piece order) */
    uint8_t byte;      /* the byte on the edge into the node */
    bool high_below;   /* a byte >= 0x80 somewhere below */
} okv_trie_node;

struct okv_grammar_vocab {
    int32_t n_tokens;
    char *bytes;       /* every piece, back to back */
    size_t *off;       /* n_tokens offsets into bytes */
    uint32_t *len;     /* n_tokens lengths (0: never allowed, unless an end token) */
    bool *is_end;      /* n_tokens */
    int32_t n_end;
    int32_t *end_ids;
    int32_t n_nodes;
    okv_trie_node *node; /* n_nodes + 1, in preorder; the last is a sentinel (sub_first = the token count) */
    int32_t *sorted;   /* token ids with a piece, ordered by piece */
};

#endif
