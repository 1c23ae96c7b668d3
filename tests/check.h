/* Test support: CHECK counts and reports failures; every test program ends
 * with `return check_done();`, which prints "N passed, N failed". */
#ifndef OKV_TESTS_CHECK_H
#define OKV_TESTS_CHECK_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int check_passed_, check_failed_;

#define CHECK(cond, ...)                                                     \
    do {                                                                     \
        if (cond) {                                                          \
            check_passed_++;                                                 \
        } else {                                                             \
            check_failed_++;                                                 \
            fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond); \
            fprintf(stderr, __VA_ARGS__);                                    \
            fputc('\n', stderr);                                             \
        }                                                                    \
    } while (0)

/* CHECK that a call returned status want (an okv_status). */
#define CHECK_STATUS(got, want, err)                                              \
    CHECK((got) == (want), "status %s, want %s (%s)", okv_status_name(got),      \
          okv_status_name(want), (err).message)

static inline int check_done(void) {
    printf("%d passed, %d failed\n", check_passed_, check_failed_);
    return check_failed_ ? 1 : 0;
}

/* The shared data folder (../shared beside the checkout), or NULL. */
static inline const char *check_shared_dir(void) {
    const char *d = getenv("OKV_SHARED");
    if (!d) d = "../shared";
    char probe[4096];
    snprintf(probe, sizeof probe, "%s/README.md", d);
    FILE *f = fopen(probe, "rb");
    if (!f) return NULL;
    fclose(f);
    return d;
}

/* Exit code ctest reads as "skipped". */
#define CHECK_SKIP 77

#endif
