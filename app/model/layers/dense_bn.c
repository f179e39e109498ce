#include "app/model/layers/dense_bn.h"

#include "app/model/layers/bn_sets.h"
#include "kernels/base/spk_assert.h"

#define DENSE_BN_EPS      1e-5f
#define DENSE_BN_MOMENTUM 0.1f

// By groups (--invariant-bn group) every group is a batch of its own through the default mode's
// kernels, as the plain mode's rank batch: its statistics set i at i * ldm, its readers' sums S1,
// S2 at i * 2 cap, its parameters' gradients one float term each. On every backend: the dense
// kernels' sums follow an order fixed by a group's rows and channels alone (on GPUs,
// kernels/cuda/dense_bn.cu), where the other BatchNorms' need model_bn_by_default_kernels.
static int dense_by_groups(const model_t *m) { return m->bn_by_group; }

model_dense_sums_t model_dense_sums(const model_t *m, int cap, int B) {
    const int by_groups = dense_by_groups(m);
    model_dense_sums_t s = {cap, by_groups ? B / m->group : 1, NULL, xsum_none()};
    s.f = model_buf(m, 2 * (size_t)cap * (size_t)s.sets);
    if (m->invariant && !by_groups) s.x = model_xsum(m, 2 * (int64_t)cap);
    return s;
}

void model_dense_sums_free(const model_t *m, model_dense_sums_t *s) {
    model_buf_free(m, &s->f);
    model_xsum_free(m, &s->x);
    s->cap = s->sets = 0;
}

void model_dense_sums_zero(model_t *m, model_dense_sums_t *s) {
    m->be->vec_zero(s->f, 2 * (size_t)s->cap * (size_t)s->sets);
    if (!xsum_empty(s->x)) m->be->xsum_zero(s->x, 2 * (int64_t)s->cap);
}

// Rows the statistics are over: this rank's, the global batch's, or a group's.
static int64_t dense_rows(const model_t *m, int B, int HW) {
    return (!m->invariant ? B : dense_by_groups(m) ? m->group : m->global_batch) * (int64_t)HW;
}

// The plain mode's statistics of B samples: their sums shifted by their own mean, from a first
// pass (a rank's running statistics are its own, rank 0's rule from a checkpoint on).
static void batch_stats(model_t *m, float *mean, float *var, const float *x, int ld, int B, int HW, int C,
                        float *part) {
    const spk_backend_t *K = m->be;
    const float *s1 = part, *s2 = part + C;
    float *batch_mean = part + 2 * (size_t)C;
    K->dense_bn_stats_partial(part, x, ld, NULL, B, HW, C, B);
    K->dense_bn_stats_finish(batch_mean, var, NULL, NULL, s1, s2, NULL, (int64_t)B * HW, C, 0.0f);
    K->dense_bn_stats_partial(part, x, ld, batch_mean, B, HW, C, B);
    K->dense_bn_stats_finish(mean, var, NULL, NULL, s1, s2, batch_mean, (int64_t)B * HW, C, DENSE_BN_MOMENTUM);
}

void model_dense_bn_stats(model_t *m, float *mean, float *var, int ldm, const float *x, int ld, const float *shift,
                          int B, int HW, int C, float *part) {
    const spk_backend_t *K = m->be;
    if (!m->invariant || dense_by_groups(m)) {
        const bn_sets_t g = model_bn_sets(m, B);
        for (int i = 0; i < g.sets; i++)
            batch_stats(m, mean + (size_t)i * ldm, var + (size_t)i * ldm, x + (size_t)i * g.samples * HW * ld, ld,
                        g.samples, HW, C, part);
        return;
    }
    const int groups = B / m->group;
    K->dense_bn_stats_partial(part, x, ld, shift, B, HW, C, m->group);
    const xsum_t s = model_bn_stats_sums(m, 2 * (int64_t)C);
    K->xsum_add(s, part, groups, C, 1);
    K->xsum_add(xsum_at(s, C), part + (size_t)groups * C, groups, C, 1);
    model_exact_allreduce(m, s, 2 * (int64_t)C);
    K->xsum_to_float(part, s, 2 * (int64_t)C);
    K->dense_bn_stats_finish(mean, var, NULL, NULL, part, part + C, shift, dense_rows(m, B, HW), C, DENSE_BN_MOMENTUM);
}

void model_dense_bn_running(model_t *m, int64_t running_mean, int64_t running_var, const float *mean, const float *var,
                            int B, int HW, int C) {
    if (dense_by_groups(m) && !model_bn_set_runs(m, 0)) return;  // (the global batch's first group's, as bn_set's)
    m->be->dense_bn_running_update(m->state + running_mean, m->state + running_var, mean, var, dense_rows(m, B, HW), C,
                                   DENSE_BN_MOMENTUM);
}

void model_dense_bn_relu_forward(model_t *m, float *z, spk_bf16 *zh, int ldz, const float *x, int ldx,
                                 const float *mean, const float *var, int ldm, int64_t w, int64_t b, int B, int HW,
                                 int C) {
    const bn_sets_t g = ldm ? model_bn_sets(m, B) : (bn_sets_t){1, B, B};
    for (int i = 0; i < g.sets; i++) {
        const size_t r = (size_t)i * g.samples * HW;
        m->be->dense_bn_relu_forward(z ? z + r * ldz : NULL, zh ? zh + r * ldz : NULL, ldz, x + r * ldx, ldx,
                                     mean + (size_t)i * ldm, var + (size_t)i * ldm, m->params + w, m->params + b,
                                     g.samples * HW, C, DENSE_BN_EPS);
    }
}

void model_dense_bn_backward(model_t *m, float *g, int ldg, int accumulate, model_dense_sums_t *s, int64_t w, int64_t b,
                             const float *dz, int ldz, const float *x, int ldx, const float *mean, const float *var,
                             int ldm, int B, int HW, int C, float *part) {
    const spk_backend_t *K = m->be;
    if (dense_by_groups(m)) {
        const bn_sets_t q = model_bn_sets(m, B);
        for (int i = 0; i < q.sets; i++) {
            const size_t r = (size_t)i * q.samples * HW;
            float *f = s->f + (size_t)i * 2 * s->cap;
            K->dense_bn_relu_backward(g + r * ldg, ldg, accumulate, part, dz + r * ldz, ldz, x + r * ldx, ldx,
                                      mean + (size_t)i * ldm, var + (size_t)i * ldm, m->params + w, m->params + b,
                                      q.samples, HW, C, DENSE_BN_EPS, q.samples);
            K->xsum_add(model_xgrad(m, b), part, 1, C, 1);
            K->xsum_add(model_xgrad(m, w), part + C, 1, C, 1);
            K->vec_acc(f, part + 2 * (size_t)C, (size_t)C);
            K->vec_acc(f + s->cap, part + 3 * (size_t)C, (size_t)C);
        }
        return;
    }
    const int group = m->invariant ? m->group : B, groups = B / group;
    K->dense_bn_relu_backward(g, ldg, accumulate, part, dz, ldz, x, ldx, mean, var, m->params + w, m->params + b, B, HW,
                              C, DENSE_BN_EPS, group);
    const float *q[4];  // the sums of m, m xhat, and those times the weight, (groups, C) each
    for (int i = 0; i < 4; i++) q[i] = part + (size_t)i * groups * C;
    if (!m->invariant) {
        K->vec_acc(m->grads + b, q[0], (size_t)C);
        K->vec_acc(m->grads + w, q[1], (size_t)C);
        K->vec_acc(s->f, q[2], (size_t)C);
        K->vec_acc(s->f + s->cap, q[3], (size_t)C);
        return;
    }
    K->xsum_add(model_xgrad(m, b), q[0], groups, C, 1);
    K->xsum_add(model_xgrad(m, w), q[1], groups, C, 1);
    K->xsum_add(s->x, q[2], groups, C, 1);
    K->xsum_add(xsum_at(s->x, s->cap), q[3], groups, C, 1);
}

void model_dense_bn_input_grad(model_t *m, float *dx, int lddx, const float *g, int ldg, const float *x, int ldx,
                               const float *mean, const float *var, int ldm, model_dense_sums_t *s, int c0, int B,
                               int HW, int C) {
    const spk_backend_t *K = m->be;
    if (!xsum_empty(s->x)) {  // the global batch's: reduced over the ranks
        for (int i = 0; i < 2; i++) {
            const xsum_t t = xsum_at(s->x, (int64_t)i * s->cap + c0);
            model_exact_allreduce(m, t, C);
            K->xsum_to_float(s->f + (size_t)i * s->cap + c0, t, C);
        }
    }
    const bn_sets_t q = dense_by_groups(m) ? model_bn_sets(m, B) : (bn_sets_t){1, B, B};
    for (int i = 0; i < q.sets; i++) {
        const size_t r = (size_t)i * q.samples * HW;
        const float *f = s->f + (size_t)i * 2 * s->cap + c0;
        K->dense_bn_input_grad(dx + r * lddx, lddx, 0, g + r * ldg, ldg, x + r * ldx, ldx, mean + (size_t)i * ldm,
                               var + (size_t)i * ldm, f, f + s->cap, dense_rows(m, B, HW), q.samples * HW, C,
                               DENSE_BN_EPS);
    }
}
