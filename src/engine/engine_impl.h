/* Internal: what contexts and batches share. */
#ifndef OKV_ENGINE_IMPL_H
#define OKV_ENGINE_IMPL_H

#include "offkv/cache.h"
#include "offkv/model.h"

/* OKV_OK when cache c has the model's layers and geometry, else
 * OKV_ERR_INVALID naming what (c is called `name` in the message). */
okv_status okv_engine_cache_fits(const okv_model *m, const okv_cache *c, const char *name, okv_error *err);

#endif
