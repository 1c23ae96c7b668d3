/* offkv template, run as a user runs it: the prompt on stdout and nothing
 * else, byte for byte what Python's jinja2 rendered (../shared/templates);
 * a raise exits 1 with the template's message on stderr; -m reads a GGUF's
 * template with its bos / eos; usage errors exit 2. */

#include "check.h"
#include "cli_run.h"
#include "offkv/gguf.h"

/* offkv(args..., NULL): runs the program for at most two minutes (a run
 * that blocks is killed and reported, not left to hang the suite). */
#define offkv(...) cli_run(120.0, __VA_ARGS__)

static void write_file(const char *path, const char *text) {
    FILE *f = fopen(path, "wb");
    if (f) {
        fputs(text, f);
        fclose(f);
    }
}


static const char TOOL_RESULT[] =
    "[{\"role\": \"user\", \"content\": \"What's the weather in Paris?\"}, {\"role\": \"assistant\", \"content\": \"\","
    " \"tool_calls\": [{\"id\": \"call_1\", \"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"arguments\":"
    " {\"city\": \"Paris\"}}}]}, {\"role\": \"tool\", \"tool_call_id\": \"call_1\", \"name\": \"get_weather\", \"content\":"
    " \"{\\\"temp_c\\\": 18, \\\"sky\\\": \\\"cloudy\\\"}\"}]";
static const char TOOLS[] =
    "[{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"description\": \"Current weather for a city\","
    " \"parameters\": {\"type\": \"object\", \"properties\": {\"city\": {\"type\": \"string\"}}, \"required\": [\"city\"]}}}]";

static void test_shared(const char *shared) {
    char msgs[4200], tools[4200], tmpl[4200], want_path[4200];
    static char want[1 << 17];
    cli_path(msgs, sizeof msgs, "messages.json");
    cli_path(tools, sizeof tools, "tools.json");
    write_file(msgs, TOOL_RESULT);
    write_file(tools, TOOLS);
    /* the conversations.json case tool-result, as the expected files have it */
    snprintf(tmpl, sizeof tmpl, "%s/templates/src/Qwen-Qwen3-0.6B.jinja", shared);
    CHECK(offkv("template", "--template", tmpl, "--eos-token", "<|im_end|>", "--messages", msgs, "--tools", tools, "--now",
                "2026-12-01T09:30:00", NULL) == 0, "qwen3: %s", cli_err);
    snprintf(want_path, sizeof want_path, "%s/templates/expected/Qwen-Qwen3-0.6B.tool-result.txt", shared);
    size_t n = cli_slurp(want_path, want, sizeof want);
    CHECK(n > 0 && cli_out_len == n && memcmp(cli_out, want, n) == 0, "qwen3 tool-result differs (%zu vs %zu bytes)", cli_out_len, n);
    CHECK(cli_err[0] == '\0', "stderr not empty: %s", cli_err);

    snprintf(tmpl, sizeof tmpl, "%s/templates/src/meta-llama-Llama-3.1-8B-Instruct.jinja", shared);
    CHECK(offkv("template", "--template", tmpl, "--bos-token", "<|begin_of_text|>", "--eos-token", "<|eot_id|>", "--messages",
                msgs, "--tools", tools, "--now", "2026-12-01T09:30:00", NULL) == 0, "llama3.1: %s", cli_err);
    snprintf(want_path, sizeof want_path, "%s/templates/expected/meta-llama-Llama-3.1-8B-Instruct.tool-result.txt", shared);
    n = cli_slurp(want_path, want, sizeof want);
    CHECK(n > 0 && cli_out_len == n && memcmp(cli_out, want, n) == 0, "llama 3.1 tool-result differs (%zu vs %zu bytes)", cli_out_len, n);

    /* Mistral Nemo raises on call ids that are not 9 characters */
    snprintf(tmpl, sizeof tmpl, "%s/templates/src/mistralai-Mistral-Nemo-Instruct-2407.jinja", shared);
    CHECK(offkv("template", "--template", tmpl, "--messages", msgs, "--tools", tools, NULL) == 1, "mistral raise: exit");
    CHECK(cli_out_len == 0, "a raise printed %zu bytes on stdout", cli_out_len);
    CHECK(strstr(cli_err, "Tool call IDs should be alphanumeric strings with length 9!") != NULL, "mistral raise: %s", cli_err);

    /* --no-generation-prompt */
    write_file(msgs, "[{\"role\": \"user\", \"content\": \"Say hi.\"}, {\"role\": \"assistant\", \"content\": \"Hi!\"}]");
    snprintf(tmpl, sizeof tmpl, "%s/templates/src/google-gemma-2-2b-it.jinja", shared);
    CHECK(offkv("template", "--template", tmpl, "--bos-token", "<bos>", "--eos-token", "<eos>", "--messages", msgs,
                "--no-generation-prompt", NULL) == 0, "gemma2: %s", cli_err);
    snprintf(want_path, sizeof want_path, "%s/templates/expected/google-gemma-2-2b-it.multiturn-nogen.txt", shared);
    n = cli_slurp(want_path, want, sizeof want);
    CHECK(n > 0 && cli_out_len == n && memcmp(cli_out, want, n) == 0, "gemma2 multiturn-nogen differs");
}

static void test_model_and_flags(void) {
    char model[4200], msgs[4200], tmpl[4200];
    cli_path(model, sizeof model, "t.gguf");
    cli_path(msgs, sizeof msgs, "m.json");
    cli_path(tmpl, sizeof tmpl, "t.jinja");
    okv_error err;
    okv_gguf_writer *w = okv_gguf_writer_create(&err);
    const char *tokens[] = {"<unk>", "<|go|>", "<|stop|>"};
    uint32_t bos = 1, eos = 2;
    okv_gguf_writer_add_str(w, "tokenizer.chat_template",
                            "{{ bos_token }}{% for m in messages %}[{{ m.role }}]{{ m.content }}{{ eos_token }}{% endfor %}"
                            "{% if add_generation_prompt %}[assistant]{% endif %}{{ strftime_now('%Y') }}", &err);
    okv_gguf_writer_add_array(w, "tokenizer.ggml.tokens", OKV_GGUF_STRING, tokens, 3, &err);
    okv_gguf_writer_add_scalar(w, "tokenizer.ggml.bos_token_id", OKV_GGUF_U32, &bos, &err);
    okv_gguf_writer_add_scalar(w, "tokenizer.ggml.eos_token_id", OKV_GGUF_U32, &eos, &err);
    CHECK(okv_gguf_writer_write(w, model, &err) == OKV_OK, "write: %s", err.message);
    okv_gguf_writer_free(w);
    write_file(msgs, "[{\"role\": \"user\", \"content\": \"h\\u00e9\"}]");
    CHECK(offkv("template", "-m", model, "--messages", msgs, "--now", "2031-01-02T03:04:05", NULL) == 0, "-m: %s", cli_err);
    CHECK(strcmp(cli_out, "<|go|>[user]h\303\251<|stop|>[assistant]2031") == 0, "-m: '%s'", cli_out);
    CHECK(offkv("template", "-m", model, "--messages", msgs, "--no-generation-prompt", "--bos-token", "B", "--now",
                "2031-01-02T03:04:05", NULL) == 0, "-m: %s", cli_err);
    CHECK(strcmp(cli_out, "B[user]h\303\251<|stop|>2031") == 0, "--bos-token over -m: '%s'", cli_out);

    write_file(tmpl, "{{ messages[0].content }}{{ tools|length }}{{ extra }}\n{% if x %}");
    CHECK(offkv("template", "--template", tmpl, "--messages", msgs, NULL) == 1, "a bad template must fail");
    CHECK(strstr(cli_err, "line 2, column") && strstr(cli_err, "endif"), "syntax error: %s", cli_err);
    write_file(tmpl, "{{ messages[0].content }}|{{ extra }}");
    CHECK(offkv("template", "--template", tmpl, "--messages", msgs, "--kwargs", "{\"extra\": [1]}", NULL) == 0, "kwargs: %s", cli_err);
    CHECK(strcmp(cli_out, "h\303\251|[1]") == 0, "kwargs: '%s'", cli_out);
    write_file(msgs, "[{\"role\": \"user\", \"content\": }]");
    CHECK(offkv("template", "--template", tmpl, "--messages", msgs, NULL) == 1, "bad JSON must fail");
    CHECK(strstr(cli_err, "invalid JSON at byte 29"), "bad JSON: %s", cli_err);
    CHECK(offkv("template", "--messages", msgs, NULL) == 2, "no template: usage");
    CHECK(offkv("template", "-m", model, "--template", tmpl, "--messages", msgs, NULL) == 2, "both: usage");
    CHECK(offkv("template", "--template", tmpl, NULL) == 2, "no messages: usage");
    CHECK(offkv("template", "--template", tmpl, "--messages", msgs, "--frobnicate", NULL) == 2, "unknown flag");
    CHECK(offkv("template", "--template", "/nonexistent/x.jinja", "--messages", msgs, NULL) == 1 &&
              strstr(cli_err, "--template '/nonexistent/x.jinja': No such file or directory"),
          "missing file: the flag, the path and the reason: %s", cli_err);
    CHECK(offkv("template", "--help", NULL) == 0 && strstr(cli_out, "--messages"), "help");
}

int main(void) {
    if (!cli_init("test-template-cli")) return CHECK_SKIP;
    test_model_and_flags();
    const char *shared = check_shared_dir();
    if (shared) test_shared(shared);
    else printf("SKIP (part): ../shared is absent; the shared templates were not run through the program\n");
    return cli_done();
}
