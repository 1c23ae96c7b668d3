#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/options.h"

const char *okv_option_get(const char *const *options, const char *key) {
    const char *v = NULL;
    for (size_t i = 0; options && options[i] && options[i + 1]; i += 2)
        if (strcmp(options[i], key) == 0) v = options[i + 1];
    return v;
}

okv_status okv_options_check(const char *const *options, const char *const *known, const char *what,
                             okv_error *err) {
    for (size_t i = 0; options && options[i]; i += 2) {
        if (!options[i + 1])
            return okv_fail(err, OKV_ERR_INVALID, "%s option '%.100s' has no value", what, options[i]);
        bool found = false;
        for (size_t j = 0; known[j] && !found; j++) found = strcmp(options[i], known[j]) == 0;
        if (!found) return okv_fail(err, OKV_ERR_INVALID, "unknown %s option '%.100s'", what, options[i]);
    }
    return OKV_OK;
}

okv_status okv_option_int(const char *const *options, const char *key, int64_t lo, int64_t hi,
                          int32_t *out, okv_error *err) {
    const char *v = okv_option_get(options, key);
    if (!v) return OKV_OK;
    char *end;
    errno = 0;
    long long x = strtoll(v, &end, 10);
    if (errno || end == v || *end || x < lo || x > hi)
        return okv_fail(err, OKV_ERR_INVALID, "option %s=%.60s: expected an integer in %lld..%lld", key, v,
                        (long long)lo, (long long)hi);
    *out = (int32_t)x;
    return OKV_OK;
}
