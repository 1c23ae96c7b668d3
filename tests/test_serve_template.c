/* Chat templates: recognised by their markers as llama.cpp recognises them
 * (the Jinja texts below are the families' published templates, cut to the
 * parts that carry the markers), and rendered as llama.cpp renders them. */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "offkv/gguf.h"
#include "offkv/tokenizer.h"
#include "serve/serve.h"

/* Renders conv with t and tokenizes it as the server does (BOS as the
 * vocabulary asks, the template's markers parsed as control tokens);
 * returns how many of want[] (ids) occur, or -1 when the vocabulary is
 * missing. */
static int count_ids(const char *shared, const char *vocab, srv_template t, const srv_message *m, int n,
                     const int32_t *want, int n_want, int32_t *first) {
    char path[4096];
    snprintf(path, sizeof path, "%s/vocab/%s", shared, vocab);
    okv_error err = {0};
    okv_gguf *g = okv_gguf_open(path, &err);
    if (!g) return -1;
    okv_tokenizer *tok = okv_tokenizer_from_gguf(g, &err);
    okv_gguf_close(g);
    if (!tok) return -1;
    char *text = srv_template_apply(t, m, n);
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

static void expect_render(srv_template t, const srv_message *m, int n, const char *want) {
    char *got = srv_template_apply(t, m, n);
    CHECK(got && strcmp(got, want) == 0, "%s renders\n%s\nwant\n%s", srv_template_name(t), got ? got : "(null)", want);
    free(got);
}

int main(void) {
    /* detection by marker */
    CHECK(srv_template_detect("{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + "
                              "message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}") == SRV_TMPL_CHATML,
          "ChatML");
    CHECK(srv_template_detect("{{ bos_token }}{% for message in messages %}{{ '<|start_header_id|>' + message['role'] + "
                              "'<|end_header_id|>\\n\\n' + message['content'] | trim + '<|eot_id|>' }}{% endfor %}") ==
              SRV_TMPL_LLAMA3,
          "Llama 3");
    CHECK(srv_template_detect("{{ bos_token }}{% for message in messages %}{{ '<start_of_turn>' + role + '\\n' + "
                              "message['content'] | trim + '<end_of_turn>\\n' }}{% endfor %}") == SRV_TMPL_GEMMA,
          "Gemma");
    CHECK(srv_template_detect("{% if messages[0]['role'] == 'system' %}{% set system_message = '<<SYS>>\\n' + "
                              "messages[0]['content'] + '\\n<</SYS>>\\n\\n' %}{% endif %}{{ bos_token + '[INST] ' + "
                              "content.strip() + ' [/INST]' }}") == SRV_TMPL_LLAMA2_SYS_STRIP,
          "Llama 2 (strip)");
    CHECK(srv_template_detect("{{ '[INST] <<SYS>>' }}") == SRV_TMPL_LLAMA2_SYS, "Llama 2 with system");
    CHECK(srv_template_detect("{{ '[INST] ' + message['content'] + ' [/INST]' }}") == SRV_TMPL_LLAMA2, "Llama 2");
    CHECK(srv_template_detect("{%- if messages[0]['role'] == 'system' %}{{- '[SYSTEM_PROMPT]' + x + '[/SYSTEM_PROMPT]' }}"
                              "{%- endif %}{{- '[INST]' + c + '[/INST]' }}") == SRV_TMPL_MISTRAL_V7,
          "Mistral v7");
    CHECK(srv_template_detect("{{ bos_token }}{% set system_message = ' [INST] ' + system_message %}{%- if message['role'] == 'user' %}"
                              "{%- if tools is not none %}{{- '[AVAILABLE_TOOLS] [' }}{%- endif %}{{- '[INST] ' + "
                              "message['content'] + '[/INST]' }}{%- endif %}{%- endfor %}") == SRV_TMPL_MISTRAL_V1,
          "Mistral v1 ( [INST])");
    CHECK(srv_template_detect("{%- if tools %}{{- \"[AVAILABLE_TOOLS]\" }}{%- endif %}{{- \"[INST]\" + c + \"[/INST]\" }}") ==
              SRV_TMPL_MISTRAL_V3_TEKKEN,
          "Mistral v3 tekken");
    CHECK(srv_template_detect("{{ '[AVAILABLE_TOOLS]' }}{{'[INST]'}}") == SRV_TMPL_MISTRAL_V3, "Mistral v3");
    CHECK(srv_template_detect("mistral-v3") == SRV_TMPL_MISTRAL_V3, "by name");
    CHECK(srv_template_detect("llama3") == SRV_TMPL_LLAMA3, "by name");
    /* Families offkv does not render must not be taken for one it does. */
    CHECK(srv_template_detect("{{'<|im_start|>' + role + '<|im_sep|>'}}") == SRV_TMPL_UNKNOWN, "Phi-4 is not ChatML");
    CHECK(srv_template_detect("{{'<|user|>' + c + '<|end|>\\n<|assistant|>'}}") == SRV_TMPL_UNKNOWN, "Phi-3");
    CHECK(srv_template_detect("{{ 'USER: ' + c + ' ASSISTANT: ' }}") == SRV_TMPL_UNKNOWN, "Vicuna");
    CHECK(srv_template_detect("") == SRV_TMPL_UNKNOWN, "empty");
    CHECK(srv_template_detect(NULL) == SRV_TMPL_UNKNOWN, "NULL");

    /* rendering: llama.cpp's test-chat-template conversation */
    srv_message conv[] = {
        {"system", "You are a helpful assistant"}, {"user", "Hello"},         {"assistant", "Hi there"},
        {"user", "Who are you"},                    {"assistant", "   I am an assistant   "}, {"user", "Another question"},
    };
    const int n = 6;
    expect_render(SRV_TMPL_CHATML, conv, n,
                  "<|im_start|>system\nYou are a helpful assistant<|im_end|>\n<|im_start|>user\nHello<|im_end|>\n"
                  "<|im_start|>assistant\nHi there<|im_end|>\n<|im_start|>user\nWho are you<|im_end|>\n"
                  "<|im_start|>assistant\n   I am an assistant   <|im_end|>\n<|im_start|>user\nAnother question<|im_end|>\n"
                  "<|im_start|>assistant\n");
    expect_render(SRV_TMPL_LLAMA2_SYS, conv, n,
                  "[INST] <<SYS>>\nYou are a helpful assistant\n<</SYS>>\n\nHello [/INST]Hi there</s>[INST] Who are you "
                  "[/INST]   I am an assistant   </s>[INST] Another question [/INST]");
    expect_render(SRV_TMPL_LLAMA2_SYS_BOS, conv, n,
                  "[INST] <<SYS>>\nYou are a helpful assistant\n<</SYS>>\n\nHello [/INST]Hi there</s><s>[INST] Who are "
                  "you [/INST]   I am an assistant   </s><s>[INST] Another question [/INST]");
    expect_render(SRV_TMPL_LLAMA2_SYS_STRIP, conv, n,
                  "[INST] <<SYS>>\nYou are a helpful assistant\n<</SYS>>\n\nHello [/INST]Hi there</s>[INST] Who are you "
                  "[/INST]I am an assistant</s>[INST] Another question [/INST]");
    expect_render(SRV_TMPL_MISTRAL_V7, conv, n,
                  "[SYSTEM_PROMPT] You are a helpful assistant[/SYSTEM_PROMPT][INST] Hello[/INST] Hi there</s>[INST] Who "
                  "are you[/INST]    I am an assistant   </s>[INST] Another question[/INST]");
    expect_render(SRV_TMPL_MISTRAL_V3, conv, n,
                  "[INST] You are a helpful assistant\n\nHello[/INST] Hi there</s>[INST] Who are you[/INST] I am an "
                  "assistant</s>[INST] Another question[/INST]");
    expect_render(SRV_TMPL_MISTRAL_V1, conv, n,
                  " [INST] You are a helpful assistant\n\nHello [/INST] Hi there</s> [INST] Who are you [/INST]    I am "
                  "an assistant   </s> [INST] Another question [/INST]");
    expect_render(SRV_TMPL_LLAMA3, conv, n,
                  "<|start_header_id|>system<|end_header_id|>\n\nYou are a helpful assistant<|eot_id|><|start_header_id|>"
                  "user<|end_header_id|>\n\nHello<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\nHi "
                  "there<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nWho are you<|eot_id|><|start_header_id|>"
                  "assistant<|end_header_id|>\n\nI am an assistant<|eot_id|><|start_header_id|>user<|end_header_id|>\n\n"
                  "Another question<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n");
    expect_render(SRV_TMPL_GEMMA, conv, n,
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
        int got = count_ids(shared, "ggml-vocab-llama3.gguf", SRV_TMPL_LLAMA3, conv, n, l3, 3, &first);
        CHECK(got == 3, "Llama 3 markers as tokens: %d of 3", got);
        CHECK(first == 128000, "Llama 3 starts with <|begin_of_text|>: %d", (int)first);
        const int32_t gm[] = {105, 106}; /* <start_of_turn> <end_of_turn> */
        got = count_ids(shared, "ggml-vocab-gemma3.gguf", SRV_TMPL_GEMMA, conv, n, gm, 2, &first);
        CHECK(got == 2, "Gemma markers as tokens: %d of 2", got);
        CHECK(first == 2, "Gemma starts with <bos>: %d", (int)first);
    }
    return check_done();
}
