/* Internal: a small JSON reader for the schema converter (the library must
 * not depend on cJSON, which only the server links).  Values keep object
 * members in document order and numbers' source text, so a schema's enum
 * and const values are written back exactly as given. */
#ifndef OKV_GRAMMAR_JSON_H
#define OKV_GRAMMAR_JSON_H

#include <stdbool.h>
#include <stddef.h>

#include "offkv/status.h"

typedef enum { JV_NULL, JV_BOOL, JV_NUMBER, JV_STRING, JV_ARRAY, JV_OBJECT } jv_type;

typedef struct jv jv;
struct jv {
    jv_type type;
    bool b;
    double num;
    char *str;     /* string (decoded, NUL-terminated; len may include NULs) or number text */
    size_t len;
    jv **items;    /* array items or object values */
    char **keys;   /* object keys (decoded, NUL-terminated) */
    size_t n;
};

/* Parses len bytes; NULL with OKV_ERR_INVALID naming the offset.  Nesting
 * deeper than 512 is refused. */
jv *okv_json_parse(const char *text, size_t len, okv_error *err);
void okv_json_free(jv *v);

/* The member `key` of an object, or NULL. */
const jv *okv_json_get(const jv *obj, const char *key);

/* Appends v as compact JSON text to *buf (a growable string); false on
 * memory. */
typedef struct okv_sbuf {
    char *s;
    size_t n, cap;
    bool oom;
} okv_sbuf;
void okv_sbuf_put(okv_sbuf *b, const char *s, size_t n);
void okv_sbuf_puts(okv_sbuf *b, const char *s);
void okv_sbuf_printf(okv_sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void okv_json_write(okv_sbuf *b, const jv *v);
/* A JSON string literal of s[0..n) (quoted, escaped). */
void okv_json_write_string(okv_sbuf *b, const char *s, size_t n);

#endif
