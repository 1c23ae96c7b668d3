/* The fill-in-the-middle tokens (okv_tokenizer_fim).
 *  - On llama.cpp's vocabularies (../shared/vocab): the ids llama.cpp (the
 *    August 2026 snapshot in ../shared/llama.cpp) finds for each, as
 *    `llama-bench -v` printed them ("FIM PRE token = ...") for a random model
 *    with that vocabulary (offkv synth --vocab); -1 where it printed none.
 *  - A vocabulary written here: the ids the file names win over the
 *    spellings; the older prefix/suffix/middle keys count; an id past the
 *    vocabulary is none (as llama.cpp reads it); bad fim_ids are refused;
 *    the pad, repository and file separator end a generation. */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "offkv/gguf.h"
#include "offkv/tokenizer.h"
#include "tokenizer_util.h"

static bool same_fim(const okv_tokenizer *t, const int32_t want[OKV_FIM_N], const char *what) {
    bool same = true;
    for (int r = 0; r < OKV_FIM_N; r++) same = same && okv_tokenizer_fim(t, (okv_fim_role)r) == want[r];
    if (!same) {
        printf("%s: got", what);
        for (int r = 0; r < OKV_FIM_N; r++) printf(" %d", (int)okv_tokenizer_fim(t, (okv_fim_role)r));
        printf("\n");
    }
    return same;
}

/* A GGUF vocabulary with FIM keys: new ones for the middle and the file
 * separator, the older prefix key, a pad id past the vocabulary; the
 * suffix and the repository by their spellings. */
static void gguf_keys(const char *dir) {
    char path[4200];
    snprintf(path, sizeof path, "%s/fim-keys.gguf", dir);
    static const char *const tokens[] = {"<unk>", "<s>", "</s>", "<p>", "<fim_suffix>", "<m>", "<f>",
                                         "<|fim_middle|>", "<reponame>", "<|fim_pad|>", "a"};
    const int32_t types[] = {2, 3, 3, 3, 3, 3, 3, 3, 3, 3, 1};
    static const char *const keys[] = {"prefix_token_id", "fim_mid_token_id", "fim_sep_token_id", "fim_pad_token_id"};
    const uint32_t vals[] = {3, 5, 6, 4000000000u};
    if (!tu_write_spm_vocab(path, tokens, types, 11, keys, vals, 4)) return;
    okv_tokenizer *t = tu_tokenizer_file(path);
    /* <|fim_middle|> (7) loses to the key's 5; the pad key is out of range,
     * so <|fim_pad|> (9) is found by its spelling */
    const int32_t want[OKV_FIM_N] = {3, 4, 5, 9, 8, 6};
    CHECK(t && same_fim(t, want, "gguf keys"), "the file's ids, then the spellings");
    for (int r = OKV_FIM_PAD; t && r < OKV_FIM_N; r++)
        CHECK(okv_tokenizer_is_eog(t, want[r]), "FIM role %d (id %d) ends a generation", r, (int)want[r]);
    CHECK(t && !okv_tokenizer_is_eog(t, 7), "<|fim_middle|> does not end one");
    CHECK(t && okv_tokenizer_fim(t, OKV_FIM_N) == -1 && okv_tokenizer_fim(t, (okv_fim_role)-1) == -1 &&
              okv_tokenizer_fim(NULL, OKV_FIM_PREFIX) == -1,
          "a role out of range, a NULL tokenizer: -1");
    okv_tokenizer_free(t);
    remove(path);

    /* fim_ids in a description: checked */
    okv_error err = {0};
    static const char *const small[] = {"<unk>", "<s>", "</s>", "a"};
    const int32_t bad[OKV_FIM_N] = {-1, 4, -1, -1, -1, -1}, worse[OKV_FIM_N] = {-2, -1, -1, -1, -1, -1};
    okv_vocab_desc d = {.model = "llama", .n_tokens = 4, .tokens = small, .bos_id = 1, .eos_id = 2, .unk_id = 0,
                        .pad_id = -1, .add_bos = -1, .add_eos = -1, .add_space_prefix = -1, .fim_ids = bad};
    CHECK(okv_tokenizer_create(&d, &err) == NULL && err.status == OKV_ERR_INVALID && strstr(err.message, "fim_ids[1] 4"),
          "a FIM id past the vocabulary: %s", err.message);
    d.fim_ids = worse;
    CHECK(okv_tokenizer_create(&d, &err) == NULL && err.status == OKV_ERR_INVALID && strstr(err.message, "fim_ids[0] -2"),
          "a FIM id below -1: %s", err.message);
}

int main(void) {
    const char *b = getenv("OKV_BIN");
    gguf_keys(b ? b : "/tmp");

    const char *shared = check_shared_dir();
    if (!shared) {
        printf("SKIP: llama.cpp's vocabularies need ../shared (OKV_SHARED)\n");
        return check_done();
    }
    static const struct {
        const char *vocab;
        int32_t ids[OKV_FIM_N]; /* prefix, suffix, middle, pad, repo, file_sep */
    } ref[] = {
        {"qwen3", {151659, 151661, 151660, 151662, 151663, 151664}}, /* <|fim_prefix|> ... <|file_sep|> */
        {"deepseek-coder", {32016, 32015, 32017, -1, -1, -1}},       /* <｜fim▁begin｜>, <｜fim▁hole｜>, <｜fim▁end｜> */
        {"starcoder", {1, 3, 2, 4, -1, -1}},                         /* <fim_prefix>, <fim_suffix>, <fim_middle>,
                                                                        <fim_pad>; not <repo_name>, <file_sep> */
        {"gpt-oss", {-1, -1, -1, -1, -1, -1}},
        {"llama3", {-1, -1, -1, -1, -1, -1}},
        {"phi-3", {-1, -1, -1, -1, -1, -1}},
        {"gemma3", {-1, -1, -1, -1, -1, -1}},
        {"gpt-2", {-1, -1, -1, -1, -1, -1}},
        {"llama-spm", {-1, -1, -1, -1, -1, -1}},
    };
    for (size_t i = 0; i < sizeof ref / sizeof *ref; i++) {
        okv_tokenizer *t = tu_shared_vocab(shared, ref[i].vocab);
        CHECK(t && same_fim(t, ref[i].ids, ref[i].vocab), "%s: llama.cpp's FIM ids", ref[i].vocab);
        okv_tokenizer_free(t);
    }
    return check_done();
}
