/* Sliding-window families against llama.cpp's logits (../shared/golden):
 * gemma3 (layers 0-4 slide, window 8), gemma3 with every layer sliding, and
 * muse-glimmer (3 sliding : 1 global), 121 tokens in chunks of 16 and 121 —
 * prefills wider than the window, many ring wraps — with f32 and f16 KV, and
 * greedy generations. */
#include "check.h"
#include "golden.h"
#include "golden_run.h"

int main(void) {
    shared = check_shared_dir();
    if (!shared) { printf("skipped: ../shared not found\n"); return CHECK_SKIP; }
    const char *models[] = {"tiny-gemma3", "tiny-gemma3-allswa", "tiny-muse-glimmer"};
    for (int i = 0; i < 3; i++) {
        seq_case(models[i], 16, "f32");
        seq_case(models[i], 121, "f32");
        seq_case(models[i], 16, "f16");
        seq_case(models[i], 121, "f16");
        gen_case(models[i]);
    }
    return check_done();
}
