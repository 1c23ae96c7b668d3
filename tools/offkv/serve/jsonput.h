/* cJSON builders that check each add, for the files that shape other
 * APIs' answers (anthropic.c, responses.c): a failed cJSON add (out of
 * memory) leaves an object a field short and leaks the item it did not
 * take, so these free what they cannot add and say false, and a builder
 * gives up rather than send a message or an event without a field. */
#ifndef OKV_SERVE_JSONPUT_H
#define OKV_SERVE_JSONPUT_H

#include <stdbool.h>

#include <cjson/cJSON.h>

static inline bool srv_put_str(cJSON *o, const char *k, const char *v) { return o && cJSON_AddStringToObject(o, k, v); }
static inline bool srv_put_num(cJSON *o, const char *k, double v) { return o && cJSON_AddNumberToObject(o, k, v); }

/* Adds item (taken: freed when it cannot be added) to o as k. */
static inline bool srv_put(cJSON *o, const char *k, cJSON *item) {
    if (o && item && cJSON_AddItemToObject(o, k, item)) return true;
    cJSON_Delete(item);
    return false;
}

static inline bool srv_push(cJSON *a, cJSON *item) {
    if (a && item && cJSON_AddItemToArray(a, item)) return true;
    cJSON_Delete(item);
    return false;
}

static inline bool srv_replace(cJSON *o, const char *k, cJSON *item) {
    if (o && item && cJSON_ReplaceItemInObjectCaseSensitive(o, k, item)) return true;
    cJSON_Delete(item);
    return false;
}

/* {"type": type} (NULL when out of memory). */
static inline cJSON *srv_typed(const char *type) {
    cJSON *o = cJSON_CreateObject();
    if (srv_put_str(o, "type", type)) return o;
    cJSON_Delete(o);
    return NULL;
}

#endif
