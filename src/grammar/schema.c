/* JSON Schema -> GBNF, after llama.cpp's json_schema_to_grammar: the same
 * primitive rules (so whitespace is bounded as there), required properties
 * first in `properties` order, then optional ones in order, arrays through
 * one repetition builder, $ref as rules (recursion allowed).  Where
 * llama.cpp skips a keyword it does not know, this converter refuses it by
 * name: a schema is either honoured or an error. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/json.h"
#include "core/strmap.h"
#include "offkv/grammar.h"

#define SPACE_RULE "| \" \" | \"\\n\"{1,2} [ \\t]{0,20}"
#define CHAR_RULE "[^\"\\\\\\x7F\\x00-\\x1F] | [\\\\] ([\"\\\\/bfnrt] | \"u\" [0-9a-fA-F]{4})"
/* A number's integer part is at most 16 digits, as in llama.cpp. */
#define INT_CAP 9999999999999999LL

typedef struct rule {
    char *name, *body;
} rule;

typedef struct conv {
    rule *r;
    size_t n, cap;
    okv_strmap index; /* rule name -> index into r */
    const okv_json *root;
    const char *root_name; /* the start rule of the schema being converted ("#" refers to it) */
    char **ref_keys, **ref_names; /* $ref -> rule name, set before visiting (recursion) */
    size_t n_refs, n_placeholders;
    okv_error *err;
    bool failed;
    int depth;
    bool loose;           /* okv_json_schemas_to_gbnf_loose: what cannot be honoured is skipped */
    okv_sbuf skipped;     /* ... and said here: "PATH: keyword 'K'", ... */
    int n_skipped;
} conv;

/* Loose conversion: notes a keyword taken as no constraint (the first
 * dozen in full, the rest counted). */
static void skip(conv *c, const char *path, const char *what, const char *key, size_t key_len) {
    if (c->n_skipped++ < 12)
        okv_sbuf_printf(&c->skipped, "%s%s: %s '%.*s'", c->n_skipped > 1 ? ", " : "", path[0] ? path : "#", what,
                        (int)(key_len > 60 ? 60 : key_len), key);
}

static void cfail(conv *c, okv_status st, const char *path, const char *fmt, const char *arg) {
    if (c->failed) return;
    c->failed = true;
    char msg[300];
    snprintf(msg, sizeof msg, fmt, arg);
    okv_fail(c->err, st, "JSON schema at %s: %s", path, msg);
}

static char *xstrdup(conv *c, const char *s) {
    char *d = s ? strdup(s) : NULL;
    if (s && !d && !c->failed) {
        c->failed = true;
        okv_fail(c->err, OKV_ERR_NOMEM, "JSON schema conversion");
    }
    return d;
}

static char *sbuf_take(conv *c, okv_sbuf *b) {
    okv_sbuf_put(b, "", 0);
    if (b->oom) {
        free(b->s);
        if (!c->failed) {
            c->failed = true;
            okv_fail(c->err, OKV_ERR_NOMEM, "JSON schema conversion");
        }
        return NULL;
    }
    return b->s;
}

/* Adds name ::= body (a name made valid; a different body under a taken
 * name gets a number) and returns the name used (owned by c). */
static const char *add_rule(conv *c, const char *name, const char *body) {
    if (c->failed || !body) return NULL;
    char base[128];
    size_t k = 0;
    for (const char *s = name; *s && k < sizeof base - 12; s++)
        base[k++] = ((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9')) ? *s : '-';
    if (!k) base[k++] = 'r';
    base[k] = 0;
    char cand[160];
    snprintf(cand, sizeof cand, "%s", base);
    for (int i = 0;; i++) {
        if (i) snprintf(cand, sizeof cand, "%s%d", base, i);
        const int32_t j = okv_strmap_get(&c->index, cand, strlen(cand));
        if (j < 0) break;
        if (strcmp(c->r[j].body, body) == 0) return c->r[j].name;
    }
    if (c->n == c->cap) {
        size_t cap = c->cap ? c->cap * 2 : 32;
        rule *r = realloc(c->r, cap * sizeof *r);
        if (!r) {
            c->failed = true;
            okv_fail(c->err, OKV_ERR_NOMEM, "JSON schema conversion");
            return NULL;
        }
        c->r = r;
        c->cap = cap;
    }
    char *nm = xstrdup(c, cand), *bd = xstrdup(c, body);
    if (!nm || !bd) {
        free(nm);
        free(bd);
        return NULL;
    }
    if (!okv_strmap_put(&c->index, nm, strlen(nm), (int32_t)c->n)) {
        free(nm);
        free(bd);
        c->failed = true;
        okv_fail(c->err, OKV_ERR_NOMEM, "JSON schema conversion");
        return NULL;
    }
    c->r[c->n++] = (rule){nm, bd};
    return nm;
}

/* Replaces the body of an existing rule (a $ref placeholder). */
static void set_rule(conv *c, const char *name, const char *body) {
    const int32_t j = okv_strmap_get(&c->index, name, strlen(name));
    if (j < 0) return;
    char *bd = xstrdup(c, body);
    if (!bd) return;
    free(c->r[j].body);
    c->r[j].body = bd;
}

static const char *prim(conv *c, const char *name) {
    static const struct {
        const char *name, *body;
    } P[] = {
        {"space", SPACE_RULE},
        {"boolean", "(\"true\" | \"false\") space"},
        {"null", "\"null\" space"},
        {"char", CHAR_RULE},
        {"string", "\"\\\"\" char* \"\\\"\" space"},
        {"integral-part", "[0] | [1-9] [0-9]{0,15}"},
        {"decimal-part", "[0-9]{1,16}"},
        {"number", "(\"-\"? integral-part) (\".\" decimal-part)? ([eE] [-+]? integral-part)? space"},
        {"integer", "(\"-\"? integral-part) space"},
        {"value", "object | array | string | number | boolean | null"},
        {"object", "\"{\" space ( string \":\" space value (\",\" space string \":\" space value)* )? \"}\" space"},
        {"array", "\"[\" space ( value (\",\" space value)* )? \"]\" space"},
        {"date", "[0-9]{4} \"-\" ( \"0\" [1-9] | \"1\" [0-2] ) \"-\" ( \"0\" [1-9] | [1-2] [0-9] | \"3\" [0-1] )"},
        {"time", "([01] [0-9] | \"2\" [0-3]) \":\" [0-5] [0-9] \":\" [0-5] [0-9] ( \".\" [0-9]{3} )? ( \"Z\" | ( \"+\" | "
                 "\"-\" ) ( [01] [0-9] | \"2\" [0-3] ) \":\" [0-5] [0-9] )"},
        {"date-time", "date \"T\" time"},
        {"date-string", "\"\\\"\" date \"\\\"\" space"},
        {"time-string", "\"\\\"\" time \"\\\"\" space"},
        {"date-time-string", "\"\\\"\" date-time \"\\\"\" space"},
        {"uuid", "\"\\\"\" [0-9a-fA-F]{8} \"-\" [0-9a-fA-F]{4} \"-\" [0-9a-fA-F]{4} \"-\" [0-9a-fA-F]{4} \"-\" "
                 "[0-9a-fA-F]{12} \"\\\"\" space"},
    };
    static const char *deps[][4] = {
        {"boolean", "space"}, {"null", "space"}, {"string", "char", "space"},
        {"number", "integral-part", "decimal-part", "space"}, {"integer", "integral-part", "space"},
        {"value", "object", "array", "string"}, {"value", "number", "boolean", "null"},
        {"object", "string", "value", "space"}, {"array", "value", "space"}, {"date-time", "date", "time"},
        {"date-string", "date", "space"}, {"time-string", "time", "space"}, {"date-time-string", "date-time", "space"},
        {"uuid", "space"},
    };
    for (size_t i = 0; i < sizeof P / sizeof *P; i++) {
        if (strcmp(P[i].name, name) != 0) continue;
        const int32_t known = okv_strmap_get(&c->index, name, strlen(name));
        if (known >= 0) return c->r[known].name;
        const char *got = add_rule(c, name, P[i].body);
        for (size_t d = 0; d < sizeof deps / sizeof *deps; d++)
            if (strcmp(deps[d][0], name) == 0)
                for (int k = 1; k < 4 && deps[d][k]; k++) prim(c, deps[d][k]);
        return got;
    }
    return NULL;
}

/* A code point written safely inside a GBNF literal or class. */
static void put_cp(okv_sbuf *b, uint32_t cp) {
    if ((cp >= 'a' && cp <= 'z') || (cp >= 'A' && cp <= 'Z') || (cp >= '0' && cp <= '9') || cp == ' ' || cp == '_' ||
        cp == ':' || cp == ',' || cp == '.' || cp == '@' || cp == '/' || cp == '+' || cp == '=' || cp == '!')
        okv_sbuf_printf(b, "%c", (char)cp);
    else if (cp < 0x100) okv_sbuf_printf(b, "\\x%02X", (unsigned)cp);
    else if (cp < 0x10000) okv_sbuf_printf(b, "\\u%04X", (unsigned)cp);
    else okv_sbuf_printf(b, "\\U%08X", (unsigned)cp);
}

static size_t utf8_next(const char *s, size_t n, size_t i, uint32_t *cp) {
    unsigned char c = (unsigned char)s[i];
    int k = c < 0x80 ? 0 : (c & 0xE0) == 0xC0 ? 1 : (c & 0xF0) == 0xE0 ? 2 : (c & 0xF8) == 0xF0 ? 3 : -1;
    if (k < 0 || i + (size_t)k >= n) {
        *cp = 0xFFFD;
        return i + 1;
    }
    uint32_t v = k == 0 ? c : k == 1 ? (c & 0x1Fu) : k == 2 ? (c & 0x0Fu) : (c & 0x07u);
    for (int j = 1; j <= k; j++) {
        const unsigned char d = (unsigned char)s[i + (size_t)j];
        if ((d & 0xC0) != 0x80) {
            *cp = 0xFFFD;
            return i + 1;
        }
        v = (v << 6) | (d & 0x3Fu);
    }
    /* Overlong forms, surrogates and values past Unicode are not characters. */
    static const uint32_t least[4] = {0, 0x80, 0x800, 0x10000};
    if (v < least[k] || v > 0x10FFFF || (v >= 0xD800 && v < 0xE000)) {
        *cp = 0xFFFD;
        return i + 1;
    }
    *cp = v;
    return i + (size_t)k + 1;
}

/* A GBNF literal of raw bytes s[0..n). */
static void put_literal(okv_sbuf *b, const char *s, size_t n) {
    okv_sbuf_puts(b, "\"");
    for (size_t i = 0; i < n;) {
        uint32_t cp;
        i = utf8_next(s, n, i, &cp);
        put_cp(b, cp);
    }
    okv_sbuf_puts(b, "\"");
}

/* The GBNF literal of a JSON value's text, followed by space. */
static void put_json_literal(conv *c, okv_sbuf *b, const okv_json *v) {
    okv_sbuf t = {0};
    okv_json_write(&t, v);
    char *s = sbuf_take(c, &t);
    if (!s) return;
    put_literal(b, s, strlen(s));
    free(s);
}

/* llama.cpp's _build_repetition. */
static char *repetition(conv *c, const char *item, long min, long max, const char *sep) {
    okv_sbuf b = {0};
    if (max == 0) return sbuf_take(c, &b);
    if (min == 0 && max == 1) {
        okv_sbuf_printf(&b, "%s?", item);
        return sbuf_take(c, &b);
    }
    if (!sep) {
        if (min == 1 && max < 0) okv_sbuf_printf(&b, "%s+", item);
        else if (min == 0 && max < 0) okv_sbuf_printf(&b, "%s*", item);
        else if (max < 0) okv_sbuf_printf(&b, "%s{%ld,}", item, min);
        else okv_sbuf_printf(&b, "%s{%ld,%ld}", item, min, max);
        return sbuf_take(c, &b);
    }
    okv_sbuf inner = {0};
    okv_sbuf_printf(&inner, "(%s %s)", sep, item);
    char *in = sbuf_take(c, &inner);
    if (!in) return NULL;
    char *rest = repetition(c, in, min > 0 ? min - 1 : 0, max < 0 ? -1 : max - 1, NULL);
    free(in);
    if (!rest) return NULL;
    if (min == 0) okv_sbuf_printf(&b, "(%s %s)?", item, rest);
    else okv_sbuf_printf(&b, "%s %s", item, rest);
    free(rest);
    return sbuf_take(c, &b);
}

/* ---- integer ranges ---- */

/* Equal-length digit strings a <= b: an expression for every digit string
 * between them. */
static void digits_between(okv_sbuf *b, const char *a, const char *z, size_t n) {
    if (n == 0) return;
    if (a[0] == z[0]) {
        okv_sbuf_printf(b, "\"%c\"", a[0]);
        if (n > 1) {
            okv_sbuf_puts(b, " ");
            digits_between(b, a + 1, z + 1, n - 1);
        }
        return;
    }
    bool a_zero = true, z_nine = true;
    for (size_t i = 1; i < n; i++) {
        a_zero &= a[i] == '0';
        z_nine &= z[i] == '9';
    }
    okv_sbuf_puts(b, "(");
    bool first = true;
    char lo = a[0], hi = z[0];
    if (!a_zero) {
        char nines[24];
        memset(nines, '9', n - 1);
        okv_sbuf_printf(b, "\"%c\" ", a[0]);
        okv_sbuf_puts(b, "(");
        digits_between(b, a + 1, nines, n - 1);
        okv_sbuf_puts(b, ")");
        first = false;
        lo++;
    }
    char top = z_nine ? hi : (char)(hi - 1);
    if (lo <= top) {
        if (!first) okv_sbuf_puts(b, " | ");
        okv_sbuf_printf(b, "[%c-%c]", lo, top);
        if (n > 1) okv_sbuf_printf(b, " [0-9]{%zu}", n - 1);
        first = false;
    }
    if (!z_nine) {
        char zeros[24];
        memset(zeros, '0', n - 1);
        if (!first) okv_sbuf_puts(b, " | ");
        okv_sbuf_printf(b, "\"%c\" (", z[0]);
        digits_between(b, zeros, z + 1, n - 1);
        okv_sbuf_puts(b, ")");
    }
    okv_sbuf_puts(b, ")");
}

/* Decimal numbers without leading zeros from lo to hi (0 <= lo <= hi). */
static void uint_range(okv_sbuf *b, int64_t lo, int64_t hi) {
    char ls[24], hs[24];
    okv_sbuf_puts(b, "(");
    bool first = true;
    int64_t p = 1;
    for (int d = 1; d <= 19; d++) {
        int64_t dlo = d == 1 ? 0 : p, dhi = p > INT64_MAX / 10 ? INT64_MAX : p * 10 - 1;
        if (dlo < lo) dlo = lo;
        if (dhi > hi) dhi = hi;
        if (dlo <= dhi) {
            snprintf(ls, sizeof ls, "%0*" PRId64, d, dlo);
            snprintf(hs, sizeof hs, "%0*" PRId64, d, dhi);
            if (!first) okv_sbuf_puts(b, " | ");
            digits_between(b, ls, hs, (size_t)d);
            first = false;
        }
        if (p > INT64_MAX / 10) break;
        p *= 10;
    }
    okv_sbuf_puts(b, ")");
}

static void int_range(okv_sbuf *b, int64_t lo, int64_t hi) {
    okv_sbuf_puts(b, "(");
    bool any = false;
    if (lo < 0) {
        int64_t mlo = hi < 0 ? -hi : 1, mhi = -lo;
        okv_sbuf_puts(b, "\"-\" ");
        uint_range(b, mlo, mhi);
        any = true;
    }
    if (hi >= 0) {
        if (any) okv_sbuf_puts(b, " | ");
        uint_range(b, lo > 0 ? lo : 0, hi);
    }
    okv_sbuf_puts(b, ")");
}

/* An integer bound of a keyword, or false (reported) if not an integer.
 * lower: a minimum (else a maximum).  Numbers here have at most 16 digits
 * before the point, so a bound past that on the open side (a maximum of
 * 1e20) changes nothing and is clamped; one on the closed side (a minimum
 * of 1e20) would be clamped into allowing what the schema forbids, so it is
 * refused. */
static bool int_bound(conv *c, const okv_json *s, const char *kw, bool lower, const char *path, bool *has,
                      int64_t *out) {
    const okv_json *v = okv_json_get(s, kw);
    *has = v != NULL;
    if (!v) return true;
    if (v->type != OKV_JSON_NUMBER) {
        cfail(c, OKV_ERR_INVALID, path, "'%s' must be a number", kw);
        return false;
    }
    double x = v->num;
    if (x != floor(x)) {
        cfail(c, OKV_ERR_UNSUPPORTED, path, "'%s' is not an integer: only integer bounds are supported", kw);
        return false;
    }
    if (lower ? x > (double)INT_CAP : x < -(double)INT_CAP) {
        char what[96];
        if (isinf(x)) snprintf(what, sizeof what, "'%s' (past the largest double)", kw);
        else snprintf(what, sizeof what, "'%s' %.17g", kw, x);
        cfail(c, OKV_ERR_UNSUPPORTED, path, "%s leaves no number of at most 16 integer digits (the most a number may have here)",
              what);
        return false;
    }
    if (x > (double)INT_CAP) x = (double)INT_CAP;
    if (x < -(double)INT_CAP) x = -(double)INT_CAP;
    *out = (int64_t)x;
    return true;
}

/* ---- patterns (regular expressions) ---- */

typedef struct rx {
    const char *s;
    size_t n, i;
    conv *c;
    const char *path;
} rx;

#define JSON_UNSAFE "\"\\\\\\x00-\\x1F\\x7F"

static void rx_fail(rx *r, const char *what) {
    char m[200];
    snprintf(m, sizeof m, "pattern: %s at character %zu", what, r->i);
    cfail(r->c, OKV_ERR_UNSUPPORTED, r->path, "%s", m);
}

/* A literal character of the decoded string, as its JSON-encoded text. */
static void rx_char(okv_sbuf *b, uint32_t cp) {
    if (cp == '"') okv_sbuf_puts(b, "\"\\\\\\\"\"");
    else if (cp == '\\') okv_sbuf_puts(b, "\"\\\\\\\\\"");
    else if (cp == '\n') okv_sbuf_puts(b, "\"\\\\n\"");
    else if (cp == '\t') okv_sbuf_puts(b, "\"\\\\t\"");
    else if (cp == '\r') okv_sbuf_puts(b, "\"\\\\r\"");
    else if (cp < 0x20 || cp == 0x7F) okv_sbuf_printf(b, "\"\\\\u%04x\"", (unsigned)cp);
    else {
        okv_sbuf_puts(b, "\"");
        put_cp(b, cp);
        okv_sbuf_puts(b, "\"");
    }
}

static bool rx_alt(rx *r, okv_sbuf *b, int depth);

/* A class escape (\d \w \s and their negations) into class text; true if
 * it was one. */
static bool rx_class_escape(char e, okv_sbuf *cls, bool *negated_escape) {
    *negated_escape = false;
    switch (e) {
    case 'd': okv_sbuf_puts(cls, "0-9"); return true;
    case 'w': okv_sbuf_puts(cls, "a-zA-Z0-9_"); return true;
    case 's': okv_sbuf_puts(cls, " "); return true;
    case 'D': *negated_escape = true; okv_sbuf_puts(cls, "0-9"); return true;
    case 'W': *negated_escape = true; okv_sbuf_puts(cls, "a-zA-Z0-9_"); return true;
    case 'S': *negated_escape = true; okv_sbuf_puts(cls, " \\t\\n\\r"); return true;
    default: return false;
    }
}

/* The character the escape at r->i (a backslash with a character after
 * it) stands for, consumed: \n \t \r \f \v, \xHH, \uHHHH, or any other
 * punctuation or non-ASCII character as itself.  Any other letter or digit
 * means something else in ECMA-262 (\cX, \0, \a is an error there): an
 * error, false (a letter used to stand for itself: \u00e9 matched "u00e9"). */
static bool rx_escape(rx *r, uint32_t *cp) {
    const char e = r->s[r->i + 1];
    const size_t hex = e == 'x' ? 2 : e == 'u' ? 4 : 0;
    if (hex) {
        uint32_t v = 0;
        bool ok = r->i + 2 + hex <= r->n;
        for (size_t k = 0; ok && k < hex; k++) {
            const char h = r->s[r->i + 2 + k];
            const int d = h >= '0' && h <= '9' ? h - '0' : h >= 'a' && h <= 'f' ? h - 'a' + 10 : h >= 'A' && h <= 'F' ? h - 'A' + 10 : -1;
            ok = d >= 0;
            v = v * 16 + (uint32_t)(d < 0 ? 0 : d);
        }
        if (!ok || v == 0 || (v >= 0xD800 && v <= 0xDFFF)) {
            rx_fail(r, e == 'x' ? "\\x needs two hex digits of a character other than NUL"
                                : "\\u needs four hex digits of a character other than NUL or a surrogate");
            return false;
        }
        *cp = v;
        r->i += 2 + hex;
        return true;
    }
    static const char simple[] = "ntrfv", value[] = "\n\t\r\f\v";
    const char *at = e ? strchr(simple, e) : NULL;
    if (at) {
        *cp = (unsigned char)value[at - simple];
        r->i += 2;
        return true;
    }
    if ((e >= 'a' && e <= 'z') || (e >= 'A' && e <= 'Z') || (e >= '0' && e <= '9')) {
        rx_fail(r, "an escape this converter does not know");
        return false;
    }
    r->i = utf8_next(r->s, r->n, r->i + 1, cp);
    return true;
}

static void emit_range(okv_sbuf *cls, uint32_t lo, uint32_t hi, bool *kept) {
    put_cp(cls, lo);
    if (hi != lo) {
        okv_sbuf_puts(cls, "-");
        put_cp(cls, hi);
    }
    *kept = true;
}

/* An item; true when it can match the empty string (a group of one). */
static bool rx_atom(rx *r, okv_sbuf *b, int depth) {
    char ch = r->s[r->i];
    bool nullable = false;
    if (ch == '(') {
        r->i++;
        if (r->i < r->n && r->s[r->i] == '?') {
            if (r->i + 1 < r->n && r->s[r->i + 1] == ':') r->i += 2;
            else {
                rx_fail(r, "lookaround and named groups (?...) are not supported");
                return false;
            }
        }
        okv_sbuf_puts(b, "(");
        nullable = rx_alt(r, b, depth + 1);
        if (r->i >= r->n || r->s[r->i] != ')') {
            rx_fail(r, "missing ')'");
            return false;
        }
        r->i++;
        okv_sbuf_puts(b, ")");
    } else if (ch == '[') {
        r->i++;
        bool neg = false;
        if (r->i < r->n && r->s[r->i] == '^') neg = true, r->i++;
        okv_sbuf cls = {0};
        bool first = true, kept = false;
        while (r->i < r->n && (r->s[r->i] != ']' || first)) {
            first = false;
            uint32_t cp;
            if (r->s[r->i] == '\\' && r->i + 1 < r->n) {
                bool ne;
                if (rx_class_escape(r->s[r->i + 1], &cls, &ne)) {
                    kept = true;
                    if (ne) {
                        free(cls.s);
                        rx_fail(r, "negated class escapes (\\D \\W \\S) inside [...] are not supported");
                        return false;
                    }
                    r->i += 2;
                    continue;
                }
                if (!rx_escape(r, &cp)) {
                    free(cls.s);
                    return false;
                }
            } else {
                r->i = utf8_next(r->s, r->n, r->i, &cp);
            }
            uint32_t hi = cp;
            if (r->i + 1 < r->n && r->s[r->i] == '-' && r->s[r->i + 1] != ']') {
                r->i++;
                if (r->s[r->i] == '\\' && r->i + 1 < r->n) {
                    if (!rx_escape(r, &hi)) {
                        free(cls.s);
                        return false;
                    }
                } else {
                    r->i = utf8_next(r->s, r->n, r->i, &hi);
                }
                if (hi < cp) {
                    free(cls.s);
                    rx_fail(r, "a class range whose end is below its start");
                    return false;
                }
            }
            if (neg) {
                /* Excluding more is safe: the JSON-unsafe bytes are excluded anyway. */
                put_cp(&cls, cp);
                if (hi != cp) {
                    okv_sbuf_puts(&cls, "-");
                    put_cp(&cls, hi);
                }
                continue;
            }
            /* A positive class keeps the characters a JSON string may hold
             * unescaped: the range is split around '"', '\\' and the
             * controls (the output is then a subset of the pattern's). */
            static const uint32_t cuts[4][2] = {{0x00, 0x1F}, {0x22, 0x22}, {0x5C, 0x5C}, {0x7F, 0x7F}};
            uint32_t from = cp;
            for (int k = 0; k < 4 && from <= hi; k++) {
                if (cuts[k][1] < from) continue;
                if (cuts[k][0] > hi) break;
                if (cuts[k][0] > from) emit_range(&cls, from, cuts[k][0] - 1, &kept);
                from = cuts[k][1] + 1;
            }
            if (from <= hi) emit_range(&cls, from, hi, &kept);
        }
        if (r->i >= r->n) {
            free(cls.s);
            rx_fail(r, "missing ']'");
            return false;
        }
        r->i++;
        if (!neg && !kept) {
            free(cls.s);
            rx_fail(r, "a class of only quotes, backslashes or control characters is not supported");
            return false;
        }
        char *cs = sbuf_take(r->c, &cls);
        if (!cs) return false;
        if (neg) okv_sbuf_printf(b, "[^%s" JSON_UNSAFE "]", cs);
        else okv_sbuf_printf(b, "[%s]", cs);
        free(cs);
    } else if (ch == '.') {
        r->i++;
        okv_sbuf_puts(b, "[^" JSON_UNSAFE "]");
    } else if (ch == '\\') {
        if (r->i + 1 >= r->n) {
            rx_fail(r, "a pattern ends in '\\'");
            return false;
        }
        char e = r->s[r->i + 1];
        r->i += 2;
        okv_sbuf cls = {0};
        bool ne;
        if (rx_class_escape(e, &cls, &ne)) {
            char *cs = sbuf_take(r->c, &cls);
            if (!cs) return false;
            if (ne) okv_sbuf_printf(b, "[^%s" JSON_UNSAFE "]", cs);
            else okv_sbuf_printf(b, "[%s]", cs);
            free(cs);
        } else if ((e >= '1' && e <= '9') || e == 'b' || e == 'B' || e == 'k' || e == 'p' || e == 'P') {
            free(cls.s);
            r->i -= 2;
            rx_fail(r, "backreferences, \\b, \\p and named escapes are not supported");
        } else {
            free(cls.s);
            uint32_t cp;
            r->i -= 2;
            if (rx_escape(r, &cp)) rx_char(b, cp);
        }
    } else {
        uint32_t cp;
        r->i = utf8_next(r->s, r->n, r->i, &cp);
        rx_char(b, cp);
    }
    return nullable;
}

static const char NULLABLE_REPEAT[] =
    "a group that can match nothing, repeated without bound (as (a*)* or (a|)+), is not supported";

/* A sequence; true when it can match the empty string. */
static bool rx_seq(rx *r, okv_sbuf *b, int depth) {
    bool first = true, nullable = true;
    while (r->i < r->n && !r->c->failed) {
        char ch = r->s[r->i];
        if (ch == '|' || ch == ')') break;
        if (ch == '$' && r->i + 1 == r->n) break;
        if (ch == '^' || ch == '$') {
            rx_fail(r, "anchors inside a pattern are not supported");
            return false;
        }
        if (ch == '*' || ch == '+' || ch == '?' || ch == '{') {
            rx_fail(r, "a quantifier without an item");
            return false;
        }
        if (!first) okv_sbuf_puts(b, " ");
        first = false;
        okv_sbuf item = {0};
        okv_sbuf_puts(&item, "(");
        const bool empty_ok = rx_atom(r, &item, depth);
        okv_sbuf_puts(&item, ")");
        char *it = sbuf_take(r->c, &item);
        if (!it) return false;
        okv_sbuf_puts(b, it);
        free(it);
        bool item_nullable = empty_ok;
        if (r->i < r->n) {
            char q = r->s[r->i];
            /* An item that can match nothing, repeated without bound, is a
             * rule that reaches itself before reading a character: the
             * GBNF parser refuses it as left-recursive, naming a rule of
             * ours, not the pattern. */
            if (q == '*' || q == '+' || q == '?') {
                if (empty_ok && q != '?') {
                    rx_fail(r, NULLABLE_REPEAT);
                    return false;
                }
                okv_sbuf_printf(b, "%c", q);
                item_nullable = item_nullable || q != '+';
                r->i++;
            } else if (q == '{') {
                size_t st = r->i++;
                long m = 0, x = -1;
                bool digits = false;
                /* Counts saturate past 10^6 (refused below), never overflow. */
                while (r->i < r->n && r->s[r->i] >= '0' && r->s[r->i] <= '9') {
                    m = m > 1000000 ? m : m * 10 + (r->s[r->i] - '0');
                    r->i++;
                    digits = true;
                }
                if (r->i < r->n && r->s[r->i] == ',') {
                    r->i++;
                    if (r->i < r->n && r->s[r->i] >= '0' && r->s[r->i] <= '9') {
                        x = 0;
                        while (r->i < r->n && r->s[r->i] >= '0' && r->s[r->i] <= '9') {
                            x = x > 1000000 ? x : x * 10 + (r->s[r->i] - '0');
                            r->i++;
                        }
                    }
                } else {
                    x = m;
                }
                if (!digits || r->i >= r->n || r->s[r->i] != '}' || m > 10000 || x > 10000 || (x >= 0 && x < m)) {
                    r->i = st;
                    rx_fail(r, "a bad {m,n} quantifier");
                    return false;
                }
                r->i++;
                if (empty_ok && x < 0) {
                    r->i = st;
                    rx_fail(r, NULLABLE_REPEAT);
                    return false;
                }
                if (x < 0) okv_sbuf_printf(b, "{%ld,}", m);
                else okv_sbuf_printf(b, "{%ld,%ld}", m, x);
                item_nullable = item_nullable || m == 0;
            }
            if (r->i < r->n && (r->s[r->i] == '?' || r->s[r->i] == '+') && r->i > 0 &&
                strchr("*+?}", r->s[r->i - 1])) {
                rx_fail(r, "lazy and possessive quantifiers are not supported");
                return false;
            }
        }
        nullable = nullable && item_nullable;
    }
    return nullable;
}

/* Alternatives; true when one can match the empty string. */
static bool rx_alt(rx *r, okv_sbuf *b, int depth) {
    if (depth > 100) {
        rx_fail(r, "groups nested too deeply");
        return false;
    }
    okv_sbuf_puts(b, "(");
    bool nullable = rx_seq(r, b, depth);
    while (!r->c->failed && r->i < r->n && r->s[r->i] == '|') {
        r->i++;
        okv_sbuf_puts(b, " | ");
        nullable = rx_seq(r, b, depth) || nullable;
    }
    okv_sbuf_puts(b, ")");
    return nullable;
}

static char *pattern_body(conv *c, const char *pat, size_t n, const char *path) {
    rx r = {pat, n, 0, c, path};
    okv_sbuf b = {0};
    prim(c, "char");
    prim(c, "space");
    okv_sbuf_puts(&b, "\"\\\"\" ");
    /* JSON Schema patterns search: without ^ or $ anything may surround. */
    /* a final '$' anchors unless escaped: an odd run of backslashes before
     * it (^a\\$ is a, a backslash, the end) */
    size_t bs = 0;
    while (n >= 2 + bs && pat[n - 2 - bs] == '\\') bs++;
    bool head = n > 0 && pat[0] == '^', tail = n > 0 && pat[n - 1] == '$' && bs % 2 == 0;
    if (head) r.i = 1;
    if (!head) okv_sbuf_puts(&b, "char* ");
    rx_alt(&r, &b, 0);
    if (!c->failed && r.i < r.n && !(tail && r.i == r.n - 1)) rx_fail(&r, "unexpected ')'");
    if (!tail) okv_sbuf_puts(&b, " char*");
    okv_sbuf_puts(&b, " \"\\\"\" space");
    char *s = sbuf_take(c, &b);
    if (c->failed) {
        free(s);
        return NULL;
    }
    return s;
}

/* ---- schemas ---- */

static const char *visit(conv *c, const okv_json *s, const char *name, const char *path);

static const char *const KNOWN[] = {
    "type", "properties", "required", "additionalProperties", "items", "prefixItems", "minItems", "maxItems", "enum",
    "const", "format", "pattern", "minLength", "maxLength", "minimum", "maximum", "exclusiveMinimum",
    "exclusiveMaximum", "anyOf", "oneOf", "$ref", "$defs", "definitions",
    /* annotations: no effect on what validates */
    "title", "description", "$schema", "$id", "$comment", "default", "examples", "deprecated", "readOnly",
    "writeOnly", NULL};

/* The keywords that constrain a value of one type: beside $ref, anyOf,
 * oneOf, const or enum the converter would drop them. */
static const char *const TYPED[] = {
    "properties", "required", "additionalProperties", "items", "prefixItems", "minItems", "maxItems", "format",
    "pattern", "minLength", "maxLength", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", NULL};

static bool check_keywords(conv *c, const okv_json *s, const char *path) {
    for (size_t i = 0; i < s->n; i++) {
        bool ok = false;
        for (const char *const *k = KNOWN; *k && !ok; k++)
            ok = strlen(*k) == s->key_lens[i] && memcmp(*k, s->keys[i], s->key_lens[i]) == 0;
        if (!ok && c->loose) skip(c, path, "keyword", s->keys[i], s->key_lens[i]);
        else if (!ok) {
            cfail(c, OKV_ERR_UNSUPPORTED, path, "keyword '%s' is not supported", s->keys[i]);
            return false;
        }
    }
    return true;
}

/* The first of TYPED that s has, or NULL. */
static const char *typed_keyword(const okv_json *s) {
    for (const char *const *k = TYPED; *k; k++)
        if (okv_json_get(s, *k)) return *k;
    return NULL;
}

static bool get_count(conv *c, const okv_json *s, const char *kw, const char *path, long *out) {
    const okv_json *v = okv_json_get(s, kw);
    if (!v) return true;
    /* 10000: the GBNF parser's repetition bound (above it the converter
     * wrote a grammar the parser refused) */
    if (v->type != OKV_JSON_NUMBER || v->num < 0 || v->num != floor(v->num) || v->num > 10000) {
        char what[96];
        if (v->type == OKV_JSON_NUMBER) snprintf(what, sizeof what, "'%s' is %.17g", kw, v->num);
        else snprintf(what, sizeof what, "'%s' is not a number", kw);
        cfail(c, OKV_ERR_INVALID, path, "%s: it must be a non-negative integer (at most 10000)", what);
        return false;
    }
    *out = (long)v->num;
    return true;
}

/* path/a, or path/a/b for a property name or index b, as a JSON pointer
 * (RFC 6901: '~' in a name is written ~0 and '/' ~1, so "a/b" names one
 * property, not two levels). */
static void subpath(char *out, size_t cap, const char *path, const char *a, const char *b) {
    int n = snprintf(out, cap, "%s/%s", path, a);
    if (!b || n < 0 || (size_t)n >= cap) return;
    size_t o = (size_t)n;
    if (o + 1 < cap) out[o++] = '/';
    for (; *b && o + 2 < cap; b++) {
        if (*b == '~' || *b == '/') {
            out[o++] = '~';
            out[o++] = *b == '~' ? '0' : '1';
        } else {
            out[o++] = *b;
        }
    }
    out[o] = '\0';
}

/* One group a character: the GBNF parser takes groups 256 deep, a few of
 * which the rules around a key use. */
#define NOT_STRINGS_DEPTH 250
#define NOT_STRINGS_DEPTH_S "250"
static char *not_strings_node(conv *c, const char *path, const char *const *names, size_t lo, size_t hi, size_t depth,
                              size_t plen);

static int name_cmp(const void *a, const void *b) { return strcmp(*(const char *const *)a, *(const char *const *)b); }

/* A key that is none of the object's declared property names (so
 * additionalProperties cannot repeat or shadow one): a trie of the names,
 * each node allowing the other characters, as llama.cpp's _not_strings. */
static char *not_strings(conv *c, const char *path, const char *const *names, size_t n) {
    /* The trie is of the names as decoded; a key is written JSON-escaped,
     * so a name that needs an escape would let malformed keys through
     * ({"a"x": 1} beside a property a"b).  Refused, not silently wrong. */
    for (size_t i = 0; i < n; i++)
        for (const unsigned char *p = (const unsigned char *)names[i]; *p; p++)
            if (*p == '"' || *p == '\\' || *p < 0x20) {
                cfail(c, OKV_ERR_UNSUPPORTED, path,
                      "the property name '%.40s' holds a '\"', a '\\' or a control character, which additionalProperties "
                      "cannot be checked beside",
                      names[i]);
                return NULL;
            }
    /* In byte order the names under a prefix are a run, and so are those
     * under each next character: each trie node reads only its run (every
     * node scanning every name took 44 s for 2 000 names of 500
     * characters). */
    const char **sorted = malloc((n ? n : 1) * sizeof *sorted);
    if (!sorted) {
        cfail(c, OKV_ERR_NOMEM, path, "%s", "out of memory");
        return NULL;
    }
    memcpy(sorted, names, n * sizeof *sorted);
    qsort(sorted, n, sizeof *sorted, name_cmp);
    okv_sbuf b = {0};
    char *inner = not_strings_node(c, path, sorted, 0, n, 0, 0);
    free(sorted);
    if (!inner) return NULL;
    okv_sbuf_printf(&b, "\"\\\"\" %s \"\\\"\" space", inner);
    free(inner);
    return sbuf_take(c, &b);
}

/* The node of the names sorted[lo, hi), which share their first plen bytes. */
static char *not_strings_node(conv *c, const char *path, const char *const *names, size_t lo, size_t hi, size_t depth,
                              size_t plen) {
    if (depth > NOT_STRINGS_DEPTH) { /* one recursion a character */
        cfail(c, OKV_ERR_INVALID, path, "a property name longer than %s characters beside additionalProperties",
              NOT_STRINGS_DEPTH_S);
        return NULL;
    }
    okv_sbuf b = {0}, rejects = {0};
    okv_sbuf_puts(&b, "(");
    bool first = true, is_name = false;
    for (size_t i = lo; i < hi;) {
        const size_t L = strlen(names[i]);
        if (L == plen) { /* a name that ends here sorts first in its run */
            is_name = true;
            i++;
            continue;
        }
        uint32_t cp;
        const size_t next = utf8_next(names[i], L, plen, &cp);
        size_t j = i + 1; /* the run that goes on with the same character */
        while (j < hi && strlen(names[j]) >= next && memcmp(names[j] + plen, names[i] + plen, next - plen) == 0) j++;
        if (!first) okv_sbuf_puts(&b, " | ");
        first = false;
        okv_sbuf_puts(&b, "[");
        put_cp(&b, cp);
        okv_sbuf_puts(&b, "] ");
        put_cp(&rejects, cp);
        char *child = not_strings_node(c, path, names, i, j, depth + 1, next);
        if (!child) {
            free(b.s);
            free(rejects.s);
            return NULL;
        }
        okv_sbuf_puts(&b, child);
        free(child);
        i = j;
    }
    char *rj = sbuf_take(c, &rejects);
    if (!first) okv_sbuf_puts(&b, " | ");
    okv_sbuf_printf(&b, "[^%s" JSON_UNSAFE "] char*", rj ? rj : "");
    free(rj);
    if (!is_name) okv_sbuf_puts(&b, " | ");
    okv_sbuf_puts(&b, ")");
    return sbuf_take(c, &b);
}

static const char *object_rule(conv *c, const okv_json *s, const char *name, const char *path) {
    const okv_json *props = okv_json_get(s, "properties"), *req = okv_json_get(s, "required"),
             *addl = okv_json_get(s, "additionalProperties");
    if (props && props->type != OKV_JSON_OBJECT) {
        cfail(c, OKV_ERR_INVALID, path, "'%s' must be an object", "properties");
        return NULL;
    }
    if (req && req->type != OKV_JSON_ARRAY) {
        cfail(c, OKV_ERR_INVALID, path, "'%s' must be an array", "required");
        return NULL;
    }
    if (addl && addl->type != OKV_JSON_BOOL && addl->type != OKV_JSON_OBJECT) {
        cfail(c, OKV_ERR_INVALID, path, "'%s' must be a boolean or a schema", "additionalProperties");
        return NULL;
    }
    size_t np = props ? props->n : 0;
    if (req) {
        for (size_t i = 0; i < req->n; i++) {
            if (req->items[i]->type != OKV_JSON_STRING) {
                cfail(c, OKV_ERR_INVALID, path, "'%s' must hold strings", "required");
                return NULL;
            }
            bool found = false;
            for (size_t k = 0; props && k < props->n && !found; k++)
                found = req->items[i]->len == props->key_lens[k] &&
                        memcmp(req->items[i]->str, props->keys[k], props->key_lens[k]) == 0;
            if (!found) {
                cfail(c, OKV_ERR_INVALID, path, "required property '%s' is not among the properties",
                      req->items[i]->str);
                return NULL;
            }
        }
    }
    /* No properties and no additionalProperties: any object. */
    if (!props && !addl) {
        prim(c, "object");
        return add_rule(c, name, "object");
    }
    prim(c, "space");
    const char **kv = calloc(np + 1, sizeof *kv);
    bool *required = calloc(np + 1, sizeof *required);
    if (!kv || !required) {
        free(kv);
        free(required);
        c->failed = true;
        okv_fail(c->err, OKV_ERR_NOMEM, "JSON schema conversion");
        return NULL;
    }
    char sub[512], rn[256];
    for (size_t i = 0; i < np && !c->failed; i++) {
        subpath(sub, sizeof sub, path, "properties", props->keys[i]);
        snprintf(rn, sizeof rn, "%s-%s", name, props->keys[i]);
        const char *vr = visit(c, props->items[i], rn, sub);
        if (!vr) break;
        okv_sbuf b = {0};
        okv_sbuf t = {0};
        okv_json_write_string(&t, props->keys[i], props->key_lens[i]);
        char *ks = sbuf_take(c, &t);
        if (!ks) break;
        put_literal(&b, ks, strlen(ks));
        free(ks);
        okv_sbuf_printf(&b, " space \":\" space %s", vr);
        char *body = sbuf_take(c, &b);
        snprintf(rn, sizeof rn, "%s-%s-kv", name, props->keys[i]);
        kv[i] = add_rule(c, rn, body);
        free(body);
        for (size_t k = 0; req && k < req->n; k++)
            required[i] |= req->items[k]->len == props->key_lens[i] &&
                           memcmp(req->items[k]->str, props->keys[i], props->key_lens[i]) == 0;
    }
    const char *addl_kv = NULL;
    if (!c->failed && addl && !(addl->type == OKV_JSON_BOOL && !addl->b)) {
        char apath[512];
        subpath(apath, sizeof apath, path, "additionalProperties", NULL);
        snprintf(rn, sizeof rn, "%s-additional", name);
        const char *vr = addl->type == OKV_JSON_OBJECT ? visit(c, addl, rn, apath) : prim(c, "value");
        const char *key = NULL;
        if (np) {
            char *ns = not_strings(c, path, (const char *const *)props->keys, np);
            snprintf(rn, sizeof rn, "%s-additional-k", name);
            prim(c, "char");
            key = add_rule(c, rn, ns);
            free(ns);
        } else {
            key = prim(c, "string");
        }
        if (vr && key) {
            okv_sbuf b = {0};
            okv_sbuf_printf(&b, "%s \":\" space %s", key, vr);
            char *body = sbuf_take(c, &b);
            snprintf(rn, sizeof rn, "%s-additional-kv", name);
            addl_kv = add_rule(c, rn, body);
            free(body);
        }
    }
    const char *out = NULL;
    if (!c->failed) {
        /* llama.cpp's layout: required in order, then the optional ones
         * (each may be absent, order kept), then any additional ones. */
        size_t n_opt = 0;
        const char **opt = malloc((np + 1) * sizeof *opt);
        /* rest[j]: any of the optional ones from j on, each after a comma
         * (rules, so the grammar grows linearly with the properties). */
        const char **rest = calloc(np + 2, sizeof *rest);
        if (!opt || !rest) {
            c->failed = true;
            okv_fail(c->err, OKV_ERR_NOMEM, "JSON schema conversion");
        }
        for (size_t i = 0; opt && i < np; i++)
            if (!required[i]) opt[n_opt++] = kv[i];
        if (opt && addl_kv) opt[n_opt++] = addl_kv;
        for (size_t j = n_opt; rest && j-- > 1 && !c->failed;) {
            okv_sbuf rb = {0};
            okv_sbuf_printf(&rb, "( \",\" space %s )%s", opt[j], opt[j] == addl_kv ? "*" : "?");
            if (rest[j + 1]) okv_sbuf_printf(&rb, " %s", rest[j + 1]);
            char *body = sbuf_take(c, &rb);
            snprintf(rn, sizeof rn, "%s-rest%zu", name, j);
            rest[j] = add_rule(c, rn, body);
            free(body);
        }
        okv_sbuf b = {0};
        okv_sbuf_puts(&b, "\"{\" space ");
        bool any_req = false;
        for (size_t i = 0; i < np; i++) {
            if (!required[i]) continue;
            if (any_req) okv_sbuf_puts(&b, " \",\" space ");
            okv_sbuf_puts(&b, kv[i]);
            any_req = true;
        }
        if (n_opt && !c->failed) {
            okv_sbuf_puts(&b, " (");
            if (any_req) okv_sbuf_puts(&b, " \",\" space ( ");
            for (size_t i = 0; i < n_opt; i++) {
                if (i) okv_sbuf_puts(&b, " | ");
                /* Starting with optional i, then any of the later ones. */
                okv_sbuf_puts(&b, opt[i]);
                if (opt[i] == addl_kv) okv_sbuf_printf(&b, " ( \",\" space %s )*", addl_kv);
                if (rest[i + 1]) okv_sbuf_printf(&b, " %s", rest[i + 1]);
            }
            if (any_req) okv_sbuf_puts(&b, " )");
            okv_sbuf_puts(&b, " )?");
        }
        free(opt);
        free(rest);
        okv_sbuf_puts(&b, " \"}\" space");
        char *body = sbuf_take(c, &b);
        out = add_rule(c, name, body);
        free(body);
    }
    free(kv);
    free(required);
    return out;
}

static const char *array_rule(conv *c, const okv_json *s, const char *name, const char *path) {
    const okv_json *items = okv_json_get(s, "items"), *prefix = okv_json_get(s, "prefixItems");
    long min = 0, max = -1;
    if (!get_count(c, s, "minItems", path, &min) || !get_count(c, s, "maxItems", path, &max)) return NULL;
    if (s && okv_json_get(s, "maxItems") && max < min) {
        char what[96];
        snprintf(what, sizeof what, "maxItems %ld is below minItems %ld", max, min);
        cfail(c, OKV_ERR_INVALID, path, "%s", what);
        return NULL;
    }
    prim(c, "space");
    char sub[512], rn[256];
    okv_sbuf b = {0};
    okv_sbuf_puts(&b, "\"[\" space ");
    if (prefix) {
        if (prefix->type != OKV_JSON_ARRAY) {
            cfail(c, OKV_ERR_INVALID, path, "'%s' must be an array", "prefixItems");
            free(b.s);
            return NULL;
        }
        if (okv_json_get(s, "minItems") || okv_json_get(s, "maxItems") || (items && !(items->type == OKV_JSON_BOOL && !items->b))) {
            cfail(c, OKV_ERR_UNSUPPORTED, path, "%s", "prefixItems with items, minItems or maxItems is not supported");
            free(b.s);
            return NULL;
        }
        for (size_t i = 0; i < prefix->n && !c->failed; i++) {
            char idx[24];
            snprintf(idx, sizeof idx, "%zu", i);
            subpath(sub, sizeof sub, path, "prefixItems", idx);
            snprintf(rn, sizeof rn, "%s-%zu", name, i);
            const char *r = visit(c, prefix->items[i], rn, sub);
            if (i) okv_sbuf_puts(&b, " \",\" space ");
            if (r) okv_sbuf_puts(&b, r);
        }
    } else {
        const char *item = NULL;
        if (items && items->type == OKV_JSON_BOOL && !items->b) max = 0;
        if (items && items->type == OKV_JSON_OBJECT) {
            subpath(sub, sizeof sub, path, "items", NULL);
            snprintf(rn, sizeof rn, "%s-item", name);
            item = visit(c, items, rn, sub);
        } else if (items && items->type != OKV_JSON_BOOL) {
            cfail(c, OKV_ERR_INVALID, path, "'%s' must be a schema", "items");
        } else {
            item = prim(c, "value");
        }
        if (item && max != 0) {
            char *rep = repetition(c, item, min, max, "\",\" space");
            if (rep) okv_sbuf_puts(&b, rep);
            free(rep);
        } else if (max == 0 && min > 0) {
            cfail(c, OKV_ERR_INVALID, path, "%s", "items: false with minItems > 0 allows nothing");
        }
    }
    okv_sbuf_puts(&b, " \"]\" space");
    char *body = sbuf_take(c, &b);
    const char *out = c->failed ? NULL : add_rule(c, name, body);
    free(body);
    return out;
}

static bool known_format(const okv_json *fmt) {
    static const char *const known[] = {"date", "time", "date-time", "uuid", NULL};
    for (const char *const *k = known; fmt->type == OKV_JSON_STRING && *k; k++)
        if (strcmp(fmt->str, *k) == 0) return true;
    return false;
}

static const char *string_rule(conv *c, const okv_json *s, const char *name, const char *path) {
    const okv_json *fmt = okv_json_get(s, "format"), *pat = okv_json_get(s, "pattern");
    if (fmt && c->loose && !known_format(fmt)) { /* any string: a superset of the format's */
        skip(c, path, "format", fmt->type == OKV_JSON_STRING ? fmt->str : "?", fmt->type == OKV_JSON_STRING ? strlen(fmt->str) : 1);
        fmt = NULL;
    }
    bool has_len = okv_json_get(s, "minLength") || okv_json_get(s, "maxLength");
    if ((fmt || pat) && has_len) {
        cfail(c, OKV_ERR_UNSUPPORTED, path, "%s", "minLength / maxLength together with format or pattern is not supported");
        return NULL;
    }
    if (fmt && pat) {
        cfail(c, OKV_ERR_UNSUPPORTED, path, "%s", "format together with pattern is not supported");
        return NULL;
    }
    if (fmt) {
        if (fmt->type != OKV_JSON_STRING) {
            cfail(c, OKV_ERR_INVALID, path, "'%s' must be a string", "format");
            return NULL;
        }
        const char *f = fmt->str;
        if (strcmp(f, "date") == 0) return add_rule(c, name, prim(c, "date-string"));
        if (strcmp(f, "time") == 0) return add_rule(c, name, prim(c, "time-string"));
        if (strcmp(f, "date-time") == 0) return add_rule(c, name, prim(c, "date-time-string"));
        if (strcmp(f, "uuid") == 0) return add_rule(c, name, prim(c, "uuid"));
        cfail(c, OKV_ERR_UNSUPPORTED, path, "string format '%s' is not supported (date, time, date-time, uuid are)", f);
        return NULL;
    }
    if (pat) {
        if (pat->type != OKV_JSON_STRING) {
            cfail(c, OKV_ERR_INVALID, path, "'%s' must be a string", "pattern");
            return NULL;
        }
        char *body = pattern_body(c, pat->str, pat->len, path);
        const char *out = body ? add_rule(c, name, body) : NULL;
        free(body);
        return out;
    }
    if (!has_len) return add_rule(c, name, prim(c, "string"));
    long min = 0, max = -1;
    if (!get_count(c, s, "minLength", path, &min) || !get_count(c, s, "maxLength", path, &max)) return NULL;
    if (okv_json_get(s, "maxLength") && max < min) {
        char what[96];
        snprintf(what, sizeof what, "maxLength %ld is below minLength %ld", max, min);
        cfail(c, OKV_ERR_INVALID, path, "%s", what);
        return NULL;
    }
    prim(c, "char");
    prim(c, "space");
    /* One rule per length range, shared: the GBNF parser writes char{0,N}
     * out N times, so 30 fields of maxLength 10000 each (each within the
     * converter's bound) made a grammar past a million elements. */
    char *rep = repetition(c, "char", min, max, NULL);
    char rn[64];
    if (max < 0) snprintf(rn, sizeof rn, "char-%ld-up", min);
    else snprintf(rn, sizeof rn, "char-%ld-%ld", min, max);
    const char *chars = rep && *rep ? add_rule(c, rn, rep) : NULL;
    free(rep);
    okv_sbuf b = {0};
    okv_sbuf_printf(&b, "\"\\\"\" %s \"\\\"\" space", chars ? chars : "");
    char *body = sbuf_take(c, &b);
    const char *out = add_rule(c, name, body);
    free(body);
    return out;
}

static const char *numeric_rule(conv *c, const okv_json *s, const char *name, const char *path, bool integer) {
    bool hmin, hmax, hemin, hemax;
    int64_t lo = -INT_CAP, hi = INT_CAP, elo = 0, ehi = 0, vlo = 0, vhi = 0;
    if (!int_bound(c, s, "minimum", true, path, &hmin, &vlo) || !int_bound(c, s, "maximum", false, path, &hmax, &vhi) ||
        !int_bound(c, s, "exclusiveMinimum", true, path, &hemin, &elo) ||
        !int_bound(c, s, "exclusiveMaximum", false, path, &hemax, &ehi))
        return NULL;
    if (!hmin && !hmax && !hemin && !hemax) return add_rule(c, name, prim(c, integer ? "integer" : "number"));
    if (!integer && (hemin || hemax)) {
        cfail(c, OKV_ERR_UNSUPPORTED, path, "%s", "exclusiveMinimum / exclusiveMaximum on a number (not an integer) is not supported");
        return NULL;
    }
    if (hmin) lo = vlo;
    if (hmax) hi = vhi;
    if (hemin && elo + 1 > lo) lo = elo + 1;
    if (hemax && ehi - 1 < hi) hi = ehi - 1;
    if (lo > hi) {
        char what[128];
        snprintf(what, sizeof what, "the bounds leave no value: no %s is at least %lld and at most %lld", integer ? "integer" : "number",
                 (long long)lo, (long long)hi);
        cfail(c, OKV_ERR_INVALID, path, "%s", what);
        return NULL;
    }
    prim(c, "space");
    okv_sbuf b = {0};
    okv_sbuf_puts(&b, "(");
    int_range(&b, lo, hi);
    if (!integer) {
        /* Integral values may be written with a zero fraction; a fraction
         * f > 0 fits when the whole unit interval around it does. */
        prim(c, "decimal-part");
        okv_sbuf_puts(&b, " (\".\" \"0\"{1,16})?");
        if ((lo > 0 ? lo : 0) <= hi - 1) {
            okv_sbuf_puts(&b, " | ");
            uint_range(&b, lo > 0 ? lo : 0, hi - 1);
            okv_sbuf_puts(&b, " \".\" decimal-part");
        }
        int64_t mlo = hi < 0 ? -hi : 0, mhi = -lo - 1;
        if (mlo <= mhi) {
            okv_sbuf_puts(&b, " | \"-\" ");
            uint_range(&b, mlo, mhi);
            okv_sbuf_puts(&b, " \".\" decimal-part");
        }
    }
    okv_sbuf_puts(&b, ") space");
    char *body = sbuf_take(c, &b);
    const char *out = add_rule(c, name, body);
    free(body);
    return out;
}

static const char *typed(conv *c, const okv_json *s, const char *type, const char *name, const char *path) {
    if (strcmp(type, "object") == 0) return object_rule(c, s, name, path);
    if (strcmp(type, "array") == 0) return array_rule(c, s, name, path);
    if (strcmp(type, "string") == 0) return string_rule(c, s, name, path);
    if (strcmp(type, "integer") == 0) return numeric_rule(c, s, name, path, true);
    if (strcmp(type, "number") == 0) return numeric_rule(c, s, name, path, false);
    if (strcmp(type, "boolean") == 0) return add_rule(c, name, prim(c, "boolean"));
    if (strcmp(type, "null") == 0) return add_rule(c, name, prim(c, "null"));
    cfail(c, OKV_ERR_UNSUPPORTED, path, "type '%s' is not a JSON Schema type", type);
    return NULL;
}

static const char *resolve_ref(conv *c, const char *ref, const char *path) {
    for (size_t i = 0; i < c->n_refs; i++)
        if (strcmp(c->ref_keys[i], ref) == 0) return c->ref_names[i];
    const okv_json *target = NULL;
    const char *def = NULL;
    if (strcmp(ref, "#") == 0) {
        target = c->root;
        def = c->root_name;
    } else if (strncmp(ref, "#/$defs/", 8) == 0) {
        def = ref + 8;
        target = okv_json_get(okv_json_get(c->root, "$defs"), def);
    } else if (strncmp(ref, "#/definitions/", 14) == 0) {
        def = ref + 14;
        target = okv_json_get(okv_json_get(c->root, "definitions"), def);
    } else {
        cfail(c, OKV_ERR_UNSUPPORTED, path, "$ref '%s' is not supported (only #/$defs/NAME and #/definitions/NAME)", ref);
        return NULL;
    }
    if (!target) {
        cfail(c, OKV_ERR_INVALID, path, "$ref '%s' points at nothing", ref);
        return NULL;
    }
    if (strcmp(ref, "#") == 0) return c->root_name;
    /* Register the name first, so a recursive reference finds it. */
    char rn[200];
    snprintf(rn, sizeof rn, "ref-%s", def);
    char ph[40];
    snprintf(ph, sizeof ph, "\"placeholder%zu\"", ++c->n_placeholders);
    const char *name = add_rule(c, rn, ph);
    if (!name) return NULL;
    char **k = realloc(c->ref_keys, (c->n_refs + 1) * sizeof *k);
    if (k) c->ref_keys = k;
    char **v = realloc(c->ref_names, (c->n_refs + 1) * sizeof *v);
    if (v) c->ref_names = v;
    char *kk = xstrdup(c, ref), *vv = xstrdup(c, name);
    if (!k || !v || !kk || !vv) {
        free(kk);
        free(vv);
        if (!c->failed) {
            c->failed = true;
            okv_fail(c->err, OKV_ERR_NOMEM, "JSON schema conversion");
        }
        return NULL;
    }
    c->ref_keys[c->n_refs] = kk;
    c->ref_names[c->n_refs++] = vv;
    char tn[220];
    snprintf(tn, sizeof tn, "%s-def", vv);
    const char *body = visit(c, target, tn, ref);
    if (body) set_rule(c, vv, body);
    return body ? vv : NULL;
}

static const char *alternatives(conv *c, const okv_json *list, const char *kw, const char *name, const char *path) {
    if (list->type != OKV_JSON_ARRAY || list->n == 0) {
        cfail(c, OKV_ERR_INVALID, path, "'%s' must be a non-empty array", kw);
        return NULL;
    }
    okv_sbuf b = {0};
    char sub[512], rn[256];
    for (size_t i = 0; i < list->n && !c->failed; i++) {
        char idx[24];
        snprintf(idx, sizeof idx, "%zu", i);
        subpath(sub, sizeof sub, path, kw, idx);
        snprintf(rn, sizeof rn, "%s-%zu", name, i);
        const char *r = visit(c, list->items[i], rn, sub);
        if (i) okv_sbuf_puts(&b, " | ");
        if (r) okv_sbuf_puts(&b, r);
    }
    char *body = sbuf_take(c, &b);
    const char *out = c->failed ? NULL : add_rule(c, name, body);
    free(body);
    return out;
}

/* Whether v is of JSON-schema type t (a name, or an array of names). */
static bool of_type_name(const okv_json *v, const char *t) {
    switch (v->type) {
    case OKV_JSON_NULL: return !strcmp(t, "null");
    case OKV_JSON_BOOL: return !strcmp(t, "boolean");
    case OKV_JSON_STRING: return !strcmp(t, "string");
    case OKV_JSON_ARRAY: return !strcmp(t, "array");
    case OKV_JSON_OBJECT: return !strcmp(t, "object");
    case OKV_JSON_NUMBER: return !strcmp(t, "number") || (!strcmp(t, "integer") && v->num == floor(v->num));
    }
    return false;
}

static bool of_type(const okv_json *v, const okv_json *type) {
    if (type->type == OKV_JSON_STRING) return of_type_name(v, type->str);
    for (size_t i = 0; i < type->n; i++)
        if (of_type_name(v, type->items[i]->str)) return true;
    return false;
}

/* 'type' as a name or a non-empty array of names. */
static bool type_names_ok(const okv_json *type) {
    if (type->type == OKV_JSON_STRING) return true;
    if (type->type != OKV_JSON_ARRAY || type->n == 0) return false;
    for (size_t i = 0; i < type->n; i++)
        if (type->items[i]->type != OKV_JSON_STRING) return false;
    return true;
}

static const char *visit(conv *c, const okv_json *s, const char *name, const char *path) {
    if (c->failed) return NULL;
    if (++c->depth > 64) {
        cfail(c, OKV_ERR_UNSUPPORTED, path, "%s", "schema nested deeper than 64");
        c->depth--;
        return NULL;
    }
    const char *out = NULL;
    if (s->type == OKV_JSON_BOOL) {
        if (!s->b) cfail(c, OKV_ERR_UNSUPPORTED, path, "%s", "the schema 'false' allows nothing");
        else out = add_rule(c, name, prim(c, "value"));
        c->depth--;
        return out;
    }
    if (s->type != OKV_JSON_OBJECT) {
        cfail(c, OKV_ERR_INVALID, path, "%s", "a schema must be an object or a boolean");
        c->depth--;
        return NULL;
    }
    if (!check_keywords(c, s, path)) {
        c->depth--;
        return NULL;
    }
    const okv_json *ref = okv_json_get(s, "$ref"), *any = okv_json_get(s, "anyOf"), *one = okv_json_get(s, "oneOf"),
             *cnst = okv_json_get(s, "const"), *en = okv_json_get(s, "enum"), *type = okv_json_get(s, "type");
    int combos = (ref != NULL) + (any != NULL) + (one != NULL) + (cnst != NULL) + (en != NULL);
    if (combos > 1) {
        cfail(c, OKV_ERR_UNSUPPORTED, path, "%s", "combining $ref, anyOf, oneOf, const and enum in one schema is not supported");
    } else if (combos == 1 && type && !cnst && !en) {
        cfail(c, OKV_ERR_UNSUPPORTED, path, "%s", "'type' beside $ref, anyOf or oneOf is not supported");
    } else if (combos == 1 && typed_keyword(s)) {
        /* silently dropped before: {"anyOf": [...], "required": ["a"]} let a be missing */
        cfail(c, OKV_ERR_UNSUPPORTED, path, "'%s' beside $ref, anyOf, oneOf, const or enum is not supported",
              typed_keyword(s));
    } else if (ref) {
        if (ref->type != OKV_JSON_STRING) cfail(c, OKV_ERR_INVALID, path, "'%s' must be a string", "$ref");
        else out = resolve_ref(c, ref->str, path);
    } else if (any || one) {
        out = alternatives(c, any ? any : one, any ? "anyOf" : "oneOf", name, path);
    } else if (cnst || en) {
        prim(c, "space");
        okv_sbuf b = {0};
        /* 'type' beside them keeps only the values of that type
         * ({"type": "string", "enum": ["a", null]} takes "a", not null) */
        if (type && !type_names_ok(type)) {
            cfail(c, OKV_ERR_INVALID, path, "'%s' must be a string or a non-empty array of strings", "type");
        } else if (cnst) {
            if (type && !of_type(cnst, type))
                cfail(c, OKV_ERR_INVALID, path, "%s", "'const' is not of the schema's 'type': no value is valid");
            else put_json_literal(c, &b, cnst);
        } else if (en->type != OKV_JSON_ARRAY || en->n == 0) {
            cfail(c, OKV_ERR_INVALID, path, "'%s' must be a non-empty array", "enum");
        } else {
            okv_sbuf_puts(&b, "(");
            size_t kept = 0;
            for (size_t i = 0; i < en->n; i++) {
                if (type && !of_type(en->items[i], type)) continue;
                if (kept++) okv_sbuf_puts(&b, " | ");
                put_json_literal(c, &b, en->items[i]);
            }
            okv_sbuf_puts(&b, ")");
            if (!kept) cfail(c, OKV_ERR_INVALID, path, "%s", "no value of 'enum' is of the schema's 'type': no value is valid");
        }
        okv_sbuf_puts(&b, " space");
        char *body = sbuf_take(c, &b);
        if (!c->failed) out = add_rule(c, name, body);
        free(body);
    } else if (type) {
        if (type->type == OKV_JSON_STRING) {
            out = typed(c, s, type->str, name, path);
        } else if (type->type == OKV_JSON_ARRAY && type->n > 0) {
            okv_sbuf b = {0};
            char rn[256];
            for (size_t i = 0; i < type->n && !c->failed; i++) {
                if (type->items[i]->type != OKV_JSON_STRING) {
                    cfail(c, OKV_ERR_INVALID, path, "'%s' must hold strings", "type");
                    break;
                }
                snprintf(rn, sizeof rn, "%s-%s", name, type->items[i]->str);
                const char *r = typed(c, s, type->items[i]->str, rn, path);
                if (i) okv_sbuf_puts(&b, " | ");
                if (r) okv_sbuf_puts(&b, r);
            }
            char *body = sbuf_take(c, &b);
            if (!c->failed) out = add_rule(c, name, body);
            free(body);
        } else {
            cfail(c, OKV_ERR_INVALID, path, "'%s' must be a string or a non-empty array of strings", "type");
        }
    } else if (okv_json_get(s, "properties") || okv_json_get(s, "additionalProperties")) {
        out = object_rule(c, s, name, path);
    } else if (okv_json_get(s, "items") || okv_json_get(s, "prefixItems")) {
        out = array_rule(c, s, name, path);
    } else if (okv_json_get(s, "pattern") || okv_json_get(s, "format") || okv_json_get(s, "minLength") ||
               okv_json_get(s, "maxLength")) {
        out = string_rule(c, s, name, path);
    } else if (okv_json_get(s, "minimum") || okv_json_get(s, "maximum") || okv_json_get(s, "exclusiveMinimum") ||
               okv_json_get(s, "exclusiveMaximum")) {
        cfail(c, OKV_ERR_UNSUPPORTED, path, "%s", "numeric bounds without a 'type' (integer or number) are not supported");
    } else {
        out = add_rule(c, name, prim(c, "value"));
    }
    c->depth--;
    return c->failed ? NULL : out;
}

/* The primitives' names: a start rule may not take one. */
static bool reserved(const char *name) {
    static const char *const R[] = {"space", "boolean", "null", "char", "string", "integral-part", "decimal-part",
                                    "number", "integer", "value", "object", "array", "date", "time", "date-time",
                                    "date-string", "time-string", "date-time-string", "uuid", NULL};
    for (const char *const *r = R; *r; r++)
        if (strcmp(*r, name) == 0) return true;
    return strncmp(name, "ref-", 4) == 0;
}

static char *convert(int32_t n, const char *const *schemas, const size_t *lens, const char *const *names, bool loose,
                     char *skipped, size_t cap, okv_error *err) {
    okv_error_clear(err);
    if (skipped && cap) skipped[0] = '\0';
    if (n < 1 || !schemas || !lens || !names) {
        okv_fail(err, OKV_ERR_INVALID, "okv_json_schemas_to_gbnf: no schemas (n %d)", (int)n);
        return NULL;
    }
    conv c = {.err = err, .loose = loose};
    /* Every start rule first, under its exact name (placeholders), so no
     * generated rule can take one. */
    for (int32_t i = 0; i < n && !c.failed; i++) {
        const char *nm = names[i];
        bool ok = nm && nm[0] && !reserved(nm);
        for (const char *q = nm; ok && *q; q++)
            ok = (*q >= 'a' && *q <= 'z') || (*q >= 'A' && *q <= 'Z') || (*q >= '0' && *q <= '9') || *q == '-';
        if (!ok) {
            okv_fail(err, OKV_ERR_INVALID, "start rule name '%.60s' must be letters, digits and '-', and none of the "
                     "primitives' names (space, string, value, ...)", nm ? nm : "(null)");
            c.failed = true;
            break;
        }
        if (okv_strmap_get(&c.index, nm, strlen(nm)) >= 0) {
            okv_fail(err, OKV_ERR_INVALID, "start rule name '%.60s' is given twice", nm);
            c.failed = true;
            break;
        }
        char ph[48];
        snprintf(ph, sizeof ph, "\"start-placeholder%d\"", (int)i);
        add_rule(&c, nm, ph);
    }
    for (int32_t i = 0; i < n && !c.failed; i++) {
        okv_json *root = okv_json_parse(schemas[i], lens[i], err);
        if (!root) {
            c.failed = true;
            break;
        }
        /* $ref is per schema: its own #/$defs. */
        for (size_t k = 0; k < c.n_refs; k++) {
            free(c.ref_keys[k]);
            free(c.ref_names[k]);
        }
        c.n_refs = 0;
        c.root = root;
        c.root_name = names[i];
        char vn[200];
        snprintf(vn, sizeof vn, "%s-value", names[i]);
        char path[200];
        snprintf(path, sizeof path, "%s#", n > 1 ? names[i] : "");
        const char *top = visit(&c, root, vn, path);
        if (top) set_rule(&c, names[i], top);
        okv_json_free(root);
        c.root = NULL;
    }
    char *out = NULL;
    if (!c.failed) {
        okv_sbuf b = {0};
        for (size_t i = 0; i < c.n; i++) okv_sbuf_printf(&b, "%s ::= %s\n", c.r[i].name, c.r[i].body);
        out = sbuf_take(&c, &b);
    }
    for (size_t i = 0; i < c.n; i++) {
        free(c.r[i].name);
        free(c.r[i].body);
    }
    for (size_t i = 0; i < c.n_refs; i++) {
        free(c.ref_keys[i]);
        free(c.ref_names[i]);
    }
    free(c.r);
    okv_strmap_free(&c.index);
    free(c.ref_keys);
    free(c.ref_names);
    if (c.n_skipped > 12) okv_sbuf_printf(&c.skipped, ", and %d more", c.n_skipped - 12);
    if (out && skipped && cap && c.skipped.n && !c.skipped.oom) {
        /* cut at cap, saying so, never silently */
        if (c.skipped.n < cap) memcpy(skipped, c.skipped.s, c.skipped.n + 1);
        else if (cap > 4) snprintf(skipped, cap, "%.*s...", (int)(cap - 4), c.skipped.s);
    }
    free(c.skipped.s);
    return out;
}

char *okv_json_schemas_to_gbnf(int32_t n, const char *const *schemas, const size_t *lens, const char *const *names,
                               okv_error *err) {
    return convert(n, schemas, lens, names, false, NULL, 0, err);
}

char *okv_json_schemas_to_gbnf_loose(int32_t n, const char *const *schemas, const size_t *lens,
                                     const char *const *names, char *skipped, size_t cap, okv_error *err) {
    return convert(n, schemas, lens, names, true, skipped, cap, err);
}

char *okv_json_schema_to_gbnf(const char *schema, size_t len, okv_error *err) {
    const char *name = "root";
    return okv_json_schemas_to_gbnf(1, &schema, &len, &name, err);
}

const char *okv_gbnf_json_object(void) {
    return "root ::= object\n"
           "object ::= \"{\" space ( string \":\" space value (\",\" space string \":\" space value)* )? \"}\" space\n"
           "value ::= object | array | string | number | boolean | null\n"
           "array ::= \"[\" space ( value (\",\" space value)* )? \"]\" space\n"
           "string ::= \"\\\"\" char* \"\\\"\" space\n"
           "char ::= " CHAR_RULE "\n"
           "number ::= (\"-\"? integral-part) (\".\" decimal-part)? ([eE] [-+]? integral-part)? space\n"
           "integral-part ::= [0] | [1-9] [0-9]{0,15}\n"
           "decimal-part ::= [0-9]{1,16}\n"
           "boolean ::= (\"true\" | \"false\") space\n"
           "null ::= \"null\" space\n"
           "space ::= " SPACE_RULE "\n";
}
