/* Internal: running one parallel job on a thread pool.  okv_parallel is
 * public now (offkv/threads.h); this name stays for the library's files that
 * include it. */
#ifndef OKV_THREADS_POOL_H
#define OKV_THREADS_POOL_H

#include "offkv/threads.h"

#endif
