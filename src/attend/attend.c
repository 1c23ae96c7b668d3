/* The attention kernel driver: splits a job into work items, runs them on the
 * pool, and merges row-split partial results.
 *
 * A work item is (kv head g, a block of tokens, a block of that group's
 * heads, a chunk of key rows).  All its queries share the kv head, so each K
 * and V row is read once per item.  Decode (one token block) splits the rows
 * into chunks when the kv heads alone would leave threads idle; chunks keep
 * (max, sum, unnormalized acc) and are merged in chunk order afterwards, so
 * the result depends only on the job and the thread count. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "attend/attend.h"
#include "attend/attend_impl.h"
#include "kernels/f16.h"
#include "kernels/quant.h"
#include "threads/pool.h"

enum {
    QMAX = 64,            /* most queries per item: qs, acc and S stay cache-resident */
    TBMAX = 16,           /* most tokens per item: with a window, wider token blocks
                             scan rows most of their queries mask out */
    MIN_CHUNK_ROWS = 256  /* below this a row chunk costs more to merge than it saves */
};

#define LOG2E 1.4426950408889634f

typedef struct plan {
    int32_t G;              /* q heads per kv head */
    int32_t hb, nhb;        /* heads per item, head blocks per group */
    int32_t tb, ntb;        /* tokens per item, token blocks */
    int32_t nsplit;         /* row chunks per (g, head block) when ntb == 1 */
    int32_t nq;             /* most queries in one item */
    int32_t hdp;            /* head_dim rounded up to 16 floats */
    int64_t n_items;
    size_t ws_floats;       /* per-thread workspace, in floats */
    size_t part_stride;     /* floats per query in the partial area */
} plan;

static int32_t gcd32(int32_t a, int32_t b) {
    while (b) { int32_t t = a % b; a = b; b = t; }
    return a;
}

static size_t round16(size_t n) { return (n + 15) & ~(size_t)15; }

/* Lowest position query position p may read. */
static int32_t first_visible(const okv_attend_job *j, int32_t p) {
    int32_t lo = j->window > 0 ? p - j->window + 1 : 0;
    return lo > j->lo_pos ? lo : j->lo_pos;
}

static int job_ok(const okv_attend_job *j, int32_t nth) {
    return j && nth >= 1 && j->n_kv_heads >= 1 && j->n_heads >= j->n_kv_heads &&
           j->n_heads % j->n_kv_heads == 0 && j->head_dim >= 1 && j->n_tokens >= 1 &&
           j->rows >= 1 &&
           (j->dtype == OKV_F32 || j->dtype == OKV_F16 || j->dtype == OKV_Q8_0);
}

static void make_plan(const okv_attend_job *j, int32_t nth, plan *p) {
    p->G = j->n_heads / j->n_kv_heads;
    p->hb = p->G < QMAX ? p->G : QMAX;
    p->nhb = (p->G + p->hb - 1) / p->hb;
    p->tb = QMAX / p->hb;
    if (p->tb > TBMAX) p->tb = TBMAX;
    if (p->tb > j->n_tokens) p->tb = j->n_tokens;
    p->ntb = (j->n_tokens + p->tb - 1) / p->tb;
    p->nq = p->tb * p->hb;
    p->hdp = (int32_t)round16((size_t)j->head_dim);
    int64_t base = (int64_t)j->n_kv_heads * p->nhb * p->ntb;
    p->nsplit = 1;
    if (p->ntb == 1 && nth > 1) {
        /* Enough chunks that the item count is a multiple of nth. */
        int32_t b = (int32_t)(base % nth);
        int32_t s = nth / gcd32(b ? b : nth, nth);
        int32_t p_last = j->start + j->n_tokens - 1;
        int64_t len = (int64_t)p_last - first_visible(j, j->start) + 1;
        int64_t cap = len / MIN_CHUNK_ROWS;
        if (s > cap) s = cap < 1 ? 1 : (int32_t)cap;
        p->nsplit = s;
    }
    p->n_items = base * p->nsplit;
    /* qs, acc: nq * hdp each; S: nq * BR; m, l, corr: nq each; lo, hi: nq
     * int32 each; for q8_0 storage, a block of K and one of V widened to f32 */
    p->ws_floats = 2 * round16((size_t)p->nq * p->hdp) + round16((size_t)p->nq * OKV_ATTEND_BR) +
                   5 * round16((size_t)p->nq) +
                   (j->dtype == OKV_Q8_0 ? 2 * round16((size_t)OKV_ATTEND_BR * j->head_dim) : 0);
    p->part_stride = (size_t)p->hdp + 16;
}

size_t okv_attend_scratch_bytes(const okv_attend_job *job, int32_t nth) {
    if (!job_ok(job, nth)) return 0;
    plan p;
    make_plan(job, nth, &p);
    size_t n = (size_t)nth * p.ws_floats;
    if (p.nsplit > 1) n += (size_t)p.n_items * p.nq * p.part_stride;
    return n * sizeof(float);
}

typedef struct attend_ctx {
    const okv_attend_job *job;
    const okv_attend_kernels *kern;
    okv_isa isa;
    plan p;
    float *scratch;   /* nth workspaces, then the partial area */
    float *part;
} attend_ctx;

/* Gemma 2's attention logit soft-capping of a block of scores: as ggml
 * computes it (scale by 1/cap, tanh, scale by cap), then into base-2 units. */
static void soft_cap(float *S, int32_t nq, int32_t nr, float cap) {
    const float inv = 1.0f / cap;
    for (int32_t i = 0; i < nq; i++)
        for (int32_t r = 0; r < nr; r++) {
            float *s = S + (size_t)i * OKV_ATTEND_BR + r;
            *s = tanhf(*s * inv) * cap * LOG2E;
        }
}

/* A sink logit (natural units, not scaled) joins a query's denominator: with
 * the running max m and sum l (log2 units), the new max is max(m, sink),
 * the sum l 2^(m - max) + 2^(sink - max), and the accumulator is scaled by
 * 2^(m - max).  Done once per query, after every row, in scalar code that
 * every ISA shares, so the kernels need not know. */
static void add_sink(float sink, float m, float *l, float *acc_scale) {
    const float s2 = sink * LOG2E;
    const float mx = m > s2 ? m : s2;
    const float c = *l > 0.0f ? okv_attend_exp2_scalar(m - mx) : 0.0f;
    *l = *l * c + okv_attend_exp2_scalar(s2 - mx);
    *acc_scale = c;
}

static void run_item(const attend_ctx *c, int64_t it, float *ws) {
    const okv_attend_job *j = c->job;
    const plan *p = &c->p;
    const int32_t hd = j->head_dim, hdp = p->hdp, BR = OKV_ATTEND_BR;
    const int32_t chunk = (int32_t)(it % p->nsplit);
    int64_t rest = it / p->nsplit;
    const int32_t hbi = (int32_t)(rest % p->nhb);
    rest /= p->nhb;
    const int32_t tbi = (int32_t)(rest % p->ntb);
    const int32_t g = (int32_t)(rest / p->ntb);

    const int32_t t0 = tbi * p->tb, nt = j->n_tokens - t0 < p->tb ? j->n_tokens - t0 : p->tb;
    const int32_t h0 = g * p->G + hbi * p->hb;
    const int32_t nh = p->G - hbi * p->hb < p->hb ? p->G - hbi * p->hb : p->hb;
    const int32_t nq = nt * nh;

    float *qs = ws, *acc = qs + round16((size_t)p->nq * hdp);
    float *S = acc + round16((size_t)p->nq * hdp);
    float *m = S + round16((size_t)p->nq * BR), *l = m + round16((size_t)p->nq);
    float *corr = l + round16((size_t)p->nq);
    int32_t *qlo = (int32_t *)(corr + round16((size_t)p->nq));
    int32_t *qhi = qlo + round16((size_t)p->nq);
    float *wk = (float *)(qhi + round16((size_t)p->nq)), *wv = wk + round16((size_t)BR * hd);

    /* Scores come out in base-2 units (the kernels use exp2); a soft cap
     * needs them in natural units first, as llama.cpp caps them. */
    const float qscale = j->softcap > 0.0f ? j->scale : j->scale * LOG2E;
    for (int32_t tt = 0; tt < nt; tt++) {
        const int32_t pos = j->start + t0 + tt;
        for (int32_t hh = 0; hh < nh; hh++) {
            const int32_t i = tt * nh + hh;
            const float *q = j->q + ((int64_t)(t0 + tt) * j->n_heads + h0 + hh) * hd;
            float *qd = qs + (size_t)i * hdp;
            for (int32_t d = 0; d < hd; d++) qd[d] = q[d] * qscale;
            for (int32_t d = hd; d < hdp; d++) qd[d] = 0.0f;
            memset(acc + (size_t)i * hdp, 0, (size_t)hdp * sizeof(float));
            m[i] = -INFINITY;
            l[i] = 0.0f;
            qlo[i] = first_visible(j, pos);
            qhi[i] = pos;
        }
    }

    /* The item's key range: the union of its queries' ranges, then this chunk of it. */
    int32_t a = qlo[0], b = j->start + t0 + nt - 1;
    if (p->nsplit > 1) {
        const int64_t len = (int64_t)b - a + 1;
        const int32_t a0 = a;
        a = a0 + (int32_t)(len * chunk / p->nsplit);
        b = a0 + (int32_t)(len * (chunk + 1) / p->nsplit) - 1;
    }

    const size_t row_bytes = j->dtype == OKV_Q8_0 ? ((size_t)hd + 31) / 32 * sizeof(block_q8_0)
                             : (size_t)hd * (j->dtype == OKV_F16 ? sizeof(okv_f16) : sizeof(float));
    const int f16 = j->dtype == OKV_F16, q8 = j->dtype == OKV_Q8_0;
    const char *kbase = (const char *)j->k + (size_t)g * j->rows * row_bytes;
    const char *vbase = (const char *)j->v + (size_t)g * j->rows * row_bytes;
    /* Blocks are cut at multiples of BR positions (and at the ring's wrap),
     * and position x sits in lane x % BR of S: the vector kernels sum a
     * block's weights lane-wise, then across lanes, so with blocks counted
     * from a, which is the first visible row of the item's first query, a
     * query's denominator was rounded differently when other queries shared
     * its step (a rewound cache re-evaluating fewer tokens than a fresh one).
     * Where its rows lie in S now follows from their positions alone. */
    for (int32_t x = a; x <= b;) {
        const int32_t phys = j->ring ? x % j->rows : x;
        const int32_t off = x % BR;
        int32_t nr = b - x + 1 < BR - off ? b - x + 1 : BR - off;
        if (j->ring && nr > j->rows - phys) nr = j->rows - phys;  /* stop at the wrap */
        const char *kb = kbase + (size_t)phys * row_bytes, *vb = vbase + (size_t)phys * row_bytes;
        if ((int64_t)x + nr + BR - 1 <= b) { /* 64 bits: b may lie within a block of INT32_MAX */
            /* Touch the next block while this one computes.  The hardware
             * streamers stall at every 4 KiB page and K and V are two streams
             * per head; measured here, a whole block ahead into L1 lifted
             * DRAM-bound decode ~25% (f16, 64k rows) and f32 more, and cost
             * ~10% where the rows sat in L3 (f16, 16k rows). */
            const int32_t px = x + nr, pp = j->ring ? px % j->rows : px;
            int32_t pn = BR - px % BR;
            if (j->ring && pn > j->rows - pp) pn = j->rows - pp;
            const char *kn = kbase + (size_t)pp * row_bytes, *vn = vbase + (size_t)pp * row_bytes;
            const size_t span = (size_t)pn * row_bytes;
            for (size_t o = 0; o < span; o += 64) {
                __builtin_prefetch(kn + o, 0, 3);
                __builtin_prefetch(vn + o, 0, 3);
            }
        }
        if (q8) {
            okv_attend_widen_q8(kb, hd, nr, wk, c->isa);
            kb = (const char *)wk;
        }
        c->kern->scores(qs, nq, hdp, kb, f16, hd, nr, S + off);
        if (j->softcap > 0.0f) soft_cap(S + off, nq, nr, j->softcap);
        for (int32_t i = 0; i < nq; i++) {
            int32_t lo = qlo[i] - x, hi = qhi[i] - x;
            if (lo < 0) lo = 0;
            if (hi > nr - 1) hi = nr - 1;
            lo += off;
            hi += off;
            if (lo > hi) {
                /* Nothing visible to this query here: zero weights, no rescale. */
                memset(S + (size_t)i * BR, 0, (size_t)BR * sizeof(float));
                corr[i] = 1.0f;
            } else {
                corr[i] = c->kern->softmax(S + (size_t)i * BR, lo, hi, &m[i], &l[i]);
            }
        }
        if (q8) {
            okv_attend_widen_q8(vb, hd, nr, wv, c->isa);
            vb = (const char *)wv;
        }
        c->kern->accum(acc, nq, hdp, S + off, corr, vb, f16, hd, nr);
        x += nr;
    }

    if (p->nsplit > 1) {
        float *dst = c->part + (size_t)it * p->nq * p->part_stride;
        for (int32_t i = 0; i < nq; i++) {
            float *e = dst + (size_t)i * p->part_stride;
            e[0] = m[i];
            e[1] = l[i];
            memcpy(e + 16, acc + (size_t)i * hdp, (size_t)hd * sizeof(float));
        }
        return;
    }
    for (int32_t tt = 0; tt < nt; tt++)
        for (int32_t hh = 0; hh < nh; hh++) {
            const int32_t i = tt * nh + hh;
            float *o = j->out + ((int64_t)(t0 + tt) * j->n_heads + h0 + hh) * hd;
            /* l > 0 whenever the query sees itself; a job with lo_pos above a
             * query's position would leave it empty, and it then reads zeros. */
            float scale_acc = 1.0f, L = l[i];
            if (j->sinks) add_sink(j->sinks[h0 + hh], m[i], &L, &scale_acc);
            const float inv = L > 0.0f ? scale_acc / L : 0.0f;
            const float *ac = acc + (size_t)i * hdp;
            for (int32_t d = 0; d < hd; d++) o[d] = ac[d] * inv;
        }
}

static void attend_job_fn(void *arg, int32_t ith, int32_t nth) {
    const attend_ctx *c = arg;
    float *ws = c->scratch + (size_t)ith * c->p.ws_floats;
    /* Strided assignment: causal prefill items grow with the token block, and
     * striding spreads cheap and dear ones evenly. */
    for (int64_t it = ith; it < c->p.n_items; it += nth) run_item(c, it, ws);
}

/* Merges the row chunks of every (kv head, head block), chunk 0 first. */
static void merge_chunks(const attend_ctx *c) {
    const okv_attend_job *j = c->job;
    const plan *p = &c->p;
    const int32_t hd = j->head_dim, nt = j->n_tokens;
    for (int64_t base = 0; base < p->n_items / p->nsplit; base++) {
        const int32_t hbi = (int32_t)(base % p->nhb), g = (int32_t)(base / p->nhb);
        const int32_t h0 = g * p->G + hbi * p->hb;
        const int32_t nh = p->G - hbi * p->hb < p->hb ? p->G - hbi * p->hb : p->hb;
        const float *items = c->part + (size_t)base * p->nsplit * p->nq * p->part_stride;
        for (int32_t tt = 0; tt < nt; tt++)
            for (int32_t hh = 0; hh < nh; hh++) {
                const size_t qoff = (size_t)(tt * nh + hh) * p->part_stride;
                const size_t istride = (size_t)p->nq * p->part_stride;
                float M = -INFINITY;
                for (int32_t s = 0; s < p->nsplit; s++) {
                    const float *e = items + s * istride + qoff;
                    if (e[1] > 0.0f && e[0] > M) M = e[0];
                }
                float *o = j->out + ((int64_t)tt * j->n_heads + h0 + hh) * hd;
                for (int32_t d = 0; d < hd; d++) o[d] = 0.0f;
                float L = 0.0f;
                for (int32_t s = 0; s < p->nsplit; s++) {
                    const float *e = items + s * istride + qoff;
                    if (!(e[1] > 0.0f)) continue;  /* chunk saw none of this query's rows */
                    const float w = okv_attend_exp2_scalar(e[0] - M);
                    L += w * e[1];
                    for (int32_t d = 0; d < hd; d++) o[d] += w * e[16 + d];
                }
                float scale_acc = 1.0f;
                if (j->sinks) add_sink(j->sinks[h0 + hh], M, &L, &scale_acc);
                const float inv = L > 0.0f ? scale_acc / L : 0.0f;
                for (int32_t d = 0; d < hd; d++) o[d] *= inv;
            }
    }
}

void okv_attend_run(const okv_attend_job *job, okv_threadpool *pool, void *scratch, okv_isa isa) {
    const int32_t nth = okv_threadpool_size(pool);
    if (!job_ok(job, nth) || !scratch) return;
    attend_ctx c;
    c.job = job;
    c.kern = &okv_attend_kernels_scalar;
    c.isa = OKV_ISA_SCALAR;
#ifdef OKV_ATTEND_HAVE_X86
    /* the VNNI levels are the level they extend here: attention has no
     * 8-bit dot products */
    if ((isa == OKV_ISA_AVX512 || isa == OKV_ISA_AVX512_VNNI) && okv_cpu_has_isa(OKV_ISA_AVX512)) {
        c.kern = &okv_attend_kernels_avx512;
        c.isa = OKV_ISA_AVX512;
    } else if (okv_isa_is_x86(isa) && okv_cpu_has_isa(OKV_ISA_AVX2)) {
        c.kern = &okv_attend_kernels_avx2;
        c.isa = OKV_ISA_AVX2;
    }
#elif defined(OKV_ARM)
    /* every ARM level runs the NEON kernels: attention has no 8-bit products */
    if (okv_isa_is_arm(isa) && okv_cpu_has_isa(OKV_ISA_NEON)) {
        c.kern = &okv_attend_kernels_neon;
        c.isa = OKV_ISA_NEON;
    }
#else
    (void)isa;
#endif
    make_plan(job, nth, &c.p);
    c.scratch = scratch;
    c.part = c.scratch + (size_t)nth * c.p.ws_floats;
    okv_parallel(pool, attend_job_fn, &c);
    if (c.p.nsplit > 1) merge_chunks(&c);
}

/* ---- Scalar kernels: the fallback, written for clarity over speed. ---- */

static float load_elem(const void *base, int f16, int64_t i) {
    return f16 ? okv_f16_to_f32(((const okv_f16 *)base)[i]) : ((const float *)base)[i];
}

static void scores_scalar(const float *qs, int32_t nq, int32_t hdp, const void *k, int f16,
                          int32_t hd, int32_t nr, float *S) {
    for (int32_t r = 0; r < nr; r++)
        for (int32_t q = 0; q < nq; q++) {
            const float *qv = qs + (size_t)q * hdp;
            float s = 0.0f;
            for (int32_t d = 0; d < hd; d++) s += qv[d] * load_elem(k, f16, (int64_t)r * hd + d);
            S[(size_t)q * OKV_ATTEND_BR + r] = s;
        }
}

static float softmax_scalar(float *s, int32_t lo, int32_t hi, float *m, float *l) {
    float mb = s[lo];
    for (int32_t r = lo + 1; r <= hi; r++) mb = s[r] > mb ? s[r] : mb;
    const float m_new = mb > *m ? mb : *m;
    const float corr = okv_attend_exp2_scalar(*m - m_new);
    float sum = 0.0f;
    for (int32_t r = 0; r < OKV_ATTEND_BR; r++) {
        const float w = r >= lo && r <= hi ? okv_attend_exp2_scalar(s[r] - m_new) : 0.0f;
        s[r] = w;
        sum += w;
    }
    *l = *l * corr + sum;
    *m = m_new;
    return corr;
}

static void accum_scalar(float *acc, int32_t nq, int32_t hdp, const float *P, const float *corr,
                         const void *v, int f16, int32_t hd, int32_t nr) {
    for (int32_t q = 0; q < nq; q++) {
        float *a = acc + (size_t)q * hdp;
        for (int32_t d = 0; d < hd; d++) a[d] *= corr[q];
    }
    for (int32_t r = 0; r < nr; r++)
        for (int32_t d = 0; d < hd; d++) {
            const float x = load_elem(v, f16, (int64_t)r * hd + d);
            for (int32_t q = 0; q < nq; q++)
                acc[(size_t)q * hdp + d] += P[(size_t)q * OKV_ATTEND_BR + r] * x;
        }
}

const okv_attend_kernels okv_attend_kernels_scalar = {scores_scalar, softmax_scalar, accum_scalar};
