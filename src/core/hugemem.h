/* Internal: memory for large buffers read again and again (the model's
 * copied weights, model.c), in 2 MiB pages where the system grants them on
 * request (transparent huge pages "always" or "madvise"), else in 4 KiB
 * pages: the same bytes, more TLB misses. */
#ifndef OKV_CORE_HUGEMEM_H
#define OKV_CORE_HUGEMEM_H

#include <stddef.h>

/* At least bytes (> 0), 2 MiB-aligned; NULL when out of memory or bytes is
 * 0 or too large.  Free with free(). */
void *okv_huge_alloc(size_t bytes);

#endif
