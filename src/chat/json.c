/* JSON text to values and back.  The parser keeps what templates can see:
 * key order, and ints apart from floats (1 is not 1.0 to Python); the
 * writer is Python's json.dumps(ensure_ascii=False) with its indent,
 * separators and sort_keys, which Hugging Face's tojson filter calls. */
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "chat/jinja.h"

typedef struct jp {
    jarena *a;
    jfail *f;
    const char *s;
    size_t n, i;
    const char *what;
    int depth;
} jp;

static _Noreturn void bad(jp *p, const char *why) {
    okv_jinja_fail(p->f, 0, "%s: invalid JSON at byte %zu: %s", p->what, p->i, why);
}

static void ws(jp *p) {
    while (p->i < p->n && (p->s[p->i] == ' ' || p->s[p->i] == '\t' || p->s[p->i] == '\n' || p->s[p->i] == '\r')) p->i++;
}

static int hex4(jp *p) {
    if (p->n - p->i < 4) bad(p, "short \\u escape");
    int v = 0;
    for (int k = 0; k < 4; k++) {
        char c = p->s[p->i++];
        v <<= 4;
        if (c >= '0' && c <= '9') v |= c - '0';
        else if (c >= 'a' && c <= 'f') v |= c - 'a' + 10;
        else if (c >= 'A' && c <= 'F') v |= c - 'A' + 10;
        else bad(p, "bad \\u escape");
    }
    return v;
}

static void put_utf8(jp *p, jbuf *b, unsigned cp) {
    char u[4];
    int n;
    if (cp < 0x80) u[0] = (char)cp, n = 1;
    else if (cp < 0x800) u[0] = (char)(0xC0 | cp >> 6), u[1] = (char)(0x80 | (cp & 63)), n = 2;
    else if (cp < 0x10000)
        u[0] = (char)(0xE0 | cp >> 12), u[1] = (char)(0x80 | (cp >> 6 & 63)), u[2] = (char)(0x80 | (cp & 63)), n = 3;
    else
        u[0] = (char)(0xF0 | cp >> 18), u[1] = (char)(0x80 | (cp >> 12 & 63)), u[2] = (char)(0x80 | (cp >> 6 & 63)),
        u[3] = (char)(0x80 | (cp & 63)), n = 4;
    okv_jbuf_put(p->a, p->f, b, u, (size_t)n);
}

static jv string(jp *p) {
    p->i++; /* the opening quote */
    jbuf b = {0};
    okv_jbuf_put(p->a, p->f, &b, "", 0);
    for (;;) {
        if (p->i >= p->n) bad(p, "unterminated string");
        size_t start = p->i;
        while (p->i < p->n && p->s[p->i] != '"' && p->s[p->i] != '\\' && (unsigned char)p->s[p->i] >= 0x20) p->i++;
        okv_jbuf_put(p->a, p->f, &b, p->s + start, p->i - start);
        if (p->i >= p->n) bad(p, "unterminated string");
        char c = p->s[p->i++];
        if (c == '"') break;
        if (c != '\\') {
            p->i--;
            bad(p, "control character in string");
        }
        if (p->i >= p->n) bad(p, "unterminated string");
        c = p->s[p->i++];
        switch (c) {
        case '"': okv_jbuf_putc(p->a, p->f, &b, '"'); break;
        case '\\': okv_jbuf_putc(p->a, p->f, &b, '\\'); break;
        case '/': okv_jbuf_putc(p->a, p->f, &b, '/'); break;
        case 'b': okv_jbuf_putc(p->a, p->f, &b, '\b'); break;
        case 'f': okv_jbuf_putc(p->a, p->f, &b, '\f'); break;
        case 'n': okv_jbuf_putc(p->a, p->f, &b, '\n'); break;
        case 'r': okv_jbuf_putc(p->a, p->f, &b, '\r'); break;
        case 't': okv_jbuf_putc(p->a, p->f, &b, '\t'); break;
        case 'u': {
            unsigned cp = (unsigned)hex4(p);
            if (cp >= 0xD800 && cp < 0xDC00 && p->n - p->i >= 6 && p->s[p->i] == '\\' && p->s[p->i + 1] == 'u') {
                size_t save = p->i;
                p->i += 2;
                unsigned lo = (unsigned)hex4(p);
                if (lo >= 0xDC00 && lo < 0xE000) cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
                else p->i = save;
            }
            if (cp >= 0xD800 && cp < 0xE000) cp = 0xFFFD; /* a lone surrogate has no UTF-8 */
            put_utf8(p, &b, cp);
            break;
        }
        default: p->i--; bad(p, "bad escape");
        }
    }
    return okv_jv_str(b.p, b.n);
}

static jv value(jp *p);

static jv number(jp *p) {
    size_t start = p->i;
    bool is_float = false;
    if (p->s[p->i] == '-') p->i++;
    if (p->i >= p->n || p->s[p->i] < '0' || p->s[p->i] > '9') bad(p, "bad number");
    if (p->s[p->i] == '0') p->i++;
    else
        while (p->i < p->n && p->s[p->i] >= '0' && p->s[p->i] <= '9') p->i++;
    if (p->i < p->n && p->s[p->i] == '.') {
        is_float = true;
        p->i++;
        if (p->i >= p->n || p->s[p->i] < '0' || p->s[p->i] > '9') bad(p, "bad number");
        while (p->i < p->n && p->s[p->i] >= '0' && p->s[p->i] <= '9') p->i++;
    }
    if (p->i < p->n && (p->s[p->i] == 'e' || p->s[p->i] == 'E')) {
        is_float = true;
        p->i++;
        if (p->i < p->n && (p->s[p->i] == '+' || p->s[p->i] == '-')) p->i++;
        if (p->i >= p->n || p->s[p->i] < '0' || p->s[p->i] > '9') bad(p, "bad number");
        while (p->i < p->n && p->s[p->i] >= '0' && p->s[p->i] <= '9') p->i++;
    }
    char tmp[64];
    size_t len = p->i - start;
    if (len >= sizeof tmp) {
        p->i = start;
        bad(p, "number too long");
    }
    memcpy(tmp, p->s + start, len);
    tmp[len] = '\0';
    if (!is_float) {
        char *end;
        long long v = strtoll(tmp, &end, 10);
        if (end == tmp + len && !(v == LLONG_MAX || v == LLONG_MIN)) return okv_jv_int(v);
    }
    return okv_jv_float(strtod(tmp, NULL));
}

static bool word(jp *p, const char *w) {
    size_t n = strlen(w);
    if (p->n - p->i >= n && memcmp(p->s + p->i, w, n) == 0) {
        p->i += n;
        return true;
    }
    return false;
}

static jv value(jp *p) {
    ws(p);
    if (p->i >= p->n) bad(p, "unexpected end");
    if (++p->depth > 256) bad(p, "nested more than 256 deep");
    jv v;
    char c = p->s[p->i];
    if (c == '{') {
        p->i++;
        v = okv_jv_dict_new(p->a, p->f, 0);
        ws(p);
        if (p->i < p->n && p->s[p->i] == '}') p->i++;
        else
            for (;;) {
                ws(p);
                if (p->i >= p->n || p->s[p->i] != '"') bad(p, "expected a string key");
                jv k = string(p);
                ws(p);
                if (p->i >= p->n || p->s[p->i] != ':') bad(p, "expected ':'");
                p->i++;
                okv_jv_dict_set(p->a, p->f, v, k, value(p));
                ws(p);
                if (p->i < p->n && p->s[p->i] == ',') {
                    p->i++;
                    continue;
                }
                if (p->i < p->n && p->s[p->i] == '}') {
                    p->i++;
                    break;
                }
                bad(p, "expected ',' or '}'");
            }
    } else if (c == '[') {
        p->i++;
        v = okv_jv_list_new(p->a, p->f, 0);
        ws(p);
        if (p->i < p->n && p->s[p->i] == ']') p->i++;
        else
            for (;;) {
                okv_jv_list_push(p->a, p->f, v, value(p));
                ws(p);
                if (p->i < p->n && p->s[p->i] == ',') {
                    p->i++;
                    continue;
                }
                if (p->i < p->n && p->s[p->i] == ']') {
                    p->i++;
                    break;
                }
                bad(p, "expected ',' or ']'");
            }
    } else if (c == '"') v = string(p);
    else if (c == '-' || (c >= '0' && c <= '9')) v = number(p);
    else if (word(p, "true")) v = okv_jv_bool(true);
    else if (word(p, "false")) v = okv_jv_bool(false);
    else if (word(p, "null")) v = okv_jv_none();
    else bad(p, "unexpected character");
    p->depth--;
    return v;
}

jv okv_jinja_json_parse(jarena *a, jfail *f, const char *text, size_t n, const char *what) {
    jp p = {a, f, text, n, 0, what, 0};
    jv v = value(&p);
    ws(&p);
    if (p.i != p.n) bad(&p, "text after the value");
    return v;
}

/* ---- writer ---- */

static void dump_str(jarena *a, jfail *f, jbuf *b, const char *s, size_t n) {
    okv_jbuf_putc(a, f, b, '"');
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        switch (c) {
        case '"': okv_jbuf_puts(a, f, b, "\\\""); break;
        case '\\': okv_jbuf_puts(a, f, b, "\\\\"); break;
        case '\n': okv_jbuf_puts(a, f, b, "\\n"); break;
        case '\r': okv_jbuf_puts(a, f, b, "\\r"); break;
        case '\t': okv_jbuf_puts(a, f, b, "\\t"); break;
        case '\b': okv_jbuf_puts(a, f, b, "\\b"); break;
        case '\f': okv_jbuf_puts(a, f, b, "\\f"); break;
        default:
            if (c < 0x20) okv_jbuf_printf(a, f, b, "\\u%04x", c);
            else okv_jbuf_putc(a, f, b, (char)c);
        }
    }
    okv_jbuf_putc(a, f, b, '"');
}

static void newline(jarena *a, jfail *f, jbuf *b, const json_style *st, int level) {
    okv_jbuf_putc(a, f, b, '\n');
    for (int i = 0; i < level; i++) okv_jbuf_puts(a, f, b, st->indent);
}

/* Python's json turns keys into strings: str keys as they are, numbers
 * and constants as their JSON text. */
static void dump_key(jarena *a, jfail *f, jbuf *b, jv k, int line) {
    char num[32];
    switch (k.kind) {
    case JV_STR: dump_str(a, f, b, k.u.s.p, k.u.s.n); return;
    case JV_INT: okv_jbuf_printf(a, f, b, "\"%lld\"", (long long)k.u.i); return;
    case JV_FLOAT: okv_jv_float_repr(k.u.f, num); okv_jbuf_printf(a, f, b, "\"%s\"", num); return;
    case JV_BOOL: okv_jbuf_puts(a, f, b, k.u.b ? "\"true\"" : "\"false\""); return;
    case JV_NONE: okv_jbuf_puts(a, f, b, "\"null\""); return;
    default: okv_jinja_fail(f, line, "keys must be str, int, float, bool or None, not %s", okv_jv_type_name(k));
    }
}

static int key_order(void *ctx, size_t x, size_t y) {
    const jv *k = ctx;
    jv a = k[x], b = k[y];
    if (a.kind == JV_STR && b.kind == JV_STR) {
        size_t n = a.u.s.n < b.u.s.n ? a.u.s.n : b.u.s.n;
        int c = memcmp(a.u.s.p, b.u.s.p, n);
        return c ? c : (a.u.s.n > b.u.s.n) - (a.u.s.n < b.u.s.n);
    }
    double p = okv_jv_num(a), q = okv_jv_num(b);
    return (p > q) - (p < q);
}

static void dump(jarena *a, jfail *f, jbuf *b, jv v, const json_style *st, int line, int level) {
    char num[32];
    if (level > 256) okv_jinja_fail(f, line, "tojson: value nested more than 256 deep");
    switch (v.kind) {
    case JV_NONE: okv_jbuf_puts(a, f, b, "null"); return;
    case JV_BOOL: okv_jbuf_puts(a, f, b, v.u.b ? "true" : "false"); return;
    case JV_INT: okv_jbuf_printf(a, f, b, "%lld", (long long)v.u.i); return;
    case JV_FLOAT:
        if (isnan(v.u.f)) okv_jbuf_puts(a, f, b, "NaN");
        else if (isinf(v.u.f)) okv_jbuf_puts(a, f, b, v.u.f < 0 ? "-Infinity" : "Infinity");
        else {
            okv_jv_float_repr(v.u.f, num);
            okv_jbuf_puts(a, f, b, num);
        }
        return;
    case JV_STR: dump_str(a, f, b, v.u.s.p, v.u.s.n); return;
    case JV_LIST:
        if (v.u.l->n == 0) {
            okv_jbuf_puts(a, f, b, "[]");
            return;
        }
        okv_jbuf_putc(a, f, b, '[');
        for (size_t i = 0; i < v.u.l->n; i++) {
            if (i) okv_jbuf_puts(a, f, b, st->item_sep);
            if (st->indent) newline(a, f, b, st, level + 1);
            dump(a, f, b, v.u.l->v[i], st, line, level + 1);
        }
        if (st->indent) newline(a, f, b, st, level);
        okv_jbuf_putc(a, f, b, ']');
        return;
    case JV_DICT: {
        if (v.flags & (JV_F_NAMESPACE | JV_F_LOOP)) break;
        jdict *d = v.u.d;
        if (d->n == 0) {
            okv_jbuf_puts(a, f, b, "{}");
            return;
        }
        size_t *order = okv_jalloc(a, f, d->n * sizeof *order);
        for (size_t i = 0; i < d->n; i++) order[i] = i;
        if (st->sort_keys) {
            /* Python sorts keys of one kind only; mixing fails as it does. */
            for (size_t i = 1; i < d->n; i++) (void)okv_jv_compare(f, line, d->k[0], d->k[i]);
            okv_jsort(a, f, order, d->n, key_order, d->k);
        }
        okv_jbuf_putc(a, f, b, '{');
        for (size_t i = 0; i < d->n; i++) {
            if (i) okv_jbuf_puts(a, f, b, st->item_sep);
            if (st->indent) newline(a, f, b, st, level + 1);
            dump_key(a, f, b, d->k[order[i]], line);
            okv_jbuf_puts(a, f, b, st->key_sep);
            dump(a, f, b, d->v[order[i]], st, line, level + 1);
        }
        if (st->indent) newline(a, f, b, st, level);
        okv_jbuf_putc(a, f, b, '}');
        return;
    }
    default: break;
    }
    okv_jinja_fail(f, line, "Object of type %s is not JSON serializable", okv_jv_type_name(v));
}

void okv_jinja_json_dump(jarena *a, jfail *f, jbuf *b, jv v, const json_style *st, int line) {
    okv_jbuf_put(a, f, b, "", 0);
    dump(a, f, b, v, st, line, 0);
}
