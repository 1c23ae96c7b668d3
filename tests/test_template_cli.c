/* offkv template, run as a user runs it: the prompt on stdout and nothing
 * else, byte for byte what Python's jinja2 rendered (../shared/templates);
 * a raise exits 1 with the template's message on stderr; -m reads a GGUF's
 * template with its bos / eos; usage errors exit 2. */
#include <fcntl.h>
#include <spawn.h>
#include <stdarg.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "offkv/gguf.h"

extern char **environ;

static char bin[4096], dir[4096];
static char out_text[1 << 17], err_text[1 << 16];
static size_t out_len;

static size_t slurp(const char *path, char *buf, size_t cap) {
    FILE *f = fopen(path, "rb");
    size_t n = f ? fread(buf, 1, cap - 1, f) : 0;
    buf[n] = '\0';
    if (f) fclose(f);
    return n;
}

static int offkv(const char *first, ...) {
    const char *argv[64];
    int n = 0;
    argv[n++] = bin;
    va_list ap;
    va_start(ap, first);
    for (const char *a = first; a && n < 63; a = va_arg(ap, const char *)) argv[n++] = a;
    va_end(ap);
    argv[n] = NULL;
    char o[4200], e[4200];
    snprintf(o, sizeof o, "%s/out.txt", dir);
    snprintf(e, sizeof e, "%s/err.txt", dir);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, o, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_addopen(&fa, 2, e, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    pid_t pid;
    int rc = posix_spawn(&pid, bin, &fa, NULL, (char *const *)argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    if (rc != 0) return -1;
    int status = 0;
    waitpid(pid, &status, 0);
    out_len = slurp(o, out_text, sizeof out_text);
    slurp(e, err_text, sizeof err_text);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static void write_file(const char *path, const char *text) {
    FILE *f = fopen(path, "wb");
    if (f) {
        fputs(text, f);
        fclose(f);
    }
}

static void path_in(char *buf, size_t cap, const char *name) { snprintf(buf, cap, "%s/%s", dir, name); }

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
    path_in(msgs, sizeof msgs, "messages.json");
    path_in(tools, sizeof tools, "tools.json");
    write_file(msgs, TOOL_RESULT);
    write_file(tools, TOOLS);
    /* the conversations.json case tool-result, as the expected files have it */
    snprintf(tmpl, sizeof tmpl, "%s/templates/src/Qwen-Qwen3-0.6B.jinja", shared);
    CHECK(offkv("template", "--template", tmpl, "--eos-token", "<|im_end|>", "--messages", msgs, "--tools", tools, "--now",
                "2026-12-01T09:30:00", NULL) == 0, "qwen3: %s", err_text);
    snprintf(want_path, sizeof want_path, "%s/templates/expected/Qwen-Qwen3-0.6B.tool-result.txt", shared);
    size_t n = slurp(want_path, want, sizeof want);
    CHECK(n > 0 && out_len == n && memcmp(out_text, want, n) == 0, "qwen3 tool-result differs (%zu vs %zu bytes)", out_len, n);
    CHECK(err_text[0] == '\0', "stderr not empty: %s", err_text);

    snprintf(tmpl, sizeof tmpl, "%s/templates/src/meta-llama-Llama-3.1-8B-Instruct.jinja", shared);
    CHECK(offkv("template", "--template", tmpl, "--bos-token", "<|begin_of_text|>", "--eos-token", "<|eot_id|>", "--messages",
                msgs, "--tools", tools, "--now", "2026-12-01T09:30:00", NULL) == 0, "llama3.1: %s", err_text);
    snprintf(want_path, sizeof want_path, "%s/templates/expected/meta-llama-Llama-3.1-8B-Instruct.tool-result.txt", shared);
    n = slurp(want_path, want, sizeof want);
    CHECK(n > 0 && out_len == n && memcmp(out_text, want, n) == 0, "llama 3.1 tool-result differs (%zu vs %zu bytes)", out_len, n);

    /* Mistral Nemo raises on call ids that are not 9 characters */
    snprintf(tmpl, sizeof tmpl, "%s/templates/src/mistralai-Mistral-Nemo-Instruct-2407.jinja", shared);
    CHECK(offkv("template", "--template", tmpl, "--messages", msgs, "--tools", tools, NULL) == 1, "mistral raise: exit");
    CHECK(out_len == 0, "a raise printed %zu bytes on stdout", out_len);
    CHECK(strstr(err_text, "Tool call IDs should be alphanumeric strings with length 9!") != NULL, "mistral raise: %s", err_text);

    /* --no-generation-prompt */
    write_file(msgs, "[{\"role\": \"user\", \"content\": \"Say hi.\"}, {\"role\": \"assistant\", \"content\": \"Hi!\"}]");
    snprintf(tmpl, sizeof tmpl, "%s/templates/src/google-gemma-2-2b-it.jinja", shared);
    CHECK(offkv("template", "--template", tmpl, "--bos-token", "<bos>", "--eos-token", "<eos>", "--messages", msgs,
                "--no-generation-prompt", NULL) == 0, "gemma2: %s", err_text);
    snprintf(want_path, sizeof want_path, "%s/templates/expected/google-gemma-2-2b-it.multiturn-nogen.txt", shared);
    n = slurp(want_path, want, sizeof want);
    CHECK(n > 0 && out_len == n && memcmp(out_text, want, n) == 0, "gemma2 multiturn-nogen differs");
}

static void test_model_and_flags(void) {
    char model[4200], msgs[4200], tmpl[4200];
    path_in(model, sizeof model, "t.gguf");
    path_in(msgs, sizeof msgs, "m.json");
    path_in(tmpl, sizeof tmpl, "t.jinja");
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
    CHECK(offkv("template", "-m", model, "--messages", msgs, "--now", "2031-01-02T03:04:05", NULL) == 0, "-m: %s", err_text);
    CHECK(strcmp(out_text, "<|go|>[user]h\303\251<|stop|>[assistant]2031") == 0, "-m: '%s'", out_text);
    CHECK(offkv("template", "-m", model, "--messages", msgs, "--no-generation-prompt", "--bos-token", "B", "--now",
                "2031-01-02T03:04:05", NULL) == 0, "-m: %s", err_text);
    CHECK(strcmp(out_text, "B[user]h\303\251<|stop|>2031") == 0, "--bos-token over -m: '%s'", out_text);

    write_file(tmpl, "{{ messages[0].content }}{{ tools|length }}{{ extra }}\n{% if x %}");
    CHECK(offkv("template", "--template", tmpl, "--messages", msgs, NULL) == 1, "a bad template must fail");
    CHECK(strstr(err_text, "line 2, column") && strstr(err_text, "endif"), "syntax error: %s", err_text);
    write_file(tmpl, "{{ messages[0].content }}|{{ extra }}");
    CHECK(offkv("template", "--template", tmpl, "--messages", msgs, "--kwargs", "{\"extra\": [1]}", NULL) == 0, "kwargs: %s", err_text);
    CHECK(strcmp(out_text, "h\303\251|[1]") == 0, "kwargs: '%s'", out_text);
    write_file(msgs, "[{\"role\": \"user\", \"content\": }]");
    CHECK(offkv("template", "--template", tmpl, "--messages", msgs, NULL) == 1, "bad JSON must fail");
    CHECK(strstr(err_text, "invalid JSON at byte 29"), "bad JSON: %s", err_text);
    CHECK(offkv("template", "--messages", msgs, NULL) == 2, "no template: usage");
    CHECK(offkv("template", "-m", model, "--template", tmpl, "--messages", msgs, NULL) == 2, "both: usage");
    CHECK(offkv("template", "--template", tmpl, NULL) == 2, "no messages: usage");
    CHECK(offkv("template", "--template", tmpl, "--messages", msgs, "--frobnicate", NULL) == 2, "unknown flag");
    CHECK(offkv("template", "--template", "/nonexistent/x.jinja", "--messages", msgs, NULL) == 1, "missing file");
    CHECK(offkv("template", "--help", NULL) == 0 && strstr(out_text, "--messages"), "help");
}

int main(void) {
    const char *b = getenv("OKV_BIN");
    if (!b) {
        printf("skipped: OKV_BIN not set (ctest sets it to the build folder)\n");
        return CHECK_SKIP;
    }
    snprintf(bin, sizeof bin, "%s/offkv", b);
    snprintf(dir, sizeof dir, "%s/test-template-cli-XXXXXX", b);
    if (!mkdtemp(dir)) {
        printf("cannot make a scratch folder under %s\n", b);
        return 1;
    }
    test_model_and_flags();
    const char *shared = check_shared_dir();
    if (shared) test_shared(shared);
    else printf("SKIP (part): ../shared is absent; the shared templates were not run through the program\n");
    if (check_failed_ == 0) {
        char cmd[4300];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
        if (system(cmd) != 0) fprintf(stderr, "note: could not remove %s\n", dir);
    }
    return check_done();
}
