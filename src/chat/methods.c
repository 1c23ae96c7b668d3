/* The str, dict and list methods templates call (content.strip(),
 * message.get('x'), tools.items() ...), with Python's semantics.  Only
 * methods that read are offered: the environment is immutable, as
 * transformers' ImmutableSandboxedEnvironment is. */
#include <string.h>

#include "chat/jinja.h"

static const char *const str_methods[] = {"strip", "lstrip", "rstrip", "split", "rsplit", "startswith", "endswith",
                                          "replace", "upper", "lower", "title", "capitalize", "find", "rfind",
                                          "count", "join", "splitlines", "isdigit", "isalpha", "isalnum", "isspace",
                                          "isupper", "islower", "removeprefix", "removesuffix", "index", NULL};
static const char *const dict_methods[] = {"get", "items", "keys", "values", NULL};
static const char *const list_methods[] = {"index", "count", NULL};

static bool listed(const char *const *names, const char *name) {
    for (; *names; names++)
        if (strcmp(*names, name) == 0) return true;
    return false;
}

jv okv_jinja_method(jctx *c, jv obj, const char *name) {
    const char *const *names = obj.kind == JV_STR ? str_methods : obj.kind == JV_DICT && !(obj.flags & (JV_F_NAMESPACE | JV_F_LOOP)) ? dict_methods
                               : obj.kind == JV_LIST ? list_methods : NULL;
    if (!names || !listed(names, name)) return okv_jv_undef();
    jfunc *fn = okv_jalloc(c->a, c->f, sizeof *fn);
    fn->kind = JF_METHOD;
    fn->name = okv_jstrdup(c->a, c->f, name, strlen(name));
    fn->self = obj;
    return (jv){.kind = JV_FUNC, .u.fn = fn};
}

/* ---- UTF-8 code points, for strip(chars) and case changes ---- */

static unsigned next_cp(const char *p, size_t n, size_t *i) {
    unsigned char c = (unsigned char)p[*i];
    int len = c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
    unsigned cp = len == 1 ? c : len == 2 ? c & 0x1F : len == 3 ? c & 0x0F : c & 0x07;
    size_t k = *i + 1;
    for (int j = 1; j < len && k < n && ((unsigned char)p[k] & 0xC0) == 0x80; j++, k++) cp = cp << 6 | ((unsigned char)p[k] & 0x3F);
    *i = k;
    return cp;
}

static bool py_space(unsigned cp) {
    return cp == ' ' || (cp >= 0x09 && cp <= 0x0D) || (cp >= 0x1C && cp <= 0x1F) || cp == 0x85 || cp == 0xA0 ||
           cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 || cp == 0x202F ||
           cp == 0x205F || cp == 0x3000;
}

static bool in_set(unsigned cp, jv chars) {
    size_t i = 0;
    if (chars.kind != JV_STR) return py_space(cp);
    while (i < chars.u.s.n)
        if (next_cp(chars.u.s.p, chars.u.s.n, &i) == cp) return true;
    return false;
}

static jv strip(jv s, jv chars, bool left, bool right) {
    const char *p = s.u.s.p;
    size_t from = 0, to = s.u.s.n;
    if (left)
        while (from < to) {
            size_t k = from;
            if (!in_set(next_cp(p, to, &k), chars)) break;
            from = k;
        }
    if (right)
        while (to > from) {
            size_t k = to - 1;
            while (k > from && ((unsigned char)p[k] & 0xC0) == 0x80) k--;
            size_t j = k;
            if (!in_set(next_cp(p, to, &j), chars)) break;
            to = k;
        }
    return okv_jv_str(p + from, to - from);
}

/* Case mapping for ASCII, Latin-1, Latin Extended-A, Greek and Cyrillic:
 * the letters chat content brings (Python maps all of Unicode; beyond these
 * ranges a letter is left as it is). */
static unsigned cp_upper(unsigned c) {
    if (c >= 'a' && c <= 'z') return c - 32;
    if ((c >= 0xE0 && c <= 0xFE && c != 0xF7)) return c - 32;
    if (c == 0xFF) return 0x178;
    if (c >= 0x100 && c <= 0x17F && c != 0x130 && c != 0x131 && c != 0x138 && c != 0x149 && c != 0x17F) {
        bool odd_lower = (c >= 0x139 && c <= 0x148) || (c >= 0x179 && c <= 0x17E);
        if (odd_lower ? (c & 1) == 0 : (c & 1) == 1) return c - 1;
        return c;
    }
    if (c >= 0x3B1 && c <= 0x3C9 && c != 0x3C2) return c - 32;
    if (c == 0x3C2) return 0x3A3;
    if (c >= 0x430 && c <= 0x44F) return c - 32;
    if (c >= 0x450 && c <= 0x45F) return c - 80;
    return c;
}

static unsigned cp_lower(unsigned c) {
    if (c >= 'A' && c <= 'Z') return c + 32;
    if (c >= 0xC0 && c <= 0xDE && c != 0xD7) return c + 32;
    if (c == 0x178) return 0xFF;
    if (c >= 0x100 && c <= 0x17F && c != 0x130 && c != 0x131 && c != 0x138 && c != 0x149 && c != 0x17F) {
        bool odd_lower = (c >= 0x139 && c <= 0x148) || (c >= 0x179 && c <= 0x17E);
        if (odd_lower ? (c & 1) == 1 : (c & 1) == 0) return c + 1;
        return c;
    }
    if (c >= 0x391 && c <= 0x3A9 && c != 0x3A2) return c + 32;
    if (c >= 0x410 && c <= 0x42F) return c + 32;
    if (c >= 0x400 && c <= 0x40F) return c + 80;
    return c;
}

static bool cp_cased(unsigned c) { return cp_upper(c) != c || cp_lower(c) != c; }

static void put_cp(jctx *c, jbuf *b, unsigned cp) {
    char u[4];
    size_t n;
    if (cp < 0x80) u[0] = (char)cp, n = 1;
    else if (cp < 0x800) u[0] = (char)(0xC0 | cp >> 6), u[1] = (char)(0x80 | (cp & 63)), n = 2;
    else if (cp < 0x10000)
        u[0] = (char)(0xE0 | cp >> 12), u[1] = (char)(0x80 | (cp >> 6 & 63)), u[2] = (char)(0x80 | (cp & 63)), n = 3;
    else
        u[0] = (char)(0xF0 | cp >> 18), u[1] = (char)(0x80 | (cp >> 12 & 63)), u[2] = (char)(0x80 | (cp >> 6 & 63)),
        u[3] = (char)(0x80 | (cp & 63)), n = 4;
    okv_jbuf_put(c->a, c->f, b, u, n);
}

static jv case_map(jctx *c, jv s, int mode) { /* 0 upper, 1 lower, 2 title (Python's), 3 capitalize */
    jbuf b = {0};
    okv_jbuf_put(c->a, c->f, &b, "", 0);
    bool prev_cased = false;
    for (size_t i = 0; i < s.u.s.n;) {
        size_t start = i;
        unsigned cp = next_cp(s.u.s.p, s.u.s.n, &i);
        if (cp > 0x10FFFF || (cp < 0x80 && i - start > 1)) { /* not UTF-8: the bytes as they are */
            okv_jbuf_put(c->a, c->f, &b, s.u.s.p + start, i - start);
            continue;
        }
        bool to_upper = mode == 0 || (mode == 2 && !prev_cased) || (mode == 3 && start == 0);
        unsigned out = to_upper ? cp_upper(cp) : cp_lower(cp);
        if (out == cp) okv_jbuf_put(c->a, c->f, &b, s.u.s.p + start, i - start);
        else put_cp(c, &b, out);
        prev_cased = cp_cased(cp);
    }
    return okv_jv_str(b.p, b.n);
}

static jv split(jctx *c, int line, jv s, jv sep, int64_t maxsplit, bool from_right) {
    jv out = okv_jv_list_new(c->a, c->f, 0);
    const char *p = s.u.s.p;
    size_t n = s.u.s.n;
    if (sep.kind == JV_STR) {
        size_t m = sep.u.s.n;
        if (m == 0) okv_jinja_fail(c->f, line, "split: empty separator");
        if (!from_right) {
            size_t start = 0;
            for (size_t i = 0; i + m <= n;) {
                if (maxsplit >= 0 && (int64_t)out.u.l->n >= maxsplit) break;
                if (memcmp(p + i, sep.u.s.p, m) == 0) {
                    okv_jv_list_push(c->a, c->f, out, okv_jv_str(p + start, i - start));
                    i += m;
                    start = i;
                } else
                    i++;
            }
            okv_jv_list_push(c->a, c->f, out, okv_jv_str(p + start, n - start));
            return out;
        }
        /* rsplit: pieces found from the right, then reversed */
        jv rev = okv_jv_list_new(c->a, c->f, 0);
        size_t end = n;
        for (size_t i = n; i >= m;) {
            if (maxsplit >= 0 && (int64_t)rev.u.l->n >= maxsplit) break;
            if (memcmp(p + i - m, sep.u.s.p, m) == 0) {
                okv_jv_list_push(c->a, c->f, rev, okv_jv_str(p + i, end - i));
                i -= m;
                end = i;
            } else
                i--;
        }
        okv_jv_list_push(c->a, c->f, rev, okv_jv_str(p, end));
        for (size_t i = rev.u.l->n; i-- > 0;) okv_jv_list_push(c->a, c->f, out, rev.u.l->v[i]);
        return out;
    }
    /* no separator: runs of whitespace, no empty pieces */
    if (from_right) {
        jv rev = okv_jv_list_new(c->a, c->f, 0);
        size_t i = n;
        for (;;) {
            while (i > 0 && py_space((unsigned char)p[i - 1])) i--;
            if (i == 0) break;
            if (maxsplit >= 0 && (int64_t)rev.u.l->n >= maxsplit) {
                okv_jv_list_push(c->a, c->f, rev, okv_jv_str(p, i));
                break;
            }
            size_t end = i;
            while (i > 0 && !py_space((unsigned char)p[i - 1])) i--;
            okv_jv_list_push(c->a, c->f, rev, okv_jv_str(p + i, end - i));
        }
        for (size_t k = rev.u.l->n; k-- > 0;) okv_jv_list_push(c->a, c->f, out, rev.u.l->v[k]);
        return out;
    }
    size_t i = 0;
    for (;;) {
        while (i < n && py_space((unsigned char)p[i])) i++;
        if (i >= n) break;
        if (maxsplit >= 0 && (int64_t)out.u.l->n >= maxsplit) {
            size_t end = n;
            while (end > i && py_space((unsigned char)p[end - 1])) end--;
            okv_jv_list_push(c->a, c->f, out, okv_jv_str(p + i, end - i));
            break;
        }
        size_t start = i;
        while (i < n && !py_space((unsigned char)p[i])) i++;
        okv_jv_list_push(c->a, c->f, out, okv_jv_str(p + start, i - start));
    }
    return out;
}

static bool affix(jctx *c, int line, jv s, jv x, bool end) {
    if (x.kind == JV_LIST) {
        for (size_t i = 0; i < x.u.l->n; i++)
            if (affix(c, line, s, x.u.l->v[i], end)) return true;
        return false;
    }
    if (x.kind != JV_STR) okv_jinja_fail(c->f, line, "%s arg must be str or a tuple of str, not %s", end ? "endswith" : "startswith", okv_jv_type_name(x));
    if (x.u.s.n > s.u.s.n) return false;
    return memcmp(s.u.s.p + (end ? s.u.s.n - x.u.s.n : 0), x.u.s.p, x.u.s.n) == 0;
}

static jv replace(jctx *c, jv s, jv old, jv new_, int64_t count) {
    jbuf b = {0};
    okv_jbuf_put(c->a, c->f, &b, "", 0);
    const char *p = s.u.s.p;
    size_t n = s.u.s.n, m = old.u.s.n;
    int64_t done = 0;
    if (m == 0) { /* Python inserts between every code point */
        size_t i = 0;
        while (count < 0 || done < count) {
            okv_jbuf_put(c->a, c->f, &b, new_.u.s.p, new_.u.s.n);
            done++;
            if (i >= n) break;
            size_t k = i;
            next_cp(p, n, &k);
            okv_jbuf_put(c->a, c->f, &b, p + i, k - i);
            i = k;
        }
        okv_jbuf_put(c->a, c->f, &b, p + i, n - i);
        return okv_jv_str(b.p, b.n);
    }
    size_t i = 0, start = 0;
    while (i + m <= n && (count < 0 || done < count)) {
        if (memcmp(p + i, old.u.s.p, m) == 0) {
            okv_jbuf_put(c->a, c->f, &b, p + start, i - start);
            okv_jbuf_put(c->a, c->f, &b, new_.u.s.p, new_.u.s.n);
            i += m;
            start = i;
            done++;
        } else
            i++;
    }
    okv_jbuf_put(c->a, c->f, &b, p + start, n - start);
    return okv_jv_str(b.p, b.n);
}

static jv need_str(jctx *c, int line, const char *method, jv v) {
    if (v.kind != JV_STR) okv_jinja_fail(c->f, line, "%s() argument must be str, not %s", method, okv_jv_type_name(v));
    return v;
}

static int64_t find(jv s, jv x, bool last) {
    if (x.u.s.n > s.u.s.n) return -1;
    if (!last) {
        const char *hit = x.u.s.n ? memmem(s.u.s.p, s.u.s.n, x.u.s.p, x.u.s.n) : s.u.s.p;
        return hit ? (int64_t)okv_jinja_utf8_len(s.u.s.p, (size_t)(hit - s.u.s.p)) : -1;
    }
    for (size_t i = s.u.s.n - x.u.s.n + 1; i-- > 0;)
        if (memcmp(s.u.s.p + i, x.u.s.p, x.u.s.n) == 0) return (int64_t)okv_jinja_utf8_len(s.u.s.p, i);
    return -1;
}

static jv str_method(jctx *c, const char *m, int line, jv s, jv *args, int n_args, const char **kwn, jv *kwv, int n_kw) {
    jv a0 = okv_jarg(args, n_args, 0, kwn, kwv, n_kw, NULL, okv_jv_none());
    if (!strcmp(m, "strip")) return strip(s, a0, true, true);
    if (!strcmp(m, "lstrip")) return strip(s, a0, true, false);
    if (!strcmp(m, "rstrip")) return strip(s, a0, false, true);
    if (!strcmp(m, "split") || !strcmp(m, "rsplit")) {
        jv sep = okv_jarg(args, n_args, 0, kwn, kwv, n_kw, "sep", okv_jv_none());
        jv max = okv_jarg(args, n_args, 1, kwn, kwv, n_kw, "maxsplit", okv_jv_int(-1));
        if (sep.kind != JV_NONE) need_str(c, line, m, sep);
        if (max.kind != JV_INT) okv_jinja_fail(c->f, line, "%s: maxsplit must be an integer", m);
        return split(c, line, s, sep, max.u.i, m[0] == 'r');
    }
    if (!strcmp(m, "startswith") || !strcmp(m, "endswith")) return okv_jv_bool(affix(c, line, s, a0, m[0] == 'e'));
    if (!strcmp(m, "replace")) {
        jv cnt = okv_jarg(args, n_args, 2, kwn, kwv, n_kw, "count", okv_jv_int(-1));
        return replace(c, s, need_str(c, line, m, a0), need_str(c, line, m, okv_jarg(args, n_args, 1, kwn, kwv, n_kw, NULL, okv_jv_none())),
                       cnt.kind == JV_INT ? cnt.u.i : -1);
    }
    if (!strcmp(m, "upper")) return case_map(c, s, 0);
    if (!strcmp(m, "lower")) return case_map(c, s, 1);
    if (!strcmp(m, "title")) return case_map(c, s, 2);
    if (!strcmp(m, "capitalize")) return case_map(c, s, 3);
    if (!strcmp(m, "find") || !strcmp(m, "rfind")) return okv_jv_int(find(s, need_str(c, line, m, a0), m[0] == 'r'));
    if (!strcmp(m, "index")) {
        int64_t i = find(s, need_str(c, line, m, a0), false);
        if (i < 0) okv_jinja_fail(c->f, line, "substring not found");
        return okv_jv_int(i);
    }
    if (!strcmp(m, "count")) {
        need_str(c, line, m, a0);
        if (a0.u.s.n == 0) return okv_jv_int((int64_t)okv_jinja_utf8_len(s.u.s.p, s.u.s.n) + 1);
        int64_t k = 0;
        for (size_t i = 0; i + a0.u.s.n <= s.u.s.n;)
            if (memcmp(s.u.s.p + i, a0.u.s.p, a0.u.s.n) == 0) {
                k++;
                i += a0.u.s.n;
            } else
                i++;
        return okv_jv_int(k);
    }
    if (!strcmp(m, "join")) {
        jv items = okv_jinja_iterable(c, line, a0);
        jbuf b = {0};
        okv_jbuf_put(c->a, c->f, &b, "", 0);
        for (size_t i = 0; i < items.u.l->n; i++) {
            if (i) okv_jbuf_put(c->a, c->f, &b, s.u.s.p, s.u.s.n);
            jv it = need_str(c, line, m, items.u.l->v[i]);
            okv_jbuf_put(c->a, c->f, &b, it.u.s.p, it.u.s.n);
        }
        return okv_jv_str(b.p, b.n);
    }
    if (!strcmp(m, "splitlines")) {
        jv out = okv_jv_list_new(c->a, c->f, 0);
        size_t start = 0, i = 0;
        while (i < s.u.s.n) {
            char ch = s.u.s.p[i];
            if (ch == '\n' || ch == '\r' || ch == '\v' || ch == '\f' || (ch >= 0x1c && ch <= 0x1e)) {
                okv_jv_list_push(c->a, c->f, out, okv_jv_str(s.u.s.p + start, i - start));
                i += ch == '\r' && i + 1 < s.u.s.n && s.u.s.p[i + 1] == '\n' ? 2 : 1;
                start = i;
            } else
                i++;
        }
        if (start < s.u.s.n) okv_jv_list_push(c->a, c->f, out, okv_jv_str(s.u.s.p + start, s.u.s.n - start));
        return out;
    }
    if (!strcmp(m, "removeprefix") || !strcmp(m, "removesuffix")) {
        bool end = m[6] == 's';
        need_str(c, line, m, a0);
        if (!affix(c, line, s, a0, end)) return s;
        return okv_jv_str(s.u.s.p + (end ? 0 : a0.u.s.n), s.u.s.n - a0.u.s.n);
    }
    /* the is* predicates, over ASCII classes */
    if (s.u.s.n == 0) return okv_jv_bool(false);
    bool all = true, cased = false;
    for (size_t i = 0; i < s.u.s.n; i++) {
        unsigned char ch = (unsigned char)s.u.s.p[i];
        bool digit = ch >= '0' && ch <= '9', up = ch >= 'A' && ch <= 'Z', lo = ch >= 'a' && ch <= 'z';
        if (!strcmp(m, "isdigit")) all &= digit;
        else if (!strcmp(m, "isalpha")) all &= up || lo;
        else if (!strcmp(m, "isalnum")) all &= up || lo || digit;
        else if (!strcmp(m, "isspace")) all &= py_space(ch);
        else if (!strcmp(m, "isupper")) {
            all &= !lo;
            cased |= up;
        } else if (!strcmp(m, "islower")) {
            all &= !up;
            cased |= lo;
        }
    }
    if (!strcmp(m, "isupper") || !strcmp(m, "islower")) return okv_jv_bool(all && cased);
    return okv_jv_bool(all);
}

jv okv_jinja_call_method(jctx *c, jfunc *fn, int line, jv *args, int n_args, const char **kwn, jv *kwv, int n_kw) {
    okv_jinja_tick_n(c, line, 1 + (fn->self.kind == JV_STR ? fn->self.u.s.n / 256 : fn->self.kind == JV_LIST ? fn->self.u.l->n : 0));
    jv self = fn->self;
    const char *m = fn->name;
    if (self.kind == JV_STR) return str_method(c, m, line, self, args, n_args, kwn, kwv, n_kw);
    if (self.kind == JV_DICT) {
        if (!strcmp(m, "get")) {
            jv *v = okv_jv_dict_find(self, okv_jarg(args, n_args, 0, kwn, kwv, n_kw, NULL, okv_jv_none()));
            return v ? *v : okv_jarg(args, n_args, 1, kwn, kwv, n_kw, "default", okv_jv_none());
        }
        jv out = okv_jv_list_new(c->a, c->f, self.u.d->n);
        for (size_t i = 0; i < self.u.d->n; i++) {
            if (!strcmp(m, "keys")) okv_jv_list_push(c->a, c->f, out, self.u.d->k[i]);
            else if (!strcmp(m, "values")) okv_jv_list_push(c->a, c->f, out, self.u.d->v[i]);
            else {
                jv pair = okv_jv_list_new(c->a, c->f, 2);
                pair.flags |= JV_F_TUPLE;
                okv_jv_list_push(c->a, c->f, pair, self.u.d->k[i]);
                okv_jv_list_push(c->a, c->f, pair, self.u.d->v[i]);
                okv_jv_list_push(c->a, c->f, out, pair);
            }
        }
        return out;
    }
    /* list.index / list.count */
    jv x = okv_jarg(args, n_args, 0, kwn, kwv, n_kw, NULL, okv_jv_none());
    int64_t k = 0;
    for (size_t i = 0; i < self.u.l->n; i++)
        if (okv_jv_equal(self.u.l->v[i], x)) {
            if (!strcmp(m, "index")) return okv_jv_int((int64_t)i);
            k++;
        }
    if (!strcmp(m, "index")) okv_jinja_fail(c->f, line, "list.index(x): x not in list");
    return okv_jv_int(k);
}
