/* Fuzz: the offkv program with bad flag values, bad token lists and missing,
 * odd or corrupt model files.  The rule: the CLI never crashes or hangs on
 * user input; a bad value exits non-zero (2 for usage, 1 for a failure while
 * working) with a message naming the flag and the value; and `--help` tells
 * the truth: every flag it lists is accepted, with a value where it shows
 * one, and the boundary values it promises work. */
#include <stdint.h>

#include "cli_run.h"
#include "golden.h"

static char model[1024], vocab_only[1024];

typedef struct cli_case {
    int rc;                  /* wanted exit code */
    const char *needle[2];   /* in stderr (NULL: none) */
    const char *args[16];    /* "$M" is the model, "$V" a vocabulary-only file */
} cli_case;

static void run_case(const cli_case *c) {
    const char *args[17];
    char line[1024] = "";
    int n = 0;
    for (; c->args[n]; n++) {
        args[n] = strcmp(c->args[n], "$M") == 0 ? model : strcmp(c->args[n], "$V") == 0 ? vocab_only : c->args[n];
        snprintf(line + strlen(line), sizeof line - strlen(line), " %s", c->args[n]);
    }
    args[n] = NULL;
    int rc = cli_runv(60, args);
    CHECK(!cli_crashed(rc) && rc != CLI_TIMEOUT, "offkv%s: crashed or hung (rc %d): %.400s", line, rc, cli_err);
    CHECK(rc == c->rc, "offkv%s: exit %d, want %d: %.300s", line, rc, c->rc, cli_err);
    for (int k = 0; k < 2; k++)
        if (c->needle[k])
            CHECK(strstr(cli_err, c->needle[k]) != NULL, "offkv%s: stderr lacks '%s': %.300s", line, c->needle[k],
                  cli_err);
}

/* Every flag a subcommand's --help lists is accepted: with no value after
 * it, a flag shown with a value (-x N) is "needs a value", one without is
 * not an unknown flag. */
static void check_help(const char *cmd) {
    int rc = cli_run(30, cmd, "--help", NULL);
    CHECK(rc == 0 && strstr(cli_out, "usage: offkv") != NULL, "%s --help: rc %d", cmd, rc);
    static char help[sizeof cli_out];
    memcpy(help, cli_out, sizeof help);
    int n_flags = 0;
    for (char *line = strtok(help, "\n"); line; line = strtok(NULL, "\n")) {
        if (strncmp(line, "  -", 3) != 0) continue;
        /* "  -m, --model FILE   text" or "  --warmup   text" */
        char *p = line + 2;
        char flags[4][64];
        int nf = 0;
        bool takes_value = false;
        while (*p == '-' && nf < 4) {
            size_t len = strcspn(p, ", ");
            snprintf(flags[nf++], sizeof flags[0], "%.*s", (int)len, p);
            p += len;
            if (*p == ',') p += 2;
            else if (*p == ' ' && p[1] != ' ' && p[1] != '\0') takes_value = true;
        }
        for (int k = 0; k < nf; k++) {
            if (strcmp(flags[k], "-h") == 0 || strcmp(flags[k], "--help") == 0) continue;
            n_flags++;
            rc = cli_run(30, cmd, flags[k], NULL);
            CHECK(!cli_crashed(rc) && rc != CLI_TIMEOUT, "%s %s: crashed (rc %d)", cmd, flags[k], rc);
            CHECK(strstr(cli_err, "unknown flag") == NULL, "%s --help lists %s, which it calls unknown", cmd, flags[k]);
            if (takes_value)
                CHECK(rc == 2 && strstr(cli_err, "needs a value") && strstr(cli_err, flags[k]),
                      "%s %s without its value: rc %d: %.200s", cmd, flags[k], rc, cli_err);
        }
    }
    CHECK(n_flags >= 3, "%s --help: only %d flags found", cmd, n_flags);
}

static uint64_t rng_state = 99;
static uint64_t rnd(void) {
    uint64_t z = (rng_state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

int main(void) {
    const char *shared = check_shared_dir();
    if (!shared) { printf("skipped: ../shared not found\n"); return CHECK_SKIP; }
    if (!cli_init("test-fuzz-cli")) return CHECK_SKIP;
    snprintf(model, sizeof model, "%s/models/stories260K.gguf", shared);
    snprintf(vocab_only, sizeof vocab_only, "%s/vocab/ggml-vocab-llama-spm.gguf", shared);
    char out[4200], bad[4200], synth_out[4200];
    cli_path(out, sizeof out, "out.f32");
    cli_path(bad, sizeof bad, "bad.gguf");
    cli_path(synth_out, sizeof synth_out, "synth.gguf");

    const cli_case cases[] = {
        /* run: missing values and numbers out of range */
        {2, {"-m MODEL", NULL}, {"run", NULL}},
        {2, {"-m", "needs a value"}, {"run", "-m", NULL}},
        {2, {"-n", "'-1'"}, {"run", "-m", "$M", "-n", "-1", NULL}},
        {2, {"-n", "99999999999"}, {"run", "-m", "$M", "-n", "99999999999", NULL}},
        {2, {"-c", "'0'"}, {"run", "-m", "$M", "-c", "0", NULL}},
        {2, {"--ctx-size", "'-5'"}, {"run", "-m", "$M", "--ctx-size", "-5", NULL}},
        {2, {"--chunk", "'0'"}, {"run", "-m", "$M", "--chunk", "0", NULL}},
        {2, {"--chunk", "'99999999'"}, {"run", "-m", "$M", "--chunk", "99999999", NULL}},
        {2, {"-t", "'0'"}, {"run", "-m", "$M", "-t", "0", NULL}},
        {2, {"-t", "'100000'"}, {"run", "-m", "$M", "-t", "100000", NULL}},
        {2, {"--top-p", "'2'"}, {"run", "-m", "$M", "--top-p", "2", NULL}},
        {2, {"--top-p", "'0'"}, {"run", "-m", "$M", "--top-p", "0", NULL}},
        {2, {"--temp", "'nan'"}, {"run", "-m", "$M", "--temp", "nan", NULL}},
        {2, {"--temp", "'inf'"}, {"run", "-m", "$M", "--temp", "inf", NULL}},
        {2, {"--temp", "'-1'"}, {"run", "-m", "$M", "--temp", "-1", NULL}},
        {2, {"--temp", "''"}, {"run", "-m", "$M", "--temp", "", NULL}},
        {2, {"--top-k", "'-1'"}, {"run", "-m", "$M", "--top-k", "-1", NULL}},
        {2, {"--seed", "'-1'"}, {"run", "-m", "$M", "--seed", "-1", NULL}},
        {2, {"--seed", "'1e3'"}, {"run", "-m", "$M", "--seed", "1e3", NULL}},
        {2, {"--kv-type", "'q4_0'"}, {"run", "-m", "$M", "--kv-type", "q4_0", NULL}},
        {2, {"--sliding-window", "'0'"}, {"run", "-m", "$M", "--sliding-window", "0", NULL}},
        {2, {"--bogus", NULL}, {"run", "-m", "$M", "--bogus", NULL}},
        {2, {"-c", "12"}, {"run", "-m", "$M", "-c", "4", "-p", "Once upon a time there was a little girl", NULL}},
        /* run: the boundaries the help promises */
        {0, {NULL, NULL}, {"run", "-m", "$M", "-n", "0", NULL}},
        {0, {NULL, NULL}, {"run", "-m", "$M", "-n", "2", "--top-k", "0", "--top-p", "1", "--seed", "0", NULL}},
        {0, {NULL, NULL}, {"run", "-m", "$M", "-n", "2", "--temp", "0", "-c", "1", NULL}},
        {0, {NULL, NULL}, {"run", "-m", "$M", "-n", "2", "--temp", "0", "--chunk", "1", "-p", "Once upon", "--warmup", NULL}},
        {0, {NULL, NULL}, {"run", "-m", "$M", "-n", "2", "-p", "\xff\xfe invalid \xc3", NULL}},
        /* model files: missing, not a file, not a model */
        {1, {"/nonexistent/m.gguf", "not found"}, {"run", "-m", "/nonexistent/m.gguf", NULL}},
        {1, {"/", "not a regular file"}, {"run", "-m", "/", NULL}},
        {1, {"/dev/null", NULL}, {"tokenize", "-m", "/dev/null", "-p", "a", NULL}},
        {1, {"token_embd", NULL}, {"run", "-m", "$V", NULL}},
        /* logits: token lists */
        {2, {"--tokens", NULL}, {"logits", "-m", "$M", "-o", out, NULL}},
        {2, {"-o FILE", NULL}, {"logits", "-m", "$M", "--tokens", "1", NULL}},
        {2, {"--tokens", "''"}, {"logits", "-m", "$M", "--tokens", "", "-o", out, NULL}},
        {2, {"--tokens", "'1,,2'"}, {"logits", "-m", "$M", "--tokens", "1,,2", "-o", out, NULL}},
        {2, {"--tokens", "'1,x'"}, {"logits", "-m", "$M", "--tokens", "1,x", "-o", out, NULL}},
        {2, {"--tokens", "'1,'"}, {"logits", "-m", "$M", "--tokens", "1,", "-o", out, NULL}},
        {2, {"--tokens", "'-1'"}, {"logits", "-m", "$M", "--tokens", "-1", "-o", out, NULL}},
        {2, {"--tokens", "'1;2'"}, {"logits", "-m", "$M", "--tokens", "1;2", "-o", out, NULL}},
        {2, {"--tokens", "99999999999"}, {"logits", "-m", "$M", "--tokens", "1,99999999999", "-o", out, NULL}},
        {2, {"--tokens", "'512'"}, {"logits", "-m", "$M", "--tokens", "1,512", "-o", out, NULL}},
        {2, {"--tokens", "'2147483647'"}, {"logits", "-m", "$M", "--tokens", "2147483647", "-o", out, NULL}},
        {2, {"--chunk", "'0'"}, {"logits", "-m", "$M", "--tokens", "1,2", "--chunk", "0", "-o", out, NULL}},
        {0, {NULL, NULL}, {"logits", "-m", "$M", "--tokens", "1,2,3", "--chunk", "1000000", "-o", out, NULL}},
        {1, {"/nonexistent/x.f32", NULL}, {"logits", "-m", "$M", "--tokens", "1,2", "-o", "/nonexistent/x.f32", NULL}},
        /* tokenize */
        {2, {"-p TEXT", NULL}, {"tokenize", "-m", "$M", NULL}},
        {0, {NULL, NULL}, {"tokenize", "-m", "$M", "-p", "", NULL}},
        {0, {NULL, NULL}, {"tokenize", "-m", "$M", "--no-bos", "-p", "\x80\x80 \xf0\x9f", NULL}},
        /* bench */
        {2, {"-p", "'-1'"}, {"bench", "-m", "$M", "-p", "-1", NULL}},
        {2, {"-r", "'0'"}, {"bench", "-m", "$M", "-r", "0", NULL}},
        {2, {"nothing to measure", NULL}, {"bench", "-m", "$M", "-p", "0", "-n", "0", NULL}},
        {2, {"-t", "'0'"}, {"bench", "-m", "$M", "-t", "0", NULL}},
        {0, {NULL, NULL}, {"bench", "-m", "$M", "-p", "0", "-n", "2", "-r", "1", "-t", "1", NULL}},
        /* synth */
        {2, {"-o FILE", NULL}, {"synth", NULL}},
        {2, {"--n-vocab", "'259'"}, {"synth", "--n-vocab", "259", "-o", synth_out, NULL}},
        {2, {"--head-dim", NULL}, {"synth", "--head-dim", "513", "-o", synth_out, NULL}},
        {2, {"odd", NULL}, {"synth", "--n-embd", "18", "--head-dim", "3", "-o", synth_out, NULL}},
        {2, {"--head-dim", "twice"}, {"synth", "--head-dim", "6", "--n-embd", "18", "--head-dim", "3", "-o", synth_out, NULL}},
        {2, {"--model", "twice"}, {"run", "-m", "$M", "--model", "$M", NULL}},
        {2, {"--warmup", "twice"}, {"run", "-m", "$M", "--warmup", "--warmup", NULL}},
        {2, {"--tokens", "twice"}, {"logits", "-m", "$M", "--tokens", "1", "--tokens", "2", "-o", synth_out, NULL}},
        {2, {"--n-prompt", "twice"}, {"bench", "-m", "$M", "-p", "8", "--n-prompt", "8", NULL}},
        {2, {"--no-bos", "twice"}, {"tokenize", "-m", "$M", "-p", "x", "--no-bos", "--no-bos", NULL}},
        {2, {"--temp", "rounds to 0"}, {"run", "-m", "$M", "--temp", "1e-46", NULL}},
        {2, {"--top-p", "'1e-300'"}, {"run", "-m", "$M", "--top-p", "1e-300", NULL}},
        {2, {"--rope-base", "'0'"}, {"synth", "--rope-base", "0", "-o", synth_out, NULL}},
        {2, {"--rope-base", "'nan'"}, {"synth", "--rope-base", "nan", "-o", synth_out, NULL}},
        {2, {"--n-head-kv", NULL}, {"synth", "--n-head-kv", "3", "-o", synth_out, NULL}},
        {2, {"--sliding-window-pattern", "'12x'"}, {"synth", "--arch", "gemma3", "--sliding-window-pattern", "12x", "-o", synth_out, NULL}},
        {2, {"--sliding-window-pattern", "3 entries"}, {"synth", "--arch", "gemma3", "--sliding-window-pattern", "101", "-o", synth_out, NULL}},
        {2, {"--softcap", NULL}, {"synth", "--softcap", "5", "-o", synth_out, NULL}},
        {2, {"-o", "empty path"}, {"logits", "-m", "$M", "--tokens", "1", "-o", "", NULL}},
        {2, {"-o", "empty path"}, {"synth", "-o", "", NULL}},
        {2, {"--tokens", "digits only"}, {"logits", "-m", "$M", "--tokens", " +1,-0", "-o", synth_out, NULL}},
        {2, {"--tokens", "digits only"}, {"logits", "-m", "$M", "--tokens", "1, 2", "-o", synth_out, NULL}},
        {2, {"--tokens", "'99999999999999' is out of range"}, {"logits", "-m", "$M", "--tokens", "1,99999999999999", "-o", synth_out, NULL}},
        /* past the training context (stories260K: 128): runs, with a warning */
        {0, {"a context of 256 positions exceeds the model's training context of 128", NULL},
         {"run", "-m", "$M", "-c", "256", "-n", "2", "--temp", "0", NULL}},
        /* ... and the draft's warning says it is the draft's */
        {0, {"exceeds the draft model's training context of 128", NULL},
         {"run", "-m", "$M", "--draft", "$M", "-c", "256", "-n", "2", "--temp", "0", NULL}},
        {2, {"-c 10", "--draft-n 64"}, {"run", "-m", "$M", "-c", "10", "--lookup", "2", "--draft-n", "64", NULL}},
        /* flags the file would carry to no effect are refused, not written */
        {2, {"--softcap", "gemma2 always caps"}, {"synth", "--arch", "gemma2", "--softcap", "0", "-o", synth_out, NULL}},
        {2, {"--logit-scale", "muse-glimmer"}, {"synth", "--logit-scale", "3", "-o", synth_out, NULL}},
        {2, {"--yarn-orig-ctx", "YaRN"}, {"synth", "--yarn-orig-ctx", "100", "-o", synth_out, NULL}},
        {2, {"--yarn-orig-ctx", "YaRN"}, {"synth", "--arch", "gpt-oss", "--yarn-factor", "0", "--yarn-orig-ctx", "100", "-o", synth_out, NULL}},
        {2, {"--sliding-window", "qwen3's loader"}, {"synth", "--arch", "qwen3", "--sliding-window", "4", "-o", synth_out, NULL}},
        /* 10 is a period unless there are two layers (12 layers: not 2 bools) */
        {0, {NULL, NULL}, {"synth", "--arch", "gemma3", "--n-layer", "12", "--sliding-window-pattern", "10", "-o", synth_out, NULL}},
        {1, {"/nonexistent/s.gguf", NULL}, {"synth", "-o", "/nonexistent/s.gguf", NULL}},
        {0, {NULL, NULL}, {"synth", "--n-vocab", "260", "--arch", "muse-glimmer", "--sliding-window-pattern", "10", "--fused-qkv", "-o", synth_out, NULL}},
        /* no command, unknown command */
        {2, {"usage", NULL}, {NULL}},
        {2, {"frob", NULL}, {"frob", NULL}},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) run_case(&cases[i]);

    static const char *const cmds[] = {"run", "chat", "logits", "tokenize", "synth", "bench"};
    for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++) check_help(cmds[i]);

    /* Damaged copies of the model: empty, truncated, random bytes in the
     * header: each loads and runs, or exits 1 naming the file, never a
     * crash. */
    size_t size = 0;
    char *data = golden_read(model, &size);
    CHECK(data != NULL, "read %s", model);
    for (int k = 0; data && k < 24; k++) {
        size_t len = size;
        char *copy = malloc(size);
        memcpy(copy, data, size);
        if (k == 0) len = 0;
        else if (k < 4) len = size * (size_t)k / 4;
        else
            for (int j = 0; j < 3; j++) copy[24 + rnd() % 8192] = (char)rnd();
        FILE *f = fopen(bad, "wb");
        if (f) {
            fwrite(copy, 1, len, f);
            fclose(f);
        }
        free(copy);
        const char *sub = k % 3 == 0 ? "tokenize" : k % 3 == 1 ? "logits" : "run";
        int rc = k % 3 == 0 ? cli_run(60, "tokenize", "-m", bad, "-p", "Once upon a time", NULL)
               : k % 3 == 1 ? cli_run(60, "logits", "-m", bad, "--tokens", "1,2,3", "-o", out, NULL)
                            : cli_run(60, "run", "-m", bad, "-n", "3", "--temp", "0", NULL);
        CHECK(!cli_crashed(rc) && rc != CLI_TIMEOUT, "%s on damaged copy %d: crashed or hung (rc %d): %.300s", sub, k, rc,
              cli_err);
        CHECK(rc == 0 || (rc == 1 && strstr(cli_err, bad)), "%s on damaged copy %d: rc %d: %.300s", sub, k, rc, cli_err);
    }
    free(data);
    remove(bad);
    remove(out);
    remove(synth_out);
    return cli_done();
}
