/* A failed allocation while building a byte-level BPE tokenizer is
 * OKV_ERR_NOMEM, not OKV_ERR_UNSUPPORTED (found by fuzzing; fixed).
 *
 * The rule: an allocation that fails is OKV_ERR_NOMEM with a message.
 * okv_pretok_create (src/tokenizer/pretok.c, the pcre2_compile failure branch,
 * ~line 76) turns every compile failure into "regex N of pre-tokenizer ...
 * does not compile ...: failed to allocate heap memory" with
 * OKV_ERR_UNSUPPORTED, which tells a caller the vocabulary is not served,
 * when it only ran out of memory; okv_pretok_split does the same for a
 * pcre2_match that fails with PCRE2_ERROR_NOMEMORY.  Expected: NOMEM when
 * PCRE2 says PCRE2_ERROR_HEAP_FAILED / PCRE2_ERROR_NOMEMORY.
 * tests/fuzz_alloc.h makes the k-th allocation fail for every k. */
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
    static const char *const vocabs[] = {"gpt-2", "starcoder", "deepseek-coder"};
    char mp[1024], vp[1024];
    snprintf(mp, sizeof mp, "%s/models/stories260K.gguf", shared);
    for (size_t i = 0; i < sizeof vocabs / sizeof vocabs[0]; i++) {
        snprintf(vp, sizeof vp, "%s/vocab/ggml-vocab-%s.gguf", shared, vocabs[i]);
        alloc_fail_all(vocabs[i], mp, vp);
    }
    return check_done();
}
#endif
