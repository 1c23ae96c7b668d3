/* Internal: NULL-terminated key, value option lists ("n_threads", "2", ..., NULL). */
#ifndef OKV_CORE_OPTIONS_H
#define OKV_CORE_OPTIONS_H

#include <stdint.h>
#include "offkv/status.h"

/* The value of key, or NULL when absent (the last occurrence wins). */
const char *okv_option_get(const char *const *options, const char *key);

/* Checks that every key is one of known (a NULL-terminated list) and has a
 * value: OKV_ERR_INVALID naming the first offender. what names the caller
 * ("context", "model") in the message. */
okv_status okv_options_check(const char *const *options, const char *const *known, const char *what,
                             okv_error *err);

/* Parses an integer option in [lo, hi] into *out (left as is when absent). */
okv_status okv_option_int(const char *const *options, const char *key, int64_t lo, int64_t hi,
                          int32_t *out, okv_error *err);

#endif
