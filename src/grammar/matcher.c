/* The grammar matcher: llama.cpp's set of parse stacks, advanced one code
 * point at a time, with UTF-8 decoded byte by byte so that a character may
 * be split between tokens.
 *
 * A stack is a persistent linked list (top first) whose nodes point at
 * grammar elements; advancing shares the untouched tail, so one step costs
 * a few nodes, not a copy.  Nodes live in arenas with mark / rewind: the
 * vocabulary walk (okv_grammar_matcher_mask) descends the token trie,
 * allocating the stacks of a prefix, and rewinds them when it climbs back,
 * so masking a vocabulary allocates nothing from the system once warm. */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "grammar/grammar_impl.h"
#include "grammar/vocab_impl.h"

/* More stacks than this means a grammar too ambiguous to follow: the step
 * is refused rather than let memory grow without bound.  (An enum of 50 000
 * strings starts with 50 000 stacks.) */
#define MAX_STACKS (1 << 17)
/* Rule expansions one byte may cost: an ambiguous grammar (nested nullable
 * rules) could otherwise take exponential time in one step; past this the
 * byte is refused. */
#define MAX_EXPANSIONS 200000
/* Rules nested in one expansion: advance_stack recurses once a level, about
 * 100 bytes a frame, so 3 MiB of stack at most (a chain of 200 000 rules
 * a0 ::= a1 ... overflowed an 8 MiB stack before MAX_EXPANSIONS stopped it). */
#define MAX_DEPTH 32768
/* Rule expansions one vocabulary mask may cost, all its bytes together: the
 * per-byte bound times the trie's nodes let an ambiguous grammar take
 * seconds a token (on a server, every sequence waits).  A JSON schema's
 * cold mask over Qwen 3's 151 k tokens costs about 360 000 (3.4 ms); this
 * bound about 0.3 s.  Past it the walk stops and the tokens found so far
 * are the mask. */
#define MAX_MASK_WORK 8000000L
#define N_CACHE 8

typedef struct snode {
    const gelem *pos;
    const struct snode *next;
    uint32_t hash; /* of the whole stack from here down (stack_hash) */
} snode;

typedef struct sset {
    const snode **s; /* NULL entries are complete parses */
    int32_t n, cap;
    int32_t *tab;    /* large sets: a hash index of s (index + 1; 0 empty) */
    int32_t tcap;
} sset;

typedef struct chunk {
    char *data;
    size_t used, cap;
} chunk;

typedef struct arena {
    chunk *c;
    int32_t n, cur;
    bool oom;
    bool limit; /* a step ran past MAX_EXPANSIONS, MAX_DEPTH or MAX_STACKS */
    long work;  /* rule expansions in the current step */
    long total; /* ... since the count was last reset (a mask's walk) */
    long budget; /* total's bound: MAX_MASK_WORK in a mask, else LONG_MAX */
} arena;

typedef struct amark {
    int32_t cur;
    size_t used;
} amark;

typedef struct mcache {
    uint64_t hash;
    uintptr_t *key;
    size_t key_n;
    uint64_t *bits;
    int32_t count;
    uint64_t stamp;
} mcache;

struct okv_grammar_matcher {
    const okv_grammar *g;
    arena cur, next, scratch;
    sset stacks;    /* in cur */
    uint32_t pval;  /* a UTF-8 character begun but not finished: its bits so far */
    int prem;       /* and how many continuation bytes it still needs (0: none) */
    mcache cache[N_CACHE];
    int32_t cache_vocab; /* n_tokens of the vocabulary the cache is for */
    const okv_grammar_vocab *cache_v;
    uint64_t clock;
    long mask_work; /* rule expansions the last mask walk cost */
    uintptr_t *keybuf;
    size_t keybuf_cap;
    /* lazy (okv_grammar_matcher_create_lazy): the grammar waits for trig */
    char *trig; /* NULL: not lazy */
    size_t trig_n;
    bool anchored;
    int lazy;   /* LZ_ON: the grammar is on (or not lazy); LZ_WAIT (not lazy: past a skipped block, white
                   space before the grammar); LZ_OFF: free for good; LZ_BLK_START / LZ_BLK_IN: before
                   LZ_WAIT, a leading block skipped */
    char *pend; /* while waiting, the text that may still begin the trigger: the tail shorter than the
                   trigger (anchored: all of it, whitespace then a prefix of the trigger) */
    size_t pend_n, pend_cap;
    char *tbuf; /* pend + the next piece, to look for the trigger in */
    size_t tbuf_cap;
    /* okv_grammar_matcher_skip_block: a leading block (reasoning) where the
     * trigger does not count; blk_open NULL: none */
    char *blk_open, *blk_close;
    size_t blk_open_n, blk_close_n;
    bool blk_inside;
    bool has_read; /* text came since the start (skip_block must come before) */
    size_t ws_n;   /* not lazy, past the block: the white space read since it (POST_BLOCK_WS of it free) */
    char *bpend; /* in the block phases, the text that may still begin the open or close tag */
    size_t bpend_n, bpend_cap;
    char *bbuf; /* bpend + the next piece */
    size_t bbuf_cap;
};

enum { LZ_ON, LZ_WAIT, LZ_OFF, LZ_BLK_START, LZ_BLK_IN };
/* White space a matcher that is not lazy lets pass between its block and
 * its grammar: the "\n\n" models write after </think>, and no more (free
 * white space let a model that likes newlines never start its answer). */
#define POST_BLOCK_WS 4
enum { LK_FOUND, LK_WAIT, LK_OFF, LK_NOMEM };
/* A text waiting for an anchored trigger longer than this is not going to
 * start with it (only whitespace came): the matcher turns free. */
#define MAX_ANCHOR_WAIT 4096

/* ---- arena ---- */

static void *arena_alloc(arena *a, size_t size) {
    size = (size + 15) & ~(size_t)15;
    if (a->oom) return NULL;
    for (;;) {
        if (a->cur < a->n) {
            chunk *c = &a->c[a->cur];
            if (c->cap - c->used >= size) {
                void *p = c->data + c->used;
                c->used += size;
                return p;
            }
            if (a->cur + 1 < a->n) {
                a->cur++;
                a->c[a->cur].used = 0;
                continue;
            }
        }
        chunk *nc = realloc(a->c, (size_t)(a->n + 1) * sizeof *nc);
        if (!nc) {
            a->oom = true;
            return NULL;
        }
        a->c = nc;
        size_t cap = size > 65536 ? size : 65536;
        char *d = malloc(cap);
        if (!d) {
            a->oom = true;
            return NULL;
        }
        a->c[a->n] = (chunk){d, 0, cap};
        a->cur = a->n++;
    }
}

static amark arena_mark(const arena *a) {
    return (amark){a->cur, a->n ? a->c[a->cur].used : 0};
}

static void arena_rewind(arena *a, amark m) {
    a->cur = m.cur;
    if (a->n) a->c[a->cur].used = m.used;
}

static void arena_reset(arena *a) {
    a->cur = 0;
    if (a->n) a->c[0].used = 0;
    a->oom = false;
    a->limit = false;
}

static void arena_free(arena *a) {
    for (int32_t i = 0; i < a->n; i++) free(a->c[i].data);
    free(a->c);
    *a = (arena){0};
}

/* ---- stacks ---- */

/* A hash of a whole stack, made as it is pushed: equal stacks hash alike.
 * A hash of the top four elements put every stack of a deeply nested,
 * ambiguous grammar (r1 ::= | r2 r2, r2 ::= . r1 ...) in one bucket, and a
 * mask then compared each new stack with all the others, deep, without a
 * bound (a fuzzer's grammar of 83 bytes ran for minutes a token). */
static uint32_t stack_hash(const snode *st) { return st ? st->hash : 0x9e3779b9u; }

static const snode *spush(arena *a, const gelem *pos, const snode *next) {
    snode *n = arena_alloc(a, sizeof *n);
    if (!n) return NULL;
    n->pos = pos;
    n->next = next;
    const uint64_t h = ((uint64_t)stack_hash(next) ^ (uint64_t)(uintptr_t)pos) * 0x9e3779b97f4a7c15ull;
    n->hash = (uint32_t)(h ^ (h >> 29));
    return n;
}

/* Whether two stacks hold the same elements; each node compared is a unit
 * of a's work (an ambiguous grammar's equal stacks can be deep, and many). */
static bool stack_eq(arena *a, const snode *x, const snode *y) {
    while (x != y) {
        if (!x || !y || x->pos != y->pos || x->hash != y->hash) return false;
        a->work++;
        a->total++;
        x = x->next;
        y = y->next;
    }
    return true;
}

static bool sset_index(arena *a, sset *set) {
    int32_t cap = 64;
    while (cap < 4 * set->n) cap *= 2;
    int32_t *tab = arena_alloc(a, (size_t)cap * sizeof *tab);
    if (!tab) return false;
    memset(tab, 0, (size_t)cap * sizeof *tab);
    for (int32_t i = 0; i < set->n; i++) {
        uint32_t h = stack_hash(set->s[i]) & (uint32_t)(cap - 1);
        while (tab[h]) h = (h + 1) & (uint32_t)(cap - 1);
        tab[h] = i + 1;
    }
    set->tab = tab;
    set->tcap = cap;
    return true;
}

/* Whether set holds st: through its hash index when it has one. */
static bool sset_has(arena *a, const sset *set, const snode *st) {
    if (set->tab) {
        uint32_t h = stack_hash(st) & (uint32_t)(set->tcap - 1);
        for (; set->tab[h]; h = (h + 1) & (uint32_t)(set->tcap - 1))
            if (stack_eq(a, set->s[set->tab[h] - 1], st)) return true;
        return false;
    }
    for (int32_t i = 0; i < set->n; i++)
        if (stack_eq(a, set->s[i], st)) return true;
    return false;
}

static bool sset_add(arena *a, sset *set, const snode *st) {
    /* Past a few stacks, a hash index keeps adding O(1), not O(n). */
    if (set->n >= 32 && (!set->tab || 2 * set->n >= set->tcap) && !sset_index(a, set)) return false;
    if (sset_has(a, set, st)) return true;
    if (set->n == set->cap) {
        if (set->n >= MAX_STACKS) {
            a->limit = true;
            return false;
        }
        int32_t cap = set->cap ? set->cap * 2 : 8;
        const snode **s = arena_alloc(a, (size_t)cap * sizeof *s);
        if (!s) return false;
        if (set->n) memcpy(s, set->s, (size_t)set->n * sizeof *s);
        set->s = s;
        set->cap = cap;
    }
    set->s[set->n++] = st;
    if (set->tab) {
        uint32_t h = stack_hash(st) & (uint32_t)(set->tcap - 1);
        while (set->tab[h]) h = (h + 1) & (uint32_t)(set->tcap - 1);
        set->tab[h] = set->n;
    }
    return true;
}

/* Expands st until its top is a character element (or it is empty), adding
 * each result to out: a rule reference on top is replaced by each of the
 * rule's alternatives.  Left recursion was refused at parse time, so this
 * terminates. */
static bool advance_stack_in(const okv_grammar *g, arena *a, const snode *st, sset *out, int depth) {
    if (++a->work > MAX_EXPANSIONS || depth > MAX_DEPTH || ++a->total > a->budget) {
        a->limit = true;
        return false;
    }
    if (!st) return sset_add(a, out, NULL);
    const gelem *pos = st->pos;
    if (pos->type != GE_REF) return sset_add(a, out, st);
    const gelem *sub = g->rules[pos->value];
    for (;;) {
        const snode *base = st->next;
        if (!gelem_is_end_of_seq(pos + 1) && !(base = spush(a, pos + 1, base))) return false;
        if (!gelem_is_end_of_seq(sub) && !(base = spush(a, sub, base))) return false;
        if (!advance_stack_in(g, a, base, out, depth + 1)) return false;
        while (!gelem_is_end_of_seq(sub)) sub++;
        if (sub->type != GE_ALT) break;
        sub++;
    }
    return true;
}

static bool advance_stack(const okv_grammar *g, arena *a, const snode *st, sset *out) {
    return advance_stack_in(g, a, st, out, 0);
}

/* The range a..b of a class's element at *e (a single code point is a..a),
 * *e moved past it; true when another of the class's ranges follows. */
static bool class_range(const gelem **e, uint32_t *a, uint32_t *b) {
    const gelem *p = *e;
    *a = *b = p->value;
    if (p[1].type == GE_RNG_UPPER) {
        *b = p[1].value;
        p += 2;
    } else {
        p += 1;
    }
    *e = p;
    return p->type == GE_CHAR_ALT;
}

/* Does the character element at pos accept cp?  *after gets the element
 * following the class. */
static bool match_char(const gelem *pos, uint32_t cp, const gelem **after) {
    if (pos->type == GE_ANY) {
        *after = pos + 1;
        return true;
    }
    const bool positive = pos->type == GE_CHAR;
    bool found = false, more = true;
    while (more) {
        uint32_t a, b;
        more = class_range(&pos, &a, &b);
        found = found || (a <= cp && cp <= b);
    }
    *after = pos;
    return found == positive;
}

/* Could the class at pos accept some character in [lo, hi] (the characters
 * a begun UTF-8 sequence may still become)? */
static bool match_range(const gelem *pos, uint32_t lo, uint32_t hi) {
    if (pos->type == GE_ANY) return true;
    uint32_t a, b;
    if (pos->type == GE_CHAR) {
        for (const gelem *e = pos;;) {
            const bool more = class_range(&e, &a, &b);
            if (a <= hi && b >= lo) return true;
            if (!more) return false;
        }
    }
    /* Negated: some code point of lo..hi is outside every excluded range.
     * The ranges together may cover lo..hi without one of them doing so
     * ([^\u0080-\u009F\u00A0-\u00BF] allowed the lead byte C2, after
     * which nothing could follow), so walk the lowest uncovered point up. */
    uint32_t cur = lo;
    for (bool moved = true; moved;) {
        moved = false;
        for (const gelem *e = pos;;) {
            const bool more = class_range(&e, &a, &b);
            if (a <= cur && b >= cur) {
                if (b >= hi) return false; /* lo..hi all excluded */
                cur = b + 1;
                moved = true;
            }
            if (!more) break;
        }
    }
    return true;
}

static bool accept_cp(const okv_grammar *g, arena *a, const sset *in, uint32_t cp, sset *out) {
    *out = (sset){0};
    a->work = 0;
    for (int32_t i = 0; i < in->n; i++) {
        const snode *st = in->s[i];
        if (!st) continue;
        const gelem *after;
        if (!match_char(st->pos, cp, &after)) continue;
        const snode *base = st->next;
        if (!gelem_is_end_of_seq(after) && !(base = spush(a, after, base))) return false;
        if (!advance_stack(g, a, base, out)) return false;
    }
    return true;
}

/* One byte: decodes UTF-8 incrementally; a finished character advances the
 * stacks.  False when the grammar (or UTF-8) refuses the byte.  prem is the
 * number of continuation bytes still due, plus PREM_FIRST while the next
 * one is the first: that byte decides overlong forms and surrogates (byte
 * tokens could otherwise spell '{' as F0 80 81 BB). */
#define PREM_FIRST 0x10
static bool step(const okv_grammar *g, arena *a, const sset *in, uint32_t pval, int prem, unsigned char b, sset *out,
                 uint32_t *pval_out, int *prem_out) {
    uint32_t cp;
    int left;
    bool lead = false;
    if (prem == 0) {
        if (b < 0x80) cp = b, left = 0;
        else if ((b & 0xE0) == 0xC0 && b >= 0xC2) cp = b & 0x1F, left = 1;
        else if ((b & 0xF0) == 0xE0) cp = b & 0x0F, left = 2;
        else if ((b & 0xF8) == 0xF0 && b <= 0xF4) cp = b & 0x07, left = 3;
        else return false;
        lead = true;
    } else {
        const int rem = prem & 0xF;
        if ((b & 0xC0) != 0x80) return false;
        if (prem & PREM_FIRST) {
            if (rem == 2 && pval == 0x0 && b < 0xA0) return false; /* overlong 3-byte form */
            if (rem == 2 && pval == 0xD && b > 0x9F) return false; /* a surrogate */
            if (rem == 3 && pval == 0x0 && b < 0x90) return false; /* overlong 4-byte form */
            if (rem == 3 && pval == 0x4 && b > 0x8F) return false; /* beyond U+10FFFF */
        }
        cp = (pval << 6) | (b & 0x3F);
        left = rem - 1;
    }
    if (left == 0) {
        if (!accept_cp(g, a, in, cp, out)) return false;
        *pval_out = 0;
        *prem_out = 0;
        return out->n > 0;
    }
    uint32_t lo = cp << (6 * left), hi = lo | ((1u << (6 * left)) - 1);
    if (lead) {
        /* The shortest form rule: a 3-byte lead E0 starts U+0800 at least. */
        static const uint32_t least[4] = {0, 0x80, 0x800, 0x10000};
        if (lo < least[left]) lo = least[left];
        if (hi > 0x10FFFF) hi = 0x10FFFF;
    }
    bool any = false;
    for (int32_t i = 0; i < in->n && !any; i++)
        if (in->s[i]) any = match_range(in->s[i]->pos, lo, hi);
    if (!any) return false;
    *out = *in;
    *pval_out = cp;
    *prem_out = left | (lead ? PREM_FIRST : 0);
    return true;
}

static const snode *copy_stack(arena *a, const snode *st) {
    if (!st) return NULL;
    /* Iteratively: collect, then rebuild from the bottom. */
    int32_t depth = 0;
    for (const snode *x = st; x; x = x->next) depth++;
    const gelem **tmp = malloc((size_t)depth * sizeof *tmp);
    if (!tmp) {
        a->oom = true; /* out of memory, not a refused token: callers tell them apart by it */
        return NULL;
    }
    int32_t i = 0;
    for (const snode *x = st; x; x = x->next) tmp[i++] = x->pos;
    const snode *out = NULL;
    for (i = depth - 1; i >= 0; i--) {
        out = spush(a, tmp[i], out);
        if (!out) break;
    }
    free(tmp);
    return out;
}

/* Makes `set` (in scratch) the matcher's state, copied into its own arena. */
static bool commit(okv_grammar_matcher *m, const sset *set, uint32_t pval, int prem) {
    arena_reset(&m->next);
    sset copy = {0};
    copy.s = arena_alloc(&m->next, (size_t)(set->n ? set->n : 1) * sizeof *copy.s);
    if (!copy.s) return false;
    copy.cap = set->n;
    for (int32_t i = 0; i < set->n; i++) {
        const snode *c = copy_stack(&m->next, set->s[i]);
        if (set->s[i] && !c) return false;
        copy.s[copy.n++] = c;
    }
    arena t = m->cur;
    m->cur = m->next;
    m->next = t;
    m->stacks = copy;
    m->pval = pval;
    m->prem = prem;
    return true;
}

/* Where a matcher starts: in its block phase, else waiting for its
 * trigger, else (not lazy) with the grammar on. */
static int lazy_start(const okv_grammar_matcher *m) {
    if (m->blk_open) return m->blk_inside ? LZ_BLK_IN : LZ_BLK_START;
    return m->trig ? LZ_WAIT : LZ_ON;
}

void okv_grammar_matcher_reset(okv_grammar_matcher *m) {
    if (!m) return;
    m->lazy = lazy_start(m);
    m->pend_n = 0;
    m->bpend_n = 0;
    m->ws_n = 0;
    m->has_read = false;
    arena_reset(&m->scratch);
    const okv_grammar *g = m->g;
    const gelem *root = g->rules[g->root];
    sset set = {0};
    m->scratch.work = 0;
    /* The start state: each alternative of the root rule, expanded. */
    for (const gelem *alt = root;;) {
        const snode *s = gelem_is_end_of_seq(alt) ? NULL : spush(&m->scratch, alt, NULL);
        advance_stack(g, &m->scratch, s, &set);
        while (!gelem_is_end_of_seq(alt)) alt++;
        if (alt->type != GE_ALT) break;
        alt++;
    }
    commit(m, &set, 0, 0);
}

okv_grammar_matcher *okv_grammar_matcher_create(const okv_grammar *g, okv_error *err) {
    okv_error_clear(err);
    if (!g) {
        okv_fail(err, OKV_ERR_INVALID, "grammar is NULL");
        return NULL;
    }
    okv_grammar_matcher *m = calloc(1, sizeof *m);
    if (!m) {
        okv_fail(err, OKV_ERR_NOMEM, "grammar matcher");
        return NULL;
    }
    m->g = g;
    m->cur.budget = m->next.budget = m->scratch.budget = LONG_MAX; /* a mask bounds it */
    okv_grammar_matcher_reset(m);
    if (m->cur.oom || m->scratch.oom || m->next.oom) {
        okv_grammar_matcher_free(m);
        okv_fail(err, OKV_ERR_NOMEM, "grammar matcher state");
        return NULL;
    }
    if (m->scratch.limit) { /* a start state cut short would accept less than the grammar */
        okv_grammar_matcher_free(m);
        okv_fail(err, OKV_ERR_INVALID,
                 "the grammar's start expands past the matcher's limits (%d alternatives, %d expansions, "
                 "rules %d deep)",
                 MAX_STACKS, MAX_EXPANSIONS, MAX_DEPTH);
        return NULL;
    }
    return m;
}

void okv_grammar_matcher_free(okv_grammar_matcher *m) {
    if (!m) return;
    arena_free(&m->cur);
    arena_free(&m->next);
    arena_free(&m->scratch);
    for (int i = 0; i < N_CACHE; i++) {
        free(m->cache[i].key);
        free(m->cache[i].bits);
    }
    free(m->keybuf);
    free(m->trig);
    free(m->pend);
    free(m->tbuf);
    free(m->blk_open);
    free(m->blk_close);
    free(m->bpend);
    free(m->bbuf);
    free(m);
}

/* Grows *buf to hold n bytes. */
static bool reserve(char **buf, size_t *cap, size_t n) {
    if (n <= *cap) return true;
    size_t c = n * 2 + 16;
    char *b = realloc(*buf, c);
    if (!b) return false;
    *buf = b;
    *cap = c;
    return true;
}

static bool set_pend(okv_grammar_matcher *m, const char *s, size_t n) {
    if (!reserve(&m->pend, &m->pend_cap, n)) return false;
    if (n) memmove(m->pend, s, n);
    m->pend_n = n;
    return true;
}

static char *dup_bytes(const char *s, size_t n) {
    char *d = malloc(n ? n : 1);
    if (d && n) memcpy(d, s, n);
    return d;
}

static bool set_trigger(okv_grammar_matcher *m, const char *trigger, size_t len, bool anchored) {
    if (!(m->trig = dup_bytes(trigger, len))) return false;
    m->trig_n = len;
    m->anchored = anchored;
    m->lazy = LZ_WAIT;
    return true;
}

okv_grammar_matcher *okv_grammar_matcher_create_lazy(const okv_grammar *g, const char *trigger, size_t len,
                                                     bool anchored, okv_error *err) {
    if (!trigger || !len) {
        okv_fail(err, OKV_ERR_INVALID, "a lazy grammar needs a trigger of at least one byte");
        return NULL;
    }
    okv_grammar_matcher *m = okv_grammar_matcher_create(g, err);
    if (m && !set_trigger(m, trigger, len, anchored)) {
        okv_grammar_matcher_free(m);
        okv_fail(err, OKV_ERR_NOMEM, "grammar matcher trigger");
        return NULL;
    }
    return m;
}

bool okv_grammar_matcher_triggered(const okv_grammar_matcher *m) { return m && m->lazy == LZ_ON; }

okv_status okv_grammar_matcher_skip_block(okv_grammar_matcher *m, const char *open_tag, const char *close_tag,
                                          bool inside, okv_error *err) {
    if (!m || !open_tag || !close_tag || !*open_tag || !*close_tag)
        return okv_fail(err, OKV_ERR_INVALID, "skip_block: a NULL matcher or an empty tag");
    if (m->has_read)
        return okv_fail(err, OKV_ERR_INVALID, "skip_block: the matcher has read text already");
    char *o = dup_bytes(open_tag, strlen(open_tag)), *c = dup_bytes(close_tag, strlen(close_tag));
    if (!o || !c) {
        free(o);
        free(c);
        return okv_fail(err, OKV_ERR_NOMEM, "skip_block: out of memory");
    }
    free(m->blk_open);
    free(m->blk_close);
    m->blk_open = o;
    m->blk_close = c;
    m->blk_open_n = strlen(open_tag);
    m->blk_close_n = strlen(close_tag);
    m->blk_inside = inside;
    m->lazy = lazy_start(m);
    okv_error_clear(err);
    return OKV_OK;
}

/* ASCII whitespace, which an anchored trigger or a block's open tag may follow. */
static bool is_ws(char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; }

/* Where a waiting matcher's trigger is in pend + b (len bytes), put in
 * tbuf: LK_FOUND with *at its offset, LK_WAIT (*keep: the offset of the
 * tail to keep as pend), LK_OFF (an anchored trigger cannot come now). */
static int lazy_look(okv_grammar_matcher *m, const char *b, size_t len, size_t *at, size_t *keep) {
    const size_t n = m->pend_n + len;
    *at = *keep = 0;
    if (!n) return LK_WAIT;
    if (!reserve(&m->tbuf, &m->tbuf_cap, n)) return LK_NOMEM;
    if (m->pend_n) memcpy(m->tbuf, m->pend, m->pend_n);
    if (len) memcpy(m->tbuf + m->pend_n, b, len);
    const char *t = m->tbuf;
    if (m->anchored) {
        size_t i = 0;
        while (i < n && is_ws(t[i])) i++;
        const size_t r = n - i, c = r < m->trig_n ? r : m->trig_n;
        if (memcmp(t + i, m->trig, c) != 0 || n > MAX_ANCHOR_WAIT) return LK_OFF;
        *at = i;
        *keep = 0;
        return r >= m->trig_n ? LK_FOUND : LK_WAIT;
    }
    for (size_t i = 0; i + m->trig_n <= n; i++) {
        if (t[i] == m->trig[0] && memcmp(t + i, m->trig, m->trig_n) == 0) {
            *at = i;
            return LK_FOUND;
        }
    }
    *keep = n >= m->trig_n ? n - (m->trig_n - 1) : 0;
    return LK_WAIT;
}

okv_grammar_matcher *okv_grammar_matcher_clone(const okv_grammar_matcher *src, okv_error *err) {
    okv_grammar_matcher *m = okv_grammar_matcher_create(src ? src->g : NULL, err);
    if (!m) return NULL;
    if (!commit(m, &src->stacks, src->pval, src->prem) ||
        (src->trig && (!set_trigger(m, src->trig, src->trig_n, src->anchored) ||
                       !set_pend(m, src->pend, src->pend_n)))) {
        okv_grammar_matcher_free(m);
        okv_fail(err, OKV_ERR_NOMEM, "grammar matcher clone");
        return NULL;
    }
    if (src->blk_open) {
        m->blk_open = dup_bytes(src->blk_open, src->blk_open_n);
        m->blk_close = dup_bytes(src->blk_close, src->blk_close_n);
        m->blk_open_n = src->blk_open_n;
        m->blk_close_n = src->blk_close_n;
        m->blk_inside = src->blk_inside;
        if (!m->blk_open || !m->blk_close || !reserve(&m->bpend, &m->bpend_cap, src->bpend_n)) {
            okv_grammar_matcher_free(m);
            okv_fail(err, OKV_ERR_NOMEM, "grammar matcher clone");
            return NULL;
        }
        if (src->bpend_n) memcpy(m->bpend, src->bpend, src->bpend_n);
        m->bpend_n = src->bpend_n;
    }
    m->lazy = src->lazy;
    m->has_read = src->has_read;
    m->ws_n = src->ws_n;
    return m;
}

/* Runs bytes through the stacks in scratch; the final set in *out. */
static bool run_bytes(okv_grammar_matcher *m, const unsigned char *b, size_t len, sset *out, uint32_t *pval,
                      int *prem) {
    sset cur = m->stacks;
    uint32_t pv = m->pval;
    int pr = m->prem;
    for (size_t i = 0; i < len; i++) {
        sset nx;
        if (!step(m->g, &m->scratch, &cur, pv, pr, b[i], &nx, &pv, &pr)) return false;
        cur = nx;
    }
    *out = cur;
    *pval = pv;
    *prem = pr;
    return true;
}

/* A waiting lazy matcher over len more bytes: free text, or the trigger
 * and the grammar from it on; a matcher that is not lazy, past its skipped
 * block: white space, then the grammar from the first other byte (check:
 * only whether it would be accepted). */
static bool lazy_bytes(okv_grammar_matcher *m, const char *bytes, size_t len, bool check) {
    if (m->lazy == LZ_OFF) return true;
    sset out;
    uint32_t pv;
    int pr;
    if (!m->trig) {
        size_t i = 0;
        while (i < len && is_ws(bytes[i]) && m->ws_n + i < POST_BLOCK_WS) i++;
        if (i == len) {
            if (!check) m->ws_n += len;
            return true;
        }
        arena_reset(&m->scratch);
        if (!run_bytes(m, (const unsigned char *)bytes + i, len - i, &out, &pv, &pr)) return false;
        if (check) return true;
        if (!commit(m, &out, pv, pr)) return false;
        m->lazy = LZ_ON;
        return true;
    }
    size_t at = 0, keep = 0;
    switch (lazy_look(m, bytes, len, &at, &keep)) {
    case LK_NOMEM: return false;
    case LK_OFF:
        if (!check) m->lazy = LZ_OFF, m->pend_n = 0;
        return true;
    case LK_WAIT: return check || set_pend(m, m->tbuf + keep, m->pend_n + len - keep);
    default: break;
    }
    arena_reset(&m->scratch);
    const size_t n = m->pend_n + len;
    if (!run_bytes(m, (const unsigned char *)m->tbuf + at, n - at, &out, &pv, &pr)) return false;
    if (check) return true;
    if (!commit(m, &out, pv, pr)) return false;
    m->lazy = LZ_ON;
    m->pend_n = 0;
    return true;
}

/* A matcher in its block phase over len more bytes: free text until the
 * block is known absent (the text does not begin with the open tag) or has
 * ended (its close tag), then the rest goes to lazy_bytes, so a trigger
 * inside the block never counts (check: only whether it would be
 * accepted; the state is left as it is). */
static bool block_bytes(okv_grammar_matcher *m, const char *bytes, size_t len, bool check) {
    const size_t n = m->bpend_n + len;
    if (!reserve(&m->bbuf, &m->bbuf_cap, n ? n : 1)) return false;
    if (m->bpend_n) memcpy(m->bbuf, m->bpend, m->bpend_n);
    if (len) memcpy(m->bbuf + m->bpend_n, bytes, len);
    const char *t = m->bbuf;
    int state = m->lazy;
    size_t at = 0, keep = n; /* the rest from at goes on; else t[keep..n) stays pending */
    if (state == LZ_BLK_START) {
        size_t i = 0;
        while (i < n && is_ws(t[i])) i++;
        const size_t r = n - i, c = r < m->blk_open_n ? r : m->blk_open_n;
        /* not lazy: no more white space before the block than after it */
        if (memcmp(t + i, m->blk_open, c) != 0 || n > MAX_ANCHOR_WAIT || (!m->trig && i > POST_BLOCK_WS)) {
            state = LZ_WAIT; /* no block: all of the text looks for the trigger */
        } else if (r >= m->blk_open_n) {
            state = LZ_BLK_IN;
            at = i + m->blk_open_n;
        } else {
            keep = 0; /* whitespace, then a prefix of the open tag: wait */
        }
    }
    if (state == LZ_BLK_IN) {
        keep = n;
        for (size_t i = at; i + m->blk_close_n <= n; i++)
            if (t[i] == m->blk_close[0] && memcmp(t + i, m->blk_close, m->blk_close_n) == 0) {
                state = LZ_WAIT;
                at = i + m->blk_close_n;
                break;
            }
        if (state == LZ_BLK_IN) {
            const size_t tail = m->blk_close_n - 1;
            keep = n - at > tail ? n - tail : at;
        }
    }
    if (state != LZ_WAIT) {
        if (check) return true;
        m->lazy = state;
        m->bpend_n = n - keep;
        if (m->bpend_n) {
            if (!reserve(&m->bpend, &m->bpend_cap, m->bpend_n)) return false;
            memmove(m->bpend, t + keep, m->bpend_n);
        }
        return true;
    }
    /* The block is over (or absent): what follows looks for the trigger,
     * from an empty pending text (lazy_bytes copies it out of bbuf). */
    if (check) {
        const int was = m->lazy;
        m->lazy = LZ_WAIT;
        const bool ok = lazy_bytes(m, t + at, n - at, true);
        m->lazy = was;
        return ok;
    }
    const int was = m->lazy;
    m->lazy = LZ_WAIT;
    if (!lazy_bytes(m, t + at, n - at, true)) {
        m->lazy = was; /* refused: m stays as it was */
        return false;
    }
    m->bpend_n = 0;
    return lazy_bytes(m, t + at, n - at, false);
}

/* Free text while the grammar waits: the block phase, then the trigger. */
static bool wait_bytes(okv_grammar_matcher *m, const char *bytes, size_t len, bool check) {
    if (m->lazy == LZ_BLK_START || m->lazy == LZ_BLK_IN) return block_bytes(m, bytes, len, check);
    return lazy_bytes(m, bytes, len, check);
}

static bool accept_bytes(okv_grammar_matcher *m, const char *bytes, size_t len) {
    if (m->lazy != LZ_ON) return wait_bytes(m, bytes, len, false);
    arena_reset(&m->scratch);
    sset out;
    uint32_t pv;
    int pr;
    if (!run_bytes(m, (const unsigned char *)bytes, len, &out, &pv, &pr)) return false;
    return commit(m, &out, pv, pr);
}

bool okv_grammar_matcher_accept_bytes(okv_grammar_matcher *m, const char *bytes, size_t len) {
    if (!m || (!bytes && len) || !accept_bytes(m, bytes, len)) return false;
    m->has_read = m->has_read || len > 0;
    return true;
}

bool okv_grammar_matcher_can_end(const okv_grammar_matcher *m) {
    /* a lazy matcher's free text may end anywhere; one that is not lazy,
     * before its grammar is on, where the grammar's start may */
    if (m && m->lazy != LZ_ON && m->trig) return true;
    if (!m || m->prem) return false;
    for (int32_t i = 0; i < m->stacks.n; i++)
        if (!m->stacks.s[i]) return true;
    return false;
}

bool okv_grammar_matcher_must_end(const okv_grammar_matcher *m) {
    if (!m || m->prem || m->lazy != LZ_ON) return false;
    for (int32_t i = 0; i < m->stacks.n; i++)
        if (m->stacks.s[i]) return false;
    return true;
}

/* Whether a token without text (a control token) may come now: while the
 * text is free (a lazy matcher's wait, a skipped block), not where a
 * grammar (or a matcher that is not lazy, past its block) wants bytes. */
static bool textless_ok(const okv_grammar_matcher *m) { return m->lazy != LZ_ON && (m->trig || m->lazy != LZ_WAIT); }

bool okv_grammar_matcher_allows(okv_grammar_matcher *m, const okv_grammar_vocab *v, int32_t id) {
    if (!m || !v || id < 0 || id >= v->n_tokens) return false;
    if (v->is_end[id]) return okv_grammar_matcher_can_end(m);
    if (v->len[id] == 0) return textless_ok(m);
    if (m->lazy != LZ_ON) return wait_bytes(m, v->bytes + v->off[id], v->len[id], true);
    arena_reset(&m->scratch);
    sset out;
    uint32_t pv;
    int pr;
    return run_bytes(m, (const unsigned char *)v->bytes + v->off[id], v->len[id], &out, &pv, &pr);
}

okv_status okv_grammar_matcher_accept_token(okv_grammar_matcher *m, const okv_grammar_vocab *v, int32_t id,
                                            okv_error *err) {
    okv_error_clear(err);
    if (!m || !v) return okv_fail(err, OKV_ERR_INVALID, "grammar matcher or vocabulary is NULL");
    if (id < 0 || id >= v->n_tokens)
        return okv_fail(err, OKV_ERR_INVALID, "token %d outside the vocabulary (%d tokens)", (int)id, (int)v->n_tokens);
    if (v->is_end[id]) {
        if (!okv_grammar_matcher_can_end(m))
            return okv_fail(err, OKV_ERR_INVALID, "end token %d before the grammar is complete", (int)id);
        return OKV_OK;
    }
    if (v->len[id] == 0 && textless_ok(m)) return OKV_OK; /* free text: a control token */
    if (v->len[id] == 0) return okv_fail(err, OKV_ERR_INVALID, "token %d has no text; the grammar refuses it", (int)id);
    if (!okv_grammar_matcher_accept_bytes(m, v->bytes + v->off[id], v->len[id])) {
        if (m->scratch.oom || m->next.oom) return okv_fail(err, OKV_ERR_NOMEM, "grammar matcher state");
        if (m->scratch.limit)
            return okv_fail(err, OKV_ERR_INVALID, "token %d: the grammar expands past the matcher's limits here", (int)id);
        return okv_fail(err, OKV_ERR_INVALID, "token %d ('%.*s') does not continue the grammar", (int)id,
                        (int)(v->len[id] > 40 ? 40 : v->len[id]), v->bytes + v->off[id]);
    }
    return OKV_OK;
}

/* ---- masking the vocabulary ---- */

typedef struct walk {
    okv_grammar_matcher *m;
    const okv_grammar_vocab *v;
    uint64_t *bits;
    int32_t count;
    uint64_t loop[2]; /* ASCII bytes that leave the walk's start state as it is */
} walk;

/* Sets hold no stack twice, so equal sizes and one inside the other is
 * equality; the one with an index is looked up in (a scan for each stack
 * made comparing two sets of 20000 stacks take seconds, on the thread every
 * sequence shares). */
static bool set_equal(arena *ar, const sset *a, const sset *b) {
    if (a->n != b->n) return false;
    if (a->tab && !b->tab) {
        const sset *t = a;
        a = b;
        b = t;
    }
    for (int32_t i = 0; i < a->n; i++)
        if (!sset_has(ar, b, a->s[i])) return false;
    return true;
}

static void mark_range(walk *w, int32_t lo, int32_t hi) {
    for (int32_t t = lo; t < hi; t++) {
        const int32_t id = w->v->sorted[t];
        w->bits[id >> 6] |= 1ull << (id & 63);
    }
    w->count += hi - lo;
}

/* same: the state here is the walk's start state.  Inside a string, most
 * bytes loop back to it (w->loop): those steps cost nothing, and a subtree
 * whose bytes all loop is allowed whole without a step. */
static void dfs(walk *w, int32_t node, const sset *in, uint32_t pval, int prem, bool same) {
    const okv_grammar_vocab *v = w->v;
    const okv_trie_node *nd = v->node;
    for (int32_t c = node + 1; c < nd[node].end; c = nd[c].end) {
        const uint8_t b = nd[c].byte;
        if (same && b < 0x80 && ((w->loop[b >> 6] >> (b & 63)) & 1)) {
            if (!nd[c].high_below && !(nd[c].below[0] & ~w->loop[0]) && !(nd[c].below[1] & ~w->loop[1])) {
                mark_range(w, nd[c].sub_first, nd[nd[c].end].sub_first);
                continue;
            }
            mark_range(w, nd[c].tok_first, nd[c].tok_first + nd[c].tok_n);
            if (nd[c].end > c + 1) dfs(w, c, in, pval, prem, true);
            continue;
        }
        amark mk = arena_mark(&w->m->scratch);
        sset out;
        uint32_t pv;
        int pr;
        if (step(w->m->g, &w->m->scratch, in, pval, prem, b, &out, &pv, &pr)) {
            mark_range(w, nd[c].tok_first, nd[c].tok_first + nd[c].tok_n);
            if (nd[c].end > c + 1) dfs(w, c, &out, pv, pr, false);
        }
        arena_rewind(&w->m->scratch, mk);
    }
}

/* The ASCII bytes after which the state is the same set of stacks again. */
static void loop_bytes(walk *w) {
    okv_grammar_matcher *m = w->m;
    w->loop[0] = w->loop[1] = 0;
    if (m->prem) return;
    for (int b = 0; b < 0x80; b++) {
        amark mk = arena_mark(&m->scratch);
        sset out;
        uint32_t pv;
        int pr;
        if (step(m->g, &m->scratch, &m->stacks, 0, 0, (unsigned char)b, &out, &pv, &pr) && set_equal(&m->scratch, &out, &m->stacks))
            w->loop[b >> 6] |= 1ull << (b & 63);
        arena_rewind(&m->scratch, mk);
    }
}

/* The state as a key: the partial character, then every stack's elements. */
static size_t state_key(okv_grammar_matcher *m, uint64_t *hash) {
    size_t n = 3;
    for (int32_t i = 0; i < m->stacks.n; i++) {
        for (const snode *x = m->stacks.s[i]; x; x = x->next) n++;
        n++;
    }
    if (n > m->keybuf_cap) {
        uintptr_t *k = realloc(m->keybuf, n * sizeof *k);
        if (!k) return 0;
        m->keybuf = k;
        m->keybuf_cap = n;
    }
    uintptr_t *k = m->keybuf;
    size_t j = 0;
    k[j++] = m->pval;
    k[j++] = (uintptr_t)m->prem;
    k[j++] = (uintptr_t)m->stacks.n;
    for (int32_t i = 0; i < m->stacks.n; i++) {
        for (const snode *x = m->stacks.s[i]; x; x = x->next) k[j++] = (uintptr_t)x->pos;
        k[j++] = 0;
    }
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < j; i++) h = (h ^ (uint64_t)k[i]) * 1099511628211ull;
    *hash = h;
    return j;
}

static void bits_to_bools(const uint64_t *bits, int32_t n, bool *allowed) {
    for (int32_t i = 0; i < n; i++) allowed[i] = (bits[i >> 6] >> (i & 63)) & 1;
}

int32_t okv_grammar_matcher_mask(okv_grammar_matcher *m, const okv_grammar_vocab *v, bool *allowed) {
    if (!m || !v || !allowed) return 0;
    const int32_t n = v->n_tokens;
    if (m->lazy != LZ_ON) {
        /* Waiting: only a token that completes the trigger with text the
         * grammar refuses is out (rare: this runs after a refused draw). */
        int32_t count = 0;
        for (int32_t i = 0; i < n; i++) count += (allowed[i] = okv_grammar_matcher_allows(m, v, i));
        return count;
    }
    const size_t words = ((size_t)n + 63) / 64;
    if (m->cache_v != v || m->cache_vocab != n) {
        for (int i = 0; i < N_CACHE; i++) {
            free(m->cache[i].key);
            free(m->cache[i].bits);
            m->cache[i] = (mcache){0};
        }
        m->cache_v = v;
        m->cache_vocab = n;
    }
    uint64_t hash = 0;
    size_t kn = state_key(m, &hash);
    m->clock++;
    if (kn) {
        for (int i = 0; i < N_CACHE; i++) {
            mcache *c = &m->cache[i];
            if (c->bits && c->hash == hash && c->key_n == kn && memcmp(c->key, m->keybuf, kn * sizeof *c->key) == 0) {
                c->stamp = m->clock;
                bits_to_bools(c->bits, n, allowed);
                return c->count;
            }
        }
    }
    /* Fill the least recently used slot (or walk into a temporary one). */
    mcache *slot = &m->cache[0];
    for (int i = 1; i < N_CACHE; i++)
        if (m->cache[i].stamp < slot->stamp) slot = &m->cache[i];
    if (!slot->bits) slot->bits = malloc(words * sizeof *slot->bits);
    uintptr_t *key = kn ? realloc(slot->key, kn * sizeof *key) : NULL;
    if (key) slot->key = key;
    if (!slot->bits || !key) {
        /* No memory for the cache: answer conservatively per token. */
        int32_t count = 0;
        for (int32_t i = 0; i < n; i++) count += (allowed[i] = okv_grammar_matcher_allows(m, v, i));
        free(slot->bits);
        slot->bits = NULL;
        return count;
    }
    memset(slot->bits, 0, words * sizeof *slot->bits);
    arena_reset(&m->scratch);
    walk w = {m, v, slot->bits, 0, {0, 0}};
    m->scratch.total = 0;
    m->scratch.budget = MAX_MASK_WORK;
    loop_bytes(&w);
    dfs(&w, 0, &m->stacks, m->pval, m->prem, true);
    m->mask_work = m->scratch.total;
    m->scratch.budget = LONG_MAX;
    if (okv_grammar_matcher_can_end(m)) {
        for (int32_t i = 0; i < v->n_end; i++) {
            int32_t id = v->end_ids[i];
            if (!((w.bits[id >> 6] >> (id & 63)) & 1)) {
                w.bits[id >> 6] |= 1ull << (id & 63);
                w.count++;
            }
        }
    }
    const bool complete = !m->scratch.oom && m->mask_work <= MAX_MASK_WORK;
    memcpy(slot->key, m->keybuf, kn * sizeof *key);
    slot->key_n = kn;
    slot->hash = hash;
    slot->count = w.count;
    slot->stamp = complete ? m->clock : 0;
    if (!complete) slot->key_n = 0; /* an incomplete walk is never reused */
    bits_to_bools(slot->bits, n, allowed);
    return w.count;
}

long okv_grammar_matcher_mask_work(const okv_grammar_matcher *m) { return m ? m->mask_work : 0; }
long okv_grammar_matcher_mask_budget(void) { return MAX_MASK_WORK; }
