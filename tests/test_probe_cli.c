/* Regression tests for what the hostile-user probe found in the offkv
 * program:
 *   - a failed write removed the -o path, even when it was a device or a
 *     symlink, and a killed or failing synth left a truncated file under
 *     the name (files are now written beside the name and renamed);
 *   - output lost to /dev/full or a closed stdout ended in exit 0;
 *   - synth began writing models far larger than the disk;
 *   - streamed text showed broken characters;
 *   - --sliding-window on a gemma3 model exited 1 rather than the usage 2;
 *   - -t above the core count slowed decode 100x without a word. */
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli_run.h"
#include "golden.h"
#include "offkv/offkv.h"

enum { OUT_FILE, OUT_FULL, OUT_CLOSED };

/* Runs offkv (NULL-terminated args) with stdout to a file, /dev/full or
 * closed, and an optional file size limit (0: none; SIGXFSZ ignored when
 * ignore_xfsz, so writes past it fail with EFBIG instead of killing). */
static int run_with(int out_mode, long fsize_limit, bool ignore_xfsz, const char *first, ...) {
    const char *argv[64];
    int n = 0;
    argv[n++] = cli_bin;
    va_list ap;
    va_start(ap, first);
    for (const char *a = first; a && n < 63; a = va_arg(ap, const char *)) argv[n++] = a;
    va_end(ap);
    argv[n] = NULL;
    char o[4200], e[4200];
    cli_path(o, sizeof o, "out.txt");
    cli_path(e, sizeof e, "err.txt");
    pid_t pid = fork();
    if (pid == 0) {
        int fe = open(e, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        dup2(fe, 2);
        if (out_mode == OUT_FILE) dup2(open(o, O_WRONLY | O_CREAT | O_TRUNC, 0644), 1);
        else if (out_mode == OUT_FULL) dup2(open("/dev/full", O_WRONLY), 1);
        else close(1);
        if (fsize_limit > 0) {
            struct rlimit rl = {(rlim_t)fsize_limit, (rlim_t)fsize_limit};
            setrlimit(RLIMIT_FSIZE, &rl);
        }
        signal(SIGXFSZ, ignore_xfsz ? SIG_IGN : SIG_DFL);
        execv(cli_bin, (char *const *)argv);
        _exit(127);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    cli_slurp(e, cli_err, sizeof cli_err);
    if (out_mode == OUT_FILE) cli_slurp(o, cli_out, sizeof cli_out);
    else cli_out[0] = '\0';
    return WIFEXITED(status) ? WEXITSTATUS(status) : CLI_SIGNAL;
}

static bool has_content(const char *path, const char *want) {
    char buf[256];
    cli_slurp(path, buf, sizeof buf);
    return strcmp(buf, want) == 0;
}

static void write_text(const char *path, const char *text) {
    FILE *f = fopen(path, "wb");
    if (f) {
        fputs(text, f);
        fclose(f);
    }
}

/* Files in the scratch folder whose name holds ".offkv-tmp." (removed
 * too when remove_them). */
static int temp_files_(bool remove_them) {
    DIR *d = opendir(cli_dir);
    int n = 0;
    for (struct dirent *e; d && (e = readdir(d));) {
        if (!strstr(e->d_name, ".offkv-tmp.")) continue;
        n++;
        char p[sizeof cli_dir + 512];
        snprintf(p, sizeof p, "%s/%.500s", cli_dir, e->d_name);
        if (remove_them) remove(p);
    }
    if (d) closedir(d);
    return n;
}
static int temp_files(void) { return temp_files_(false); }

/* synth of the default shape writes ~200 KB: a 64 KiB file size limit makes
 * its write fail half-way. */
static void failed_writes_lose_nothing(const char *model) {
    char keep[4200], link[4200], dev[4200], out[4200];
    cli_path(keep, sizeof keep, "keep.gguf");
    cli_path(link, sizeof link, "link.gguf");
    cli_path(dev, sizeof dev, "full-device");
    cli_path(out, sizeof out, "new.gguf");

    /* A regular file whose rewrite fails keeps its old contents. */
    write_text(keep, "precious");
    int rc = run_with(OUT_FILE, 64 << 10, true, "synth", "--seed", "3", "-o", keep, NULL);
    CHECK(rc == 1, "synth with writes failing: exit %d, want 1: %.300s", rc, cli_err);
    CHECK(has_content(keep, "precious"), "a failed synth changed the file it was to replace");
    CHECK(temp_files() == 0, "a failed synth left %d temporary files", temp_files());
    CHECK(strstr(cli_err, keep) && !strstr(strstr(cli_err, keep) + strlen(keep), keep),
          "the error names the file once: %.300s", cli_err);

    /* Through a symlink: the link stays a link, its target keeps its contents. */
    remove(link);
    CHECK(symlink("keep.gguf", link) == 0, "symlink");
    rc = run_with(OUT_FILE, 64 << 10, true, "synth", "--seed", "3", "-o", link, NULL);
    struct stat st;
    CHECK(rc == 1 && lstat(link, &st) == 0 && S_ISLNK(st.st_mode), "the symlink survives a failed synth (rc %d)", rc);
    CHECK(has_content(keep, "precious"), "a failed synth through a symlink changed its target");
    rc = run_with(OUT_FILE, 64 << 10, true, "logits", "-m", model, "--tokens", "1,2,3", "-o", link, NULL);
    CHECK(rc == 0, "logits through a symlink: %.300s", cli_err);
    CHECK(lstat(link, &st) == 0 && S_ISLNK(st.st_mode), "writing through a symlink keeps the link");
    CHECK(stat(keep, &st) == 0 && st.st_size == 3 * 512 * 4, "the link's target got the logits (%lld bytes)",
          (long long)st.st_size);

    /* Killed mid-write (SIGXFSZ not ignored): the name still holds the old file. */
    write_text(keep, "precious");
    rc = run_with(OUT_FILE, 64 << 10, false, "synth", "--seed", "3", "-o", keep, NULL);
    CHECK(rc == CLI_SIGNAL, "synth killed by SIGXFSZ (rc %d)", rc);
    CHECK(has_content(keep, "precious"), "a killed synth left a truncated file under the name");
    temp_files_(true); /* a killed process cannot clean up its temporary file */

    /* A new name: nothing is left behind when the write fails. */
    remove(out);
    rc = run_with(OUT_FILE, 64 << 10, true, "synth", "--seed", "3", "-o", out, NULL);
    CHECK(rc == 1 && access(out, F_OK) != 0, "a failed synth to a new name leaves no file (rc %d)", rc);

    /* A device that fails every write (/dev/full's numbers, made here so
     * nothing real is at risk) is written through and never removed. */
    remove(dev);
    if (mknod(dev, S_IFCHR | 0666, makedev(1, 7)) == 0) {
        rc = run_with(OUT_FILE, 0, false, "synth", "--seed", "3", "-o", dev, NULL);
        CHECK(rc == 1 && strstr(cli_err, "No space"), "synth to a full device fails saying so (rc %d): %.300s", rc,
              cli_err);
        CHECK(lstat(dev, &st) == 0 && S_ISCHR(st.st_mode), "synth removed the device it failed to write");
        rc = run_with(OUT_FILE, 0, false, "logits", "-m", model, "--tokens", "1,2,3", "-o", dev, NULL);
        CHECK(rc == 1, "logits to a full device fails (rc %d)", rc);
        CHECK(lstat(dev, &st) == 0 && S_ISCHR(st.st_mode), "logits removed the device it failed to write");
        remove(dev);
    } else {
        printf("skipped the device checks: mknod needs root (%s)\n", strerror(errno));
    }

    /* /dev/stdout as the output: written through, the logits land in stdout. */
    rc = run_with(OUT_FILE, 0, false, "logits", "-m", model, "--tokens", "1,2", "-o", "/dev/stdout", NULL);
    char o[4200];
    cli_path(o, sizeof o, "out.txt");
    CHECK(rc == 0 && stat(o, &st) == 0 && st.st_size == 2 * 512 * 4, "logits -o /dev/stdout (rc %d, %lld bytes)", rc,
          (long long)st.st_size);
    remove(keep);
    remove(link);
    remove(out);
}

/* A model whose file is rewritten by synth while loaded keeps working: the
 * new file is renamed over the name, the mapped old one stays intact. */
static void rewrite_while_mapped(void) {
    char path[4200];
    cli_path(path, sizeof path, "mapped.gguf");
    int rc = cli_run(60, "synth", "--seed", "5", "-o", path, NULL);
    CHECK(rc == 0, "synth: %.300s", cli_err);
    okv_error err;
    okv_model *m = okv_model_load(path, NULL, &err);
    okv_context *ctx = m ? okv_context_create(m, NULL, NULL, &err) : NULL;
    CHECK(ctx != NULL, "load: %s", err.message);
    if (!ctx) {
        okv_model_free(m);
        return;
    }
    rc = cli_run(60, "synth", "--seed", "6", "--n-layer", "1", "-o", path, NULL);
    CHECK(rc == 0, "synth over the loaded model: %.300s", cli_err);
    int32_t toks[2] = {1, 2}, pos[2] = {0, 1};
    float *logits = malloc(sizeof(float) * 2 * (size_t)okv_model_n_vocab(m));
    CHECK(okv_context_eval(ctx, toks, pos, 2, logits, &err) == OKV_OK, "eval after the rewrite: %s", err.message);
    free(logits);
    okv_context_free(ctx);
    okv_model_free(m);
    remove(path);
}

static void lost_output_fails(const char *model) {
    int rc = run_with(OUT_FULL, 0, false, "run", "-m", model, "-n", "8", "--temp", "0", NULL);
    CHECK(rc == 1 && strstr(cli_err, "standard output"), "run > /dev/full: exit %d, want 1 naming stdout: %.300s", rc,
          cli_err);
    rc = run_with(OUT_CLOSED, 0, false, "run", "-m", model, "-n", "8", "--temp", "0", NULL);
    CHECK(rc == 1 && strstr(cli_err, "standard output"), "run with stdout closed: exit %d, want 1: %.300s", rc, cli_err);
    rc = run_with(OUT_FULL, 0, false, "tokenize", "-m", model, "-p", "hello", NULL);
    CHECK(rc == 1 && strstr(cli_err, "standard output"), "tokenize > /dev/full: exit %d: %.300s", rc, cli_err);
    rc = run_with(OUT_FULL, 0, false, "--help", NULL);
    CHECK(rc == 1, "--help > /dev/full: exit %d", rc);
    /* bench stops at its table's head, not after every measurement (then
     * the message would come from offkv's exit, not from bench). */
    rc = run_with(OUT_FULL, 0, false, "bench", "-m", model, "-p", "64", "-n", "16", "-r", "50", NULL);
    CHECK(rc == 1 && strstr(cli_err, "offkv bench: error: writing standard output"),
          "bench > /dev/full: exit %d, want 1 from bench itself: %.300s", rc, cli_err);
    /* With stdout closed, the output file must not take its number and
     * receive the text. */
    char out[4200];
    cli_path(out, sizeof out, "closed.f32");
    rc = run_with(OUT_CLOSED, 0, false, "logits", "-m", model, "--tokens", "1,2", "-o", out, NULL);
    struct stat st;
    CHECK(rc == 0 && stat(out, &st) == 0 && st.st_size == 2 * 512 * 4, "logits with stdout closed: rc %d, %lld bytes",
          rc, (long long)st.st_size);
    remove(out);
}

static void synth_refuses_what_cannot_fit(void) {
    char out[4200];
    cli_path(out, sizeof out, "huge.gguf");
    /* ~2.4e14 bytes: no disk here has that; the file size limit guards the
     * disk should the check ever go missing. */
    int rc = run_with(OUT_FILE, 16 << 20, true, "synth", "--n-embd", "65536", "--n-layer", "1024", "--n-ff", "262144",
                      "--n-head", "64", "--n-head-kv", "64", "-o", out, NULL);
    CHECK(rc == 1 && strstr(cli_err, "would take") && strstr(cli_err, "free"),
          "a model larger than the disk is refused naming its size and the free space (rc %d): %.300s", rc, cli_err);
    CHECK(access(out, F_OK) != 0 && temp_files() == 0, "nothing written for a refused synth");
}

static bool valid_utf8(const unsigned char *s, size_t n) {
    for (size_t i = 0; i < n;) {
        uint32_t cp;
        size_t len = s[i] < 0x80 ? 1 : (s[i] >> 5) == 6 ? 2 : (s[i] >> 4) == 14 ? 3 : (s[i] >> 3) == 30 ? 4 : 0;
        if (!len || i + len > n) return false;
        cp = len == 1 ? s[i] : s[i] & (0x7F >> len);
        for (size_t j = 1; j < len; j++) {
            if ((s[i + j] & 0xC0) != 0x80) return false;
            cp = cp << 6 | (s[i + j] & 0x3F);
        }
        static const uint32_t min_cp[5] = {0, 0, 0x80, 0x800, 0x10000};
        if (cp < min_cp[len] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
        i += len;
    }
    return true;
}

/* A random-weight model emits byte tokens in any order: the stream must
 * still be valid UTF-8 (checked here by decoding code points, independently
 * of the stream's own byte-range tables). */
static void streamed_text_is_utf8(void) {
    char path[4200];
    cli_path(path, sizeof path, "utf8.gguf");
    int rc = cli_run(60, "synth", "--seed", "1", "-o", path, NULL);
    CHECK(rc == 0, "synth: %.300s", cli_err);
    int bad_seeds = 0;
    for (int seed = 1; seed <= 6; seed++) {
        char s[16];
        snprintf(s, sizeof s, "%d", seed);
        rc = cli_run(60, "run", "-m", path, "-n", "64", "--seed", s, "--no-display-prompt", NULL);
        CHECK(rc == 0, "run: %.300s", cli_err);
        bad_seeds += !valid_utf8((const unsigned char *)cli_out, strlen(cli_out));
    }
    CHECK(bad_seeds == 0, "%d of 6 runs printed invalid UTF-8", bad_seeds);
    remove(path);
}

static void usage_codes_and_warnings(const char *shared, const char *model) {
    char gemma[1024];
    snprintf(gemma, sizeof gemma, "%s/models/tiny-gemma3.gguf", shared);
    int rc = cli_run(60, "run", "-m", gemma, "--sliding-window", "4", "-n", "1", NULL);
    CHECK(rc == 2 && strstr(cli_err, "--sliding-window"), "--sliding-window on gemma3: exit %d, want 2: %.300s", rc,
          cli_err);
    rc = cli_run(60, "logits", "-m", gemma, "--sliding-window", "4", "--tokens", "1", "-o", "/dev/null", NULL);
    CHECK(rc == 2, "logits --sliding-window on gemma3: exit %d, want 2", rc);
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    char t[32];
    snprintf(t, sizeof t, "%ld", cores + 1);
    rc = cli_run(60, "run", "-m", model, "-n", "2", "-t", t, NULL);
    CHECK(rc == 0 && strstr(cli_err, "warning") && strstr(cli_err, "cores"), "-t %s on %ld cores warns: %.300s", t,
          cores, cli_err);
    snprintf(t, sizeof t, "%ld", cores);
    rc = cli_run(60, "run", "-m", model, "-n", "2", "-t", t, NULL);
    CHECK(rc == 0 && !strstr(cli_err, "warning"), "-t %s on %ld cores does not warn: %.300s", t, cores, cli_err);
}

int main(void) {
    const char *shared = check_shared_dir();
    if (!shared) { printf("skipped: ../shared not found\n"); return CHECK_SKIP; }
    if (!cli_init("test-probe-cli")) return CHECK_SKIP;
    char model[1024];
    snprintf(model, sizeof model, "%s/models/stories260K.gguf", shared);
    failed_writes_lose_nothing(model);
    rewrite_while_mapped();
    lost_output_fails(model);
    synth_refuses_what_cannot_fit();
    streamed_text_is_utf8();
    usage_codes_and_warnings(shared, model);
    return cli_done();
}
