/* A negative RMSNorm epsilon must be refused (it used to run, giving NaN
 * logits; found by fuzzing, fixed).
 *
 * The rule: absurd metadata the GGUF reader accepts must be refused with an
 * error naming the key.  attention.layer_norm_rms_epsilon is read by
 * okv_model_f32 (src/model/model.c read_common), which rejects only
 * non-finite values; with eps = -1, 1/sqrt(mean(x^2) + eps) is NaN for any
 * row with mean square below 1, and the model returns NaN logits with
 * OKV_OK.  Expected: OKV_ERR_FORMAT naming layer_norm_rms_epsilon for
 * eps < 0 (0 is legal: some converters write it). */
#include "fuzz_meta.h"

int main(void) {
    tmp = "test_fuzz_meta_norm_eps.tmp.gguf";
    shared = check_shared_dir();
    if (!shared) { printf("skipped: ../shared not found\n"); return CHECK_SKIP; }
    static const meta_case cases[] = {
        {"tiny-llama", "llama.attention.layer_norm_rms_epsilon", V_F32, -1, 0, REFUSE, "layer_norm_rms_epsilon"},
        {"tiny-gemma3", "gemma3.attention.layer_norm_rms_epsilon", V_F32, -1e-6, 0, REFUSE, "layer_norm_rms_epsilon"},
        {"tiny-llama", "llama.attention.layer_norm_rms_epsilon", V_F32, 0, 0, RUN, NULL},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) run_case(&cases[i]);
    remove(tmp);
    return check_done();
}
