/* Factory: (backend id, kind) -> builder, registered explicitly by the
 * program, so which caches exist is never decided by link order. */
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "offkv/registry.h"

typedef struct builder_entry { char *backend, *kind; okv_cache_builder build; } builder_entry;

struct okv_factory {
    builder_entry *entries;
    int32_t n, cap;
};

okv_factory *okv_factory_create(void) { return calloc(1, sizeof(okv_factory)); }

void okv_factory_free(okv_factory *f) {
    if (!f) return;
    for (int32_t i = 0; i < f->n; i++) {
        free(f->entries[i].backend);
        free(f->entries[i].kind);
    }
    free(f->entries);
    free(f);
}

static int32_t find(const okv_factory *f, const char *backend, const char *kind) {
    for (int32_t i = 0; i < f->n; i++)
        if (strcmp(f->entries[i].backend, backend) == 0 && strcmp(f->entries[i].kind, kind) == 0)
            return i;
    return -1;
}

okv_status okv_factory_register(okv_factory *f, const char *backend, const char *kind,
                                okv_cache_builder b, okv_error *err) {
    if (!f || !backend || !kind || !b)
        return okv_fail(err, OKV_ERR_INVALID, "factory register: NULL argument");
    if (!backend[0] || !kind[0])
        return okv_fail(err, OKV_ERR_INVALID, "factory register: empty backend or kind");
    if (find(f, backend, kind) >= 0)
        return okv_fail(err, OKV_ERR_INVALID, "factory register: (%.100s, %.100s) already registered",
                        backend, kind);
    if (f->n == f->cap) {
        int32_t cap = f->cap ? f->cap * 2 : 4;
        builder_entry *e = realloc(f->entries, (size_t)cap * sizeof *e);
        if (!e) return okv_fail(err, OKV_ERR_NOMEM, "factory register: out of memory");
        f->entries = e;
        f->cap = cap;
    }
    char *bc = strdup(backend), *kc = strdup(kind);
    if (!bc || !kc) {
        free(bc);
        free(kc);
        return okv_fail(err, OKV_ERR_NOMEM, "factory register: out of memory");
    }
    f->entries[f->n++] = (builder_entry){bc, kc, b};
    okv_error_clear(err);
    return OKV_OK;
}

okv_cache *okv_factory_build(okv_factory *f, const char *backend, const char *kind,
                             const okv_layer_geometry *layers, int32_t n_layers,
                             const okv_cache_config *cfg, okv_error *err) {
    if (!f || !backend || !kind) {
        okv_fail(err, OKV_ERR_INVALID, "factory build: NULL argument");
        return NULL;
    }
    int32_t i = find(f, backend, kind);
    if (i < 0) {
        okv_fail(err, OKV_ERR_NOT_FOUND, "factory build: no builder for (%.100s, %.100s)", backend, kind);
        return NULL;
    }
    okv_cache *c = f->entries[i].build(layers, n_layers, cfg, err);
    if (c) okv_error_clear(err);
    else if (err && err->status == OKV_OK)
        okv_fail(err, OKV_ERR_INVALID, "factory build: the builder for (%.100s, %.100s) failed without saying why",
                 backend, kind);
    return c;
}

okv_status okv_register_cpu_cache_builders(okv_factory *f, okv_error *err) {
    return okv_factory_register(f, "cpu", "single", okv_cache_create, err);
}
