/* The offkv program's status lines on a terminal: the load's progress
 * ("reading" and "repacking" the weights), run's progress through a
 * prompt of several chunks and bench's through its depth fill, each
 * rewritten in place ("\r...\033[K") and cleared when done, and none of it
 * when stderr is a file (a log).  stderr is a pseudo-terminal here; stdout
 * stays a file, so the generated text is checked to hold no status bytes
 * either. */
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "cli_run.h"

static char tty_err[1 << 17];
static size_t tty_err_len;

/* Runs offkv with args, stderr on a new pseudo-terminal (read into tty_err
 * as it comes, so the child never blocks on a full terminal), stdout to
 * out.txt (cli_out): the exit code, CLI_SIGNAL, CLI_TIMEOUT or
 * CLI_NOSPAWN. */
static int run_tty(double limit_s, const char *const *args) {
    const char *argv[64];
    int n = 0;
    argv[n++] = cli_bin;
    for (int i = 0; args[i] && n < 63; i++) argv[n++] = args[i];
    argv[n] = NULL;
    tty_err_len = 0;
    tty_err[0] = '\0';
    int master = posix_openpt(O_RDWR | O_NOCTTY);
    if (master < 0 || grantpt(master) != 0 || unlockpt(master) != 0) {
        if (master >= 0) close(master);
        return CLI_NOSPAWN;
    }
    const char *slave = ptsname(master);
    char o[4200];
    cli_path(o, sizeof o, "out.txt");
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, o, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_addopen(&fa, 2, slave ? slave : "/nonexistent", O_RDWR | O_NOCTTY, 0);
    posix_spawn_file_actions_addclose(&fa, master);
    pid_t pid;
    int rc = posix_spawn(&pid, cli_bin, &fa, NULL, (char *const *)argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    if (rc != 0) {
        close(master);
        return CLI_NOSPAWN;
    }
    int status = 0;
    bool exited = false, timed_out = false;
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    while (!exited) {
        struct pollfd p = {master, POLLIN, 0};
        if (poll(&p, 1, 10) > 0) {
            /* EIO: the terminal's last user (the child) closed it. */
            ssize_t got = read(master, tty_err + tty_err_len, sizeof tty_err - 1 - tty_err_len);
            if (got > 0) tty_err_len += (size_t)got;
            if (got <= 0 || tty_err_len == sizeof tty_err - 1) {
                struct timespec nap = {0, 5 * 1000 * 1000};
                nanosleep(&nap, NULL);
            }
        }
        exited = waitpid(pid, &status, WNOHANG) == pid;
        clock_gettime(CLOCK_MONOTONIC, &t);
        if (!exited && (double)(t.tv_sec - t0.tv_sec) + 1e-9 * (double)(t.tv_nsec - t0.tv_nsec) > limit_s) {
            kill(pid, SIGKILL);
            waitpid(pid, &status, 0);
            timed_out = exited = true;
        }
    }
    /* What the child wrote just before it exited. */
    for (ssize_t got; tty_err_len < sizeof tty_err - 1 &&
                      (got = read(master, tty_err + tty_err_len, sizeof tty_err - 1 - tty_err_len)) > 0;)
        tty_err_len += (size_t)got;
    tty_err[tty_err_len] = '\0';
    close(master);
    cli_out_len = cli_slurp(o, cli_out, sizeof cli_out);
    if (timed_out) return CLI_TIMEOUT;
    return WIFEXITED(status) ? WEXITSTATUS(status) : CLI_SIGNAL;
}

/* Whether s holds a status line: "\r" + text starting with `what` + "\033[K". */
static bool has_status(const char *s, const char *what) {
    for (const char *p = s; (p = strstr(p, "\r")) != NULL; p++) {
        if (strncmp(p + 1, what, strlen(what)) != 0) continue;
        const char *end = strstr(p + 1, "\033[K");
        const char *nl = strchr(p + 1, '\n');
        if (end && (!nl || end < nl)) return true;
    }
    return false;
}

/* Whether the last status line in s is cleared ("\r\033[K") after it. */
static bool last_status_cleared(const char *s) {
    const char *last = NULL;
    for (const char *p = s; (p = strstr(p, "\033[K")) != NULL; p += 3) last = p;
    return last && last >= s + 1 && last[-1] == '\r';
}

static void test_load_progress(const char *model) {
    /* run, one token: a command that loads the weights (tokenize reads the
     * vocabulary alone) */
    const char *args[] = {"run", "-m", model, "-p", "hello", "-n", "1", "--temp", "0", NULL};
    int rc = run_tty(60, args);
    CHECK(rc == 0, "run on a terminal: rc %d, stderr %s", rc, tty_err);
    CHECK(has_status(tty_err, "offkv run: reading the weights:"), "no reading status line: %s", tty_err);
    CHECK(has_status(tty_err, "offkv run: repacking the weights:"), "no repacking status line: %s", tty_err);
    CHECK(strstr(tty_err, "reading the weights: 100 %") != NULL, "reading never reached 100 %%: %s", tty_err);
    CHECK(strstr(tty_err, "repacking the weights: 100 %") != NULL, "repacking never reached 100 %%: %s", tty_err);
    /* reading comes before repacking */
    const char *rd = strstr(tty_err, "reading the weights"), *rp = strstr(tty_err, "repacking the weights");
    CHECK(rd && rp && rd < rp, "stages out of order: %s", tty_err);
    CHECK(last_status_cleared(tty_err), "the last status line is left on the terminal: %s", tty_err);
    CHECK(memchr(cli_out, '\r', cli_out_len) == NULL && memchr(cli_out, '\033', cli_out_len) == NULL,
          "status bytes on stdout: %s", cli_out);

    /* stderr a file: no status line at all */
    rc = cli_run(60, "run", "-m", model, "-p", "hello", "-n", "1", "--temp", "0", NULL);
    CHECK(rc == 0, "run to a file: rc %d, %s", rc, cli_err);
    CHECK(strchr(cli_err, '\r') == NULL && strchr(cli_err, '\033') == NULL, "status bytes in a log: %s", cli_err);
}

static void test_prompt_progress(const char *model) {
    const char *prompt = "Once upon a time there was a little girl who lived in a village near the forest.";
    const char *args[] = {"run", "-m", model, "-p", prompt, "-n", "2", "--temp", "0", "--chunk", "8", NULL};
    int rc = run_tty(60, args);
    CHECK(rc == 0, "run on a terminal: rc %d, stderr %s", rc, tty_err);
    /* the run's own summary line tells how many prompt tokens there were */
    const char *sum = strstr(tty_err, "offkv run: ");
    int n_prompt = 0;
    for (const char *p = tty_err; (p = strstr(p, "offkv run: ")) != NULL; p++)
        if (sscanf(p, "offkv run: %d prompt tokens", &n_prompt) == 1) break;
    CHECK(sum && n_prompt > 16, "no prompt token count, or too few for three chunks of 8 (%d): %s", n_prompt, tty_err);
    for (int done = 0; n_prompt > 16 && done < n_prompt; done += 8) {
        char want[96];
        snprintf(want, sizeof want, "offkv run: prompt: %d of %d tokens evaluated", done, n_prompt);
        CHECK(has_status(tty_err, want), "no status line \"%s\": %s", want, tty_err);
    }
    CHECK(last_status_cleared(tty_err), "the last status line is left on the terminal: %s", tty_err);
    CHECK(cli_out_len > strlen(prompt) && strncmp(cli_out, prompt, strlen(prompt)) == 0,
          "stdout does not start with the prompt: %s", cli_out);
    CHECK(memchr(cli_out, '\r', cli_out_len) == NULL && memchr(cli_out, '\033', cli_out_len) == NULL,
          "status bytes on stdout: %s", cli_out);

    /* one chunk: nothing to show */
    const char *one[] = {"run", "-m", model, "-p", prompt, "-n", "2", "--temp", "0", NULL};
    rc = run_tty(60, one);
    CHECK(rc == 0, "run on a terminal, one chunk: rc %d, stderr %s", rc, tty_err);
    CHECK(strstr(tty_err, "prompt: 0 of") == NULL, "a one-chunk prompt shows progress: %s", tty_err);

    rc = cli_run(60, "run", "-m", model, "-p", prompt, "-n", "2", "--temp", "0", "--chunk", "8", NULL);
    CHECK(rc == 0, "run to a file: rc %d, %s", rc, cli_err);
    CHECK(strchr(cli_err, '\r') == NULL && strchr(cli_err, '\033') == NULL, "status bytes in a log: %s", cli_err);
}

/* bench's depth fill, 512 tokens a call: a line per call on a terminal */
static void test_bench_fill(const char *model) {
    const char *args[] = {"bench", "-m", model, "-d", "1100", "-p", "8", "-n", "0", "-r", "1", NULL};
    int rc = run_tty(120, args);
    CHECK(rc == 0, "bench on a terminal: rc %d, stderr %s", rc, tty_err);
    for (int done = 0; done < 1100; done += 512) {
        char want[96];
        snprintf(want, sizeof want, "offkv bench: filling the cache: %d of 1100 tokens", done);
        CHECK(has_status(tty_err, want), "no status line \"%s\": %s", want, tty_err);
    }
    CHECK(last_status_cleared(tty_err), "the last status line is left on the terminal: %s", tty_err);
    CHECK(strstr(tty_err, "depth 1100 filled") != NULL, "no fill summary: %s", tty_err);
    rc = cli_run(120, "bench", "-m", model, "-d", "1100", "-p", "8", "-n", "0", "-r", "1", NULL);
    CHECK(rc == 0, "bench to a file: rc %d, %s", rc, cli_err);
    CHECK(strchr(cli_err, '\r') == NULL && strchr(cli_err, '\033') == NULL, "status bytes in a log: %s", cli_err);
}

/* Ctrl-C ends run's work where it is: during the prompt (its progress
 * on the terminal shows it has begun), run says how far it got, saves
 * --prompt-cache and exits 130, and the next run goes on from there, giving
 * what a run that was never stopped gives; during the generation, run
 * stops there, reports as usual and exits 130. */
static void test_run_interrupt(void) {
    const char *shared = check_shared_dir();
    if (!shared) {
        printf("skipped (Ctrl-C in offkv run): ../shared not found\n");
        return;
    }
    char model[4200], pcache[4200];
    snprintf(model, sizeof model, "%s/models/stories260K.gguf", shared);
    cli_path(pcache, sizeof pcache, "interrupted.seq");
    /* A prompt whose evaluation lasts long beside the test's reaction (0.6
     * s of 4000 tokens here; the sanitizers' build is some 40 times slower). */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
    enum { REPS = 250 };
#else
    enum { REPS = 1000 };
#endif
    static char prompt[REPS * 17 + 1];
    for (int i = 0; i < REPS; i++) memcpy(prompt + 17 * i, "Once upon a time ", 17);
    prompt[REPS * 17] = '\0';
    const char *args[] = {"run", "-m", model, "-p", prompt, "-n", "4", "--temp", "0", "-c", "8192", "-t", "1",
                          "--no-display-prompt", "--prompt-cache", pcache, NULL};
    cli_proc p;
    CHECK(cli_proc_start(&p, args), "spawn run");
    CHECK(cli_proc_wait_err(&p, "offkv run: prompt: "), "the prompt's progress shows: %s", p.err);
    kill(p.pid, SIGINT);
    int rc = cli_proc_finish(&p);
    int done = 0, total = 0, saved = -1;
    const char *at = strstr(p.err, "interrupted while evaluating the prompt: ");
    const char *sv = strstr(p.err, "interrupted.seq': saved ");
    CHECK(rc == 130 && at && sscanf(at, "interrupted while evaluating the prompt: %d of %d", &done, &total) == 2 &&
              done < total && sv && sscanf(sv, "interrupted.seq': saved %d tokens", &saved) == 1 && saved == done,
          "Ctrl-C in the prompt: exit %d (130), %d of %d evaluated, %d saved: %s", rc, done, total, saved, p.err);
    rc = cli_runv(120, args);
    char want_reuse[96];
    snprintf(want_reuse, sizeof want_reuse, "reused %d of %d prompt tokens", done, total);
    CHECK(rc == 0 && strstr(cli_err, want_reuse), "the next run goes on from the file (%s): exit %d, %s", want_reuse, rc,
          cli_err);
    static char resumed[sizeof cli_out];
    snprintf(resumed, sizeof resumed, "%s", cli_out);
    rc = cli_run(120, "run", "-m", model, "-p", prompt, "-n", "4", "--temp", "0", "-c", "8192", "-t", "1",
                 "--no-display-prompt", NULL);
    CHECK(rc == 0 && resumed[0] && strcmp(resumed, cli_out) == 0, "resumed: '%s', never stopped: '%s'", resumed, cli_out);

    /* During the generation: the text so far, the usual report, exit 130. */
    const char *gen[] = {"run", "-m", model, "-p", "Once upon a time", "-n", "16000000", "-c", "200000", "-t", "1",
                         "--seed", "1", NULL};
    CHECK(cli_proc_start(&p, gen), "spawn run");
    struct stat st = {0};
    for (int i = 0; i < 6000 && (stat(p.out, &st) != 0 || st.st_size <= 16); i++) cli_proc_drain(&p, 10);
    CHECK(st.st_size > 16, "the generation began");
    kill(p.pid, SIGINT);
    rc = cli_proc_finish(&p);
    CHECK(rc == 130 && strstr(p.err, "stopped: interrupted") && strstr(p.err, "offkv run: generation "),
          "Ctrl-C in the generation: exit %d (130): %s", rc, p.err);
}

int main(void) {
    if (!cli_init("test-cli-tty")) return CHECK_SKIP;
    int probe = posix_openpt(O_RDWR | O_NOCTTY);
    if (probe < 0) {
        printf("skipped: no pseudo-terminal (posix_openpt: %s)\n", strerror(errno));
        return CHECK_SKIP;
    }
    close(probe);
    char model[4200];
    cli_path(model, sizeof model, "model.gguf");
    /* q4_0 matrices of 256-wide rows: repacked sixteen rows at a time on
     * every ISA (64-wide ones would grow by their padding and stay as
     * they are), so the load has both stages */
    int rc = cli_run(60, "synth", "--type", "q4_0", "--n-embd", "256", "--n-ff", "512", "--seed", "3", "-o", model, NULL);
    CHECK(rc == 0, "synth: %s", cli_err);
    if (rc == 0) {
        test_load_progress(model);
        test_prompt_progress(model);
        test_bench_fill(model);
    }
    test_run_interrupt();
    return cli_done();
}
