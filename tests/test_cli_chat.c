/* offkv chat, run as a user runs it: each greedy answer checked against
 * offkv run's on the conversation rendered afresh (the library's render,
 * itself checked against jinja2 in test_chat_templates), so the cache's
 * reuse across turns, across runs (--history, --prompt-cache) and past the
 * context (the oldest turns left out) is seen to change nothing but the
 * work; and Ctrl-C, while the model answers and while it reads a prompt,
 * ends that and not the program. */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "cli_run.h"
#include "core/json.h"
#include "golden.h"
#include "offkv/chat.h"

/* offkv(args..., NULL): runs the program for at most two minutes. */
#define offkv(...) cli_run(120.0, __VA_ARGS__)

#define CHECK_ERR_HAS(needle) \
    CHECK(strstr(cli_err, (needle)) != NULL, "stderr lacks '%s': %s", (needle), cli_err)

/* s as a JSON string into b (quotes, backslashes, control bytes escaped). */
static void json_escape(const char *s, char *b, size_t cap) {
    size_t o = 0;
    b[o++] = '"';
    for (; *s && o + 8 < cap; s++) {
        const unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') o += (size_t)snprintf(b + o, cap - o, "\\%c", c);
        else if (c < 0x20) o += (size_t)snprintf(b + o, cap - o, "\\u%04x", c);
        else b[o++] = (char)c;
    }
    snprintf(b + o, cap - o, "\"");
}

/* The greedy answer offkv run gives to the prompt Qwen 2.5's template (the
 * library's render, checked against jinja2 elsewhere) makes of messages
 * (a JSON array), into out (its first line: the answer and run's newline
 * apart). */
static void run_reference(const char *model, const okv_chat_template *t, const char *messages, char *out, size_t cap) {
    okv_chat_input in = {.messages_json = messages, .add_generation_prompt = true};
    char *prompt = NULL;
    size_t n = 0;
    okv_error err;
    out[0] = '\0';
    CHECK(okv_chat_template_render(t, &in, &prompt, &n, &err) == OKV_OK, "render %s: %s", messages, err.message);
    if (!prompt) return;
    CHECK(offkv("run", "-m", model, "-p", prompt, "--temp", "0", "-n", "10", "-c", "512", "-t", "1",
                "--no-display-prompt", NULL) == 0,
          "run on the rendered conversation: %s", cli_err);
    const char *nl = strchr(cli_out, '\n');
    const size_t len = nl ? (size_t)(nl - cli_out) : strlen(cli_out);
    CHECK(len < cap, "run's answer: %zu bytes", len);
    memcpy(out, cli_out, len < cap ? len : cap - 1);
    out[len < cap ? len : cap - 1] = '\0';
    free(prompt);
}

static bool write_text(const char *path, const char *text) { return cli_write_file(path, text, strlen(text)); }

/* The first n lines of out into got (an answer a line). */
static void split_answers(const char *out, char got[][512], int n) {
    const char *p = out;
    for (int i = 0; i < n && p && *p; i++) {
        const char *nl = strchr(p, '\n');
        const size_t len = nl ? (size_t)(nl - p) : strlen(p);
        memcpy(got[i], p, len < 511 ? len : 511);
        got[i][len < 511 ? len : 511] = '\0';
        p = nl ? nl + 1 : NULL;
    }
}

/* A template file parsed (CHECKed; NULL on failure). */
static okv_chat_template *parse_template(const char *path) {
    size_t n = 0;
    char *text = golden_read(path, &n);
    okv_error err;
    okv_chat_template *t = text ? okv_chat_template_parse(text, n, &err) : NULL;
    free(text);
    CHECK(t != NULL, "parse %s", path);
    return t;
}

/* offkv chat: a line a message, a line ending in '\' going on, /clear and
 * /exit; each greedy answer equals offkv run's on the whole conversation
 * rendered afresh (the cache's reuse across turns changes nothing), the
 * second turn evaluates only what its prompt adds, and after /clear a new
 * first turn answers as a fresh run (the cache keeps only the prefix the
 * prompts share: Qwen's system text). */
static void test_chat(const char *model, const char *tpath) {
    const char *shared = check_shared_dir();
    char in[4200];
    cli_path(in, sizeof in, "chat-in.txt");
    CHECK(write_text(in, "Once upon a time\nThe cat\\\nsat\n\n/clear\nThe dog ran\n/exit\nnever read\n"), "%s", in);
    cli_stdin = in;
    int rc = offkv("chat", "-m", model, "--chat-template-file", tpath, "--temp", "0", "-n", "10", "-c", "512", "-t", "1",
                   NULL);
    cli_stdin = NULL;
    CHECK(rc == 0, "chat: exit %d (%s)", rc, cli_err);
    static char chat_err[sizeof cli_err];
    memcpy(chat_err, cli_err, sizeof chat_err); /* the references' runs take cli_err */
    char got[3][512] = {{0}};
    split_answers(cli_out, got, 3);
    int lines = 0;
    for (const char *q = cli_out; *q; q++) lines += *q == '\n';
    CHECK(lines == 3, "chat: three answers, a line each, nothing after /exit: '%s'", cli_out);

    okv_chat_template *t = parse_template(tpath);
    if (!t) return;
    char want[512], a1[600], msgs[2048];
    run_reference(model, t, "[{\"role\": \"user\", \"content\": \"Once upon a time\"}]", want, sizeof want);
    CHECK(strcmp(got[0], want) == 0 && got[0][0], "chat turn 1: '%s', run's '%s'", got[0], want);
    json_escape(got[0], a1, sizeof a1);
    snprintf(msgs, sizeof msgs,
             "[{\"role\": \"user\", \"content\": \"Once upon a time\"}, {\"role\": \"assistant\", \"content\": %s}, "
             "{\"role\": \"user\", \"content\": \"The cat\\nsat\"}]",
             a1);
    run_reference(model, t, msgs, want, sizeof want);
    CHECK(strcmp(got[1], want) == 0 && got[1][0], "chat turn 2: '%s', run's '%s'", got[1], want);
    run_reference(model, t, "[{\"role\": \"user\", \"content\": \"The dog ran\"}]", want, sizeof want);
    CHECK(strcmp(got[2], want) == 0 && got[2][0], "after /clear, a first turn: '%s', run's '%s'", got[2], want);
    okv_chat_template_free(t);
    const char *t2 = strstr(chat_err, "turn 2: prompt ");
    int n_prompt = 0, cached = 0;
    CHECK(t2 && sscanf(t2, "turn 2: prompt %d tokens (%d from the cache", &n_prompt, &cached) == 2 && cached > 100 &&
              cached < n_prompt,
          "turn 2 evaluates only what it adds: %s", t2 ? t2 : chat_err);
    CHECK(strstr(chat_err, "the conversation is cleared"), "/clear says so: %s", chat_err);

    /* --history: the same two turns in two runs, the conversation saved
     * between them, byte for byte the messages a client would send. */
    char hist[4200], in1[4200], in2[4200];
    cli_path(hist, sizeof hist, "chat-history.json");
    cli_path(in1, sizeof in1, "chat-in1.txt");
    cli_path(in2, sizeof in2, "chat-in2.txt");
    CHECK(write_text(in1, "Once upon a time\n") && write_text(in2, "The cat\\\nsat\n"), "chat inputs");
    for (int run = 0; run < 2; run++) {
        cli_stdin = run ? in2 : in1;
        rc = offkv("chat", "-m", model, "--chat-template-file", tpath, "--temp", "0", "-n", "10", "-c", "512", "-t", "1",
                   "--history", hist, NULL);
        cli_stdin = NULL;
        const size_t len = strlen(got[run]);
        CHECK(rc == 0 && strncmp(cli_out, got[run], len) == 0 && strcmp(cli_out + len, "\n") == 0,
              "--history, run %d: exit %d, '%s', want the one session's turn %d '%s' (%s)", run + 1, rc, cli_out, run + 1,
              got[run], cli_err);
        CHECK(!run || strstr(cli_err, "the conversation in '"), "--history, run 2 goes on: %s", cli_err);
    }
    char a2[600], saved[4096], want_saved[4096];
    json_escape(got[1], a2, sizeof a2);
    snprintf(want_saved, sizeof want_saved,
             "[{\"role\":\"user\",\"content\":\"Once upon a time\"},{\"role\":\"assistant\",\"content\":%s},"
             "{\"role\":\"user\",\"content\":\"The cat\\nsat\"},{\"role\":\"assistant\",\"content\":%s}]\n",
             a1, a2);
    cli_slurp(hist, saved, sizeof saved);
    CHECK(strcmp(saved, want_saved) == 0, "--history file: '%s', want '%s'", saved, want_saved);

    /* A history that cannot be written: said after the turn, which goes on. */
    cli_stdin = in1;
    rc = offkv("chat", "-m", model, "--chat-template-file", tpath, "--temp", "0", "-n", "10", "-c", "512", "-t", "1",
               "--history", "/nonexistent-dir/h.json", NULL);
    cli_stdin = NULL;
    CHECK(rc == 0 && strncmp(cli_out, got[0], strlen(got[0])) == 0 &&
              strstr(cli_err, "--history: the conversation was not saved: ") && strstr(cli_err, "/nonexistent-dir/h.json"),
          "an unwritable history: exit %d, %s", rc, cli_err);

    /* --prompt-cache beside --history: the same two runs give the same
     * answers, and the second reads what the first evaluated from the file
     * (its whole first turn) instead of evaluating it again. */
    char hist_pc[4200], pcache[4200];
    cli_path(hist_pc, sizeof hist_pc, "chat-history-pc.json");
    cli_path(pcache, sizeof pcache, "chat.seq");
    int first_prompt = 0;
    for (int run = 0; run < 2; run++) {
        cli_stdin = run ? in2 : in1;
        rc = offkv("chat", "-m", model, "--chat-template-file", tpath, "--temp", "0", "-n", "10", "-c", "512", "-t", "1",
                   "--history", hist_pc, "--prompt-cache", pcache, NULL);
        cli_stdin = NULL;
        const size_t len = strlen(got[run]);
        CHECK(rc == 0 && strncmp(cli_out, got[run], len) == 0 && strcmp(cli_out + len, "\n") == 0,
              "--prompt-cache, run %d: exit %d, '%s', want '%s' (%s)", run + 1, rc, cli_out, got[run], cli_err);
        const char *t1 = strstr(cli_err, "turn 1: prompt ");
        int n_prompt1 = 0, cached1 = -1;
        CHECK(t1 && sscanf(t1, "turn 1: prompt %d tokens (%d from the cache", &n_prompt1, &cached1) == 2,
              "--prompt-cache, run %d: %s", run + 1, cli_err);
        if (!run) first_prompt = n_prompt1;
        CHECK(run ? cached1 >= first_prompt + 9 : cached1 == 0,
              "--prompt-cache, run %d takes %d tokens from the cache (the first run's prompt: %d, and 9 of its answer)",
              run + 1, cached1, first_prompt);
    }
    CHECK(strstr(cli_err, "prompt cache '") && strstr(cli_err, "chat.seq': "), "run 2 reads the file: %s", cli_err);
    /* A file for another context, a damaged one, a folder, no path. */
    cli_stdin = in1;
    CHECK(offkv("chat", "-m", model, "--chat-template-file", tpath, "-c", "256", "-t", "1", "--prompt-cache", pcache,
                NULL) == 1 && strstr(cli_err, "--prompt-cache: ") && strstr(cli_err, "capacity 512"),
          "a file from -c 512 with -c 256: %s", cli_err);
    CHECK(write_text(pcache, "OFFKVSEQ not really"), "%s", pcache);
    CHECK(offkv("chat", "-m", model, "--chat-template-file", tpath, "-c", "512", "-t", "1", "--prompt-cache", pcache,
                NULL) == 1 && strstr(cli_err, "--prompt-cache: "),
          "a damaged file: %s", cli_err);
    CHECK(offkv("chat", "-m", model, "--chat-template-file", tpath, "--prompt-cache", cli_dir, NULL) == 1 &&
              strstr(cli_err, "not a regular file"),
          "a folder: %s", cli_err);
    CHECK(offkv("chat", "-m", model, "--chat-template-file", tpath, "--prompt-cache", "", NULL) == 2, "an empty path");
    cli_stdin = NULL;
    CHECK(write_text(hist, "[1]"), "%s", hist);
    cli_stdin = in1;
    CHECK(offkv("chat", "-m", model, "--chat-template-file", tpath, "-t", "1", "--history", hist, NULL) == 2,
          "a history of numbers: exit 2");
    CHECK_ERR_HAS("chat-history.json': messages[0]: expected an object");

    /* -s: the system message first, and still there after /clear. */
    char in3[4200], sys_got[2][512] = {{0}};
    cli_path(in3, sizeof in3, "chat-in3.txt");
    CHECK(write_text(in3, "Once upon a time\n/clear\nThe dog ran\n"), "%s", in3);
    cli_stdin = in3;
    rc = offkv("chat", "-m", model, "--chat-template-file", tpath, "-s", "Be brief.", "--temp", "0", "-n", "10", "-c", "512",
               "-t", "1", NULL);
    cli_stdin = NULL;
    split_answers(cli_out, sys_got, 2);
    CHECK(rc == 0, "chat -s: exit %d (%s)", rc, cli_err);
    okv_chat_template *tq = parse_template(tpath);
    if (tq) {
        run_reference(model, tq, "[{\"role\": \"system\", \"content\": \"Be brief.\"}, {\"role\": \"user\", \"content\": "
                                 "\"Once upon a time\"}]", want, sizeof want);
        CHECK(strcmp(sys_got[0], want) == 0 && want[0], "chat -s turn 1: '%s', run's '%s'", sys_got[0], want);
        run_reference(model, tq, "[{\"role\": \"system\", \"content\": \"Be brief.\"}, {\"role\": \"user\", \"content\": "
                                 "\"The dog ran\"}]", want, sizeof want);
        CHECK(strcmp(sys_got[1], want) == 0 && want[0], "chat -s after /clear: '%s', run's '%s'", sys_got[1], want);
        okv_chat_template_free(tq);
    }

    /* A template that prints bos_token first (Mistral Nemo's): the
     * tokenizer adds BOS itself, so chat strips the printed one, and its
     * answer is run's on the prompt rendered without it (a second BOS would
     * change the answer). */
    char mpath[4200];
    snprintf(mpath, sizeof mpath, "%s/templates/src/mistralai-Mistral-Nemo-Instruct-2407.jinja", shared);
    okv_chat_template *tm = parse_template(mpath);
    if (tm) {
        cli_stdin = in1;
        rc = offkv("chat", "-m", model, "--chat-template-file", mpath, "--temp", "0", "-n", "10", "-c", "512", "-t", "1",
                   NULL);
        cli_stdin = NULL;
        char bos_got[1][512] = {{0}};
        split_answers(cli_out, bos_got, 1);
        run_reference(model, tm, "[{\"role\": \"user\", \"content\": \"Once upon a time\"}]", want, sizeof want);
        CHECK(rc == 0 && strcmp(bos_got[0], want) == 0 && want[0], "chat, a template printing <s>: '%s', run's '%s'",
              bos_got[0], want);
        char *p1 = NULL;
        size_t np = 0;
        okv_error e1;
        okv_chat_input one = {.messages_json = "[{\"role\": \"user\", \"content\": \"x\"}]", .add_generation_prompt = true};
        CHECK(okv_chat_template_set_tokens(tm, "<s>", "</s>", &e1) == OKV_OK &&
                  okv_chat_template_render(tm, &one, &p1, &np, &e1) == OKV_OK && strncmp(p1, "<s>", 3) == 0,
              "the premise: Mistral Nemo's template prints bos_token first: '%s'", p1 ? p1 : e1.message);
        free(p1);
        okv_chat_template_free(tm);
    }

    /* A prompt longer than the context, with nothing to leave out: said,
     * and the next line is read. */
    cli_stdin = in1;
    rc = offkv("chat", "-m", model, "--chat-template-file", tpath, "-c", "64", "-t", "1", NULL);
    CHECK(rc == 0 && strstr(cli_err, "the template's markup), more than the context's 64 positions leave for an answer "
                                     "(-c)"),
          "a conversation past -c: exit %d, %s", rc, cli_err);
    /* -s with a file that holds a conversation: refused, not applied twice. */
    CHECK(write_text(hist, "[{\"role\": \"user\", \"content\": \"hi\"}]"), "%s", hist);
    CHECK(offkv("chat", "-m", model, "--chat-template-file", tpath, "-t", "1", "-s", "x", "--history", hist, NULL) == 2,
          "-s with a saved conversation: exit 2");
    CHECK_ERR_HAS("holds a conversation already: -s starts a new one");

    cli_stdin = in;
    CHECK(offkv("chat", "-m", model, "-t", "1", NULL) == 1, "a model without a template: exit 1");
    CHECK_ERR_HAS("has no chat template (tokenizer.chat_template): give one with --chat-template-file");
    CHECK(offkv("chat", "-m", model, "--chat-template-file", tpath, "--kwargs", "{bad", NULL) == 2, "bad --kwargs: exit 2");
    CHECK_ERR_HAS("--kwargs: ");
    CHECK(offkv("chat", "-m", model, "-n", "0", NULL) == 2, "-n 0: exit 2");
    cli_stdin = NULL;
}

/* Ctrl-C while chat answers ends the answer, not the program: SIGINT once
 * the answer has begun (a context long enough that it cannot end first),
 * then more input is read and /exit ends the program normally. */
static void test_chat_interrupt(const char *model, const char *tpath) {
    const char *args[] = {"chat", "-m", model, "--chat-template-file", tpath, "-n", "16000000", "-c", "200000",
                          "-t", "1", "--seed", "1", NULL};
    cli_proc p;
    CHECK(cli_proc_start(&p, args), "spawn chat");
    CHECK(cli_proc_write(&p, "Once upon a time\n"), "write a message");
    /* Wait for the answer's first bytes (at most 60 s), then Ctrl-C. */
    struct stat st = {0};
    for (int i = 0; i < 6000 && (stat(p.out, &st) != 0 || st.st_size == 0); i++) cli_proc_drain(&p, 10);
    CHECK(st.st_size > 0, "the answer began");
    kill(p.pid, SIGINT);
    CHECK(cli_proc_write(&p, "/exit\n"), "write /exit");
    const int rc = cli_proc_finish(&p);
    CHECK(rc == 0, "after Ctrl-C and /exit chat exits 0 (%d): %s", rc, p.err);
    CHECK(strstr(p.err, "stopped: interrupted"), "the answer says it was interrupted: %s", p.err);
}

/* Ctrl-C while chat reads a long prompt (its progress shown on the
 * terminal) stops there: the message is dropped, the program goes on, and
 * what was evaluated stays in the cache (the next turn, whose prompt shares
 * Qwen's system text with it, takes that from the cache). */
static void test_chat_interrupt_prompt(const char *model, const char *tpath) {
    const char *args[] = {"chat", "-m", model, "--chat-template-file", tpath, "-n", "4", "-c", "200000",
                          "-t", "1", "--temp", "0", NULL};
    cli_proc p;
    CHECK(cli_proc_start(&p, args), "spawn chat");
    static char long_msg[40000];
    size_t n = 0;
    while (n + 20 < sizeof long_msg) n += (size_t)snprintf(long_msg + n, sizeof long_msg - n, "Once upon a time ");
    snprintf(long_msg + n, sizeof long_msg - n, "\n");
    CHECK(cli_proc_write(&p, long_msg), "write a long message");
    CHECK(cli_proc_wait_err(&p, "offkv chat: prompt: "), "the prompt's progress shows: %s", p.err);
    kill(p.pid, SIGINT);
    CHECK(cli_proc_wait_err(&p, "interrupted while reading the prompt"), "Ctrl-C stops the prompt: %s", p.err);
    CHECK(cli_proc_write(&p, "The dog ran\n/exit\n"), "write another message");
    const int rc = cli_proc_finish(&p);
    CHECK(rc == 0, "after Ctrl-C in the prompt chat goes on and exits 0 (%d): %s", rc, p.err);
    const char *t1 = strstr(p.err, "turn 1: prompt ");
    int n_prompt = 0, cached = 0;
    CHECK(t1 && sscanf(t1, "turn 1: prompt %d tokens (%d from the cache", &n_prompt, &cached) == 2 && cached > 20,
          "the next turn reuses what the stopped prompt evaluated: %s", t1 ? t1 : p.err);
    CHECK(strstr(p.err, "turn 2:") == NULL, "the dropped message was no turn: %s", p.err);
}

/* The answer offkv run gives (greedy, -n n_predict, -c 200) to messages
 * rendered with a template whose file is tpath; NULL after a failed check. */
static char *run_answer(const char *model, const char *tpath, const char *messages, const char *n_predict) {
    okv_chat_template *t = parse_template(tpath);
    okv_chat_input in = {.messages_json = messages, .add_generation_prompt = true};
    char *prompt = NULL;
    size_t n = 0;
    okv_error err;
    const bool ok = t && okv_chat_template_render(t, &in, &prompt, &n, &err) == OKV_OK;
    CHECK(ok, "render %s: %s", messages, t ? err.message : "no template");
    okv_chat_template_free(t);
    if (!ok) return NULL;
    const int rc = offkv("run", "-m", model, "-p", prompt, "--temp", "0", "-n", n_predict, "-c", "200", "-t", "1",
                         "--no-display-prompt", NULL);
    free(prompt);
    CHECK(rc == 0, "run on the rendered conversation: %s", cli_err);
    return rc == 0 ? strdup(cli_out) : NULL;
}

/* messages[i] of a parsed conversation as compact JSON (malloc'd). */
static char *message_json(const okv_json *conv, size_t i) {
    okv_sbuf b = {0};
    okv_json_write(&b, conv->items[i]);
    return b.s;
}

/* A conversation that outgrows the context (-c 200, -s, five turns of 30
 * tokens): the model stops seeing its oldest turns (the system message
 * stays), and each answer is then run's on the conversation as the model
 * sees it: turn 3 on the system message and its own; turn 4 on those, turn
 * 3's answer (from the saved history, which keeps every message) and its
 * own.  Turn 4 reuses turn 3's cache. */
static void test_chat_window(const char *model) {
    char tpath[4200], in[4200], hist[4200];
    cli_path(tpath, sizeof tpath, "chatml.jinja");
    cli_path(in, sizeof in, "chat-window-in.txt");
    cli_path(hist, sizeof hist, "chat-window.json");
    CHECK(write_text(tpath, "{% for m in messages %}{{ '<|im_start|>' + m.role + '\\n' + m.content + '<|im_end|>\\n' }}"
                            "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}") &&
              write_text(in, "Once upon a time\nThe cat sat\nThe dog ran\nA bird flew\nThe sun rose\n"),
          "chat inputs");
    cli_stdin = in;
    int rc = offkv("chat", "-m", model, "--chat-template-file", tpath, "-s", "Be kind.", "--temp", "0", "-n", "30",
                   "-c", "200", "-t", "1", "--history", hist, NULL);
    cli_stdin = NULL;
    CHECK(rc == 0, "chat past its context: exit %d (%s)", rc, cli_err);
    static char chat_err[sizeof cli_err];
    memcpy(chat_err, cli_err, sizeof chat_err);
    CHECK(strstr(chat_err, "the conversation outgrew the context (200 positions): the model no longer sees its first 4 "
                           "messages (the history keeps them)"),
          "turn 3 leaves turns 1 and 2 out: %s", chat_err);
    const char *t4 = strstr(chat_err, "turn 4: prompt ");
    int n_prompt = 0, cached = 0;
    CHECK(t4 && sscanf(t4, "turn 4: prompt %d tokens (%d from the cache", &n_prompt, &cached) == 2 && cached > 50,
          "turn 4 reuses turn 3's cache: %s", t4 ? t4 : chat_err);
    size_t n = 0;
    char *text = golden_read(hist, &n);
    okv_error err;
    okv_json *conv = text ? okv_json_parse(text, n, &err) : NULL;
    free(text);
    CHECK(conv && conv->type == OKV_JSON_ARRAY && conv->n == 11, "the history keeps all 11 messages");
    if (!conv || conv->type != OKV_JSON_ARRAY || conv->n != 11) {
        okv_json_free(conv);
        return;
    }
    char *m[11];
    for (size_t i = 0; i < 11; i++) m[i] = message_json(conv, i);
    char msgs[8192];
    snprintf(msgs, sizeof msgs, "[%s,%s]", m[0], m[5]);
    char *want = run_answer(model, tpath, msgs, "30");
    const okv_json *a3 = okv_json_get(conv->items[6], "content");
    CHECK(want && a3 && strncmp(want, a3->str, a3->len) == 0 && strcmp(want + a3->len, "\n") == 0,
          "turn 3: '%s', run's on the system message and turn 3: '%s'", a3 ? a3->str : "?", want ? want : "?");
    free(want);
    snprintf(msgs, sizeof msgs, "[%s,%s,%s,%s]", m[0], m[5], m[6], m[7]);
    want = run_answer(model, tpath, msgs, "30");
    const okv_json *a4 = okv_json_get(conv->items[8], "content");
    CHECK(want && a4 && strncmp(want, a4->str, a4->len) == 0 && strcmp(want + a4->len, "\n") == 0,
          "turn 4: '%s', run's on the system message and turns 3 and 4: '%s'", a4 ? a4->str : "?", want ? want : "?");
    free(want);
    for (size_t i = 0; i < 11; i++) free(m[i]);
    okv_json_free(conv);
}

int main(void) {
    if (!cli_init("test-cli-chat")) return CHECK_SKIP;
    const char *shared = check_shared_dir();
    if (!shared) {
        printf("skipped: ../shared not found (the chat tests run stories260K)\n");
        cli_done();
        return CHECK_SKIP;
    }
    char model[4200], tpath[4200];
    snprintf(model, sizeof model, "%s/models/stories260K.gguf", shared);
    snprintf(tpath, sizeof tpath, "%s/templates/src/Qwen-Qwen2.5-7B-Instruct.jinja", shared);
    test_chat(model, tpath);
    test_chat_interrupt(model, tpath);
    test_chat_interrupt_prompt(model, tpath);
    test_chat_window(model);
    return cli_done();
}
