/* Tokens to a tree, by jinja2's grammar and operator precedence
 * (jinja2/parser.py): or < and < not < comparisons < + - < ~ < * / // %
 * < ** < unary - + < primary with .attr [item] (call), then filters
 * (| name) and tests (is name) bind to the unary before them. */
#include <stdio.h>
#include <string.h>

#include "chat/jinja.h"

typedef struct ps {
    jarena *a;
    jfail *f;
    const jtok *t;
    size_t n, i;
    int depth;
} ps;

enum { MAX_NESTING = 200 };

static const jtok *cur(ps *p) { return &p->t[p->i]; }
static const jtok *peek(ps *p, size_t k) { return &p->t[p->i + k < p->n ? p->i + k : p->n - 1]; }

static _Noreturn void pfail_at(ps *p, const jtok *t, const char *fmt, const char *arg) {
    p->f->err.column = t->column;
    char what[64];
    if (t->type == JT_NAME || t->type == JT_OP)
        snprintf(what, sizeof what, "'%.*s'", (int)(t->n < 40 ? t->n : 40), t->p);
    else
        snprintf(what, sizeof what, "%s",
                 t->type == JT_EOF ? "end of template" : t->type == JT_TEXT ? "template text"
                 : t->type == JT_BLOCK_END ? "end of statement block" : t->type == JT_VAR_END ? "end of print statement"
                 : t->type == JT_STRING ? "a string" : "a literal");
    char msg[300];
    snprintf(msg, sizeof msg, fmt, arg ? arg : what);
    okv_jinja_fail(p->f, t->line, "%s (at %s)", msg, what);
}

static bool is_op(const jtok *t, const char *op) { return t->type == JT_OP && strlen(op) == t->n && memcmp(t->p, op, t->n) == 0; }
static bool is_name(const jtok *t, const char *name) {
    return t->type == JT_NAME && strlen(name) == t->n && memcmp(t->p, name, t->n) == 0;
}

static void expect_op(ps *p, const char *op) {
    if (!is_op(cur(p), op)) pfail_at(p, cur(p), "expected '%s'", op);
    p->i++;
}

static const char *expect_ident(ps *p) {
    const jtok *t = cur(p);
    if (t->type != JT_NAME) pfail_at(p, t, "expected a name", NULL);
    p->i++;
    return okv_jstrdup(p->a, p->f, t->p, t->n);
}

static void expect_end(ps *p) {
    if (cur(p)->type != JT_BLOCK_END) pfail_at(p, cur(p), "expected the end of the statement ('%%}')", "");
    p->i++;
}

static jnode *node(ps *p, jnode_type type, int line) {
    jnode *n = okv_jalloc(p->a, p->f, sizeof *n);
    n->type = type;
    n->line = line;
    return n;
}

/* Growing node arrays. */
typedef struct nvec {
    jnode **v;
    const char **names;
    int n, cap;
} nvec;

static void nvec_push(ps *p, nvec *v, jnode *x, const char *name) {
    if (v->n == v->cap) {
        int cap = v->cap ? v->cap * 2 : 8;
        jnode **nv = okv_jalloc(p->a, p->f, (size_t)cap * sizeof *nv);
        const char **nn = okv_jalloc(p->a, p->f, (size_t)cap * sizeof *nn);
        if (v->n) {
            memcpy(nv, v->v, (size_t)v->n * sizeof *nv);
            memcpy(nn, v->names, (size_t)v->n * sizeof *nn);
        }
        v->v = nv;
        v->names = nn;
        v->cap = cap;
    }
    v->v[v->n] = x;
    v->names[v->n++] = name;
}

static jnode *expression(ps *p, bool with_cond);
static jnode *unary(ps *p, bool with_filter);

static void enter(ps *p) {
    if (++p->depth > MAX_NESTING) pfail_at(p, cur(p), "expressions or blocks nested too deep", "");
}

/* (args) after a callee, filter or test: positional then name=value. */
static void call_args(ps *p, jnode *n) {
    expect_op(p, "(");
    nvec pos = {0}, kw = {0};
    while (!is_op(cur(p), ")")) {
        if (pos.n || kw.n) expect_op(p, ",");
        if (is_op(cur(p), ")")) break; /* a trailing comma */
        if (cur(p)->type == JT_NAME && is_op(peek(p, 1), "=")) {
            const char *name = expect_ident(p);
            p->i++;
            nvec_push(p, &kw, expression(p, true), name);
        } else {
            if (kw.n) pfail_at(p, cur(p), "a positional argument after keyword arguments", "");
            nvec_push(p, &pos, expression(p, true), NULL);
        }
    }
    p->i++;
    n->args = pos.v;
    n->n_args = pos.n;
    n->kwvals = kw.v;
    n->kwnames = kw.names;
    n->n_kw = kw.n;
}

static jnode *primary(ps *p) {
    const jtok *t = cur(p);
    jnode *n;
    if (t->type == JT_NAME) {
        p->i++;
        n = node(p, JN_LIT, t->line);
        if (is_name(t, "true") || is_name(t, "True")) n->lit = okv_jv_bool(true);
        else if (is_name(t, "false") || is_name(t, "False")) n->lit = okv_jv_bool(false);
        else if (is_name(t, "none") || is_name(t, "None")) n->lit = okv_jv_none();
        else {
            n->type = JN_NAME;
            n->lit = okv_jv_str(okv_jstrdup(p->a, p->f, t->p, t->n), t->n);
        }
        return n;
    }
    if (t->type == JT_STRING) {
        jbuf b = {0};
        okv_jbuf_put(p->a, p->f, &b, "", 0);
        while (cur(p)->type == JT_STRING) { /* adjacent literals join */
            okv_jbuf_put(p->a, p->f, &b, cur(p)->p, cur(p)->n);
            p->i++;
        }
        n = node(p, JN_LIT, t->line);
        n->lit = okv_jv_str(b.p, b.n);
        return n;
    }
    if (t->type == JT_INT || t->type == JT_FLOAT) {
        p->i++;
        n = node(p, JN_LIT, t->line);
        n->lit = t->type == JT_INT ? okv_jv_int(t->i) : okv_jv_float(t->f);
        return n;
    }
    if (is_op(t, "(")) {
        p->i++;
        if (is_op(cur(p), ")")) {
            p->i++;
            return node(p, JN_TUPLE, t->line);
        }
        jnode *first = expression(p, true);
        if (!is_op(cur(p), ",")) {
            expect_op(p, ")");
            return first;
        }
        nvec items = {0};
        nvec_push(p, &items, first, NULL);
        while (is_op(cur(p), ",")) {
            p->i++;
            if (is_op(cur(p), ")")) break;
            nvec_push(p, &items, expression(p, true), NULL);
        }
        expect_op(p, ")");
        n = node(p, JN_TUPLE, t->line);
        n->args = items.v;
        n->n_args = items.n;
        return n;
    }
    if (is_op(t, "[")) {
        p->i++;
        nvec items = {0};
        while (!is_op(cur(p), "]")) {
            if (items.n) expect_op(p, ",");
            if (is_op(cur(p), "]")) break;
            nvec_push(p, &items, expression(p, true), NULL);
        }
        p->i++;
        n = node(p, JN_LIST, t->line);
        n->args = items.v;
        n->n_args = items.n;
        return n;
    }
    if (is_op(t, "{")) {
        p->i++;
        nvec keys = {0}, vals = {0};
        while (!is_op(cur(p), "}")) {
            if (keys.n) expect_op(p, ",");
            if (is_op(cur(p), "}")) break;
            nvec_push(p, &keys, expression(p, true), NULL);
            expect_op(p, ":");
            nvec_push(p, &vals, expression(p, true), NULL);
        }
        p->i++;
        n = node(p, JN_DICT, t->line);
        n->args = keys.v;
        n->n_args = keys.n;
        n->kwvals = vals.v;
        n->n_kw = vals.n;
        return n;
    }
    pfail_at(p, t, "unexpected %s", NULL);
}

static jnode *subscript(ps *p, jnode *target, int line) {
    expect_op(p, "[");
    jnode *parts[3] = {0};
    int k = 0;
    bool slice = false;
    for (;;) {
        if (!is_op(cur(p), ":") && !is_op(cur(p), "]")) parts[k] = expression(p, true);
        if (!slice && k == 0 && parts[0] && is_op(cur(p), ",")) { /* x[a, b]: a tuple key, as Python's */
            nvec items = {0};
            nvec_push(p, &items, parts[0], NULL);
            while (is_op(cur(p), ",")) {
                p->i++;
                if (is_op(cur(p), "]")) break;
                nvec_push(p, &items, expression(p, true), NULL);
            }
            jnode *t = node(p, JN_TUPLE, line);
            t->args = items.v;
            t->n_args = items.n;
            parts[0] = t;
            break;
        }
        if (is_op(cur(p), ":")) {
            slice = true;
            if (++k > 2) pfail_at(p, cur(p), "a slice takes at most three parts", "");
            p->i++;
            continue;
        }
        break;
    }
    expect_op(p, "]");
    jnode *n;
    if (slice) {
        n = node(p, JN_SLICE, line);
        n->b = parts[0];
        n->c = parts[1];
        n->d = parts[2];
    } else {
        if (!parts[0]) pfail_at(p, cur(p), "an empty subscript", "");
        n = node(p, JN_ITEM, line);
        n->b = parts[0];
    }
    n->a = target;
    return n;
}

static jnode *postfix(ps *p, jnode *n) {
    for (;;) {
        const jtok *t = cur(p);
        if (is_op(t, ".")) {
            p->i++;
            const jtok *k = cur(p);
            if (k->type == JT_INT) {
                p->i++;
                jnode *item = node(p, JN_ITEM, t->line), *lit = node(p, JN_LIT, t->line);
                lit->lit = okv_jv_int(k->i);
                item->a = n;
                item->b = lit;
                n = item;
            } else {
                jnode *attr = node(p, JN_ATTR, t->line);
                const char *name = expect_ident(p);
                attr->lit = okv_jv_cstr(name);
                attr->a = n;
                n = attr;
            }
        } else if (is_op(t, "[")) {
            n = subscript(p, n, t->line);
        } else if (is_op(t, "(")) {
            jnode *call = node(p, JN_CALL, t->line);
            call->a = n;
            call_args(p, call);
            n = call;
        } else
            return n;
    }
}

static jnode *filter_expr(ps *p, jnode *n) {
    for (;;) {
        const jtok *t = cur(p);
        if (is_op(t, "|")) {
            p->i++;
            jnode *fl = node(p, JN_FILTER, t->line);
            jbuf name = {0};
            okv_jbuf_puts(p->a, p->f, &name, expect_ident(p));
            while (is_op(cur(p), ".")) { /* dotted filter names */
                p->i++;
                okv_jbuf_putc(p->a, p->f, &name, '.');
                okv_jbuf_puts(p->a, p->f, &name, expect_ident(p));
            }
            fl->lit = okv_jv_str(name.p, name.n);
            fl->a = n;
            if (is_op(cur(p), "(")) call_args(p, fl);
            n = fl;
        } else if (is_name(t, "is")) {
            p->i++;
            jnode *ts = node(p, JN_TEST, t->line);
            if (is_name(cur(p), "not")) {
                p->i++;
                ts->op = 1;
            }
            const jtok *nt = cur(p);
            ts->lit = okv_jv_cstr(expect_ident(p));
            (void)nt;
            ts->a = n;
            const jtok *x = cur(p);
            if (is_op(x, "(")) {
                call_args(p, ts);
            } else if ((x->type == JT_NAME || x->type == JT_STRING || x->type == JT_INT || x->type == JT_FLOAT ||
                        is_op(x, "[") || is_op(x, "{")) &&
                       !is_name(x, "else") && !is_name(x, "or") && !is_name(x, "and")) {
                if (is_name(x, "is")) pfail_at(p, x, "you cannot chain multiple tests with is", "");
                jnode *arg = postfix(p, primary(p));
                ts->args = okv_jalloc(p->a, p->f, sizeof *ts->args);
                ts->args[0] = arg;
                ts->n_args = 1;
            }
            n = ts;
        } else if (is_op(t, "(")) {
            jnode *call = node(p, JN_CALL, t->line);
            call->a = n;
            call_args(p, call);
            n = call;
        } else
            return n;
    }
}

static jnode *unary(ps *p, bool with_filter) {
    enter(p);
    const jtok *t = cur(p);
    jnode *n;
    if (is_op(t, "-") || is_op(t, "+")) {
        p->i++;
        n = node(p, is_op(t, "-") ? JN_NEG : JN_POS, t->line);
        n->a = unary(p, false);
    } else
        n = primary(p);
    n = postfix(p, n);
    if (with_filter) n = filter_expr(p, n);
    p->depth--;
    return n;
}

static jnode *binop(ps *p, int op, jnode *l, jnode *r, int line) {
    jnode *n = node(p, JN_BINOP, line);
    n->op = op;
    n->a = l;
    n->b = r;
    return n;
}

static jnode *power(ps *p) {
    jnode *l = unary(p, true);
    while (is_op(cur(p), "**")) {
        int line = cur(p)->line;
        p->i++;
        l = binop(p, JOP_POW, l, unary(p, true), line);
    }
    return l;
}

static jnode *math2(ps *p) {
    jnode *l = power(p);
    for (;;) {
        const jtok *t = cur(p);
        int op = is_op(t, "*") ? JOP_MUL : is_op(t, "/") ? JOP_DIV : is_op(t, "//") ? JOP_FLOORDIV : is_op(t, "%") ? JOP_MOD : -1;
        if (op < 0) return l;
        p->i++;
        l = binop(p, op, l, power(p), t->line);
    }
}

static jnode *concat(ps *p) {
    jnode *l = math2(p);
    while (is_op(cur(p), "~")) {
        int line = cur(p)->line;
        p->i++;
        l = binop(p, JOP_CONCAT, l, math2(p), line);
    }
    return l;
}

static jnode *math1(ps *p) {
    jnode *l = concat(p);
    for (;;) {
        const jtok *t = cur(p);
        int op = is_op(t, "+") ? JOP_ADD : is_op(t, "-") ? JOP_SUB : -1;
        if (op < 0) return l;
        p->i++;
        l = binop(p, op, l, concat(p), t->line);
    }
}

static jnode *compare(ps *p) {
    jnode *first = math1(p), *l = first, *result = NULL;
    for (;;) {
        const jtok *t = cur(p);
        int op = is_op(t, "==") ? JOP_EQ : is_op(t, "!=") ? JOP_NE : is_op(t, "<") ? JOP_LT : is_op(t, "<=") ? JOP_LE
                 : is_op(t, ">") ? JOP_GT : is_op(t, ">=") ? JOP_GE : is_name(t, "in") ? JOP_IN : -1;
        if (op < 0 && is_name(t, "not") && is_name(peek(p, 1), "in")) {
            op = JOP_NOTIN;
            p->i++;
        }
        if (op < 0) return result ? result : first;
        p->i++;
        jnode *r = math1(p);
        jnode *cmp = binop(p, op, l, r, t->line);
        if (result) { /* a < b < c is a < b and b < c */
            jnode *both = node(p, JN_AND, t->line);
            both->a = result;
            both->b = cmp;
            result = both;
        } else
            result = cmp;
        l = r;
    }
}

static jnode *not_expr(ps *p) {
    if (is_name(cur(p), "not")) {
        enter(p);
        jnode *n = node(p, JN_NOT, cur(p)->line);
        p->i++;
        n->a = not_expr(p);
        p->depth--;
        return n;
    }
    return compare(p);
}

static jnode *and_expr(ps *p) {
    jnode *l = not_expr(p);
    while (is_name(cur(p), "and")) {
        jnode *n = node(p, JN_AND, cur(p)->line);
        p->i++;
        n->a = l;
        n->b = not_expr(p);
        l = n;
    }
    return l;
}

static jnode *or_expr(ps *p) {
    jnode *l = and_expr(p);
    while (is_name(cur(p), "or")) {
        jnode *n = node(p, JN_OR, cur(p)->line);
        p->i++;
        n->a = l;
        n->b = and_expr(p);
        l = n;
    }
    return l;
}

static jnode *expression(ps *p, bool with_cond) {
    enter(p);
    jnode *e = or_expr(p);
    while (with_cond && is_name(cur(p), "if")) {
        jnode *n = node(p, JN_COND, cur(p)->line);
        p->i++;
        n->a = e;
        n->b = or_expr(p);
        if (is_name(cur(p), "else")) {
            p->i++;
            n->c = expression(p, true);
        }
        e = n;
    }
    p->depth--;
    return e;
}

/* An expression, or a bare tuple "a, b" (set and for statements). */
static jnode *tuple_expr(ps *p, bool with_cond) {
    int line = cur(p)->line;
    jnode *first = expression(p, with_cond);
    if (!is_op(cur(p), ",")) return first;
    nvec items = {0};
    nvec_push(p, &items, first, NULL);
    while (is_op(cur(p), ",")) {
        p->i++;
        nvec_push(p, &items, expression(p, with_cond), NULL);
    }
    jnode *n = node(p, JN_TUPLE, line);
    n->args = items.v;
    n->n_args = items.n;
    return n;
}

/* ---- statements ---- */

static void body(ps *p, nvec *out, const char *const *ends, const char **which);

static bool name_in(const jtok *t, const char *const *names) {
    for (; names && *names; names++)
        if (is_name(t, *names)) return true;
    return false;
}

/* Parses statements up to one of ends, and consumes "{% end" (the caller
 * reads the rest of that tag). */
static jnode **block_until(ps *p, const char *const *ends, const char **which, int *n) {
    nvec v = {0};
    enter(p);
    body(p, &v, ends, which);
    p->depth--;
    *n = v.n;
    return v.v;
}

static const char *const END_IF[] = {"elif", "else", "endif", NULL};
static const char *const END_ELSEIF[] = {"endif", NULL};

/* An if and its elif chain: each elif is an if in the else branch of the
 * one before, built in a loop (a template of thousands of elifs must not
 * recurse once per elif). */
static jnode *if_rest(ps *p, int line) {
    jnode *head = NULL, **slot = &head;
    for (;;) {
        jnode *n = *slot = node(p, JN_IF, line);
        n->a = expression(p, true);
        expect_end(p);
        const char *which;
        n->args = block_until(p, END_IF, &which, &n->n_args);
        if (strcmp(which, "elif") == 0) {
            n->kwvals = okv_jalloc(p->a, p->f, sizeof *n->kwvals);
            n->n_kw = 1;
            slot = &n->kwvals[0];
            line = cur(p)->line;
            continue;
        }
        if (strcmp(which, "else") == 0) {
            expect_end(p);
            n->kwvals = block_until(p, END_ELSEIF, &which, &n->n_kw);
        }
        expect_end(p);
        return head;
    }
}

static void targets(ps *p, jnode *n, bool allow_attr) {
    nvec v = {0};
    bool paren = is_op(cur(p), "(");
    if (paren) p->i++;
    for (;;) {
        const char *name = expect_ident(p);
        if (allow_attr && v.n == 0 && is_op(cur(p), ".")) {
            p->i++;
            n->lit = okv_jv_cstr(expect_ident(p));
        }
        nvec_push(p, &v, NULL, name);
        if (!is_op(cur(p), ",")) break;
        if (n->lit.kind == JV_STR) pfail_at(p, cur(p), "an attribute cannot be assigned together with other names", "");
        p->i++;
    }
    if (paren) expect_op(p, ")");
    n->kwnames = v.names;
    n->n_names = v.n;
}

static jnode *filter_chain(ps *p, int line) {
    jnode *chain = node(p, JN_BLOCKVAL, line);
    while (is_op(cur(p), "|") || chain->type == JN_BLOCKVAL) {
        if (!is_op(cur(p), "|")) {
            /* {% filter name %}: the first filter has no bar */
            jnode *fl = node(p, JN_FILTER, line);
            fl->lit = okv_jv_cstr(expect_ident(p));
            fl->a = chain;
            if (is_op(cur(p), "(")) call_args(p, fl);
            chain = fl;
            continue;
        }
        chain = filter_expr(p, chain);
    }
    return chain;
}

static jnode *statement(ps *p) {
    const jtok *kw = cur(p);
    int line = kw->line;
    if (kw->type != JT_NAME) pfail_at(p, kw, "expected a statement name", "");
    p->i++;
    const char *which;
    if (is_name(kw, "if")) return if_rest(p, line);
    if (is_name(kw, "for")) {
        static const char *const ends[] = {"else", "endfor", NULL}, *const ends2[] = {"endfor", NULL};
        jnode *n = node(p, JN_FOR, line);
        targets(p, n, false);
        if (!is_name(cur(p), "in")) pfail_at(p, cur(p), "expected 'in'", "");
        p->i++;
        n->a = tuple_expr(p, false);
        if (is_name(cur(p), "if")) {
            p->i++;
            n->b = expression(p, true);
        }
        if (is_name(cur(p), "recursive")) pfail_at(p, cur(p), "recursive loops are not supported", "");
        expect_end(p);
        n->args = block_until(p, ends, &which, &n->n_args);
        if (strcmp(which, "else") == 0) {
            expect_end(p);
            n->kwvals = block_until(p, ends2, &which, &n->n_kw);
        }
        expect_end(p);
        return n;
    }
    if (is_name(kw, "set")) {
        jnode *n = node(p, JN_SET, line);
        targets(p, n, true);
        if (is_op(cur(p), "=")) {
            p->i++;
            n->b = tuple_expr(p, true);
            expect_end(p);
            return n;
        }
        static const char *const ends[] = {"endset", NULL};
        n->type = JN_SETBLOCK;
        if (is_op(cur(p), "|")) n->c = filter_expr(p, node(p, JN_BLOCKVAL, line));
        expect_end(p);
        n->args = block_until(p, ends, &which, &n->n_args);
        expect_end(p);
        return n;
    }
    if (is_name(kw, "macro")) {
        static const char *const ends[] = {"endmacro", NULL};
        jnode *n = node(p, JN_MACRO, line);
        n->lit = okv_jv_cstr(expect_ident(p));
        expect_op(p, "(");
        nvec params = {0};
        while (!is_op(cur(p), ")")) {
            if (params.n) expect_op(p, ",");
            const char *name = expect_ident(p);
            jnode *def = NULL;
            if (is_op(cur(p), "=")) {
                p->i++;
                def = expression(p, true);
            } else if (params.n && params.v[params.n - 1])
                pfail_at(p, cur(p), "a parameter without a default after one with a default", "");
            nvec_push(p, &params, def, name);
        }
        p->i++;
        expect_end(p);
        n->kwnames = params.names;
        n->kwvals = params.v;
        n->n_names = n->n_kw = params.n;
        n->args = block_until(p, ends, &which, &n->n_args);
        if (cur(p)->type == JT_NAME) p->i++; /* {% endmacro name %} */
        expect_end(p);
        return n;
    }
    if (is_name(kw, "call")) {
        static const char *const ends[] = {"endcall", NULL};
        jnode *n = node(p, JN_CALLBLOCK, line);
        if (is_op(cur(p), "(")) { /* the caller's parameters */
            p->i++;
            nvec params = {0};
            while (!is_op(cur(p), ")")) {
                if (params.n) expect_op(p, ",");
                const char *name = expect_ident(p);
                jnode *def = NULL;
                if (is_op(cur(p), "=")) {
                    p->i++;
                    def = expression(p, true);
                }
                nvec_push(p, &params, def, name);
            }
            p->i++;
            n->kwnames = params.names;
            n->kwvals = params.v;
            n->n_names = n->n_kw = params.n;
        }
        n->a = expression(p, true);
        if (n->a->type != JN_CALL) pfail_at(p, cur(p), "expected a call after {%% call %%}", "");
        expect_end(p);
        n->args = block_until(p, ends, &which, &n->n_args);
        expect_end(p);
        return n;
    }
    if (is_name(kw, "filter")) {
        static const char *const ends[] = {"endfilter", NULL};
        jnode *n = node(p, JN_FILTERBLOCK, line);
        n->c = filter_chain(p, line);
        expect_end(p);
        n->args = block_until(p, ends, &which, &n->n_args);
        expect_end(p);
        return n;
    }
    if (is_name(kw, "generation")) {
        /* transformers' AssistantTracker marks assistant text; it renders as is */
        static const char *const ends[] = {"endgeneration", NULL};
        jnode *n = node(p, JN_IF, line);
        n->a = node(p, JN_LIT, line);
        n->a->lit = okv_jv_bool(true);
        expect_end(p);
        n->args = block_until(p, ends, &which, &n->n_args);
        expect_end(p);
        return n;
    }
    if (is_name(kw, "break") || is_name(kw, "continue")) {
        jnode *n = node(p, is_name(kw, "break") ? JN_BREAK : JN_CONTINUE, line);
        expect_end(p);
        return n;
    }
    p->i--;
    pfail_at(p, kw, "unknown or unsupported statement %s", NULL);
}

static void body(ps *p, nvec *out, const char *const *ends, const char **which) {
    for (;;) {
        const jtok *t = cur(p);
        switch (t->type) {
        case JT_TEXT: {
            jnode *n = node(p, JN_TEXT, t->line);
            n->lit = okv_jv_str(t->p, t->n);
            nvec_push(p, out, n, NULL);
            p->i++;
            break;
        }
        case JT_VAR_BEGIN: {
            p->i++;
            jnode *n = node(p, JN_OUTPUT, t->line);
            n->a = expression(p, true);
            if (cur(p)->type != JT_VAR_END) pfail_at(p, cur(p), "expected the end of the expression ('}}')", "");
            p->i++;
            nvec_push(p, out, n, NULL);
            break;
        }
        case JT_BLOCK_BEGIN: {
            const jtok *kw = peek(p, 1);
            if (name_in(kw, ends)) {
                p->i += 2;
                *which = ends[0];
                for (const char *const *e = ends; *e; e++)
                    if (is_name(kw, *e)) *which = *e;
                return;
            }
            p->i++;
            nvec_push(p, out, statement(p), NULL);
            break;
        }
        case JT_EOF:
            if (ends) {
                const char *const *last = ends;
                while (last[1]) last++;
                pfail_at(p, t, "unexpected end of template: a block needs {%% %s %%}", *last);
            }
            return;
        default: pfail_at(p, t, "unexpected %s", NULL);
        }
    }
}

void okv_jinja_parse(jarena *a, jfail *f, const jtok *toks, size_t n_tok, int *n_body, jnode ***out) {
    ps p = {a, f, toks, n_tok, 0, 0};
    nvec v = {0};
    body(&p, &v, NULL, NULL);
    *n_body = v.n;
    *out = v.v;
}
