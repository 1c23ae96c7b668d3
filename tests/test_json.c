/* The library's one JSON reader (src/core/json.c), directly and through
 * both of its callers: the JSON Schema converter and the chat templates'
 * messages.  Expectations are written out by hand from RFC 8259 and the
 * reader's documented limits: a key given twice, nesting past 256, a lone
 * surrogate escape and bytes that are not UTF-8 are errors naming the
 * byte; a \u0000 inside a key never makes it equal to its prefix. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "core/json.h"
#include "offkv/chat.h"
#include "offkv/grammar.h"

static void refused(const char *text, const char *why) {
    okv_error err;
    okv_json *v = okv_json_parse(text, strlen(text), &err);
    CHECK(!v && err.status == OKV_ERR_INVALID && strstr(err.message, why), "%.60s: want '%s', got '%s'", text, why,
          v ? "(parsed)" : err.message);
    okv_json_free(v);
}

static okv_json *parsed(const char *text, size_t len) {
    okv_error err;
    okv_json *v = okv_json_parse(text, len, &err);
    CHECK(v != NULL, "%.60s: %s", text, err.message);
    return v;
}

/* An object of n members "k0".."k{n-1}", the last key repeated as "k{dup}"
 * when dup >= 0. */
static char *object_of(int n, int dup) {
    char *s = malloc((size_t)n * 16 + 32), *p = s;
    p += sprintf(p, "{");
    for (int i = 0; i < n; i++) p += sprintf(p, "%s\"k%d\": %d", i ? ", " : "", i == n - 1 && dup >= 0 ? dup : i, i);
    sprintf(p, "}");
    return s;
}

static void reader(void) {
    /* Keys given twice: the second is the error, at its byte. */
    refused("{\"a\": 1, \"a\": 2}", "at byte 9: the key \"a\" given twice");
    char *big = object_of(40, 7); /* past the linear scan: the hash path */
    refused(big, "the key \"k7\" given twice");
    free(big);
    big = object_of(40, -1);
    okv_json *v = parsed(big, strlen(big));
    CHECK(v && v->n == 40 && okv_json_get(v, "k39") && okv_json_get(v, "k39")->num == 39.0, "40 distinct keys");
    okv_json_free(v);
    free(big);
    /* The same key in two objects is no repeat. */
    okv_json_free(parsed("[{\"a\": 1}, {\"a\": 2}]", 20));

    /* 256 levels are read, 257 are not. */
    char deep[600];
    for (int levels = 256; levels <= 257; levels++) {
        memset(deep, '[', (size_t)levels);
        memset(deep + levels, ']', (size_t)levels);
        if (levels == 256) okv_json_free(parsed(deep, 2 * (size_t)levels));
        else {
            deep[2 * levels] = '\0';
            refused(deep, "nesting too deep");
        }
    }

    /* Escapes: a pair is one character, half of one is an error. */
    v = parsed("\"\\ud83d\\ude00\"", 14);
    CHECK(v && v->len == 4 && memcmp(v->str, "\xF0\x9F\x98\x80", 4) == 0, "surrogate pair");
    okv_json_free(v);
    refused("\"a\\ud800\"", "at byte 2: a lone surrogate escape");
    refused("\"\\udc00\\u0041\"", "a lone surrogate escape");
    refused("\"\xC0\xAF\"", "invalid UTF-8");
    refused("\"\xED\xA0\x80\"", "invalid UTF-8"); /* a surrogate spelled in UTF-8 */
    refused("\"a\nb\"", "control character");

    /* A NUL inside a key keeps its length and never aliases the prefix. */
    static const char NUL_KEY[] = "{\"a\\u0000b\": 1, \"a\": 2}";
    v = parsed(NUL_KEY, strlen(NUL_KEY));
    CHECK(v && v->n == 2 && v->key_lens[0] == 3 && memcmp(v->keys[0], "a\0b", 3) == 0, "NUL key kept whole");
    CHECK(v && okv_json_get(v, "a") == v->items[1], "'a' is the second member, not the NUL key's prefix");
    okv_json_free(v);
    refused("{\"a\\u0000\": 1, \"a\\u0000\": 2}", "given twice");

    /* Numbers keep their text. */
    v = parsed("[-0, 1.50, 2E+3]", 16);
    CHECK(v && v->n == 3 && strcmp(v->items[1]->str, "1.50") == 0 && v->items[2]->num == 2000.0, "numbers");
    okv_json_free(v);
    refused("[01]", "expected ',' or ']'");
    refused("[1.]", "digits expected");
    refused("{\"a\": 1} x", "trailing text");
}

static void schema(void) {
    static const char TWICE[] = "{\"type\": \"string\", \"type\": \"integer\"}";
    static const char NUL_KEY[] = "{\"type\\u0000x\": \"string\"}";
    okv_error err;
    char *g = okv_json_schema_to_gbnf(TWICE, strlen(TWICE), &err);
    CHECK(!g && strstr(err.message, "given twice"), "schema with 'type' twice: %s", g ? g : err.message);
    free(g);
    /* "type\0x" is not "type": an unsupported keyword, not a string schema. */
    g = okv_json_schema_to_gbnf(NUL_KEY, strlen(NUL_KEY), &err);
    CHECK(!g && err.status == OKV_ERR_UNSUPPORTED, "a NUL-extended keyword: %s", g ? g : err.message);
    free(g);
}

static void messages(void) {
    okv_error err;
    okv_chat_template *t = okv_chat_template_parse("{{ messages[0].n }}|{{ messages[0].m }}|{{ messages[0].e }}",
                                                   59, &err);
    CHECK(t != NULL, "template: %s", err.message);
    if (!t) return;
    char *out = NULL;
    okv_chat_input in = {.messages_json = "[{\"n\": 1, \"m\": 1.0, \"e\": -2e2}]"};
    okv_status st = okv_chat_template_render(t, &in, &out, NULL, &err);
    /* Python's json.loads then str(): 1, 1.0, -200.0 */
    CHECK(st == OKV_OK && out && strcmp(out, "1|1.0|-200.0") == 0, "numbers: %s", out ? out : err.message);
    free(out);
    out = NULL;
    in.messages_json = "[{\"role\": \"user\", \"role\": \"system\"}]";
    st = okv_chat_template_render(t, &in, &out, NULL, &err);
    CHECK(st == OKV_ERR_INVALID && !out && strstr(err.message, "messages: invalid JSON at byte 18: the key \"role\""),
          "duplicate role: %s", err.message);
    free(out);
    out = NULL;
    in.messages_json = "[{\"content\": \"\\udfff\"}]";
    st = okv_chat_template_render(t, &in, &out, NULL, &err);
    CHECK(st == OKV_ERR_INVALID && !out && strstr(err.message, "lone surrogate"), "lone surrogate: %s", err.message);
    free(out);
    /* The memory budget running out while the values are built: the error
     * is the budget's, and the tree is freed on the way (valgrind and
     * ASan see no leak). */
    char *many = malloc(64 * 1024);
    size_t k = (size_t)sprintf(many, "[");
    for (int i = 0; i < 4000; i++) k += (size_t)sprintf(many + k, "%s{\"n\": %d}", i ? "," : "", i);
    sprintf(many + k, "]");
    okv_chat_limits lim = {.max_memory = 16384};
    in.messages_json = many;
    in.limits = &lim;
    out = NULL;
    st = okv_chat_template_render(t, &in, &out, NULL, &err);
    CHECK(st == OKV_ERR_INVALID && !out && strstr(err.message, "more than 16384 bytes"), "budget: %s", err.message);
    free(out);
    free(many);
    okv_chat_template_free(t);
}

int main(void) {
    reader();
    schema();
    messages();
    return check_done();
}
