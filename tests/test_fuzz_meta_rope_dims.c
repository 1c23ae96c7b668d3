/* BUG (fails today): llama.rope.dimension_count is ignored.
 *
 * The rule: metadata that describes a model wrongly (a wrong shape) is an
 * error naming the key, never run silently.  llama.cpp reads n_rot from
 * {arch}.rope.dimension_count and, for the llama architecture, refuses a file
 * whose n_rot differs from the head dim ("invalid n_rot").  offkv never
 * reads the key (src/model/llama.c rotates all head_dim dims), so a file
 * saying "rotate 4 of 16 dims" or "1000 dims" runs as if it said 16, and
 * its logits silently differ from what the file describes.
 * Expected: OKV_ERR_FORMAT or OKV_ERR_UNSUPPORTED naming
 * rope.dimension_count. */
#include "fuzz_meta.h"

int main(void) {
    tmp = "test_fuzz_meta_rope_dims.tmp.gguf";
    shared = check_shared_dir();
    if (!shared) { printf("skipped: ../shared not found\n"); return CHECK_SKIP; }
    static const meta_case cases[] = {
        /* tiny-llama: head_dim 16 */
        {"tiny-llama", "llama.rope.dimension_count", V_U32, 4, 0, REFUSE, "dimension_count"},
        {"tiny-llama", "llama.rope.dimension_count", V_U32, 1000, 0, REFUSE, "dimension_count"},
        {"tiny-llama", "llama.rope.dimension_count", V_U32, 16, 0, RUN, NULL}, /* the true value runs */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) run_case(&cases[i]);
    remove(tmp);
    return check_done();
}
