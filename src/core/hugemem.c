#include "core/hugemem.h"

#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>

enum { HUGE_PAGE = 2 << 20 };

void *okv_huge_alloc(size_t bytes) {
    if (bytes == 0 || bytes > SIZE_MAX - HUGE_PAGE) return NULL;
    const size_t total = (bytes + HUGE_PAGE - 1) / HUGE_PAGE * HUGE_PAGE;
    void *p = aligned_alloc(HUGE_PAGE, total);
#ifdef MADV_HUGEPAGE
    if (p) madvise(p, total, MADV_HUGEPAGE); /* a hint: refused, the pages stay 4 KiB */
#endif
    return p;
}
