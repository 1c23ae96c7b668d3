/* Whether two JSON texts hold the same value (key order aside): the shape
 * tests of the server's API translations compare what they build with
 * what is written out by hand. */
#ifndef OKV_TEST_SAME_JSON_H
#define OKV_TEST_SAME_JSON_H

#include <stdbool.h>

#include <cjson/cJSON.h>

static inline bool same_json(const char *a, const char *b) {
    cJSON *x = cJSON_Parse(a), *y = cJSON_Parse(b);
    const bool same = x && y && cJSON_Compare(x, y, true);
    cJSON_Delete(x);
    cJSON_Delete(y);
    return same;
}

#endif
