/* Registry: key -> cache.  A handful of entries per process, so a plain
 * array with linear search is the simplest thing that is fast enough. */
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "offkv/registry.h"

typedef struct entry { char *key; okv_cache *cache; } entry;

struct okv_registry {
    entry *entries;
    int32_t n, cap;
};

okv_registry *okv_registry_create(void) { return calloc(1, sizeof(okv_registry)); }

void okv_registry_free(okv_registry *r) {
    if (!r) return;
    for (int32_t i = 0; i < r->n; i++) {
        free(r->entries[i].key);
        okv_cache_release(r->entries[i].cache);
    }
    free(r->entries);
    free(r);
}

static int32_t find(const okv_registry *r, const char *key) {
    for (int32_t i = 0; i < r->n; i++)
        if (strcmp(r->entries[i].key, key) == 0) return i;
    return -1;
}

okv_status okv_registry_install(okv_registry *r, const char *key, okv_cache *c, okv_error *err) {
    if (!r || !key || !c) return okv_fail(err, OKV_ERR_INVALID, "registry install: NULL argument");
    if (!key[0]) return okv_fail(err, OKV_ERR_INVALID, "registry install: empty key");
    if (find(r, key) >= 0)
        return okv_fail(err, OKV_ERR_INVALID, "registry install: key '%.200s' already installed", key);
    if (r->n == r->cap) {
        int32_t cap = r->cap ? r->cap * 2 : 4;
        entry *e = realloc(r->entries, (size_t)cap * sizeof *e);
        if (!e) return okv_fail(err, OKV_ERR_NOMEM, "registry install: out of memory");
        r->entries = e;
        r->cap = cap;
    }
    char *copy = strdup(key);
    if (!copy) return okv_fail(err, OKV_ERR_NOMEM, "registry install: out of memory");
    r->entries[r->n++] = (entry){copy, okv_cache_retain(c)};
    okv_error_clear(err);
    return OKV_OK;
}

okv_cache *okv_registry_get(okv_registry *r, const char *key) {
    if (!r || !key) return NULL;
    int32_t i = find(r, key);
    return i >= 0 ? r->entries[i].cache : NULL;
}

okv_status okv_registry_remove(okv_registry *r, const char *key, okv_error *err) {
    if (!r || !key) return okv_fail(err, OKV_ERR_INVALID, "registry remove: NULL argument");
    int32_t i = find(r, key);
    if (i < 0) return okv_fail(err, OKV_ERR_NOT_FOUND, "registry remove: no cache under key '%.200s'", key);
    free(r->entries[i].key);
    okv_cache_release(r->entries[i].cache);
    r->entries[i] = r->entries[--r->n];
    okv_error_clear(err);
    return OKV_OK;
}
