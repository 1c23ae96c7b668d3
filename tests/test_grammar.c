/* GBNF grammars: the parser on good and bad grammars (errors name the line,
 * column and rule), and the matcher against plain recognizers written here
 * by hand, over every string of a small alphabet up to a length: a whole
 * string is accepted exactly when the reference accepts it, and a prefix
 * is kept exactly when some accepted string starts with it.  Then UTF-8
 * split between calls, and the vocabulary mask on Qwen 3's 151 k tokens
 * (../shared) against asking the matcher token by token. */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "check.h"
#include "grammar/grammar_impl.h"
#include "offkv/gguf.h"
#include "offkv/grammar.h"
#include "offkv/tokenizer.h"

static okv_grammar *parse(const char *text) {
    okv_error err;
    okv_grammar *g = okv_grammar_parse(text, strlen(text), NULL, &err);
    CHECK(g != NULL, "grammar should parse: %s\n%s", err.message, text);
    return g;
}

static void test_good(void) {
    const char *good[] = {
        "root ::= \"a\"",
        "# a comment\nroot ::= a | b # trailing\na ::= \"x\"+\nb ::= [0-9]{2,3} \"\\n\" [^\\x00-\\x1F\"\\\\]*\n",
        "root ::= (\n  \"a\"\n  | \"b\"\n)* \"c\"?\n",
        "root ::= \"\\u00e9\\U0001F600\\x41\\t\\\"\" [\\]\\[a-z-] .\n",
        "root::=x\nx::=\"\"",
        "root ::= item{3}\nitem ::= [a-c] | \"(\" root? \")\"\n",
        "root ::= (\"a\" | ) \"b\"{0,}\n",
        "root ::= \"ü\" [α-ω]",
    };
    for (size_t i = 0; i < sizeof good / sizeof *good; i++) okv_grammar_free(parse(good[i]));
    okv_grammar *g = parse("root ::= \"a\"*");
    CHECK(okv_grammar_n_rules(g) == 2, "a* is a rule of its own: %d rules", (int)okv_grammar_n_rules(g));
    okv_grammar_free(g);
    okv_error err;
    g = okv_grammar_parse("start ::= \"x\"", 13, "start", &err);
    CHECK(g != NULL, "another start rule: %s", err.message);
    okv_grammar_free(g);
}

static void test_bad(void) {
    const struct {
        const char *text, *want1, *want2;
    } bad[] = {
        {"root ::= foo\n", "undefined rule 'foo'", "line 1 column 10"},
        {"root ::= \"a\"\n\nx ::= \"b\" (\"c\"\n", "expected ')'", "rule 'x'"},
        {"root ::= \"abc\n", "unterminated string", "line 1 column 10"},
        {"root ::= \"\\q\"", "unknown escape \\q", "rule 'root'"},
        {"root ::= \"\\x4\"", "needs 2 hex digits", "column 11"},
        {"root ::= [z-a]", "below its start", "rule 'root'"},
        {"root ::= []", "empty character class", "column 10"},
        {"root ::= \"a\"{3,1}", "maximum is below the minimum", "rule 'root'"},
        {"root ::= \"a\" )", "unexpected ')'", "line 1 column 14"},
        {"root ::= * \"a\"", "needs an item before it", "rule 'root'"},
        {"root \"a\"", "expected '::='", "line 1 column 6"},
        {"x ::= \"a\"", "no start rule 'root'", ""},
        {"root ::= \"a\"\nroot ::= \"b\"", "defined twice", "line 2 column 1"},
        {"root ::= expr\nexpr ::= expr \"+\" \"1\" | \"1\"", "'expr' is left-recursive", ""},
        {"root ::= a\na ::= b? a \"x\"\nb ::= \"y\"", "left-recursive", "'a"},
        {"root ::= \"a\" b ::= \"c\"", "missing newline before rule 'b'", "line 1 column 14"},
        {"root ::= \"a\"{99999}", "repetition count above", "rule 'root'"},
        {"root ::= <foo>", "token references", "column 10"},
        {"root ::= \"\xff\"", "invalid UTF-8", "column 11"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        okv_error err;
        okv_grammar *g = okv_grammar_parse(bad[i].text, strlen(bad[i].text), NULL, &err);
        CHECK(g == NULL && err.status == OKV_ERR_INVALID, "should fail: %s", bad[i].text);
        okv_grammar_free(g);
        CHECK(strstr(err.message, bad[i].want1) && strstr(err.message, bad[i].want2), "%s: message '%s' lacks '%s' / '%s'",
              bad[i].text, err.message, bad[i].want1, bad[i].want2);
    }
}

/* ---- reference recognizers (whole strings) ---- */

static bool ref_parens(const char *s, size_t n) { /* root ::= ("(" root ")")* */
    int depth = 0;
    for (size_t i = 0; i < n; i++) {
        depth += s[i] == '(' ? 1 : -1;
        if (depth < 0) return false;
    }
    return depth == 0;
}

static bool ref_reps(const char *s, size_t n) { /* "a"{2,4} "b"* ("c" | "dd")? */
    size_t i = 0, a = 0;
    while (i < n && s[i] == 'a') i++, a++;
    if (a < 2 || a > 4) return false;
    while (i < n && s[i] == 'b') i++;
    if (i == n) return true;
    if (s[i] == 'c') return i + 1 == n;
    return n - i == 2 && s[i] == 'd' && s[i + 1] == 'd';
}

/* expr ::= term ("+" term)*   term ::= "1" | "(" expr ")" */
static bool rexpr(const char *s, size_t n, size_t *i);
static bool rterm(const char *s, size_t n, size_t *i) {
    if (*i < n && s[*i] == '1') return ++*i, true;
    if (*i < n && s[*i] == '(') {
        ++*i;
        if (!rexpr(s, n, i)) return false;
        if (*i < n && s[*i] == ')') return ++*i, true;
    }
    return false;
}
static bool rexpr(const char *s, size_t n, size_t *i) {
    if (!rterm(s, n, i)) return false;
    while (*i < n && s[*i] == '+') {
        ++*i;
        if (!rterm(s, n, i)) return false;
    }
    return true;
}
static bool ref_expr(const char *s, size_t n) {
    size_t i = 0;
    return rexpr(s, n, &i) && i == n;
}

static bool ref_class(const char *s, size_t n) { /* [a-c]+ [^a-c\n] | "x" */
    if (n == 1 && s[0] == 'x') return true;
    if (n < 2) return false;
    for (size_t i = 0; i + 1 < n; i++)
        if (s[i] < 'a' || s[i] > 'c') return false;
    char last = s[n - 1];
    return !(last >= 'a' && last <= 'c') && last != '\n';
}

/* "k" ( "=" [0-9]+ )? ( "," "k" ( "=" [0-9]+ )? ){0,2} */
static bool ref_list(const char *s, size_t n) {
    size_t i = 0;
    for (int item = 0; item < 3; item++) {
        if (item) {
            if (i == n) return true;
            if (s[i++] != ',') return false;
        }
        if (i >= n || s[i++] != 'k') return false;
        if (i < n && s[i] == '=') {
            i++;
            size_t d = i;
            while (i < n && s[i] >= '0' && s[i] <= '9') i++;
            if (i == d) return false;
        }
    }
    return i == n;
}

typedef struct refcase {
    const char *name, *gbnf, *alphabet;
    bool (*ref)(const char *, size_t);
    int max_len;
    int max_prefix; /* prefixes this short can always be finished within max_len */
} refcase;

/* Every string of the alphabet up to max_len: the matcher (fed the whole
 * string at once, and also byte by byte) against the reference; prefixes
 * against "some accepted string of length <= max_len starts with it",
 * checked for prefixes short enough that any continuation fits. */
static void check_exhaustive(const refcase *rc) {
    okv_grammar *g = parse(rc->gbnf);
    if (!g) return;
    okv_error err;
    okv_grammar_matcher *m0 = okv_grammar_matcher_create(g, &err);
    CHECK(m0 != NULL, "matcher: %s", err.message);
    const int A = (int)strlen(rc->alphabet), L = rc->max_len;
    /* All strings by length, as base-A counters. */
    size_t total = 0;
    for (int len = 0, p = 1; len <= L; len++, p *= A) total += (size_t)p;
    char (*str)[16] = calloc(total, sizeof *str);
    uint8_t *slen = calloc(total, 1), *acc = calloc(total, 1);
    size_t k = 0;
    for (int len = 0, p = 1; len <= L; len++, p *= A) {
        for (int x = 0; x < p; x++, k++) {
            int y = x;
            for (int j = len - 1; j >= 0; j--, y /= A) str[k][j] = rc->alphabet[y % A];
            slen[k] = (uint8_t)len;
            acc[k] = rc->ref(str[k], (size_t)len);
        }
    }
    int bad_whole = 0, bad_prefix = 0, bad_split = 0, checked_prefix = 0;
    for (size_t i = 0; i < total; i++) {
        okv_grammar_matcher *m = okv_grammar_matcher_clone(m0, &err);
        bool kept = okv_grammar_matcher_accept_bytes(m, str[i], slen[i]);
        bool whole = kept && okv_grammar_matcher_can_end(m);
        if (whole != (bool)acc[i]) {
            if (bad_whole++ < 5)
                fprintf(stderr, "  %s: '%.*s' matcher %d reference %d\n", rc->name, slen[i], str[i], whole, acc[i]);
        }
        /* Byte by byte through one matcher gives the same answer. */
        okv_grammar_matcher_reset(m);
        bool kept2 = true;
        for (int j = 0; j < slen[i] && kept2; j++) kept2 = okv_grammar_matcher_accept_bytes(m, str[i] + j, 1);
        bad_split += (kept2 && okv_grammar_matcher_can_end(m)) != whole || kept2 != kept;
        if (slen[i] <= rc->max_prefix) {
            bool viable = false;
            for (size_t j = 0; j < total && !viable; j++)
                viable = acc[j] && slen[j] >= slen[i] && memcmp(str[j], str[i], slen[i]) == 0;
            checked_prefix++;
            if (viable != kept && bad_prefix++ < 5)
                fprintf(stderr, "  %s: prefix '%.*s' matcher %d reference %d\n", rc->name, slen[i], str[i], kept, viable);
        }
        okv_grammar_matcher_free(m);
    }
    CHECK(bad_whole == 0, "%s: %d of %zu strings judged differently from the reference", rc->name, bad_whole, total);
    CHECK(bad_prefix == 0, "%s: %d of %d prefixes judged differently", rc->name, bad_prefix, checked_prefix);
    CHECK(bad_split == 0, "%s: %d strings differ when fed byte by byte", rc->name, bad_split);
    int n_acc = 0;
    for (size_t i = 0; i < total; i++) n_acc += acc[i];
    CHECK(n_acc > 3 && (size_t)n_acc < total, "%s: the reference accepts %d of %zu (a useless case)", rc->name, n_acc, total);
    free(str);
    free(slen);
    free(acc);
    okv_grammar_matcher_free(m0);
    okv_grammar_free(g);
}

static void test_against_references(void) {
    const refcase cases[] = {
        {"parens", "root ::= (\"(\" root \")\")*", "()", ref_parens, 12, 6},
        {"reps", "root ::= \"a\"{2,4} \"b\"* (\"c\" | \"dd\")?", "abcd", ref_reps, 8, 5},
        {"expr", "root ::= expr\nexpr ::= term (\"+\" term)*\nterm ::= \"1\" | \"(\" expr \")\"", "1+()", ref_expr, 9, 4},
        {"class", "root ::= [a-c]+ [^a-c\\n] | \"x\"", "abxd\n", ref_class, 7, 5},
        {"list", "root ::= kv (\",\" kv){0,2}\nkv ::= \"k\" (\"=\" [0-9]+)?", "k=1,", ref_list, 9, 6},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) check_exhaustive(&cases[i]);
}

static void test_utf8(void) {
    okv_grammar *g = parse("root ::= [α-ω]+ \"!\" | \"é\" .");
    okv_error err;
    okv_grammar_matcher *m = okv_grammar_matcher_create(g, &err);
    const char *alpha = "αβω!"; /* 2-byte characters, fed one byte at a time */
    bool ok = true;
    for (size_t i = 0; i < strlen(alpha); i++) {
        ok &= okv_grammar_matcher_accept_bytes(m, alpha + i, 1);
        if (i == 0) CHECK(!okv_grammar_matcher_can_end(m), "half a character is not an end");
    }
    CHECK(ok && okv_grammar_matcher_can_end(m), "split characters accepted");
    okv_grammar_matcher_reset(m);
    CHECK(!okv_grammar_matcher_accept_bytes(m, "\xce\xb1" "a", 3), "ascii after a Greek letter refused");
    CHECK(!okv_grammar_matcher_accept_bytes(m, "\xd0", 1), "a lead byte of Cyrillic (U+0400..) cannot become α-ω");
    CHECK(okv_grammar_matcher_accept_bytes(m, "\xce", 1), "a lead byte of Greek can");
    CHECK(!okv_grammar_matcher_accept_bytes(m, "\x41", 1), "an unfinished character then ascii is refused");
    okv_grammar_matcher_reset(m);
    CHECK(okv_grammar_matcher_accept_bytes(m, "é\xf0\x9f\x98\x80", 6) && okv_grammar_matcher_can_end(m), "'.' takes an emoji");
    CHECK(okv_grammar_matcher_must_end(m), "nothing may follow");
    okv_grammar_matcher_reset(m);
    CHECK(!okv_grammar_matcher_accept_bytes(m, "\xc3\x28", 2), "invalid UTF-8 refused");
    okv_grammar_matcher_free(m);
    okv_grammar_free(g);
    /* Overlong forms, surrogates and code points past U+10FFFF are not
     * characters, not even to '.': refused at the byte that decides it
     * (byte-fallback tokens could spell '{' as F0 80 81 BB). */
    g = parse("root ::= \"{\" | . .");
    m = okv_grammar_matcher_create(g, &err);
    const struct {
        const char *b;
        size_t keep; /* bytes accepted before the refusal */
    } bad[] = {{"\xf0\x80\x81\xbb", 1}, {"\xc1\xbb", 0}, {"\xe0\x81\xbb", 1}, {"\xed\xa0\x80", 1}, {"\xf4\x90\x80\x80", 1}, {"\xf5", 0}};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        okv_grammar_matcher_reset(m);
        size_t j = 0;
        while (bad[i].b[j] && okv_grammar_matcher_accept_bytes(m, bad[i].b + j, 1)) j++;
        CHECK(j == bad[i].keep, "case %zu: %zu bytes accepted, want %zu", i, j, bad[i].keep);
    }
    okv_grammar_matcher_free(m);
    okv_grammar_free(g);
    /* And a lead byte is kept only if a real character it begins fits. */
    g = parse("root ::= \"{\" | [\\u0800-\\u0FFF] | [\\U00010000-\\U00010001]");
    m = okv_grammar_matcher_create(g, &err);
    CHECK(okv_grammar_matcher_accept_bytes(m, "\xe0", 1), "E0 can begin U+0800");
    okv_grammar_matcher_reset(m);
    CHECK(okv_grammar_matcher_accept_bytes(m, "\xf0", 1), "F0 can begin U+10000");
    CHECK(!okv_grammar_matcher_accept_bytes(m, "\x8f", 1), "F0 8F would be overlong");
    okv_grammar_matcher_reset(m);
    CHECK(!okv_grammar_matcher_accept_bytes(m, "\xc2", 1), "C2 begins U+0080..U+00BF: none fits");
    CHECK(!okv_grammar_matcher_accept_bytes(m, "\xe1", 1), "E1 begins U+1000..: none fits");
    okv_grammar_matcher_free(m);
    okv_grammar_free(g);
    g = parse("root ::= \"{\"");
    m = okv_grammar_matcher_create(g, &err);
    CHECK(!okv_grammar_matcher_accept_bytes(m, "\xf0", 1), "F0 cannot begin '{'");
    CHECK(!okv_grammar_matcher_accept_bytes(m, "\xe0", 1), "E0 cannot begin '{'");
    CHECK(!okv_grammar_matcher_accept_bytes(m, "\xc2", 1), "C2 cannot begin '{'");
    okv_grammar_matcher_free(m);
    okv_grammar_free(g);
    /* A negated class whose ranges cover a lead byte's block together (no
     * one of them does): the lead byte was taken, then nothing could follow. */
    g = parse("root ::= [^\\u0080-\\u009F\\u00A0-\\u00BF]+");
    m = okv_grammar_matcher_create(g, &err);
    CHECK(!okv_grammar_matcher_accept_bytes(m, "\xc2", 1), "C2 begins only U+0080..U+00BF, all excluded");
    CHECK(okv_grammar_matcher_accept_bytes(m, "\xc3\xa9", 2), "C3 A9 (U+00E9) is outside the class");
    okv_grammar_matcher_free(m);
    okv_grammar_free(g);
    g = parse("root ::= \"{\" | . .");
    m = okv_grammar_matcher_create(g, &err);
    CHECK(okv_grammar_matcher_accept_bytes(m, "\xed\x9f\xbf\xf4\x8f\xbf\xbf", 7) && okv_grammar_matcher_can_end(m),
          "U+D7FF and U+10FFFF are characters");
    okv_grammar_matcher_free(m);
    okv_grammar_free(g);
}

/* The lazy reference: text is free up to the first trigger; from there
 * on it must begin a sentence of g (a fresh, eager matcher over that part). */
static bool lazy_ref(const okv_grammar *g, const char *text, size_t n, const char *trig, bool anchored, bool *on) {
    const size_t tn = strlen(trig);
    size_t at = n;
    if (anchored) {
        size_t i = 0;
        while (i < n && strchr(" \n\t\r", text[i])) i++;
        at = n - i >= tn && !memcmp(text + i, trig, tn) ? i : n;
    } else {
        for (size_t i = 0; i + tn <= n && at == n; i++)
            if (!memcmp(text + i, trig, tn)) at = i;
    }
    *on = at < n;
    if (at == n) return true;
    okv_error err;
    okv_grammar_matcher *m = okv_grammar_matcher_create(g, &err);
    bool ok = okv_grammar_matcher_accept_bytes(m, text + at, n - at);
    okv_grammar_matcher_free(m);
    return ok;
}

/* Lazy matchers (tool_choice "auto"): every text split in two at every
 * byte, each part judged against the reference, the trigger split between
 * the parts or inside one with text before and after it. */
static void test_lazy(void) {
    okv_grammar *g = parse("root ::= \"<tool_call>\" [0-9]+ \"</tool_call>\"");
    static const char *const texts[] = {"hello <tool_call>12</tool_call>", "a<tool_call>x", "<tool_<tool_call>5",
                                        "<tool_call<tool_call>7</tool_call>", "no call at all", "x<tool_call>12</tool_call>y",
                                        "<tool_call>", "<<tool_call>>", "tool_call>3"};
    okv_error err;
    int bad = 0;
    for (size_t t = 0; g && t < sizeof texts / sizeof *texts; t++) {
        const size_t n = strlen(texts[t]);
        for (size_t s = 0; s <= n; s++) {
            okv_grammar_matcher *m = okv_grammar_matcher_create_lazy(g, "<tool_call>", 11, false, &err);
            bool on1, on2;
            const bool r1 = lazy_ref(g, texts[t], s, "<tool_call>", false, &on1);
            const bool a1 = okv_grammar_matcher_accept_bytes(m, texts[t], s);
            bool a2 = false, r2 = false;
            if (a1 && r1) {
                okv_grammar_matcher *c = okv_grammar_matcher_clone(m, &err); /* forks keep the waiting text */
                r2 = lazy_ref(g, texts[t], n, "<tool_call>", false, &on2);
                a2 = okv_grammar_matcher_accept_bytes(c, texts[t] + s, n - s);
                if (a2 && okv_grammar_matcher_triggered(c) != on2) bad++;
                if (a2 && !on2 && !okv_grammar_matcher_can_end(c)) bad++; /* free text may end anywhere */
                okv_grammar_matcher_free(c);
            }
            if (a1 != r1 || a2 != r2 || (a1 && okv_grammar_matcher_triggered(m) != on1)) {
                if (bad++ < 5)
                    fprintf(stderr, "  '%s' split at %zu: lazy %d %d, reference %d %d\n", texts[t], s, a1, a2, r1, r2);
            }
            okv_grammar_matcher_reset(m); /* back to waiting */
            CHECK(!okv_grammar_matcher_triggered(m) && okv_grammar_matcher_accept_bytes(m, "free <tool", 10) &&
                      !okv_grammar_matcher_accept_bytes(m, "_call>x", 7) && okv_grammar_matcher_accept_bytes(m, "_call>4", 7) &&
                      okv_grammar_matcher_triggered(m) && !okv_grammar_matcher_can_end(m),
                  "reset: waiting again, then the trigger split over two pieces");
            okv_grammar_matcher_free(m);
        }
    }
    CHECK(bad == 0, "lazy matcher: %d judgements differ from the reference", bad);
    okv_grammar_free(g);

    /* anchored: a bare JSON call opens the answer, or the answer is free */
    g = parse("root ::= \"{\" [a-z]* \"}\"");
    static const struct { const char *text; bool ok, on; } an[] = {
        {"  {ab}", true, true}, {"x{1", true, false}, {" {1", false, false}, {"\n{}", true, true}, {"", true, false}};
    for (size_t i = 0; g && i < sizeof an / sizeof *an; i++) {
        okv_grammar_matcher *m = okv_grammar_matcher_create_lazy(g, "{", 1, true, &err);
        const bool ok = okv_grammar_matcher_accept_bytes(m, an[i].text, strlen(an[i].text));
        CHECK(ok == an[i].ok && (!ok || okv_grammar_matcher_triggered(m) == an[i].on), "anchored '%s': %d, triggered %d",
              an[i].text, ok, okv_grammar_matcher_triggered(m));
        okv_grammar_matcher_free(m);
    }
    CHECK(okv_grammar_matcher_create_lazy(g, "", 0, false, &err) == NULL && err.status == OKV_ERR_INVALID,
          "an empty trigger is refused");
    okv_grammar_free(g);
}

/* The block reference: where the text after a leading <think> block
 * begins (inside: the prompt left the model in one), or n when the text is
 * all block so far (free). */
static size_t block_end(const char *text, size_t n, bool inside) {
    size_t from = 0;
    if (!inside) {
        size_t i = 0;
        while (i < n && strchr(" \n\t\r", text[i])) i++;
        if (n - i < 7) return memcmp(text + i, "<think>", n - i) ? 0 : n; /* may still open one */
        if (memcmp(text + i, "<think>", 7) != 0) return 0;                /* no block */
        from = i + 7;
    }
    for (size_t i = from; i + 8 <= n; i++)
        if (!memcmp(text + i, "</think>", 8)) return i + 8;
    return n;
}

/* Lazy matchers that skip a leading <think> block (a reasoning model's
 * thoughts may name a tool call's opener): split at every byte, judged
 * against the reference (the block free, then lazy_ref over the rest). */
static void test_lazy_block(void) {
    static const struct { const char *grammar, *trig; bool anchored; const char *texts[10]; } sets[] = {
        {"root ::= \"<tool_call>\" [0-9]+ \"</tool_call>\"", "<tool_call>", false,
         {"<think>I may use <tool_call>x</think>\n<tool_call>12</tool_call>", "<think>use <tool_call>x</think> <tool_call>x",
          "  <think><tool_call>x", "<thinking <tool_call>x", "<tool_call>12</tool_call>", "<thi",
          "a</think><tool_call>7</tool_call>", "a</think><tool_call>x", "<tool_call>x</think><tool_call>1</tool_call>",
          "</think</think>x<tool_call>5"}},
        {"root ::= \"{\" [a-z]* \"}\"", "{", true,
         {"<think>{x</think>\n{ab}", "<think>a</think> x{", "{bad</think>{ab}", "{ab}", " <think>{</think>{1", "x</think>{a}",
          "<think></think>", NULL}},
    };
    okv_error err;
    int bad = 0, cases = 0;
    for (size_t k = 0; k < sizeof sets / sizeof *sets; k++) {
        okv_grammar *g = parse(sets[k].grammar);
        const size_t tn = strlen(sets[k].trig);
        for (size_t t = 0; g && t < 10 && sets[k].texts[t]; t++) {
            const char *text = sets[k].texts[t];
            const size_t n = strlen(text);
            for (int inside = 0; inside < 2; inside++) {
                for (size_t s = 0; s <= n; s++, cases++) {
                    okv_grammar_matcher *m = okv_grammar_matcher_create_lazy(g, sets[k].trig, tn, sets[k].anchored, &err);
                    CHECK_STATUS(okv_grammar_matcher_skip_block(m, "<think>", "</think>", inside, &err), OKV_OK, err);
                    bool on1, on2 = false, r2 = false, a2 = false;
                    const size_t e1 = block_end(text, s, inside), e2 = block_end(text, n, inside);
                    const bool r1 = lazy_ref(g, text + e1, s - e1, sets[k].trig, sets[k].anchored, &on1);
                    const bool a1 = okv_grammar_matcher_accept_bytes(m, text, s);
                    if (a1 && r1) {
                        okv_grammar_matcher *c = okv_grammar_matcher_clone(m, &err); /* forks keep the block phase */
                        r2 = lazy_ref(g, text + e2, n - e2, sets[k].trig, sets[k].anchored, &on2);
                        a2 = okv_grammar_matcher_accept_bytes(c, text + s, n - s);
                        if (a2 && okv_grammar_matcher_triggered(c) != on2) bad++;
                        okv_grammar_matcher_free(c);
                    }
                    if (a1 != r1 || a2 != r2 || (a1 && okv_grammar_matcher_triggered(m) != on1)) {
                        if (bad++ < 5)
                            fprintf(stderr, "  '%s' (inside %d) split at %zu: lazy %d %d, reference %d %d\n", text, inside, s,
                                    a1, a2, r1, r2);
                    }
                    okv_grammar_matcher_free(m);
                }
            }
        }
        okv_grammar_free(g);
    }
    CHECK(bad == 0, "lazy matcher with a block: %d of %d judgements differ from the reference", bad, cases);
    okv_grammar *g = parse("root ::= \"x\"");
    okv_grammar_matcher *lazy = okv_grammar_matcher_create_lazy(g, "x", 1, false, &err);
    CHECK(okv_grammar_matcher_skip_block(lazy, "", "</think>", false, &err) == OKV_ERR_INVALID, "an empty tag: %s", err.message);
    CHECK(okv_grammar_matcher_accept_bytes(lazy, "ab", 2) &&
              okv_grammar_matcher_skip_block(lazy, "<think>", "</think>", false, &err) == OKV_ERR_INVALID &&
              strstr(err.message, "read text"),
          "skip_block after text: %s", err.message);
    okv_grammar_matcher_free(lazy);
    okv_grammar_free(g);
}

/* The eager reference, from the rule: with inside, the text through the
 * first </think> is free; else up to 4 bytes of white space, then either a
 * prefix of <think> (waiting), or <think> and the text through the first
 * </think> after it, or no block.  After the block (or none), up to 4
 * bytes of white space are free and the grammar (a plain matcher) takes
 * the rest; *end: whether the text may end there. */
static bool eager_ref(const okv_grammar *g, const char *text, size_t n, bool inside, bool *end) {
    okv_error err;
    okv_grammar_matcher *m = okv_grammar_matcher_create(g, &err);
    size_t e = 0;
    bool waiting = false;
    if (inside) {
        e = block_end(text, n, true);
        waiting = e == n && !(n >= 8 && !memcmp(text + n - 8, "</think>", 8));
    } else {
        size_t lead = 0;
        while (lead < n && strchr(" \n\t\r", text[lead])) lead++;
        if (lead <= 4) {
            const size_t r = n - lead, c = r < 7 ? r : 7;
            if (!memcmp(text + lead, "<think>", c)) {
                e = r < 7 ? n : block_end(text, n, false);
                waiting = e == n && !(r >= 15 && !memcmp(text + n - 8, "</think>", 8));
            }
        }
    }
    for (int k = 0; !waiting && k < 4 && e < n && strchr(" \n\t\r", text[e]); k++) e++;
    const bool ok = waiting || okv_grammar_matcher_accept_bytes(m, text + e, n - e);
    *end = okv_grammar_matcher_can_end(m);
    okv_grammar_matcher_free(m);
    return ok;
}

/* Matchers that are not lazy skip a leading <think> block too (structured
 * output from a reasoning model: it thinks, then answers in the grammar):
 * split at every byte, judged against eager_ref, whether the text may end
 * included. */
static void test_eager_block(void) {
    static const char *const texts[] = {
        "<think>any {x}</think>\n\n{ab}", "<think>x</think>{ab", "{ab}", " \n{ab}", "x{ab}", "reasoning</think> {a}",
        "reasoning {a", "<think>x</think>x", "<thi", "<think></think>{}", "  <think>\n</think>\n\n{z}x",
        "<think>a</think>\n\n\n\n{a}", "<think>a</think>\n\n\n\n\n{a}", " \t \t {b}", "\n\n\n\n<think>a</think>{b}",
        "\n\n\n\n\n<think>a</think>{b}", "\n\n\n\n\n\n\n", NULL};
    okv_grammar *g = parse("root ::= \"{\" [a-z]* \"}\"");
    okv_error err;
    int bad = 0, cases = 0;
    for (size_t t = 0; g && texts[t]; t++) {
        const size_t n = strlen(texts[t]);
        for (int inside = 0; inside < 2; inside++)
            for (size_t s = 0; s <= n; s++, cases++) {
                okv_grammar_matcher *m = okv_grammar_matcher_create(g, &err);
                CHECK_STATUS(okv_grammar_matcher_skip_block(m, "<think>", "</think>", inside, &err), OKV_OK, err);
                bool e1, e2 = false, a2 = false, r2 = false;
                const bool r1 = eager_ref(g, texts[t], s, inside, &e1);
                const bool a1 = okv_grammar_matcher_accept_bytes(m, texts[t], s);
                bool same = a1 == r1 && (!a1 || okv_grammar_matcher_can_end(m) == e1);
                if (a1 && r1) {
                    okv_grammar_matcher *c = okv_grammar_matcher_clone(m, &err);
                    r2 = eager_ref(g, texts[t], n, inside, &e2);
                    a2 = okv_grammar_matcher_accept_bytes(c, texts[t] + s, n - s);
                    same = same && a2 == r2 && (!a2 || okv_grammar_matcher_can_end(c) == e2);
                    okv_grammar_matcher_free(c);
                }
                if (!same && bad++ < 5)
                    fprintf(stderr, "  '%s' (inside %d) split at %zu: eager %d %d, reference %d %d\n", texts[t], inside, s,
                            a1, a2, r1, r2);
                okv_grammar_matcher_free(m);
            }
    }
    CHECK(bad == 0, "eager matcher with a block: %d of %d judgements differ from the reference", bad, cases);
    okv_grammar_free(g);
}

/* The tokenizer of ../shared/vocab/file; NULL (having said why) when
 * ../shared is absent or the file does not load. */
static okv_tokenizer *shared_vocab(const char *file, const char *what) {
    const char *shared = check_shared_dir();
    if (!shared) {
        printf("skipped %s: ../shared not found\n", what);
        return NULL;
    }
    char path[4096];
    snprintf(path, sizeof path, "%s/vocab/%s", shared, file);
    okv_error err;
    okv_gguf *gg = okv_gguf_open(path, &err);
    okv_tokenizer *tok = gg ? okv_tokenizer_from_gguf(gg, &err) : NULL;
    okv_gguf_close(gg);
    CHECK(tok != NULL, "%s: %s", path, err.message);
    return tok;
}

/* A grammar ambiguous enough that a mask over a vocabulary costs seconds
 * (each byte within MAX_EXPANSIONS, times the trie's nodes): the walk stops
 * at the mask's work bound, and what it allows the grammar takes. */
static void test_mask_budget(void) {
    okv_tokenizer *tok = shared_vocab("ggml-vocab-phi-3.gguf", "the mask's work bound");
    if (!tok) return;
    okv_error err;
    okv_grammar_vocab *v = okv_grammar_vocab_create(tok, NULL, 0, &err);
    okv_grammar *g = parse("root ::= ( [a-z] a6 )+\na6 ::= a5 a5\na5 ::= a4 a4\na4 ::= a3 a3\na3 ::= a2 a2\n"
                           "a2 ::= a1 a1\na1 ::= a0 a0\na0 ::= [a-z] | \"\"");
    okv_grammar_matcher *m = g ? okv_grammar_matcher_create(g, &err) : NULL;
    const int32_t n = okv_tokenizer_n_vocab(tok);
    bool *allowed = calloc((size_t)n, 1);
    if (m && v && allowed) {
        const int32_t count = okv_grammar_matcher_mask(m, v, allowed);
        const long work = okv_grammar_matcher_mask_work(m);
        CHECK(work <= okv_grammar_matcher_mask_budget() + 1000, "the walk stops at its bound: %ld expansions, bound %ld", work,
              okv_grammar_matcher_mask_budget());
        CHECK(count > 0, "the tokens found before the bound are allowed (%d)", (int)count);
        int wrong = 0, seen = 0;
        for (int32_t id = 0; id < n && seen < 100; id++)
            if (allowed[id] && (++seen, !okv_grammar_matcher_allows(m, v, id))) wrong++;
        CHECK(wrong == 0, "every token the stopped mask allows, the grammar takes (%d of the first %d not)", wrong, seen);
    }
    free(allowed);
    okv_grammar_matcher_free(m);
    okv_grammar_free(g);
    okv_grammar_vocab_free(v);
    okv_tokenizer_free(tok);
}

/* A matcher that is not lazy, with a <think> block the prompt opened, on
 * Qwen 3's vocabulary: control tokens (no text) are free in the block, and
 * refused past it, where the grammar wants its first byte (a model that
 * liked one looped on it forever); the end token waits for the grammar. */
static void test_eager_block_tokens(void) {
    okv_tokenizer *tok = shared_vocab("ggml-vocab-qwen3.gguf", "an eager block on a real vocabulary");
    if (!tok) return;
    okv_error err;
    okv_grammar_vocab *v = okv_grammar_vocab_create(tok, NULL, 0, &err);
    okv_grammar *g = parse("root ::= \"{\" [a-z]* \"}\"");
    okv_grammar_matcher *m = g ? okv_grammar_matcher_create(g, &err) : NULL;
    const int32_t im_start = 151644, eos = okv_tokenizer_eos(tok);
    int32_t brace = -1, nl = -1;
    size_t n = 0;
    okv_tokenizer_encode(tok, "{", 1, 0, &brace, 1, &n, &err);
    okv_tokenizer_encode(tok, "\n", 1, 0, &nl, 1, &n, &err);
    if (m && v && okv_grammar_matcher_skip_block(m, "<think>", "</think>", true, &err) == OKV_OK) {
        CHECK(okv_grammar_matcher_allows(m, v, im_start) && okv_grammar_matcher_allows(m, v, brace) &&
                  !okv_grammar_matcher_allows(m, v, eos),
              "in the block: a control token and any text, no end");
        CHECK(okv_grammar_matcher_accept_bytes(m, "hmm</think>\n\n", 13), "the block closes");
        CHECK(!okv_grammar_matcher_allows(m, v, im_start) && okv_grammar_matcher_allows(m, v, brace) &&
                  okv_grammar_matcher_allows(m, v, nl) && !okv_grammar_matcher_allows(m, v, eos),
              "past it: no control token, the grammar's first byte or a little white space, no end");
        CHECK(okv_grammar_matcher_accept_bytes(m, "\n\n", 2) && !okv_grammar_matcher_allows(m, v, nl) &&
                  okv_grammar_matcher_allows(m, v, brace),
              "four bytes of white space, and no more");
    }
    okv_grammar_matcher_free(m);
    okv_grammar_free(g);
    okv_grammar_vocab_free(v);
    okv_tokenizer_free(tok);
}

/* The vocabulary mask against per-token answers, at positions along a JSON
 * text, on Qwen 3's vocabulary. */
static void test_mask_qwen(void) {
    okv_tokenizer *tok = shared_vocab("ggml-vocab-qwen3.gguf", "mask on a real vocabulary");
    if (!tok) return;
    okv_error err;
    okv_grammar_vocab *v = okv_grammar_vocab_create(tok, NULL, 0, &err);
    CHECK(v != NULL, "vocab: %s", err.message);
    const int32_t n = okv_tokenizer_n_vocab(tok);
    static const char schema[] =
        "{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\"},\"age\":{\"type\":\"integer\",\"minimum\":0,"
        "\"maximum\":150},\"tags\":{\"type\":\"array\",\"items\":{\"enum\":[\"a\",\"b\"]}}},\"required\":[\"name\",\"age\"]}";
    char *gbnf = okv_json_schema_to_gbnf(schema, strlen(schema), &err);
    CHECK(gbnf != NULL, "schema: %s", err.message);
    okv_grammar *g = gbnf ? parse(gbnf) : NULL;
    okv_grammar_matcher *m = g ? okv_grammar_matcher_create(g, &err) : NULL;
    bool *mask = malloc((size_t)n);
    const char *doc = "{\"name\": \"Zoë \\\"Z\\\"\", \"age\": 42, \"tags\": [\"a\"]}";
    int bad = 0, positions = 0;
    for (size_t pos = 0; m && v && pos <= strlen(doc); pos++) {
        if (pos == 0 || pos == 3 || pos == 12 || pos == 25 || pos == 27 || pos == strlen(doc)) {
            int32_t count = okv_grammar_matcher_mask(m, v, mask);
            int32_t ref = 0;
            for (int32_t id = 0; id < n; id++) {
                bool a = okv_grammar_matcher_allows(m, v, id);
                ref += a;
                if (a != mask[id] && bad++ < 5) fprintf(stderr, "  position %zu token %d: mask %d, per token %d\n", pos, id, mask[id], a);
            }
            CHECK(count == ref, "position %zu: mask counts %d, per token %d", pos, count, ref);
            /* A second call hits the cache and says the same. */
            CHECK(okv_grammar_matcher_mask(m, v, mask) == count, "cached mask");
            positions++;
            if (pos == strlen(doc)) {
                CHECK(mask[okv_tokenizer_eos(tok)], "EOS allowed at the end");
                CHECK(count < 40, "only whitespace and EOS after the object: %d tokens", count);
            }
            if (pos == 0) CHECK(!mask[okv_tokenizer_eos(tok)] && count < 50, "start: '{' tokens only (%d)", count);
        }
        if (pos < strlen(doc)) CHECK(okv_grammar_matcher_accept_bytes(m, doc + pos, 1), "document byte %zu", pos);
    }
    CHECK(bad == 0 && positions == 6, "%d mask entries differ from per-token answers", bad);
    /* Tokens, not bytes: encode the document and accept token by token. */
    okv_grammar_matcher_reset(m);
    int32_t ids[256];
    size_t nid = 0;
    okv_status st = okv_tokenizer_encode(tok, doc, strlen(doc), 0, ids, 256, &nid, &err);
    CHECK(st == OKV_OK, "encode: %s", err.message);
    for (size_t i = 0; i < nid && st == OKV_OK; i++) {
        CHECK(okv_grammar_matcher_allows(m, v, ids[i]), "token %zu allowed", i);
        st = okv_grammar_matcher_accept_token(m, v, ids[i], &err);
        CHECK(st == OKV_OK, "token %zu: %s", i, err.message);
    }
    CHECK(okv_grammar_matcher_accept_token(m, v, okv_tokenizer_eos(tok), &err) == OKV_OK, "EOS at the end: %s", err.message);
    okv_grammar_matcher_reset(m);
    st = okv_grammar_matcher_accept_token(m, v, okv_tokenizer_eos(tok), &err);
    CHECK(st == OKV_ERR_INVALID && strstr(err.message, "before the grammar is complete"), "EOS first refused: %s", err.message);
    free(mask);
    okv_grammar_matcher_free(m);
    okv_grammar_free(g);
    free(gbnf);
    okv_grammar_vocab_free(v);
    okv_tokenizer_free(tok);
}

/* A hostile grammar: 30 nested nullable rules, each two copies of the next,
 * is ambiguous past counting; a step must still end quickly (refusing the
 * byte when its expansion budget runs out), never hang. */
static void test_ambiguous(void) {
    char text[4096];
    size_t n = 0;
    n += (size_t)snprintf(text + n, sizeof text - n, "root ::= r1 r1\n");
    for (int i = 1; i < 30; i++) n += (size_t)snprintf(text + n, sizeof text - n, "r%d ::= | r%d r%d\n", i, i + 1, i + 1);
    n += (size_t)snprintf(text + n, sizeof text - n, "r30 ::= | \"x\"\n");
    okv_error err;
    okv_grammar *g = okv_grammar_parse(text, n, NULL, &err);
    CHECK(g != NULL, "ambiguous grammar parses: %s", err.message);
    okv_grammar_matcher *m = g ? okv_grammar_matcher_create(g, &err) : NULL;
    if (m) {
        bool a = okv_grammar_matcher_accept_bytes(m, "x", 1);
        printf("ambiguous grammar: 'x' %s within the expansion budget\n", a ? "accepted" : "refused");
    } else {
        /* its start state alone runs past the budget: refused, not cut short */
        CHECK(g == NULL || strstr(err.message, "limits"), "ambiguous grammar's matcher: %s", err.message);
    }
    okv_grammar_matcher_free(m);
    okv_grammar_free(g);
}

/* Grammars whose shape made the library recurse once a level: nested
 * groups (the parser), a chain of rules a0 ::= a1 ... (the left-recursion
 * check, and the matcher's expansion).  Each is an error or works; none
 * may overflow the stack. */
static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void test_deep(void) {
    enum { N = 100000 };
    okv_error err;
    char *t = malloc((size_t)N * 24 + 64);
    size_t n = (size_t)sprintf(t, "root ::= ");
    for (int i = 0; i < N; i++) t[n++] = '(';
    n += (size_t)sprintf(t + n, "\"x\"");
    for (int i = 0; i < N; i++) t[n++] = ')';
    okv_grammar *g = okv_grammar_parse(t, n, NULL, &err);
    CHECK(!g && strstr(err.message, "nested more than"), "100000 nested groups: %s", g ? "parsed" : err.message);
    okv_grammar_free(g);
    for (int cyclic = 0; cyclic < 2; cyclic++) {
        n = (size_t)sprintf(t, "root ::= a0\n");
        for (int i = 0; i < N - 1; i++) n += (size_t)sprintf(t + n, "a%d ::= a%d\n", i, i + 1);
        n += (size_t)sprintf(t + n, cyclic ? "a%d ::= a0\n" : "a%d ::= \"x\"\n", N - 1);
        g = okv_grammar_parse(t, n, NULL, &err);
        if (cyclic) {
            CHECK(!g && strstr(err.message, "left-recursive"), "a cycle of %d rules: %s", N, g ? "parsed" : err.message);
        } else {
            CHECK(g != NULL, "a chain of %d rules: %s", N, err.message);
            okv_grammar_matcher *m = g ? okv_grammar_matcher_create(g, &err) : NULL;
            CHECK(g && !m && strstr(err.message, "limits"), "a chain of %d rules' matcher: %s", N, m ? "made" : err.message);
            okv_grammar_matcher_free(m);
        }
        okv_grammar_free(g);
    }
    free(t);
    /* a chain whose last rule matches "": the nullable-rule sweep took one
     * pass over all rules per rule (40 000: 5 s; 400 000: about 9 minutes) */
    enum { NN = 400000 };
    t = malloc((size_t)NN * 24 + 64);
    n = (size_t)sprintf(t, "root ::= a0\n");
    for (int i = 0; i < NN - 1; i++) n += (size_t)sprintf(t + n, "a%d ::= a%d\n", i, i + 1);
    n += (size_t)sprintf(t + n, "a%d ::= \"\" | \"x\"\n", NN - 1);
    const double t0 = now_s();
    g = okv_grammar_parse(t, n, NULL, &err);
    const double dt = now_s() - t0;
    CHECK(g != NULL, "a chain of %d rules down to \"\": %s", NN, err.message);
    CHECK(dt < 120, "a chain of %d rules down to \"\": parsed in %.1f s (a hang?)", NN, dt);
    okv_grammar_free(g);
    free(t);
}

int main(void) {
    test_ambiguous();
    test_deep();
    test_good();
    test_bad();
    test_against_references();
    test_utf8();
    test_lazy();
    test_lazy_block();
    test_eager_block();
    test_mask_budget();
    test_mask_qwen();
    test_eager_block_tokens();
    return check_done();
}
