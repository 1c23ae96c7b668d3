/* The fill-in-the-middle tokens of a coder vocabulary (llama.cpp's FIM ids).
 *
 * A code-completion prompt puts the text before the cursor after a prefix
 * token, the text after it after a suffix token, and asks for the middle
 * after a middle token; repository-level prompts also name the project and
 * each file.  Files name some of these ids (tokenizer.ggml.fim_*_token_id,
 * read into okv_vocab_desc.fim_ids); the rest are found by their text, as
 * llama.cpp finds them, so that a prompt offkv builds is llama.cpp's. */
#include <string.h>

#include "core/error.h"
#include "tokenizer/internal.h"

/* Each role's spellings across the families (Qwen, StarCoder / Granite,
 * DeepSeek Coder, CodeLlama, GLM-4.5, Falcon-H1, Kimi): llama.cpp's lists,
 * and DeepSeek's, which it finds for that vocabulary too. */
static const char *const spellings[OKV_FIM_N][8] = {
    [OKV_FIM_PREFIX] = {"<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>", "<PRE>", "<|code_prefix|>", "<|prefix|>",
                        "<\xef\xbd\x9c" "fim\xe2\x96\x81" "begin\xef\xbd\x9c>", NULL},
    [OKV_FIM_SUFFIX] = {"<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>", "<SUF>", "<|code_suffix|>", "<|suffix|>",
                        "<\xef\xbd\x9c" "fim\xe2\x96\x81" "hole\xef\xbd\x9c>", NULL},
    [OKV_FIM_MIDDLE] = {"<|fim_middle|>", "<fim-middle>", "<fim_middle>", "<MID>", "<|code_middle|>", "<|middle|>",
                        "<\xef\xbd\x9c" "fim\xe2\x96\x81" "end\xef\xbd\x9c>", NULL},
    [OKV_FIM_PAD] = {"<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]", NULL},
    [OKV_FIM_REPO] = {"<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>", NULL},
    [OKV_FIM_FILE_SEP] = {"<|file_sep|>", NULL},
};

okv_status okv_tok_build_fim(okv_tokenizer *t, const okv_vocab_desc *d, okv_error *err) {
    for (int r = 0; r < OKV_FIM_N; r++) {
        int32_t id = d->fim_ids ? d->fim_ids[r] : -1;
        if (id < -1 || id >= t->n_tokens)
            return okv_fail(err, OKV_ERR_INVALID, "tokenizer: fim_ids[%d] %d is outside the vocabulary (0..%d)", r,
                            (int)id, (int)t->n_tokens - 1);
        for (int k = 0; id < 0 && spellings[r][k]; k++) id = okv_tok_find(t, spellings[r][k], strlen(spellings[r][k]));
        t->fim[r] = id;
    }
    return OKV_OK;
}

int32_t okv_tokenizer_fim(const okv_tokenizer *tok, okv_fim_role role) {
    return tok && role >= 0 && role < OKV_FIM_N ? tok->fim[role] : -1;
}
