/* offkv tokenize: the ids a model's tokenizer gives a text, on one line. */
#include <stdio.h>
#include <stdlib.h>

#include "cli.h"

static void usage(FILE *f) {
    fprintf(f,
            "usage: offkv tokenize -m MODEL -p TEXT [--no-bos]\n"
            "Prints the token ids of TEXT on one line, space separated.\n\n"
            "  -m, --model FILE   GGUF model (its vocabulary is used)\n"
            "  -p, --prompt TEXT  text to tokenize\n"
            "  --no-bos           no BOS/EOS even where the vocabulary adds them (default: added as\n"
            "                     `offkv run` adds them)\n"
            "  -h, --help         this help\n");
}

int cmd_tokenize(int argc, char **argv) {
    const char *cmd = "tokenize", *model = NULL, *text = NULL;
    bool add_special = true;
    cli_seen seen = {0};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (cli_is(a, "-h", "--help")) { usage(stdout); return CLI_OK; }
        if (!cli_once(&seen, cmd, a)) return CLI_USAGE;
        else if (cli_is(a, "--no-bos", NULL)) add_special = false;
        else if (cli_is(a, "-m", "--model")) { if (!(model = cli_value(cmd, argc, argv, &i))) return CLI_USAGE; }
        else if (cli_is(a, "-p", "--prompt")) { if (!(text = cli_value(cmd, argc, argv, &i))) return CLI_USAGE; }
        else return cli_unknown(cmd, a);
    }
    if (!model || !text) {
        cli_error(cmd, "%s is required (see offkv tokenize --help)", !model ? "-m MODEL" : "-p TEXT");
        return CLI_USAGE;
    }
    int rc_load;
    okv_model *m = cli_load_model(cmd, model, 0, &rc_load);
    if (!m) return rc_load;
    size_t n = 0;
    int32_t *ids = cli_tokenize(cmd, m, text, add_special, &n);
    if (ids) {
        for (size_t i = 0; i < n; i++) printf(i ? " %d" : "%d", (int)ids[i]);
        printf("\n");
    }
    free(ids);
    okv_model_free(m);
    return ids ? CLI_OK : CLI_FAIL;
}
