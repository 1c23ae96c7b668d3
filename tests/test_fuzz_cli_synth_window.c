/* `offkv synth --arch muse-glimmer --sliding-window 0` used to exit 0 and
 * write a file that offkv itself refuses to load (found by fuzzing; now a
 * usage error).
 *
 * The rule: `--help` tells the truth and a bad value is a usage error naming
 * it.  synth's help says --sliding-window N writes attention.sliding_window
 * (range 0..2^24 accepted), but tools/offkv/synth.c add_metadata writes the
 * key only when window > 0; a muse-glimmer model needs the key (issue 4:
 * "refused with an error naming the key"), so the file written fails
 * okv_model_load with "needs a window, but key ... is missing".
 * Expected: either refuse --sliding-window 0 for muse-glimmer (exit 2,
 * message naming --sliding-window), or write a file that loads. */
#include "cli_run.h"
#include "offkv/offkv.h"

int main(void) {
    if (!cli_init("test-fuzz-cli-synth-window")) return CHECK_SKIP;
    char out[4200];
    cli_path(out, sizeof out, "m.gguf");
    int rc = cli_run(60, "synth", "--arch", "muse-glimmer", "--sliding-window", "0", "-o", out, NULL);
    CHECK(rc == 0 || rc == 2, "synth: rc %d: %.300s", rc, cli_err);
    if (rc == 2) {
        CHECK(strstr(cli_err, "--sliding-window") != NULL, "refusal does not name --sliding-window: %s", cli_err);
    } else if (rc == 0) {
        okv_error err = {0};
        okv_model *m = okv_model_load(out, NULL, &err);
        CHECK(m != NULL, "synth exited 0 but its file does not load: %s", err.message);
        okv_model_free(m);
    }
    remove(out);
    return cli_done();
}
