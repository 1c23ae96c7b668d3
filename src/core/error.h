/* Internal: filling okv_error. */
#ifndef OKV_CORE_ERROR_H
#define OKV_CORE_ERROR_H

#include "offkv/status.h"

/* Formats a message into err (if non-NULL) and returns status, so callers
 * can write `return okv_fail(err, OKV_ERR_INVALID, "bad %d", x);`. */
okv_status okv_fail(okv_error *err, okv_status status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Clears err to OKV_OK with an empty message (if non-NULL). */
void okv_error_clear(okv_error *err);

#endif
