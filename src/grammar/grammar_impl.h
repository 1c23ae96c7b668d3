/* Internal: the parsed form of a GBNF grammar, shared by the parser
 * (gbnf.c) and the matcher (matcher.c).
 *
 * As in llama.cpp, a rule is a flat array of elements: the alternatives'
 * sequences one after another, separated by GE_ALT and closed by GE_END.
 * A character class is one GE_CHAR (or GE_CHAR_NOT) element followed by
 * GE_CHAR_ALT elements, each optionally followed by GE_RNG_UPPER making it
 * a range.  Groups and repetitions are rules of their own. */
#ifndef OKV_GRAMMAR_IMPL_H
#define OKV_GRAMMAR_IMPL_H

#include <stdint.h>

#include "offkv/grammar.h"

enum {
    GE_END = 0,       /* end of the rule */
    GE_ALT,           /* start of another alternative */
    GE_REF,           /* value: a rule id */
    GE_CHAR,          /* value: a code point (first of a class) */
    GE_CHAR_NOT,      /* negated class: its first code point */
    GE_RNG_UPPER,     /* the previous element is a range up to value */
    GE_CHAR_ALT,      /* another code point of the class */
    GE_ANY            /* `.`: any code point */
};

typedef struct gelem {
    uint32_t type;
    uint32_t value;
} gelem;

struct okv_grammar {
    int32_t n_rules;
    int32_t root;
    gelem **rules;  /* n_rules arrays, each ending in GE_END */
    char **names;   /* n_rules names (generated ones are "name~N") */
};

static inline int gelem_is_end_of_seq(const gelem *e) { return e->type == GE_END || e->type == GE_ALT; }

/* For tests: the rule expansions the matcher's last mask walk cost, and
 * the bound past which a walk stops (its tokens so far are the mask). */
long okv_grammar_matcher_mask_work(const okv_grammar_matcher *m);
long okv_grammar_matcher_mask_budget(void);

#endif
