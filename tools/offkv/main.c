/* offkv: one program, several subcommands (as git or llama.cpp's tools),
 * each in its own file. */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"

#ifdef OKV_NO_SERVER
/* Configured without the HTTP server (CMake said why, and OKV_NO_SERVER
 * holds it): the subcommand stays, so that a user learns why it cannot run
 * rather than reading "unknown command". */
int cmd_serve(int argc, char **argv) {
    (void)argc;
    (void)argv;
    cli_error("serve", "this offkv was built without the HTTP server (%s when it was configured); "
                       "install libmicrohttpd and cJSON (scripts/install-deps.sh) and build again", OKV_NO_SERVER);
    return CLI_FAIL;
}
#endif

static const struct {
    const char *name;
    int (*fn)(int, char **);
    const char *what;
} commands[] = {
    {"run", cmd_run, "generate text from a prompt"},
    {"chat", cmd_chat, "talk with the model in its chat template, a line a message"},
    {"logits", cmd_logits, "write the logits of a token sequence to a file"},
    {"tokenize", cmd_tokenize, "print the token ids of a text"},
    {"synth", cmd_synth, "write a random-weight GGUF model of any shape"},
    {"bench", cmd_bench, "measure prompt (pp) and generation (tg) speed"},
    {"serve", cmd_serve, "serve the model over HTTP with OpenAI's API"},
    {"template", cmd_template, "print the prompt a chat template makes of a conversation"},
    {"info", cmd_info, "print a GGUF file's metadata and tensors"},
};

static void usage(FILE *f) {
    fprintf(f, "usage: offkv COMMAND [flags]   (offkv COMMAND --help for its flags)\n\ncommands:\n");
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(f, "  %-9s %s\n", commands[i].name, commands[i].what);
}

/* A program started with stdin, stdout or stderr closed would hand that
 * number to the next file it opens (the model, an output file) and print
 * into it.  Park each closed one on /dev/null, read-only, so that writing to
 * a closed stdout still fails, and is reported, rather than vanishing. */
static void guard_std_fds(void) {
    for (int fd = 0; fd <= 2; fd++) {
        if (fcntl(fd, F_GETFD) != -1 || errno != EBADF) continue;
        int got = open("/dev/null", O_RDONLY);
        if (got >= 0 && got != fd) {
            dup2(got, fd);
            close(got);
        }
    }
}

/* Output that was lost (a full disk, a closed pipe, /dev/full) must not end
 * in exit 0: every byte buffered for stdout has to reach it. */
static int finish_stdout(int rc) {
    const bool lost = fflush(stdout) != 0 || ferror(stdout);
    const int e = errno;
    if ((fclose(stdout) != 0 || lost) && rc == CLI_OK) { /* a failed command has said why already */
        fprintf(stderr, "offkv: error: writing standard output: %s\n", strerror(lost ? e : errno));
        return CLI_FAIL;
    }
    return rc;
}

static int dispatch(int argc, char **argv) {
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

int main(int argc, char **argv) {
    guard_std_fds();
    return finish_stdout(dispatch(argc, argv));
}
