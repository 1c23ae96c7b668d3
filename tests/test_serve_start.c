/* offkv serve refuses, before it listens, what it cannot serve: a model
 * whose chat template does not parse (the message names the key, the line
 * and the column), a --chat-template-file that does not parse, an unknown
 * --chat-template, and bad flags (exit 2, naming the flag). */
#include "cli_run.h"
#include "gguf_copy.h"

int main(void) {
    const char *shared = check_shared_dir();
    if (!shared) {
        printf("skipped: ../shared not found\n");
        return CHECK_SKIP;
    }
    if (!cli_init("serve-start")) return CHECK_SKIP;
    char model[4200], odd[4200];
    snprintf(model, sizeof model, "%s/models/stories260K.gguf", shared);
    cli_path(odd, sizeof odd, "vicuna.gguf");

    /* stories260K with a template whose second line does not parse. */
    okv_error err = {0};
    okv_gguf *g = okv_gguf_open(model, &err);
    okv_gguf_writer *w = okv_gguf_writer_create(&err);
    const char *skip[] = {"tokenizer.chat_template", NULL};
    bool ok = g && w && copy_metadata_except(g, w, skip) && copy_tensors(g, w) &&
              okv_gguf_writer_add_str(w, "tokenizer.chat_template",
                                      "{% for m in messages %}\n{{ 'USER: ' + m['content'] + '\\nASSISTANT: ' }\n{% endfor %}",
                                      &err) == OKV_OK &&
              okv_gguf_writer_write(w, odd, &err) == OKV_OK;
    CHECK(ok, "writing the variant: %s", err.message);
    okv_gguf_writer_free(w);
    okv_gguf_close(g);

    int rc = cli_run(60, "serve", "-m", odd, "--port", "0", NULL);
    CHECK(rc == 1, "a template that does not parse: exit %d, want 1 (%s)", rc, cli_err);
    CHECK(strstr(cli_err, "tokenizer.chat_template") && strstr(cli_err, "line 2, column 46"),
          "the message names the key, the line and the column: %s", cli_err);
    CHECK(!strstr(cli_out, "listening"), "it never said it was listening: %s", cli_out);

    /* A Llama 2 template in the file is used: the server says so when it is
     * up (it is then killed: it would serve forever). */
    char l2[4200];
    cli_path(l2, sizeof l2, "llama2.gguf");
    g = okv_gguf_open(model, &err);
    w = okv_gguf_writer_create(&err);
    ok = g && w && copy_metadata_except(g, w, skip) && copy_tensors(g, w) &&
         okv_gguf_writer_add_str(w, "tokenizer.chat_template",
                                 "{% if messages[0]['role'] == 'system' %}{% set s = '<<SYS>>\\n' + messages[0]['content'] + "
                                 "'\\n<</SYS>>\\n\\n' %}{% endif %}{{ bos_token + '[INST] ' + m['content'] + ' [/INST]' }}",
                                 &err) == OKV_OK &&
         okv_gguf_writer_write(w, l2, &err) == OKV_OK;
    CHECK(ok, "writing the Llama 2 variant: %s", err.message);
    okv_gguf_writer_free(w);
    okv_gguf_close(g);
    rc = cli_run(6, "serve", "-m", l2, "--port", "0", "-t", "1", NULL);
    CHECK(rc == CLI_TIMEOUT && strstr(cli_err, "chat template the model's tokenizer.chat_template (175 bytes)") &&
              strstr(cli_out, "listening on http://127.0.0.1:"),
          "a Llama 2 template: rc %d, %s %s", rc, cli_out, cli_err);

    /* --chat-template-file: one that does not parse stops the start */
    char tf[4200];
    cli_path(tf, sizeof tf, "bad.jinja");
    FILE *f = fopen(tf, "w");
    if (f) {
        fputs("{% for m in messages %}{{ m.content }}\n{% if %}{% endfor %}", f);
        fclose(f);
    }
    rc = cli_run(60, "serve", "-m", model, "--port", "0", "--chat-template-file", tf, NULL);
    CHECK(rc == 1 && strstr(cli_err, "--chat-template-file") && strstr(cli_err, "line 2, column 7") && !strstr(cli_out, "listening"),
          "a bad --chat-template-file: exit %d (%s)", rc, cli_err);

    static const char *const bad[][8] = {
        {"serve", "-m", "MODEL", "--chat-template", "vicuna", NULL},
        {"serve", "-m", "MODEL", "--port", "70000", NULL},
        {"serve", "-m", "MODEL", "--parallel", "0", NULL},
        {"serve", "-m", "MODEL", "--api-key", "", NULL},
        {"serve", "-m", "MODEL", "--max-body", "1", NULL},
        {"serve", "-m", "MODEL", "--kv-type", "q8", NULL},
        {"serve", "-m", "MODEL", "--bogus", "1", NULL},
        {"serve", "--port", "1", NULL},
        {"serve", "-m", "MODEL", "--chat-template", "chatml", "--chat-template-file", "T", NULL},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        const char *args[10];
        int n = 0;
        for (int k = 0; bad[i][k]; k++) args[n++] = strcmp(bad[i][k], "MODEL") == 0 ? model : bad[i][k];
        args[n] = NULL;
        rc = cli_runv(30, args);
        CHECK(rc == 2, "case %zu (%s %s): exit %d, want 2 (%s)", i, args[n - 2], args[n - 1], rc, cli_err);
        CHECK(strstr(cli_err, "offkv serve: error:") != NULL, "case %zu says why: %s", i, cli_err);
    }
    rc = cli_run(30, "serve", "--help", NULL);
    CHECK(rc == 0 && strstr(cli_out, "--parallel") && strstr(cli_out, "--chat-template"), "--help: %d", rc);
    rc = cli_run(30, "--help", NULL);
    CHECK(rc == 0 && strstr(cli_out, "serve"), "offkv --help lists serve");
    return cli_done();
}
