// The layers' calls that differ in the world-size-invariant mode (app/model/layers/model_layers.h):
// parameter gradients and BatchNorm in training. By default each is the kernel call the models
// always made; in the mode, every sample's contribution goes to exact sums (kernels/exact_sum.h)
// and BatchNorm's statistics and gradient sums are reduced over all ranks through
// m->exact_allreduce.
#include "app/model/layers/model_layers.h"

#include "app/model/layers/bn_sets.h"
#include "kernels/base/spk_assert.h"

// ---- gradients --------------------------------------------------------------------------------

int model_conv1d_group(const model_t *m, int train) { return !m->invariant ? 0 : train ? m->group : 1; }

void model_conv1d_forward(model_t *m, float *y, spk_bf16 *xh, const float *x, int64_t w, int64_t b, int B, int Cin,
                          int Cout, int T, int K, int dilation, int train, float *work) {
    const spk_backend_t *be = m->be;
    const float *bias = b < 0 ? NULL : m->params + b;
    const int group = m->invariant && train ? m->group : 0;
    if (m->bf16 && group)
        be->conv1d_bf16_forward_grouped(y, xh, x, m->params_bf16 + w, bias, B, Cin, Cout, T, K, dilation, work, group);
    else if (m->bf16)
        be->conv1d_bf16_forward(y, xh, x, m->params_bf16 + w, bias, B, Cin, Cout, T, K, dilation, work);
    else if (group)
        be->conv1d_forward_grouped(y, x, m->params + w, bias, B, Cin, Cout, T, K, dilation, work, group);
    else
        be->conv1d_forward(y, x, m->params + w, bias, B, Cin, Cout, T, K, dilation, work);
}

void model_round_conv1d_input(const model_t *m, int group, spk_bf16 *xh, int Cin, int d0, const float *x, int ldx,
                              const float *add, int B, int c, int T) {
    const spk_backend_t *K = m->be;
    if (group <= 1) {  // folded over the batch, or samples one by one
        const size_t bt = (size_t)B * T, yc = group ? (size_t)T : bt, yb = group ? (size_t)Cin * T : (size_t)T;
        K->bf16_slice_from_f32(xh + (size_t)d0 * yc, yc, yb, x, ldx, add, B, c, T);
        return;
    }
    SPK_ASSERT(B % group == 0);
    const size_t gt = (size_t)group * T;
    for (int g = 0; g < B / group; g++)  // each group folded (Cin, group*T)
        K->bf16_slice_from_f32(xh + g * Cin * gt + d0 * gt, gt, T, x + g * gt * ldx, ldx, add ? add + g * gt * c : NULL,
                               group, c, T);
}

void model_conv1d_backward(model_t *m, float *dx, int dx_accumulate, int64_t w, int64_t b, const float *dy,
                           const spk_bf16 *dyh, const float *x, const spk_bf16 *xh, int B, int Cin, int Cout, int T,
                           int K, int dilation, float *work) {
    const float *p = m->params;
    float *gr = m->grads;
    SPK_ASSERT(!dy != !dyh && (!dyh || (m->bf16 && b < 0)));
    if (m->bf16 && m->invariant)  // the forward's rounded input stands in for x
        m->be->conv1d_bf16_backward_exact(dx, dx_accumulate, gr + w, model_xgrad(m, w), model_xgrad(m, b), dy, dyh, xh,
                                          m->params_bf16 + w, B, Cin, Cout, T, K, dilation, work, m->group);
    else if (m->bf16)
        m->be->conv1d_bf16_backward(dx, dx_accumulate, gr + w, b < 0 ? NULL : gr + b, dy, dyh, xh, m->params_bf16 + w,
                                    B, Cin, Cout, T, K, dilation, work);
    else if (!m->invariant)
        m->be->conv1d_backward(dx, dx_accumulate, gr + w, b < 0 ? NULL : gr + b, dy, x, p + w, B, Cin, Cout, T, K,
                               dilation, work);
    else
        m->be->conv1d_backward_exact(dx, dx_accumulate, gr + w, model_xgrad(m, w), model_xgrad(m, b), dy, x, p + w, B,
                                     Cin, Cout, T, K, dilation, work, m->group);
}

void model_linear_backward_rows(model_t *m, float *dx, int64_t w, int64_t b, const float *dy, const float *x, int B,
                                int per, int In, int Out) {
    const spk_backend_t *K = m->be;
    const float *p = m->params;
    float *gr = m->grads;
    const int rows = B * per;
    if (!m->invariant) {
        K->linear_backward(dx, gr + w, b < 0 ? NULL : gr + b, dy, x, p + w, rows, In, Out);
        return;
    }
    if (dx) K->spk_sgemm('N', 'N', rows, In, Out, 1.0f, dy, Out, p + w, In, 1.0f, dx, In);  // row by row
    // dW += dy_i^T x_i for every row i (outer products), db += dy_i, a group of samples' rows a term
    K->spk_sgemm_batched_exact('T', 'N', Out, In, 1, dy, Out, Out, x, In, In, gr + w, model_xgrad(m, w), In, rows,
                               m->group * per);
    if (b >= 0) K->xsum_add(model_xgrad(m, b), dy, rows, Out, m->group * per);
}

void model_linear_backward(model_t *m, float *dx, int64_t w, int64_t b, const float *dy, const float *x, int B, int In,
                           int Out) {
    model_linear_backward_rows(m, dx, w, b, dy, x, B, 1, In, Out);
}

void model_gemm_grad_exact(model_t *m, char transa, char transb, int M, int N, int K, const float *A, int lda,
                           int64_t strideA, const float *Bm, int ldb, int64_t strideB, int64_t c, int ldc, int batch) {
    m->be->spk_sgemm_batched_exact(transa, transb, M, N, K, A, lda, strideA, Bm, ldb, strideB, m->grads + c,
                                   model_xgrad(m, c), ldc, batch, m->group);
}

void model_gemm_bf16_grad_exact(model_t *m, char transa, char transb, int M, int N, int K, const spk_bf16 *A, int lda,
                                int64_t strideA, const spk_bf16 *Bm, int ldb, int64_t strideB, int64_t c, int ldc,
                                int batch) {
    m->be->spk_gemm_bf16_batched_exact(transa, transb, M, N, K, A, lda, strideA, Bm, ldb, strideB, m->grads + c,
                                       model_xgrad(m, c), ldc, batch, m->group);
}

void model_rows_grad_exact(model_t *m, int64_t c, const float *x, int rows, int64_t n) {
    m->be->xsum_add(model_xgrad(m, c), x, rows, n, m->group);
}

// ---- BatchNorm --------------------------------------------------------------------------------

// Set i of a batch: its first value (sets of `size` values), its saved statistics (c0), the
// running statistics it updates (rm, rv: NULL for none) and its sums, zeroed. Over the global
// batch the one set updates them; by groups, the global batch's first group alone (held where
// batch_offset is 0), so their bits are the same on any world size. They are also the set's
// shift (kernels/batchnorm.h), which the other sets take as 0.
typedef struct {
    size_t at, c0;
    float *rm, *rv;
    xsum_t s;
} bn_set_t;

static bn_set_t bn_set(model_t *m, int i, size_t size, int C, int64_t running_mean, int64_t running_var) {
    const int runs = model_bn_set_runs(m, i);
    return (bn_set_t){(size_t)i * size, (size_t)i * C, runs ? m->state + running_mean : NULL,
                      runs ? m->state + running_var : NULL, model_bn_stats_sums(m, 2 * (int64_t)C)};
}

// BatchNorm by groups on the CPU (model_bn_by_default_kernels): each group through the default
// mode's kernels, so a group's results depend on its samples alone (not on the world size or the
// thread count). They take fewer passes than the exact sums; the parameters' gradients join the
// exact sums as float terms.
// A group's float terms of the C-channel gradients at off[0..n) (< 0: none), held in the
// gradients' own place (scratch in the invariant mode): zeroed before the group's kernel, then
// each one term of the exact sums.
static float *group_terms_zero(model_t *m, int64_t off, int C) {
    if (off < 0) return NULL;
    m->be->vec_zero(m->grads + off, (size_t)C);
    return m->grads + off;
}

static void group_terms_add(model_t *m, const int64_t *off, int n, int C) {
    for (int k = 0; k < n; k++)
        if (off[k] >= 0) m->be->xsum_add(model_xgrad(m, off[k]), m->grads + off[k], 1, C, 1);
}

// Reduces set i's sums over the ranks when they are the global batch's.
static void bn_exchange(model_t *m, xsum_t s, int64_t n) {
    if (!m->bn_by_group) model_exact_allreduce(m, s, n);
}

// The default mode's forward (with relu, of relu(x)) over this rank's batch, or by groups
// (model_bn_by_default_kernels), the running statistics updated as bn_set says.
static void forward_by_sets(model_t *m, int relu, float *y, float *mean, float *rstd, int64_t running_mean,
                            int64_t running_var, const float *x, int64_t w, int64_t b, int B, int C, int T, float eps,
                            float momentum) {
    const float *pw = w < 0 ? NULL : m->params + w, *pb = b < 0 ? NULL : m->params + b;
    const bn_sets_t g = model_bn_sets(m, B);  // (one set of the batch unless by groups)
    for (int i = 0; i < g.sets; i++) {
        const size_t at = (size_t)i * g.samples * C * T, c0 = (size_t)i * C;
        const int runs = model_bn_set_runs(m, i);
        float *rm = runs ? m->state + running_mean : NULL, *rv = runs ? m->state + running_var : NULL;
        if (relu)
            m->be->batchnorm1d_relu_forward_train(y + at, mean + c0, rstd + c0, rm, rv, x + at, pw, pb, g.samples, C, T,
                                                  eps, momentum);
        else
            m->be->batchnorm1d_forward_train(y + at, mean + c0, rstd + c0, rm, rv, x + at, pw, pb, g.samples, C, T, eps,
                                             momentum);
    }
}

void model_batchnorm_train(model_t *m, float *y, float *mean, float *rstd, int64_t running_mean, int64_t running_var,
                           const float *x, int64_t w, int64_t b, int B, int C, int T, float eps, float momentum) {
    const spk_backend_t *K = m->be;
    const float *p = m->params;
    const float *pw = w < 0 ? NULL : p + w, *pb = b < 0 ? NULL : p + b;
    if (!m->invariant || model_bn_by_default_kernels(m)) {
        forward_by_sets(m, 0, y, mean, rstd, running_mean, running_var, x, w, b, B, C, T, eps, momentum);
        return;
    }
    const bn_sets_t g = model_bn_sets(m, B);
    for (int i = 0; i < g.sets; i++) {
        const bn_set_t v = bn_set(m, i, (size_t)g.samples * C * T, C, running_mean, running_var);
        K->batchnorm1d_stats_partial(v.s, x + v.at, v.rm, g.samples, C, T, m->group);
        bn_exchange(m, v.s, 2 * (int64_t)C);
        K->batchnorm1d_forward_global(y + v.at, mean + v.c0, rstd + v.c0, v.rm, v.rv, x + v.at, pw, pb, v.s,
                                      g.per_set * T, g.samples, C, T, eps, momentum);
    }
}

void model_batchnorm_relu_train(model_t *m, float *y, float *mean, float *rstd, int64_t running_mean,
                                int64_t running_var, float *x, int64_t w, int64_t b, int B, int C, int T, float eps,
                                float momentum) {
    if (m->invariant && !model_bn_by_default_kernels(m)) {  // the statistics' exact sums read relu(x) stored
        m->be->relu_forward(x, x, (size_t)B * C * T);
        model_batchnorm_train(m, y, mean, rstd, running_mean, running_var, x, w, b, B, C, T, eps, momentum);
        return;
    }
    forward_by_sets(m, 1, y, mean, rstd, running_mean, running_var, x, w, b, B, C, T, eps, momentum);
}

// The invariant mode's backward over the global batch: dx += it, or with relu_set = it at the
// ReLU's input (batchnorm1d_backward_global). By groups on the CPU (model_bn_by_default_kernels), with
// relu_set, dx's sums over each group join conv_b's exact sums (>= 0: the bias of the
// convolution dx is the output gradient of, in the pass that writes dx, as the default mode's).
// dxh (BatchNorm by groups on the default kernels, relu_set): the input gradient only rounded,
// in a bf16 convolution's layout of its output gradient (dx NULL).
static void batchnorm_backward_global(model_t *m, float *dx, spk_bf16 *dxh, int relu_set, int64_t w, int64_t b,
                                      int64_t conv_b, const float *dy, const float *x, const float *mean,
                                      const float *rstd, int B, int C, int T) {
    const spk_backend_t *K = m->be;
    const bn_sets_t g = model_bn_sets(m, B);
    if (model_bn_by_default_kernels(m)) {
        SPK_ASSERT((conv_b < 0 || (relu_set && (dx || dxh))) && (!dxh || (relu_set && !dx && g.samples == m->group)));
        const int64_t off[3] = {w, b, conv_b};
        const float *pw = w < 0 ? NULL : m->params + w;
        for (int i = 0; i < g.sets; i++) {
            const size_t at = (size_t)i * g.samples * C * T, c0 = (size_t)i * C;
            float *part[3];
            for (int k = 0; k < 3; k++) part[k] = group_terms_zero(m, off[k], C);
            if (dxh)  // a group folded (C, group*T), the convolution's layout (model_conv1d_group)
                K->batchnorm1d_relu_backward_bf16(dxh + at, (size_t)g.samples * T, T, part[2], part[0], part[1],
                                                  dy + at, x + at, pw, mean + c0, rstd + c0, g.samples, C, T);
            else if (relu_set)
                K->batchnorm1d_relu_backward(dx ? dx + at : NULL, part[2], part[0], part[1], dy + at, x + at, pw,
                                             mean + c0, rstd + c0, g.samples, C, T);
            else
                K->batchnorm1d_backward(dx ? dx + at : NULL, part[0], part[1], dy + at, x + at, pw, mean + c0,
                                        rstd + c0, g.samples, C, T);
            group_terms_add(m, off, 3, C);
        }
        return;
    }
    SPK_ASSERT(conv_b < 0 && !dxh);
    for (int i = 0; i < g.sets; i++) {
        const bn_set_t v = bn_set(m, i, (size_t)g.samples * C * T, C, 0, 0);
        K->batchnorm1d_backward_partial(v.s, model_xgrad(m, w), model_xgrad(m, b), dy + v.at, x + v.at, mean + v.c0,
                                        rstd + v.c0, g.samples, C, T, m->group);
        bn_exchange(m, v.s, 2 * (int64_t)C);
        if (dx)
            K->batchnorm1d_backward_global(dx + v.at, relu_set, dy + v.at, x + v.at, w < 0 ? NULL : m->params + w,
                                           mean + v.c0, rstd + v.c0, v.s, g.per_set * T, g.samples, C, T);
    }
}

void model_batchnorm_backward(model_t *m, float *dx, int64_t w, int64_t b, const float *dy, const float *x,
                              const float *mean, const float *rstd, int B, int C, int T) {
    if (m->invariant) {
        batchnorm_backward_global(m, dx, NULL, 0, w, b, -1, dy, x, mean, rstd, B, C, T);
        return;
    }
    const float *p = m->params;
    float *gr = m->grads;
    m->be->batchnorm1d_backward(dx, w < 0 ? NULL : gr + w, b < 0 ? NULL : gr + b, dy, x, w < 0 ? NULL : p + w, mean,
                                rstd, B, C, T);
}

void model_batchnorm_relu_backward(model_t *m, float *dx, int64_t w, int64_t b, const float *dy, const float *x,
                                   const float *mean, const float *rstd, int B, int C, int T) {
    const spk_backend_t *K = m->be;
    if (!m->invariant) {
        float *gr = m->grads;
        K->batchnorm1d_relu_backward(dx, NULL, w < 0 ? NULL : gr + w, b < 0 ? NULL : gr + b, dy, x,
                                     w < 0 ? NULL : m->params + w, mean, rstd, B, C, T);
        return;
    }
    batchnorm_backward_global(m, dx, NULL, 1, w, b, -1, dy, x, mean, rstd, B, C, T);
}

void model_bn_relu_conv1d_backward(model_t *m, float *dx, int dx_accumulate, int64_t w, int64_t b, int64_t bn_w,
                                   int64_t bn_b, const float *dy, const float *a, const float *mean, const float *rstd,
                                   const float *x, const spk_bf16 *xh, int B, int Cin, int Cout, int T, int K,
                                   int dilation, float *g, float *work) {
    if (model_bn_by_default_kernels(m)) {  // the bias gradient's terms from the BatchNorm's pass
        batchnorm_backward_global(m, g, NULL, 1, bn_w, bn_b, b, dy, a, mean, rstd, B, Cout, T);
        model_conv1d_backward(m, dx, dx_accumulate, w, -1, g, NULL, x, xh, B, Cin, Cout, T, K, dilation, work);
        return;
    }
    if (m->bf16 || m->invariant) {  // their bias gradients are the convolution's (bf16 operands, exact sums)
        model_batchnorm_relu_backward(m, g, bn_w, bn_b, dy, a, mean, rstd, B, Cout, T);
        model_conv1d_backward(m, dx, dx_accumulate, w, b, g, NULL, x, xh, B, Cin, Cout, T, K, dilation, work);
        return;
    }
    float *gr = m->grads;
    m->be->batchnorm1d_relu_backward(g, b < 0 ? NULL : gr + b, bn_w < 0 ? NULL : gr + bn_w, bn_b < 0 ? NULL : gr + bn_b,
                                     dy, a, bn_w < 0 ? NULL : m->params + bn_w, mean, rstd, B, Cout, T);
    model_conv1d_backward(m, dx, dx_accumulate, w, -1, g, NULL, x, xh, B, Cin, Cout, T, K, dilation, work);
}

void model_bn_relu_conv1d_bf16_backward(model_t *m, float *dx, int dx_accumulate, int64_t w, int64_t b, int64_t bn_w,
                                        int64_t bn_b, const float *dy, const float *a, const float *mean,
                                        const float *rstd, const spk_bf16 *xh, int B, int Cin, int Cout, int T, int K,
                                        int dilation, float *g, float *work) {
    SPK_ASSERT(model_writes_bf16(m));
    float *gr = m->grads;
    spk_bf16 *gh = (spk_bf16 *)g;  // half of g's floats, in the layout of xh (model_conv1d_group)
    if (m->invariant)  // BatchNorm by groups: each group's pass writes its samples and its bias gradient's term
        batchnorm_backward_global(m, NULL, gh, 1, bn_w, bn_b, b, dy, a, mean, rstd, B, Cout, T);
    else
        m->be->batchnorm1d_relu_backward_bf16(gh, (size_t)B * T, T, b < 0 ? NULL : gr + b, bn_w < 0 ? NULL : gr + bn_w,
                                              bn_b < 0 ? NULL : gr + bn_b, dy, a, bn_w < 0 ? NULL : m->params + bn_w,
                                              mean, rstd, B, Cout, T);
    model_conv1d_backward(m, dx, dx_accumulate, w, -1, NULL, gh, NULL, xh, B, Cin, Cout, T, K, dilation, work);
}

// ---- the 2-D layers (channels-last, app/model/layers/conv2d_bn.h) -------------------------------

size_t model_conv2d_work_floats(const model_t *m, const conv2d_shape_t *s) {
    const spk_backend_t *K = m->be;
    if (m->embedding)
        return m->bf16 ? K->conv2d_bf16_forward_workspace_floats(s) : K->conv2d_forward_workspace_floats(s);
    return m->bf16 ? K->conv2d_bf16_workspace_floats(s) : K->conv2d_workspace_floats(s);
}

void model_conv2d_backward(model_t *m, float *dx, int dx_accumulate, int64_t w, const float *dy, const spk_bf16 *dyh,
                           const float *x, const spk_bf16 *xh, const conv2d_shape_t *s, float *work) {
    const spk_backend_t *K = m->be;
    float *gr = m->grads;
    SPK_ASSERT(!dy != !dyh && (!dyh || m->bf16));
    if (m->bf16 && m->invariant)  // the forward's rounded input stands in for x
        K->conv2d_bf16_backward_exact(dx, dx_accumulate, gr + w, model_xgrad(m, w), xsum_none(), dy, dyh, xh,
                                      m->params_bf16 + w, s, work, m->group);
    else if (m->bf16)
        K->conv2d_bf16_backward(dx, dx_accumulate, gr + w, NULL, dy, dyh, xh, m->params_bf16 + w, s, work);
    else if (!m->invariant)
        K->conv2d_backward(dx, dx_accumulate, gr + w, NULL, dy, x, m->params + w, s, work);
    else  // the gradient buffer is the exact sums' scratch
        K->conv2d_backward_exact(dx, dx_accumulate, gr + w, model_xgrad(m, w), xsum_none(), dy, x, m->params + w, s,
                                 work, m->group);
}

// Where a 2-D BatchNorm's tensor starts at element `at` (NULL stays NULL).
static const float *f_at(const float *p, size_t at) { return p ? p + at : NULL; }
static const spk_bf16 *h_at(const spk_bf16 *p, size_t at) { return p ? p + at : NULL; }

void model_conv2d_backward_rounded(model_t *m, spk_bf16 *dxh, int64_t w, const spk_bf16 *dyh, const spk_bf16 *xh,
                                   const conv2d_shape_t *s, float *work) {
    const spk_backend_t *K = m->be;
    SPK_ASSERT(model_writes_bf16(m));
    if (m->invariant)
        K->conv2d_bf16_backward_rounded_exact(dxh, m->grads + w, model_xgrad(m, w), dyh, xh, m->params_bf16 + w, s,
                                              work, m->group);
    else
        K->conv2d_bf16_backward_rounded(dxh, m->grads + w, dyh, xh, m->params_bf16 + w, s, work);
}

int model_batchnorm2d_train(model_t *m, float *y, spk_bf16 *yh, float *mean, float *rstd, int64_t running_mean,
                            int64_t running_var, const float *x, const spk_bf16 *xh, int64_t w, int64_t b,
                            const float *residual, const spk_bf16 *residual_h, int relu, int B, int HW, int C,
                            float eps, float momentum, float *work) {
    const spk_backend_t *K = m->be;
    const float *p = m->params;
    if (!m->invariant) {
        K->batchnorm2d_forward_train(y, yh, mean, rstd, m->state + running_mean, m->state + running_var, x, xh, p + w,
                                     p + b, residual, residual_h, relu, B * HW, C, eps, momentum, work);
        return yh != NULL;
    }
    const bn_sets_t g = model_bn_sets(m, B);
    if (model_bn_by_default_kernels(m)) {  // (its blocks of rows are fixed by the group's rows: thread-invariant)
        for (int i = 0; i < g.sets; i++) {
            const size_t at = (size_t)i * g.samples * HW * C, c0 = (size_t)i * C;
            const int runs = model_bn_set_runs(m, i);
            K->batchnorm2d_forward_train(y ? y + at : NULL, yh ? yh + at : NULL, mean + c0, rstd + c0,
                                         runs ? m->state + running_mean : NULL, runs ? m->state + running_var : NULL,
                                         f_at(x, at), h_at(xh, at), p + w, p + b, f_at(residual, at),
                                         h_at(residual_h, at), relu, g.samples * HW, C, eps, momentum, work);
        }
        return yh != NULL;
    }
    SPK_ASSERT(y != NULL && xh == NULL && residual_h == NULL);  // (yh and bf16 inputs are the default kernels')
    for (int i = 0; i < g.sets; i++) {
        const bn_set_t v = bn_set(m, i, (size_t)g.samples * HW * C, C, running_mean, running_var);
        // A group that leaves the running statistics alone takes its first row as the shift (the
        // 2-D kernels add a block of rows in float before double): work holds it, and takes the
        // mean's update, which goes nowhere.
        float *shift = v.rm;
        if (!shift) K->vec_copy(shift = work, x + v.at, (size_t)C);
        K->batchnorm2d_stats_partial(v.s, x + v.at, shift, g.samples, HW, C, m->group);
        bn_exchange(m, v.s, 2 * (int64_t)C);
        K->batchnorm2d_forward_global(y + v.at, mean + v.c0, rstd + v.c0, shift, v.rv, x + v.at, p + w, p + b,
                                      residual ? residual + v.at : NULL, relu, v.s, g.per_set * HW, g.samples * HW, C,
                                      eps, momentum);
    }
    return 0;
}

// By groups on the default kernels: each group's backward (kernels/batchnorm2d.h's rounded one
// where dxh is given, whose inputs may come in bf16), its weight and bias gradients one float term
// each.
static void batchnorm2d_backward_by_groups(model_t *m, float *dx, spk_bf16 *dxh, float *dres, int64_t w, int64_t b,
                                           const model_bn2d_in_t *in, const float *mean, const float *rstd, int relu,
                                           int B, int HW, int C, float *work) {
    const spk_backend_t *K = m->be;
    const int64_t off[2] = {w, b};
    const bn_sets_t g = model_bn_sets(m, B);
    for (int i = 0; i < g.sets; i++) {
        const size_t at = (size_t)i * g.samples * HW * C, c0 = (size_t)i * C;
        const int N = g.samples * HW;
        float *dw = group_terms_zero(m, w, C), *db = group_terms_zero(m, b, C);
        float *dr = dres ? dres + at : NULL;
        if (dxh)
            K->batchnorm2d_backward_rounded(dxh + at, dr, 0, dw, db, f_at(in->dy, at), h_at(in->dyh, at),
                                            f_at(in->y, at), h_at(in->yh, at), f_at(in->x, at), h_at(in->xh, at),
                                            m->params + w, mean + c0, rstd + c0, relu, N, C, work);
        else
            K->batchnorm2d_backward(dx ? dx + at : NULL, dr, 0, dw, db, in->dy + at, in->y + at, in->x + at,
                                    m->params + w, mean + c0, rstd + c0, relu, N, C, work);
        group_terms_add(m, off, 2, C);
    }
}

void model_batchnorm2d_backward(model_t *m, float *dx, spk_bf16 *dxh, float *dres, int64_t w, int64_t b,
                                const float *dy, const float *y, const float *x, const float *mean, const float *rstd,
                                int relu, int B, int HW, int C, float *work) {
    const spk_backend_t *K = m->be;
    const float *p = m->params;
    float *gr = m->grads;
    SPK_ASSERT(!dxh || m->invariant);
    if (!m->invariant) {
        K->batchnorm2d_backward(dx, dres, 0, gr + w, gr + b, dy, y, x, p + w, mean, rstd, relu, B * HW, C, work);
        return;
    }
    if (model_bn_by_default_kernels(m)) {
        const model_bn2d_in_t in = {dy, y, x, NULL, NULL, NULL};
        batchnorm2d_backward_by_groups(m, dx, dxh, dres, w, b, &in, mean, rstd, relu, B, HW, C, work);
        return;
    }
    const bn_sets_t g = model_bn_sets(m, B);
    for (int i = 0; i < g.sets; i++) {
        const bn_set_t v = bn_set(m, i, (size_t)g.samples * HW * C, C, 0, 0);
        K->batchnorm2d_backward_partial(v.s, model_xgrad(m, w), model_xgrad(m, b), dy + v.at, y + v.at, x + v.at,
                                        mean + v.c0, rstd + v.c0, relu, g.samples, HW, C, m->group);
        bn_exchange(m, v.s, 2 * (int64_t)C);
        K->batchnorm2d_backward_global(dx ? dx + v.at : NULL, dxh ? dxh + v.at : NULL, dres ? dres + v.at : NULL, 0,
                                       dy + v.at, y + v.at, x + v.at, p + w, mean + v.c0, rstd + v.c0, relu, v.s,
                                       g.per_set * HW, g.samples * HW, C);
    }
}

void model_batchnorm2d_backward_rounded(model_t *m, spk_bf16 *dxh, float *dres, int64_t w, int64_t b,
                                        const model_bn2d_in_t *in, const float *mean, const float *rstd, int relu,
                                        int B, int HW, int C, float *work) {
    SPK_ASSERT(model_writes_bf16(m));
    if (m->invariant) {
        batchnorm2d_backward_by_groups(m, NULL, dxh, dres, w, b, in, mean, rstd, relu, B, HW, C, work);
        return;
    }
    float *gr = m->grads;
    m->be->batchnorm2d_backward_rounded(dxh, dres, 0, gr + w, gr + b, in->dy, in->dyh, in->y, in->yh, in->x, in->xh,
                                        m->params + w, mean, rstd, relu, B * HW, C, work);
}
