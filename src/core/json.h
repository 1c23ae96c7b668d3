/* Internal: the library's one JSON reader (RFC 8259, strict), and a
 * compact writer.  The schema converter (grammar/schema.c) reads its tree;
 * the chat templates (chat/json.c) turn it into template values.  Values
 * keep object members in document order and numbers' source text, so a
 * schema's enum and const values are written back exactly as given and a
 * template tells 1 from 1.0.
 *
 * Strict where the two readers it replaces differed: nesting deeper than
 * 256, a key given twice, a lone surrogate escape and bytes that are not
 * UTF-8 are errors; strings and keys keep their length, so a \u0000 never
 * cuts one short. */
#ifndef OKV_CORE_JSON_H
#define OKV_CORE_JSON_H

#include <stdbool.h>
#include <stddef.h>

#include "offkv/status.h"

typedef enum { OKV_JSON_NULL, OKV_JSON_BOOL, OKV_JSON_NUMBER, OKV_JSON_STRING, OKV_JSON_ARRAY, OKV_JSON_OBJECT } okv_json_type;

typedef struct okv_json okv_json;
struct okv_json {
    okv_json_type type;
    bool b;
    double num;
    char *str;     /* string (decoded, NUL-terminated; len may include NULs) or number text */
    size_t len;
    okv_json **items;    /* array items or object values */
    char **keys;   /* object keys (decoded, NUL-terminated) */
    size_t *key_lens; /* their lengths (a key may hold a NUL) */
    size_t n;
};

#define OKV_JSON_MAX_DEPTH 256

/* Parses len bytes: NULL on failure, with OKV_ERR_INVALID and the message
 * "invalid JSON at byte N: why" (OKV_ERR_NOMEM when memory runs out). */
okv_json *okv_json_parse(const char *text, size_t len, okv_error *err);
void okv_json_free(okv_json *v);

/* The member `key` (the whole key: one holding a NUL past `key` differs)
 * of an object, or NULL. */
const okv_json *okv_json_get(const okv_json *obj, const char *key);

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
void okv_json_write(okv_sbuf *b, const okv_json *v);
/* A JSON string literal of s[0..n) (quoted, escaped). */
void okv_json_write_string(okv_sbuf *b, const char *s, size_t n);

#endif
