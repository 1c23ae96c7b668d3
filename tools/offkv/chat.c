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
#include "offkv/sampler.h"
#include "offkv/tokenizer.h"

static void usage(FILE *f) {
    fprintf(f,
            "usage: offkv chat -m MODEL [flags]\n"
            "Talks with the model in its chat template: each line of standard input is your message,\n"
            "the answer streams to standard output (a line ending in '\\' goes on on the next line).\n"
            "The conversation stays in the cache: a turn evaluates only what its prompt adds.\n"
            "Lines '/clear' (forget the conversation; -s stays) and '/exit' are commands; the end of input\n"
            "ends.\n"
            "Ctrl-C while the model answers ends the answer (kept in the conversation).\n\n"
            "  -m, --model FILE          GGUF model\n"
            "  --chat-template-file FILE a Jinja chat template (default: the model's tokenizer.chat_template)\n"
            "  -s, --system TEXT         a system message before the conversation\n"
            "  --kwargs JSON             further template variables, e.g. '{\"enable_thinking\": false}'\n"
            "  --history FILE            the conversation goes on from FILE (a JSON array of messages) and\n"
            "                            is saved there after every turn (a new FILE: a new conversation)\n"
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

/* Ctrl-C during an answer ends the answer, not the program. */
static volatile sig_atomic_t interrupted;
static void on_sigint(int sig) {
    (void)sig;
    interrupted = 1;
}

/* The conversation as a JSON array, kept as text: each message appended. */
typedef struct convo {
    char *json;
    size_t len;
    int n_msgs;
} convo;

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
    char *grown = realloc(c->json, c->len + n + 2);
    if (!grown) {
        free(buf);
        return false;
    }
    memcpy(grown + c->len, buf, n);
    c->json = grown;
    c->len += n;
    c->n_msgs++;
    free(buf);
    return true;
}

/* The messages so far as a JSON array (malloc'd), NULL when out of memory. */
static char *convo_array(const convo *c) {
    char *s = malloc(c->len + 3);
    if (!s) return NULL;
    s[0] = '[';
    if (c->len) memcpy(s + 1, c->json, c->len);
    s[c->len + 1] = ']';
    s[c->len + 2] = '\0';
    return s;
}

/* Back to an earlier length (a turn that failed, /clear). */
static void convo_keep(convo *c, size_t len, int n_msgs) {
    c->len = len;
    c->n_msgs = n_msgs;
}

/* --history: the conversation saved in path (a JSON array of messages, as
 * offkv template --messages and the server read them) goes on; a path that
 * does not exist starts a new one.  CLI_OK, or the exit code after saying
 * why not. */
static int history_load(const char *cmd, const char *path, convo *c) {
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
    a++, b--;
    while (a < b && strchr(" \t\r\n", text[a])) a++;
    while (b > a && strchr(" \t\r\n", text[b - 1])) b--;
    if (b > a) {
        memmove(text, text + a, b - a);
        text[b - a] = '\0';
        c->json = text;
        c->len = b - a;
        c->n_msgs = 1; /* some: the next message needs a comma */
    } else {
        free(text);
    }
    return CLI_OK;
}

/* Writes the conversation to path, whole or not at all (a new file renamed
 * over the old); false after saying why. */
static bool history_save(const char *cmd, const char *path, const convo *c) {
    char tmp[4200];
    if (snprintf(tmp, sizeof tmp, "%s.tmp", path) >= (int)sizeof tmp) {
        cli_error(cmd, "--history: the path is longer than %zu bytes", sizeof tmp - 5);
        return false;
    }
    FILE *f = fopen(tmp, "w");
    bool ok = f && fputc('[', f) != EOF && fwrite(c->json ? c->json : "", 1, c->len, f) == c->len &&
              fputs("]\n", f) != EOF && fflush(f) == 0 && fsync(fileno(f)) == 0;
    const int e = errno;
    if (f && fclose(f) != 0) ok = false;
    if (ok && rename(tmp, path) != 0) ok = false;
    if (!ok) {
        cli_error(cmd, "--history '%s': the conversation was not saved: %s", path, strerror(ok ? errno : e));
        remove(tmp);
    }
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
    const char *cmd = "chat", *model = NULL, *tfile = NULL, *system_msg = NULL, *kwargs = NULL, *history = NULL, *v;
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
              cli_is(a, "--kv-type", NULL) || cli_is(a, "--history", NULL)))
            return cli_unknown(cmd, a);
        if (!(v = cli_value(cmd, argc, argv, &i))) return CLI_USAGE;
        bool ok = true;
        if (cli_is(a, "-m", "--model")) model = v;
        else if (cli_is(a, "--chat-template-file", NULL)) tfile = v;
        else if (cli_is(a, "-s", "--system")) system_msg = v;
        else if (cli_is(a, "--kwargs", NULL)) kwargs = v;
        else if (cli_is(a, "--history", NULL)) history = v;
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
    /* The system message starts a conversation; a saved one goes on. */
    convo base = {0};
    if (system_msg && !convo_add(&base, "system", system_msg, NULL)) goto nomem;
    const size_t base_len = base.len;
    const int base_msgs = base.n_msgs;
    if (history && (rc = history_load(cmd, history, &conv)) != CLI_OK) {
        free(base.json);
        goto done;
    }
    rc = CLI_FAIL;
    if (conv.n_msgs) {
        if (system_msg) {
            cli_error(cmd, "--history '%s' holds a conversation already: -s starts a new one (give another file)",
                      history);
            free(base.json);
            rc = CLI_USAGE;
            goto done;
        }
        char *arr = convo_array(&conv), *out = NULL;
        size_t n_out = 0;
        const okv_chat_input in = {.messages_json = arr, .extra_json = kwargs};
        const okv_status st = arr ? okv_chat_template_render(tmpl, &in, &out, &n_out, &err) : OKV_ERR_NOMEM;
        free(arr);
        free(out);
        if (st != OKV_OK) {
            cli_error(cmd, "--history '%s': %s", history, st == OKV_ERR_NOMEM ? "out of memory" : err.message);
            free(base.json);
            rc = st == OKV_ERR_INVALID ? CLI_USAGE : CLI_FAIL;
            goto done;
        }
        fprintf(stderr, "offkv chat: the conversation in '%s' goes on\n", history);
    } else {
        free(conv.json);
        conv = base;
        base.json = NULL;
    }
    free(base.json);
    int32_t n_hist = 0; /* tokens in the cache: hist[0..n_hist) */
    const bool tty = isatty(STDIN_FILENO);
    const char *bos_text = okv_chat_template_bos(tmpl);
    for (int turn = 1; (msg = read_message(stdin, tty)); free(msg), msg = NULL) {
        if (!msg[0]) continue;
        if (strcmp(msg, "/exit") == 0) break;
        if (strcmp(msg, "/clear") == 0) {
            /* the -s message (the start of conv when given) stays */
            convo_keep(&conv, system_msg ? base_len : 0, system_msg ? base_msgs : 0);
            fprintf(stderr, "offkv chat: the conversation is cleared\n");
            if (history) history_save(cmd, history, &conv);
            continue;
        }
        const size_t keep_len = conv.len;
        const int keep_msgs = conv.n_msgs;
        if (!convo_add(&conv, "user", msg, NULL)) goto nomem;
        char *arr = convo_array(&conv), *prompt = NULL;
        if (!arr) goto nomem;
        const okv_chat_input in = {.messages_json = arr, .extra_json = kwargs, .add_generation_prompt = true};
        size_t n_prompt_text = 0;
        okv_status st = okv_chat_template_render(tmpl, &in, &prompt, &n_prompt_text, &err);
        free(arr);
        if (st != OKV_OK) {
            cli_error(cmd, "the template failed: %s", err.message);
            convo_keep(&conv, keep_len, keep_msgs);
            continue;
        }
        /* The tokenizer adds BOS itself: a bos_token the template printed
         * first would make two (as llama.cpp and offkv serve strip it). */
        const char *text = prompt;
        const size_t nb = strlen(bos_text);
        if (nb && okv_tokenizer_adds_bos(tok) && strncmp(text, bos_text, nb) == 0) text += nb;
        size_t n_ids = 0;
        const unsigned flags = OKV_TOKENIZE_ADD_SPECIAL | OKV_TOKENIZE_PARSE_SPECIAL;
        okv_tokenizer_encode(tok, text, strlen(text), flags, NULL, 0, &n_ids, &err);
        int32_t *ids = NULL;
        if (n_ids >= (size_t)cap) {
            cli_error(cmd, "the conversation has %zu tokens, more than the context's %d positions leave for an "
                           "answer (-c): /clear starts again",
                      n_ids, (int)cap);
            free(prompt);
            convo_keep(&conv, keep_len, keep_msgs);
            continue;
        }
        if (!(ids = malloc((n_ids ? n_ids : 1) * sizeof *ids)) ||
            okv_tokenizer_encode(tok, text, strlen(text), flags, ids, n_ids, &n_ids, &err) != OKV_OK) {
            cli_error(cmd, "tokenizing the prompt: %s", ids ? err.message : "out of memory");
            free(ids);
            free(prompt);
            goto done;
        }
        free(prompt);
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
        n_hist = same;
        const double t0 = cli_now();
        if (!cli_prefill(cmd, ctx, ids, same, (int32_t)n_ids, step, pos, logits)) {
            free(ids);
            goto done;
        }
        free(ids);
        n_hist = (int32_t)n_ids;
        const int32_t n_prompt = n_hist;
        const double t_prompt = cli_now() - t0;

        /* The answer, streamed; its tokens stay in the cache. */
        answer_len = 0;
        if (!answer && !(answer = malloc(answer_cap = 256))) goto nomem;
        okv_detok_stream us = {0};
        const char *stop = "n reached";
        int32_t n_gen = 0;
        interrupted = 0;
        struct sigaction sa = {0}, old;
        sa.sa_handler = on_sigint;
        sigemptyset(&sa.sa_mask);
        sigaction(SIGINT, &sa, &old);
        const double t1 = cli_now();
        bool failed = false;
        while (n_gen < n_predict) {
            if (interrupted) {
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
        sigaction(SIGINT, &old, NULL);
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
        fprintf(stderr,
                "offkv chat: turn %d: prompt %d tokens (%d from the cache, %d evaluated in %.2f s), answer %d tokens "
                "(%.1f tokens/s), stopped: %s\n",
                turn, (int)n_prompt, (int)same, (int)(n_prompt - same), t_prompt, (int)n_gen,
                t_gen > 0 ? n_gen / t_gen : 0.0, stop);
        turn++;
        continue;
    nomem_sig:
        sigaction(SIGINT, &old, NULL);
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
    free(conv.json);
    free(hist);
    free(pos);
    free(logits);
    okv_sampler_free(smp);
    okv_context_free(ctx);
    okv_chat_template_free(tmpl);
    okv_model_free(m);
    return rc;
}
