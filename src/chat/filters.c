/* jinja2's filters (value|name(args)) and tests (value is name(args))
 * that chat templates use, with jinja2's and Python's semantics; tojson is
 * transformers' (json.dumps with ensure_ascii=False). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chat/jinja.h"

#define ARG(pos, name, def) okv_jarg(args, n_args, pos, kwn, kwv, n_kw, name, def)

static jv str_of(jctx *c, jv v) { return v.kind == JV_UNDEF ? okv_jv_cstr("") : okv_jv_to_str(c->a, c->f, v); }

/* item.a.b (dotted, numeric parts index lists) as jinja2's attribute
 * getters for map, selectattr, sort and join read it. */
static jv attr_path(jctx *c, int line, jv v, jv path) {
    if (path.kind == JV_INT) {
        jv key = path;
        if (v.kind == JV_LIST) {
            int64_t i = key.u.i < 0 ? key.u.i + (int64_t)v.u.l->n : key.u.i;
            return i >= 0 && i < (int64_t)v.u.l->n ? v.u.l->v[i] : okv_jv_undef();
        }
        if (v.kind == JV_DICT) {
            jv *x = okv_jv_dict_find(v, key);
            return x ? *x : okv_jv_undef();
        }
        return okv_jv_undef();
    }
    if (path.kind != JV_STR) okv_jinja_fail(c->f, line, "an attribute name must be a string");
    const char *p = path.u.s.p, *end = p + path.u.s.n;
    while (p <= end) {
        const char *dot = memchr(p, '.', (size_t)(end - p));
        if (!dot) dot = end;
        size_t n = (size_t)(dot - p);
        bool digits = n > 0;
        for (size_t i = 0; i < n; i++)
            if (p[i] < '0' || p[i] > '9') digits = false;
        if (v.kind == JV_DICT) {
            jv *x = okv_jv_dict_get(v, p, n);
            v = x ? *x : okv_jv_undef();
        } else if (v.kind == JV_LIST && digits) {
            size_t i = (size_t)strtoull(p, NULL, 10);
            v = i < v.u.l->n ? v.u.l->v[i] : okv_jv_undef();
        } else
            v = okv_jv_undef();
        p = dot + 1;
    }
    return v;
}

static jv lower_if(jctx *c, jv v, bool case_sensitive) {
    if (case_sensitive || v.kind != JV_STR) return v;
    char *o = okv_jstrdup(c->a, c->f, v.u.s.p, v.u.s.n);
    for (size_t i = 0; i < v.u.s.n; i++)
        if (o[i] >= 'A' && o[i] <= 'Z') o[i] = (char)(o[i] + 32);
    return okv_jv_str(o, v.u.s.n);
}

typedef struct sort_ctx {
    jctx *c;
    int line;
    jv *keys;
} sort_ctx;

static int by_key(void *ctx, size_t x, size_t y) {
    sort_ctx *s = ctx;
    return okv_jv_compare(s->c->f, s->line, s->keys[x], s->keys[y]);
}

/* items sorted by keys (stable); reverse as Python's sort(reverse=True),
 * which keeps equal items in order. */
static jv sorted(jctx *c, int line, jv items, jv *keys, bool reverse) {
    size_t n = items.u.l->n;
    size_t *idx = okv_jalloc(c->a, c->f, (n + 1) * sizeof *idx);
    for (size_t i = 0; i < n; i++) idx[i] = i;
    sort_ctx s = {c, line, keys};
    if (reverse) {
        /* reverse, sort stably, reverse: Python's reverse sort */
        for (size_t i = 0; i < n / 2; i++) {
            size_t t = idx[i];
            idx[i] = idx[n - 1 - i];
            idx[n - 1 - i] = t;
        }
        okv_jsort(c->a, c->f, idx, n, by_key, &s);
        for (size_t i = 0; i < n / 2; i++) {
            size_t t = idx[i];
            idx[i] = idx[n - 1 - i];
            idx[n - 1 - i] = t;
        }
    } else
        okv_jsort(c->a, c->f, idx, n, by_key, &s);
    jv out = okv_jv_list_new(c->a, c->f, n);
    for (size_t i = 0; i < n; i++) okv_jv_list_push(c->a, c->f, out, items.u.l->v[idx[i]]);
    return out;
}

jv okv_jv_html_escape(jarena *a, jfail *f, jv s) {
    jbuf b = {0};
    okv_jbuf_put(a, f, &b, "", 0);
    for (size_t i = 0; i < s.u.s.n; i++) {
        char ch = s.u.s.p[i];
        switch (ch) {
        case '&': okv_jbuf_puts(a, f, &b, "&amp;"); break;
        case '<': okv_jbuf_puts(a, f, &b, "&lt;"); break;
        case '>': okv_jbuf_puts(a, f, &b, "&gt;"); break;
        case '"': okv_jbuf_puts(a, f, &b, "&#34;"); break;
        case '\'': okv_jbuf_puts(a, f, &b, "&#39;"); break;
        default: okv_jbuf_putc(a, f, &b, ch);
        }
    }
    jv out = okv_jv_str(b.p, b.n);
    out.flags |= JV_F_SAFE;
    return out;
}

static jv tojson(jctx *c, int line, jv v, jv *args, int n_args, const char **kwn, jv *kwv, int n_kw) {
    jv indent = ARG(0, "indent", okv_jv_none()), seps = ARG(-1, "separators", okv_jv_none()), sort = ARG(-1, "sort_keys", okv_jv_bool(false));
    json_style st = {NULL, ", ", ": ", okv_jv_truthy(sort)};
    char spaces[64];
    if (indent.kind == JV_INT) {
        if (indent.u.i < 0 || indent.u.i > 32) okv_jinja_fail(c->f, line, "tojson: indent %lld is out of range", (long long)indent.u.i);
        memset(spaces, ' ', (size_t)indent.u.i);
        spaces[indent.u.i] = '\0';
        st.indent = spaces;
    } else if (indent.kind == JV_STR)
        st.indent = okv_jstrdup(c->a, c->f, indent.u.s.p, indent.u.s.n);
    else if (indent.kind != JV_NONE)
        okv_jinja_fail(c->f, line, "tojson: indent must be an integer or a string");
    if (st.indent) st.item_sep = ",";
    if (seps.kind == JV_LIST) {
        if (seps.u.l->n != 2 || seps.u.l->v[0].kind != JV_STR || seps.u.l->v[1].kind != JV_STR)
            okv_jinja_fail(c->f, line, "tojson: separators must be two strings");
        st.item_sep = okv_jstrdup(c->a, c->f, seps.u.l->v[0].u.s.p, seps.u.l->v[0].u.s.n);
        st.key_sep = okv_jstrdup(c->a, c->f, seps.u.l->v[1].u.s.p, seps.u.l->v[1].u.s.n);
    }
    jbuf b = {0};
    okv_jinja_json_dump(c->a, c->f, &b, v, &st, line);
    return okv_jv_str(b.p, b.n);
}

static jv indent(jctx *c, jv s, jv width, bool first, bool blank) {
    jv ind;
    if (width.kind == JV_STR) ind = width;
    else {
        int64_t w = width.kind == JV_INT ? width.u.i : 4;
        if (w < 0) w = 0;
        if (w > 1024) w = 1024;
        char *sp = okv_jalloc(c->a, c->f, (size_t)w + 1);
        memset(sp, ' ', (size_t)w);
        ind = okv_jv_str(sp, (size_t)w);
    }
    jbuf t = {0};
    okv_jbuf_put(c->a, c->f, &t, s.u.s.p, s.u.s.n);
    okv_jbuf_putc(c->a, c->f, &t, '\n');
    jv lines = okv_jinja_call_method(c, okv_jinja_method(c, okv_jv_str(t.p, t.n), "splitlines").u.fn, 0, NULL, 0, NULL, NULL, 0);
    jbuf b = {0};
    okv_jbuf_put(c->a, c->f, &b, "", 0);
    if (first) okv_jbuf_put(c->a, c->f, &b, ind.u.s.p, ind.u.s.n);
    for (size_t i = 0; i < lines.u.l->n; i++) {
        jv ln = lines.u.l->v[i];
        if (i) {
            okv_jbuf_putc(c->a, c->f, &b, '\n');
            if (blank || ln.u.s.n) okv_jbuf_put(c->a, c->f, &b, ind.u.s.p, ind.u.s.n);
        }
        okv_jbuf_put(c->a, c->f, &b, ln.u.s.p, ln.u.s.n);
    }
    return okv_jv_str(b.p, b.n);
}

/* printf-style format: %s, %d, %i, %r, %f and %%. */
jv okv_jinja_printf(jctx *c, int line, jv fmt, jv *args, int n_args) {
    jbuf b = {0};
    okv_jbuf_put(c->a, c->f, &b, "", 0);
    int k = 0;
    for (size_t i = 0; i < fmt.u.s.n; i++) {
        char ch = fmt.u.s.p[i];
        if (ch != '%') {
            okv_jbuf_putc(c->a, c->f, &b, ch);
            continue;
        }
        if (++i >= fmt.u.s.n) okv_jinja_fail(c->f, line, "format: incomplete format");
        ch = fmt.u.s.p[i];
        if (ch == '%') {
            okv_jbuf_putc(c->a, c->f, &b, '%');
            continue;
        }
        if (k >= n_args) okv_jinja_fail(c->f, line, "format: not enough arguments for format string");
        jv v = args[k++];
        if (ch == 's') okv_jv_str_to(c->a, c->f, &b, v);
        else if (ch == 'r') okv_jv_repr_to(c->a, c->f, &b, v);
        else if ((ch == 'd' || ch == 'i') && okv_jv_is_number(v)) {
            if (v.kind == JV_FLOAT && !(v.u.f > -9223372036854775808.0 && v.u.f < 9223372036854775808.0))
                okv_jinja_fail(c->f, line, "format: %%%c of %g is not a 64-bit integer", ch, v.u.f);
            okv_jbuf_printf(c->a, c->f, &b, "%lld", (long long)(v.kind == JV_FLOAT ? (int64_t)v.u.f : v.kind == JV_BOOL ? v.u.b : v.u.i));
        }
        else if (ch == 'f' && okv_jv_is_number(v)) okv_jbuf_printf(c->a, c->f, &b, "%f", okv_jv_num(v));
        else okv_jinja_fail(c->f, line, "format: unsupported format character '%c' for %s", ch, okv_jv_type_name(v));
    }
    if (k < n_args) okv_jinja_fail(c->f, line, "format: not all arguments converted during string formatting");
    return okv_jv_str(b.p, b.n);
}

static jv to_int(jctx *c, jv v, jv def) {
    switch (v.kind) {
    case JV_INT: return v;
    case JV_BOOL: return okv_jv_int(v.u.b);
    case JV_FLOAT: return isfinite(v.u.f) && fabs(v.u.f) < 9.2e18 ? okv_jv_int((int64_t)v.u.f) : def;
    case JV_STR: {
        char *s = okv_jstrdup(c->a, c->f, v.u.s.p, v.u.s.n), *end;
        long long i = strtoll(s, &end, 10);
        while (*end == ' ' || *end == '\t' || *end == '\n') end++;
        if (end != s && !*end) return okv_jv_int(i);
        double d = strtod(s, &end);
        while (*end == ' ' || *end == '\t' || *end == '\n') end++;
        if (end != s && !*end && isfinite(d) && fabs(d) < 9.2e18) return okv_jv_int((int64_t)d);
        return def;
    }
    default: return def;
    }
}

static bool select_one(jctx *c, int line, jv item, jv *args, int n_args) {
    if (n_args == 0) return okv_jv_truthy(item);
    if (args[0].kind != JV_STR) okv_jinja_fail(c->f, line, "a test name must be a string");
    return okv_jinja_test(c, args[0].u.s.p, line, item, args + 1, n_args - 1);
}

jv okv_jinja_filter(jctx *c, jscope *s, const char *name, int line, jv v, jv *args, int n_args, const char **kwn, jv *kwv,
                int n_kw) {
    (void)s;
#define IS(x) (strcmp(name, x) == 0)
    if (IS("safe")) {
        v = str_of(c, v);
        v.flags |= JV_F_SAFE;
        return v;
    }
    if (IS("default") || IS("d")) {
        jv def = ARG(0, "default_value", okv_jv_cstr(""));
        bool boolean = okv_jv_truthy(ARG(1, "boolean", okv_jv_bool(false)));
        return v.kind == JV_UNDEF || (boolean && !okv_jv_truthy(v)) ? def : v;
    }
    if (IS("tojson")) return tojson(c, line, v, args, n_args, kwn, kwv, n_kw);
    if (IS("string")) return str_of(c, v);
    if (IS("length") || IS("count")) {
        switch (v.kind) {
        case JV_STR: return okv_jv_int((int64_t)okv_jinja_utf8_len(v.u.s.p, v.u.s.n));
        case JV_LIST: return okv_jv_int((int64_t)v.u.l->n);
        case JV_DICT: return okv_jv_int((int64_t)v.u.d->n);
        case JV_UNDEF: return okv_jv_int(0);
        default: okv_jinja_fail(c->f, line, "object of type '%s' has no len()", okv_jv_type_name(v));
        }
    }
    if (IS("trim")) {
        jv chars = ARG(0, "chars", okv_jv_none());
        jv m = okv_jinja_method(c, str_of(c, v), "strip");
        return okv_jinja_call_method(c, m.u.fn, line, &chars, 1, NULL, NULL, 0);
    }
    if (IS("title")) {
        /* jinja2's title: words start after -, white space, (, {, [ or <
         * (not after any non-letter, as Python's str.title); each word is
         * capitalized */
        jv sv = str_of(c, v);
        jbuf b = {0};
        okv_jbuf_put(c->a, c->f, &b, "", 0);
        size_t i = 0;
        while (i < sv.u.s.n) {
            size_t j = i + 1;
            while (j < sv.u.s.n && !strchr("- \t\n\r\v\f({[<", sv.u.s.p[j - 1])) j++;
            jv m = okv_jinja_method(c, okv_jv_str(sv.u.s.p + i, j - i), "capitalize");
            jv w = okv_jinja_call_method(c, m.u.fn, line, NULL, 0, NULL, NULL, 0);
            okv_jbuf_put(c->a, c->f, &b, w.u.s.p, w.u.s.n);
            i = j;
        }
        return okv_jv_str(b.p, b.n);
    }
    if (IS("upper") || IS("lower") || IS("capitalize")) {
        jv m = okv_jinja_method(c, str_of(c, v), name);
        return okv_jinja_call_method(c, m.u.fn, line, NULL, 0, NULL, NULL, 0);
    }
    if (IS("replace")) {
        jv sv = str_of(c, v);
        jv m = okv_jinja_method(c, sv, "replace");
        jv a[3] = {ARG(0, "old", okv_jv_none()), ARG(1, "new", okv_jv_none()), ARG(2, "count", okv_jv_int(-1))};
        if (a[2].kind == JV_NONE) a[2] = okv_jv_int(-1);
        return okv_jinja_call_method(c, m.u.fn, line, a, 3, NULL, NULL, 0);
    }
    if (IS("escape") || IS("e")) {
        if (v.kind == JV_STR && (v.flags & JV_F_SAFE)) return v;
        return okv_jv_html_escape(c->a, c->f, str_of(c, v));
    }
    if (IS("indent")) {
        /* jinja2 appends "\n" to the value: only text takes it */
        if (v.kind != JV_STR) okv_jinja_fail(c->f, line, "indent: unsupported operand type(s) for +=: '%s' and 'str'", okv_jv_type_name(v));
        return indent(c, v, ARG(0, "width", okv_jv_int(4)), okv_jv_truthy(ARG(1, "first", okv_jv_bool(false))),
                      okv_jv_truthy(ARG(2, "blank", okv_jv_bool(false))));
    }
    if (IS("format")) {
        if (v.kind != JV_STR) okv_jinja_fail(c->f, line, "format: the format must be a string");
        return okv_jinja_printf(c, line, v, args, n_args);
    }
    if (IS("int")) return to_int(c, v, ARG(0, "default", okv_jv_int(0)));
    if (IS("float")) {
        if (okv_jv_is_number(v)) return okv_jv_float(okv_jv_num(v));
        if (v.kind == JV_STR) {
            char *sv = okv_jstrdup(c->a, c->f, v.u.s.p, v.u.s.n), *end;
            double d = strtod(sv, &end);
            if (end != sv && !*end) return okv_jv_float(d);
        }
        return ARG(0, "default", okv_jv_float(0));
    }
    if (IS("abs")) {
        if (v.kind == JV_FLOAT) return okv_jv_float(fabs(v.u.f));
        if (v.kind == JV_INT && v.u.i != INT64_MIN) return okv_jv_int(v.u.i < 0 ? -v.u.i : v.u.i);
        if (v.kind == JV_BOOL) return okv_jv_int(v.u.b);
        okv_jinja_fail(c->f, line, "bad operand type for abs(): '%s'", okv_jv_type_name(v));
    }
    if (IS("round")) {
        jv prec = ARG(0, "precision", okv_jv_int(0)), method = ARG(1, "method", okv_jv_cstr("common"));
        if (!okv_jv_is_number(v)) okv_jinja_fail(c->f, line, "round: not a number");
        if (v.kind != JV_FLOAT && !strcmp(method.kind == JV_STR ? method.u.s.p : "common", "common") && prec.kind == JV_INT &&
            prec.u.i >= 0)
            return v.kind == JV_BOOL ? okv_jv_int(v.u.b) : v; /* Python's round(int, n >= 0) is the int */
        double m = pow(10, (double)(prec.kind == JV_INT ? prec.u.i : 0)), x = okv_jv_num(v) * m;
        const char *how = method.kind == JV_STR ? method.u.s.p : "common";
        /* Python's round() breaks ties to even, as nearbyint does */
        x = !strcmp(how, "floor") ? floor(x) : !strcmp(how, "ceil") ? ceil(x) : nearbyint(x);
        return okv_jv_float(x / m);
    }
    if (IS("attr")) {
        jv name_v = ARG(0, "name", okv_jv_none());
        if (v.kind == JV_DICT && name_v.kind == JV_STR) {
            jv *x = okv_jv_dict_get(v, name_v.u.s.p, name_v.u.s.n);
            return x ? *x : okv_jv_undef();
        }
        return okv_jv_undef();
    }
    if (IS("items")) {
        if (v.kind == JV_UNDEF) return okv_jv_list_new(c->a, c->f, 0);
        if (v.kind != JV_DICT) okv_jinja_fail(c->f, line, "items: can only get item pairs from a mapping, not %s", okv_jv_type_name(v));
        return okv_jinja_call_method(c, okv_jinja_method(c, v, "items").u.fn, line, NULL, 0, NULL, NULL, 0);
    }
    if (IS("dictsort")) {
        if (v.kind != JV_DICT) okv_jinja_fail(c->f, line, "dictsort: not a mapping");
        bool cs = okv_jv_truthy(ARG(0, "case_sensitive", okv_jv_bool(false)));
        jv by = ARG(1, "by", okv_jv_cstr("key"));
        bool rev = okv_jv_truthy(ARG(2, "reverse", okv_jv_bool(false)));
        jv items = okv_jinja_call_method(c, okv_jinja_method(c, v, "items").u.fn, line, NULL, 0, NULL, NULL, 0);
        jv *keys = okv_jalloc(c->a, c->f, (items.u.l->n + 1) * sizeof *keys);
        bool by_value = by.kind == JV_STR && by.u.s.n == 5 && !memcmp(by.u.s.p, "value", 5);
        for (size_t i = 0; i < items.u.l->n; i++) keys[i] = lower_if(c, items.u.l->v[i].u.l->v[by_value ? 1 : 0], cs);
        return sorted(c, line, items, keys, rev);
    }
    /* the rest take a sequence */
    jv seq = v;
    if (IS("join")) {
        jv d = ARG(0, "d", okv_jv_cstr("")), attribute = ARG(1, "attribute", okv_jv_none());
        jv items = okv_jinja_iterable(c, line, seq);
        jbuf b = {0};
        okv_jbuf_put(c->a, c->f, &b, "", 0);
        jv sep = str_of(c, d);
        for (size_t i = 0; i < items.u.l->n; i++) {
            if (i) okv_jbuf_put(c->a, c->f, &b, sep.u.s.p, sep.u.s.n);
            jv it = attribute.kind != JV_NONE ? attr_path(c, line, items.u.l->v[i], attribute) : items.u.l->v[i];
            okv_jv_str_to(c->a, c->f, &b, it);
        }
        return okv_jv_str(b.p, b.n);
    }
    if (IS("first") || IS("last")) {
        jv items = okv_jinja_iterable(c, line, seq);
        if (!items.u.l->n) return okv_jv_undef();
        return items.u.l->v[IS("first") ? 0 : items.u.l->n - 1];
    }
    if (IS("list")) {
        jv items = okv_jinja_iterable(c, line, seq), out = okv_jv_list_new(c->a, c->f, items.u.l->n);
        for (size_t i = 0; i < items.u.l->n; i++) okv_jv_list_push(c->a, c->f, out, items.u.l->v[i]);
        return out;
    }
    if (IS("reverse")) {
        if (seq.kind == JV_STR) {
            jv chars = okv_jinja_iterable(c, line, seq);
            jbuf b = {0};
            okv_jbuf_put(c->a, c->f, &b, "", 0);
            for (size_t i = chars.u.l->n; i-- > 0;) okv_jbuf_put(c->a, c->f, &b, chars.u.l->v[i].u.s.p, chars.u.l->v[i].u.s.n);
            return okv_jv_str(b.p, b.n);
        }
        jv items = okv_jinja_iterable(c, line, seq), out = okv_jv_list_new(c->a, c->f, items.u.l->n);
        for (size_t i = items.u.l->n; i-- > 0;) okv_jv_list_push(c->a, c->f, out, items.u.l->v[i]);
        return out;
    }
    /* map, select and their kin give nothing for a falsy sequence (none
     * included), as jinja2's "if seq:" guard does */
    if ((IS("map") || IS("select") || IS("reject") || IS("selectattr") || IS("rejectattr")) && !okv_jv_truthy(seq))
        return okv_jv_list_new(c->a, c->f, 0);
    if (IS("map")) {
        jv items = okv_jinja_iterable(c, line, seq), out = okv_jv_list_new(c->a, c->f, items.u.l->n);
        jv attribute = ARG(-1, "attribute", okv_jv_undef());
        for (size_t i = 0; i < items.u.l->n; i++) {
            jv it = items.u.l->v[i];
            if (attribute.kind != JV_UNDEF) {
                it = attr_path(c, line, it, attribute);
                if (it.kind == JV_UNDEF) it = ARG(-1, "default", okv_jv_undef());
            } else {
                if (n_args < 1 || args[0].kind != JV_STR) okv_jinja_fail(c->f, line, "map: give a filter name or attribute=");
                it = okv_jinja_filter(c, s, args[0].u.s.p, line, it, args + 1, n_args - 1, kwn, kwv, n_kw);
            }
            okv_jv_list_push(c->a, c->f, out, it);
        }
        return out;
    }
    if (IS("select") || IS("reject") || IS("selectattr") || IS("rejectattr")) {
        bool want = IS("select") || IS("selectattr"), by_attr = name[6] == 'a';
        jv items = okv_jinja_iterable(c, line, seq), out = okv_jv_list_new(c->a, c->f, 0);
        if (by_attr && n_args < 1) okv_jinja_fail(c->f, line, "%s needs an attribute name", name);
        for (size_t i = 0; i < items.u.l->n; i++) {
            jv it = items.u.l->v[i];
            jv x = by_attr ? attr_path(c, line, it, args[0]) : it;
            /* (no pointer arithmetic on a NULL args) */
            if (select_one(c, line, x, n_args > (int)by_attr ? args + by_attr : NULL, n_args - (int)by_attr) == want)
                okv_jv_list_push(c->a, c->f, out, it);
        }
        return out;
    }
    if (IS("sort") || IS("unique") || IS("min") || IS("max")) {
        bool is_sort = IS("sort");
        jv rev = is_sort ? ARG(0, "reverse", okv_jv_bool(false)) : okv_jv_bool(false);
        bool cs = okv_jv_truthy(ARG(is_sort ? 1 : 0, "case_sensitive", okv_jv_bool(false)));
        jv attribute = ARG(is_sort ? 2 : 1, "attribute", okv_jv_none());
        jv items = okv_jinja_iterable(c, line, seq);
        jv *keys = okv_jalloc(c->a, c->f, (items.u.l->n + 1) * sizeof *keys);
        for (size_t i = 0; i < items.u.l->n; i++)
            keys[i] = lower_if(c, attribute.kind != JV_NONE ? attr_path(c, line, items.u.l->v[i], attribute) : items.u.l->v[i], cs);
        if (IS("unique")) {
            jv out = okv_jv_list_new(c->a, c->f, 0), seen = okv_jv_list_new(c->a, c->f, 0);
            for (size_t i = 0; i < items.u.l->n; i++) {
                bool dup = false;
                okv_jinja_tick_n(c, line, 1 + seen.u.l->n / 64); /* quadratic: within the deadline */
                for (size_t k = 0; k < seen.u.l->n && !dup; k++) dup = okv_jv_equal(seen.u.l->v[k], keys[i]);
                if (dup) continue;
                okv_jv_list_push(c->a, c->f, seen, keys[i]);
                okv_jv_list_push(c->a, c->f, out, items.u.l->v[i]);
            }
            return out;
        }
        jv out = sorted(c, line, items, keys, okv_jv_truthy(rev));
        if (is_sort) return out;
        if (!out.u.l->n) return okv_jv_undef();
        return out.u.l->v[IS("min") ? 0 : out.u.l->n - 1];
    }
    if (IS("sum")) {
        jv attribute = ARG(0, "attribute", okv_jv_none()), acc = ARG(1, "start", okv_jv_int(0));
        jv items = okv_jinja_iterable(c, line, seq);
        for (size_t i = 0; i < items.u.l->n; i++) {
            jv it = attribute.kind != JV_NONE ? attr_path(c, line, items.u.l->v[i], attribute) : items.u.l->v[i];
            if (!okv_jv_is_number(it) || !okv_jv_is_number(acc)) okv_jinja_fail(c->f, line, "sum: not a number");
            if (it.kind == JV_FLOAT || acc.kind == JV_FLOAT) acc = okv_jv_float(okv_jv_num(acc) + okv_jv_num(it));
            else {
                int64_t r;
                if (__builtin_add_overflow(acc.kind == JV_BOOL ? acc.u.b : acc.u.i, it.kind == JV_BOOL ? it.u.b : it.u.i, &r))
                    okv_jinja_fail(c->f, line, "sum: beyond 64 bits");
                acc = okv_jv_int(r);
            }
        }
        return acc;
    }
    if (IS("wordcount")) {
        jv sv = str_of(c, v);
        int64_t n = 0;
        bool in = false;
        for (size_t i = 0; i < sv.u.s.n; i++) {
            unsigned char ch = (unsigned char)sv.u.s.p[i];
            bool w = (ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || ch == '_' || ch >= 0x80;
            if (w && !in) n++;
            in = w;
        }
        return okv_jv_int(n);
    }
#undef IS
    okv_jinja_fail(c->f, line, "no filter named '%s'", name);
}

bool okv_jinja_test(jctx *c, const char *name, int line, jv v, jv *args, int n_args) {
#define IS(x) (strcmp(name, x) == 0)
    jv a0 = n_args ? args[0] : okv_jv_undef();
    if (IS("defined")) return v.kind != JV_UNDEF;
    if (IS("undefined")) return v.kind == JV_UNDEF;
    if (IS("none")) return v.kind == JV_NONE;
    if (IS("boolean")) return v.kind == JV_BOOL;
    if (IS("false")) return v.kind == JV_BOOL && !v.u.b;
    if (IS("true")) return v.kind == JV_BOOL && v.u.b;
    if (IS("integer")) return v.kind == JV_INT;
    if (IS("float")) return v.kind == JV_FLOAT;
    if (IS("number")) return okv_jv_is_number(v);
    if (IS("string")) return v.kind == JV_STR;
    if (IS("mapping")) return v.kind == JV_DICT && !(v.flags & JV_F_LOOP);
    if (IS("iterable")) return v.kind == JV_STR || v.kind == JV_LIST || v.kind == JV_UNDEF || (v.kind == JV_DICT && !(v.flags & (JV_F_NAMESPACE | JV_F_LOOP)));
    if (IS("sequence")) return v.kind == JV_STR || v.kind == JV_LIST || v.kind == JV_UNDEF || (v.kind == JV_DICT && !(v.flags & (JV_F_NAMESPACE | JV_F_LOOP)));
    if (IS("callable")) return v.kind == JV_FUNC;
    if (IS("escaped")) return false;
    if (IS("sameas")) {
        if (v.kind != a0.kind) return false;
        if (v.kind == JV_LIST) return v.u.l == a0.u.l;
        if (v.kind == JV_DICT) return v.u.d == a0.u.d;
        if (v.kind == JV_STR) return v.u.s.p == a0.u.s.p && v.u.s.n == a0.u.s.n;
        return okv_jv_equal(v, a0);
    }
    if ((IS("odd") || IS("even")) && v.kind == JV_FLOAT) { /* value % 2 as Python computes it for floats */
        double m = fmod(v.u.f, 2.0);
        if (m < 0) m += 2.0;
        return IS("odd") ? m == 1.0 : m == 0.0;
    }
    if (IS("odd") || IS("even") || IS("divisibleby")) {
        if (v.kind != JV_INT && v.kind != JV_BOOL) okv_jinja_fail(c->f, line, "%s: not an integer", name);
        int64_t x = v.kind == JV_BOOL ? v.u.b : v.u.i;
        if (IS("odd")) return x % 2 != 0;
        if (IS("even")) return x % 2 == 0;
        if (a0.kind != JV_INT || a0.u.i == 0) okv_jinja_fail(c->f, line, "divisibleby needs a non-zero integer");
        return a0.u.i == -1 || x % a0.u.i == 0; /* INT64_MIN % -1 traps */
    }
    if (IS("eq") || IS("equalto") || IS("==")) return okv_jv_equal(v, a0);
    if (IS("ne") || IS("!=")) return !okv_jv_equal(v, a0);
    if (IS("lt") || IS("lessthan") || IS("<")) return okv_jv_compare(c->f, line, v, a0) < 0;
    if (IS("le") || IS("<=")) return okv_jv_compare(c->f, line, v, a0) <= 0;
    if (IS("gt") || IS("greaterthan") || IS(">")) return okv_jv_compare(c->f, line, v, a0) > 0;
    if (IS("ge") || IS(">=")) return okv_jv_compare(c->f, line, v, a0) >= 0;
    if (IS("in")) {
        if (a0.kind == JV_STR && v.kind == JV_STR) return a0.u.s.n >= v.u.s.n && (v.u.s.n == 0 || memmem(a0.u.s.p, a0.u.s.n, v.u.s.p, v.u.s.n));
        if (a0.kind == JV_LIST) {
            for (size_t i = 0; i < a0.u.l->n; i++)
                if (okv_jv_equal(a0.u.l->v[i], v)) return true;
            return false;
        }
        if (a0.kind == JV_DICT) return okv_jv_dict_find(a0, v) != NULL;
        okv_jinja_fail(c->f, line, "in: cannot look into %s", okv_jv_type_name(a0));
    }
    if (IS("lower") || IS("upper")) {
        if (v.kind != JV_STR) return false;
        bool cased = false;
        for (size_t i = 0; i < v.u.s.n; i++) {
            char ch = v.u.s.p[i];
            if (IS("lower") && ch >= 'A' && ch <= 'Z') return false;
            if (IS("upper") && ch >= 'a' && ch <= 'z') return false;
            cased |= (ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z');
        }
        return cased;
    }
#undef IS
    okv_jinja_fail(c->f, line, "no test named '%s'", name);
}
