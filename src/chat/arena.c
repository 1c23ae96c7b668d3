/* The arena every parse and render allocates from, its byte budget, and
 * the failure jump (see jinja.h). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chat/jinja.h"

struct jchunk {
    jchunk *next;
    size_t size, used;
    _Alignas(16) unsigned char data[];
};

void okv_jarena_init(jarena *a, size_t budget) {
    a->head = NULL;
    a->used = 0;
    a->budget = budget;
}

void okv_jarena_free(jarena *a) {
    for (jchunk *c = a->head, *next; c; c = next) {
        next = c->next;
        free(c);
    }
    a->head = NULL;
    a->used = 0;
}

void *okv_jalloc(jarena *a, jfail *f, size_t n) {
    n = (n + 15) & ~(size_t)15;
    if (n == 0) n = 16;
    if (n > a->budget - a->used || a->used > a->budget)
        okv_jinja_fail(f, 0, "the template needs more than %zu bytes of memory", a->budget);
    jchunk *c = a->head;
    if (!c || c->size - c->used < n) {
        size_t size = n > 65536 ? n : 65536;
        c = malloc(sizeof *c + size);
        if (!c) okv_jinja_fail(f, 0, "out of memory");
        c->size = size;
        c->used = 0;
        c->next = a->head;
        a->head = c;
    }
    void *p = c->data + c->used;
    c->used += n;
    a->used += n;
    memset(p, 0, n);
    return p;
}

char *okv_jstrdup(jarena *a, jfail *f, const char *s, size_t n) {
    char *p = okv_jalloc(a, f, n + 1);
    if (n) memcpy(p, s, n);
    p[n] = '\0';
    return p;
}

void okv_jinja_fail(jfail *f, int line, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(f->err.message, sizeof f->err.message, fmt, ap);
    va_end(ap);
    if (line && !f->err.line) f->err.line = line;
    longjmp(f->env, 1);
}

static void jbuf_grow(jarena *a, jfail *f, jbuf *b, size_t extra) {
    if (b->cap - b->n > extra) return;
    size_t cap = b->cap ? b->cap * 2 : 64;
    while (cap - b->n <= extra) cap *= 2;
    char *p = okv_jalloc(a, f, cap);
    if (b->n) memcpy(p, b->p, b->n);
    b->p = p;
    b->cap = cap;
}

void okv_jbuf_put(jarena *a, jfail *f, jbuf *b, const char *s, size_t n) {
    jbuf_grow(a, f, b, n);
    if (n) memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = '\0';
}

void okv_jbuf_puts(jarena *a, jfail *f, jbuf *b, const char *s) { okv_jbuf_put(a, f, b, s, strlen(s)); }

void okv_jbuf_putc(jarena *a, jfail *f, jbuf *b, char c) { okv_jbuf_put(a, f, b, &c, 1); }

void okv_jbuf_printf(jarena *a, jfail *f, jbuf *b, const char *fmt, ...) {
    char tmp[256];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (n < 0) n = 0;
    if ((size_t)n >= sizeof tmp) n = sizeof tmp - 1; /* callers format numbers only */
    okv_jbuf_put(a, f, b, tmp, (size_t)n);
}
