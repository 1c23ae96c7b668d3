/* `offkv logits -m MODEL ... -o MODEL` must be refused: it used to die of
 * SIGBUS and destroy the model file (found by fuzzing; fixed).
 *
 * The rule: the CLI never crashes on user input; a bad value is a non-zero
 * exit with a message naming it.  cmd_logits (tools/offkv/logits.c) maps
 * the model, then fopen(out, "wb") truncates the output path; when that is
 * the model file (same path, or another name for it), the mapped weights
 * are gone and the first eval reads past the end of the file: SIGBUS (exit
 * 135, or an ASan "BUS" report), and the model is left empty.
 * Expected: refuse an output that is the model file (same st_dev/st_ino),
 * with a message naming -o, before writing anything; the model stays
 * intact. */
#include "cli_run.h"
#include "golden.h"

int main(void) {
    const char *shared = check_shared_dir();
    if (!shared) { printf("skipped: ../shared not found\n"); return CHECK_SKIP; }
    if (!cli_init("test-fuzz-cli-logits-output")) return CHECK_SKIP;
    char src[1024], model[4200], link_path[4200];
    snprintf(src, sizeof src, "%s/models/stories260K.gguf", shared);
    cli_path(model, sizeof model, "model.gguf");
    cli_path(link_path, sizeof link_path, "link.gguf");
    size_t size0 = 0;
    char *orig = golden_read(src, &size0);
    CHECK(orig != NULL, "read %s", src);

    /* the same path, then a symlink to it */
    const char *outs[] = {model, link_path};
    for (int k = 0; k < 2; k++) {
        CHECK(cli_copy(src, model), "copy the model");
        remove(link_path);
        CHECK(symlink("model.gguf", link_path) == 0, "symlink");
        int rc = cli_run(60, "logits", "-m", model, "--tokens", "1,2,3", "-o", outs[k], NULL);
        CHECK(!cli_crashed(rc) && rc != CLI_TIMEOUT, "logits -o %s (the model): crashed (rc %d): %.300s",
              k ? "a link to the model" : "the model path", rc, cli_err);
        CHECK(rc != 0 && strstr(cli_err, "-o"), "logits -o the model: want a refusal naming -o, got rc %d: %.300s", rc,
              cli_err);
        size_t size = 0;
        char *now = golden_read(model, &size);
        CHECK(now && orig && size == size0 && memcmp(now, orig, size) == 0,
              "the model file was changed (now %zu bytes, was %zu)", size, size0);
        free(now);
    }
    free(orig);
    remove(link_path);
    remove(model);
    return cli_done();
}
