/* offkv tokenize: the ids a model's tokenizer gives a text, on one line. */
#include <stdio.h>
#include <stdlib.h>

#include "cli.h"

static void usage(FILE *f) {
    fprintf(f,
            "usage: offkv tokenize -m MODEL -p TEXT [--no-bos] [--no-parse-special]\n"
            "Prints the token ids of TEXT on one line, space separated.  Control tokens' text in TEXT\n"
            "(<|im_start|>, <|eot_id|>, ...) becomes those tokens, as in offkv run and llama.cpp's\n"
            "llama-tokenize.\n\n"
            "  -m, --model FILE     GGUF model (its vocabulary is used)\n"
            "  -p, --prompt TEXT    text to tokenize\n"
            "  --no-bos             no BOS/EOS even where the vocabulary adds them (default: added as\n"
            "                       `offkv run` adds them)\n"
            "  --no-parse-special   control tokens' text stays text\n"
            "  -h, --help           this help\n");
}

int cmd_tokenize(int argc, char **argv) {
    const char *cmd = "tokenize", *model = NULL, *text = NULL;
    bool add_special = true, parse_special = true;
    cli_seen seen = {0};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (cli_is(a, "-h", "--help")) { usage(stdout); return CLI_OK; }
        if (!cli_once(&seen, cmd, a)) return CLI_USAGE;
        else if (cli_is(a, "--no-bos", NULL)) add_special = false;
        else if (cli_is(a, "--no-parse-special", NULL)) parse_special = false;
        else if (cli_is(a, "-m", "--model")) { if (!(model = cli_value(cmd, argc, argv, &i))) return CLI_USAGE; }
        else if (cli_is(a, "-p", "--prompt")) { if (!(text = cli_value(cmd, argc, argv, &i))) return CLI_USAGE; }
        else return cli_unknown(cmd, a);
    }
    if (!model || !text) {
        cli_error(cmd, "%s is required (see offkv tokenize --help)", !model ? "-m MODEL" : "-p TEXT");
        return CLI_USAGE;
    }
    /* the vocabulary alone (llama.cpp's llama-tokenize loads vocab_only):
     * loading the weights took 8 s of a 4.6 GB model to tokenize two words */
    if (!cli_model_file_ok(cmd, model)) return CLI_FAIL;
    okv_error err = {0};
    okv_gguf *g = okv_gguf_open(model, &err);
    okv_tokenizer *tok = g ? okv_tokenizer_from_gguf(g, &err) : NULL;
    okv_gguf_close(g);
    if (!tok) {
        cli_error(cmd, "cannot read the vocabulary of '%s': %s", model, err.message);
        return CLI_FAIL;
    }
    size_t n = 0;
    int32_t *ids = cli_tokenize(cmd, tok, text,
                                (add_special ? OKV_TOKENIZE_ADD_SPECIAL : 0) | (parse_special ? OKV_TOKENIZE_PARSE_SPECIAL : 0), &n);
    if (ids) {
        for (size_t i = 0; i < n; i++) printf(i ? " %d" : "%d", (int)ids[i]);
        printf("\n");
    }
    free(ids);
    okv_tokenizer_free(tok);
    return ids ? CLI_OK : CLI_FAIL;
}
