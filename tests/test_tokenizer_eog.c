/* The tokens that end a generation (okv_tokenizer_eog, okv_tokenizer_is_eog).
 *  - On llama.cpp's vocabularies (../shared/vocab): exactly the set that
 *    llama.cpp (the August 2026 snapshot in ../shared/llama.cpp) builds
 *    for each, as `llama-bench -v` printed it for a random model with that
 *    vocabulary ("printing all EOG tokens"; gpt-oss's <|end|>, listed there,
 *    is taken out after the listing, as the log's next line says).
 *  - A vocabulary written here: the file's eot/eom/FIM ids
 *    (tokenizer.ggml.eot_token_id, ...) join EOS; the names; harmony's
 *    <|end|> out where <|return|> and <|call|> are; Gemma 4's </s> out
 *    where <|tool_response> is; the EOS never out; bad eog_ids refused. */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "offkv/gguf.h"
#include "offkv/tokenizer.h"
#include "tokenizer_util.h"

static bool same_set(const okv_tokenizer *t, const int32_t *want, int32_t n_want, const char *what) {
    int32_t n = -1;
    const int32_t *got = okv_tokenizer_eog(t, &n);
    bool same = n == n_want;
    for (int32_t i = 0; same && i < n; i++) same = got[i] == want[i]; /* both ascending */
    for (int32_t i = 0; i < n_want; i++) same = same && okv_tokenizer_is_eog(t, want[i]);
    if (!same) {
        printf("%s: got %d ids:", what, (int)n);
        for (int32_t i = 0; i < n && i < 16; i++) printf(" %d", (int)got[i]);
        printf("\n");
    }
    return same;
}

/* A tiny SPM vocabulary: <unk> <s> </s>, then names[], then "a".."e". */
static okv_tokenizer *named(const char *const *names, int n_names, const int32_t *eog_ids, int32_t n_eog_ids,
                            int32_t eos, okv_error *err) {
    const char *tokens[32];
    int32_t types[32], n = 0;
    static const char *const base[] = {"<unk>", "<s>", "</s>"};
    for (int i = 0; i < 3; i++) types[n] = i ? OKV_TOKEN_CONTROL : OKV_TOKEN_UNKNOWN, tokens[n++] = base[i];
    for (int i = 0; i < n_names; i++) types[n] = OKV_TOKEN_CONTROL, tokens[n++] = names[i];
    static const char *const letters[] = {"a", "b", "c", "d", "e"};
    for (int i = 0; i < 5; i++) types[n] = OKV_TOKEN_NORMAL, tokens[n++] = letters[i];
    okv_vocab_desc d = {.model = "llama", .n_tokens = n, .tokens = tokens, .types = types, .bos_id = 1,
                        .eos_id = eos, .unk_id = 0, .pad_id = -1, .add_bos = -1, .add_eos = -1,
                        .add_space_prefix = -1, .eog_ids = eog_ids, .n_eog_ids = n_eog_ids};
    return okv_tokenizer_create(&d, err);
}

static void written_vocab(void) {
    okv_error err = {0};
    /* names at 3.. */
    static const char *const chatml[] = {"<|im_start|>", "<|im_end|>", "<|endoftext|>", "<|fim_pad|>", "<|im_end",
                                         "<|EOT_ID|>"};
    okv_tokenizer *t = named(chatml, 6, NULL, 0, 2, &err);
    CHECK(t != NULL, "chatml: %s", err.message);
    const int32_t want_chatml[] = {2, 4, 5, 6};
    CHECK(same_set(t, want_chatml, 4, "chatml"), "chatml: EOS, <|im_end|>, <|endoftext|>, <|fim_pad|>; not "
                                                 "<|im_start|>, <|im_end or <|EOT_ID|>");
    CHECK(!okv_tokenizer_is_eog(t, 3) && !okv_tokenizer_is_eog(t, -1) && !okv_tokenizer_is_eog(t, 1 << 20) &&
              !okv_tokenizer_is_eog(NULL, 2),
          "<|im_start|>, -1, an id past the vocabulary, a NULL tokenizer: not ends");
    okv_tokenizer_free(t);

    /* a file's ids (a normal token "d" = 3 + 0 + 3) join EOS, once each */
    const int32_t ids[] = {6, 3, 6};
    t = named(NULL, 0, ids, 3, 2, &err);
    CHECK(t != NULL, "eog_ids: %s", err.message);
    const int32_t want_ids[] = {2, 3, 6};
    CHECK(same_set(t, want_ids, 3, "eog_ids"), "eog_ids: EOS and the two named ids");
    okv_tokenizer_free(t);

    /* harmony: <|end|> ends a message, <|return|> and <|call|> the turn */
    static const char *const harmony[] = {"<|end|>", "<|return|>", "<|call|>", "<|start|>"};
    t = named(harmony, 4, NULL, 0, 4, &err);
    const int32_t want_harmony[] = {2, 4, 5};
    CHECK(t && same_set(t, want_harmony, 3, "harmony"), "harmony: </s>, <|return|>, <|call|>; <|end|> not");
    okv_tokenizer_free(t);
    /* without <|call|>, <|end|> ends a turn (Phi-3) */
    t = named(harmony, 2, NULL, 0, 2, &err);
    const int32_t want_phi[] = {2, 3, 4};
    CHECK(t && same_set(t, want_phi, 3, "phi"), "<|end|> and <|return|> without <|call|>: both end");
    okv_tokenizer_free(t);
    /* the EOS stays, whatever its text */
    t = named(harmony, 3, NULL, 0, 3, &err);
    const int32_t want_eos_end[] = {2, 3, 4, 5};
    CHECK(t && same_set(t, want_eos_end, 4, "eos <|end|>"), "an EOS named <|end|> stays an end");
    okv_tokenizer_free(t);

    /* Gemma 4: </s> is text where <|tool_response> is */
    static const char *const gemma4[] = {"<turn|>", "<|tool_response>", "<eos>"};
    t = named(gemma4, 3, NULL, 0, 5, &err);
    const int32_t want_gemma4[] = {3, 4, 5};
    CHECK(t && same_set(t, want_gemma4, 3, "gemma4"), "gemma 4: <turn|>, <|tool_response>, <eos>; </s> not");
    okv_tokenizer_free(t);

    /* bad eog_ids: refused, naming the value */
    const int32_t bad[] = {3, 99};
    CHECK(named(NULL, 0, bad, 2, 2, &err) == NULL && err.status == OKV_ERR_INVALID &&
              strstr(err.message, "eog_ids[1] 99"),
          "an eog id past the vocabulary: %s", err.message);
    CHECK(named(NULL, 0, NULL, 2, 2, &err) == NULL && err.status == OKV_ERR_INVALID && strstr(err.message, "NULL"),
          "two eog ids in a NULL array: %s", err.message);
    CHECK(named(NULL, 0, bad, -1, 2, &err) == NULL && err.status == OKV_ERR_INVALID && strstr(err.message, "-1"),
          "-1 eog ids: %s", err.message);
    /* no EOS: the names alone */
    t = named(chatml, 2, NULL, 0, -1, &err);
    const int32_t want_no_eos[] = {2, 4};
    CHECK(t && same_set(t, want_no_eos, 2, "no eos"), "no EOS: the names alone (</s>, <|im_end|>)");
    okv_tokenizer_free(t);
}

/* A GGUF vocabulary with tokenizer.ggml.eot_token_id and eom_token_id. */
static void gguf_keys(const char *dir) {
    char path[4200];
    snprintf(path, sizeof path, "%s/eog-keys.gguf", dir);
    static const char *const tokens[] = {"<unk>", "<s>", "</s>", "<turn_end>", "<msg_end>", "<fim_x>", "a", "b"};
    const int32_t types[] = {2, 3, 3, 3, 3, 3, 1, 1};
    static const char *const keys[] = {"eot_token_id", "eom_token_id", "fim_sep_token_id", "fim_pad_token_id"};
    const uint32_t vals[] = {3, 4, 5, 4000000000u};
    if (!tu_write_spm_vocab(path, tokens, types, 8, keys, vals, 4)) return;
    okv_tokenizer *t = tu_tokenizer_file(path);
    const int32_t want[] = {2, 3, 4, 5};
    CHECK(t && same_set(t, want, 4, "gguf keys"),
          "eot, eom and fim_sep ids join EOS (a fim_pad id past the vocabulary is none, as llama.cpp reads it)");
    okv_tokenizer_free(t);
    remove(path);
}

int main(void) {
    written_vocab();
    const char *b = getenv("OKV_BIN");
    gguf_keys(b ? b : "/tmp");

    const char *shared = check_shared_dir();
    if (!shared) {
        printf("SKIP: llama.cpp's vocabularies need ../shared (OKV_SHARED)\n");
        return check_done();
    }
    static const struct {
        const char *vocab;
        int32_t n, ids[8];
    } ref[] = {
        {"qwen3", 6, {128247, 151643, 151645, 151662, 151663, 151664}}, /* </s> (a normal token), <|endoftext|>,
                                                                            <|im_end|>, <|fim_pad|>, <|repo_name|>,
                                                                            <|file_sep|> */
        {"gpt-oss", 3, {199999, 200002, 200012}},                        /* <|endoftext|>, <|return|>, <|call|> */
        {"llama3", 2, {128001, 128009}},                                 /* <|end_of_text|>, <|eot_id|> */
        {"phi-3", 3, {2, 32000, 32007}},                                 /* </s>, <|endoftext|>, <|end|> */
        {"gemma3", 3, {1, 106, 212}},                                    /* <eos>, <end_of_turn>, </s> */
        {"deepseek-coder", 1, {32014}},                                  /* <｜end▁of▁sentence｜> */
        {"gpt-2", 1, {50256}},                                           /* <|endoftext|> */
        {"llama-spm", 1, {2}},                                           /* </s> */
        {"starcoder", 2, {0, 4}},                                        /* <|endoftext|>, <fim_pad> */
    };
    for (size_t i = 0; i < sizeof ref / sizeof *ref; i++) {
        char path[4200];
        snprintf(path, sizeof path, "%s/vocab/ggml-vocab-%s.gguf", shared, ref[i].vocab);
        okv_tokenizer *t = tu_tokenizer_file(path);
        CHECK(t && same_set(t, ref[i].ids, ref[i].n, ref[i].vocab), "%s: llama.cpp's end-of-generation set",
              ref[i].vocab);
        okv_tokenizer_free(t);
    }
    return check_done();
}
