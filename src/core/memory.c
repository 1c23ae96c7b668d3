/* okv_free: the library's free() for what it hands out (a binding's free()
 * may belong to another allocator). */
#include <stdlib.h>

#include "offkv/memory.h"

void okv_free(void *p) { free(p); }
