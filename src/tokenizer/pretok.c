/* The byte-level BPE pre-tokenizer: llama.cpp's unicode_regex_split on
 * PCRE2.  Each regex of a list re-splits every piece the previous one left:
 * matches become pieces and so does any text between matches.  PCRE2 (in
 * UTF + UCP mode) supplies the Unicode categories; llama.cpp's own notion of
 * whitespace (the White_Space property) is imposed by rewriting non-ASCII
 * whitespace to U+000B before matching, which is what llama.cpp itself does
 * to make std::regex see it. */
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "tokenizer/internal.h"

enum { PRETOK_MAX = 6 };

struct pretok {
    int n;
    pcre2_code *code[PRETOK_MAX];
};

/* llama.cpp's GPT-2 splitter implements this regex by hand, with a final
 * \s+ that the usual pattern lacks. */
#define RE_GPT2 "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+"
#define RE_CONTRACTIONS "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])"

typedef struct pretok_def {
    const char *names[4];
    bool ignore_merges, add_bos;
    const char *re[PRETOK_MAX];
} pretok_def;

static const pretok_def k_defs[] = {
    {{"default"}, false, false,
     {"[\\p{P}\\$\\+<=>\\^~\\|]+", RE_GPT2, "\\p{N}+", "[0-9][0-9][0-9]"}},
    {{"gpt-2", "gpt2"}, false, false, {RE_GPT2}},
    {{"starcoder"}, false, false, {"\\p{N}", RE_GPT2}},
    {{"deepseek-coder"}, false, false,
     {"[\\r\\n]", "\\s?\\p{L}+", "\\s?\\p{P}+",
      /* CJK ideographs, U+0800..U+4E00, Hangul: written as in llama.cpp */
      "[\\x{4E00}-\\x{9FA5}\\x{0800}-\\x{4E00}\\x{AC00}-\\x{D7FF}]+", "\\p{N}"}},
    {{"llama-bpe", "llama3", "llama-v3"}, true, true,
     {RE_CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*"
                      "|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"}},
    {{"qwen2"}, false, false,
     {RE_CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*"
                      "|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"}},
    /* o200k (gpt-oss, GPT-4o), as tiktoken and Hugging Face have it,
     * combining marks (\p{M}) included: llama.cpp drops them and so splits
     * Khmer and other scripts differently.  Each start position costs time
     * linear in the run it scans and a match consumes that run (the two
     * letter alternatives between them take any run of letters and marks),
     * so long runs of marks stay linear; test_tokenizer_bpe times 100k. */
    {{"gpt-4o"}, false, false,
     {"[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+" RE_CONTRACTIONS "?"
      "|[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*" RE_CONTRACTIONS "?"
      "|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"}},
};

void okv_pretok_free(struct pretok *p) {
    if (!p) return;
    for (int i = 0; i < p->n; i++) pcre2_code_free(p->code[i]);
    free(p);
}

okv_status okv_pretok_create(const char *name, struct pretok **out, bool *ignore_merges,
                         bool *add_bos_default, okv_error *err) {
    const pretok_def *def = NULL;
    for (size_t i = 0; i < sizeof k_defs / sizeof k_defs[0] && !def; i++)
        for (int j = 0; j < 4 && k_defs[i].names[j]; j++)
            if (strcmp(name, k_defs[i].names[j]) == 0) def = &k_defs[i];
    if (!def)
        return okv_fail(err, OKV_ERR_UNSUPPORTED,
                        "tokenizer: pre-tokenizer \"%s\" is not supported (known: default, "
                        "gpt-2, starcoder, deepseek-coder, llama-bpe, qwen2, gpt-4o)",
                        name);
    struct pretok *p = calloc(1, sizeof *p);
    if (!p) return okv_fail(err, OKV_ERR_NOMEM, "tokenizer: out of memory");
    for (int i = 0; i < PRETOK_MAX && def->re[i]; i++) {
        int code;
        PCRE2_SIZE at;
        /* DOLLAR_ENDONLY: std::regex's $ does not match before a final \n. */
        p->code[i] = pcre2_compile((PCRE2_SPTR)def->re[i], PCRE2_ZERO_TERMINATED,
                                   PCRE2_UTF | PCRE2_UCP | PCRE2_DOLLAR_ENDONLY, &code, &at, NULL);
        if (!p->code[i]) {
            PCRE2_UCHAR msg[128];
            pcre2_get_error_message(code, msg, sizeof msg);
            okv_pretok_free(p);
            return okv_fail(err, code == PCRE2_ERROR_HEAP_FAILED ? OKV_ERR_NOMEM : OKV_ERR_UNSUPPORTED,
                            "tokenizer: regex %d of pre-tokenizer \"%s\" does not compile at %zu: %s",
                            i, name, (size_t)at, (const char *)msg);
        }
        p->n = i + 1;
        /* JIT is only speed: where it is unavailable the interpreter runs. */
        (void)pcre2_jit_compile(p->code[i], PCRE2_JIT_COMPLETE);
    }
    *out = p;
    *ignore_merges = def->ignore_merges;
    *add_bos_default = def->add_bos;
    return OKV_OK;
}

size_t okv_tok_utf8_next(const char *s_, size_t n, uint32_t *cp) {
    const unsigned char *s = (const unsigned char *)s_;
    unsigned c = s[0];
    size_t need;
    uint32_t v;
    if (c < 0x80) {
        *cp = c;
        return 1;
    } else if ((c & 0x40) == 0) {
        need = 0; /* stray continuation byte */
        v = 0;
    } else if ((c & 0x20) == 0) {
        need = 2;
        v = c & 0x1f;
    } else if ((c & 0x10) == 0) {
        need = 3;
        v = c & 0x0f;
    } else if ((c & 0x08) == 0) {
        need = 4;
        v = c & 0x07;
    } else {
        need = 0;
        v = 0;
    }
    if (need == 0 || need > n) goto bad;
    for (size_t i = 1; i < need; i++) {
        if ((s[i] & 0xc0) != 0x80) goto bad;
        v = (v << 6) | (s[i] & 0x3f);
    }
    /* Like llama.cpp, overlong forms and surrogates pass; code points past
     * U+10FFFF, which llama.cpp cannot write back, do not. */
    if (v > 0x10FFFF) goto bad;
    *cp = v;
    return need;
bad:
    *cp = 0xFFFD;
    return 1;
}

size_t okv_tok_utf8_decode(const char *text, size_t len, uint32_t *cps) {
    size_t n = 0;
    for (size_t off = 0; off < len;) off += okv_tok_utf8_next(text + off, len - off, &cps[n++]);
    return n;
}

size_t okv_tok_utf8_put(uint32_t cp, char *dst) {
    unsigned char *d = (unsigned char *)dst;
    if (cp < 0x80) {
        d[0] = (unsigned char)cp;
        return 1;
    }
    if (cp < 0x800) {
        d[0] = (unsigned char)(0xc0 | (cp >> 6));
        d[1] = (unsigned char)(0x80 | (cp & 0x3f));
        return 2;
    }
    if (cp < 0x10000) {
        d[0] = (unsigned char)(0xe0 | (cp >> 12));
        d[1] = (unsigned char)(0x80 | ((cp >> 6) & 0x3f));
        d[2] = (unsigned char)(0x80 | (cp & 0x3f));
        return 3;
    }
    d[0] = (unsigned char)(0xf0 | (cp >> 18));
    d[1] = (unsigned char)(0x80 | ((cp >> 12) & 0x3f));
    d[2] = (unsigned char)(0x80 | ((cp >> 6) & 0x3f));
    d[3] = (unsigned char)(0x80 | (cp & 0x3f));
    return 4;
}

/* Unicode White_Space above ASCII: llama.cpp's is_whitespace set. */
static bool is_wide_space(uint32_t cp) {
    return cp == 0x85 || cp == 0xA0 || cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) ||
           cp == 0x2028 || cp == 0x2029 || cp == 0x202F || cp == 0x205F || cp == 0x3000;
}

/* The code point PCRE2 is shown in place of cp. */
static uint32_t match_cp(uint32_t cp) {
    if (cp > 0x7F && is_wide_space(cp)) return 0x0B;
    /* Surrogates are not valid UTF-8 for PCRE2, and PCRE2 counts U+180E as
     * \s where Unicode (and llama.cpp) no longer does: show both as another
     * code point of no letter, number, punctuation or space class. */
    if ((cp >= 0xD800 && cp <= 0xDFFF) || cp == 0x180E) return 0xE000;
    return cp;
}

typedef struct span {
    size_t a, b; /* byte range in the match text */
} span;

typedef struct span_list {
    span *v;
    size_t n, cap;
} span_list;

static bool span_push(span_list *l, size_t a, size_t b) {
    if (l->n == l->cap) {
        size_t cap = l->cap ? 2 * l->cap : 32;
        span *v = realloc(l->v, cap * sizeof *v);
        if (!v) return false;
        l->v = v;
        l->cap = cap;
    }
    l->v[l->n++] = (span){a, b};
    return true;
}

okv_status okv_pretok_split(const okv_tokenizer *t, const char *text, size_t len, char **buf_out,
                        size_t **ends_out, size_t *n_words, okv_error *err) {
    *buf_out = NULL;
    *ends_out = NULL;
    *n_words = 0;
    if (!len) return OKV_OK;
    okv_status st = OKV_OK;
    uint32_t *cps = malloc(len * sizeof *cps);
    char *m = malloc(4 * len + 1);             /* the text PCRE2 matches */
    size_t *cp_at = malloc((4 * len + 1) * sizeof *cp_at); /* byte of m -> code point index */
    span_list cur = {0}, next = {0};
    pcre2_match_data *md = pcre2_match_data_create(1, NULL);
    char *buf = NULL;
    size_t *ends = NULL;
    if (!cps || !m || !cp_at || !md) goto nomem;

    size_t n_cp = okv_tok_utf8_decode(text, len, cps);
    size_t mlen = 0;
    for (size_t i = 0; i < n_cp; i++) {
        cp_at[mlen] = i;
        mlen += okv_tok_utf8_put(match_cp(cps[i]), m + mlen);
    }
    cp_at[mlen] = n_cp;

    if (!span_push(&cur, 0, mlen)) goto nomem;
    for (int r = 0; r < t->pre->n; r++) {
        next.n = 0;
        for (size_t s = 0; s < cur.n; s++) {
            /* Each piece is matched as a text of its own, so $ and (?!\S)
             * see its end as the end, as in llama.cpp. */
            const char *subj = m + cur.v[s].a;
            size_t slen = cur.v[s].b - cur.v[s].a, pos = 0, done = 0;
            while (pos < slen) {
                int rc = pcre2_match(t->pre->code[r], (PCRE2_SPTR)subj, slen, pos,
                                     PCRE2_NO_UTF_CHECK, md, NULL);
                if (rc == PCRE2_ERROR_NOMATCH) break;
                if (rc < 0) {
                    PCRE2_UCHAR msg[128];
                    pcre2_get_error_message(rc, msg, sizeof msg);
                    const bool nomem = rc == PCRE2_ERROR_NOMEMORY || rc == PCRE2_ERROR_HEAPLIMIT;
                    st = okv_fail(err, nomem ? OKV_ERR_NOMEM : OKV_ERR_UNSUPPORTED,
                                  "tokenizer_encode: pre-tokenizer regex %d failed: %s", r,
                                  (const char *)msg);
                    goto done;
                }
                PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
                size_t a = ov[0], b = ov[1];
                if (b == a) {
                    /* None of the patterns can match empty; step past it so
                     * a future one that can still terminates. */
                    pos = a + tok_utf8_len((unsigned char)subj[a]);
                    continue;
                }
                if (a > done && !span_push(&next, cur.v[s].a + done, cur.v[s].a + a)) goto nomem;
                if (!span_push(&next, cur.v[s].a + a, cur.v[s].a + b)) goto nomem;
                done = pos = b;
            }
            if (done < slen && !span_push(&next, cur.v[s].a + done, cur.v[s].b)) goto nomem;
        }
        span_list tmp = cur;
        cur = next;
        next = tmp;
    }

    /* Words in GPT-2's byte characters: every code point is written back as
     * UTF-8 (an invalid byte thus becomes U+FFFD's three bytes), every byte
     * as the character that stands for it (at most two bytes). */
    buf = malloc(8 * n_cp + 1);
    ends = malloc((cur.n ? cur.n : 1) * sizeof *ends);
    if (!buf || !ends) goto nomem;
    size_t o = 0;
    for (size_t s = 0; s < cur.n; s++) {
        for (size_t i = cp_at[cur.v[s].a]; i < cp_at[cur.v[s].b]; i++) {
            char u[4];
            size_t un = okv_tok_utf8_put(cps[i], u);
            for (size_t k = 0; k < un; k++) o += okv_tok_utf8_put(t->byte_cp[(unsigned char)u[k]], buf + o);
        }
        ends[s] = o;
    }
    *buf_out = buf;
    *ends_out = ends;
    *n_words = cur.n;
    buf = NULL;
    ends = NULL;
    goto done;
nomem:
    st = okv_fail(err, OKV_ERR_NOMEM, "tokenizer_encode: out of memory");
done:
    free(cps);
    free(m);
    free(cp_at);
    free(cur.v);
    free(next.v);
    free(buf);
    free(ends);
    if (md) pcre2_match_data_free(md);
    return st;
}
