/* offkv chat: a conversation on the command line, in the model's own chat
 * template.  Each line of standard input is a user message; the answer
 * streams to standard output.  Every turn renders the whole conversation,
 * as a server does, but the cache keeps what the last turn evaluated: the
 * new prompt's tokens that equal the cache's are not evaluated again (the
 * cache is rewound to where they part, at the latest the end of the last
 * answer, whose tokens the template may spell otherwise). */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "offkv/cache.h"
#include "offkv/chat.h"
#include "offkv/gguf.h"
#include "offkv/outfile.h"
#include "offkv/prompt_cache.h"
#include "offkv/sampler.h"
#include "offkv/tokenizer.h"

static void usage(FILE *f) {
    fprintf(f,
            "usage: offkv chat -m MODEL [flags]\n"
            "Talks with the model in its chat template: each line of standard input is your message,\n"
            "the answer streams to standard output (a line ending in '\\' goes on on the next line).\n"
            "The conversation stays in the cache: a turn evaluates only what its prompt adds.  When it\n"
            "outgrows the context (-c), the model no longer sees its oldest turns (a system message stays):\n"
            "they are left out until the prompt takes half the context, so the next turns evaluate the\n"
            "whole prompt once and then reuse the cache again.\n"
            "Lines '/clear' (forget the conversation; -s stays) and '/exit' are commands; the end of input\n"
            "ends.\n"
            "Ctrl-C while the model answers ends the answer (kept in the conversation); while it reads a\n"
            "long prompt, it stops there (the message is dropped; what was evaluated stays in the cache).\n\n"
            "  -m, --model FILE          GGUF model\n"
            "  --chat-template-file FILE a Jinja chat template (default: the model's tokenizer.chat_template)\n"
            "  -s, --system TEXT         a system message before the conversation\n"
            "  --kwargs JSON             further template variables, e.g. '{\"enable_thinking\": false}'\n"
            "  --history FILE            the conversation goes on from FILE (a JSON array of messages) and\n"
            "                            is saved there after every turn (a new FILE: a new conversation)\n"
            "  --prompt-cache FILE       the cache's sequence is read from FILE (when it exists) and saved\n"
            "                            there after every turn, so a conversation that goes on in another\n"
            "                            run (--history) evaluates only what is new (FILE must be from this\n"
            "                            model, -c and --kv-type)\n"
            "  -n, --n-predict N         tokens of one answer at most (default 2048)\n"
            "  --temp T                  temperature; 0 = greedy (default 0.8)\n"
            "  --top-k K                 keep the K most likely tokens; 0 = all (default 40)\n"
            "  --top-p P                 nucleus sampling threshold in (0, 1] (default 0.95)\n"
            "  --seed S                  sampling seed (default: from the clock)\n"
            "  -c, --ctx-size N          positions of the conversation (default: the model's training\n"
            "                            context, at most 4096)\n"
            "  -t, --threads N           threads (default: the online cores, at most 8)\n"
            "  --kv-type TYPE            K/V storage: f16 (default), f32 or q8_0\n");
}

/* The conversation: its messages' JSON texts joined by commas, where each
 * starts, and which are the user's and the system's.  What the model sees
 * of it may start later (convo_window): a conversation that outgrows the
 * context loses its oldest turns there, not in the history. */
enum { MSG_OTHER, MSG_USER, MSG_SYSTEM };
typedef struct convo {
    char *json;
    size_t len;
    int n_msgs, cap_msgs;
    size_t *starts; /* where message i's text starts in json */
    char *roles;    /* MSG_* */
} convo;

/* Notes that a message of role starts at offset at; false on memory. */
static bool convo_note(convo *c, size_t at, int role) {
    if (c->n_msgs == c->cap_msgs) {
        const int n = c->cap_msgs ? 2 * c->cap_msgs : 16;
        size_t *st = realloc(c->starts, (size_t)n * sizeof *st);
        if (!st) return false;
        c->starts = st;
        char *r = realloc(c->roles, (size_t)n);
        if (!r) return false;
        c->roles = r;
        c->cap_msgs = n;
    }
    c->starts[c->n_msgs] = at;
    c->roles[c->n_msgs++] = (char)role;
    return true;
}

static int role_of(const char *role) {
    return strcmp(role, "user") == 0 ? MSG_USER : strcmp(role, "system") == 0 ? MSG_SYSTEM : MSG_OTHER;
}

/* Appends {"role": role, "content": content[, "reasoning_content": r]}. */
static bool convo_add(convo *c, const char *role, const char *content, const char *reasoning) {
    char *buf = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&buf, &n);
    if (!f) return false;
    fputs(c->n_msgs ? "," : "", f);
    fprintf(f, "{\"role\":\"%s\",\"content\":", role);
    cli_json_string(f, content, strlen(content));
    if (reasoning) {
        fputs(",\"reasoning_content\":", f);
        cli_json_string(f, reasoning, strlen(reasoning));
    }
    fputc('}', f);
    if (fclose(f) != 0) {
        free(buf);
        return false;
    }
    char *grown = realloc(c->json, c->len + n + 1);
    if (!grown || !convo_note(c, c->len + (c->n_msgs ? 1 : 0), role_of(role))) {
        if (grown) c->json = grown;
        free(buf);
        return false;
    }
    memcpy(grown + c->len, buf, n);
    c->json = grown;
    c->len += n;
    free(buf);
    return true;
}

/* The conversation as the model sees it, a JSON array (malloc'd; NULL when
 * out of memory): a system message that opens it, then the messages from
 * first on. */
static char *convo_window(const convo *c, int first) {
    const bool head = c->n_msgs && c->roles[0] == MSG_SYSTEM && first > 0;
    const size_t head_len = head ? (c->n_msgs > 1 ? c->starts[1] - 1 : c->len) : 0;
    const size_t from = first < c->n_msgs ? c->starts[first] : c->len;
    char *s = malloc(head_len + (c->len - from) + 4);
    if (!s) return NULL;
    size_t o = 0;
    s[o++] = '[';
    memcpy(s + o, c->json, head_len);
    o += head_len;
    if (head_len && from < c->len) s[o++] = ',';
    memcpy(s + o, c->json + from, c->len - from);
    o += c->len - from;
    s[o++] = ']';
    s[o] = '\0';
    return s;
}

static void convo_free(convo *c) {
    free(c->json);
    free(c->starts);
    free(c->roles);
}

/* Back to its first n_msgs messages (a turn that failed, /clear). */
static void convo_keep(convo *c, int n_msgs) {
    if (n_msgs < c->n_msgs) c->len = n_msgs ? c->starts[n_msgs] - 1 : 0;
    c->n_msgs = n_msgs;
}

/* The message at which the model's view may start when it drops the
 * oldest turn of the view that starts at first: the next user message
 * after first (a template may insist that turns alternate, so a view
 * starts at one), or -1 when none is left but the last. */
static int convo_next_turn(const convo *c, int first) {
    for (int i = first + 1; i < c->n_msgs; i++)
        if (c->roles[i] == MSG_USER) return i;
    return -1;
}

/* Notes where each message of a loaded conversation starts (json is the
 * inside of a JSON array a render has read, so valid JSON: its elements
 * part at the commas outside strings and brackets) and its role (as the
 * template engine reads it: a probe template prints them a line each).
 * False on memory. */
static bool convo_index(convo *c) {
    int depth = 0;
    bool in_str = false, esc = false;
    size_t at = 0;
    for (size_t i = 0; i <= c->len; i++) {
        const char ch = i < c->len ? c->json[i] : ',';
        if (in_str) {
            if (esc) esc = false;
            else if (ch == '\\') esc = true;
            else if (ch == '"') in_str = false;
        } else if (ch == '"') in_str = true;
        else if (ch == '[' || ch == '{') depth++;
        else if (ch == ']' || ch == '}') depth--;
        else if (ch == ',' && depth == 0) {
            if (!convo_note(c, at, MSG_OTHER)) return false;
            at = i + 1;
        }
    }
    static const char probe[] = "{% for m in messages %}{{ m.role }}\n{% endfor %}";
    okv_error err;
    okv_chat_template *t = okv_chat_template_parse(probe, sizeof probe - 1, &err);
    char *arr = t ? convo_window(c, 0) : NULL, *out = NULL;
    size_t n = 0;
    const okv_chat_input in = {.messages_json = arr};
    const bool ok = arr && okv_chat_template_render(t, &in, &out, &n, &err) == OKV_OK;
    free(arr);
    okv_chat_template_free(t);
    if (!ok) return false;
    /* A role the probe cannot tell (a line break in it) leaves all OTHER:
     * the turns are then never dropped. */
    int lines = 0;
    for (size_t i = 0; i < n; i++) lines += out[i] == '\n';
    if (lines == c->n_msgs) {
        char *line = out;
        for (int i = 0; i < c->n_msgs; i++) {
            char *nl = strchr(line, '\n');
            *nl = '\0';
            c->roles[i] = (char)role_of(line);
            line = nl + 1;
        }
    }
    free(out);
    return true;
}

/* --history: the conversation saved in path (a JSON array of messages, as
 * offkv template --messages and the server read them) goes on; a path that
 * does not exist starts a new one.  CLI_OK, or the exit code after saying
 * why not.  The template's render checks it. */
static int history_load(const char *cmd, const char *path, const okv_chat_template *tmpl, const char *kwargs,
                        convo *c) {
    struct stat sb;
    if (stat(path, &sb) != 0 && errno == ENOENT) return CLI_OK;
    size_t n = 0;
    char *text = cli_read_text(cmd, "--history", path, &n);
    if (!text) return CLI_FAIL;
    size_t a = 0, b = n;
    while (a < b && strchr(" \t\r\n", text[a])) a++;
    while (b > a && strchr(" \t\r\n", text[b - 1])) b--;
    if (b - a < 2 || text[a] != '[' || text[b - 1] != ']') {
        cli_error(cmd, "--history '%s': not a JSON array of messages ([{\"role\": ..., \"content\": ...}, ...])", path);
        free(text);
        return CLI_USAGE;
    }
    size_t ia = a + 1, ib = b - 1; /* the inside */
    while (ia < ib && strchr(" \t\r\n", text[ia])) ia++;
    while (ib > ia && strchr(" \t\r\n", text[ib - 1])) ib--;
    if (ib == ia) { /* [] */
        free(text);
        return CLI_OK;
    }
    okv_error err;
    char *out = NULL;
    size_t n_out = 0;
    text[b] = '\0';
    const okv_chat_input in = {.messages_json = text + a, .extra_json = kwargs};
    const okv_status st = okv_chat_template_render(tmpl, &in, &out, &n_out, &err);
    free(out);
    if (st != OKV_OK) {
        cli_error(cmd, "--history '%s': %s", path, st == OKV_ERR_NOMEM ? "out of memory" : err.message);
        free(text);
        return st == OKV_ERR_INVALID ? CLI_USAGE : CLI_FAIL;
    }
    memmove(text, text + ia, ib - ia);
    text[ib - ia] = '\0';
    c->json = text;
    c->len = ib - ia;
    if (!convo_index(c)) {
        cli_error(cmd, "--history '%s': out of memory", path);
        return CLI_FAIL;
    }
    return CLI_OK;
}

/* Writes the conversation to path, whole or not at all (okv_outfile);
 * false after saying why. */
static bool history_save(const char *cmd, const char *path, const convo *c) {
    okv_outfile o = {0};
    okv_error err;
    bool ok = okv_outfile_open(&o, path, &err) == OKV_OK;
    if (ok && (fputc('[', o.f) == EOF || fwrite(c->json ? c->json : "", 1, c->len, o.f) != c->len ||
               fputs("]\n", o.f) == EOF)) {
        snprintf(err.message, sizeof err.message, "writing '%s': %s", path, strerror(errno));
        okv_outfile_discard(&o);
        ok = false;
    } else if (ok) {
        ok = okv_outfile_commit(&o, &err) == OKV_OK;
    }
    if (!ok) cli_error(cmd, "--history: the conversation was not saved: %s", err.message);
    return ok;
}

/* The template: the file's, or the model's own; bos_token and eos_token are
 * the vocabulary's texts. */
static okv_chat_template *load_template(const char *cmd, const char *model, const char *tfile,
                                        const okv_tokenizer *tok) {
    okv_chat_template *t = cli_chat_template(cmd, model, tfile, "--chat-template-file");
    if (!t || !tfile) return t;
    size_t nb = 0, ne = 0;
    const int32_t bos = okv_tokenizer_bos(tok), eos = okv_tokenizer_eos(tok);
    const char *b = bos >= 0 ? okv_tokenizer_token_text(tok, bos, &nb) : NULL;
    const char *e = eos >= 0 ? okv_tokenizer_token_text(tok, eos, &ne) : NULL;
    char *bs = b ? strndup(b, nb) : NULL, *es = e ? strndup(e, ne) : NULL;
    okv_error err;
    const bool ok = (!b || bs) && (!e || es) && okv_chat_template_set_tokens(t, bs, es, &err) == OKV_OK;
    free(bs);
    free(es);
    if (!ok) {
        cli_error(cmd, "%s: %s", tfile, (b && !bs) || (e && !es) ? "out of memory" : err.message);
        okv_chat_template_free(t);
        return NULL;
    }
    return t;
}

/* The prompt of a turn: the conversation from message first on (see
 * convo_window) rendered and tokenized into *ids (malloc'd), *n_ids.
 * 0; 1 when the template failed (said; the conversation goes on without
 * the message); -1 when nothing can go on (said). */
static int turn_prompt(const char *cmd, const okv_chat_template *tmpl, const okv_tokenizer *tok, const convo *c,
                       int first, const char *kwargs, int32_t **ids, size_t *n_ids) {
    okv_error err;
    char *arr = convo_window(c, first), *prompt = NULL;
    size_t n_text = 0;
    const okv_chat_input in = {.messages_json = arr, .extra_json = kwargs, .add_generation_prompt = true};
    const okv_status st = arr ? okv_chat_template_render(tmpl, &in, &prompt, &n_text, &err) : OKV_ERR_NOMEM;
    free(arr);
    if (st != OKV_OK) {
        if (st == OKV_ERR_NOMEM) cli_error(cmd, "out of memory for the prompt");
        else cli_error(cmd, "the template failed: %s", err.message);
        return st == OKV_ERR_NOMEM ? -1 : 1;
    }
    /* The tokenizer adds BOS itself: a bos_token the template printed
     * first would make two (as llama.cpp and offkv serve strip it). */
    const char *text = prompt, *bos = okv_chat_template_bos(tmpl);
    const size_t nb = strlen(bos);
    if (nb && okv_tokenizer_adds_bos(tok) && strncmp(text, bos, nb) == 0) text += nb;
    *ids = cli_tokenize(cmd, tok, text, OKV_TOKENIZE_ADD_SPECIAL | OKV_TOKENIZE_PARSE_SPECIAL, n_ids);
    free(prompt);
    return *ids ? 0 : -1;
}

/* Reads one message: a line, and the lines after one ending in '\'.  NULL
 * at the end of input. */
static char *read_message(FILE *in, bool tty) {
    char *msg = NULL, *line = NULL;
    size_t len = 0, cap = 0;
    for (;;) {
        if (tty) fputs(msg ? "... " : "> ", stderr);
        ssize_t n = getline(&line, &cap, in);
        if (n < 0) break;
        while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r')) line[--n] = '\0';
        const bool more = n > 0 && line[n - 1] == '\\';
        if (more) line[--n] = '\0';
        char *grown = realloc(msg, len + (size_t)n + 2);
        if (!grown) break;
        msg = grown;
        if (len) msg[len++] = '\n';
        memcpy(msg + len, line, (size_t)n + 1);
        len += (size_t)n;
        if (!more) break;
    }
    free(line);
    return msg;
}

int cmd_chat(int argc, char **argv) {
    const char *cmd = "chat", *model = NULL, *tfile = NULL, *system_msg = NULL, *kwargs = NULL, *history = NULL, *pcache = NULL,
               *v;
    int32_t n_predict = 2048, threads = cli_default_threads(), ctx_size = 0;
    okv_sampler_params sp = cli_sampling_defaults();
    bool seed_given = false;
    int kv = 0;
    cli_seen seen = {0};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (cli_is(a, "-h", "--help")) { usage(stdout); return CLI_OK; }
        if (!cli_once(&seen, cmd, a)) return CLI_USAGE;
        if (!(cli_is(a, "-m", "--model") || cli_is(a, "--chat-template-file", NULL) || cli_is(a, "-s", "--system") ||
              cli_is(a, "--kwargs", NULL) || cli_is(a, "-n", "--n-predict") || cli_is_sampling_flag(a) ||
              cli_is(a, "-c", "--ctx-size") || cli_is(a, "-t", "--threads") ||
              cli_is(a, "--kv-type", NULL) || cli_is(a, "--history", NULL) || cli_is(a, "--prompt-cache", NULL)))
            return cli_unknown(cmd, a);
        if (!(v = cli_value(cmd, argc, argv, &i))) return CLI_USAGE;
        bool ok = true;
        if (cli_is(a, "-m", "--model")) model = v;
        else if (cli_is(a, "--chat-template-file", NULL)) tfile = v;
        else if (cli_is(a, "-s", "--system")) system_msg = v;
        else if (cli_is(a, "--kwargs", NULL)) kwargs = v;
        else if (cli_is(a, "--history", NULL)) history = v;
        else if (cli_is(a, "--prompt-cache", NULL)) pcache = v;
        else if (cli_is(a, "-n", "--n-predict")) ok = cli_int(cmd, a, v, 1, 1 << 24, &n_predict);
        else if (cli_is_sampling_flag(a)) ok = cli_sampling_flag(cmd, a, v, &sp, &seed_given);
        else if (cli_is(a, "-c", "--ctx-size")) ok = cli_int(cmd, a, v, 1, 1 << 30, &ctx_size);
        else if (cli_is(a, "-t", "--threads")) ok = cli_int(cmd, a, v, 1, 1024, &threads);
        else ok = cli_choice(cmd, a, v, cli_kv_types, &kv);
        if (!ok) return CLI_USAGE;
    }
    if (!model) {
        cli_error(cmd, "-m MODEL is required (see offkv chat --help)");
        return CLI_USAGE;
    }
    if (pcache && !cli_prompt_cache_path_ok(cmd, pcache)) return pcache[0] ? CLI_FAIL : CLI_USAGE;
    cli_sampling_seed(&sp, seed_given);

    int rc = CLI_FAIL;
    okv_chat_template *tmpl = NULL;
    okv_context *ctx = NULL;
    okv_sampler *smp = NULL;
    int32_t *hist = NULL, *pos = NULL;
    float *logits = NULL;
    char *answer = NULL, *msg = NULL;
    size_t answer_len = 0, answer_cap = 0;
    convo conv = {0};
    okv_model *m = cli_load_model(cmd, model, 0, threads, &rc);
    if (!m) goto done;
    rc = CLI_FAIL;
    const okv_tokenizer *tok = okv_model_tokenizer(m);
    if (!(tmpl = load_template(cmd, model, tfile, tok))) goto done;
    okv_error err = {0};
    /* A template rejects bad --kwargs only when rendering: try it now. */
    {
        char *out = NULL;
        size_t n_out = 0;
        const okv_chat_input in = {.messages_json = "[{\"role\":\"user\",\"content\":\"hi\"}]", .extra_json = kwargs,
                                   .add_generation_prompt = true};
        if (okv_chat_template_render(tmpl, &in, &out, &n_out, &err) != OKV_OK) {
            cli_error(cmd, "%s%s", kwargs && err.status == OKV_ERR_INVALID ? "--kwargs: " : "the template failed: ",
                      err.message);
            rc = kwargs && err.status == OKV_ERR_INVALID ? CLI_USAGE : CLI_FAIL;
            goto done;
        }
        free(out);
    }
    const okv_chat_syntax syn = okv_chat_template_syntax(tmpl, NULL);
    cli_ctx_opts o = {.n_threads = threads, .capacity = ctx_size, .kv_type = cli_kv_types[kv]};
    if (!(ctx = cli_context(cmd, m, &o))) goto done;
    okv_cache *cache = okv_context_cache(ctx);
    okv_cache_config cfg;
    okv_cache_get_config(cache, &cfg);
    const int32_t cap = cfg.capacity, step = okv_context_max_write(ctx);
    hist = malloc((size_t)cap * sizeof *hist);
    pos = malloc((size_t)(step > 1 ? step : 1) * sizeof *pos);
    logits = malloc((size_t)okv_model_n_vocab(m) * sizeof *logits);
    if (!hist || !pos || !logits) {
        cli_error(cmd, "out of memory for a context of %d positions", (int)cap);
        goto done;
    }
    if (!(smp = okv_sampler_create(&sp, okv_model_n_vocab(m), &err))) {
        cli_error(cmd, "sampler: %s", err.message);
        goto done;
    }
    /* A saved sequence: the turns reuse what of it their prompts share. */
    const uint64_t fingerprint = pcache ? okv_model_fingerprint(m) : 0;
    int32_t n_hist = 0; /* tokens in the cache: hist[0..n_hist) */
    if (pcache && access(pcache, F_OK) == 0) {
        if (okv_cache_load(cache, pcache, fingerprint, hist, cap, &n_hist, &err) != OKV_OK) {
            cli_error(cmd, "--prompt-cache: %s", err.message);
            goto done;
        }
        fprintf(stderr, "offkv chat: prompt cache '%s': %d tokens\n", pcache, (int)n_hist);
    }
    /* The system message starts a conversation; a saved one goes on. */
    if (history && (rc = history_load(cmd, history, tmpl, kwargs, &conv)) != CLI_OK) goto done;
    rc = CLI_FAIL;
    if (conv.n_msgs && system_msg) {
        cli_error(cmd, "--history '%s' holds a conversation already: -s starts a new one (give another file)", history);
        rc = CLI_USAGE;
        goto done;
    }
    if (conv.n_msgs) fprintf(stderr, "offkv chat: the conversation in '%s' goes on\n", history);
    else if (system_msg && !convo_add(&conv, "system", system_msg, NULL)) goto nomem;
    /* The model sees the conversation from message `first` on (after a
     * system message that opens it); a turn needs room for its prompt and
     * reserve tokens of answer. */
    int first = 0;
    const int32_t reserve = n_predict < cap / 4 ? n_predict : cap / 4;
    const bool tty = isatty(STDIN_FILENO);
    for (int turn = 1; (msg = read_message(stdin, tty)); free(msg), msg = NULL) {
        if (!msg[0]) continue;
        if (strcmp(msg, "/exit") == 0) break;
        if (strcmp(msg, "/clear") == 0) {
            convo_keep(&conv, system_msg ? 1 : 0); /* the -s message stays */
            first = 0;
            fprintf(stderr, "offkv chat: the conversation is cleared\n");
            if (history) history_save(cmd, history, &conv);
            continue;
        }
        const int keep_msgs = conv.n_msgs;
        if (!convo_add(&conv, "user", msg, NULL)) goto nomem;
        int32_t *ids = NULL;
        size_t n_ids = 0;
        int view = first, next;
        int st = turn_prompt(cmd, tmpl, tok, &conv, view, kwargs, &ids, &n_ids);
        /* A conversation that outgrew the context leaves its oldest turns
         * out of the model's view, down to half the context, so that the
         * turns after reuse the cache for a while again (the view's new
         * start is evaluated anew); the conversation keeps them. */
        if (st == 0 && n_ids + (size_t)reserve > (size_t)cap)
            while (st == 0 && n_ids > (size_t)cap / 2 && (next = convo_next_turn(&conv, view)) >= 0) {
                free(ids);
                ids = NULL;
                view = next;
                st = turn_prompt(cmd, tmpl, tok, &conv, view, kwargs, &ids, &n_ids);
            }
        if (st < 0) goto done;
        if (st == 0 && n_ids >= (size_t)cap)
            cli_error(cmd, "the prompt has %zu tokens (%syour message and the template's markup), more than the "
                           "context's %d positions leave for an answer (-c)",
                      n_ids, conv.roles[0] == MSG_SYSTEM ? "the system message, " : "", (int)cap);
        if (st != 0 || n_ids >= (size_t)cap) {
            free(ids);
            convo_keep(&conv, keep_msgs);
            continue;
        }
        if (view != first) {
            const int head = conv.roles[0] == MSG_SYSTEM;
            fprintf(stderr,
                    "offkv chat: the conversation outgrew the context (%d positions): the model no longer sees its "
                    "first %d messages%s\n",
                    (int)cap, view - head, history ? " (the history keeps them)" : "");
            first = view;
        }
        /* What the cache holds already, up to one token short of the
         * prompt (its logits are needed). */
        int32_t same = 0;
        while (same < n_hist && same + 1 < (int32_t)n_ids && hist[same] == ids[same]) same++;
        if (same < n_hist && !okv_cache_can_rewind(cache, same)) same = 0;
        if ((same < n_hist && okv_cache_rewind(cache, same, &err) != OKV_OK)) {
            cli_error(cmd, "rewinding the cache to %d: %s", (int)same, err.message);
            free(ids);
            goto done;
        }
        memcpy(hist, ids, n_ids * sizeof *ids);
        free(ids);
        n_hist = same;
        /* Ctrl-C from here on ends the prompt's evaluation or the answer. */
        struct sigaction old;
        cli_sigint_catch(false, &old);
        const double t0 = cli_now();
        const int32_t got = cli_prefill(cmd, ctx, hist, same, (int32_t)n_ids, step, pos, logits, &cli_interrupted);
        if (got < 0) {
            cli_sigint_release(&old);
            goto done;
        }
        n_hist = got;
        if (got < (int32_t)n_ids) {
            cli_sigint_release(&old);
            convo_keep(&conv, keep_msgs);
            fprintf(stderr,
                    "offkv chat: interrupted while reading the prompt (%d of %d tokens evaluated, kept in the cache): "
                    "the message is dropped\n",
                    (int)(got - same), (int)(n_ids - (size_t)same));
            if (pcache) cli_prompt_cache_save(cmd, cache, pcache, fingerprint, hist, n_hist);
            continue;
        }
        const int32_t n_prompt = n_hist;
        const double t_prompt = cli_now() - t0;

        /* The answer, streamed; its tokens stay in the cache. */
        answer_len = 0;
        if (!answer && !(answer = malloc(answer_cap = 256))) goto nomem_sig;
        okv_detok_stream us = {0};
        const char *stop = "n reached";
        int32_t n_gen = 0;
        const double t1 = cli_now();
        bool failed = false;
        while (n_gen < n_predict) {
            if (cli_interrupted) {
                stop = "interrupted";
                break;
            }
            const int32_t id = okv_sampler_sample(smp, logits);
            if (id < 0) {
                cli_error(cmd, "the model's logits at position %d hold NaN", (int)n_hist);
                failed = true;
                break;
            }
            if (okv_tokenizer_is_eog(tok, id)) {
                stop = "end of generation";
                break;
            }
            n_gen++;
            /* The answer's text for the conversation, control tokens as
             * their text (the template's markup, reasoning tags). */
            size_t pn = 0;
            okv_status ps = okv_tokenizer_token_to_piece(tok, id, 1, answer + answer_len, answer_cap - answer_len - 1,
                                                         &pn, &err);
            if (ps != OKV_OK && pn >= answer_cap - answer_len) { /* too small: pn is the size needed */
                const size_t c2 = 2 * (answer_len + pn + 1);
                char *grown = realloc(answer, c2);
                if (!grown) goto nomem_sig;
                answer = grown;
                answer_cap = c2;
                ps = okv_tokenizer_token_to_piece(tok, id, 1, answer + answer_len, answer_cap - answer_len - 1, &pn,
                                                  &err);
            }
            if (ps != OKV_OK) {
                cli_error(cmd, "token %d: %s", (int)id, err.message);
                failed = true;
                break;
            }
            answer_len += pn;
            if (!cli_emit(cmd, tok, &us, id)) {
                failed = true;
                break;
            }
            if (n_gen == n_predict) break;
            if (n_hist >= cap) {
                stop = "context full";
                break;
            }
            pos[0] = n_hist;
            if (okv_context_eval_last(ctx, &id, pos, 1, logits, &err) != OKV_OK) {
                cli_error(cmd, "eval at position %d: %s", (int)n_hist, err.message);
                failed = true;
                break;
            }
            hist[n_hist++] = id;
        }
        cli_sigint_release(&old);
        if (failed) goto done;
        const double t_gen = cli_now() - t1;
        char tail[8];
        if (!cli_put_text(cmd, tail, okv_detok_stream_finish(&us, tail)) || !cli_put_text(cmd, "\n", 1)) goto done;
        answer[answer_len] = '\0';
        /* Into the conversation: the content, and the reasoning apart
         * where the template reads it so (it drops it from old turns). */
        okv_chat_msg parsed = {0};
        const bool split = syn.think_tags &&
                           okv_chat_parse(&syn, answer, answer_len, false, &parsed, &err) == OKV_OK && parsed.content;
        const bool added = convo_add(&conv, "assistant", split ? parsed.content : answer,
                                     split ? parsed.reasoning_content : NULL);
        okv_chat_msg_free(&parsed);
        if (!added) goto nomem;
        if (history) history_save(cmd, history, &conv);
        if (pcache) cli_prompt_cache_save(cmd, cache, pcache, fingerprint, hist, n_hist);
        fprintf(stderr,
                "offkv chat: turn %d: prompt %d tokens (%d from the cache, %d evaluated in %.2f s), answer %d tokens "
                "(%.1f tokens/s), stopped: %s\n",
                turn, (int)n_prompt, (int)same, (int)(n_prompt - same), t_prompt, (int)n_gen,
                t_gen > 0 ? n_gen / t_gen : 0.0, stop);
        turn++;
        continue;
    nomem_sig:
        cli_sigint_release(&old);
        goto nomem;
    }
    rc = CLI_OK;
    goto done;
nomem:
    cli_error(cmd, "out of memory");
    rc = CLI_FAIL;
done:
    free(msg);
    free(answer);
    convo_free(&conv);
    free(hist);
    free(pos);
    free(logits);
    okv_sampler_free(smp);
    okv_context_free(ctx);
    okv_chat_template_free(tmpl);
    okv_model_free(m);
    return rc;
}
