/* offkv info: what a GGUF file holds (its metadata and tensors), read with
 * the GGUF reader alone: no model is built, so it also describes files
 * offkv cannot run, and says why it cannot open a damaged one. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

static void usage(FILE *f) {
    fprintf(f,
            "usage: offkv info [-m] MODEL [--json] [--items N] [--key KEY]\n"
            "Prints a GGUF file's format version, metadata (every key, its type and value) and\n"
            "tensors (name, type, shape, bytes, offset in the data section).  The file is checked\n"
            "whole as a model load checks it, but no model is built: files of an architecture or\n"
            "tensor type offkv does not run are described too.\n\n"
            "  -m, --model FILE  the GGUF file (or give it as the only argument)\n"
            "  --json            one JSON object instead of text: {\"file\", \"version\", \"alignment\",\n"
            "                    \"metadata\": {KEY: {\"type\", \"value\"}}, \"tensors\": [{\"name\", \"type\",\n"
            "                    \"shape\", \"bytes\", \"offset\"}]}; an array's value is its first N items\n"
            "                    beside \"elem\" and \"length\"; a string that is not valid UTF-8 has\n"
            "                    each bad byte as U+FFFD; NaN and infinities are the strings \"NaN\",\n"
            "                    \"Infinity\", \"-Infinity\"\n"
            "  --items N         array items shown, 0 or more, or `all` (default 8; with --key, all);\n"
            "                    text also cuts strings after 200 bytes (saying how many more there are)\n"
            "  --key KEY         only that key's value: a string exactly as stored (no newline added:\n"
            "                    `--key tokenizer.chat_template > t.jinja` writes the template), a number\n"
            "                    or bool on a line, an array one item a line; with --json, the value as JSON\n"
            "  -h, --help        this help\n");
}

enum { TEXT_STRING_MAX = 200 };

/* ---- values as text (one line each) and as JSON ---- */

/* Length of the valid UTF-8 sequence at s (n bytes left), or 0. */
/* s as one line of text: C escapes for quotes, backslashes and control
 * bytes; at most max bytes, then how many more there were. */
static void text_str(const char *s, size_t n, size_t max) {
    putchar('"');
    for (size_t i = 0; i < n && i < max; i++) {
        const unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\') printf("\\%c", c);
        else if (c == '\n') fputs("\\n", stdout);
        else if (c == '\t') fputs("\\t", stdout);
        else if (c < 0x20 || c == 0x7F) printf("\\x%02x", c);
        else putchar(c);
    }
    putchar('"');
    if (n > max) printf(" ... (%zu more bytes)", n - max);
}

static void print_float(double d, int is_f32, int json) {
    if (isnan(d)) printf(json ? "\"NaN\"" : "nan");
    else if (isinf(d)) printf(json ? (d > 0 ? "\"Infinity\"" : "\"-Infinity\"") : (d > 0 ? "inf" : "-inf"));
    else if (d == 0 && signbit(d)) fputs("-0.0", stdout); /* "-0" reads back as the integer 0 in many parsers */
    else { /* the fewest digits that read back as the same value (1e-05, not 9.99999975e-06) */
        char buf[40];
        for (int p = is_f32 ? 6 : 15;; p++) {
            snprintf(buf, sizeof buf, "%.*g", p, d);
            if (p >= (is_f32 ? 9 : 17) || (is_f32 ? (double)strtof(buf, NULL) == d : strtod(buf, NULL) == d)) break;
        }
        fputs(buf, stdout);
    }
}

static int is_int_type(okv_gguf_type t) {
    return t == OKV_GGUF_U8 || t == OKV_GGUF_I8 || t == OKV_GGUF_U16 || t == OKV_GGUF_I16 || t == OKV_GGUF_U32 ||
           t == OKV_GGUF_I32 || t == OKV_GGUF_U64 || t == OKV_GGUF_I64;
}

/* One value (a scalar, or element i of an array when in_array) of type t. */
static void print_value(const okv_gguf *g, const char *key, okv_gguf_type t, int in_array, uint64_t i, int json) {
    okv_error err;
    okv_status st = OKV_OK;
    if (t == OKV_GGUF_U64) {
        uint64_t v = 0;
        st = in_array ? okv_gguf_array_u64(g, key, i, &v, &err) : okv_gguf_get_u64(g, key, &v, &err);
        if (!st) printf("%llu", (unsigned long long)v);
    } else if (is_int_type(t)) {
        int64_t v = 0;
        st = in_array ? okv_gguf_array_i64(g, key, i, &v, &err) : okv_gguf_get_i64(g, key, &v, &err);
        if (!st) printf("%lld", (long long)v);
    } else if (t == OKV_GGUF_F32 || t == OKV_GGUF_F64) {
        double v = 0;
        st = in_array ? okv_gguf_array_f64(g, key, i, &v, &err) : okv_gguf_get_f64(g, key, &v, &err);
        if (!st) print_float(v, t == OKV_GGUF_F32, json);
    } else if (t == OKV_GGUF_BOOL) {
        bool v = false;
        st = in_array ? okv_gguf_array_bool(g, key, i, &v, &err) : okv_gguf_get_bool(g, key, &v, &err);
        if (!st) printf("%s", v ? "true" : "false");
    } else if (t == OKV_GGUF_STRING) {
        const char *s = NULL;
        size_t n = 0;
        st = in_array ? okv_gguf_array_str(g, key, i, &s, &n, &err) : okv_gguf_get_str(g, key, &s, &n, &err);
        if (!st) {
            if (json) cli_json_string(stdout, s, n);
            else text_str(s, n, TEXT_STRING_MAX);
        }
    }
    /* the reader validated the file: a value it cannot give is a bug, said where it shows */
    if (st) {
        if (json) cli_json_string(stdout, err.message, strlen(err.message));
        else printf("<%s>", err.message);
    }
}

/* ---- the two forms ---- */

/* Key i, its type and value: a text line "  KEY TYPE VALUE", or JSON's
 * "KEY": {"type", "value"} (an array's with "elem" and "length"). */
static void print_kv(const okv_gguf *g, int64_t i, uint64_t items, int json) {
    const char *key = okv_gguf_key(g, i);
    const okv_gguf_type t = okv_gguf_kv_type(g, i);
    if (json) {
        fputs(i ? ",\n  " : "\n  ", stdout);
        cli_json_string(stdout, key, strlen(key));
        printf(": {\"type\": \"%s\", ", okv_gguf_type_name(t));
    } else {
        printf("  %-40s %-7s ", key, okv_gguf_type_name(t));
    }
    if (t != OKV_GGUF_ARRAY) {
        if (json) fputs("\"value\": ", stdout);
        print_value(g, key, t, 0, 0, json);
        fputs(json ? "}" : "\n", stdout);
        return;
    }
    okv_gguf_type elem = OKV_GGUF_NONE;
    uint64_t len = 0;
    okv_gguf_get_array(g, key, &elem, &len, NULL);
    const uint64_t shown = elem == OKV_GGUF_ARRAY ? 0 : len < items ? len : items;
    if (json) printf("\"elem\": \"%s\", \"length\": %llu, \"value\": [", okv_gguf_type_name(elem), (unsigned long long)len);
    else printf("%s x %llu", okv_gguf_type_name(elem), (unsigned long long)len);
    for (uint64_t j = 0; j < shown; j++) {
        fputs(j ? ", " : json ? "" : ": ", stdout);
        print_value(g, key, elem, 1, j, json);
    }
    if (json) fputs("]}", stdout);
    else if (elem == OKV_GGUF_ARRAY) fputs(" (nested arrays: items not shown)\n", stdout);
    else {
        if (shown < len) printf("%s... (%llu more)", shown ? ", " : ": ", (unsigned long long)(len - shown));
        putchar('\n');
    }
}

static void print_text(const char *path, const okv_gguf *g, uint64_t items) {
    const int64_t n_kv = okv_gguf_n_kv(g), n_t = okv_gguf_n_tensors(g);
    size_t data = 0;
    for (int64_t i = 0; i < n_t; i++) data += okv_gguf_tensor_at(g, i)->n_bytes;
    char buf[32];
    printf("%s: GGUF v%u, alignment %u, %lld metadata keys, %lld tensors (%s of tensor data)\n", path,
           (unsigned)okv_gguf_version(g), (unsigned)okv_gguf_alignment(g), (long long)n_kv, (long long)n_t,
           cli_bytes(data, buf, sizeof buf));
    printf("metadata:\n");
    for (int64_t i = 0; i < n_kv; i++) print_kv(g, i, items, 0);
    printf("tensors:\n");
    for (int64_t i = 0; i < n_t; i++) {
        const okv_gguf_tensor *t = okv_gguf_tensor_at(g, i);
        char shape[96] = "";
        for (int d = 0, at = 0; d < t->n_dims && at < (int)sizeof shape; d++)
            at += snprintf(shape + at, sizeof shape - (size_t)at, d ? " x %lld" : "%lld", (long long)t->ne[d]);
        printf("  %-40s %-8s %-22s %12zu bytes at %llu\n", t->name, okv_ggml_type_name(t->type), shape, t->n_bytes,
               (unsigned long long)t->offset);
    }
}

static void print_json(const char *path, const okv_gguf *g, uint64_t items) {
    fputs("{\"file\": ", stdout);
    cli_json_string(stdout, path, strlen(path));
    printf(", \"version\": %u, \"alignment\": %u,\n \"metadata\": {", (unsigned)okv_gguf_version(g),
           (unsigned)okv_gguf_alignment(g));
    const int64_t n_kv = okv_gguf_n_kv(g), n_t = okv_gguf_n_tensors(g);
    for (int64_t i = 0; i < n_kv; i++) print_kv(g, i, items, 1);
    fputs("},\n \"tensors\": [", stdout);
    for (int64_t i = 0; i < n_t; i++) {
        const okv_gguf_tensor *t = okv_gguf_tensor_at(g, i);
        fputs(i ? ",\n  {\"name\": " : "\n  {\"name\": ", stdout);
        cli_json_string(stdout, t->name, strlen(t->name));
        printf(", \"type\": \"%s\", \"shape\": [", okv_ggml_type_name(t->type));
        for (int d = 0; d < t->n_dims; d++) printf(d ? ", %lld" : "%lld", (long long)t->ne[d]);
        printf("], \"bytes\": %zu, \"offset\": %llu}", t->n_bytes, (unsigned long long)t->offset);
    }
    fputs("]}\n", stdout);
}

/* --key: the value of key alone (false when the file has no such key). */
static bool print_key(const okv_gguf *g, const char *key, uint64_t items, int json) {
    const int64_t i = okv_gguf_find_key(g, key);
    if (i < 0) return false;
    const okv_gguf_type t = okv_gguf_kv_type(g, i);
    if (t == OKV_GGUF_STRING && !json) { /* the bytes as stored */
        const char *s = NULL;
        size_t n = 0;
        okv_gguf_get_str(g, key, &s, &n, NULL);
        fwrite(s, 1, n, stdout);
        return true;
    }
    if (t != OKV_GGUF_ARRAY) {
        print_value(g, key, t, 0, 0, json);
        putchar('\n');
        return true;
    }
    okv_gguf_type elem = OKV_GGUF_NONE;
    uint64_t len = 0;
    okv_gguf_get_array(g, key, &elem, &len, NULL);
    const uint64_t shown = elem == OKV_GGUF_ARRAY ? 0 : len < items ? len : items;
    if (json) putchar('[');
    for (uint64_t j = 0; j < shown; j++) {
        if (json && j) fputs(", ", stdout);
        print_value(g, key, elem, 1, j, json);
        if (!json) putchar('\n');
    }
    if (json) puts("]");
    else if (shown < len) printf("... (%llu more%s)\n", (unsigned long long)(len - shown),
                                 elem == OKV_GGUF_ARRAY ? ": nested arrays are not shown" : "");
    return true;
}

int cmd_info(int argc, char **argv) {
    const char *cmd = "info", *path = NULL, *key = NULL;
    bool json = false, items_given = false;
    uint64_t items = 8;
    cli_seen seen = {0};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (cli_is(a, "-h", "--help")) { usage(stdout); return CLI_OK; }
        const char *file = NULL;
        if (a[0] != '-') file = a;
        else if (!cli_once(&seen, cmd, a)) return CLI_USAGE;
        else if (cli_is(a, "--json", NULL)) json = true;
        else if (cli_is(a, "-m", "--model")) { if (!(file = cli_value(cmd, argc, argv, &i))) return CLI_USAGE; }
        else if (cli_is(a, "--key", NULL)) { if (!(key = cli_value(cmd, argc, argv, &i))) return CLI_USAGE; }
        else if (cli_is(a, "--items", NULL)) {
            items_given = true;
            const char *v = cli_value(cmd, argc, argv, &i);
            if (!v) return CLI_USAGE;
            char *end;
            if (strcmp(v, "all") == 0) items = UINT64_MAX;
            else if (v[0] < '0' || v[0] > '9' || (items = strtoull(v, &end, 10), *end) || items == UINT64_MAX) {
                cli_error(cmd, "bad value '%s' for --items: expected a count (0 or more) or all", v);
                return CLI_USAGE;
            }
        } else return cli_unknown(cmd, a);
        if (file && path) {
            cli_error(cmd, "one file at a time: '%s' and '%s'", path, file);
            return CLI_USAGE;
        }
        if (file) path = file;
    }
    if (!path) {
        cli_error(cmd, "a GGUF file is required (see offkv info --help)");
        return CLI_USAGE;
    }
    if (!cli_model_file_ok(cmd, path)) return CLI_FAIL;
    okv_error err;
    okv_gguf *g = okv_gguf_open(path, &err);
    if (!g) {
        cli_error(cmd, "%s: %s", path, err.message);
        return CLI_FAIL;
    }
    bool found = true;
    if (key) found = print_key(g, key, items_given ? items : UINT64_MAX, json);
    else if (json) print_json(path, g, items);
    else print_text(path, g, items);
    okv_gguf_close(g);
    if (!found) {
        cli_error(cmd, "%s has no key '%s' (offkv info %s lists them)", path, key, path);
        return CLI_FAIL;
    }
    return cli_flush_stdout(cmd) ? CLI_OK : CLI_FAIL;
}
