/* llama.rope.dimension_count must be read and checked: a value that cannot
 * describe the heads (odd, 0, or more than the head dim) is an error naming
 * the key, never run silently.  A value below the head dim rotates only the
 * leading dimensions of each head (partial rotary, checked against a dense
 * reference in test_model_variants.c); llama.cpp refuses that for llama
 * files, offkv serves it. */
#include "fuzz_meta.h"

int main(void) {
    tmp = "test_fuzz_meta_rope_dims.tmp.gguf";
    shared = check_shared_dir();
    if (!shared) { printf("skipped: ../shared not found\n"); return CHECK_SKIP; }
    static const meta_case cases[] = {
        /* tiny-llama: head_dim 16 */
        {"tiny-llama", "llama.rope.dimension_count", V_U32, 4, 0, RUN, NULL}, /* partial rotary */
        {"tiny-llama", "llama.rope.dimension_count", V_U32, 5, 0, REFUSE, "dimension_count"},
        {"tiny-llama", "llama.rope.dimension_count", V_U32, 0, 0, REFUSE, "dimension_count"},
        {"tiny-llama", "llama.rope.dimension_count", V_U32, 1000, 0, REFUSE, "dimension_count"},
        {"tiny-llama", "llama.rope.dimension_count", V_U32, 16, 0, RUN, NULL}, /* the true value runs */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) run_case(&cases[i]);
    remove(tmp);
    return check_done();
}
