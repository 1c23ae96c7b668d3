/* offkv serve refuses, before it listens, what it cannot serve: a model
 * whose chat template does not parse (the message names the key, the line
 * and the column), a --chat-template-file that does not parse, an unknown
 * --chat-template, and bad flags (exit 2, naming the flag). */
#include "fuzz_cli.h"
#include "gguf_copy.h"

int main(void) {
    const char *shared = check_shared_dir();
    if (!shared) {
        printf("skipped: ../shared not found\n");
        return CHECK_SKIP;
    }
    if (!fc_init("serve-start")) return CHECK_SKIP;
    char model[4200], odd[4200];
    snprintf(model, sizeof model, "%s/models/stories260K.gguf", shared);
    fc_path(odd, sizeof odd, "vicuna.gguf");

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

    int rc = fc_run(60, "serve", "-m", odd, "--port", "0", NULL);
    CHECK(rc == 1, "a template that does not parse: exit %d, want 1 (%s)", rc, fc_err);
    CHECK(strstr(fc_err, "tokenizer.chat_template") && strstr(fc_err, "line 2, column 46"),
          "the message names the key, the line and the column: %s", fc_err);
    CHECK(!strstr(fc_out, "listening"), "it never said it was listening: %s", fc_out);

    /* A Llama 2 template in the file is used: the server says so when it is
     * up (it is then killed: it would serve forever). */
    char l2[4200];
    fc_path(l2, sizeof l2, "llama2.gguf");
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
    rc = fc_run(6, "serve", "-m", l2, "--port", "0", "-t", "1", NULL);
    CHECK(rc == FC_TIMEOUT && strstr(fc_err, "chat template the model's tokenizer.chat_template (175 bytes)") &&
              strstr(fc_out, "listening on http://127.0.0.1:"),
          "a Llama 2 template: rc %d, %s %s", rc, fc_out, fc_err);

    /* --chat-template-file: one that does not parse stops the start */
    char tf[4200];
    fc_path(tf, sizeof tf, "bad.jinja");
    FILE *f = fopen(tf, "w");
    if (f) {
        fputs("{% for m in messages %}{{ m.content }}\n{% if %}{% endfor %}", f);
        fclose(f);
    }
    rc = fc_run(60, "serve", "-m", model, "--port", "0", "--chat-template-file", tf, NULL);
    CHECK(rc == 1 && strstr(fc_err, "--chat-template-file") && strstr(fc_err, "line 2, column 7") && !strstr(fc_out, "listening"),
          "a bad --chat-template-file: exit %d (%s)", rc, fc_err);

    static const char *const bad[][6] = {
        {"serve", "-m", "MODEL", "--chat-template", "vicuna", NULL},
        {"serve", "-m", "MODEL", "--port", "70000", NULL},
        {"serve", "-m", "MODEL", "--parallel", "0", NULL},
        {"serve", "-m", "MODEL", "--api-key", "", NULL},
        {"serve", "-m", "MODEL", "--max-body", "1", NULL},
        {"serve", "-m", "MODEL", "--kv-type", "q8", NULL},
        {"serve", "-m", "MODEL", "--bogus", "1", NULL},
        {"serve", "--port", "1", NULL},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        const char *args[8];
        int n = 0;
        for (int k = 0; bad[i][k]; k++) args[n++] = strcmp(bad[i][k], "MODEL") == 0 ? model : bad[i][k];
        args[n] = NULL;
        rc = fc_runv(30, args);
        CHECK(rc == 2, "case %zu (%s %s): exit %d, want 2 (%s)", i, args[n - 2], args[n - 1], rc, fc_err);
        CHECK(strstr(fc_err, "offkv serve: error:") != NULL, "case %zu says why: %s", i, fc_err);
    }
    rc = fc_run(30, "serve", "--help", NULL);
    CHECK(rc == 0 && strstr(fc_out, "--parallel") && strstr(fc_out, "--chat-template"), "--help: %d", rc);
    rc = fc_run(30, "--help", NULL);
    CHECK(rc == 0 && strstr(fc_out, "serve"), "offkv --help lists serve");
    return check_done();
}
