/* Evaluation of the tree: statements write to the current output buffer,
 * expressions give values.  Scoping is jinja2's: a for loop's body gets a
 * fresh scope each iteration (a set there does not outlive it, hence
 * namespace()), a macro call gets a scope over the one it was defined in,
 * and if blocks share their surroundings'.  Every loop iteration, macro
 * call and output byte counts against the limits in jctx. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "chat/jinja.h"

static void exec_body(jctx *c, jscope *s, jnode **body, int n);

/* ---- scopes ---- */

static jv *lookup(jscope *s, const char *name) {
    for (; s; s = s->parent)
        for (size_t i = 0; i < s->n; i++)
            if (strcmp(s->names[i], name) == 0) return &s->vals[i];
    return NULL;
}

void okv_jscope_set(jctx *c, jscope *s, const char *name, jv v) {
    for (size_t i = 0; i < s->n; i++)
        if (strcmp(s->names[i], name) == 0) {
            s->vals[i] = v;
            return;
        }
    if (s->n == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 8;
        const char **names = okv_jalloc(c->a, c->f, cap * sizeof *names);
        jv *vals = okv_jalloc(c->a, c->f, cap * sizeof *vals);
        if (s->n) {
            memcpy(names, s->names, s->n * sizeof *names);
            memcpy(vals, s->vals, s->n * sizeof *vals);
        }
        s->names = names;
        s->vals = vals;
        s->cap = cap;
    }
    s->names[s->n] = name;
    s->vals[s->n++] = v;
}

static jscope *scope_new(jctx *c, jscope *parent) {
    jscope *s = okv_jalloc(c->a, c->f, sizeof *s);
    s->parent = parent;
    return s;
}

/* ---- output ---- */

static void emit(jctx *c, int line, const char *p, size_t n) {
    if (n > c->lim.max_output - c->out_total || c->out_total > c->lim.max_output)
        okv_jinja_fail(c->f, line, "the template's output exceeds %zu bytes", c->lim.max_output);
    c->out_total += n;
    okv_jbuf_put(c->a, c->f, c->out, p, n);
}

static void emit_value(jctx *c, int line, jv v) {
    if (v.kind == JV_STR) {
        emit(c, line, v.u.s.p, v.u.s.n);
        return;
    }
    jbuf b = {0};
    okv_jv_str_to(c->a, c->f, &b, v);
    emit(c, line, b.p, b.n);
}

void okv_jinja_tick(jctx *c, int line) { okv_jinja_tick_n(c, line, 1); }

void okv_jinja_tick_n(jctx *c, int line, size_t n) {
    c->ticks += n;
    if (c->ticks < c->next_check) return;
    c->next_check = c->ticks + 256;
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    if ((double)ts.tv_sec + ts.tv_nsec * 1e-9 > c->deadline)
        okv_jinja_fail(c->f, line, "the template ran longer than %g seconds", c->max_seconds);
}

static void count_iteration(jctx *c, int line) {
    okv_jinja_tick(c, line);
    if (++c->iterations > c->lim.max_iterations)
        okv_jinja_fail(c->f, line, "the template runs more than %zu loop iterations", c->lim.max_iterations);
}

/* Runs body with its output captured, returning the text. */
static jv capture(jctx *c, jscope *s, jnode **body, int n) {
    jbuf *saved = c->out, buf = {0};
    okv_jbuf_put(c->a, c->f, &buf, "", 0);
    c->out = &buf;
    exec_body(c, s, body, n);
    c->out = saved;
    return okv_jv_str(buf.p, buf.n);
}

/* ---- calls ---- */

jv okv_jarg(jv *args, int n_args, int pos, const char **kwn, jv *kwv, int n_kw, const char *name, jv def) {
    for (int i = 0; i < n_kw; i++)
        if (name && strcmp(kwn[i], name) == 0) return kwv[i];
    if (pos >= 0 && pos < n_args) return args[pos];
    return def;
}

enum { B_RANGE, B_NAMESPACE, B_DICT, B_RAISE, B_STRFTIME, B_COUNT };
static const char *const builtin_names[B_COUNT] = {"range", "namespace", "dict", "raise_exception", "strftime_now"};

static jv call_macro(jctx *c, jfunc *fn, int line, jv *args, int n_args, const char **kwn, jv *kwv, int n_kw) {
    jnode *m = fn->macro;
    if (++c->depth > c->lim.max_depth)
        okv_jinja_fail(c->f, line, "macro calls nested more than %d deep", c->lim.max_depth);
    jscope *s = scope_new(c, fn->closure);
    jv varargs = okv_jv_list_new(c->a, c->f, 0), kwargs = okv_jv_dict_new(c->a, c->f, 0);
    varargs.flags |= JV_F_TUPLE;
    for (int i = 0; i < n_args; i++) {
        if (i < m->n_names) okv_jscope_set(c, s, m->kwnames[i], args[i]);
        else okv_jv_list_push(c->a, c->f, varargs, args[i]);
    }
    jv caller = okv_jv_undef();
    for (int k = 0; k < n_kw; k++) {
        int i;
        for (i = 0; i < m->n_names; i++)
            if (strcmp(m->kwnames[i], kwn[k]) == 0) break;
        if (i < m->n_names) {
            if (i < n_args) okv_jinja_fail(c->f, line, "macro '%s' got multiple values for argument '%s'", fn->name, kwn[k]);
            okv_jscope_set(c, s, m->kwnames[i], kwv[k]);
        } else if (strcmp(kwn[k], "caller") == 0)
            caller = kwv[k];
        else
            okv_jv_dict_set(c->a, c->f, kwargs, okv_jv_cstr(kwn[k]), kwv[k]);
    }
    /* Missing arguments take their defaults, evaluated now (they may use
     * earlier parameters), or stay undefined as in jinja2. */
    for (int i = n_args; i < m->n_names; i++) {
        bool given = false;
        for (int k = 0; k < n_kw; k++)
            if (strcmp(m->kwnames[i], kwn[k]) == 0) given = true;
        if (!given) okv_jscope_set(c, s, m->kwnames[i], m->kwvals[i] ? okv_jinja_eval(c, s, m->kwvals[i]) : okv_jv_undef());
    }
    okv_jscope_set(c, s, "varargs", varargs);
    okv_jscope_set(c, s, "kwargs", kwargs);
    if (caller.kind != JV_UNDEF) okv_jscope_set(c, s, "caller", caller);
    int brk = c->brk;
    c->brk = 0;
    jv out = capture(c, s, m->args, m->n_args);
    c->brk = brk;
    c->depth--;
    return out;
}

static jv call_builtin(jctx *c, int id, int line, jv *args, int n_args, const char **kwn, jv *kwv, int n_kw) {
    switch (id) {
    case B_RANGE: {
        int64_t v[3] = {0, 0, 1};
        if (n_args < 1 || n_args > 3 || n_kw) okv_jinja_fail(c->f, line, "range expects 1 to 3 integer arguments");
        for (int i = 0; i < n_args; i++) {
            if (args[i].kind != JV_INT && args[i].kind != JV_BOOL)
                okv_jinja_fail(c->f, line, "range: '%s' object cannot be interpreted as an integer", okv_jv_type_name(args[i]));
            v[n_args == 1 ? 1 : i] = args[i].kind == JV_BOOL ? args[i].u.b : args[i].u.i;
        }
        if (v[2] == 0) okv_jinja_fail(c->f, line, "range() arg 3 must not be zero");
        /* The count, computed without overflow. */
        double count = v[2] > 0 ? ceil(((double)v[1] - (double)v[0]) / (double)v[2]) : ceil(((double)v[0] - (double)v[1]) / (double)-v[2]);
        if (count < 0) count = 0;
        if (count > (double)c->lim.max_iterations)
            okv_jinja_fail(c->f, line, "range of %.0f items exceeds the %zu iterations a template may run", count, c->lim.max_iterations);
        jv l = okv_jv_list_new(c->a, c->f, (size_t)count);
        /* by steps that stop at the end or where the next would pass 64 bits
         * (the count is a double: near 2^63 it may be one too many) */
        int64_t x = v[0];
        for (int64_t i = 0; i < (int64_t)count && (v[2] > 0 ? x < v[1] : x > v[1]); i++) {
            okv_jv_list_push(c->a, c->f, l, okv_jv_int(x));
            if (__builtin_add_overflow(x, v[2], &x)) break;
        }
        return l;
    }
    case B_NAMESPACE:
    case B_DICT: {
        jv d = okv_jv_dict_new(c->a, c->f, 0);
        if (id == B_NAMESPACE) d.flags |= JV_F_NAMESPACE;
        for (int i = 0; i < n_args; i++) {
            if (args[i].kind != JV_DICT) okv_jinja_fail(c->f, line, "%s() takes a mapping, not %s", builtin_names[id], okv_jv_type_name(args[i]));
            for (size_t k = 0; k < args[i].u.d->n; k++) okv_jv_dict_set(c->a, c->f, d, args[i].u.d->k[k], args[i].u.d->v[k]);
        }
        for (int k = 0; k < n_kw; k++) okv_jv_dict_set(c->a, c->f, d, okv_jv_cstr(kwn[k]), kwv[k]);
        return d;
    }
    case B_RAISE: {
        jv msg = n_args ? okv_jv_to_str(c->a, c->f, args[0]) : okv_jv_cstr("");
        c->f->err.raised = true;
        okv_jinja_fail(c->f, line, "%.*s", (int)(msg.u.s.n < 500 ? msg.u.s.n : 500), msg.u.s.p);
    }
    case B_STRFTIME: {
        if (n_args != 1 || args[0].kind != JV_STR) okv_jinja_fail(c->f, line, "strftime_now takes one format string");
        char fmt[256], out[1024];
        if (args[0].u.s.n >= sizeof fmt) okv_jinja_fail(c->f, line, "strftime_now: format longer than %zu bytes", sizeof fmt - 1);
        memcpy(fmt, args[0].u.s.p, args[0].u.s.n);
        fmt[args[0].u.s.n] = '\0';
        size_t n = strftime(out, sizeof out, fmt, c->now);
        if (n == 0 && fmt[0]) okv_jinja_fail(c->f, line, "strftime_now: the formatted date is empty or too long");
        return okv_jv_str(okv_jstrdup(c->a, c->f, out, n), n);
    }
    }
    okv_jinja_fail(c->f, line, "unknown builtin");
}

jv okv_jinja_call_value(jctx *c, jv fn, int line, jv *args, int n_args, const char **kwn, jv *kwv, int n_kw) {
    okv_jinja_tick(c, line);
    if (fn.kind != JV_FUNC) {
        if (fn.kind == JV_UNDEF) okv_jinja_fail(c->f, line, "an undefined value is not callable");
        okv_jinja_fail(c->f, line, "'%s' object is not callable", okv_jv_type_name(fn));
    }
    switch (fn.u.fn->kind) {
    case JF_MACRO: return call_macro(c, fn.u.fn, line, args, n_args, kwn, kwv, n_kw);
    case JF_BUILTIN: return call_builtin(c, fn.u.fn->builtin, line, args, n_args, kwn, kwv, n_kw);
    default: return okv_jinja_call_method(c, fn.u.fn, line, args, n_args, kwn, kwv, n_kw);
    }
}

/* ---- expressions ---- */

static int64_t as_index(jv v) { return v.kind == JV_BOOL ? v.u.b : v.u.i; }

/* Python's slice.indices(): clamps start and stop for a length. */
static void slice_indices(jctx *c, int line, jv st, jv sp, jv sc, int64_t len, int64_t *start, int64_t *stop, int64_t *step) {
    *step = 1;
    if (sc.kind != JV_UNDEF && sc.kind != JV_NONE) {
        if (sc.kind != JV_INT && sc.kind != JV_BOOL) okv_jinja_fail(c->f, line, "slice indices must be integers or None");
        *step = as_index(sc);
        if (*step == 0) okv_jinja_fail(c->f, line, "slice step cannot be zero");
    }
    int64_t lo_def = *step < 0 ? len - 1 : 0, hi_def = *step < 0 ? -1 : len;
    jv in[2] = {st, sp};
    int64_t out[2] = {lo_def, hi_def};
    for (int k = 0; k < 2; k++) {
        if (in[k].kind == JV_UNDEF || in[k].kind == JV_NONE) continue;
        if (in[k].kind != JV_INT && in[k].kind != JV_BOOL) okv_jinja_fail(c->f, line, "slice indices must be integers or None");
        int64_t v = as_index(in[k]);
        if (v < 0) {
            v += len;
            if (v < 0) v = *step < 0 ? -1 : 0;
        } else if (v >= len)
            v = *step < 0 ? len - 1 : len;
        out[k] = v;
    }
    *start = out[0];
    *stop = out[1];
}

static jv do_slice(jctx *c, int line, jv obj, jv st, jv sp, jv sc) {
    int64_t start, stop, step;
    if (obj.kind == JV_LIST) {
        slice_indices(c, line, st, sp, sc, (int64_t)obj.u.l->n, &start, &stop, &step);
        jv out = okv_jv_list_new(c->a, c->f, 0);
        out.flags = obj.flags & JV_F_TUPLE;
        /* a step past 64 bits ends the slice: the next index is out of it */
        for (int64_t i = start; step > 0 ? i < stop : i > stop;) {
            okv_jv_list_push(c->a, c->f, out, obj.u.l->v[i]);
            if (__builtin_add_overflow(i, step, &i)) break;
        }
        return out;
    }
    if (obj.kind == JV_STR) {
        size_t n = okv_jinja_utf8_len(obj.u.s.p, obj.u.s.n);
        slice_indices(c, line, st, sp, sc, (int64_t)n, &start, &stop, &step);
        jbuf b = {0};
        okv_jbuf_put(c->a, c->f, &b, "", 0);
        if (step == 1) {
            if (start < stop) {
                size_t from = okv_jinja_utf8_offset(obj.u.s.p, obj.u.s.n, (size_t)start), to = okv_jinja_utf8_offset(obj.u.s.p, obj.u.s.n, (size_t)stop);
                okv_jbuf_put(c->a, c->f, &b, obj.u.s.p + from, to - from);
            }
        } else {
            /* offsets of every code point, then pick */
            size_t *off = okv_jalloc(c->a, c->f, (n + 1) * sizeof *off);
            size_t k = 0;
            for (size_t i = 0; i < obj.u.s.n; i++)
                if (((unsigned char)obj.u.s.p[i] & 0xC0) != 0x80) off[k++] = i;
            off[n] = obj.u.s.n;
            for (int64_t i = start; step > 0 ? i < stop : i > stop;) {
                okv_jbuf_put(c->a, c->f, &b, obj.u.s.p + off[i], off[i + 1] - off[i]);
                if (__builtin_add_overflow(i, step, &i)) break;
            }
        }
        return okv_jv_str(b.p, b.n);
    }
    /* jinja2 compiles a slice to Python's own subscript: anything else fails */
    if (obj.kind == JV_UNDEF) okv_jinja_fail(c->f, line, "an undefined value cannot be sliced");
    okv_jinja_fail(c->f, line, "'%s' object is not subscriptable", okv_jv_type_name(obj));
}

static jv get_attr(jctx *c, int line, jv obj, const char *name, size_t n) {
    if (obj.kind == JV_UNDEF) okv_jinja_fail(c->f, line, "undefined value has no attribute '%.*s'", (int)n, name);
    if (obj.kind == JV_DICT) {
        if (!(obj.flags & (JV_F_NAMESPACE | JV_F_LOOP))) {
            jv m = okv_jinja_method(c, obj, name);
            if (m.kind != JV_UNDEF) return m;
        }
        jv *v = okv_jv_dict_get(obj, name, n);
        return v ? *v : okv_jv_undef();
    }
    return okv_jinja_method(c, obj, name);
}

static jv get_item(jctx *c, int line, jv obj, jv key) {
    switch (obj.kind) {
    case JV_UNDEF: okv_jinja_fail(c->f, line, "an undefined value has no items");
    case JV_DICT: {
        jv *v = okv_jv_dict_find(obj, key);
        if (v) return *v;
        break;
    }
    case JV_LIST:
        if (key.kind == JV_INT || key.kind == JV_BOOL) {
            int64_t i = as_index(key), n = (int64_t)obj.u.l->n;
            if (i < 0) i += n;
            return i >= 0 && i < n ? obj.u.l->v[i] : okv_jv_undef();
        }
        break;
    case JV_STR:
        if (key.kind == JV_INT || key.kind == JV_BOOL) {
            int64_t i = as_index(key), n = (int64_t)okv_jinja_utf8_len(obj.u.s.p, obj.u.s.n);
            if (i < 0) i += n;
            if (i < 0 || i >= n) return okv_jv_undef();
            size_t from = okv_jinja_utf8_offset(obj.u.s.p, obj.u.s.n, (size_t)i), to = okv_jinja_utf8_offset(obj.u.s.p, obj.u.s.n, (size_t)i + 1);
            return okv_jv_str(obj.u.s.p + from, to - from);
        }
        break;
    default: break;
    }
    /* jinja2 falls back to the attribute of that name */
    if (key.kind == JV_STR && obj.kind != JV_DICT) return okv_jinja_method(c, obj, key.u.s.p);
    if (key.kind == JV_STR && !(obj.flags & (JV_F_NAMESPACE | JV_F_LOOP))) return okv_jinja_method(c, obj, key.u.s.p);
    return okv_jv_undef();
}

static bool contains(jctx *c, int line, jv hay, jv needle) {
    switch (hay.kind) {
    case JV_STR:
        if (needle.kind != JV_STR) okv_jinja_fail(c->f, line, "'in <string>' requires string as left operand, not %s", okv_jv_type_name(needle));
        if (needle.u.s.n == 0) return true;
        if (needle.u.s.n > hay.u.s.n) return false;
        return memmem(hay.u.s.p, hay.u.s.n, needle.u.s.p, needle.u.s.n) != NULL;
    case JV_LIST:
        for (size_t i = 0; i < hay.u.l->n; i++) {
            okv_jinja_tick(c, line);
            if (okv_jv_equal(hay.u.l->v[i], needle)) return true;
        }
        return false;
    case JV_DICT: return okv_jv_dict_find(hay, needle) != NULL;
    case JV_UNDEF: return false;
    default: okv_jinja_fail(c->f, line, "argument of type '%s' is not iterable", okv_jv_type_name(hay));
    }
}

static jv arith(jctx *c, int line, int op, jv a, jv b) {
    if (op == JOP_CONCAT) {
        jbuf buf = {0};
        okv_jbuf_put(c->a, c->f, &buf, "", 0);
        okv_jv_str_to(c->a, c->f, &buf, a);
        okv_jv_str_to(c->a, c->f, &buf, b);
        return okv_jv_str(buf.p, buf.n);
    }
    if ((a.kind == JV_STR || a.kind == JV_LIST) && (b.kind == JV_STR || b.kind == JV_LIST))
        okv_jinja_tick_n(c, line, ((a.kind == JV_STR ? a.u.s.n : a.u.l->n * 16) + (b.kind == JV_STR ? b.u.s.n : b.u.l->n * 16)) / 256);
    if (op == JOP_ADD && a.kind == JV_STR && b.kind == JV_STR) {
        bool safe = (a.flags | b.flags) & JV_F_SAFE;
        if (safe && !(a.flags & JV_F_SAFE)) a = okv_jv_html_escape(c->a, c->f, a);
        if (safe && !(b.flags & JV_F_SAFE)) b = okv_jv_html_escape(c->a, c->f, b);
        char *p = okv_jalloc(c->a, c->f, a.u.s.n + b.u.s.n + 1);
        memcpy(p, a.u.s.p, a.u.s.n);
        memcpy(p + a.u.s.n, b.u.s.p, b.u.s.n);
        jv out = okv_jv_str(p, a.u.s.n + b.u.s.n);
        if (safe) out.flags |= JV_F_SAFE;
        return out;
    }
    if (op == JOP_ADD && a.kind == JV_LIST && b.kind == JV_LIST) {
        jv l = okv_jv_list_new(c->a, c->f, a.u.l->n + b.u.l->n);
        l.flags = a.flags & JV_F_TUPLE;
        for (size_t i = 0; i < a.u.l->n; i++) okv_jv_list_push(c->a, c->f, l, a.u.l->v[i]);
        for (size_t i = 0; i < b.u.l->n; i++) okv_jv_list_push(c->a, c->f, l, b.u.l->v[i]);
        return l;
    }
    if (op == JOP_MUL && (a.kind == JV_STR || a.kind == JV_LIST) && (b.kind == JV_INT || b.kind == JV_BOOL)) {
        int64_t times = as_index(b);
        size_t unit = a.kind == JV_STR ? a.u.s.n : a.u.l->n;
        if (times <= 0 || unit == 0) return a.kind == JV_STR ? okv_jv_cstr("") : okv_jv_list_new(c->a, c->f, 0);
        if ((uint64_t)times > (SIZE_MAX / 16) / unit)
            okv_jinja_fail(c->f, line, "a %s repeated %lld times is too large", okv_jv_type_name(a), (long long)times);
        size_t total = unit * (size_t)times;
        okv_jinja_tick_n(c, line, total / 256);
        if (a.kind == JV_STR) {
            char *p = okv_jalloc(c->a, c->f, total + 1);
            for (int64_t i = 0; i < times; i++) memcpy(p + (size_t)i * unit, a.u.s.p, unit);
            return okv_jv_str(p, total);
        }
        jv out = okv_jv_list_new(c->a, c->f, total);
        out.flags = a.flags & JV_F_TUPLE;
        for (int64_t i = 0; i < times; i++)
            for (size_t k = 0; k < unit; k++) okv_jv_list_push(c->a, c->f, out, a.u.l->v[k]);
        return out;
    }
    if (op == JOP_MUL && (b.kind == JV_STR || b.kind == JV_LIST) && (a.kind == JV_INT || a.kind == JV_BOOL))
        return arith(c, line, op, b, a);
    if (op == JOP_MOD && a.kind == JV_STR) /* "%s: %d" % (x, y), or % one value */
        return b.kind == JV_LIST && (b.flags & JV_F_TUPLE) ? okv_jinja_printf(c, line, a, b.u.l->v, (int)b.u.l->n)
                                                          : okv_jinja_printf(c, line, a, &b, 1);
    if (!okv_jv_is_number(a) || !okv_jv_is_number(b)) {
        static const char *const sym[] = {"+", "-", "*", "/", "//", "%", "**"};
        okv_jinja_fail(c->f, line, "unsupported operand type(s) for %s: '%s' and '%s'", sym[op], okv_jv_type_name(a), okv_jv_type_name(b));
    }
    bool ints = a.kind != JV_FLOAT && b.kind != JV_FLOAT;
    if (ints) {
        int64_t x = as_index(a), y = as_index(b), r;
        switch (op) {
        case JOP_ADD:
            if (__builtin_add_overflow(x, y, &r)) break;
            return okv_jv_int(r);
        case JOP_SUB:
            if (__builtin_sub_overflow(x, y, &r)) break;
            return okv_jv_int(r);
        case JOP_MUL:
            if (__builtin_mul_overflow(x, y, &r)) break;
            return okv_jv_int(r);
        case JOP_FLOORDIV:
        case JOP_MOD:
            if (y == 0) okv_jinja_fail(c->f, line, "integer division or modulo by zero");
            if (x == INT64_MIN && y == -1) break;
            {
                int64_t q = x / y, m = x % y;
                if (m != 0 && ((m < 0) != (y < 0))) {
                    q--;
                    m += y;
                }
                return okv_jv_int(op == JOP_MOD ? m : q);
            }
        case JOP_POW:
            if (y < 0) break;
            /* 0, 1 and -1 never overflow: their powers without y multiplications */
            if (x == 0 || x == 1) return okv_jv_int(y == 0 ? 1 : x);
            if (x == -1) return okv_jv_int(y % 2 ? -1 : 1);
            r = 1;
            for (int64_t i = 0; i < y; i++)
                if (__builtin_mul_overflow(r, x, &r)) okv_jinja_fail(c->f, line, "integer result of ** beyond 64 bits");
            return okv_jv_int(r);
        default: break;
        }
        if (op != JOP_DIV && op != JOP_POW) okv_jinja_fail(c->f, line, "integer result beyond 64 bits");
    }
    double x = okv_jv_num(a), y = okv_jv_num(b);
    switch (op) {
    case JOP_ADD: return okv_jv_float(x + y);
    case JOP_SUB: return okv_jv_float(x - y);
    case JOP_MUL: return okv_jv_float(x * y);
    case JOP_DIV:
        if (y == 0) okv_jinja_fail(c->f, line, "division by zero");
        return okv_jv_float(x / y);
    case JOP_FLOORDIV:
        if (y == 0) okv_jinja_fail(c->f, line, "float floor division by zero");
        return okv_jv_float(floor(x / y));
    case JOP_MOD: {
        if (y == 0) okv_jinja_fail(c->f, line, "float modulo");
        double m = fmod(x, y);
        if (m != 0 && ((m < 0) != (y < 0))) m += y;
        return okv_jv_float(m);
    }
    default: return okv_jv_float(pow(x, y));
    }
}

static void eval_args(jctx *c, jscope *s, jnode *e, jv **args, jv **kwv) {
    *args = e->n_args ? okv_jalloc(c->a, c->f, (size_t)e->n_args * sizeof(jv)) : NULL;
    *kwv = e->n_kw ? okv_jalloc(c->a, c->f, (size_t)e->n_kw * sizeof(jv)) : NULL;
    for (int i = 0; i < e->n_args; i++) (*args)[i] = okv_jinja_eval(c, s, e->args[i]);
    for (int i = 0; i < e->n_kw; i++) (*kwv)[i] = okv_jinja_eval(c, s, e->kwvals[i]);
}

static jv eval_node(jctx *c, jscope *s, jnode *e) {
    switch (e->type) {
    case JN_LIT: return e->lit;
    case JN_NAME: {
        jv *v = lookup(s, e->lit.u.s.p);
        return v ? *v : okv_jv_undef();
    }
    case JN_LIST:
    case JN_TUPLE: {
        jv l = okv_jv_list_new(c->a, c->f, (size_t)e->n_args);
        if (e->type == JN_TUPLE) l.flags |= JV_F_TUPLE;
        for (int i = 0; i < e->n_args; i++) okv_jv_list_push(c->a, c->f, l, okv_jinja_eval(c, s, e->args[i]));
        return l;
    }
    case JN_DICT: {
        jv d = okv_jv_dict_new(c->a, c->f, (size_t)e->n_args);
        for (int i = 0; i < e->n_args; i++) okv_jv_dict_set(c->a, c->f, d, okv_jinja_eval(c, s, e->args[i]), okv_jinja_eval(c, s, e->kwvals[i]));
        return d;
    }
    case JN_ATTR: return get_attr(c, e->line, okv_jinja_eval(c, s, e->a), e->lit.u.s.p, e->lit.u.s.n);
    case JN_ITEM: return get_item(c, e->line, okv_jinja_eval(c, s, e->a), okv_jinja_eval(c, s, e->b));
    case JN_SLICE: {
        jv obj = okv_jinja_eval(c, s, e->a);
        jv st = e->b ? okv_jinja_eval(c, s, e->b) : okv_jv_none(), sp = e->c ? okv_jinja_eval(c, s, e->c) : okv_jv_none(),
           sc = e->d ? okv_jinja_eval(c, s, e->d) : okv_jv_none();
        return do_slice(c, e->line, obj, st, sp, sc);
    }
    case JN_CALL: {
        jv fn = okv_jinja_eval(c, s, e->a), *args, *kwv;
        eval_args(c, s, e, &args, &kwv);
        return okv_jinja_call_value(c, fn, e->line, args, e->n_args, e->kwnames, kwv, e->n_kw);
    }
    case JN_FILTER: {
        jv v = okv_jinja_eval(c, s, e->a), *args, *kwv;
        eval_args(c, s, e, &args, &kwv);
        okv_jinja_tick(c, e->line);
        return okv_jinja_filter(c, s, e->lit.u.s.p, e->line, v, args, e->n_args, e->kwnames, kwv, e->n_kw);
    }
    case JN_TEST: {
        jv v = okv_jinja_eval(c, s, e->a), *args, *kwv;
        eval_args(c, s, e, &args, &kwv);
        bool r = okv_jinja_test(c, e->lit.u.s.p, e->line, v, args, e->n_args);
        return okv_jv_bool(e->op ? !r : r);
    }
    case JN_BINOP: {
        jv a = okv_jinja_eval(c, s, e->a), b = okv_jinja_eval(c, s, e->b);
        okv_jinja_tick(c, e->line);
        switch (e->op) {
        case JOP_EQ: return okv_jv_bool(okv_jv_equal(a, b));
        case JOP_NE: return okv_jv_bool(!okv_jv_equal(a, b));
        case JOP_LT: return okv_jv_bool(okv_jv_compare(c->f, e->line, a, b) < 0);
        case JOP_LE: return okv_jv_bool(okv_jv_compare(c->f, e->line, a, b) <= 0);
        case JOP_GT: return okv_jv_bool(okv_jv_compare(c->f, e->line, a, b) > 0);
        case JOP_GE: return okv_jv_bool(okv_jv_compare(c->f, e->line, a, b) >= 0);
        case JOP_IN: return okv_jv_bool(contains(c, e->line, b, a));
        case JOP_NOTIN: return okv_jv_bool(!contains(c, e->line, b, a));
        default:
            if (a.kind == JV_UNDEF || b.kind == JV_UNDEF) {
                if (e->op != JOP_CONCAT) okv_jinja_fail(c->f, e->line, "an undefined value in arithmetic");
            }
            return arith(c, e->line, e->op, a, b);
        }
    }
    case JN_NEG:
    case JN_POS: {
        jv v = okv_jinja_eval(c, s, e->a);
        if (!okv_jv_is_number(v)) okv_jinja_fail(c->f, e->line, "bad operand type for unary %s: '%s'", e->type == JN_NEG ? "-" : "+", okv_jv_type_name(v));
        if (e->type == JN_POS) return v.kind == JV_BOOL ? okv_jv_int(v.u.b) : v;
        if (v.kind == JV_FLOAT) return okv_jv_float(-v.u.f);
        int64_t i = as_index(v);
        if (i == INT64_MIN) okv_jinja_fail(c->f, e->line, "integer result beyond 64 bits");
        return okv_jv_int(-i);
    }
    case JN_NOT: return okv_jv_bool(!okv_jv_truthy(okv_jinja_eval(c, s, e->a)));
    case JN_AND: {
        jv a = okv_jinja_eval(c, s, e->a);
        return okv_jv_truthy(a) ? okv_jinja_eval(c, s, e->b) : a;
    }
    case JN_OR: {
        jv a = okv_jinja_eval(c, s, e->a);
        return okv_jv_truthy(a) ? a : okv_jinja_eval(c, s, e->b);
    }
    case JN_COND:
        if (okv_jv_truthy(okv_jinja_eval(c, s, e->b))) return okv_jinja_eval(c, s, e->a);
        return e->c ? okv_jinja_eval(c, s, e->c) : okv_jv_undef();
    case JN_BLOCKVAL: return c->blockval;
    default: okv_jinja_fail(c->f, e->line, "a statement where an expression belongs");
    }
}

jv okv_jinja_eval(jctx *c, jscope *s, jnode *e) {
    if (++c->nesting > MAX_EVAL_NESTING) okv_jinja_fail(c->f, e->line, "the template nests evaluation more than %d deep", MAX_EVAL_NESTING);
    jv v = eval_node(c, s, e);
    c->nesting--;
    return v;
}

jv okv_jinja_iterable(jctx *c, int line, jv v) {
    okv_jinja_tick_n(c, line, v.kind == JV_LIST ? v.u.l->n : v.kind == JV_STR ? v.u.s.n / 16 : v.kind == JV_DICT ? v.u.d->n : 0);
    switch (v.kind) {
    case JV_LIST: return v;
    case JV_UNDEF: return okv_jv_list_new(c->a, c->f, 0);
    case JV_DICT: {
        if (v.flags & (JV_F_NAMESPACE | JV_F_LOOP)) break;
        jv l = okv_jv_list_new(c->a, c->f, v.u.d->n);
        for (size_t i = 0; i < v.u.d->n; i++) okv_jv_list_push(c->a, c->f, l, v.u.d->k[i]);
        return l;
    }
    case JV_STR: {
        jv l = okv_jv_list_new(c->a, c->f, 0);
        for (size_t i = 0; i < v.u.s.n;) {
            size_t k = i + 1;
            while (k < v.u.s.n && ((unsigned char)v.u.s.p[k] & 0xC0) == 0x80) k++;
            okv_jv_list_push(c->a, c->f, l, okv_jv_str(v.u.s.p + i, k - i));
            i = k;
        }
        return l;
    }
    default: break;
    }
    okv_jinja_fail(c->f, line, "'%s' object is not iterable", okv_jv_type_name(v));
}

/* ---- statements ---- */

static void assign(jctx *c, jscope *s, jnode *n, jv v) {
    if (n->n_names == 1) {
        okv_jscope_set(c, s, n->kwnames[0], v);
        return;
    }
    if (v.kind != JV_LIST) v = okv_jinja_iterable(c, n->line, v);
    if (v.u.l->n != (size_t)n->n_names)
        okv_jinja_fail(c->f, n->line, "cannot unpack %zu values into %d names", v.u.l->n, n->n_names);
    for (int i = 0; i < n->n_names; i++) okv_jscope_set(c, s, n->kwnames[i], v.u.l->v[i]);
}

static void set_attr(jctx *c, jscope *s, jnode *n, jv v) {
    jv *ns = lookup(s, n->kwnames[0]);
    if (!ns || ns->kind != JV_DICT || !(ns->flags & JV_F_NAMESPACE))
        okv_jinja_fail(c->f, n->line, "cannot assign attribute on non-namespace object '%s'", n->kwnames[0]);
    okv_jv_dict_set(c->a, c->f, *ns, n->lit, v);
}

static jv loop_object(jctx *c, jv items, size_t i) {
    size_t n = items.u.l->n;
    jv d = okv_jv_dict_new(c->a, c->f, 10);
    d.flags |= JV_F_LOOP;
    okv_jv_dict_set(c->a, c->f, d, okv_jv_cstr("index"), okv_jv_int((int64_t)i + 1));
    okv_jv_dict_set(c->a, c->f, d, okv_jv_cstr("index0"), okv_jv_int((int64_t)i));
    okv_jv_dict_set(c->a, c->f, d, okv_jv_cstr("revindex"), okv_jv_int((int64_t)(n - i)));
    okv_jv_dict_set(c->a, c->f, d, okv_jv_cstr("revindex0"), okv_jv_int((int64_t)(n - i - 1)));
    okv_jv_dict_set(c->a, c->f, d, okv_jv_cstr("first"), okv_jv_bool(i == 0));
    okv_jv_dict_set(c->a, c->f, d, okv_jv_cstr("last"), okv_jv_bool(i + 1 == n));
    okv_jv_dict_set(c->a, c->f, d, okv_jv_cstr("length"), okv_jv_int((int64_t)n));
    okv_jv_dict_set(c->a, c->f, d, okv_jv_cstr("depth"), okv_jv_int(1));
    okv_jv_dict_set(c->a, c->f, d, okv_jv_cstr("depth0"), okv_jv_int(0));
    if (i > 0) okv_jv_dict_set(c->a, c->f, d, okv_jv_cstr("previtem"), items.u.l->v[i - 1]);
    if (i + 1 < n) okv_jv_dict_set(c->a, c->f, d, okv_jv_cstr("nextitem"), items.u.l->v[i + 1]);
    return d;
}

static void exec_for(jctx *c, jscope *s, jnode *n) {
    jv items = okv_jinja_iterable(c, n->line, okv_jinja_eval(c, s, n->a));
    if (n->b) { /* {% for x in xs if cond %}: loop.* counts the kept items */
        jv kept = okv_jv_list_new(c->a, c->f, 0);
        for (size_t i = 0; i < items.u.l->n; i++) {
            count_iteration(c, n->line);
            jscope *t = scope_new(c, s);
            assign(c, t, n, items.u.l->v[i]);
            if (okv_jv_truthy(okv_jinja_eval(c, t, n->b))) okv_jv_list_push(c->a, c->f, kept, items.u.l->v[i]);
        }
        items = kept;
    }
    for (size_t i = 0; i < items.u.l->n; i++) {
        count_iteration(c, n->line);
        jscope *t = scope_new(c, s);
        assign(c, t, n, items.u.l->v[i]);
        okv_jscope_set(c, t, "loop", loop_object(c, items, i));
        exec_body(c, t, n->args, n->n_args);
        if (c->brk == 1) {
            c->brk = 0;
            break;
        }
        c->brk = 0;
    }
    if (items.u.l->n == 0 && n->n_kw) exec_body(c, scope_new(c, s), n->kwvals, n->n_kw);
}

static jv apply_chain(jctx *c, jscope *s, jnode *chain, jv text) {
    if (!chain) return text;
    jv saved = c->blockval;
    c->blockval = text;
    jv v = okv_jinja_eval(c, s, chain);
    c->blockval = saved;
    return v;
}

static void exec_stmt(jctx *c, jscope *s, jnode *n) {
    switch (n->type) {
    case JN_TEXT: emit(c, n->line, n->lit.u.s.p, n->lit.u.s.n); return;
    case JN_OUTPUT: emit_value(c, n->line, okv_jinja_eval(c, s, n->a)); return;
    case JN_IF:
        /* An elif chain (an else branch that is one if) is walked, not
         * recursed into: running a lone if there is the same as its body. */
        while (!okv_jv_truthy(okv_jinja_eval(c, s, n->a))) {
            if (n->n_kw != 1 || n->kwvals[0]->type != JN_IF) {
                exec_body(c, s, n->kwvals, n->n_kw);
                return;
            }
            n = n->kwvals[0];
        }
        exec_body(c, s, n->args, n->n_args);
        return;
    case JN_FOR: exec_for(c, s, n); return;
    case JN_SET: {
        jv v = okv_jinja_eval(c, s, n->b);
        if (n->lit.kind == JV_STR) set_attr(c, s, n, v);
        else assign(c, s, n, v);
        return;
    }
    case JN_SETBLOCK: {
        jv v = apply_chain(c, s, n->c, capture(c, s, n->args, n->n_args));
        if (n->lit.kind == JV_STR) set_attr(c, s, n, v);
        else assign(c, s, n, v);
        return;
    }
    case JN_MACRO: {
        jfunc *fn = okv_jalloc(c->a, c->f, sizeof *fn);
        fn->kind = JF_MACRO;
        fn->name = n->lit.u.s.p;
        fn->macro = n;
        fn->closure = s;
        okv_jscope_set(c, s, fn->name, (jv){.kind = JV_FUNC, .u.fn = fn});
        return;
    }
    case JN_CALLBLOCK: {
        jfunc *caller = okv_jalloc(c->a, c->f, sizeof *caller);
        caller->kind = JF_MACRO;
        caller->name = "caller";
        caller->macro = n;
        caller->closure = s;
        jnode *call = n->a;
        jv fn = okv_jinja_eval(c, s, call->a), *args, *kwv;
        eval_args(c, s, call, &args, &kwv);
        const char **kwn = okv_jalloc(c->a, c->f, (size_t)(call->n_kw + 1) * sizeof *kwn);
        jv *kw = okv_jalloc(c->a, c->f, (size_t)(call->n_kw + 1) * sizeof *kw);
        for (int i = 0; i < call->n_kw; i++) {
            kwn[i] = call->kwnames[i];
            kw[i] = kwv[i];
        }
        kwn[call->n_kw] = "caller";
        kw[call->n_kw] = (jv){.kind = JV_FUNC, .u.fn = caller};
        emit_value(c, n->line, okv_jinja_call_value(c, fn, n->line, args, call->n_args, kwn, kw, call->n_kw + 1));
        return;
    }
    case JN_FILTERBLOCK: emit_value(c, n->line, apply_chain(c, s, n->c, capture(c, s, n->args, n->n_args))); return;
    case JN_BREAK: c->brk = 1; return;
    case JN_CONTINUE: c->brk = 2; return;
    default: okv_jinja_fail(c->f, n->line, "an expression where a statement belongs");
    }
}

static void exec_body(jctx *c, jscope *s, jnode **body, int n) {
    if (++c->nesting > MAX_EVAL_NESTING) okv_jinja_fail(c->f, n ? body[0]->line : 0, "the template nests blocks more than %d deep", MAX_EVAL_NESTING);
    for (int i = 0; i < n && !c->brk; i++) exec_stmt(c, s, body[i]);
    c->nesting--;
}

void okv_jinja_render(jctx *c, jnode **body, int n_body, jscope *root) {
    jscope *g = scope_new(c, NULL);
    for (int i = 0; i < B_COUNT; i++) {
        jfunc *fn = okv_jalloc(c->a, c->f, sizeof *fn);
        fn->kind = JF_BUILTIN;
        fn->name = builtin_names[i];
        fn->builtin = i;
        okv_jscope_set(c, g, builtin_names[i], (jv){.kind = JV_FUNC, .u.fn = fn});
    }
    root->parent = g;
    c->globals = g;
    exec_body(c, root, body, n_body);
}
