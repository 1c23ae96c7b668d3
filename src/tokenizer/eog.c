/* The tokens that end a generation (llama.cpp's end-of-generation set).
 *
 * A model ends its turn with a token that is often not its EOS: Llama 3's
 * <|eot_id|>, ChatML's <|im_end|>, Gemma's <end_of_turn>.  Files name some
 * of them (tokenizer.ggml.eot_token_id, eom_token_id, the FIM ids, read
 * into okv_vocab_desc.eog_ids); the rest are found by their text, as
 * llama.cpp finds them, so that a generation stops where it stops there. */
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "tokenizer/internal.h"

/* Texts that end a turn, whatever the token's type (llama.cpp's list). */
static const char *const turn_ends[] = {
    "<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>", "<|flush|>", "<|calls|>",
    "<end_of_turn>", "<|endoftext|>", "</s>", "<|eom_id|>", "<EOT>", "_<EOT>", "[EOT]", "[EOS]",
    "<|end_of_text|>", "<end_of_utterance>", "<eos>", "<turn|>", "<|tool_response>",
};

static int32_t find(const okv_tokenizer *t, const char *s) { return okv_tok_find(t, s, strlen(s)); }

static int id_cmp(const void *a, const void *b) {
    const int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

/* Removes id from the set (when it is there and not the EOS: a
 * generation must be able to end). */
static void drop(okv_tokenizer *t, int32_t id) {
    for (int32_t i = 0; id >= 0 && id != t->eos_id && i < t->n_eog; i++)
        if (t->eog[i] == id) {
            memmove(t->eog + i, t->eog + i + 1, (size_t)(t->n_eog - i - 1) * sizeof *t->eog);
            t->n_eog--;
            return;
        }
}

static bool has(const okv_tokenizer *t, int32_t id) { return id >= 0 && okv_tokenizer_is_eog(t, id); }

okv_status okv_tok_build_eog(okv_tokenizer *t, const okv_vocab_desc *d, okv_error *err) {
    /* Fill-in-the-middle padding, repository and file separators: a coder
     * model writes them after the middle it was asked for. */
    static const okv_fim_role fim_ends[] = {OKV_FIM_PAD, OKV_FIM_REPO, OKV_FIM_FILE_SEP};
    const size_t n_names = sizeof turn_ends / sizeof *turn_ends + sizeof fim_ends / sizeof *fim_ends;
    if (d->n_eog_ids < 0 || (d->n_eog_ids > 0 && !d->eog_ids))
        return okv_fail(err, OKV_ERR_INVALID, "tokenizer: %d eog_ids%s", (int)d->n_eog_ids,
                        d->n_eog_ids > 0 ? " but the array is NULL" : "");
    t->eog = malloc((1 + (size_t)d->n_eog_ids + n_names) * sizeof *t->eog);
    if (!t->eog) return okv_fail(err, OKV_ERR_NOMEM, "tokenizer: out of memory");
    int32_t n = 0;
    if (t->eos_id >= 0) t->eog[n++] = t->eos_id;
    for (int32_t i = 0; i < d->n_eog_ids; i++) {
        if (d->eog_ids[i] < 0 || d->eog_ids[i] >= t->n_tokens)
            return okv_fail(err, OKV_ERR_INVALID, "tokenizer: eog_ids[%d] %d is outside the vocabulary (0..%d)", (int)i,
                            (int)d->eog_ids[i], (int)t->n_tokens - 1);
        t->eog[n++] = d->eog_ids[i];
    }
    for (size_t k = 0; k < sizeof turn_ends / sizeof *turn_ends; k++)
        if ((t->eog[n] = find(t, turn_ends[k])) >= 0) n++;
    for (size_t k = 0; k < sizeof fim_ends / sizeof *fim_ends; k++)
        if ((t->eog[n] = t->fim[fim_ends[k]]) >= 0) n++;
    qsort(t->eog, (size_t)n, sizeof *t->eog, id_cmp);
    t->n_eog = 0;
    for (int32_t i = 0; i < n; i++)
        if (!t->n_eog || t->eog[t->n_eog - 1] != t->eog[i]) t->eog[t->n_eog++] = t->eog[i];

    /* Harmony (gpt-oss) and Solar Open end a message with <|end|> and the
     * turn with <|return|> or <|call|> (<|calls|>, <|flush|>): reasoning
     * ends with <|end|> and the answer follows it. */
    const int32_t end = find(t, "<|end|>"), ret = find(t, "<|return|>"), flush = find(t, "<|flush|>");
    const bool call = has(t, find(t, "<|call|>")) || has(t, find(t, "<|calls|>"));
    if (has(t, end) && call && (has(t, ret) || has(t, flush))) drop(t, end);
    /* Gemma 4 (and PaddleOCR) write </s> as text, not as an end. */
    if (has(t, find(t, "<|tool_response>"))) drop(t, find(t, "</s>"));
    return OKV_OK;
}

bool okv_tokenizer_is_eog(const okv_tokenizer *t, int32_t id) {
    return t && bsearch(&id, t->eog, (size_t)t->n_eog, sizeof *t->eog, id_cmp) != NULL;
}

const int32_t *okv_tokenizer_eog(const okv_tokenizer *t, int32_t *n) {
    if (n) *n = t ? t->n_eog : 0;
    return t ? t->eog : NULL;
}
