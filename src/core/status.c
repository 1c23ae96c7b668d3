#include <stdarg.h>
#include <stdio.h>

#include "core/error.h"

const char *okv_status_name(okv_status s) {
    switch (s) {
    case OKV_OK: return "OKV_OK";
    case OKV_ERR_INVALID: return "OKV_ERR_INVALID";
    case OKV_ERR_POSITION: return "OKV_ERR_POSITION";
    case OKV_ERR_NOMEM: return "OKV_ERR_NOMEM";
    case OKV_ERR_NOT_FOUND: return "OKV_ERR_NOT_FOUND";
    case OKV_ERR_FORMAT: return "OKV_ERR_FORMAT";
    case OKV_ERR_IO: return "OKV_ERR_IO";
    case OKV_ERR_UNSUPPORTED: return "OKV_ERR_UNSUPPORTED";
    case OKV_ERR_BUSY: return "OKV_ERR_BUSY";
    case OKV_ERR_NUMERIC: return "OKV_ERR_NUMERIC";
    }
    return "OKV_ERR_UNKNOWN";
}

okv_status okv_fail(okv_error *err, okv_status status, const char *fmt, ...) {
    if (err) {
        va_list ap;
        va_start(ap, fmt);
        err->status = status;
        vsnprintf(err->message, sizeof err->message, fmt, ap);
        va_end(ap);
    }
    return status;
}

void okv_error_clear(okv_error *err) {
    if (err) {
        err->status = OKV_OK;
        err->message[0] = '\0';
    }
}
