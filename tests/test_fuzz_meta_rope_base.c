/* A RoPE base of 0 or below must be refused (it used to run; found by
 * fuzzing, fixed).
 *
 * The rule: semantically absurd metadata that the GGUF reader accepts must be
 * refused by the model with an error naming the key, never run silently.
 * theta = pos * base^(-2i/d) needs base > 0 (and base 1 is the degenerate
 * "every pair rotates alike"; real files use 1e4..1e6).
 *
 * Before the fix okv_model_f32 (src/model/model.c) only rejects non-finite values, so:
 *  - base 0 collides with the "no rotation" sentinel that muse-glimmer's
 *    global layers use (src/model/forward.c okv_fwd_rope: rope_base == 0 ->
 *    return): a llama / gemma3 file with freq_base 0 silently runs with no
 *    positional encoding at all, and finite, plausible-looking logits;
 *  - a negative base gives powf(negative, fraction) = NaN: every logit NaN.
 * Expected: OKV_ERR_FORMAT naming the key, as for a NaN base. */
#include "fuzz_meta.h"

int main(void) {
    tmp = "test_fuzz_meta_rope_base.tmp.gguf";
    shared = check_shared_dir();
    if (!shared) { printf("skipped: ../shared not found\n"); return CHECK_SKIP; }
    static const meta_case cases[] = {
        {"tiny-llama", "llama.rope.freq_base", V_F32, 0, 0, REFUSE, "freq_base"},
        {"tiny-llama", "llama.rope.freq_base", V_F32, -10000, 0, REFUSE, "freq_base"},
        {"tiny-gemma3", "gemma3.rope.freq_base", V_F32, 0, 0, REFUSE, "freq_base"},
        {"tiny-gemma3", "gemma3.rope.freq_base_swa", V_F32, 0, 0, REFUSE, "freq_base_swa"},
        {"tiny-gemma3", "gemma3.rope.freq_base_swa", V_F32, -5, 0, REFUSE, "freq_base_swa"},
        {"tiny-muse-glimmer", "muse-glimmer.rope.freq_base", V_F32, 0, 0, REFUSE, "freq_base"},
        {"tiny-muse-glimmer", "muse-glimmer.rope.freq_base", V_F32, -1, 0, REFUSE, "freq_base"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) run_case(&cases[i]);
    remove(tmp);
    return check_done();
}
