/* libFuzzer target: grammars and JSON Schemas from a client (offkv serve
 * takes both from any request).
 *
 * Input: a mode byte, then text up to a NUL, then bytes to match.  Mode
 * bit 0 clear: the text is GBNF; set: a JSON Schema, whose GBNF must then
 * parse (a converter output the parser refuses is a bug).  Bit 1: the
 * matcher skips a leading <think> block first (bit 2: the prompt opened
 * it), as the server's does for reasoning models.  A refusal must carry
 * a status and a message.  An accepted grammar gets a matcher that reads
 * the bytes one at a time, and at each step the vocabulary mask must agree
 * with asking token by token, over a small vocabulary of bytes, pairs and
 * multi-byte characters (a mask cut at its work bound: a part of it). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "grammar/grammar_impl.h" /* the mask's work and its bound */
#include "offkv/grammar.h"
#include "offkv/tokenizer.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static okv_tokenizer *tok;
static okv_grammar_vocab *vocab;

static void make_vocab(void) {
    static const char *const extra[] = {"</s>", "{\"", "\":", "\",", "\"}", "ab", "12", " \"", "é", "€", "\xe2\x82", "\xac", "null", "true", "  "};
    enum { N_EXTRA = sizeof extra / sizeof extra[0] };
    static char single[96][2];
    const char *tokens[96 + N_EXTRA];
    int32_t types[96 + N_EXTRA];
    int32_t n = 0;
    for (int c = 32; c < 127; c++) {
        single[c - 32][0] = (char)c;
        tokens[n] = single[c - 32];
        types[n++] = OKV_TOKEN_NORMAL;
    }
    single[95][0] = '\n';
    tokens[n] = single[95];
    types[n++] = OKV_TOKEN_NORMAL;
    for (int i = 0; i < N_EXTRA; i++) {
        tokens[n] = extra[i];
        types[n++] = i == 0 ? OKV_TOKEN_CONTROL : OKV_TOKEN_NORMAL;
    }
    okv_vocab_desc d = {.model = "llama", .n_tokens = n, .tokens = tokens, .types = types,
                        .bos_id = -1, .eos_id = 96, .unk_id = -1, .pad_id = -1, .add_bos = 0, .add_eos = 0};
    okv_error err;
    tok = okv_tokenizer_create(&d, &err);
    if (tok) vocab = okv_grammar_vocab_create(tok, NULL, 0, &err);
    if (!vocab) __builtin_trap(); /* the fixed vocabulary above must build */
}

static void run(const okv_grammar *g, const uint8_t *bytes, size_t n, int mode) {
    okv_error err;
    okv_grammar_matcher *m = okv_grammar_matcher_create(g, &err);
    if (!m) {
        if (err.status == OKV_OK) __builtin_trap();
        return;
    }
    if ((mode & 2) && okv_grammar_matcher_skip_block(m, "<think>", "</think>", mode & 4, &err) != OKV_OK &&
        err.status != OKV_ERR_NOMEM)
        __builtin_trap(); /* a fresh matcher takes a block */
    const int32_t nv = vocab ? okv_grammar_vocab_n_tokens(vocab) : 0;
    bool mask[128];
    for (size_t i = 0; i <= n && i < 64; i++) {
        if (vocab && i % 4 == 0) {
            const int32_t count = okv_grammar_matcher_mask(m, vocab, mask);
            /* a walk stopped at its work bound allows some of what the
             * grammar takes, and nothing it refuses (checked on a few: each
             * token's own walk there costs up to the per-byte bound) */
            const bool cut = okv_grammar_matcher_mask_work(m) > okv_grammar_matcher_mask_budget();
            int32_t seen = 0, asked = 0;
            for (int32_t t = 0; t < nv; t++) {
                if (cut && (!mask[t] || asked++ >= 4)) {
                    seen += mask[t];
                    continue;
                }
                if (mask[t] != okv_grammar_matcher_allows(m, vocab, t)) __builtin_trap();
                seen += mask[t];
            }
            if (seen != count) __builtin_trap();
        }
        if (i == n) break;
        const bool end_before = okv_grammar_matcher_can_end(m);
        if (!okv_grammar_matcher_accept_bytes(m, (const char *)bytes + i, 1)) {
            /* Refused: the position is unchanged. */
            if (okv_grammar_matcher_can_end(m) != end_before) __builtin_trap();
            continue;
        }
        if (okv_grammar_matcher_must_end(m) && !okv_grammar_matcher_can_end(m)) __builtin_trap();
    }
    okv_grammar_matcher *c = okv_grammar_matcher_clone(m, &err);
    if (c && okv_grammar_matcher_can_end(c) != okv_grammar_matcher_can_end(m)) __builtin_trap();
    okv_grammar_matcher_free(c);
    okv_grammar_matcher_free(m);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!tok) make_vocab();
    if (size < 1) return 0;
    const bool schema = data[0] & 1;
    const uint8_t *text = data + 1;
    const uint8_t *nul = memchr(text, 0, size - 1);
    const size_t tlen = nul ? (size_t)(nul - text) : size - 1;
    const uint8_t *bytes = nul ? nul + 1 : data + size;
    const size_t blen = (size_t)(data + size - bytes);
    okv_error err;
    char *gbnf = NULL;
    okv_grammar *g;
    if (schema) {
        gbnf = okv_json_schema_to_gbnf((const char *)text, tlen, &err);
        /* The loose conversion takes all that the strict one takes, to the
         * same grammar with nothing skipped; its list stays inside a small
         * buffer. */
        const char *one = (const char *)text, *name = "root";
        char skipped[40];
        okv_error lerr;
        char *loose = okv_json_schemas_to_gbnf_loose(1, &one, &tlen, &name, skipped, sizeof skipped, &lerr);
        if (loose && !memchr(skipped, 0, sizeof skipped)) __builtin_trap();
        if (gbnf && (!loose || skipped[0] || strcmp(gbnf, loose) != 0)) __builtin_trap();
        free(loose);
        if (!gbnf) {
            if (err.status == OKV_OK || !err.message[0]) __builtin_trap();
            return 0;
        }
        g = okv_grammar_parse(gbnf, strlen(gbnf), NULL, &err);
        /* The converter's output parses, unless a size limit stops it. */
        if (!g && !strstr(err.message, "above") && !strstr(err.message, "too large")) __builtin_trap();
    } else {
        g = okv_grammar_parse((const char *)text, tlen, NULL, &err);
        if (!g && (err.status == OKV_OK || !err.message[0])) __builtin_trap();
    }
    if (g) run(g, bytes, blen, data[0]);
    okv_grammar_free(g);
    free(gbnf);
    return 0;
}
