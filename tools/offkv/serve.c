/* offkv serve: the flags; the server itself is tools/offkv/serve/. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "cli.h"
#include "serve/serve.h"

static void usage(FILE *f) {
    fprintf(f,
            "usage: offkv serve -m MODEL [flags]\n"
            "Serves the model over HTTP with OpenAI's API: POST /v1/chat/completions, POST /v1/completions,\n"
            "POST /v1/responses (stateless) and /v1/responses/input_tokens, GET /v1/models;\n"
            "Anthropic's POST /v1/messages and /v1/messages/count_tokens;\n"
            "llama.cpp's POST /tokenize, /detokenize, /apply-template and GET /props;\n"
            "GET /health, GET /metrics (Prometheus), GET / (a chat page).  Prints\n"
            "'listening on http://HOST:PORT' when ready; SIGINT or SIGTERM ends it (exit 0).\n\n"
            "  -m, --model FILE        GGUF model\n"
            "  --host ADDR             numeric address to listen on (default 127.0.0.1)\n"
            "  --port N                port (default 8080; 0 picks a free one, printed)\n"
            "  --parallel N            sequences decoded together, each with its own cache (default 4)\n"
            "  --queue N               requests that may wait for a sequence before 503 (default 64)\n"
            "  -c, --ctx-size N        positions each sequence's cache may hold (default: the model's\n"
            "                          training context, at most 4096); caches grow only as used\n"
            "  --chunk N               most prompt tokens evaluated per step, all sequences together (default 128)\n"
            "  -t, --threads N         threads (default: this machine's cores, at most 8)\n"
            "  --kv-type T             K/V cache storage: f16 (default), f32 or q8_0\n"
            "  --chat-template NAME    a template llama.cpp names (%s),\n"
            "                          or a Jinja template's text (default: the file's\n"
            "                          tokenizer.chat_template, rendered as Hugging Face does; ChatML when\n"
            "                          the file has none)\n"
            "  --chat-template-file F  a Jinja chat template file instead (not with --chat-template)\n"
            "  --api-key KEY           require 'Authorization: Bearer KEY' (or Anthropic's 'x-api-key: KEY')\n"
            "                          on every route but /, /health and /metrics\n"
            "  --max-body BYTES        largest request body (default 8388608)\n"
            "  --timeout SECONDS       time a client has to send a request's head, and again its body;\n"
            "                          a slower one gets a 408 and is closed (default 15)\n"
            "  --keepalive SECONDS     a stream silent this long (its prompt still being read, or queued:\n"
            "                          it starts then) gets a ping: an SSE comment, or Anthropic's ping\n"
            "                          event; 0: none, and a queued stream waits for its sequence (default 15)\n"
            "  --max-per-client N      requests one client address may have answered at once (more get a\n"
            "                          503), and connections it may hold half-sent (a new one drops the\n"
            "                          oldest) (default 64)\n"
            "  --reasoning-budget N    reasoning tokens a chat answer may spend before offkv ends its\n"
            "                          reasoning with the template's markup (</think>, gpt-oss's switch to\n"
            "                          its final channel); -1: no limit (default); a request's\n"
            "                          thinking_budget_tokens (or Anthropic's budget_tokens) wins\n"
            "  --reasoning-budget-message TEXT\n"
            "                          text written before that markup, as the model's own (e.g. \" Time to\n"
            "                          answer.\"); a request's thinking_budget_message wins (default: none)\n"
            "  --sliding-window N      give every layer of a llama model a window of N positions\n"
            "  --quiet                 no line on stderr per answer (by default one for every generation,\n"
            "                          its tokens and times, and one for every error answer, each with\n"
            "                          the client's address; other answers, /health's too, are not logged)\n"
            "  -h, --help              this help\n",
            srv_template_names());
}

int cmd_serve(int argc, char **argv) {
    const char *cmd = "serve", *v;
    srv_config cfg = {
        .host = "127.0.0.1",
        .port = 8080,
        .max_body = 8u << 20,
        .timeout = 15,
        .max_per_client = 64,
        .keepalive = 15,
        .reasoning_budget = -1,
        .sched = {.n_parallel = 4, .n_queue = 64, .capacity = 0, .chunk = 128, .n_threads = cli_default_threads(),
                  .kv_type = "f16"},
    };
    int32_t port = 8080, window = 0, max_body = 8 << 20, timeout = 15;
    float keepalive = 15;
    int kv = 0;
    cli_seen seen = {0};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (cli_is(a, "-h", "--help")) {
            usage(stdout);
            return CLI_OK;
        }
        if (!cli_once(&seen, cmd, a)) return CLI_USAGE;
        if (cli_is(a, "--quiet", NULL)) {
            cfg.quiet = true;
            continue;
        }
        if (!(cli_is(a, "-m", "--model") || cli_is(a, "--host", "--port") || cli_is(a, "--parallel", "--queue") ||
              cli_is(a, "-c", "--ctx-size") || cli_is(a, "--chunk", "--kv-type") || cli_is(a, "-t", "--threads") ||
              cli_is(a, "--chat-template", "--api-key") || cli_is(a, "--max-body", "--sliding-window") ||
              cli_is(a, "--timeout", "--max-per-client") || cli_is(a, "--keepalive", NULL) ||
              cli_is(a, "--chat-template-file", "--reasoning-budget") || cli_is(a, "--reasoning-budget-message", NULL)))
            return cli_unknown(cmd, a);
        if (!(v = cli_value(cmd, argc, argv, &i))) return CLI_USAGE;
        bool ok = true;
        if (cli_is(a, "-m", "--model")) cfg.model_path = v;
        else if (cli_is(a, "--host", NULL)) cfg.host = v;
        else if (cli_is(a, "--port", NULL)) ok = cli_int(cmd, a, v, 0, 65535, &port);
        else if (cli_is(a, "--parallel", NULL)) ok = cli_int(cmd, a, v, 1, 64, &cfg.sched.n_parallel);
        else if (cli_is(a, "--queue", NULL)) ok = cli_int(cmd, a, v, 0, 100000, &cfg.sched.n_queue);
        else if (cli_is(a, "-c", "--ctx-size")) ok = cli_int(cmd, a, v, 1, 1 << 24, &cfg.sched.capacity);
        else if (cli_is(a, "--chunk", NULL)) ok = cli_int(cmd, a, v, 1, 1 << 16, &cfg.sched.chunk);
        else if (cli_is(a, "--kv-type", NULL)) ok = cli_choice(cmd, a, v, cli_kv_types, &kv);
        else if (cli_is(a, "-t", "--threads")) ok = cli_int(cmd, a, v, 1, 1024, &cfg.sched.n_threads);
        else if (cli_is(a, "--chat-template", NULL)) {
            cfg.chat_template = v;
            if (!srv_template_builtin(v) && !strstr(v, "{%") && !strstr(v, "{{")) {
                cli_error(cmd, "bad value '%s' for --chat-template: expected one of %s, or a Jinja template's text", v,
                          srv_template_names());
                ok = false;
            }
        } else if (cli_is(a, "--chat-template-file", NULL)) cfg.chat_template_file = v;
        else if (cli_is(a, "--api-key", NULL)) {
            cfg.api_key = v;
            if (!*v) {
                cli_error(cmd, "bad value '' for --api-key: an empty key would let anyone in");
                ok = false;
            }
        } else if (cli_is(a, "--max-body", NULL)) ok = cli_int(cmd, a, v, 64, 1 << 30, &max_body);
        else if (cli_is(a, "--timeout", NULL)) ok = cli_int(cmd, a, v, 1, 3600, &timeout);
        else if (cli_is(a, "--max-per-client", NULL)) ok = cli_int(cmd, a, v, 1, 1024, &cfg.max_per_client);
        else if (cli_is(a, "--reasoning-budget", NULL)) ok = cli_int(cmd, a, v, -1, 1 << 30, &cfg.reasoning_budget);
        else if (cli_is(a, "--reasoning-budget-message", NULL)) {
            cfg.reasoning_budget_message = v;
            if (strlen(v) > SRV_MAX_THINK_MESSAGE) {
                cli_error(cmd, "bad value for --reasoning-budget-message: %zu bytes, more than %d", strlen(v),
                          (int)SRV_MAX_THINK_MESSAGE);
                ok = false;
            }
        }
        else if (cli_is(a, "--keepalive", NULL)) {
            ok = cli_float(cmd, a, v, 0, 3600, &keepalive);
            cfg.keepalive = keepalive;
        }
        else ok = cli_int(cmd, a, v, 1, 1 << 24, &window);
        if (!ok) return CLI_USAGE;
    }
    if (!cfg.model_path) {
        cli_error(cmd, "-m MODEL is required (see offkv serve --help)");
        return CLI_USAGE;
    }
    if (cfg.chat_template && cfg.chat_template_file) {
        cli_error(cmd, "--chat-template and --chat-template-file are two ways to give the template: give one");
        return CLI_USAGE;
    }
    if (!cli_model_file_ok(cmd, cfg.model_path)) return CLI_FAIL;
    cfg.port = port;
    cfg.max_body = (size_t)max_body;
    cfg.timeout = timeout;
    cfg.sched.kv_type = cli_kv_types[kv];
    char wbuf[16], tbuf[16];
    snprintf(wbuf, sizeof wbuf, "%d", (int)window);
    snprintf(tbuf, sizeof tbuf, "%d", (int)cfg.sched.n_threads);
    const char *options[] = {"n_threads", tbuf, "sliding_window", wbuf, NULL};
    if (window <= 0) options[2] = NULL;
    cfg.model_options = options;
    cfg.load_progress = cli_load_progress();
    cfg.load_progress_user = (void *)"serve";
    /* Every connection the server holds is a file descriptor (up to 1024
     * waiting for their heads, as many answered): the soft limit (often
     * 1024) goes up to the hard one. */
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
    return srv_run(&cfg) == 0 ? CLI_OK : CLI_FAIL;
}
