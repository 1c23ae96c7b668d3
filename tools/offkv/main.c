/* offkv: one program, several subcommands (as git or llama.cpp's tools),
 * each in its own file. */
#include <stdio.h>
#include <string.h>

#include "cli.h"

static const struct {
    const char *name;
    int (*fn)(int, char **);
    const char *what;
} commands[] = {
    {"run", cmd_run, "generate text from a prompt"},
    {"logits", cmd_logits, "write the logits of a token sequence to a file"},
    {"tokenize", cmd_tokenize, "print the token ids of a text"},
    {"synth", cmd_synth, "write a random-weight GGUF model of any shape"},
    {"bench", cmd_bench, "measure prompt (pp) and generation (tg) speed"},
};

static void usage(FILE *f) {
    fprintf(f, "usage: offkv COMMAND [flags]   (offkv COMMAND --help for its flags)\n\ncommands:\n");
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(f, "  %-9s %s\n", commands[i].name, commands[i].what);
}

int main(int argc, char **argv) {
    if (argc < 2) {
        usage(stderr);
        return CLI_USAGE;
    }
    if (cli_is(argv[1], "-h", "--help") || strcmp(argv[1], "help") == 0) {
        usage(stdout);
        return CLI_OK;
    }
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (strcmp(argv[1], commands[i].name) == 0) return commands[i].fn(argc - 1, argv + 1);
    fprintf(stderr, "offkv: unknown command '%s'\n", argv[1]);
    usage(stderr);
    return CLI_USAGE;
}
