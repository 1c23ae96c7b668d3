/* offkv — the library's version.
 *
 * The macros say which headers a program was compiled against;
 * okv_version() says which library it is running with (a shared
 * liboffkv.so may have been replaced since).  Within one major version the
 * API and ABI only grow, so a program may check, at start-up, that
 * okv_version_number() >= OKV_VERSION_NUMBER. */
#ifndef OFFKV_VERSION_H
#define OFFKV_VERSION_H

#ifdef __cplusplus
extern "C" {
#endif

#define OKV_VERSION_MAJOR 0
#define OKV_VERSION_MINOR 1
#define OKV_VERSION_PATCH 0

#define OKV_VERSION_STR_(x) #x
#define OKV_VERSION_STR(x) OKV_VERSION_STR_(x)
/* "MAJOR.MINOR.PATCH" of these headers. */
#define OKV_VERSION_STRING                                                       \
    OKV_VERSION_STR(OKV_VERSION_MAJOR) "." OKV_VERSION_STR(OKV_VERSION_MINOR) "." \
    OKV_VERSION_STR(OKV_VERSION_PATCH)
/* MAJOR * 10000 + MINOR * 100 + PATCH of these headers. */
#define OKV_VERSION_NUMBER (OKV_VERSION_MAJOR * 10000 + OKV_VERSION_MINOR * 100 + OKV_VERSION_PATCH)

/* The linked library's version as "MAJOR.MINOR.PATCH" (static storage). */
const char *okv_version(void);

/* The linked library's version as MAJOR * 10000 + MINOR * 100 + PATCH. */
int okv_version_number(void);

#ifdef __cplusplus
}
#endif
#endif
