/* offkv — status codes and error reports.
 *
 * Every fallible offkv function returns an okv_status (or NULL for
 * constructors) and, when given a non-NULL okv_error, fills it with the
 * status and a human-readable message naming the offending value.  Passing
 * NULL for err is always allowed: the status code alone is then returned.
 *
 * Every such call that succeeds clears err (status OKV_OK, empty message),
 * whatever it held before, so err always describes the last call made with
 * it. */
#ifndef OFFKV_STATUS_H
#define OFFKV_STATUS_H

#ifdef __cplusplus
extern "C" {
#endif

typedef enum okv_status {
    OKV_OK = 0,
    OKV_ERR_INVALID,      /* a bad argument: NULL pointer, count <= 0, bad index, bad config */
    OKV_ERR_POSITION,     /* positions that the sequence cannot take */
    OKV_ERR_NOMEM,        /* an allocation failed; state is unchanged (a step it failed must be aborted) */
    OKV_ERR_NOT_FOUND,    /* an unknown key (registry, factory, metadata) */
    OKV_ERR_FORMAT,       /* a malformed or truncated file */
    OKV_ERR_IO,           /* the operating system refused a file operation */
    OKV_ERR_UNSUPPORTED,  /* well-formed input this build or backend cannot serve */
    OKV_ERR_BUSY,         /* the object is in use (e.g. a step is open on the cache) */
    OKV_ERR_NUMERIC       /* the model's output holds NaN (broken weights or overflowed arithmetic) */
} okv_status;

/* Filled by failing calls.  message is always NUL-terminated. */
typedef struct okv_error {
    okv_status status;
    char message[256];
} okv_error;

/* Returns a static name for s ("OKV_OK", "OKV_ERR_POSITION", ...), or
 * "OKV_ERR_UNKNOWN" for a value outside the enum.  Never NULL. */
const char *okv_status_name(okv_status s);

#ifdef __cplusplus
}
#endif
#endif
