/* The version compiled into the library, whatever headers its caller saw. */
#include "offkv/version.h"

const char *okv_version(void) { return OKV_VERSION_STRING; }

int okv_version_number(void) { return OKV_VERSION_NUMBER; }
