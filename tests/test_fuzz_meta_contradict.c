/* Metadata that contradicts the tensors must be refused, naming the key and
 * what the tensors say (found by the hostile-user probe):
 *   - block_count below the blocks the file holds ran a truncated model and
 *     ignored the rest (llama.cpp refuses: wrong number of tensors);
 *   - muse-glimmer with attention.sliding_window = 0 loaded as all-global,
 *     although offkv refuses a muse-glimmer file without its window. */
#include "fuzz_meta.h"

int main(void) {
    tmp = "test_fuzz_meta_contradict.tmp.gguf";
    shared = check_shared_dir();
    if (!shared) { printf("skipped: ../shared not found\n"); return CHECK_SKIP; }
    static const meta_case cases[] = {
        /* tiny-llama has blocks 0..3, stories260K 0..4, tiny-gemma3 0..5 */
        {"tiny-llama", "llama.block_count", V_U32, 3, 0, REFUSE, "block_count is 3"},
        {"tiny-llama", "llama.block_count", V_U32, 1, 0, REFUSE, "blk.1"},
        {"stories260K", "llama.block_count", V_U32, 3, 0, REFUSE, "block 3"},
        {"tiny-gemma3", "gemma3.block_count", V_U32, 5, 0, REFUSE, "block_count"},
        {"tiny-muse-glimmer", "muse-glimmer.block_count", V_U32, 7, 0, REFUSE, "block_count"},
        {"tiny-llama", "llama.block_count", V_U32, 4, 0, RUN, NULL}, /* the true count runs */
        {"tiny-muse-glimmer", "muse-glimmer.attention.sliding_window", V_U32, 0, 0, REFUSE, "sliding_window' = 0"},
        {"tiny-muse-glimmer", "muse-glimmer.attention.sliding_window", V_U32, 8, 0, RUN, NULL},
        {"tiny-gemma3", "gemma3.attention.sliding_window", V_U32, 0, 0, RUN, NULL}, /* gemma3: 0 is no window */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) run_case(&cases[i]);
    remove(tmp);
    return check_done();
}
