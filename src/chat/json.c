/* JSON text to values and back.  The values keep what templates can see:
 * key order, and ints apart from floats (1 is not 1.0 to Python); the
 * writer is Python's json.dumps(ensure_ascii=False) with its indent,
 * separators and sort_keys, which Hugging Face's tojson filter calls. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "chat/jinja.h"
#include "core/json.h"

/* Template values from the library's JSON tree (core/json.c), so that
 * templates and schemas are read by one reader with one set of checks. */
static jv from_json(jarena *a, jfail *f, const okv_json *t) {
    switch (t->type) {
    case OKV_JSON_NULL: return okv_jv_none();
    case OKV_JSON_BOOL: return okv_jv_bool(t->b);
    case OKV_JSON_NUMBER: {
        /* Python: no fraction nor exponent is an int (1 is not 1.0); an
         * int past 64 bits stays exact in Python, here it becomes a float. */
        if (!strpbrk(t->str, ".eE")) {
            errno = 0;
            long long v = strtoll(t->str, NULL, 10);
            if (errno != ERANGE) return okv_jv_int(v);
        }
        return okv_jv_float(t->num);
    }
    case OKV_JSON_STRING: return okv_jv_str(okv_jstrdup(a, f, t->str, t->len), t->len);
    case OKV_JSON_ARRAY: {
        jv v = okv_jv_list_new(a, f, t->n);
        for (size_t i = 0; i < t->n; i++) okv_jv_list_push(a, f, v, from_json(a, f, t->items[i]));
        return v;
    }
    case OKV_JSON_OBJECT: {
        jv v = okv_jv_dict_new(a, f, t->n);
        for (size_t i = 0; i < t->n; i++) {
            jv k = okv_jv_str(okv_jstrdup(a, f, t->keys[i], t->key_lens[i]), t->key_lens[i]);
            okv_jv_dict_set(a, f, v, k, from_json(a, f, t->items[i]));
        }
        return v;
    }
    }
    return okv_jv_none();
}

jv okv_jinja_json_parse(jarena *a, jfail *f, const char *text, size_t n, const char *what) {
    okv_error err;
    okv_json *const t = okv_json_parse(text, n, &err);
    if (!t) okv_jinja_fail(f, 0, "%s: %s", what, err.message);
    /* The arena's budget may run out while the values are built: that jump
     * comes here first, to free the tree.  (Heap, not a local: a local
     * changed between setjmp and longjmp would be indeterminate.) */
    jfail *const here = malloc(sizeof *here);
    if (!here) {
        okv_json_free(t);
        okv_jinja_fail(f, 0, "%s: out of memory", what);
    }
    here->err = f->err;
    if (setjmp(here->env)) {
        f->err = here->err;
        free(here);
        okv_json_free(t);
        longjmp(f->env, 1);
    }
    jv v = from_json(a, here, t);
    free(here);
    okv_json_free(t);
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
