/* Constrained generation from a random-weight model (../shared's
 * tiny-llama, stories' 512-token vocabulary): with a JSON Schema's grammar
 * in the sampler, every sampled text, for many seeds and temperatures,
 * parses as JSON and validates against the schema.  Both are checked by a
 * small JSON reader and validator written here, not by the library.  The
 * same seed gives the same text, and `offkv run --json-schema` (when OKV_BIN
 * names the build) prints text that validates too. */
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "offkv/context.h"
#include "offkv/grammar.h"
#include "offkv/model.h"
#include "offkv/sampler.h"
#include "offkv/tokenizer.h"

/* ---- a plain JSON reader: just enough to validate ---- */

typedef struct val {
    char type; /* o a s n t f z (null) */
    double num;
    bool is_int;
    char str[256];
    int n;
    char keys[8][32];
    struct val *kids[8];
} val;

static void vfree(val *v) {
    if (!v) return;
    for (int i = 0; i < v->n; i++) vfree(v->kids[i]);
    free(v);
}

static void skip(const char **p) {
    while (**p == ' ' || **p == '\n' || **p == '\t' || **p == '\r') (*p)++;
}

static bool rstring(const char **p, char *out, size_t cap, int *chars) {
    if (**p != '"') return false;
    (*p)++;
    size_t k = 0;
    *chars = 0;
    while (**p != '"') {
        unsigned char c = (unsigned char)**p;
        if (!c || c < 0x20) return false;
        if (c == '\\') {
            (*p)++;
            char e = **p;
            if (e == 'u') {
                for (int i = 1; i <= 4; i++)
                    if (!strchr("0123456789abcdefABCDEF", (*p)[i]) || !(*p)[i]) return false;
                *p += 4;
            } else if (!strchr("\"\\/bfnrt", e) || !e) {
                return false;
            }
            if (k + 1 < cap) out[k++] = '?';
            (*chars)++;
        } else {
            if (k + 1 < cap) out[k++] = (char)c;
            if ((c & 0xC0) != 0x80) (*chars)++;
        }
        (*p)++;
    }
    (*p)++;
    out[k] = 0;
    return true;
}

static val *rvalue(const char **p, int depth) {
    if (depth > 20) return NULL;
    skip(p);
    val *v = calloc(1, sizeof *v);
    int chars;
    if (**p == '{' || **p == '[') {
        const bool obj = **p == '{';
        v->type = obj ? 'o' : 'a';
        (*p)++;
        skip(p);
        if (**p == (obj ? '}' : ']')) {
            (*p)++;
            return v;
        }
        for (;;) {
            if (v->n == 8) goto bad;
            skip(p);
            if (obj) {
                if (!rstring(p, v->keys[v->n], sizeof v->keys[0], &chars)) goto bad;
                skip(p);
                if (**p != ':') goto bad;
                (*p)++;
            }
            val *k = rvalue(p, depth + 1);
            if (!k) goto bad;
            v->kids[v->n++] = k;
            skip(p);
            if (**p == ',') {
                (*p)++;
                continue;
            }
            if (**p == (obj ? '}' : ']')) {
                (*p)++;
                return v;
            }
            goto bad;
        }
    }
    if (**p == '"') {
        v->type = 's';
        if (!rstring(p, v->str, sizeof v->str, &chars)) goto bad;
        v->num = chars;
        return v;
    }
    if (strncmp(*p, "true", 4) == 0) return *p += 4, v->type = 't', v;
    if (strncmp(*p, "false", 5) == 0) return *p += 5, v->type = 'f', v;
    if (strncmp(*p, "null", 4) == 0) return *p += 4, v->type = 'z', v;
    {
        const char *s = *p;
        if (*s == '-') s++;
        if (*s == '0') s++;
        else if (*s >= '1' && *s <= '9') while (*s >= '0' && *s <= '9') s++;
        else goto bad;
        v->is_int = true;
        if (*s == '.') {
            s++;
            v->is_int = false;
            if (!(*s >= '0' && *s <= '9')) goto bad;
            while (*s >= '0' && *s <= '9') s++;
        }
        if (*s == 'e' || *s == 'E') {
            s++;
            v->is_int = false;
            if (*s == '+' || *s == '-') s++;
            if (!(*s >= '0' && *s <= '9')) goto bad;
            while (*s >= '0' && *s <= '9') s++;
        }
        v->type = 'n';
        v->num = strtod(*p, NULL);
        *p = s;
        return v;
    }
bad:
    vfree(v);
    return NULL;
}

/* The schema below, by hand. */
static const char SCHEMA[] =
    "{\"type\":\"object\",\"properties\":{"
    "\"name\":{\"type\":\"string\",\"maxLength\":6},"
    "\"age\":{\"type\":\"integer\",\"minimum\":-5,\"maximum\":120},"
    "\"color\":{\"enum\":[\"red\",\"green\",\"blue\"]},"
    "\"tags\":{\"type\":\"array\",\"items\":{\"type\":\"boolean\"},\"maxItems\":2},"
    "\"when\":{\"type\":\"string\",\"format\":\"date\"},"
    "\"maybe\":{\"type\":[\"number\",\"null\"]}},"
    "\"required\":[\"name\",\"age\",\"color\"],\"additionalProperties\":false}";

static const char *validate(const char *text) {
    const char *p = text;
    val *v = rvalue(&p, 0);
    if (!v) return "not JSON";
    skip(&p);
    const char *why = NULL;
    if (*p) why = "trailing text";
    else if (v->type != 'o') why = "not an object";
    static const char *const order[] = {"name", "age", "color", "tags", "when", "maybe"};
    int seen[6] = {0}, last = -1;
    for (int i = 0; i < v->n && !why; i++) {
        int k = -1;
        for (int j = 0; j < 6; j++)
            if (strcmp(v->keys[i], order[j]) == 0) k = j;
        if (k < 0) why = "unknown property";
        else if (seen[k]++) why = "duplicate property";
        else {
            /* Not required by JSON Schema, but the grammar writes them in
             * order: checks the layout too. */
            if (k < last) why = "properties out of order";
            last = k;
            const val *x = v->kids[i];
            if (k == 0 && !(x->type == 's' && x->num <= 6)) why = "name not a string of <= 6 characters";
            if (k == 1 && !(x->type == 'n' && x->is_int && x->num >= -5 && x->num <= 120)) why = "age not an integer in [-5, 120]";
            if (k == 2 && !(x->type == 's' && (!strcmp(x->str, "red") || !strcmp(x->str, "green") || !strcmp(x->str, "blue"))))
                why = "color not in the enum";
            if (k == 3) {
                if (x->type != 'a' || x->n > 2) why = "tags not an array of <= 2";
                for (int j = 0; j < x->n && !why; j++)
                    if (x->kids[j]->type != 't' && x->kids[j]->type != 'f') why = "a tag not a boolean";
            }
            if (k == 4) {
                int y, mo, d;
                char tail;
                if (x->type != 's' || strlen(x->str) != 10 || sscanf(x->str, "%4d-%2d-%2d%c", &y, &mo, &d, &tail) != 3 ||
                    mo < 1 || mo > 12 || d < 1 || d > 31)
                    why = "when not a date";
            }
            if (k == 5 && x->type != 'n' && x->type != 'z') why = "maybe not a number or null";
        }
    }
    if (!why && !(seen[0] && seen[1] && seen[2])) why = "a required property is missing";
    vfree(v);
    return why;
}

/* Generates from BOS until an end token (or max tokens); the text in out. */
static int generate(okv_model *m, okv_grammar *g, const okv_grammar_vocab *gv, float temp, uint64_t seed, char *out,
                    size_t cap, int max_tokens) {
    okv_error err;
    const okv_tokenizer *tok = okv_model_tokenizer(m);
    const int32_t n_vocab = okv_model_n_vocab(m);
    const char *opts[] = {"capacity", "2048", NULL};
    okv_context *ctx = okv_context_create(m, opts, NULL, &err);
    CHECK(ctx != NULL, "context: %s", err.message);
    okv_sampler_params sp = {.temperature = temp, .top_k = 0, .top_p = 1.0f, .seed = seed};
    okv_sampler *s = okv_sampler_create(&sp, n_vocab, &err);
    okv_grammar_matcher *gm = okv_grammar_matcher_create(g, &err);
    CHECK(okv_sampler_set_grammar(s, gm, gv, &err) == OKV_OK, "set_grammar: %s", err.message);
    float *logits = malloc((size_t)n_vocab * sizeof *logits);
    int32_t tokv = okv_tokenizer_bos(tok), pos = 0;
    size_t len = 0;
    int n = 0, ended = 0;
    for (; n < max_tokens && ctx; n++) {
        if (okv_context_eval_last(ctx, &tokv, &pos, 1, logits, &err) != OKV_OK) {
            CHECK(0, "eval: %s", err.message);
            break;
        }
        pos++;
        int32_t id = okv_sampler_sample(s, logits);
        CHECK(id >= 0, "the grammar allowed no token after %d tokens", n);
        if (id < 0) break;
        okv_status st = okv_sampler_accept(s, id, &err);
        CHECK(st == OKV_OK, "accept %d: %s", (int)id, err.message);
        if (okv_grammar_vocab_is_end(gv, id)) {
            ended = 1;
            break;
        }
        size_t pl = 0;
        okv_tokenizer_token_to_piece(tok, id, 0, out + len, cap - len - 1, &pl, &err);
        len += pl;
        tokv = id;
    }
    out[len] = 0;
    free(logits);
    okv_grammar_matcher_free(gm);
    okv_sampler_free(s);
    okv_context_free(ctx);
    CHECK(ended, "no end token within %d tokens (seed %llu): %s", max_tokens, (unsigned long long)seed, out);
    return n;
}

int main(void) {
    const char *shared = check_shared_dir();
    if (!shared) {
        printf("skipped: ../shared not found\n");
        return CHECK_SKIP;
    }
    char path[4096];
    snprintf(path, sizeof path, "%s/models/tiny-llama.gguf", shared);
    okv_error err;
    okv_model *m = okv_model_load(path, NULL, &err);
    CHECK(m != NULL, "%s: %s", path, err.message);
    if (!m) return check_done();
    char *gbnf = okv_json_schema_to_gbnf(SCHEMA, strlen(SCHEMA), &err);
    CHECK(gbnf != NULL, "schema: %s", err.message);
    okv_grammar *g = okv_grammar_parse(gbnf, strlen(gbnf), NULL, &err);
    CHECK(g != NULL, "grammar: %s", err.message);
    okv_grammar_vocab *gv = okv_grammar_vocab_create(okv_model_tokenizer(m), NULL, 0, &err);
    CHECK(gv != NULL, "vocab: %s", err.message);

    /* The validator itself tells good from bad. */
    CHECK(validate("{\"name\":\"ab\",\"age\":3,\"color\":\"red\"}") == NULL, "validator accepts a good document");
    CHECK(validate("{\"name\":\"ab\",\"age\":300,\"color\":\"red\"}") != NULL, "validator refuses age 300");
    CHECK(validate("{\"name\":\"ab\",\"color\":\"red\"}") != NULL, "validator refuses a missing age");

    static char text[16384], again[16384];
    int valid = 0, runs = 0;
    const float temps[] = {0.0f, 0.7f, 1.0f, 1.5f};
    for (int t = 0; t < 4 && g && gv; t++) {
        for (uint64_t seed = 1; seed <= (t == 0 ? 1u : 6u); seed++) {
            generate(m, g, gv, temps[t], seed, text, sizeof text, 1500);
            const char *why = validate(text);
            CHECK(why == NULL, "temperature %.1f seed %llu: %s in %s", temps[t], (unsigned long long)seed, why, text);
            valid += why == NULL;
            runs++;
            if (t == 2 && seed == 1) printf("sample: %s\n", text);
        }
    }
    /* Same seed, same text. */
    if (g && gv) {
        generate(m, g, gv, 1.0f, 3, text, sizeof text, 1500);
        generate(m, g, gv, 1.0f, 3, again, sizeof again, 1500);
        CHECK(strcmp(text, again) == 0, "seed 3 twice gave different texts");
    }
    printf("%d of %d constrained texts valid\n", valid, runs);

    /* The CLI: offkv run --json-schema, the same schema, several seeds. */
    const char *bin = getenv("OKV_BIN");
    for (int seed = 1; bin && seed <= 3; seed++) {
        char cmd[8192];
        snprintf(cmd, sizeof cmd, "'%s/offkv' run -m '%s' -n 1500 --temp 1 --seed %d --no-display-prompt --json-schema '%s' 2>/dev/null",
                 bin, path, seed, SCHEMA);
        FILE *pf = popen(cmd, "r");
        size_t n = pf ? fread(text, 1, sizeof text - 1, pf) : 0;
        int st = pf ? pclose(pf) : -1;
        text[n] = 0;
        if (n && text[n - 1] == '\n') text[n - 1] = 0; /* the run's closing newline */
        CHECK(st == 0, "offkv run --json-schema seed %d exited %d", seed, st);
        const char *why = validate(text);
        CHECK(why == NULL, "offkv run --json-schema seed %d: %s in %s", seed, why, text);
    }
    if (!bin) printf("skipped offkv run --json-schema: OKV_BIN not set\n");
    okv_grammar_vocab_free(gv);
    okv_grammar_free(g);
    free(gbnf);
    okv_model_free(m);
    return check_done();
}
