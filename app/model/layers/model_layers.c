// The layers' calls that differ in the world-size-invariant mode (app/model/layers/model_layers.h):
// parameter gradients and BatchNorm in training. By default each is the kernel call the models
// always made; in the mode, every sample's contribution goes to exact sums (kernels/exact_sum.h)
// and BatchNorm's statistics and gradient sums are reduced over all ranks through
// m->exact_allreduce.
#include "app/model/layers/model_layers.h"

#include "kernels/base/spk_assert.h"

// ---- gradients --------------------------------------------------------------------------------

static xsum_t xgrad(const model_t *m, int64_t off) { return off < 0 ? xsum_none() : xsum_at(m->xgrads, off); }

void model_conv1d_backward(model_t *m, float *dx, int64_t w, int64_t b, const float *dy, const float *x,
                           const spk_bf16 *xh, int B, int Cin, int Cout, int T, int K, int dilation, float *work) {
    const float *p = m->params;
    float *gr = m->grads;
    if (m->bf16)  // the forward's rounded input stands in for x
        m->be->conv1d_bf16_backward(dx, gr + w, b < 0 ? NULL : gr + b, dy, xh, m->params_bf16 + w, B, Cin, Cout, T, K,
                                    dilation, work);
    else if (!m->invariant)
        m->be->conv1d_backward(dx, gr + w, b < 0 ? NULL : gr + b, dy, x, p + w, B, Cin, Cout, T, K, dilation, work);
    else
        m->be->conv1d_backward_exact(dx, gr + w, xgrad(m, w), xgrad(m, b), dy, x, p + w, B, Cin, Cout, T, K, dilation,
                                     work, m->group);
}

void model_linear_backward(model_t *m, float *dx, int64_t w, int64_t b, const float *dy, const float *x, int B, int In,
                           int Out) {
    const spk_backend_t *K = m->be;
    const float *p = m->params;
    float *gr = m->grads;
    if (!m->invariant) {
        K->linear_backward(dx, gr + w, b < 0 ? NULL : gr + b, dy, x, p + w, B, In, Out);
        return;
    }
    if (dx) K->spk_sgemm('N', 'N', B, In, Out, 1.0f, dy, Out, p + w, In, 1.0f, dx, In);  // row by row
    // dW += dy_i^T x_i for every sample i (outer products), db += dy_i
    K->spk_sgemm_batched_exact('T', 'N', Out, In, 1, dy, Out, Out, x, In, In, gr + w, xgrad(m, w), In, B, m->group);
    if (b >= 0) K->xsum_add(xgrad(m, b), dy, B, Out, m->group);
}

void model_gemm_grad_exact(model_t *m, char transa, char transb, int M, int N, int K, const float *A, int lda,
                           int64_t strideA, const float *Bm, int ldb, int64_t strideB, int64_t c, int ldc, int batch) {
    m->be->spk_sgemm_batched_exact(transa, transb, M, N, K, A, lda, strideA, Bm, ldb, strideB, m->grads + c,
                                   xgrad(m, c), ldc, batch, m->group);
}

void model_rows_grad_exact(model_t *m, int64_t c, const float *x, int rows, int64_t n) {
    m->be->xsum_add(xgrad(m, c), x, rows, n, m->group);
}

// ---- BatchNorm --------------------------------------------------------------------------------

// Room for n BatchNorm sums (grown once, on the first step).
static xsum_t stats_sums(model_t *m, int64_t n) {
    if (n > m->xstats_cap) {
        model_xsum_free(m, &m->xstats);
        m->xstats = model_xsum(m, n);
        m->xstats_cap = n;
    }
    m->be->xsum_zero(m->xstats, n);
    return m->xstats;
}

void model_batchnorm_train(model_t *m, float *y, float *mean, float *rstd, int64_t running_mean, int64_t running_var,
                           const float *x, int64_t w, int64_t b, int B, int C, int T, float eps, float momentum) {
    const spk_backend_t *K = m->be;
    const float *p = m->params;
    float *rm = m->state + running_mean, *rv = m->state + running_var;
    if (!m->invariant) {
        K->batchnorm1d_forward_train(y, mean, rstd, rm, rv, x, p + w, p + b, B, C, T, eps, momentum);
        return;
    }
    const xsum_t s = stats_sums(m, 2 * (int64_t)C);
    K->batchnorm1d_stats_partial(s, x, rm, B, C, T, m->group);
    model_exact_allreduce(m, s, 2 * (int64_t)C);
    K->batchnorm1d_forward_global(y, mean, rstd, rm, rv, x, p + w, p + b, s, m->global_batch * T, B, C, T, eps,
                                  momentum);
}

void model_batchnorm_backward(model_t *m, float *dx, int64_t w, int64_t b, const float *dy, const float *x,
                              const float *mean, const float *rstd, int B, int C, int T) {
    const spk_backend_t *K = m->be;
    const float *p = m->params;
    float *gr = m->grads;
    if (!m->invariant) {
        K->batchnorm1d_backward(dx, gr + w, gr + b, dy, x, p + w, mean, rstd, B, C, T);
        return;
    }
    const xsum_t s = stats_sums(m, 2 * (int64_t)C);
    K->batchnorm1d_backward_partial(s, xgrad(m, w), xgrad(m, b), dy, x, mean, rstd, B, C, T, m->group);
    model_exact_allreduce(m, s, 2 * (int64_t)C);
    if (dx) K->batchnorm1d_backward_global(dx, dy, x, p + w, mean, rstd, s, m->global_batch * T, B, C, T);
}

// ---- the 2-D layers (channels-last, app/model/layers/conv2d_bn.h) -------------------------------

void model_conv2d_backward(model_t *m, float *dx, int dx_accumulate, int64_t w, const float *dy, const float *x,
                           const spk_bf16 *xh, const conv2d_shape_t *s, float *work) {
    const spk_backend_t *K = m->be;
    float *gr = m->grads;
    if (m->bf16)  // the forward's rounded input stands in for x
        K->conv2d_bf16_backward(dx, dx_accumulate, gr + w, NULL, dy, xh, m->params_bf16 + w, s, work);
    else if (!m->invariant)
        K->conv2d_backward(dx, dx_accumulate, gr + w, NULL, dy, x, m->params + w, s, work);
    else  // the gradient buffer is the exact sums' scratch
        K->conv2d_backward_exact(dx, dx_accumulate, gr + w, xgrad(m, w), xsum_none(), dy, x, m->params + w, s, work,
                                 m->group);
}

void model_batchnorm2d_train(model_t *m, float *y, float *mean, float *rstd, int64_t running_mean, int64_t running_var,
                             const float *x, int64_t w, int64_t b, const float *residual, int relu, int B, int HW,
                             int C, float eps, float momentum, float *work) {
    const spk_backend_t *K = m->be;
    const float *p = m->params;
    float *rm = m->state + running_mean, *rv = m->state + running_var;
    if (!m->invariant) {
        K->batchnorm2d_forward_train(y, mean, rstd, rm, rv, x, p + w, p + b, residual, relu, B * HW, C, eps, momentum,
                                     work);
        return;
    }
    const xsum_t s = stats_sums(m, 2 * (int64_t)C);
    K->batchnorm2d_stats_partial(s, x, rm, B, HW, C, m->group);
    model_exact_allreduce(m, s, 2 * (int64_t)C);
    K->batchnorm2d_forward_global(y, mean, rstd, rm, rv, x, p + w, p + b, residual, relu, s, m->global_batch * HW,
                                  B * HW, C, eps, momentum);
}

void model_batchnorm2d_backward(model_t *m, float *dx, float *dres, int64_t w, int64_t b, const float *dy,
                                const float *y, const float *x, const float *mean, const float *rstd, int relu, int B,
                                int HW, int C, float *work) {
    const spk_backend_t *K = m->be;
    const float *p = m->params;
    float *gr = m->grads;
    if (!m->invariant) {
        K->batchnorm2d_backward(dx, dres, 0, gr + w, gr + b, dy, y, x, p + w, mean, rstd, relu, B * HW, C, work);
        return;
    }
    const xsum_t s = stats_sums(m, 2 * (int64_t)C);
    K->batchnorm2d_backward_partial(s, xgrad(m, w), xgrad(m, b), dy, y, x, mean, rstd, relu, B, HW, C, m->group);
    model_exact_allreduce(m, s, 2 * (int64_t)C);
    K->batchnorm2d_backward_global(dx, dres, 0, dy, y, x, p + w, mean, rstd, relu, s, m->global_batch * HW, B * HW, C);
}
