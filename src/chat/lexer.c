/* Template source to tokens, with the whitespace rules of Hugging Face's
 * environment: trim_blocks (a block or comment tag eats the newline after
 * it), lstrip_blocks (spaces and tabs before a block or comment tag at the
 * start of a line go), "-" on a tag strips all whitespace on that side and
 * "+" keeps it.  As jinja2 does, newlines are normalised to "\n" and one
 * trailing newline of the source is dropped (keep_trailing_newline=False). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "chat/jinja.h"

typedef struct lx {
    jarena *a;
    jfail *f;
    const char *s;
    size_t n, pos;
    jtok *t;
    size_t nt, cap;
    size_t seen, seen_line_start; /* pos_of's cursor: tokens come in order */
    int seen_line;
} lx;

static bool is_ws(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; }

static void pos_of(lx *l, size_t at, int *line, int *col) {
    if (at < l->seen) { /* a failure pointing back: count again */
        l->seen = 0;
        l->seen_line = 1;
        l->seen_line_start = 0;
    }
    for (; l->seen < at && l->seen < l->n; l->seen++)
        if (l->s[l->seen] == '\n') {
            l->seen_line++;
            l->seen_line_start = l->seen + 1;
        }
    *line = l->seen_line;
    *col = (int)(at - l->seen_line_start) + 1;
}

static _Noreturn void lfail(lx *l, size_t at, const char *msg) {
    int line, col;
    pos_of(l, at, &line, &col);
    l->f->err.column = col;
    okv_jinja_fail(l->f, line, "%s", msg);
}

static jtok *push(lx *l, jtok_type type, size_t at) {
    if (l->nt == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 256;
        jtok *t = okv_jalloc(l->a, l->f, cap * sizeof *t);
        if (l->nt) memcpy(t, l->t, l->nt * sizeof *t);
        l->t = t;
        l->cap = cap;
    }
    jtok *t = &l->t[l->nt++];
    memset(t, 0, sizeof *t);
    t->type = type;
    pos_of(l, at, &t->line, &t->column);
    return t;
}

static void put_utf8(jbuf *b, lx *l, unsigned cp) {
    char u[4];
    int n;
    if (cp < 0x80) u[0] = (char)cp, n = 1;
    else if (cp < 0x800) u[0] = (char)(0xC0 | cp >> 6), u[1] = (char)(0x80 | (cp & 63)), n = 2;
    else if (cp < 0x10000)
        u[0] = (char)(0xE0 | cp >> 12), u[1] = (char)(0x80 | (cp >> 6 & 63)), u[2] = (char)(0x80 | (cp & 63)), n = 3;
    else
        u[0] = (char)(0xF0 | cp >> 18), u[1] = (char)(0x80 | (cp >> 12 & 63)), u[2] = (char)(0x80 | (cp >> 6 & 63)),
        u[3] = (char)(0x80 | (cp & 63)), n = 4;
    okv_jbuf_put(l->a, l->f, b, u, (size_t)n);
}

static int hexval(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* A string literal with Python's escapes. */
static void lex_string(lx *l) {
    size_t start = l->pos;
    char q = l->s[l->pos++];
    jbuf b = {0};
    okv_jbuf_put(l->a, l->f, &b, "", 0);
    for (;;) {
        if (l->pos >= l->n) lfail(l, start, "unexpected end of template in a string literal");
        char c = l->s[l->pos++];
        if (c == q) break;
        if (c != '\\') {
            okv_jbuf_putc(l->a, l->f, &b, c);
            continue;
        }
        if (l->pos >= l->n) lfail(l, start, "unexpected end of template in a string literal");
        c = l->s[l->pos++];
        int digits = 0;
        switch (c) {
        case 'n': okv_jbuf_putc(l->a, l->f, &b, '\n'); break;
        case 't': okv_jbuf_putc(l->a, l->f, &b, '\t'); break;
        case 'r': okv_jbuf_putc(l->a, l->f, &b, '\r'); break;
        case '0': okv_jbuf_putc(l->a, l->f, &b, '\0'); break;
        case 'a': okv_jbuf_putc(l->a, l->f, &b, '\a'); break;
        case 'b': okv_jbuf_putc(l->a, l->f, &b, '\b'); break;
        case 'f': okv_jbuf_putc(l->a, l->f, &b, '\f'); break;
        case 'v': okv_jbuf_putc(l->a, l->f, &b, '\v'); break;
        case '\\': case '\'': case '"': okv_jbuf_putc(l->a, l->f, &b, c); break;
        case '\n': break; /* a line continuation */
        case 'x': digits = 2; break;
        case 'u': digits = 4; break;
        case 'U': digits = 8; break;
        default:
            okv_jbuf_putc(l->a, l->f, &b, '\\');
            okv_jbuf_putc(l->a, l->f, &b, c);
        }
        if (digits) {
            unsigned cp = 0;
            for (int k = 0; k < digits; k++) {
                int h = l->pos < l->n ? hexval(l->s[l->pos]) : -1;
                if (h < 0) lfail(l, start, "a truncated \\x, \\u or \\U escape in a string literal");
                cp = cp * 16 + (unsigned)h;
                l->pos++;
            }
            if (cp > 0x10FFFF || (cp >= 0xD800 && cp < 0xE000)) lfail(l, start, "an escape outside Unicode");
            put_utf8(&b, l, cp);
        }
    }
    jtok *t = push(l, JT_STRING, start);
    t->p = b.p;
    t->n = b.n;
}

static const char *const ops[] = {"//", "**", "==", "!=", "<=", ">=", "+", "-", "*", "/", "%", "~", "<", ">",
                                  "=",  "(",  ")",  "[",  "]",  "{",  "}", ",", ".", ":", "|", ";", NULL};

/* The tokens of one {{ }} or {% %} tag, up to and past its end. */
static void lex_tag(lx *l, bool block, size_t tag_at) {
    int depth = 0;
    for (;;) {
        while (l->pos < l->n && is_ws(l->s[l->pos])) l->pos++;
        if (l->pos >= l->n) lfail(l, tag_at, block ? "unexpected end of template: the block tag is not closed ('%}')" : "unexpected end of template: the expression is not closed ('}}')");
        const char *p = l->s + l->pos;
        size_t left = l->n - l->pos;
        if (depth == 0) {
            const char *end = block ? "%}" : "}}";
            char sign = 0;
            if (left >= 3 && (p[0] == '-' || p[0] == '+') && p[1] == end[0] && p[2] == end[1]) sign = p[0];
            if (sign || (left >= 2 && p[0] == end[0] && p[1] == end[1])) {
                push(l, block ? JT_BLOCK_END : JT_VAR_END, l->pos);
                l->pos += sign ? 3 : 2;
                if (sign == '-')
                    while (l->pos < l->n && is_ws(l->s[l->pos])) l->pos++;
                else if (sign != '+' && block && l->pos < l->n && l->s[l->pos] == '\n')
                    l->pos++; /* trim_blocks */
                return;
            }
        }
        char c = *p;
        if (c == '\'' || c == '"') {
            lex_string(l);
        } else if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_') {
            size_t k = 1;
            while (k < left && ((p[k] >= 'a' && p[k] <= 'z') || (p[k] >= 'A' && p[k] <= 'Z') || p[k] == '_' ||
                                (p[k] >= '0' && p[k] <= '9')))
                k++;
            jtok *t = push(l, JT_NAME, l->pos);
            t->p = p;
            t->n = k;
            l->pos += k;
        } else if (c >= '0' && c <= '9') {
            size_t k = 0;
            bool is_float = false;
            char num[64];
            size_t nn = 0;
            while (k < left && ((p[k] >= '0' && p[k] <= '9') || p[k] == '_')) {
                if (p[k] != '_' && nn < sizeof num - 1) num[nn++] = p[k];
                k++;
            }
            if (k + 1 < left && p[k] == '.' && p[k + 1] >= '0' && p[k + 1] <= '9') {
                is_float = true;
                if (nn < sizeof num - 1) num[nn++] = '.'; /* else too long, below */
                k++;
                while (k < left && p[k] >= '0' && p[k] <= '9') {
                    if (nn < sizeof num - 1) num[nn++] = p[k];
                    k++;
                }
            }
            if (k < left && (p[k] == 'e' || p[k] == 'E')) {
                size_t e = k + 1;
                if (e < left && (p[e] == '+' || p[e] == '-')) e++;
                if (e < left && p[e] >= '0' && p[e] <= '9') {
                    is_float = true;
                    while (k < e) {
                        if (nn < sizeof num - 1) num[nn++] = p[k];
                        k++;
                    }
                    while (k < left && p[k] >= '0' && p[k] <= '9') {
                        if (nn < sizeof num - 1) num[nn++] = p[k];
                        k++;
                    }
                }
            }
            num[nn] = '\0';
            if (nn >= sizeof num - 1) lfail(l, l->pos, "a number literal too long");
            jtok *t = push(l, is_float ? JT_FLOAT : JT_INT, l->pos);
            if (is_float) t->f = strtod(num, NULL);
            else {
                errno = 0;
                long long v = strtoll(num, NULL, 10);
                if (errno) lfail(l, l->pos, "an integer literal beyond 64 bits");
                t->i = v;
            }
            l->pos += k;
        } else {
            int k;
            for (k = 0; ops[k]; k++) {
                size_t on = strlen(ops[k]);
                if (left >= on && memcmp(p, ops[k], on) == 0) break;
            }
            if (!ops[k]) lfail(l, l->pos, "unexpected character in a tag");
            if (c == '(' || c == '[' || c == '{') depth++;
            if (c == ')' || c == ']' || c == '}') {
                if (depth == 0) lfail(l, l->pos, "unbalanced closing bracket");
                depth--;
            }
            jtok *t = push(l, JT_OP, l->pos);
            t->p = ops[k];
            t->n = strlen(ops[k]);
            l->pos += t->n;
        }
    }
}

static void emit_text(lx *l, size_t at, const char *p, size_t n) {
    if (!n) return;
    jtok *t = push(l, JT_TEXT, at);
    t->p = p;
    t->n = n;
}

/* {% raw %} ... {% endraw %}: the body is text, tags and all. */
static bool raw_block(lx *l) {
    size_t nt = l->nt;
    if (nt < 3 || l->t[nt - 3].type != JT_BLOCK_BEGIN || l->t[nt - 2].type != JT_NAME || l->t[nt - 2].n != 3 ||
        memcmp(l->t[nt - 2].p, "raw", 3) != 0)
        return false;
    l->nt -= 3;
    for (size_t i = l->pos; i + 1 < l->n; i++) {
        if (l->s[i] != '{' || l->s[i + 1] != '%') continue;
        size_t k = i + 2;
        char lsign = k < l->n ? l->s[k] : 0;
        if (lsign == '-' || lsign == '+') k++;
        while (k < l->n && is_ws(l->s[k])) k++;
        if (l->n - k < 6 || memcmp(l->s + k, "endraw", 6) != 0) continue;
        k += 6;
        while (k < l->n && is_ws(l->s[k])) k++;
        char rsign = 0;
        if (k < l->n && (l->s[k] == '-' || l->s[k] == '+')) rsign = l->s[k++];
        if (l->n - k < 2 || l->s[k] != '%' || l->s[k + 1] != '}') continue;
        size_t end = i;
        if (lsign == '-')
            while (end > l->pos && is_ws(l->s[end - 1])) end--;
        emit_text(l, l->pos, l->s + l->pos, end - l->pos);
        l->pos = k + 2;
        if (rsign == '-')
            while (l->pos < l->n && is_ws(l->s[l->pos])) l->pos++;
        else if (rsign != '+' && l->pos < l->n && l->s[l->pos] == '\n')
            l->pos++;
        return true;
    }
    lfail(l, l->pos, "missing {% endraw %}");
}

jtok *okv_jinja_lex(jarena *a, jfail *f, const char *src, size_t n, size_t *n_tok) {
    /* Newlines to "\n", and one trailing newline dropped. */
    char *s = okv_jalloc(a, f, n + 1);
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        if (src[i] == '\r') {
            s[m++] = '\n';
            if (i + 1 < n && src[i + 1] == '\n') i++;
        } else
            s[m++] = src[i];
    }
    if (m && s[m - 1] == '\n') m--;
    s[m] = '\0';
    lx l = {a, f, s, m, 0, NULL, 0, 0, 0, 0, 1};
    while (l.pos < l.n) {
        /* The next tag start. */
        size_t at = l.pos;
        while (at + 1 < l.n && !(l.s[at] == '{' && (l.s[at + 1] == '{' || l.s[at + 1] == '%' || l.s[at + 1] == '#'))) at++;
        if (at + 1 >= l.n) {
            emit_text(&l, l.pos, l.s + l.pos, l.n - l.pos);
            break;
        }
        char kind = l.s[at + 1];
        char sign = at + 2 < l.n ? l.s[at + 2] : 0;
        if (sign != '-' && sign != '+') sign = 0;
        size_t text_end = at;
        if (sign == '-') {
            while (text_end > l.pos && is_ws(l.s[text_end - 1])) text_end--;
        } else if (sign != '+' && kind != '{') {
            /* lstrip_blocks: only spaces and tabs since the line start. */
            size_t ls = text_end;
            while (ls > l.pos && l.s[ls - 1] != '\n') ls--;
            bool line_start = ls > l.pos || l.pos == 0 || l.s[l.pos - 1] == '\n';
            bool blank = true;
            for (size_t k = ls; k < text_end; k++)
                if (!is_ws(l.s[k])) blank = false;
            if (line_start && blank) text_end = ls;
        }
        emit_text(&l, l.pos, l.s + l.pos, text_end - l.pos);
        l.pos = at + 2 + (sign ? 1 : 0);
        if (kind == '#') {
            size_t k = l.pos;
            while (k + 1 < l.n && !(l.s[k] == '#' && l.s[k + 1] == '}')) k++;
            if (k + 1 >= l.n) lfail(&l, at, "missing end of comment tag");
            char rsign = k > l.pos && (l.s[k - 1] == '-' || l.s[k - 1] == '+') ? l.s[k - 1] : 0;
            l.pos = k + 2;
            if (rsign == '-')
                while (l.pos < l.n && is_ws(l.s[l.pos])) l.pos++;
            else if (rsign != '+' && l.pos < l.n && l.s[l.pos] == '\n')
                l.pos++;
            continue;
        }
        push(&l, kind == '{' ? JT_VAR_BEGIN : JT_BLOCK_BEGIN, at);
        lex_tag(&l, kind == '%', at);
        if (kind == '%') raw_block(&l);
    }
    push(&l, JT_EOF, l.n);
    *n_tok = l.nt;
    return l.t;
}
