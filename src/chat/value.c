/* Values as Python sees them: truthiness, equality, ordering, str() and
 * repr(), which templates print ({{ message.tool_calls }} shows a list as
 * Python would). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chat/jinja.h"

jv okv_jv_undef(void) { return (jv){.kind = JV_UNDEF}; }
jv okv_jv_none(void) { return (jv){.kind = JV_NONE}; }
jv okv_jv_bool(bool b) { return (jv){.kind = JV_BOOL, .u.b = b}; }
jv okv_jv_int(int64_t i) { return (jv){.kind = JV_INT, .u.i = i}; }
jv okv_jv_float(double f) { return (jv){.kind = JV_FLOAT, .u.f = f}; }
jv okv_jv_str(const char *p, size_t n) { return (jv){.kind = JV_STR, .u.s = {p ? p : "", n}}; }
jv okv_jv_cstr(const char *p) { return okv_jv_str(p, strlen(p)); }

jv okv_jv_list_new(jarena *a, jfail *f, size_t cap) {
    jv v = {.kind = JV_LIST};
    v.u.l = okv_jalloc(a, f, sizeof *v.u.l);
    if (cap) {
        v.u.l->v = okv_jalloc(a, f, cap * sizeof(jv));
        v.u.l->cap = cap;
    }
    return v;
}

jv okv_jv_dict_new(jarena *a, jfail *f, size_t cap) {
    jv v = {.kind = JV_DICT};
    v.u.d = okv_jalloc(a, f, sizeof *v.u.d);
    if (cap) {
        v.u.d->k = okv_jalloc(a, f, cap * sizeof(jv));
        v.u.d->v = okv_jalloc(a, f, cap * sizeof(jv));
        v.u.d->cap = cap;
    }
    return v;
}

void okv_jv_list_push(jarena *a, jfail *f, jv list, jv item) {
    jlist *l = list.u.l;
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 4;
        jv *v = okv_jalloc(a, f, cap * sizeof(jv));
        if (l->n) memcpy(v, l->v, l->n * sizeof(jv));
        l->v = v;
        l->cap = cap;
    }
    l->v[l->n++] = item;
}

jv *okv_jv_dict_find(jv dict, jv key) {
    jdict *d = dict.u.d;
    for (size_t i = 0; i < d->n; i++)
        if (okv_jv_equal(d->k[i], key)) return &d->v[i];
    return NULL;
}

jv *okv_jv_dict_get(jv dict, const char *key, size_t n) {
    jdict *d = dict.u.d;
    for (size_t i = 0; i < d->n; i++)
        if (d->k[i].kind == JV_STR && d->k[i].u.s.n == n && memcmp(d->k[i].u.s.p, key, n) == 0) return &d->v[i];
    return NULL;
}

void okv_jv_dict_set(jarena *a, jfail *f, jv dict, jv key, jv val) {
    jv *slot = okv_jv_dict_find(dict, key);
    if (slot) {
        *slot = val;
        return;
    }
    jdict *d = dict.u.d;
    if (d->n == d->cap) {
        size_t cap = d->cap ? d->cap * 2 : 4;
        jv *k = okv_jalloc(a, f, cap * sizeof(jv)), *v = okv_jalloc(a, f, cap * sizeof(jv));
        if (d->n) {
            memcpy(k, d->k, d->n * sizeof(jv));
            memcpy(v, d->v, d->n * sizeof(jv));
        }
        d->k = k;
        d->v = v;
        d->cap = cap;
    }
    d->k[d->n] = key;
    d->v[d->n++] = val;
}

bool okv_jv_truthy(jv v) {
    switch (v.kind) {
    case JV_UNDEF:
    case JV_NONE: return false;
    case JV_BOOL: return v.u.b;
    case JV_INT: return v.u.i != 0;
    case JV_FLOAT: return v.u.f != 0;
    case JV_STR: return v.u.s.n != 0;
    case JV_LIST: return v.u.l->n != 0;
    case JV_DICT: return (v.flags & JV_F_NAMESPACE) || v.u.d->n != 0;
    default: return true;
    }
}

bool okv_jv_is_number(jv v) { return v.kind == JV_INT || v.kind == JV_FLOAT || v.kind == JV_BOOL; }

double okv_jv_num(jv v) {
    return v.kind == JV_FLOAT ? v.u.f : v.kind == JV_INT ? (double)v.u.i : v.kind == JV_BOOL ? v.u.b : 0;
}

/* Past EQUAL_DEPTH levels (only a container holding itself goes so deep)
 * unequal, where Python raises RecursionError: no unbounded recursion. */
enum { EQUAL_DEPTH = 256 };

static bool equal_in(jv a, jv b, int depth) {
    if (okv_jv_is_number(a) && okv_jv_is_number(b)) {
        if (a.kind != JV_FLOAT && b.kind != JV_FLOAT) return okv_jv_num(a) == okv_jv_num(b) && (a.kind == JV_BOOL ? a.u.b : a.u.i) == (b.kind == JV_BOOL ? b.u.b : b.u.i);
        return okv_jv_num(a) == okv_jv_num(b);
    }
    if (a.kind != b.kind) return false;
    switch (a.kind) {
    case JV_UNDEF:
    case JV_NONE: return true;
    case JV_STR: return a.u.s.n == b.u.s.n && memcmp(a.u.s.p, b.u.s.p, a.u.s.n) == 0;
    case JV_LIST:
        if ((a.flags & JV_F_TUPLE) != (b.flags & JV_F_TUPLE) || a.u.l->n != b.u.l->n) return false;
        if (a.u.l == b.u.l) return true;
        if (depth >= EQUAL_DEPTH) return false;
        for (size_t i = 0; i < a.u.l->n; i++)
            if (!equal_in(a.u.l->v[i], b.u.l->v[i], depth + 1)) return false;
        return true;
    case JV_DICT:
        if (a.u.d == b.u.d) return true;
        if (a.flags & JV_F_NAMESPACE || b.flags & JV_F_NAMESPACE || a.u.d->n != b.u.d->n) return false;
        if (depth >= EQUAL_DEPTH) return false;
        for (size_t i = 0; i < a.u.d->n; i++) {
            jv *o = okv_jv_dict_find(b, a.u.d->k[i]);
            if (!o || !equal_in(a.u.d->v[i], *o, depth + 1)) return false;
        }
        return true;
    case JV_FUNC: return a.u.fn == b.u.fn;
    default: return false;
    }
}

bool okv_jv_equal(jv a, jv b) { return equal_in(a, b, 0); }

const char *okv_jv_type_name(jv v) {
    switch (v.kind) {
    case JV_UNDEF: return "Undefined";
    case JV_NONE: return "NoneType";
    case JV_BOOL: return "bool";
    case JV_INT: return "int";
    case JV_FLOAT: return "float";
    case JV_STR: return "str";
    case JV_LIST: return v.flags & JV_F_TUPLE ? "tuple" : "list";
    case JV_DICT: return v.flags & JV_F_NAMESPACE ? "Namespace" : v.flags & JV_F_LOOP ? "LoopContext" : "dict";
    default: return "function";
    }
}

static int compare_in(jfail *f, int line, jv a, jv b, int depth) {
    if (okv_jv_is_number(a) && okv_jv_is_number(b)) {
        if (a.kind != JV_FLOAT && b.kind != JV_FLOAT) {
            int64_t x = a.kind == JV_BOOL ? a.u.b : a.u.i, y = b.kind == JV_BOOL ? b.u.b : b.u.i;
            return x < y ? -1 : x > y;
        }
        double x = okv_jv_num(a), y = okv_jv_num(b);
        return x < y ? -1 : x > y;
    }
    if (a.kind == JV_STR && b.kind == JV_STR) {
        size_t n = a.u.s.n < b.u.s.n ? a.u.s.n : b.u.s.n;
        int c = memcmp(a.u.s.p, b.u.s.p, n); /* UTF-8 bytes order as code points do */
        if (c) return c < 0 ? -1 : 1;
        return a.u.s.n < b.u.s.n ? -1 : a.u.s.n > b.u.s.n;
    }
    if (a.kind == JV_LIST && b.kind == JV_LIST) {
        if (a.u.l == b.u.l) return 0;
        if (depth >= EQUAL_DEPTH) okv_jinja_fail(f, line, "lists nested more than %d deep cannot be compared", EQUAL_DEPTH);
        for (size_t i = 0; i < a.u.l->n && i < b.u.l->n; i++)
            if (!okv_jv_equal(a.u.l->v[i], b.u.l->v[i])) return compare_in(f, line, a.u.l->v[i], b.u.l->v[i], depth + 1);
        return a.u.l->n < b.u.l->n ? -1 : a.u.l->n > b.u.l->n;
    }
    okv_jinja_fail(f, line, "'<' not supported between instances of '%s' and '%s'", okv_jv_type_name(a), okv_jv_type_name(b));
}

int okv_jv_compare(jfail *f, int line, jv a, jv b) { return compare_in(f, line, a, b, 0); }

/* Python's float repr: the shortest digits that read back as d, fixed
 * notation for exponents in [-4, 16), else d.ddde+XX. */
void okv_jv_float_repr(double d, char out[32]) {
    if (isnan(d)) {
        strcpy(out, "nan");
        return;
    }
    if (isinf(d)) {
        strcpy(out, d < 0 ? "-inf" : "inf");
        return;
    }
    char e[40];
    int prec;
    for (prec = 1; prec <= 17; prec++) {
        snprintf(e, sizeof e, "%.*e", prec - 1, d);
        if (strtod(e, NULL) == d) break;
    }
    /* e is [-]D[.DDD]e[+-]XX: split into digits and exponent. */
    char digits[24];
    int nd = 0, neg = e[0] == '-';
    const char *p = e + neg;
    for (; *p && *p != 'e'; p++)
        if (*p != '.') digits[nd++] = *p;
    digits[nd] = '\0';
    int exp = atoi(p + 1);
    while (nd > 1 && digits[nd - 1] == '0') digits[--nd] = '\0';
    char *o = out;
    if (neg) *o++ = '-';
    if (exp >= -4 && exp < 16) {
        if (exp < 0) {
            *o++ = '0';
            *o++ = '.';
            for (int i = 0; i < -exp - 1; i++) *o++ = '0';
            for (int i = 0; i < nd; i++) *o++ = digits[i];
        } else {
            for (int i = 0; i <= exp; i++) *o++ = i < nd ? digits[i] : '0';
            *o++ = '.';
            if (nd > exp + 1)
                for (int i = exp + 1; i < nd; i++) *o++ = digits[i];
            else
                *o++ = '0';
        }
        *o = '\0';
    } else {
        *o++ = digits[0];
        if (nd > 1) {
            *o++ = '.';
            for (int i = 1; i < nd; i++) *o++ = digits[i];
        }
        sprintf(o, "e%c%02d", exp < 0 ? '-' : '+', exp < 0 ? -exp : exp);
    }
}

static void repr_str(jarena *a, jfail *f, jbuf *b, const char *s, size_t n) {
    bool has_sq = memchr(s, '\'', n) != NULL, has_dq = memchr(s, '"', n) != NULL;
    char q = has_sq && !has_dq ? '"' : '\'';
    okv_jbuf_putc(a, f, b, q);
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '\\') okv_jbuf_puts(a, f, b, "\\\\");
        else if (c == (unsigned char)q) {
            okv_jbuf_putc(a, f, b, '\\');
            okv_jbuf_putc(a, f, b, (char)c);
        } else if (c == '\n') okv_jbuf_puts(a, f, b, "\\n");
        else if (c == '\r') okv_jbuf_puts(a, f, b, "\\r");
        else if (c == '\t') okv_jbuf_puts(a, f, b, "\\t");
        else if (c < 0x20 || c == 0x7f) okv_jbuf_printf(a, f, b, "\\x%02x", c);
        else okv_jbuf_putc(a, f, b, (char)c);
    }
    okv_jbuf_putc(a, f, b, q);
}

/* The containers being printed, outermost first: one met again inside
 * itself prints as Python's repr does, [...] or {...}, and a chain deeper
 * than TEXT_DEPTH is an error (a namespace can hold itself; without this
 * the recursion ran until the stack overflowed). */
enum { TEXT_DEPTH = 256 };
typedef struct text_stack {
    const void *open[TEXT_DEPTH];
    int n;
} text_stack;

/* Pushes container p; false (nothing pushed) when it is being printed already. */
static bool text_enter(jfail *f, text_stack *st, const void *p) {
    for (int i = 0; i < st->n; i++)
        if (st->open[i] == p) return false;
    if (st->n == TEXT_DEPTH) okv_jinja_fail(f, 0, "a value nested more than %d deep cannot be printed", TEXT_DEPTH);
    st->open[st->n++] = p;
    return true;
}

static void to_text_in(jarena *a, jfail *f, jbuf *b, jv v, bool repr, text_stack *st) {
    char num[32];
    switch (v.kind) {
    case JV_UNDEF:
        if (repr) okv_jbuf_puts(a, f, b, "Undefined"); /* jinja2's Undefined inside a printed list */
        return;
    case JV_NONE: okv_jbuf_puts(a, f, b, "None"); return;
    case JV_BOOL: okv_jbuf_puts(a, f, b, v.u.b ? "True" : "False"); return;
    case JV_INT: okv_jbuf_printf(a, f, b, "%lld", (long long)v.u.i); return;
    case JV_FLOAT: okv_jv_float_repr(v.u.f, num); okv_jbuf_puts(a, f, b, num); return;
    case JV_STR:
        if (repr) repr_str(a, f, b, v.u.s.p, v.u.s.n);
        else okv_jbuf_put(a, f, b, v.u.s.p, v.u.s.n);
        return;
    case JV_LIST: {
        bool tuple = v.flags & JV_F_TUPLE;
        if (!text_enter(f, st, v.u.l)) {
            okv_jbuf_puts(a, f, b, tuple ? "(...)" : "[...]");
            return;
        }
        okv_jbuf_putc(a, f, b, tuple ? '(' : '[');
        for (size_t i = 0; i < v.u.l->n; i++) {
            if (i) okv_jbuf_puts(a, f, b, ", ");
            to_text_in(a, f, b, v.u.l->v[i], true, st);
        }
        if (tuple && v.u.l->n == 1) okv_jbuf_putc(a, f, b, ',');
        okv_jbuf_putc(a, f, b, tuple ? ')' : ']');
        st->n--;
        return;
    }
    case JV_DICT:
        if (v.flags & JV_F_NAMESPACE) okv_jbuf_puts(a, f, b, "<Namespace ");
        if (!text_enter(f, st, v.u.d)) {
            okv_jbuf_puts(a, f, b, "{...}");
        } else {
            okv_jbuf_putc(a, f, b, '{');
            for (size_t i = 0; i < v.u.d->n; i++) {
                if (i) okv_jbuf_puts(a, f, b, ", ");
                to_text_in(a, f, b, v.u.d->k[i], true, st);
                okv_jbuf_puts(a, f, b, ": ");
                to_text_in(a, f, b, v.u.d->v[i], true, st);
            }
            okv_jbuf_putc(a, f, b, '}');
            st->n--;
        }
        if (v.flags & JV_F_NAMESPACE) okv_jbuf_putc(a, f, b, '>');
        return;
    default:
        okv_jbuf_printf(a, f, b, "<function %.100s>", v.u.fn->name ? v.u.fn->name : "?");
        return;
    }
}

static void to_text(jarena *a, jfail *f, jbuf *b, jv v, bool repr) {
    text_stack st;
    st.n = 0;
    to_text_in(a, f, b, v, repr, &st);
}

void okv_jv_str_to(jarena *a, jfail *f, jbuf *b, jv v) { to_text(a, f, b, v, false); }
void okv_jv_repr_to(jarena *a, jfail *f, jbuf *b, jv v) { to_text(a, f, b, v, true); }

jv okv_jv_to_str(jarena *a, jfail *f, jv v) {
    if (v.kind == JV_STR) return v;
    jbuf b = {0};
    to_text(a, f, &b, v, false);
    return okv_jv_str(b.p, b.n);
}

size_t okv_jinja_utf8_len(const char *p, size_t n) {
    size_t c = 0;
    for (size_t i = 0; i < n; i++)
        if (((unsigned char)p[i] & 0xC0) != 0x80) c++;
    return c;
}

size_t okv_jinja_utf8_offset(const char *p, size_t n, size_t i) {
    size_t c = 0;
    for (size_t k = 0; k < n; k++) {
        if (((unsigned char)p[k] & 0xC0) != 0x80) {
            if (c == i) return k;
            c++;
        }
    }
    return n;
}

/* A stable merge sort of idx[0..n) by cmp (Python's sort is stable, and
 * qsort takes no context). */
void okv_jsort(jarena *a, jfail *f, size_t *idx, size_t n, int (*cmp)(void *, size_t, size_t), void *ctx) {
    if (n < 2) return;
    size_t *tmp = okv_jalloc(a, f, n * sizeof *tmp);
    for (size_t w = 1; w < n; w *= 2) {
        for (size_t lo = 0; lo < n; lo += 2 * w) {
            size_t mid = lo + w < n ? lo + w : n, hi = lo + 2 * w < n ? lo + 2 * w : n;
            size_t i = lo, j = mid, k = lo;
            while (i < mid && j < hi) tmp[k++] = cmp(ctx, idx[j], idx[i]) < 0 ? idx[j++] : idx[i++];
            while (i < mid) tmp[k++] = idx[i++];
            while (j < hi) tmp[k++] = idx[j++];
        }
        memcpy(idx, tmp, n * sizeof *idx);
    }
}
