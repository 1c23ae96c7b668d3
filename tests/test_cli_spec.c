/* offkv run's --draft, --draft-n, --lookup and --prompt-cache, run as a
 * user runs them (posix_spawn of $OKV_BIN/offkv):
 *  - greedy text with a draft (the model itself, another model of the same
 *    vocabulary) or with --lookup is the text without, on every shared
 *    family, with rings wrapping (-c 256, --chunk 8, 80 tokens);
 *  - the stats line reports drafted, accepted and the acceptance rate;
 *  - a draft of another vocabulary is refused naming the token;
 *  - --prompt-cache: the first run writes the file, a second run with a
 *    longer prompt reuses the common prefix and says how many tokens, and
 *    its text is the text without a cache; a damaged file is refused (exit
 *    1, the file left as it was); flag misuse exits 2; a path that cannot
 *    work (a FIFO, a missing folder, "") is refused before anything is
 *    generated, without blocking. */

#include "check.h"
#include "cli_run.h"

/* offkv(args..., NULL): runs the program for at most two minutes (a run
 * that blocks is killed and reported, not left to hang the suite). */
#define offkv(...) cli_run(120.0, __VA_ARGS__)

#define CHECK_ERR_HAS(needle) CHECK(strstr(cli_err, (needle)) != NULL, "stderr lacks '%s': %s", (needle), cli_err)

static const char *shared;
static char plain[sizeof cli_out];

static void model_path(char *buf, size_t cap, const char *name) { snprintf(buf, cap, "%s/models/%s.gguf", shared, name); }

#define RUN_ARGS(path, prompt) "run", "-m", path, "-p", prompt, "-n", "80", "--temp", "0", "-c", "256", "--chunk", "8", "-t", "2"

static void speculative_families(void) {
    /* every family on stories' vocabulary (tiny-phi3 has Phi-3's own, so no
     * neighbour could draft for it) */
    const char *models[] = {"stories260K",       "tiny-llama", "tiny-gemma3",  "tiny-gemma3-allswa",
                            "tiny-muse-glimmer", "tiny-qwen2", "tiny-qwen3",   "tiny-smollm3",
                            "tiny-gemma2"};
    const int n_models = (int)(sizeof models / sizeof models[0]);
    const char *prompt = "Once upon a time there was a little dog. The little dog";
    for (int i = 0; i < n_models; i++) {
        char path[4096], other[4096];
        model_path(path, sizeof path, models[i]);
        model_path(other, sizeof other, models[(i + 1) % n_models]);
        CHECK(offkv(RUN_ARGS(path, prompt), NULL) == 0, "%s plain: %s", models[i], cli_err);
        snprintf(plain, sizeof plain, "%s", cli_out);
        /* p-min 0: itself as the draft proposes K every step, all kept */
        CHECK(offkv(RUN_ARGS(path, prompt), "--draft", path, "--draft-p-min", "0", NULL) == 0, "%s --draft itself: %s",
              models[i], cli_err);
        CHECK(strcmp(cli_out, plain) == 0, "%s: --draft (itself) changed the text:\n%s\nvs\n%s", models[i], cli_out, plain);
        CHECK_ERR_HAS("drafted");
        CHECK_ERR_HAS("acceptance 100.0%");
        CHECK(offkv(RUN_ARGS(path, prompt), "--draft", other, "--draft-n", "3", NULL) == 0, "%s --draft other: %s",
              models[i], cli_err);
        CHECK(strcmp(cli_out, plain) == 0, "%s: --draft %s changed the text", models[i], models[(i + 1) % n_models]);
        CHECK_ERR_HAS("3 per step");
        CHECK(offkv(RUN_ARGS(path, prompt), "--lookup", "2", NULL) == 0, "%s --lookup: %s", models[i], cli_err);
        CHECK(strcmp(cli_out, plain) == 0, "%s: --lookup changed the text", models[i]);
        CHECK_ERR_HAS("prompt lookup");
    }
    /* Sampling runs too, and says what it did. */
    char path[4096];
    model_path(path, sizeof path, "stories260K");
    CHECK(offkv("run", "-m", path, "-p", prompt, "-n", "40", "--temp", "0.8", "--seed", "4", "--draft", path, NULL) == 0,
          "sampling with a draft: %s", cli_err);
    CHECK_ERR_HAS("acceptance");
}

static void refusals(void) {
    char path[4096], other[4096];
    model_path(path, sizeof path, "stories260K");
    model_path(other, sizeof other, "aidreams260K");
    CHECK(offkv("run", "-m", path, "-n", "4", "--draft", other, NULL) == 1, "another vocabulary: %s", cli_err);
    CHECK_ERR_HAS("differs from the target's at token 259");
    CHECK(offkv("run", "-m", path, "-n", "4", "--draft", path, "--lookup", "2", NULL) == 2, "both drafters");
    CHECK_ERR_HAS("--lookup");
    CHECK(offkv("run", "-m", path, "-n", "4", "--draft-n", "3", NULL) == 2, "--draft-n alone");
    CHECK_ERR_HAS("--draft-n 3 needs --draft or --lookup");
    CHECK(offkv("run", "-m", path, "-n", "4", "--lookup", "2", "--draft-n", "65", NULL) == 2, "--draft-n 65");
    CHECK_ERR_HAS("65");
    CHECK(offkv("run", "-m", path, "-n", "4", "--lookup", "2", "--draft-p-min", "0.5", NULL) == 2, "--draft-p-min with lookup");
    CHECK_ERR_HAS("--draft-p-min 0.5 needs --draft");
    CHECK(offkv("run", "-m", path, "-n", "4", "--draft", path, "--draft-p-min", "1.5", NULL) == 2, "--draft-p-min 1.5");
    CHECK_ERR_HAS("1.5");
    CHECK(offkv("run", "-m", path, "-n", "4", "--draft", "/nonexistent/draft.gguf", NULL) == 1, "missing draft");
    CHECK_ERR_HAS("/nonexistent/draft.gguf");
    CHECK(offkv("run", "--help", NULL) == 0, "run --help");
    CHECK(strstr(cli_out, "--draft FILE") && strstr(cli_out, "--draft-n K") && strstr(cli_out, "--lookup N") && strstr(cli_out, "--draft-p-min P") &&
              strstr(cli_out, "--prompt-cache FILE"),
          "run --help lacks the new flags: %s", cli_out);
}

/* Reads a whole small file into buf; returns its size. */
static size_t read_small(const char *path, char *buf, size_t cap) {
    FILE *f = fopen(path, "rb");
    size_t n = f ? fread(buf, 1, cap, f) : 0;
    if (f) fclose(f);
    return n;
}

static int reused_of(int *n_prompt) {
    const char *line = strstr(cli_err, "reused ");
    int reused = -1;
    if (!line || sscanf(line, "reused %d of %d", &reused, n_prompt) != 2) return -1;
    return reused;
}

#define PC_ARGS(path, prompt, n) "run", "-m", path, "-p", prompt, "-n", n, "--temp", "0", "--chunk", "8", "-t", "2"

static void prompt_cache(void) {
    char path[4096], file[4200], ring[4096], other[4096];
    model_path(path, sizeof path, "stories260K");
    model_path(ring, sizeof ring, "tiny-gemma3");
    model_path(other, sizeof other, "tiny-llama");
    snprintf(file, sizeof file, "%s/p.cache", cli_dir);
    const char *first = "Once upon a time there was a little dog named Max.";
    const char *second = "Once upon a time there was a little dog named Max. He liked to run";
    /* Without a cache: the reference text of the second prompt. */
    CHECK(offkv(PC_ARGS(path, second, "30"), NULL) == 0, "%s", cli_err);
    snprintf(plain, sizeof plain, "%s", cli_out);
    CHECK(offkv(PC_ARGS(path, first, "30"), "--prompt-cache", file, NULL) == 0, "first run: %s", cli_err);
    CHECK_ERR_HAS("does not exist yet");
    CHECK_ERR_HAS("saved");
    CHECK(access(file, F_OK) == 0, "no cache file written");
    /* A longer prompt: the first prompt's tokens are reused (flat layers
     * rewind anywhere, past the 30 generated tokens). */
    CHECK(offkv(PC_ARGS(path, second, "30"), "--prompt-cache", file, NULL) == 0, "second run: %s", cli_err);
    int n_prompt = 0, reused = reused_of(&n_prompt);
    CHECK(reused > 5 && reused < n_prompt, "second run should reuse the first prompt's tokens: %s", cli_err);
    CHECK(strcmp(cli_out, plain) == 0, "the prompt cache changed the text:\n%s\nvs\n%s", cli_out, plain);
    /* The same prompt again: everything but the last prompt token is reused. */
    CHECK(offkv(PC_ARGS(path, second, "30"), "--prompt-cache", file, NULL) == 0, "third run: %s", cli_err);
    reused = reused_of(&n_prompt);
    CHECK(reused == n_prompt - 1, "the same prompt again: %s", cli_err);
    CHECK(strcmp(cli_out, plain) == 0, "the full reuse changed the text");
    /* With a draft as well. */
    CHECK(offkv(PC_ARGS(path, second, "30"), "--prompt-cache", file, "--draft", path, NULL) == 0, "with a draft: %s",
          cli_err);
    CHECK(strcmp(cli_out, plain) == 0, "prompt cache + draft changed the text");
    /* Another model: refused, exit 1, the file untouched; so is another chunk (max_write). */
    static char before[1 << 16], after[1 << 16];
    const size_t nb = read_small(file, before, sizeof before);
    CHECK(offkv(PC_ARGS(other, second, "4"), "--prompt-cache", file, NULL) == 1, "another model's cache: %s", cli_err);
    CHECK_ERR_HAS("another model");
    CHECK(offkv("run", "-m", path, "-p", second, "-n", "4", "--chunk", "16", "--prompt-cache", file, NULL) == 1,
          "another chunk: %s", cli_err);
    CHECK_ERR_HAS("max_write 8, this one has 16");
    const size_t na = read_small(file, after, sizeof after);
    CHECK(na == nb && memcmp(before, after, na) == 0, "a refused prompt cache was rewritten");
    if (truncate(file, (off_t)(nb / 2)) == 0) {
        CHECK(offkv(PC_ARGS(path, second, "4"), "--prompt-cache", file, NULL) == 1, "truncated cache: %s", cli_err);
        CHECK_ERR_HAS("truncated");
    }
    /* Paths that cannot work are refused at once: no text, no hang (a FIFO
     * blocked the open for reading until a writer came), no file made. */
    char fifo[4200], nodir[4200];
    snprintf(fifo, sizeof fifo, "%s/fifo.cache", cli_dir);
    snprintf(nodir, sizeof nodir, "%s/no-such-folder/p.cache", cli_dir);
    CHECK(mkfifo(fifo, 0600) == 0, "mkfifo %s", fifo);
    int rc = offkv(PC_ARGS(path, second, "4"), "--prompt-cache", fifo, NULL);
    CHECK(rc == 1 && strstr(cli_err, "not a regular file") && !cli_out[0], "a FIFO (rc %d): %s", rc, cli_err);
    remove(fifo);
    rc = offkv(PC_ARGS(path, second, "4"), "--prompt-cache", nodir, NULL);
    CHECK(rc == 1 && strstr(cli_err, "no-such-folder' does not exist") && !cli_out[0], "a missing folder (rc %d): %s",
          rc, cli_err);
    rc = offkv(PC_ARGS(path, second, "4"), "--prompt-cache", "", NULL);
    CHECK(rc == 2 && strstr(cli_err, "--prompt-cache: the path is empty") && !cli_out[0], "an empty path (rc %d): %s",
          rc, cli_err);
    rc = offkv(PC_ARGS(path, second, "4"), "--prompt-cache", cli_dir, NULL);
    CHECK(rc == 1 && strstr(cli_err, "not a regular file") && !cli_out[0], "a folder (rc %d): %s", rc, cli_err);
    /* Ring layers: a prompt-only save (-n 0) extended by the next prompt is
     * reused whole; after 30 generated tokens the window layers no longer
     * hold the common prefix, which is said, and nothing is reused. */
    remove(file);
    CHECK(offkv(PC_ARGS(ring, second, "30"), NULL) == 0, "%s", cli_err);
    snprintf(plain, sizeof plain, "%s", cli_out);
    CHECK(offkv(PC_ARGS(ring, first, "0"), "--prompt-cache", file, NULL) == 0, "ring, prompt only: %s", cli_err);
    CHECK(offkv(PC_ARGS(ring, second, "30"), "--prompt-cache", file, NULL) == 0, "ring, extended: %s", cli_err);
    int n_first = 0;
    reused = reused_of(&n_prompt);
    CHECK(strstr(cli_err, "the file held ") && sscanf(strstr(cli_err, "the file held "), "the file held %d", &n_first) == 1 &&
              reused == n_first && reused > 5,
          "ring model: the whole saved prompt should be reused: %s", cli_err);
    CHECK(strcmp(cli_out, plain) == 0, "ring model: the prompt cache changed the text");
    CHECK(offkv(PC_ARGS(ring, first, "4"), "--prompt-cache", file, NULL) == 0, "ring, shorter prompt: %s", cli_err);
    CHECK(reused_of(&n_prompt) == 0 && strstr(cli_err, "no longer hold position"), "ring model: %s", cli_err);
}

int main(void) {
    if (!cli_init("test-cli-spec")) return CHECK_SKIP;
    shared = check_shared_dir();
    if (!shared) {
        printf("skipped: ../shared not found\n");
        return CHECK_SKIP;
    }
    speculative_families();
    refusals();
    prompt_cache();
    return cli_done();
}
