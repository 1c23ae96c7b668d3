/* Fuzz: every allocation that fails, while loading each architecture's
 * model, making a context, evaluating (growing the flat layers) and
 * tokenizing.  The rule: an allocation that fails is an error code
 * (OKV_ERR_NOMEM) and a message, never a crash, and leaves nothing behind.
 * tests/fuzz_alloc.h makes the k-th allocation fail for every k.
 *
 * Needs the plain build: the sanitizer build has its own allocator (skip). */
#include "check.h"

#if defined(__SANITIZE_ADDRESS__)
int main(void) {
    printf("skipped: allocation-failure injection runs in the non-sanitizer build\n");
    return CHECK_SKIP;
}
#else
#include "fuzz_alloc.h"

int main(void) {
    const char *shared = check_shared_dir();
    if (!shared) { printf("skipped: ../shared not found\n"); return CHECK_SKIP; }
    static const char *const models[] = {"stories260K", "tiny-llama", "tiny-gemma3", "tiny-muse-glimmer"};
    for (size_t mi = 0; mi < sizeof models / sizeof models[0]; mi++) {
        char mp[1024];
        snprintf(mp, sizeof mp, "%s/models/%s.gguf", shared, models[mi]);
        alloc_fail_all(models[mi], mp, NULL);
    }
    /* SentencePiece vocabularies from their own files */
    char vp[1024], mp[1024];
    snprintf(mp, sizeof mp, "%s/models/tiny-llama.gguf", shared);
    snprintf(vp, sizeof vp, "%s/vocab/ggml-vocab-phi-3.gguf", shared);
    alloc_fail_all("tiny-llama + phi-3 vocab", mp, vp);
    return check_done();
}
#endif
