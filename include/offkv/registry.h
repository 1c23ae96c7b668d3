/* offkv — cache registry and cache factory.
 *
 * A registry maps string keys to caches so that several contexts of one
 * model (prefill and decode) bind to one sequence cache; a cache's geometry
 * is its model's, so a draft model for speculative decoding keeps its own.  A factory maps a
 * (backend id, kind) pair to a builder function; builders are registered
 * explicitly, nothing is registered behind the caller's back.  Neither object
 * locks: callers sharing one across threads serialize their calls. */
#ifndef OFFKV_REGISTRY_H
#define OFFKV_REGISTRY_H

#include "offkv/cache.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct okv_registry okv_registry;

/* Creates an empty registry; NULL if memory runs out. Free with okv_registry_free. */
okv_registry *okv_registry_create(void);

/* Releases every cache the registry holds and frees it.  NULL is a no-op. */
void okv_registry_free(okv_registry *r);

/* Installs c under key, taking a reference of its own (the caller keeps
 * its reference).  An existing key, an empty key or a NULL argument is
 * OKV_ERR_INVALID; the key is copied. */
okv_status okv_registry_install(okv_registry *r, const char *key, okv_cache *c, okv_error *err);

/* The cache installed under key, borrowed (retain it to keep it past a
 * remove); NULL if absent. */
okv_cache *okv_registry_get(okv_registry *r, const char *key);

/* Removes key and drops the registry's reference.  An unknown key is
 * OKV_ERR_NOT_FOUND. */
okv_status okv_registry_remove(okv_registry *r, const char *key, okv_error *err);

/* A cache builder: same contract as okv_cache_create.  A geometry the backend
 * cannot serve is OKV_ERR_UNSUPPORTED. */
typedef okv_cache *(*okv_cache_builder)(const okv_layer_geometry *layers, int32_t n_layers,
                                        const okv_cache_config *cfg, okv_error *err);

typedef struct okv_factory okv_factory;

/* Creates an empty factory; NULL if memory runs out. */
okv_factory *okv_factory_create(void);

/* Frees the factory.  NULL is a no-op. */
void okv_factory_free(okv_factory *f);

/* Registers builder b for (backend, kind).  A pair already registered, an
 * empty name or a NULL argument is OKV_ERR_INVALID. */
okv_status okv_factory_register(okv_factory *f, const char *backend, const char *kind,
                                okv_cache_builder b, okv_error *err);

/* Builds a cache with the builder registered for (backend, kind).  An unknown
 * pair is OKV_ERR_NOT_FOUND (the message names it); otherwise the builder's
 * result and errors are returned.  The caller owns the returned reference. */
okv_cache *okv_factory_build(okv_factory *f, const char *backend, const char *kind,
                             const okv_layer_geometry *layers, int32_t n_layers,
                             const okv_cache_config *cfg, okv_error *err);

/* Registers the CPU builders offkv ships: backend "cpu", kind "single" (one
 * sequence in host memory, okv_cache_create). */
okv_status okv_register_cpu_cache_builders(okv_factory *f, okv_error *err);

#ifdef __cplusplus
}
#endif
#endif
