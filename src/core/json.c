/* The library's JSON reader (RFC 8259, strict) and compact writer; see
 * core/json.h. */
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/json.h"
#include "core/strmap.h"

typedef struct jp {
    const char *s;
    size_t n, i;
    okv_error *err;
    bool failed;
} jp;

static void jfail(jp *p, const char *what) {
    if (p->failed) return;
    p->failed = true;
    okv_fail(p->err, strcmp(what, "out of memory") ? OKV_ERR_INVALID : OKV_ERR_NOMEM, "invalid JSON at byte %zu: %s",
             p->i, what);
}

static void ws(jp *p) {
    while (p->i < p->n && (p->s[p->i] == ' ' || p->s[p->i] == '\t' || p->s[p->i] == '\n' || p->s[p->i] == '\r')) p->i++;
}

void okv_json_free(okv_json *v) {
    if (!v) return;
    for (size_t i = 0; i < v->n; i++) {
        okv_json_free(v->items[i]);
        if (v->keys) free(v->keys[i]);
    }
    free(v->items);
    free(v->keys);
    free(v->key_lens);
    free(v->str);
    free(v);
}

void okv_sbuf_put(okv_sbuf *b, const char *s, size_t n) {
    if (b->oom) return;
    if (b->n + n + 1 > b->cap) {
        size_t cap = (b->cap ? b->cap : 64);
        while (cap < b->n + n + 1) cap *= 2;
        char *t = realloc(b->s, cap);
        if (!t) {
            b->oom = true;
            return;
        }
        b->s = t;
        b->cap = cap;
    }
    memcpy(b->s + b->n, s, n);
    b->n += n;
    b->s[b->n] = 0;
}

void okv_sbuf_puts(okv_sbuf *b, const char *s) { okv_sbuf_put(b, s, strlen(s)); }

void okv_sbuf_printf(okv_sbuf *b, const char *fmt, ...) {
    char tmp[512];
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (k < 0) return;
    if ((size_t)k < sizeof tmp) {
        okv_sbuf_put(b, tmp, (size_t)k);
        return;
    }
    char *big = malloc((size_t)k + 1);
    if (!big) {
        b->oom = true;
        return;
    }
    va_start(ap, fmt);
    vsnprintf(big, (size_t)k + 1, fmt, ap);
    va_end(ap);
    okv_sbuf_put(b, big, (size_t)k);
    free(big);
}

static void put_utf8(okv_sbuf *b, uint32_t cp) {
    char u[4];
    size_t k;
    if (cp < 0x80) u[0] = (char)cp, k = 1;
    else if (cp < 0x800) u[0] = (char)(0xC0 | (cp >> 6)), u[1] = (char)(0x80 | (cp & 63)), k = 2;
    else if (cp < 0x10000)
        u[0] = (char)(0xE0 | (cp >> 12)), u[1] = (char)(0x80 | ((cp >> 6) & 63)), u[2] = (char)(0x80 | (cp & 63)), k = 3;
    else
        u[0] = (char)(0xF0 | (cp >> 18)), u[1] = (char)(0x80 | ((cp >> 12) & 63)), u[2] = (char)(0x80 | ((cp >> 6) & 63)),
        u[3] = (char)(0x80 | (cp & 63)), k = 4;
    okv_sbuf_put(b, u, k);
}

static int hex4(jp *p, uint32_t *v) {
    *v = 0;
    for (int k = 0; k < 4; k++) {
        if (p->i >= p->n) return 0;
        char c = p->s[p->i++];
        int h = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
        if (h < 0) return 0;
        *v = *v * 16 + (uint32_t)h;
    }
    return 1;
}

static char *string(jp *p, size_t *len) {
    okv_sbuf b = {0};
    p->i++; /* the opening quote */
    for (;;) {
        if (p->i >= p->n) {
            jfail(p, "unterminated string");
            break;
        }
        unsigned char c = (unsigned char)p->s[p->i];
        if (c == '"') {
            p->i++;
            okv_sbuf_put(&b, "", 0);
            if (b.oom) {
                free(b.s);
                jfail(p, "out of memory");
                return NULL;
            }
            *len = b.n;
            return b.s;
        }
        if (c < 0x20) {
            jfail(p, "control character in a string");
            break;
        }
        if (c >= 0x80) {
            /* JSON text is UTF-8: a string's bytes must be whole characters. */
            const size_t at = p->i;
            int k = (c >= 0xC2 && c <= 0xDF) ? 1 : (c >= 0xE0 && c <= 0xEF) ? 2 : (c >= 0xF0 && c <= 0xF4) ? 3 : -1;
            bool ok = k > 0 && at + (size_t)k < p->n;
            uint32_t v = ok ? (c & (0x3Fu >> k)) : 0;
            for (int j = 1; ok && j <= k; j++) {
                const unsigned char d = (unsigned char)p->s[at + (size_t)j];
                ok = (d & 0xC0) == 0x80;
                v = (v << 6) | (d & 0x3Fu);
            }
            static const uint32_t least[4] = {0, 0x80, 0x800, 0x10000};
            if (!ok || v < least[k] || v > 0x10FFFF || (v >= 0xD800 && v < 0xE000)) {
                jfail(p, "invalid UTF-8 in a string");
                break;
            }
            okv_sbuf_put(&b, p->s + at, (size_t)k + 1);
            p->i += (size_t)k + 1;
            continue;
        }
        if (c != '\\') {
            okv_sbuf_put(&b, (const char *)&c, 1);
            p->i++;
            continue;
        }
        p->i++;
        char e = p->i < p->n ? p->s[p->i++] : 0;
        switch (e) {
        case '"': okv_sbuf_put(&b, "\"", 1); break;
        case '\\': okv_sbuf_put(&b, "\\", 1); break;
        case '/': okv_sbuf_put(&b, "/", 1); break;
        case 'b': okv_sbuf_put(&b, "\b", 1); break;
        case 'f': okv_sbuf_put(&b, "\f", 1); break;
        case 'n': okv_sbuf_put(&b, "\n", 1); break;
        case 'r': okv_sbuf_put(&b, "\r", 1); break;
        case 't': okv_sbuf_put(&b, "\t", 1); break;
        case 'u': {
            uint32_t cp;
            if (!hex4(p, &cp)) {
                jfail(p, "bad \\u escape");
                goto out;
            }
            if (cp >= 0xD800 && cp < 0xDC00 && p->i + 1 < p->n && p->s[p->i] == '\\' && p->s[p->i + 1] == 'u') {
                size_t save = p->i;
                p->i += 2;
                uint32_t lo;
                if (hex4(p, &lo) && lo >= 0xDC00 && lo < 0xE000) cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
                else p->i = save;
            }
            if (cp >= 0xD800 && cp < 0xE000) {
                /* Half a pair has no UTF-8 form (Python would fail to encode it later). */
                p->i -= 6;
                jfail(p, "a lone surrogate escape");
                goto out;
            }
            put_utf8(&b, cp);
            break;
        }
        default: jfail(p, "bad escape"); goto out;
        }
    }
out:
    free(b.s);
    return NULL;
}

static okv_json *value(jp *p, int depth);

static okv_json *newv(jp *p, okv_json_type t) {
    okv_json *v = calloc(1, sizeof *v);
    if (!v) jfail(p, "out of memory");
    else v->type = t;
    return v;
}

static bool grow(okv_json *v, size_t *cap, bool keys) {
    if (v->n < *cap) return true;
    size_t c = *cap ? *cap * 2 : 4;
    okv_json **it = realloc(v->items, c * sizeof *it);
    if (!it) return false;
    v->items = it;
    if (keys) {
        char **k = realloc(v->keys, c * sizeof *k);
        if (!k) return false;
        v->keys = k;
        size_t *kl = realloc(v->key_lens, c * sizeof *kl);
        if (!kl) return false;
        v->key_lens = kl;
    }
    *cap = c;
    return true;
}

static okv_json *value(jp *p, int depth) {
    if (depth >= OKV_JSON_MAX_DEPTH) {
        jfail(p, "nesting too deep");
        return NULL;
    }
    ws(p);
    if (p->i >= p->n) {
        jfail(p, "unexpected end");
        return NULL;
    }
    char c = p->s[p->i];
    if (c == '{' || c == '[') {
        const bool obj = c == '{';
        okv_json *v = newv(p, obj ? OKV_JSON_OBJECT : OKV_JSON_ARRAY);
        okv_strmap seen = {0}; /* the keys so far, past a few */
        if (!v) return NULL;
        size_t cap = 0, kl = 0;
        bool oom = false;
        p->i++;
        ws(p);
        if (p->i < p->n && p->s[p->i] == (obj ? '}' : ']')) {
            p->i++;
            return v;
        }
        for (;;) {
            if (!grow(v, &cap, obj)) {
                jfail(p, "out of memory");
                break;
            }
            char *key = NULL;
            if (obj) {
                ws(p);
                if (p->i >= p->n || p->s[p->i] != '"') {
                    jfail(p, "expected a key");
                    break;
                }
                const size_t key_at = p->i;
                key = string(p, &kl);
                if (!key) break;
                bool dup = false;
                if (v->n < 16) {
                    for (size_t k = 0; k < v->n && !dup; k++)
                        dup = v->key_lens[k] == kl && memcmp(v->keys[k], key, kl) == 0;
                } else {
                    if (!seen.n)
                        for (size_t k = 0; k < v->n; k++)
                            if (!okv_strmap_put(&seen, v->keys[k], v->key_lens[k], 0)) oom = true;
                    dup = okv_strmap_get(&seen, key, kl) >= 0;
                    if (!dup && !okv_strmap_put(&seen, key, kl, 0)) oom = true;
                }
                if (oom || dup) {
                    char why[96];
                    snprintf(why, sizeof why, "the key \"%.*s\" given twice", kl > 48 ? 48 : (int)kl, key);
                    free(key);
                    if (dup) p->i = key_at;
                    jfail(p, oom ? "out of memory" : why);
                    break;
                }
                ws(p);
                if (p->i >= p->n || p->s[p->i] != ':') {
                    free(key);
                    jfail(p, "expected ':'");
                    break;
                }
                p->i++;
            }
            okv_json *item = value(p, depth + 1);
            if (!item) {
                free(key);
                break;
            }
            if (obj) {
                v->keys[v->n] = key;
                v->key_lens[v->n] = kl;
            }
            v->items[v->n++] = item;
            ws(p);
            if (p->i < p->n && p->s[p->i] == ',') {
                p->i++;
                continue;
            }
            if (p->i < p->n && p->s[p->i] == (obj ? '}' : ']')) {
                p->i++;
                okv_strmap_free(&seen);
                return v;
            }
            jfail(p, obj ? "expected ',' or '}'" : "expected ',' or ']'");
            break;
        }
        okv_strmap_free(&seen);
        okv_json_free(v);
        return NULL;
    }
    if (c == '"') {
        okv_json *v = newv(p, OKV_JSON_STRING);
        if (!v) return NULL;
        v->str = string(p, &v->len);
        if (!v->str) {
            free(v);
            return NULL;
        }
        return v;
    }
    static const struct {
        const char *w;
        okv_json_type t;
        bool b;
    } words[] = {{"true", OKV_JSON_BOOL, true}, {"false", OKV_JSON_BOOL, false}, {"null", OKV_JSON_NULL, false}};
    for (size_t k = 0; k < 3; k++) {
        size_t wl = strlen(words[k].w);
        if (p->n - p->i >= wl && memcmp(p->s + p->i, words[k].w, wl) == 0) {
            p->i += wl;
            okv_json *v = newv(p, words[k].t);
            if (v) v->b = words[k].b;
            return v;
        }
    }
    /* A number, by JSON's grammar. */
    size_t st = p->i;
    if (p->i < p->n && p->s[p->i] == '-') p->i++;
    if (p->i < p->n && p->s[p->i] == '0') p->i++;
    else if (p->i < p->n && p->s[p->i] >= '1' && p->s[p->i] <= '9')
        while (p->i < p->n && p->s[p->i] >= '0' && p->s[p->i] <= '9') p->i++;
    else {
        p->i = st;
        jfail(p, "unexpected character");
        return NULL;
    }
    if (p->i < p->n && p->s[p->i] == '.') {
        p->i++;
        size_t d = p->i;
        while (p->i < p->n && p->s[p->i] >= '0' && p->s[p->i] <= '9') p->i++;
        if (p->i == d) {
            jfail(p, "digits expected after '.'");
            return NULL;
        }
    }
    if (p->i < p->n && (p->s[p->i] == 'e' || p->s[p->i] == 'E')) {
        p->i++;
        if (p->i < p->n && (p->s[p->i] == '+' || p->s[p->i] == '-')) p->i++;
        size_t d = p->i;
        while (p->i < p->n && p->s[p->i] >= '0' && p->s[p->i] <= '9') p->i++;
        if (p->i == d) {
            jfail(p, "digits expected in the exponent");
            return NULL;
        }
    }
    okv_json *v = newv(p, OKV_JSON_NUMBER);
    if (!v) return NULL;
    v->len = p->i - st;
    v->str = malloc(v->len + 1);
    if (!v->str) {
        free(v);
        jfail(p, "out of memory");
        return NULL;
    }
    memcpy(v->str, p->s + st, v->len);
    v->str[v->len] = 0;
    v->num = strtod(v->str, NULL);
    return v;
}

okv_json *okv_json_parse(const char *text, size_t len, okv_error *err) {
    okv_error_clear(err);
    if (!text) {
        okv_fail(err, OKV_ERR_INVALID, "JSON text is NULL");
        return NULL;
    }
    jp p = {text, len, 0, err, false};
    okv_json *v = value(&p, 0);
    if (v) {
        ws(&p);
        if (p.i != p.n) {
            jfail(&p, "trailing text");
            okv_json_free(v);
            v = NULL;
        }
    }
    return v;
}

const okv_json *okv_json_get(const okv_json *obj, const char *key) {
    if (!obj || obj->type != OKV_JSON_OBJECT) return NULL;
    const size_t n = strlen(key);
    for (size_t i = 0; i < obj->n; i++)
        if (obj->key_lens[i] == n && memcmp(obj->keys[i], key, n) == 0) return obj->items[i];
    return NULL;
}

void okv_json_write_string(okv_sbuf *b, const char *s, size_t n) {
    okv_sbuf_put(b, "\"", 1);
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"') okv_sbuf_put(b, "\\\"", 2);
        else if (c == '\\') okv_sbuf_put(b, "\\\\", 2);
        else if (c == '\n') okv_sbuf_put(b, "\\n", 2);
        else if (c == '\r') okv_sbuf_put(b, "\\r", 2);
        else if (c == '\t') okv_sbuf_put(b, "\\t", 2);
        else if (c < 0x20) okv_sbuf_printf(b, "\\u%04x", c);
        else okv_sbuf_put(b, (const char *)&c, 1);
    }
    okv_sbuf_put(b, "\"", 1);
}

void okv_json_write(okv_sbuf *b, const okv_json *v) {
    switch (v->type) {
    case OKV_JSON_NULL: okv_sbuf_puts(b, "null"); break;
    case OKV_JSON_BOOL: okv_sbuf_puts(b, v->b ? "true" : "false"); break;
    case OKV_JSON_NUMBER: okv_sbuf_put(b, v->str, v->len); break;
    case OKV_JSON_STRING: okv_json_write_string(b, v->str, v->len); break;
    case OKV_JSON_ARRAY:
    case OKV_JSON_OBJECT:
        okv_sbuf_put(b, v->type == OKV_JSON_ARRAY ? "[" : "{", 1);
        for (size_t i = 0; i < v->n; i++) {
            if (i) okv_sbuf_put(b, ",", 1);
            if (v->type == OKV_JSON_OBJECT) {
                okv_json_write_string(b, v->keys[i], v->key_lens[i]);
                okv_sbuf_put(b, ":", 1);
            }
            okv_json_write(b, v->items[i]);
        }
        okv_sbuf_put(b, v->type == OKV_JSON_ARRAY ? "]" : "}", 1);
        break;
    }
}
