/* offkv — umbrella header: include this one to get the whole public API. */
#ifndef OFFKV_H
#define OFFKV_H

#include "offkv/version.h"
#include "offkv/status.h"
#include "offkv/memory.h"
#include "offkv/threads.h"
#include "offkv/cache.h"
#include "offkv/gguf.h"
#include "offkv/registry.h"
#include "offkv/tokenizer.h"
#include "offkv/model.h"
#include "offkv/context.h"
#include "offkv/batch.h"
#include "offkv/sampler.h"
#include "offkv/prompt_cache.h"
#include "offkv/outfile.h"
#include "offkv/speculative.h"
#include "offkv/grammar.h"
#include "offkv/chat.h"

#endif
