/* The thread pool runs each job once per thread, with distinct indices,
 * and refuses a size below 1. */
#include <stdatomic.h>

#include "check.h"
#include "offkv/offkv.h"
#include "threads/pool.h"
#include "kernels/f16.h"

typedef struct { atomic_int hits[8]; atomic_int calls; } count_arg;

static void count_job(void *p, int32_t ith, int32_t nth) {
    count_arg *a = p;
    if (ith >= 0 && ith < 8 && nth <= 8) atomic_fetch_add(&a->hits[ith], 1);
    atomic_fetch_add(&a->calls, 1);
}

int main(void) {
    okv_error err;
    CHECK(okv_threadpool_create(0, &err) == NULL && err.status == OKV_ERR_INVALID,
          "size 0 accepted");
    for (int n = 1; n <= 4; n++) {
        okv_threadpool *pool = okv_threadpool_create(n, &err);
        CHECK(pool != NULL, "create %d: %s", n, err.message);
        if (!pool) continue;
        CHECK(okv_threadpool_size(pool) == n, "size %d", okv_threadpool_size(pool));
        for (int rep = 0; rep < 1000; rep++) {
            count_arg a = {0};
            okv_parallel(pool, count_job, &a);
            int ok = atomic_load(&a.calls) == n;
            for (int i = 0; i < n; i++) ok &= atomic_load(&a.hits[i]) == 1;
            if (!ok) { CHECK(ok, "job %d on %d threads ran wrong", rep, n); break; }
        }
        okv_threadpool_free(pool);
    }
    /* f16 round trip against values worked out from the format by hand. */
    CHECK(okv_f32_to_f16(1.0f) == 0x3c00, "1.0");
    CHECK(okv_f32_to_f16(-2.0f) == 0xc000, "-2.0");
    CHECK(okv_f32_to_f16(65504.0f) == 0x7bff, "max");
    CHECK(okv_f32_to_f16(1e6f) == 0x7c00, "overflow to inf");
    CHECK(okv_f32_to_f16(5.9604645e-8f) == 0x0001, "smallest subnormal");
    CHECK(okv_f32_to_f16(1.0009765625f) == 0x3c01, "1 + 2^-10");
    CHECK(okv_f32_to_f16(1.00048828125f) == 0x3c00, "tie rounds to even");
    CHECK(okv_f16_to_f32(0x3555) == 0.333251953125f, "1/3 in f16");
    CHECK(okv_f16_to_f32(0x0001) == 5.9604645e-8f, "subnormal back");
    int bad = 0;
    for (uint32_t h = 0; h < 0x10000; h++) {
        if ((h & 0x7c00) == 0x7c00 && (h & 0x3ff)) continue; /* NaN payloads */
        if (okv_f32_to_f16(okv_f16_to_f32((okv_f16)h)) != h) bad++;
    }
    CHECK(bad == 0, "%d f16 values do not round-trip", bad);
    float row[37];
    okv_f16 hrow[37], back[37];
    for (int i = 0; i < 37; i++) row[i] = (float)i * 0.37f - 5.0f;
    okv_f32_to_f16_row(hrow, row, 37);
    int mism = 0;
    for (int i = 0; i < 37; i++) mism += hrow[i] != okv_f32_to_f16(row[i]);
    CHECK(mism == 0, "%d row conversions differ from scalar", mism);
    float frow[37];
    okv_f16_to_f32_row(frow, hrow, 37);
    for (int i = 0; i < 37; i++) back[i] = okv_f32_to_f16(frow[i]);
    CHECK(memcmp(back, hrow, sizeof hrow) == 0, "row round trip");
    return check_done();
}
