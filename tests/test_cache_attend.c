/* update_and_attend against a naive attention: as flat layers regrow, on
 * rings that wrap, with prefills wider than the window, with mixed layer
 * kinds, and on thread pools. */
#include "check.h"
#include "seqref.h"
#include "cache/cache_impl.h"

static const double TOL = 2e-5;

/* A 3-token prefill then decode steps, storage starting at 1 row so it
 * regrows during both; rows double, generation moves only on regrowth. */
static void growth_case(int32_t hd, int32_t gqa, okv_dtype store, okv_dtype in) {
    okv_layer_geometry geo[2] = {{2, hd, 0, 0}, {1, hd, 0, 0}};
    int32_t heads[2] = {2 * gqa, gqa};
    okv_cache_config cfg = {.capacity = 40, .initial_capacity = 1, .max_write = 8, .dtype = store};
    seqref s;
    okv_error err;
    if (!seq_init(&s, geo, heads, 2, &cfg, in, (uint64_t)hd * 7 + gqa, &err)) {
        CHECK(0, "create: %s", err.message);
        return;
    }
    CHECK(okv_cache_rows(s.cache, 0) == 1, "initial rows %d", okv_cache_rows(s.cache, 0));
    uint64_t gen = okv_cache_generation(s.cache);
    int32_t want_rows = 1;
    for (int32_t pos = 0; pos < 40;) {
        int32_t n = pos == 0 ? 3 : 1;
        okv_status rc = seq_step(&s, pos, n, &err);
        CHECK_STATUS(rc, OKV_OK, err);
        if (rc != OKV_OK) break;
        pos += n;
        int32_t expect = want_rows;
        while (expect < pos) expect *= 2;
        if (expect > 40) expect = 40;
        CHECK(okv_cache_rows(s.cache, 0) == expect, "rows %d at length %d, want %d",
              okv_cache_rows(s.cache, 0), pos, expect);
        bool regrew = expect != want_rows;
        CHECK((okv_cache_generation(s.cache) != gen) == regrew,
              "generation moved=%d but regrew=%d at %d", okv_cache_generation(s.cache) != gen,
              regrew, pos);
        gen = okv_cache_generation(s.cache);
        want_rows = expect;
        size_t elem = store == OKV_F16 ? 2 : 4;
        CHECK(okv_cache_bytes(s.cache) == 2 * (size_t)3 * expect * hd * elem, "bytes %zu",
              okv_cache_bytes(s.cache));
    }
    CHECK(s.max_err < TOL, "hd %d gqa %d store %d in %d: max err %g", hd, gqa, store, in, s.max_err);
    seq_free(&s);
}

/* A ring layer and a flat layer in one sequence, random step sizes, the
 * ring wrapping many times. */
static void ring_case(int32_t window, int32_t max_write, okv_dtype store, okv_threadpool *pool,
                      int32_t total) {
    okv_layer_geometry geo[3] = {{2, 8, window, 0}, {1, 16, 0, 0}, {2, 5, window + 3, 0}};
    int32_t heads[3] = {4, 2, 2};
    okv_cache_config cfg = {.capacity = 256, .initial_capacity = 0, .max_write = max_write, .dtype = store};
    seqref s;
    okv_error err;
    if (!seq_init(&s, geo, heads, 3, &cfg, OKV_F32, (uint64_t)window * 31 + max_write, &err)) {
        CHECK(0, "create: %s", err.message);
        return;
    }
    s.pool = pool;
    const int32_t rows = window + max_write - 1;
    CHECK(okv_cache_rows(s.cache, 0) == rows, "ring rows %d, want %d", okv_cache_rows(s.cache, 0), rows);
    CHECK(okv_cache_rows(s.cache, 1) == 0, "flat rows %d, want 0", okv_cache_rows(s.cache, 1));
    for (int32_t pos = 0; pos < total;) {
        int32_t n = 1 + (int32_t)(seq_rand(&s) % (uint64_t)max_write);
        if (pos + n > total) n = total - pos;
        okv_status rc = seq_step(&s, pos, n, &err);
        CHECK_STATUS(rc, OKV_OK, err);
        if (rc != OKV_OK) break;
        pos += n;
    }
    CHECK(okv_cache_rows(s.cache, 0) == rows, "ring grew to %d", okv_cache_rows(s.cache, 0));
    CHECK(s.max_err < TOL, "window %d max_write %d: max err %g", window, max_write, s.max_err);
    seq_free(&s);
}

/* A prefill much wider than the window: one step of 16 tokens on W=5. */
static void wide_prefill(void) {
    okv_layer_geometry geo[1] = {{1, 16, 5, 0}};
    int32_t heads[1] = {2};
    okv_cache_config cfg = {.capacity = 100, .initial_capacity = 4, .max_write = 16, .dtype = OKV_F32};
    seqref s;
    okv_error err;
    if (!seq_init(&s, geo, heads, 1, &cfg, OKV_F16, 5, &err)) { CHECK(0, "%s", err.message); return; }
    CHECK_STATUS(seq_step(&s, 0, 16, &err), OKV_OK, err);
    CHECK_STATUS(seq_step(&s, 16, 16, &err), OKV_OK, err);
    CHECK_STATUS(seq_step(&s, 32, 3, &err), OKV_OK, err);
    CHECK(s.max_err < TOL, "wide prefill max err %g", s.max_err);
    seq_free(&s);
}

/* The planner on a wrapped ring: W=4, max_write=4 gives 7 rows; decode at 7
 * writes row 0 and reads rows 4..6 then 0, from position 4. */
static void plan_cases(void) {
    okv_layer_geometry geo[2] = {{1, 4, 4, 0}, {1, 4, 0, 0}};
    okv_cache_config cfg = {.capacity = 64, .initial_capacity = 0, .max_write = 4, .dtype = OKV_F32};
    okv_error err;
    okv_cache *c = okv_cache_create(geo, 2, &cfg, &err);
    okv_plan p;
    CHECK_STATUS(okv_cache_plan(c, 0, 7, 1, &p, &err), OKV_OK, err);
    CHECK(p.n_write == 1 && p.write[0].start == 0 && p.write[0].len == 1, "write %d:%d+%d", p.n_write,
          p.write[0].start, p.write[0].len);
    CHECK(p.n_read == 2 && p.read[0].start == 4 && p.read[0].len == 3 && p.read[1].start == 0 &&
              p.read[1].len == 1,
          "read %d: %d+%d, %d+%d", p.n_read, p.read[0].start, p.read[0].len, p.read[1].start,
          p.read[1].len);
    CHECK(p.read_base_pos == 4, "base %d", p.read_base_pos);
    /* A 4-token step at 5 writes rows 5,6 then 0,1 and reads 2..6, 0, 1 from 2. */
    CHECK_STATUS(okv_cache_plan(c, 0, 5, 4, &p, &err), OKV_OK, err);
    CHECK(p.n_write == 2 && p.write[0].start == 5 && p.write[0].len == 2 && p.write[1].start == 0 &&
              p.write[1].len == 2,
          "wrapped write");
    CHECK(p.n_read == 2 && p.read[0].start == 2 && p.read[0].len == 5 && p.read[1].start == 0 &&
              p.read[1].len == 2 && p.read_base_pos == 2,
          "wrapped read %d+%d %d+%d base %d", p.read[0].start, p.read[0].len, p.read[1].start,
          p.read[1].len, p.read_base_pos);
    /* Flat: write where the position is, read everything from 0. */
    CHECK_STATUS(okv_cache_plan(c, 1, 10, 3, &p, &err), OKV_OK, err);
    CHECK(p.n_write == 1 && p.write[0].start == 10 && p.write[0].len == 3 && p.n_read == 1 &&
              p.read[0].start == 0 && p.read[0].len == 13 && p.read_base_pos == 0,
          "flat plan");
    /* Plan is pure and checks what begin checks, except the length. */
    CHECK_STATUS(okv_cache_plan(c, 0, 20, 1, &p, &err), OKV_OK, err);
    CHECK(okv_cache_length(c) == 0, "plan changed the length");
    CHECK_STATUS(okv_cache_plan(c, 0, 0, 5, &p, &err), OKV_ERR_POSITION, err);
    CHECK_STATUS(okv_cache_plan(c, 0, -1, 1, &p, &err), OKV_ERR_POSITION, err);
    CHECK_STATUS(okv_cache_plan(c, 0, 62, 3, &p, &err), OKV_ERR_POSITION, err);
    CHECK_STATUS(okv_cache_plan(c, 0, 0, 0, &p, &err), OKV_ERR_INVALID, err);
    CHECK_STATUS(okv_cache_plan(c, 2, 0, 1, &p, &err), OKV_ERR_INVALID, err);
    CHECK_STATUS(okv_cache_plan(c, 0, 0, 1, NULL, &err), OKV_ERR_INVALID, err);
    okv_cache_release(c);
}

/* Pools of 2 and 4 threads give what one thread gives, within 1e-6. */
static void threaded_case(okv_dtype store) {
    okv_layer_geometry geo[2] = {{2, 64, 0, 0}, {2, 32, 6, 0}};
    int32_t heads[2] = {8, 4};
    okv_cache_config cfg = {.capacity = 600, .initial_capacity = 16, .max_write = 32, .dtype = store};
    okv_threadpool *pools[3] = {NULL, okv_threadpool_create(2, NULL), okv_threadpool_create(4, NULL)};
    float *outs[3][2] = {{0}};
    const int32_t steps[] = {32, 32, 32, 32, 32, 32, 32, 32, 32, 32, 32, 32, 32, 32, 32, 32, 1, 1, 5, 1};
    const int32_t n_steps = sizeof steps / sizeof steps[0];
    for (int p = 0; p < 3; p++) {
        seqref s;
        okv_error err;
        if (!seq_init(&s, geo, heads, 2, &cfg, OKV_F32, 99, &err)) { CHECK(0, "%s", err.message); return; }
        s.pool = pools[p];
        int32_t pos = 0;
        for (int32_t i = 0; i < n_steps; i++) {
            CHECK_STATUS(seq_step(&s, pos, steps[i], &err), OKV_OK, err);
            pos += steps[i];
        }
        CHECK(s.max_err < TOL, "pool %d max err %g", p, s.max_err);
        /* One more decode whose outputs we keep, twice for repeatability. */
        for (int rep = 0; rep < 2; rep++) {
            okv_step *st = okv_step_begin(s.cache, &pos, 1, s.pool, &err);
            uint64_t saved = s.rng;
            for (int32_t l = 0; l < 2; l++) {
                size_t nq = (size_t)heads[l] * geo[l].head_dim, nkv = (size_t)geo[l].n_kv_heads * geo[l].head_dim;
                float *q = malloc(nq * 4), *k = malloc(nkv * 4), *v = malloc(nkv * 4), *o = malloc(nq * 4);
                seq_inputs(&s, l, pos, 1, q, k, v);
                okv_update_and_attend(st, l, q, heads[l], k, v, OKV_F32, 0.125f, o, &err);
                if (rep == 0) {
                    outs[p][l] = o;
                } else {
                    CHECK(memcmp(o, outs[p][l], nq * 4) == 0, "pool %d layer %d not bit-identical on repeat", p, l);
                    free(o);
                }
                free(q); free(k); free(v);
            }
            okv_step_abort(st);
            s.rng = saved;
        }
        seq_free(&s);
    }
    for (int p = 1; p < 3; p++) {
        for (int32_t l = 0; l < 2; l++) {
            double worst = 0;
            for (int32_t i = 0; i < heads[l] * geo[l].head_dim; i++) {
                double a = fabs(outs[0][l][i]) > 1 ? fabs(outs[0][l][i]) : 1;
                double e = fabs(outs[p][l][i] - outs[0][l][i]) / a;
                if (e > worst) worst = e;
            }
            CHECK(worst <= 1e-6, "pool %d layer %d differs from 1 thread by %g", p, l, worst);
        }
    }
    for (int p = 0; p < 3; p++) { free(outs[p][0]); free(outs[p][1]); }
    okv_threadpool_free(pools[1]);
    okv_threadpool_free(pools[2]);
}

/* okv_update_and_attend_opts with a soft cap (gemma2) against a naive
 * capped attention in double (the cap is applied to the kernel's scores;
 * test_dense_golden runs gemma2 under every ISA); a bad cap is refused. */
static void softcap_case(void) {
    enum { T = 7, H = 4, KVH = 2, HD = 24 };
    okv_layer_geometry geo[1] = {{KVH, HD, 0, 0}};
    okv_cache_config cfg = {.capacity = 16, .initial_capacity = 4, .max_write = T, .dtype = OKV_F32};
    okv_error err;
    float q[T * H * HD], k[T * KVH * HD], v[T * KVH * HD], out[T * H * HD];
    uint64_t r = 99;
    for (int i = 0; i < T * H * HD; i++) { r = r * 6364136223846793005ull + 1; q[i] = (float)((int)(r >> 40) % 2001 - 1000) / 250.0f; }
    for (int i = 0; i < T * KVH * HD; i++) {
        r = r * 6364136223846793005ull + 1; k[i] = (float)((int)(r >> 40) % 2001 - 1000) / 250.0f;
        r = r * 6364136223846793005ull + 1; v[i] = (float)((int)(r >> 40) % 2001 - 1000) / 1000.0f;
    }
    const float scale = 0.2f, cap = 3.0f;
    okv_cache *c = okv_cache_create(geo, 1, &cfg, &err);
    int32_t pos[T];
    for (int i = 0; i < T; i++) pos[i] = i;
    okv_step *st = c ? okv_step_begin(c, pos, T, NULL, &err) : NULL;
    CHECK(st != NULL, "softcap: step: %s", err.message);
    if (!st) { okv_cache_release(c); return; }
    const okv_attend_opts bad = {.scale = scale, .softcap = -1.0f};
    CHECK(okv_update_and_attend_opts(st, 0, q, H, k, v, OKV_F32, &bad, out, &err) == OKV_ERR_INVALID &&
              strstr(err.message, "softcap"), "a negative cap is refused: %s", err.message);
    okv_step_abort(st);
    st = okv_step_begin(c, pos, T, NULL, &err);
    const okv_attend_opts opts = {.scale = scale, .softcap = cap};
    okv_status rc = okv_update_and_attend_opts(st, 0, q, H, k, v, OKV_F32, &opts, out, &err);
    CHECK_STATUS(rc, OKV_OK, err);
    if (rc == OKV_OK) CHECK_STATUS(okv_step_commit(st, &err), OKV_OK, err);
    else okv_step_abort(st);
    double worst = 0, uncapped_gap = 0;
    for (int t = 0; t < T; t++)
        for (int h = 0; h < H; h++) {
            const int g = h / (H / KVH);
            double w[T], wu[T], sum = 0, sumu = 0, m = -1e300, mu = -1e300;
            for (int j = 0; j <= t; j++) {
                double d = 0;
                for (int x = 0; x < HD; x++) d += (double)q[(t * H + h) * HD + x] * k[(j * KVH + g) * HD + x];
                w[j] = cap * tanh(scale * d / cap);
                wu[j] = scale * d;
                if (w[j] > m) m = w[j];
                if (wu[j] > mu) mu = wu[j];
            }
            for (int j = 0; j <= t; j++) { w[j] = exp(w[j] - m); sum += w[j]; wu[j] = exp(wu[j] - mu); sumu += wu[j]; }
            for (int x = 0; x < HD; x++) {
                double o = 0, ou = 0;
                for (int j = 0; j <= t; j++) {
                    o += w[j] / sum * v[(j * KVH + g) * HD + x];
                    ou += wu[j] / sumu * v[(j * KVH + g) * HD + x];
                }
                worst = fmax(worst, fabs(o - out[(t * H + h) * HD + x]));
                uncapped_gap = fmax(uncapped_gap, fabs(ou - out[(t * H + h) * HD + x]));
            }
        }
    printf("soft cap %g: max |diff| %.3g from a naive capped attention (%.3g from an uncapped one)\n", cap, worst,
           uncapped_gap);
    CHECK(worst < TOL, "softcap: max err %g", worst);
    CHECK(uncapped_gap > 100 * TOL, "softcap: the cap changed nothing (%g)", uncapped_gap);
    okv_cache_release(c);
}

/* Values the API takes that the kernels' base-2 units would push past
 * float's range (0 * inf: NaN outputs) are refused; positions within a
 * block of INT32_MAX (a ring-only cache of capacity INT32_MAX, its rows as
 * okv_cache_load puts them) attend without a signed overflow (UBSan). */
static void extreme_case(void) {
    okv_layer_geometry g = {1, 1, 8, 0};
    okv_cache_config cfg = {.capacity = INT32_MAX, .initial_capacity = 0, .max_write = 8, .dtype = OKV_F32};
    okv_error err;
    okv_cache *c = okv_cache_create(&g, 1, &cfg, &err);
    CHECK(c != NULL, "extreme: create: %s", err.message);
    if (!c) return;
    const int32_t len = INT32_MAX - 20;
    float old[15], q[8] = {0}, k[8], v[8], out[8];
    for (int i = 0; i < 15; i++) old[i] = 1.0f;
    for (int i = 0; i < 8; i++) k[i] = 1.0f, v[i] = 2.0f;
    CHECK_STATUS(okv_cache_write_rows(c, 0, len - 15, 15, old, old, &err), OKV_OK, err);
    okv_cache_set_extent(c, len, len);
    int32_t pos[8];
    for (int i = 0; i < 8; i++) pos[i] = len + i;
    static const struct { float scale, cap; const char *needle; } bad[] = {
        {3e38f, 0.0f, "scale"}, {1.0f, 1e-45f, "softcap"}, {1.0f, -1.0f, "softcap"}};
    for (int b = 0; b < 3; b++) {
        okv_step *st = okv_step_begin(c, pos, 8, NULL, &err);
        const okv_attend_opts o = {.scale = bad[b].scale, .softcap = bad[b].cap};
        CHECK(st && okv_update_and_attend_opts(st, 0, q, 1, k, v, OKV_F32, &o, out, &err) == OKV_ERR_INVALID &&
                  strstr(err.message, bad[b].needle),
              "scale %g softcap %g refused: %s", (double)bad[b].scale, (double)bad[b].cap, err.message);
        okv_step_abort(st);
    }
    okv_step *st = okv_step_begin(c, pos, 8, NULL, &err);
    CHECK(st != NULL, "extreme: step: %s", err.message);
    if (st) {
        CHECK_STATUS(okv_update_and_attend(st, 0, q, 1, k, v, OKV_F32, 1.0f, out, &err), OKV_OK, err);
        /* q = 0: the mean of the visible values; window 8 at len holds 7 old rows */
        CHECK(fabsf(out[0] - 1.125f) < 1e-6f && fabsf(out[7] - 2.0f) < 1e-6f, "near INT32_MAX: %g %g (want 1.125 2)",
              (double)out[0], (double)out[7]);
        CHECK_STATUS(okv_step_commit(st, &err), OKV_OK, err);
    }
    okv_cache_release(c);
}

int main(void) {
    softcap_case();
    extreme_case();
    const int32_t hds[] = {16, 64, 128, 256}, gqas[] = {1, 2, 4};
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 3; j++)
            for (int st = 0; st < 2; st++)
                for (int in = 0; in < 2; in++) growth_case(hds[i], gqas[j], (okv_dtype)st, (okv_dtype)in);
    okv_threadpool *pool2 = okv_threadpool_create(2, NULL);
    const int32_t windows[] = {2, 5, 8};
    for (int w = 0; w < 3; w++) {
        ring_case(windows[w], 1, OKV_F32, NULL, 40);
        ring_case(windows[w], 4, OKV_F16, NULL, 90);
        ring_case(windows[w], 16, OKV_F32, pool2, 120);
    }
    okv_threadpool_free(pool2);
    wide_prefill();
    plan_cases();
    threaded_case(OKV_F32);
    threaded_case(OKV_F16);
    return check_done();
}
