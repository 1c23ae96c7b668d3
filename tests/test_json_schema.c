/* JSON Schema -> GBNF: each construct's grammar accepts hand-chosen valid
 * documents and refuses invalid ones; integer and number ranges against
 * plain comparisons over every integer in [-1500, 1500]; keywords the
 * converter does not support are errors naming them. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "offkv/grammar.h"

typedef struct compiled {
    okv_grammar *g;
    okv_grammar_matcher *m;
    char *gbnf;
} compiled;

static bool compile(const char *schema, compiled *c) {
    okv_error err;
    memset(c, 0, sizeof *c);
    c->gbnf = okv_json_schema_to_gbnf(schema, strlen(schema), &err);
    CHECK(c->gbnf != NULL, "schema %s: %s", schema, err.message);
    if (!c->gbnf) return false;
    c->g = okv_grammar_parse(c->gbnf, strlen(c->gbnf), NULL, &err);
    CHECK(c->g != NULL, "grammar of %s: %s\n%s", schema, err.message, c->gbnf);
    if (!c->g) return false;
    c->m = okv_grammar_matcher_create(c->g, &err);
    return c->m != NULL;
}

static void release(compiled *c) {
    okv_grammar_matcher_free(c->m);
    okv_grammar_free(c->g);
    free(c->gbnf);
}

static bool accepts(compiled *c, const char *text) {
    okv_grammar_matcher_reset(c->m);
    return okv_grammar_matcher_accept_bytes(c->m, text, strlen(text)) && okv_grammar_matcher_can_end(c->m);
}

/* yes: documents that validate; no: documents that do not (NULL-ended). */
static void check_schema(const char *schema, const char *const *yes, const char *const *no) {
    compiled c;
    if (!compile(schema, &c)) {
        release(&c);
        return;
    }
    for (; yes && *yes; yes++) CHECK(accepts(&c, *yes), "%.300s should accept %.200s", schema, *yes);
    for (; no && *no; no++) CHECK(!accepts(&c, *no), "%.300s should refuse %.200s", schema, *no);
    release(&c);
}

#define L(...) ((const char *const[]){__VA_ARGS__, NULL})

static void test_objects(void) {
    const char *s = "{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"},\"b\":{\"type\":\"string\"},"
                    "\"c\":{\"type\":\"boolean\"}},\"required\":[\"a\"],\"additionalProperties\":false}";
    check_schema(s,
                 L("{\"a\":1}", "{\"a\":1,\"b\":\"x\"}", "{\"a\":1,\"c\":true}", "{\"a\":-7,\"b\":\"\",\"c\":false}",
                   "{ \"a\" : 1 , \"b\" : \"\\u00e9\\n\" }", "{\"a\":1}\n  "),
                 L("{}", "{\"b\":\"x\"}", "{\"a\":1,\"c\":true,\"b\":\"x\"}", "{\"a\":1,\"d\":1}", "{\"a\":\"1\"}",
                   "{\"a\":1,}", "{\"a\":01}", "{\"a\":1,\"b\":\"\x01\"}", "[1]"));
    /* Required after optional in `properties` order: required come first. */
    check_schema("{\"properties\":{\"x\":{\"type\":\"null\"},\"y\":{\"const\":2}},\"required\":[\"y\"]}",
                 L("{\"y\":2}", "{\"y\":2,\"x\":null}"), L("{\"x\":null,\"y\":2}", "{\"y\":3}"));
    /* additionalProperties true: other keys, never a declared one again. */
    check_schema("{\"type\":\"object\",\"properties\":{\"ab\":{\"type\":\"integer\"}},\"required\":[\"ab\"],"
                 "\"additionalProperties\":true}",
                 L("{\"ab\":1}", "{\"ab\":1,\"a\":[1,{}]}", "{\"ab\":1,\"abc\":null}", "{\"ab\":1,\"\":3,\"b\":\"x\"}"),
                 L("{\"ab\":1,\"ab\":2}", "{\"a\":1}"));
    check_schema("{\"type\":\"object\",\"additionalProperties\":{\"type\":\"integer\"}}",
                 L("{}", "{\"k\":1,\"j\":2}"), L("{\"k\":\"v\"}"));
    check_schema("{\"type\":\"object\"}", L("{}", "{\"k\":[null,{\"z\":1.5e3}]}"), L("[]", "1"));
}

static void test_arrays_and_values(void) {
    check_schema("{\"type\":\"array\",\"items\":{\"type\":\"integer\"},\"minItems\":1,\"maxItems\":3}",
                 L("[1]", "[1, 2,3]", "[ 0 ]"), L("[]", "[1,2,3,4]", "[1,]", "[\"1\"]"));
    check_schema("{\"type\":\"array\",\"prefixItems\":[{\"type\":\"string\"},{\"type\":\"number\"}]}",
                 L("[\"a\",1.5]", "[\"\",-2e-3]"), L("[\"a\"]", "[1,\"a\"]", "[\"a\",1,2]"));
    check_schema("{\"type\":\"array\"}", L("[]", "[1,\"a\",[null]]"), L("{}"));
    check_schema("{\"enum\":[\"red\",1,null,{\"k\":[true]}]}", L("\"red\"", "1", "null", "{\"k\":[true]}"),
                 L("\"blue\"", "2", "\"null\"", "{\"k\":[false]}"));
    check_schema("{\"const\":\"a\\\"b\"}", L("\"a\\\"b\""), L("\"ab\"", "\"a\"b\""));
    /* 'type' beside enum / const keeps only its values (the null and 1 of
     * a string enum were taken) */
    check_schema("{\"type\":\"string\",\"enum\":[\"a\",1,null]}", L("\"a\""), L("1", "null"));
    check_schema("{\"type\":[\"integer\",\"null\"],\"enum\":[1.5,2,null,\"x\"]}", L("2", "null"), L("1.5", "\"x\""));
    check_schema("{\"type\":[\"string\",\"null\"]}", L("\"x\"", "null"), L("1", "true"));
    check_schema("{\"anyOf\":[{\"type\":\"integer\"},{\"type\":\"boolean\"}]}", L("3", "false"), L("\"3\"", "1.5"));
    check_schema("{\"oneOf\":[{\"const\":1},{\"const\":\"one\"}]}", L("1", "\"one\""), L("2"));
    check_schema("{\"type\":\"number\"}", L("1", "-0.5", "1e10", "2.5E-3"), L("01", ".5", "1.", "+1", "NaN"));
    check_schema("{}", L("1", "\"s\"", "[{}]", "null"), L("nul", "{"));
    check_schema("true", L("[]"), L("]"));
}

static void test_strings(void) {
    check_schema("{\"type\":\"string\",\"minLength\":2,\"maxLength\":3}",
                 L("\"ab\"", "\"abc\"", "\"a\\n\"", "\"é€😀\""), L("\"a\"", "\"abcd\"", "\"\""));
    check_schema("{\"type\":\"string\",\"format\":\"date\"}", L("\"2024-02-29\"", "\"1999-12-31\""),
                 L("\"2024-13-01\"", "\"2024-1-01\"", "\"2024-00-10\""));
    check_schema("{\"type\":\"string\",\"format\":\"time\"}", L("\"12:30:00Z\"", "\"23:59:59.123+02:00\""),
                 L("\"24:00:00Z\"", "\"12:30Z\""));
    check_schema("{\"type\":\"string\",\"format\":\"date-time\"}", L("\"2024-02-29T12:30:00Z\""),
                 L("\"2024-02-29 12:30:00Z\""));
    check_schema("{\"type\":\"string\",\"format\":\"uuid\"}", L("\"123e4567-e89b-12d3-a456-426614174000\""),
                 L("\"123e4567e89b12d3a456426614174000\"", "\"123e4567-e89b-12d3-a456-42661417400g\""));
    check_schema("{\"type\":\"string\",\"pattern\":\"^[a-z]+-\\\\d{2,3}$\"}", L("\"ab-12\"", "\"z-999\""),
                 L("\"ab-1\"", "\"Ab-12\"", "\"ab-1234\"", "\"ab-12 \""));
    check_schema("{\"type\":\"string\",\"pattern\":\"^(cat|dog)s?\\\\.$\"}", L("\"cat.\"", "\"dogs.\""),
                 L("\"cats\"", "\"cow.\""));
    check_schema("{\"type\":\"string\",\"pattern\":\"ab\"}", L("\"ab\"", "\"xxabyy\""), L("\"a b\""));
    check_schema("{\"type\":\"string\",\"pattern\":\"^[^a]\\\"$\"}", L("\"b\\\"\""), L("\"a\\\"\"", "\"b\""));
    /* A positive range through '"' and '\\' is cut around them: what it
     * writes needs no escapes (and still matches). */
    check_schema("{\"type\":\"string\",\"pattern\":\"^[ -~]{2}$\"}", L("\"ab\"", "\"~ \"", "\"[]\""),
                 L("\"a\"", "\"abc\"", "\"a\\\"\"", "\"\\\\a\""));
    check_schema("{\"type\":\"string\",\"pattern\":\"^[^\\\"-z]$\"}", L("\"{\"", "\"!\""), L("\"#\"", "\"m\""));
    /* \uHHHH and \xHH are characters (they were the letters u00e9, x41) */
    check_schema("{\"type\":\"string\",\"pattern\":\"^\\\\u00e9[\\\\x41-\\\\x43]$\"}", L("\"\xc3\xa9" "B\""),
                 L("\"u00e9B\"", "\"\xc3\xa9x41\"", "\"\xc3\xa9" "D\""));
    /* a group that can match nothing may repeat a bounded number of times */
    check_schema("{\"type\":\"string\",\"pattern\":\"^(a?b?){0,2}c$\"}", L("\"c\"", "\"abac\"", "\"bc\""), L("\"aaac\""));
    /* a final $ after an escaped backslash anchors (it was read as escaped: "unexpected ')'") */
    check_schema("{\"type\":\"string\",\"pattern\":\"^a\\\\\\\\$\"}", L("\"a\\\\\""), L("\"a\\\\b\"", "\"a\""));
}

static void test_refs(void) {
    check_schema("{\"$defs\":{\"node\":{\"type\":\"object\",\"properties\":{\"v\":{\"type\":\"integer\"},\"next\":"
                 "{\"anyOf\":[{\"$ref\":\"#/$defs/node\"},{\"type\":\"null\"}]}},\"required\":[\"v\",\"next\"]}},"
                 "\"$ref\":\"#/$defs/node\"}",
                 L("{\"v\":1,\"next\":null}", "{\"v\":1,\"next\":{\"v\":2,\"next\":{\"v\":3,\"next\":null}}}"),
                 L("{\"v\":1,\"next\":{\"v\":2}}", "{\"v\":1}"));
    check_schema("{\"definitions\":{\"pos\":{\"type\":\"integer\",\"minimum\":1}},\"type\":\"array\",\"items\":"
                 "{\"$ref\":\"#/definitions/pos\"}}",
                 L("[1,22]"), L("[0]", "[-1]"));
}

/* Every integer in [-1500, 1500] against lo <= v <= hi. */
static void check_int_range(const char *schema, long lo, long hi, bool number) {
    compiled c;
    if (!compile(schema, &c)) {
        release(&c);
        return;
    }
    int bad = 0;
    char buf[64];
    for (long v = -1500; v <= 1500; v++) {
        snprintf(buf, sizeof buf, "%ld", v);
        bool want = v >= lo && v <= hi;
        if (accepts(&c, buf) != want && bad++ < 3) fprintf(stderr, "  %s: %s should be %s\n", schema, buf, want ? "in" : "out");
        if (number) {
            /* v + 0.5 and v - 0.25: in range exactly when the reals are. */
            snprintf(buf, sizeof buf, "%s%ld.5", v < 0 ? "-" : "", labs(v));
            double x = v < 0 ? v - 0.5 : v + 0.5;
            want = x >= lo && x <= hi;
            if (accepts(&c, buf) != want && bad++ < 3) fprintf(stderr, "  %s: %s should be %s\n", schema, buf, want ? "in" : "out");
            snprintf(buf, sizeof buf, "%ld.0", v);
            want = v >= lo && v <= hi;
            if (accepts(&c, buf) != want && bad++ < 3) fprintf(stderr, "  %s: %s should be %s\n", schema, buf, want ? "in" : "out");
        }
    }
    CHECK(bad == 0, "%s: %d values judged wrong", schema, bad);
    CHECK(!accepts(&c, "-0") && !accepts(&c, "007"), "%s: -0 and 007 are not integers JSON writes", schema);
    release(&c);
}

static void test_ranges(void) {
    check_int_range("{\"type\":\"integer\",\"minimum\":-120,\"maximum\":37}", -120, 37, false);
    check_int_range("{\"type\":\"integer\",\"minimum\":5,\"maximum\":1234}", 5, 1234, false);
    check_int_range("{\"type\":\"integer\",\"minimum\":0,\"maximum\":0}", 0, 0, false);
    check_int_range("{\"type\":\"integer\",\"minimum\":-5,\"maximum\":-3}", -5, -3, false);
    check_int_range("{\"type\":\"integer\",\"minimum\":100,\"maximum\":999}", 100, 999, false);
    check_int_range("{\"type\":\"integer\",\"minimum\":10}", 10, 1000000, false);
    check_int_range("{\"type\":\"integer\",\"maximum\":-3}", -1000000, -3, false);
    check_int_range("{\"type\":\"integer\",\"exclusiveMinimum\":-10,\"exclusiveMaximum\":190}", -9, 189, false);
    check_int_range("{\"type\":\"integer\",\"minimum\":-1099,\"maximum\":1001}", -1099, 1001, false);
    check_int_range("{\"type\":\"number\",\"minimum\":-2,\"maximum\":3}", -2, 3, true);
    check_int_range("{\"type\":\"number\",\"minimum\":-300,\"maximum\":-20}", -300, -20, true);
    check_int_range("{\"type\":\"number\",\"minimum\":17}", 17, 1000000, true);
}

static void check_error(const char *schema, okv_status want, const char *needle) {
    okv_error err;
    char *g = okv_json_schema_to_gbnf(schema, strlen(schema), &err);
    CHECK(g == NULL && err.status == want, "%s should fail with %s, got %s", schema, okv_status_name(want),
          okv_status_name(err.status));
    CHECK(strstr(err.message, needle) != NULL, "%s: message '%s' lacks '%s'", schema, err.message, needle);
    free(g);
}

static void test_errors(void) {
    /* additionalProperties beside a long property name recursed once a character */
    {
        char *schema = malloc(20000 + 128);
        int n = sprintf(schema, "{\"type\":\"object\",\"properties\":{\"");
        memset(schema + n, 'k', 20000);
        sprintf(schema + n + 20000, "\":{}},\"additionalProperties\":true}");
        check_error(schema, OKV_ERR_INVALID, "longer than 250 characters");
        free(schema);
    }
    /* schema, the status, a part of the message that names the cause */
    static const struct {
        const char *schema;
        okv_status want;
        const char *needle;
    } errors[] = {
        {"{\"type\":\"integer\",\"multipleOf\":2}", OKV_ERR_UNSUPPORTED, "'multipleOf'"},
        /* A bound past 16 digits on its closed side was clamped to 9999999999999999,
         * so the grammar allowed values the schema forbids. */
        {"{\"type\":\"integer\",\"minimum\":1e20}", OKV_ERR_UNSUPPORTED, "'minimum' 1e+20 leaves no number"},
        {"{\"type\":\"integer\",\"minimum\":1e20,\"maximum\":1e21}", OKV_ERR_UNSUPPORTED, "'minimum' 1e+20"},
        {"{\"type\":\"number\",\"exclusiveMaximum\":-1e17}", OKV_ERR_UNSUPPORTED, "'exclusiveMaximum'"},
        {"{\"type\":\"integer\",\"maximum\":-12345678901234567}", OKV_ERR_UNSUPPORTED, "'maximum' -12345678901234568"},
        /* a keyword the combination would drop (it let a missing "a" through) */
        {"{\"anyOf\":[{\"type\":\"object\"}],\"required\":[\"a\"]}", OKV_ERR_UNSUPPORTED, "'required' beside"},
        {"{\"const\":\"x\",\"pattern\":\"^y$\"}", OKV_ERR_UNSUPPORTED, "'pattern' beside"},
        /* counts the GBNF parser would refuse in the converter's own output */
        {"{\"type\":\"array\",\"maxItems\":20000}", OKV_ERR_INVALID, "at most 10000"},
        {"{\"type\":\"string\",\"pattern\":\"\\\\a\"}", OKV_ERR_UNSUPPORTED, "escape"},
        {"{\"allOf\":[{\"type\":\"string\"}]}", OKV_ERR_UNSUPPORTED, "'allOf'"},
        {"{\"type\":\"array\",\"uniqueItems\":true}", OKV_ERR_UNSUPPORTED, "'uniqueItems'"},
        {"{\"properties\":{\"a\":{\"type\":\"string\",\"format\":\"email\"}}}", OKV_ERR_UNSUPPORTED, "#/properties/a: string format 'email'"},
        {"{\"$ref\":\"https://example.com/s.json\"}", OKV_ERR_UNSUPPORTED, "https://example.com/s.json"},
        {"{\"$ref\":\"#/$defs/missing\"}", OKV_ERR_INVALID, "points at nothing"},
        {"{\"type\":\"integer\",\"minimum\":0.5}", OKV_ERR_UNSUPPORTED, "'minimum' is not an integer"},
        {"{\"type\":\"strin\"}", OKV_ERR_UNSUPPORTED, "'strin'"},
        {"{\"type\":\"string\",\"pattern\":\"^(?=a)b$\"}", OKV_ERR_UNSUPPORTED, "lookaround"},
        {"{\"type\":\"string\",\"pattern\":\"^[z-a]$\"}", OKV_ERR_UNSUPPORTED, "end is below its start"},
        /* A count of 90 digits saturates (UBSan flagged the overflow, found by fuzz_grammar). */
        {"{\"type\":\"string\",\"pattern\":\"^a{299999999999999999999999999999999999999999999999999999999999999999999999999999999999999999}$\"}", OKV_ERR_UNSUPPORTED, "{m,n}"},
        {"{\"type\":\"string\",\"pattern\":\"^[\\\"]$\"}", OKV_ERR_UNSUPPORTED, "only quotes"},
        {"{\"type\":\"string\",\"pattern\":\"^(a)\\\\1$\"}", OKV_ERR_UNSUPPORTED, "backreferences"},
        {"{\"properties\":{\"a\":{}},\"required\":[\"b\"]}", OKV_ERR_INVALID, "'b'"},
        {"{\"type\":\"array\",\"items\":{\"type\":\"integer\"},\"minItems\":3,\"maxItems\":2}", OKV_ERR_INVALID, "maxItems 2 is below minItems 3"},
        /* the values that clash, named */
        {"{\"type\":\"string\",\"minLength\":5,\"maxLength\":2}", OKV_ERR_INVALID, "maxLength 2 is below minLength 5"},
        {"{\"type\":\"integer\",\"minimum\":5,\"maximum\":2}", OKV_ERR_INVALID, "no integer is at least 5 and at most 2"},
        {"{\"type\":\"integer\",\"exclusiveMinimum\":4,\"exclusiveMaximum\":5}", OKV_ERR_INVALID, "no integer is at least 5 and at most 4"},
        {"{\"type\":\"number\",\"minimum\":1,\"maximum\":-1}", OKV_ERR_INVALID, "no number is at least 1 and at most -1"},
        {"{\"type\":\"array\",\"minItems\":1e8}", OKV_ERR_INVALID, "'minItems' is 100000000: it must be"},
        {"{\"type\":\"string\",\"maxLength\":\"3\"}", OKV_ERR_INVALID, "'maxLength' is not a number"},
        {"{\"type\":\"integer\",\"minimum\":1e400}", OKV_ERR_UNSUPPORTED, "'minimum' (past the largest double)"},
        /* a JSON pointer escapes '~' and '/' in a name (RFC 6901) */
        {"{\"properties\":{\"a/b~c\":{\"type\":\"frob\"}}}", OKV_ERR_UNSUPPORTED, "#/properties/a~1b~0c: "},
        {"{\"type\":", OKV_ERR_INVALID, "at byte 8"},
        /* JSON is UTF-8: F7 BF BF BF (past U+10FFFF, found by fuzz_grammar) and an overlong '/' are refused. */
        {"{\"type\":\"string\",\"pattern\":\"a\xf7\xbf\xbf\xbf\"}", OKV_ERR_INVALID, "invalid UTF-8"},
        {"{\"const\":\"\xc0\xaf\"}", OKV_ERR_INVALID, "invalid UTF-8"},
        {"{\"properties\":{\"x\":{\"not\":{}}}}", OKV_ERR_UNSUPPORTED, "#/properties/x: keyword 'not'"},
        /* a group that can match nothing, repeated without bound: the converter's
         * grammar was left-recursive, refused by the parser naming a rule of ours */
        {"{\"type\":\"string\",\"pattern\":\"^([a-z]*,?)*$\"}", OKV_ERR_UNSUPPORTED, "can match nothing"},
        {"{\"type\":\"string\",\"pattern\":\"(a|)+\"}", OKV_ERR_UNSUPPORTED, "can match nothing"},
        {"{\"type\":\"string\",\"pattern\":\"^(b(a?){2,})$\"}", OKV_ERR_UNSUPPORTED, "can match nothing"},
        /* enum / const with no value of the type: nothing is valid */
        {"{\"type\":\"integer\",\"const\":\"x\"}", OKV_ERR_INVALID, "'const' is not of the schema's 'type'"},
        {"{\"type\":\"string\",\"enum\":[1,null]}", OKV_ERR_INVALID, "no value of 'enum'"},
        /* a property name that needs a JSON escape beside additionalProperties:
         * the exclusion of declared names read it decoded and let {"a"x": 1} through */
        {"{\"type\":\"object\",\"properties\":{\"a\\\"b\":{\"type\":\"integer\"}},\"additionalProperties\":true}",
         OKV_ERR_UNSUPPORTED, "a\"b' holds a '\"'"},
        {"{\"properties\":{\"c\\nd\":{}},\"additionalProperties\":{\"type\":\"integer\"}}", OKV_ERR_UNSUPPORTED,
         "a control character"},
    };
    for (size_t i = 0; i < sizeof errors / sizeof errors[0]; i++)
        check_error(errors[i].schema, errors[i].want, errors[i].needle);
}

static void test_json_object(void) {
    const char *g = okv_gbnf_json_object();
    okv_error err;
    okv_grammar *gr = okv_grammar_parse(g, strlen(g), NULL, &err);
    CHECK(gr != NULL, "json_object grammar: %s", err.message);
    okv_grammar_matcher *m = okv_grammar_matcher_create(gr, &err);
    compiled c = {gr, m, NULL};
    CHECK(accepts(&c, "{\"a\":[1,2,{\"b\":null}],\"c\":\"\\\"\"}"), "an object");
    CHECK(accepts(&c, "{}"), "an empty object");
    CHECK(!accepts(&c, "[1]") && !accepts(&c, "\"s\"") && !accepts(&c, "{\"a\"}"), "not objects");
    okv_grammar_matcher_free(m);
    okv_grammar_free(gr);
}

/* Large schemas are followed, not refused past a count: an enum of 30 000
 * strings (30 000 parse stacks at its start) and 5 000 optional properties
 * (the optional chain grows linearly, as rules). */
static void test_large(void) {
    const int n_enum = 30000, n_props = 5000;
    size_t cap = (size_t)n_enum * 16 + 256;
    char *schema = malloc(cap);
    size_t k = (size_t)snprintf(schema, cap, "{\"enum\":[");
    for (int i = 0; i < n_enum; i++) k += (size_t)snprintf(schema + k, cap - k, "%s\"v%d\"", i ? "," : "", i);
    snprintf(schema + k, cap - k, "]}");
    check_schema(schema, L("\"v0\"", "\"v29999\"", "\"v15000\""), L("\"v30000\"", "\"v\"", "\"v29999 \""));
    k = (size_t)snprintf(schema, cap, "{\"type\":\"object\",\"properties\":{");
    for (int i = 0; i < n_props; i++) k += (size_t)snprintf(schema + k, cap - k, "%s\"p%d\":{\"type\":\"integer\"}", i ? "," : "", i);
    snprintf(schema + k, cap - k, "},\"required\":[\"p7\"]}");
    check_schema(schema, L("{\"p7\":1}", "{\"p7\":1,\"p0\":2,\"p4999\":3}", "{\"p7\":1,\"p4998\":2}"),
                 L("{\"p7\":1,\"p4999\":3,\"p0\":2}", "{\"p0\":2}", "{\"p7\":1,\"p5000\":1}"));
    /* 30 fields of maxLength 10000: each within the converter's bound, the
     * grammar past a million elements while each wrote char{0,10000} out */
    k = (size_t)snprintf(schema, cap, "{\"type\":\"object\",\"properties\":{");
    for (int i = 0; i < 30; i++)
        k += (size_t)snprintf(schema + k, cap - k, "%s\"f%d\":{\"type\":\"string\",\"maxLength\":10000}", i ? "," : "", i);
    snprintf(schema + k, cap - k, "},\"required\":[\"f0\"]}");
    check_schema(schema, L("{\"f0\":\"abc\"}", "{\"f0\":\"\",\"f29\":\"x\"}"), L("{\"f1\":\"a\"}", "{\"f0\":1}"));
    free(schema);
}

/* Two tools' argument schemas in one grammar, embedded in a call format
 * of the caller's; each keeps its own $defs. */
static void test_several(void) {
    const char *schemas[] = {
        "{\"type\":\"object\",\"properties\":{\"city\":{\"$ref\":\"#/$defs/name\"}},\"required\":[\"city\"],"
        "\"$defs\":{\"name\":{\"type\":\"string\",\"maxLength\":5}}}",
        "{\"type\":\"object\",\"properties\":{\"n\":{\"$ref\":\"#/$defs/name\"}},\"required\":[\"n\"],"
        "\"$defs\":{\"name\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":3}}}"};
    const size_t lens[] = {strlen(schemas[0]), strlen(schemas[1])};
    const char *names[] = {"weather-args", "count-args"};
    okv_error err;
    char *g = okv_json_schemas_to_gbnf(2, schemas, lens, names, &err);
    CHECK(g != NULL, "two schemas: %s", err.message);
    if (!g) return;
    CHECK(strstr(g, "root ::=") == NULL, "no root rule of its own");
    const char *head = "root ::= \"weather(\" weather-args \")\" | \"count(\" count-args \")\"\n";
    char *text = malloc(strlen(head) + strlen(g) + 1);
    strcpy(text, head);
    strcat(text, g);
    compiled c = {0};
    c.g = okv_grammar_parse(text, strlen(text), NULL, &err);
    CHECK(c.g != NULL, "embedded: %s\n%s", err.message, text);
    if (c.g) {
        c.m = okv_grammar_matcher_create(c.g, &err);
        CHECK(accepts(&c, "weather({\"city\":\"Paris\"})"), "the first tool");
        CHECK(accepts(&c, "count({\"n\":2})"), "the second tool, its own $defs");
        CHECK(!accepts(&c, "count({\"n\":\"x\"})") && !accepts(&c, "weather({\"city\":2})"), "each keeps its schema");
        CHECK(!accepts(&c, "weather({\"city\":\"Parisian\"})"), "maxLength of the first tool's name");
    }
    okv_grammar_matcher_free(c.m);
    okv_grammar_free(c.g);
    free(text);
    free(g);
    const char *bad_names[] = {"space", "count-args"};
    CHECK(okv_json_schemas_to_gbnf(2, schemas, lens, bad_names, &err) == NULL && strstr(err.message, "'space'"),
          "a primitive's name is refused: %s", err.message);
    const char *twice[] = {"a", "a"};
    CHECK(okv_json_schemas_to_gbnf(2, schemas, lens, twice, &err) == NULL && strstr(err.message, "twice"),
          "a name twice is refused: %s", err.message);
    const char *bad_schema[] = {"{\"type\":\"integer\"}", "{\"type\":\"string\",\"format\":\"email\"}"};
    const size_t bl[] = {strlen(bad_schema[0]), strlen(bad_schema[1])};
    CHECK(okv_json_schemas_to_gbnf(2, bad_schema, bl, names, &err) == NULL && strstr(err.message, "count-args#"),
          "errors name the schema: %s", err.message);
}

/* The loose conversion (lazy tool-call grammars): keywords and string
 * formats the converter does not know are no constraint, and said; what it
 * knows still holds; the strict conversion still refuses them. */
static void test_loose(void) {
    const char *schema = "{\"type\":\"object\",\"properties\":{\"url\":{\"type\":\"string\",\"format\":\"uri\"},"
                         "\"tags\":{\"type\":\"array\",\"uniqueItems\":true,\"items\":{\"type\":\"integer\"}}},"
                         "\"required\":[\"url\"],\"additionalProperties\":false,\"propertyNames\":{\"pattern\":\"^u\"}}";
    const size_t len = strlen(schema);
    const char *name = "root";
    okv_error err;
    char skipped[512];
    CHECK(okv_json_schemas_to_gbnf(1, &schema, &len, &name, &err) == NULL &&
              err.status == OKV_ERR_UNSUPPORTED,
          "strict: refused (%s)", err.message);
    char *g = okv_json_schemas_to_gbnf_loose(1, &schema, &len, &name, skipped, sizeof skipped, &err);
    CHECK(g != NULL, "loose: %s", err.message);
    CHECK(strcmp(skipped, "#: keyword 'propertyNames', #/properties/url: format 'uri', #/properties/tags: keyword "
                          "'uniqueItems'") == 0,
          "what was skipped: '%s'", skipped);
    compiled c = {0};
    c.g = g ? okv_grammar_parse(g, strlen(g), "root", &err) : NULL;
    c.m = c.g ? okv_grammar_matcher_create(c.g, &err) : NULL;
    CHECK(c.m && accepts(&c, "{\"url\": \"not a uri at all\", \"tags\": [1, 1]}"), "the skipped keywords hold nothing");
    CHECK(c.m && !accepts(&c, "{\"tags\": [1]}") && !accepts(&c, "{\"url\": \"x\", \"tags\": [\"a\"]}") &&
              !accepts(&c, "{\"url\": \"x\", \"more\": 1}"),
          "what it knows still holds (required, items, additionalProperties)");
    okv_grammar_matcher_free(c.m);
    okv_grammar_free(c.g);
    free(g);
    /* many: a dozen in full, the rest counted; a small buffer cut, saying so */
    char many[2048] = "{";
    for (int i = 0; i < 15; i++) snprintf(many + strlen(many), sizeof many - strlen(many), "%s\"x-k%d\":1", i ? "," : "", i);
    strcat(many, "}");
    const char *m = many;
    const size_t ml = strlen(many);
    g = okv_json_schemas_to_gbnf_loose(1, &m, &ml, &name, skipped, sizeof skipped, &err);
    CHECK(g && strstr(skipped, "'x-k11', and 3 more") && !strstr(skipped, "x-k12"), "fifteen skipped: '%s'", skipped);
    free(g);
    char tiny[24];
    g = okv_json_schemas_to_gbnf_loose(1, &m, &ml, &name, tiny, sizeof tiny, &err);
    CHECK(g && strlen(tiny) == sizeof tiny - 1 && strcmp(tiny + sizeof tiny - 4, "...") == 0, "cut: '%s'", tiny);
    free(g);
    /* what loose does not loosen stays an error */
    const char *bad = "{\"type\":\"string\",\"pattern\":\"(?=a)\"}";
    const size_t bl = strlen(bad);
    CHECK(okv_json_schemas_to_gbnf_loose(1, &bad, &bl, &name, skipped, sizeof skipped, &err) == NULL &&
              strstr(err.message, "lookaround"),
          "an unsupported pattern: %s", err.message);
}

int main(void) {
    test_loose();
    test_objects();
    test_arrays_and_values();
    test_strings();
    test_refs();
    test_ranges();
    test_errors();
    test_json_object();
    test_large();
    test_several();
    return check_done();
}
