/* First, plain version of the attention kernel: one (token, head) at a time,
 * online softmax over the visible rows.  The SIMD kernels replace it. */
#include <math.h>

#include "attend/attend.h"
#include "kernels/f16.h"
#include "threads/pool.h"

size_t okv_attend_scratch_bytes(const okv_attend_job *job, int32_t nth) {
    return (size_t)nth * (size_t)job->head_dim * 2 * sizeof(float);
}

typedef struct attend_ctx {
    const okv_attend_job *job;
    float *scratch;
} attend_ctx;

static void load_row(float *dst, const void *base, okv_dtype dt, int64_t off, int32_t n) {
    if (dt == OKV_F32) {
        const float *s = (const float *)base + off;
        for (int32_t i = 0; i < n; i++) dst[i] = s[i];
    } else {
        const okv_f16 *s = (const okv_f16 *)base + off;
        for (int32_t i = 0; i < n; i++) dst[i] = okv_f16_to_f32(s[i]);
    }
}

static void attend_job(void *arg, int32_t ith, int32_t nth) {
    const attend_ctx *ac = arg;
    const okv_attend_job *j = ac->job;
    const int32_t hd = j->head_dim, group = j->n_heads / j->n_kv_heads;
    float *row = ac->scratch + (size_t)ith * hd * 2, *acc = row + hd;
    const int64_t n_items = (int64_t)j->n_tokens * j->n_heads;
    for (int64_t it = ith; it < n_items; it += nth) {
        const int32_t t = (int32_t)(it / j->n_heads), h = (int32_t)(it % j->n_heads);
        const int32_t g = h / group, p = j->start + t;
        int32_t lo = j->window > 0 ? p - j->window + 1 : 0;
        if (lo < j->lo_pos) lo = j->lo_pos;
        const float *q = j->q + it * hd;
        float m = -INFINITY, l = 0.0f;
        for (int32_t i = 0; i < hd; i++) acc[i] = 0.0f;
        for (int32_t kp = lo; kp <= p; kp++) {
            const int32_t r = j->ring ? kp % j->rows : kp;
            const int64_t off = ((int64_t)g * j->rows + r) * hd;
            load_row(row, j->k, j->dtype, off, hd);
            float s = 0.0f;
            for (int32_t i = 0; i < hd; i++) s += q[i] * row[i];
            s *= j->scale;
            const float m_new = s > m ? s : m;
            const float corr = expf(m - m_new), w = expf(s - m_new);
            load_row(row, j->v, j->dtype, off, hd);
            for (int32_t i = 0; i < hd; i++) acc[i] = acc[i] * corr + w * row[i];
            l = l * corr + w;
            m = m_new;
        }
        float *o = j->out + it * hd;
        for (int32_t i = 0; i < hd; i++) o[i] = acc[i] / l;
    }
}

void okv_attend_run(const okv_attend_job *job, okv_threadpool *pool, void *scratch, okv_isa isa) {
    (void)isa;
    attend_ctx ac = {job, scratch};
    okv_parallel(pool, attend_job, &ac);
}
