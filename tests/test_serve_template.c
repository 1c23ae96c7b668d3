/* The chat templates --chat-template names: Jinja texts, rendered by
 * liboffkv's interpreter, that must give exactly llama.cpp's
 * llm_chat_apply_template output for its test conversation (the texts
 * below are llama.cpp's; they were the hand-written renderers' test before
 * the Jinja texts replaced them). */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "offkv/chat.h"
#include "offkv/gguf.h"
#include "offkv/tokenizer.h"
#include "serve/serve.h"

/* Renders conv (messages JSON) with the template llama.cpp names name,
 * through liboffkv's interpreter, as the server does; NULL on failure. */
static char *render(const char *name, const char *conv) {
    const char *j = srv_template_builtin(name);
    if (!j) return NULL;
    okv_chat_template *t = okv_chat_template_parse(j, strlen(j), NULL);
    okv_chat_input in = {.messages_json = conv, .add_generation_prompt = true};
    char *out = NULL;
    if (t) okv_chat_template_render(t, &in, &out, NULL, NULL);
    okv_chat_template_free(t);
    return out;
}

/* Renders conv with the template and tokenizes it as the server does (BOS
 * as the vocabulary asks, the template's markers parsed as control
 * tokens); returns how many of want[] (ids) occur, or -1 when the
 * vocabulary is missing. */
static int count_ids(const char *shared, const char *vocab, const char *name, const char *conv, const int32_t *want,
                     int n_want, int32_t *first) {
    char path[4096];
    snprintf(path, sizeof path, "%s/vocab/%s", shared, vocab);
    okv_error err = {0};
    okv_gguf *g = okv_gguf_open(path, &err);
    if (!g) return -1;
    okv_tokenizer *tok = okv_tokenizer_from_gguf(g, &err);
    okv_gguf_close(g);
    if (!tok) return -1;
    char *text = render(name, conv);
    int32_t ids[512];
    size_t n_ids = 0;
    int found = 0;
    if (text && okv_tokenizer_encode(tok, text, strlen(text), OKV_TOKENIZE_ADD_SPECIAL | OKV_TOKENIZE_PARSE_SPECIAL,
                                     ids, 512, &n_ids, &err) == OKV_OK) {
        *first = n_ids ? ids[0] : -1;
        for (int w = 0; w < n_want; w++)
            for (size_t i = 0; i < n_ids; i++)
                if (ids[i] == want[w]) {
                    found++;
                    break;
                }
    }
    free(text);
    okv_tokenizer_free(tok);
    return found;
}

static void expect_render(const char *name, const char *conv, const char *want) {
    char *got = render(name, conv);
    CHECK(got && strcmp(got, want) == 0, "%s renders\n%s\nwant\n%s", name, got ? got : "(null)", want);
    free(got);
}

int main(void) {
    CHECK(srv_template_builtin("llama3") && srv_template_builtin("mistral-v3") && !srv_template_builtin("vicuna") &&
              !srv_template_builtin(NULL),
          "names");

    /* rendering: llama.cpp's test-chat-template conversation */
    const char *conv = "[{\"role\": \"system\", \"content\": \"You are a helpful assistant\"}, {\"role\": \"user\", "
                       "\"content\": \"Hello\"}, {\"role\": \"assistant\", \"content\": \"Hi there\"}, {\"role\": \"user\", "
                       "\"content\": \"Who are you\"}, {\"role\": \"assistant\", \"content\": \"   I am an assistant   \"}, "
                       "{\"role\": \"user\", \"content\": \"Another question\"}]";
    expect_render("chatml", conv,
                  "<|im_start|>system\nYou are a helpful assistant<|im_end|>\n<|im_start|>user\nHello<|im_end|>\n"
                  "<|im_start|>assistant\nHi there<|im_end|>\n<|im_start|>user\nWho are you<|im_end|>\n"
                  "<|im_start|>assistant\n   I am an assistant   <|im_end|>\n<|im_start|>user\nAnother question<|im_end|>\n"
                  "<|im_start|>assistant\n");
    expect_render("llama2-sys", conv,
                  "[INST] <<SYS>>\nYou are a helpful assistant\n<</SYS>>\n\nHello [/INST]Hi there</s>[INST] Who are you "
                  "[/INST]   I am an assistant   </s>[INST] Another question [/INST]");
    expect_render("llama2-sys-bos", conv,
                  "[INST] <<SYS>>\nYou are a helpful assistant\n<</SYS>>\n\nHello [/INST]Hi there</s><s>[INST] Who are "
                  "you [/INST]   I am an assistant   </s><s>[INST] Another question [/INST]");
    expect_render("llama2-sys-strip", conv,
                  "[INST] <<SYS>>\nYou are a helpful assistant\n<</SYS>>\n\nHello [/INST]Hi there</s>[INST] Who are you "
                  "[/INST]I am an assistant</s>[INST] Another question [/INST]");
    expect_render("mistral-v7", conv,
                  "[SYSTEM_PROMPT] You are a helpful assistant[/SYSTEM_PROMPT][INST] Hello[/INST] Hi there</s>[INST] Who "
                  "are you[/INST]    I am an assistant   </s>[INST] Another question[/INST]");
    expect_render("mistral-v3", conv,
                  "[INST] You are a helpful assistant\n\nHello[/INST] Hi there</s>[INST] Who are you[/INST] I am an "
                  "assistant</s>[INST] Another question[/INST]");
    expect_render("mistral-v1", conv,
                  " [INST] You are a helpful assistant\n\nHello [/INST] Hi there</s> [INST] Who are you [/INST]    I am "
                  "an assistant   </s> [INST] Another question [/INST]");
    expect_render("llama3", conv,
                  "<|start_header_id|>system<|end_header_id|>\n\nYou are a helpful assistant<|eot_id|><|start_header_id|>"
                  "user<|end_header_id|>\n\nHello<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\nHi "
                  "there<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nWho are you<|eot_id|><|start_header_id|>"
                  "assistant<|end_header_id|>\n\nI am an assistant<|eot_id|><|start_header_id|>user<|end_header_id|>\n\n"
                  "Another question<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n");
    expect_render("gemma", conv,
                  "<start_of_turn>user\nYou are a helpful assistant\n\nHello<end_of_turn>\n<start_of_turn>model\nHi "
                  "there<end_of_turn>\n<start_of_turn>user\nWho are you<end_of_turn>\n<start_of_turn>model\nI am an "
                  "assistant<end_of_turn>\n<start_of_turn>user\nAnother question<end_of_turn>\n<start_of_turn>model\n");

    /* With the families' real vocabularies the markers become their control
     * tokens (ids from the models' tokenizer.json). */
    const char *shared = check_shared_dir();
    if (!shared) {
        printf("skipped (the vocabulary part): ../shared not found\n");
    } else {
        int32_t first = -1;
        const int32_t l3[] = {128006, 128007, 128009}; /* <|start_header_id|> <|end_header_id|> <|eot_id|> */
        int got = count_ids(shared, "ggml-vocab-llama3.gguf", "llama3", conv, l3, 3, &first);
        CHECK(got == 3, "Llama 3 markers as tokens: %d of 3", got);
        CHECK(first == 128000, "Llama 3 starts with <|begin_of_text|>: %d", (int)first);
        const int32_t gm[] = {105, 106}; /* <start_of_turn> <end_of_turn> */
        got = count_ids(shared, "ggml-vocab-gemma3.gguf", "gemma", conv, gm, 2, &first);
        CHECK(got == 2, "Gemma markers as tokens: %d of 2", got);
        CHECK(first == 2, "Gemma starts with <bos>: %d", (int)first);
    }
    return check_done();
}
