/* GBNF text -> okv_grammar, following llama.cpp's grammar-parser: the same
 * syntax, the same element encoding and the same expansion of groups and
 * repetitions into generated rules, so a grammar written for llama.cpp
 * means the same here.  Unlike llama.cpp, every error names its line,
 * column and rule, and left recursion is refused at parse time (the
 * matcher would recurse forever on it). */
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "grammar/grammar_impl.h"
#include "core/strmap.h"

/* Bounds that keep a hostile grammar from exhausting memory: a repetition
 * count and the total number of elements. */
#define GBNF_MAX_REPEAT 10000
#define GBNF_MAX_ELEMS (1 << 20)
#define GBNF_MAX_DEPTH 256 /* nested groups: the parser recurses once a level */

typedef struct evec {
    gelem *e;
    size_t n, cap;
} evec;

typedef struct parser {
    const char *src;
    size_t len, pos;
    int32_t n_rules, cap_rules;
    evec *rules;      /* definitions (n 0 = not defined yet) */
    char **names;
    bool *defined;
    size_t *first_use; /* offset of the first reference, for "undefined rule" */
    size_t total;      /* elements so far */
    okv_strmap index;  /* name -> rule id */
    const char *rule;  /* the rule being parsed, for messages */
    okv_error *err;
    bool failed;
    int depth;         /* groups open: ( ( ( recursed once each */
} parser;

static void where(const parser *p, size_t off, int *line, int *col) {
    *line = 1;
    *col = 1;
    for (size_t i = 0; i < off && i < p->len; i++) {
        if (p->src[i] == '\n') {
            (*line)++;
            *col = 1;
        } else {
            (*col)++;
        }
    }
}

__attribute__((format(printf, 3, 4))) static void perr(parser *p, size_t off, const char *fmt, ...) {
    if (p->failed) return;
    p->failed = true;
    char msg[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    int line, col;
    where(p, off, &line, &col);
    if (p->rule)
        okv_fail(p->err, OKV_ERR_INVALID, "grammar line %d column %d (rule '%s'): %s", line, col, p->rule, msg);
    else
        okv_fail(p->err, OKV_ERR_INVALID, "grammar line %d column %d: %s", line, col, msg);
}

static bool push(parser *p, evec *v, uint32_t type, uint32_t value) {
    if (p->failed) return false;
    if (++p->total > GBNF_MAX_ELEMS) {
        perr(p, p->pos, "grammar too large (more than %d elements)", GBNF_MAX_ELEMS);
        return false;
    }
    if (v->n == v->cap) {
        size_t cap = v->cap ? v->cap * 2 : 16;
        gelem *e = realloc(v->e, cap * sizeof *e);
        if (!e) {
            p->failed = true;
            okv_fail(p->err, OKV_ERR_NOMEM, "grammar elements");
            return false;
        }
        v->e = e;
        v->cap = cap;
    }
    v->e[v->n++] = (gelem){type, value};
    return true;
}

static bool append(parser *p, evec *v, const gelem *e, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (!push(p, v, e[i].type, e[i].value)) return false;
    return true;
}

/* Looks a rule name up, adding it (undefined) when new. */
static int32_t symbol(parser *p, const char *name, size_t n, size_t use_at) {
    const int32_t known = okv_strmap_get(&p->index, name, n);
    if (known >= 0) return known;
    if (p->n_rules == p->cap_rules) {
        int32_t cap = p->cap_rules ? p->cap_rules * 2 : 32;
        evec *r = realloc(p->rules, (size_t)cap * sizeof *r);
        if (r) p->rules = r;
        char **nm = realloc(p->names, (size_t)cap * sizeof *nm);
        if (nm) p->names = nm;
        bool *d = realloc(p->defined, (size_t)cap * sizeof *d);
        if (d) p->defined = d;
        size_t *u = realloc(p->first_use, (size_t)cap * sizeof *u);
        if (u) p->first_use = u;
        if (!r || !nm || !d || !u) {
            p->failed = true;
            okv_fail(p->err, OKV_ERR_NOMEM, "grammar rules");
            return -1;
        }
        p->cap_rules = cap;
    }
    char *copy = malloc(n + 1);
    if (!copy) {
        p->failed = true;
        okv_fail(p->err, OKV_ERR_NOMEM, "grammar rule name");
        return -1;
    }
    memcpy(copy, name, n);
    copy[n] = 0;
    int32_t id = p->n_rules++;
    p->names[id] = copy;
    if (!okv_strmap_put(&p->index, copy, n, id)) {
        p->failed = true;
        okv_fail(p->err, OKV_ERR_NOMEM, "grammar rule index");
    }
    p->rules[id] = (evec){0};
    p->defined[id] = false;
    p->first_use[id] = use_at;
    return id;
}

/* A fresh rule named after the one being parsed: "name~N" ('~' cannot be
 * in a name the text defines, so it never collides with one). */
static int32_t generated(parser *p, const char *base) {
    char name[160];
    snprintf(name, sizeof name, "%.120s~%d", base, (int)p->n_rules);
    int32_t id = symbol(p, name, strlen(name), p->pos);
    if (id >= 0) p->defined[id] = true;
    return id;
}

static int peek(const parser *p, size_t ahead) { return p->pos + ahead < p->len ? (unsigned char)p->src[p->pos + ahead] : 0; }
static bool at_end(const parser *p) { return p->pos >= p->len; }

static bool is_word(int c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
}

static void skip_space(parser *p, bool newline_ok) {
    while (!at_end(p)) {
        int c = peek(p, 0);
        if (c == ' ' || c == '\t') {
            p->pos++;
        } else if (c == '#') {
            while (!at_end(p) && peek(p, 0) != '\n' && peek(p, 0) != '\r') p->pos++;
        } else if (newline_ok && (c == '\n' || c == '\r')) {
            p->pos++;
        } else {
            break;
        }
    }
}

static int hexval(int c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* One UTF-8 character of the source; false (reported) if malformed. */
static bool utf8_char(parser *p, uint32_t *cp) {
    const unsigned char *s = (const unsigned char *)p->src + p->pos;
    size_t left = p->len - p->pos;
    unsigned c = s[0];
    int n = c < 0x80 ? 0 : (c & 0xE0) == 0xC0 ? 1 : (c & 0xF0) == 0xE0 ? 2 : (c & 0xF8) == 0xF0 ? 3 : -1;
    if (n < 0 || (size_t)n + 1 > left) {
        perr(p, p->pos, "invalid UTF-8 byte 0x%02x", c);
        return false;
    }
    uint32_t v = n == 0 ? c : n == 1 ? (c & 0x1F) : n == 2 ? (c & 0x0F) : (c & 0x07);
    for (int i = 1; i <= n; i++) {
        if ((s[i] & 0xC0) != 0x80) {
            perr(p, p->pos, "invalid UTF-8 sequence");
            return false;
        }
        v = (v << 6) | (s[i] & 0x3F);
    }
    p->pos += (size_t)n + 1;
    *cp = v;
    return true;
}

/* A character of a literal or class, with llama.cpp's escapes. */
static bool char_or_escape(parser *p, uint32_t *cp) {
    if (peek(p, 0) != '\\') return utf8_char(p, cp);
    size_t at = p->pos;
    int e = peek(p, 1);
    p->pos += 2;
    int digits = e == 'x' ? 2 : e == 'u' ? 4 : e == 'U' ? 8 : 0;
    if (digits) {
        uint32_t v = 0;
        for (int i = 0; i < digits; i++) {
            int h = hexval(peek(p, 0));
            if (h < 0) {
                perr(p, at, "escape \\%c needs %d hex digits", e, digits);
                return false;
            }
            v = v * 16 + (uint32_t)h;
            p->pos++;
        }
        if (v > 0x10FFFF) {
            perr(p, at, "escape gives U+%X, beyond Unicode", (unsigned)v);
            return false;
        }
        *cp = v;
        return true;
    }
    switch (e) {
    case 't': *cp = '\t'; return true;
    case 'r': *cp = '\r'; return true;
    case 'n': *cp = '\n'; return true;
    case '\\': case '"': case '[': case ']': case '-': case '^': *cp = (uint32_t)e; return true;
    default:
        perr(p, at, e ? "unknown escape \\%c" : "escape at the end of the text", e);
        return false;
    }
}

static void alternates(parser *p, const char *name, int32_t id, bool nested);

/* x{min,max} (max < 0: unbounded) on the item out[start..], as llama.cpp
 * expands it: min copies, then a chain of optional rules. */
static void repeat(parser *p, evec *out, size_t start, const char *name, int min, int max) {
    if (start == out->n) {
        perr(p, p->pos, "a repetition needs an item before it");
        return;
    }
    size_t n_prev = out->n - start;
    gelem *prev = malloc(n_prev * sizeof *prev);
    if (!prev) {
        p->failed = true;
        okv_fail(p->err, OKV_ERR_NOMEM, "grammar repetition");
        return;
    }
    memcpy(prev, out->e + start, n_prev * sizeof *prev);
    if (min == 0) {
        out->n = start;
    } else {
        for (int i = 1; i < min && !p->failed; i++) append(p, out, prev, n_prev);
    }
    int32_t last = -1;
    int n_opt = max < 0 ? 1 : max - min;
    for (int i = 0; i < n_opt && !p->failed; i++) {
        int32_t id = generated(p, name);
        if (id < 0) break;
        evec r = {0};
        append(p, &r, prev, n_prev);
        if (i > 0 || max < 0) push(p, &r, GE_REF, (uint32_t)(max < 0 ? id : last));
        push(p, &r, GE_ALT, 0);
        push(p, &r, GE_END, 0);
        p->rules[id] = r;
        last = id;
    }
    if (n_opt > 0 && last >= 0) push(p, out, GE_REF, (uint32_t)last);
    free(prev);
}

static int number(parser *p) {
    long v = 0;
    size_t at = p->pos;
    if (!(peek(p, 0) >= '0' && peek(p, 0) <= '9')) {
        perr(p, at, "expected a number in { }");
        return -1;
    }
    while (peek(p, 0) >= '0' && peek(p, 0) <= '9') {
        v = v * 10 + (peek(p, 0) - '0');
        p->pos++;
        if (v > GBNF_MAX_REPEAT) {
            perr(p, at, "repetition count above %d", GBNF_MAX_REPEAT);
            return -1;
        }
    }
    return (int)v;
}

static void sequence(parser *p, evec *out, const char *name, bool nested) {
    size_t last_start = out->n;
    while (!at_end(p) && !p->failed) {
        int c = peek(p, 0);
        if (c == '"') {
            size_t at = p->pos++;
            last_start = out->n;
            while (!p->failed && peek(p, 0) != '"') {
                if (at_end(p)) {
                    perr(p, at, "unterminated string literal");
                    return;
                }
                uint32_t cp;
                if (!char_or_escape(p, &cp)) return;
                push(p, out, GE_CHAR, cp);
            }
            p->pos++;
        } else if (c == '[') {
            size_t at = p->pos++;
            last_start = out->n;
            uint32_t start_type = GE_CHAR;
            if (peek(p, 0) == '^') {
                p->pos++;
                start_type = GE_CHAR_NOT;
            }
            size_t first = out->n;
            while (!p->failed && peek(p, 0) != ']') {
                if (at_end(p)) {
                    perr(p, at, "unterminated character class");
                    return;
                }
                uint32_t cp;
                if (!char_or_escape(p, &cp)) return;
                push(p, out, out->n == first ? start_type : GE_CHAR_ALT, cp);
                if (peek(p, 0) == '-' && peek(p, 1) != ']' && p->pos + 1 < p->len) {
                    p->pos++;
                    uint32_t hi;
                    size_t rat = p->pos;
                    if (!char_or_escape(p, &hi)) return;
                    if (hi < cp) {
                        perr(p, rat, "range end U+%X below its start U+%X", (unsigned)hi, (unsigned)cp);
                        return;
                    }
                    push(p, out, GE_RNG_UPPER, hi);
                }
            }
            if (out->n == first) {
                perr(p, at, "empty character class");
                return;
            }
            p->pos++;
        } else if (is_word(c)) {
            size_t at = p->pos;
            while (is_word(peek(p, 0))) p->pos++;
            {
                /* "name ::=" after spaces also means a newline is missing. */
                size_t save = p->pos;
                skip_space(p, false);
                if (p->pos + 3 <= p->len && memcmp(p->src + p->pos, "::=", 3) == 0) {
                    perr(p, at, "missing newline before rule '%.*s'", (int)(save - at), p->src + at);
                    return;
                }
                p->pos = save;
            }
            int32_t id = symbol(p, p->src + at, p->pos - at, at);
            if (id < 0) return;
            last_start = out->n;
            push(p, out, GE_REF, (uint32_t)id);
        } else if (c == '(') {
            if (p->depth >= GBNF_MAX_DEPTH) {
                perr(p, p->pos, "groups nested more than %d deep", GBNF_MAX_DEPTH);
                return;
            }
            p->pos++;
            skip_space(p, true);
            int32_t id = generated(p, name);
            if (id < 0) return;
            p->depth++;
            alternates(p, name, id, true);
            p->depth--;
            if (p->failed) return;
            if (peek(p, 0) != ')') {
                perr(p, p->pos, "expected ')'");
                return;
            }
            p->pos++;
            last_start = out->n;
            push(p, out, GE_REF, (uint32_t)id);
        } else if (c == '.') {
            p->pos++;
            last_start = out->n;
            push(p, out, GE_ANY, 0);
        } else if (c == '*' || c == '+' || c == '?') {
            p->pos++;
            repeat(p, out, last_start, name, c == '+' ? 1 : 0, c == '?' ? 1 : -1);
        } else if (c == '{') {
            size_t at = p->pos++;
            skip_space(p, false);
            int min = number(p), max = min;
            if (min < 0) return;
            skip_space(p, false);
            if (peek(p, 0) == ',') {
                p->pos++;
                skip_space(p, false);
                if (peek(p, 0) == '}') {
                    max = -1;
                } else {
                    max = number(p);
                    if (max < 0) return;
                    if (max < min) {
                        perr(p, at, "repetition {%d,%d}: the maximum is below the minimum", min, max);
                        return;
                    }
                }
                skip_space(p, false);
            }
            if (peek(p, 0) != '}') {
                perr(p, p->pos, "expected '}'");
                return;
            }
            p->pos++;
            repeat(p, out, last_start, name, min, max);
        } else if (c == '<') {
            perr(p, p->pos, "token references (<...>) are not supported");
            return;
        } else {
            break;
        }
        skip_space(p, nested);
    }
}

static void alternates(parser *p, const char *name, int32_t id, bool nested) {
    evec r = {0};
    sequence(p, &r, name, nested);
    while (!p->failed && peek(p, 0) == '|') {
        push(p, &r, GE_ALT, 0);
        p->pos++;
        skip_space(p, true);
        sequence(p, &r, name, nested);
    }
    push(p, &r, GE_END, 0);
    if (p->failed) {
        free(r.e);
        return;
    }
    free(p->rules[id].e);
    p->rules[id] = r;
}

static void rule(parser *p) {
    size_t at = p->pos;
    if (!is_word(peek(p, 0))) {
        perr(p, at, "expected a rule name, found '%c'", peek(p, 0) >= 32 && peek(p, 0) < 127 ? peek(p, 0) : '?');
        return;
    }
    while (is_word(peek(p, 0))) p->pos++;
    int32_t id = symbol(p, p->src + at, p->pos - at, at);
    if (id < 0) return;
    if (p->defined[id]) {
        perr(p, at, "rule '%s' is defined twice", p->names[id]);
        return;
    }
    p->defined[id] = true;
    p->rule = p->names[id];
    skip_space(p, false);
    if (!(p->pos + 3 <= p->len && memcmp(p->src + p->pos, "::=", 3) == 0)) {
        perr(p, p->pos, "expected '::=' after the rule name");
        return;
    }
    p->pos += 3;
    skip_space(p, true);
    alternates(p, p->names[id], id, false);
    if (p->failed) return;
    if (peek(p, 0) == '\r') p->pos += peek(p, 1) == '\n' ? 2 : 1;
    else if (peek(p, 0) == '\n') p->pos++;
    else if (!at_end(p)) {
        int c = peek(p, 0);
        perr(p, p->pos, "unexpected '%c'", c >= 32 && c < 127 ? c : '?');
        return;
    }
    p->rule = NULL;
    skip_space(p, true);
}

/* Which rules can match the empty string: a rule is nullable when one of
 * its alternatives is all references to nullable rules (an empty one
 * included).  A worklist over the alternatives of references only, each
 * counting its references not yet known nullable, is linear in the
 * grammar; the fixpoint sweep it replaces took one pass per rule of a
 * chain a0 ::= a1, ..., an ::= "" (40 000 rules: 5 s; half a million,
 * which the size bound allows: minutes).  NULL when out of memory. */
/* The alternative at *e, which is left at its end (GE_ALT or GE_END): its
 * length when it holds rule references only, else -1. */
static int32_t refs_only_alt(const gelem **e) {
    int32_t k = 0;
    bool refs_only = true;
    for (; !gelem_is_end_of_seq(*e); (*e)++, k++) refs_only = refs_only && (*e)->type == GE_REF;
    return refs_only ? k : -1;
}

static bool *nullable_rules(const okv_grammar *g) {
    const int32_t R = g->n_rules;
    bool *nul = calloc((size_t)R + 1, sizeof *nul);
    int32_t *occ_start = calloc((size_t)R + 2, sizeof *occ_start);
    if (!nul || !occ_start) {
        free(nul);
        free(occ_start);
        return NULL;
    }
    /* the candidates (alternatives of references only) and, per rule, the
     * candidates' references to it */
    int32_t n_alts = 0, n_refs = 0;
    for (int32_t r = 0; r < R; r++)
        for (const gelem *e = g->rules[r];; e++) {
            const int32_t k = refs_only_alt(&e);
            if (k >= 0) {
                n_alts++;
                n_refs += k;
                for (const gelem *x = e - k; x < e; x++) occ_start[x->value + 1]++;
            }
            if (e->type == GE_END) break;
        }
    for (int32_t t = 0; t < R; t++) occ_start[t + 1] += occ_start[t];
    int32_t *alt_rule = malloc(((size_t)n_alts + 1) * sizeof *alt_rule),
            *alt_left = malloc(((size_t)n_alts + 1) * sizeof *alt_left),
            *occ = malloc(((size_t)n_refs + 1) * sizeof *occ), *cursor = malloc(((size_t)R + 1) * sizeof *cursor),
            *work = malloc(((size_t)R + 1) * sizeof *work);
    if (!alt_rule || !alt_left || !occ || !cursor || !work) {
        free(nul);
        nul = NULL;
        goto out;
    }
    memcpy(cursor, occ_start, (size_t)R * sizeof *cursor);
    int32_t a = 0, n_work = 0;
    for (int32_t r = 0; r < R; r++)
        for (const gelem *e = g->rules[r];; e++) {
            const int32_t k = refs_only_alt(&e);
            if (k >= 0) {
                alt_rule[a] = r;
                alt_left[a] = k;
                for (const gelem *x = e - k; x < e; x++) occ[cursor[x->value]++] = a;
                if (k == 0 && !nul[r]) nul[r] = true, work[n_work++] = r;
                a++;
            }
            if (e->type == GE_END) break;
        }
    while (n_work) {
        const int32_t t = work[--n_work];
        for (int32_t k = occ_start[t]; k < occ_start[t + 1]; k++) {
            const int32_t c = occ[k];
            if (--alt_left[c] == 0 && !nul[alt_rule[c]]) nul[alt_rule[c]] = true, work[n_work++] = alt_rule[c];
        }
    }
out:
    free(occ_start);
    free(alt_rule);
    free(alt_left);
    free(occ);
    free(cursor);
    free(work);
    return nul;
}

/* Depth-first search over "can start with" edges; a back edge is left
 * recursion.  Returns the rule on the cycle, or -1.  Iterative, on stack
 * (room for every rule: each is entered once): a chain of rules
 * a0 ::= a1, a1 ::= a2, ... of the grammar's size recursed once a rule. */
typedef struct lc_frame {
    int32_t r;
    const gelem *e; /* the element to look at next */
    bool live;      /* still at the leftmost position of this alternative */
} lc_frame;

static int32_t left_cycle(const okv_grammar *g, const bool *nul, int32_t r0, uint8_t *color, lc_frame *stack) {
    int32_t n = 0;
    color[r0] = 1;
    stack[n++] = (lc_frame){r0, g->rules[r0], true};
    while (n) {
        lc_frame *fr = &stack[n - 1];
        const gelem *e = fr->e;
        if (gelem_is_end_of_seq(e)) {
            if (e->type == GE_END) { /* done: the parent looks at its reference again */
                color[fr->r] = 2;
                n--;
                continue;
            }
            fr->live = true;
            fr->e++;
            continue;
        }
        if (fr->live && e->type == GE_REF) {
            const int32_t t = (int32_t)e->value;
            if (color[t] == 1) return t;
            if (color[t] == 0) {
                color[t] = 1;
                stack[n++] = (lc_frame){t, g->rules[t], true};
                continue;
            }
            if (!nul[t]) fr->live = false;
        } else if (fr->live && e->type != GE_RNG_UPPER && e->type != GE_CHAR_ALT) {
            fr->live = false;
        }
        fr->e++;
    }
    return -1;
}

void okv_grammar_free(okv_grammar *g) {
    if (!g) return;
    for (int32_t i = 0; i < g->n_rules; i++) {
        free(g->rules[i]);
        free(g->names[i]);
    }
    free(g->rules);
    free(g->names);
    free(g);
}

int32_t okv_grammar_n_rules(const okv_grammar *g) { return g ? g->n_rules : 0; }

okv_grammar *okv_grammar_parse(const char *text, size_t len, const char *root, okv_error *err) {
    okv_error_clear(err);
    if (!text) {
        okv_fail(err, OKV_ERR_INVALID, "grammar text is NULL");
        return NULL;
    }
    if (!root) root = "root";
    parser p = {.src = text, .len = len, .err = err};
    skip_space(&p, true);
    while (!at_end(&p) && !p.failed) rule(&p);
    for (int32_t i = 0; i < p.n_rules && !p.failed; i++) {
        if (!p.defined[i]) {
            p.rule = NULL;
            perr(&p, p.first_use[i], "undefined rule '%s'", p.names[i]);
        }
    }
    const int32_t root_id = okv_strmap_get(&p.index, root, strlen(root));
    okv_strmap_free(&p.index);
    if (!p.failed && root_id < 0) {
        p.failed = true;
        okv_fail(err, OKV_ERR_INVALID, "grammar has no start rule '%s'", root);
    }
    okv_grammar *g = NULL;
    if (!p.failed) {
        g = calloc(1, sizeof *g);
        gelem **rules = calloc((size_t)p.n_rules, sizeof *rules);
        if (!g || !rules) {
            free(g);
            free(rules);
            g = NULL;
            okv_fail(err, OKV_ERR_NOMEM, "grammar");
            p.failed = true;
        } else {
            g->n_rules = p.n_rules;
            g->root = root_id;
            g->rules = rules;
            g->names = p.names;
            for (int32_t i = 0; i < p.n_rules; i++) {
                rules[i] = p.rules[i].e;
                p.rules[i].e = NULL;
            }
            p.names = NULL;
        }
    }
    if (g) {
        bool *nul = nullable_rules(g);
        uint8_t *color = calloc((size_t)g->n_rules, 1);
        lc_frame *stack = malloc((size_t)g->n_rules * sizeof *stack);
        int32_t cyc = -1;
        if (nul && color && stack) {
            for (int32_t r = 0; r < g->n_rules && cyc < 0; r++)
                if (!color[r]) cyc = left_cycle(g, nul, r, color, stack);
        }
        free(stack);
        if (!nul || !color || !stack) {
            okv_fail(err, OKV_ERR_NOMEM, "grammar analysis");
            okv_grammar_free(g);
            g = NULL;
        } else if (cyc >= 0) {
            /* A generated rule's name ("x~12") starts with the user's. */
            okv_fail(err, OKV_ERR_INVALID, "grammar rule '%s' is left-recursive (it can reach itself before reading a character)",
                     g->names[cyc]);
            okv_grammar_free(g);
            g = NULL;
        }
        free(nul);
        free(color);
    }
    for (int32_t i = 0; i < p.n_rules; i++) {
        free(p.rules ? p.rules[i].e : NULL);
        if (p.names) free(p.names[i]);
    }
    free(p.rules);
    free(p.names);
    free(p.defined);
    free(p.first_use);
    return g;
}
