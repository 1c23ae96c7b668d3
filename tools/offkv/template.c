/* offkv template: the prompt text a chat template makes of a conversation,
 * exactly as the server would feed it to the model, on stdout. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "offkv/chat.h"
#include "offkv/gguf.h"

static void usage(FILE *f) {
    fprintf(f,
            "usage: offkv template (-m MODEL | --template FILE [--bos-token S] [--eos-token S])\n"
            "                      --messages FILE.json [--tools FILE.json] [--no-generation-prompt]\n"
            "                      [--kwargs JSON] [--now 2026-12-01T09:30:00]\n"
            "Renders a conversation with a chat template (Jinja, as Hugging Face's apply_chat_template)\n"
            "and prints exactly the prompt text, nothing else.  A template that raises exits 1 with its\n"
            "message on stderr.\n\n"
            "  -m, --model FILE        GGUF model: its tokenizer.chat_template, bos and eos tokens\n"
            "  --template FILE         a template file instead (Jinja text)\n"
            "  --bos-token S           bos_token's text (default: the model's, or empty)\n"
            "  --eos-token S           eos_token's text (default: the model's, or empty)\n"
            "  --messages FILE.json    a JSON array of messages, as in an OpenAI request\n"
            "  --tools FILE.json       a JSON array of tools, as in an OpenAI request\n"
            "  --no-generation-prompt  no assistant turn opened at the end\n"
            "  --kwargs JSON           further template variables, a JSON object\n"
            "                          (e.g. '{\"enable_thinking\": false}')\n"
            "  --now DATE              the time strftime_now sees (default: now, local time)\n"
            "  -h, --help              this help\n");
}

int cmd_template(int argc, char **argv) {
    const char *cmd = "template", *model = NULL, *tfile = NULL, *bos = NULL, *eos = NULL, *mfile = NULL,
               *toolsfile = NULL, *now = NULL, *kwargs = NULL;
    bool gen = true;
    cli_seen seen = {0};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (cli_is(a, "-h", "--help")) { usage(stdout); return CLI_OK; }
        if (!cli_once(&seen, cmd, a)) return CLI_USAGE;
        else if (cli_is(a, "--no-generation-prompt", NULL)) gen = false;
        else if (cli_is(a, "-m", "--model")) { if (!(model = cli_value(cmd, argc, argv, &i))) return CLI_USAGE; }
        else if (cli_is(a, "--template", NULL)) { if (!(tfile = cli_value(cmd, argc, argv, &i))) return CLI_USAGE; }
        else if (cli_is(a, "--bos-token", NULL)) { if (!(bos = cli_value(cmd, argc, argv, &i))) return CLI_USAGE; }
        else if (cli_is(a, "--eos-token", NULL)) { if (!(eos = cli_value(cmd, argc, argv, &i))) return CLI_USAGE; }
        else if (cli_is(a, "--messages", NULL)) { if (!(mfile = cli_value(cmd, argc, argv, &i))) return CLI_USAGE; }
        else if (cli_is(a, "--tools", NULL)) { if (!(toolsfile = cli_value(cmd, argc, argv, &i))) return CLI_USAGE; }
        else if (cli_is(a, "--now", NULL)) { if (!(now = cli_value(cmd, argc, argv, &i))) return CLI_USAGE; }
        else if (cli_is(a, "--kwargs", NULL)) { if (!(kwargs = cli_value(cmd, argc, argv, &i))) return CLI_USAGE; }
        else return cli_unknown(cmd, a);
    }
    if (!model == !tfile) {
        cli_error(cmd, "give one of -m MODEL and --template FILE (see offkv template --help)");
        return CLI_USAGE;
    }
    if (!mfile) {
        cli_error(cmd, "--messages FILE.json is required (see offkv template --help)");
        return CLI_USAGE;
    }
    okv_error err;
    okv_chat_template *t = cli_chat_template(cmd, model, tfile, "--template");
    if (!t) return CLI_FAIL;
    if ((bos || eos) && okv_chat_template_set_tokens(t, bos ? bos : okv_chat_template_bos(t),
                                                     eos ? eos : okv_chat_template_eos(t), &err) != OKV_OK) {
        cli_error(cmd, "%s", err.message);
        okv_chat_template_free(t);
        return CLI_FAIL;
    }
    char *messages = cli_read_text(cmd, "--messages", mfile, NULL),
         *tools = toolsfile ? cli_read_text(cmd, "--tools", toolsfile, NULL) : NULL;
    int rc = CLI_FAIL;
    if (messages && (tools || !toolsfile)) {
        okv_chat_input in = {.messages_json = messages, .tools_json = tools, .extra_json = kwargs,
                             .add_generation_prompt = gen, .now = now};
        char *out = NULL;
        size_t n = 0;
        okv_status st = okv_chat_template_render(t, &in, &out, &n, &err);
        if (st == OKV_OK) {
            fwrite(out, 1, n, stdout);
            rc = CLI_OK;
        } else if (st == OKV_ERR_INVALID)
            cli_error(cmd, "%s", err.message);
        else
            cli_error(cmd, "the template failed: %s", err.message);
        free(out);
    }
    free(messages);
    free(tools);
    okv_chat_template_free(t);
    return rc;
}
