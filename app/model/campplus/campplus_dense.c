// CAM++'s densely connected blocks (app/model/campplus/campplus_dense.h).
#include "app/model/campplus/campplus_dense.h"

#include "app/model/layers/bn_sets.h"
#include "kernels/base/check.h"
#include "kernels/base/spk_assert.h"

#include <stdio.h>

// out = "<a>.<b>" (the names are far shorter than PARAM_NAME_MAX).
static void join(char out[PARAM_NAME_MAX], const char *a, const char *b) {
    const int n = snprintf(out, PARAM_NAME_MAX, "%s.%s", a, b);
    SPK_ASSERT(n > 0 && n < PARAM_NAME_MAX);
}

static int64_t add(model_t *m, const char *prefix, const char *what, int ndim, const int64_t *shape) {
    char name[PARAM_NAME_MAX];
    join(name, prefix, what);
    return param_table_add(&m->table, name, ndim, shape);
}

// ---- parameters -----------------------------------------------------------------------------------

// In reverse execution order: the mask's linears, linear_local, linear1 with nonlinear2, nonlinear1.
static void layer_register(cam_layer_t *l, model_t *m, const char *prefix, int cin, int growth, int bneck) {
    char p[PARAM_NAME_MAX], bn[PARAM_NAME_MAX];
    l->cin = cin;
    join(p, prefix, "cam_layer.linear2");
    l->l2_w = add(m, p, "weight", 3, (int64_t[]){growth, bneck / 2, 1});
    l->l2_b = add(m, p, "bias", 1, (int64_t[]){growth});
    join(p, prefix, "cam_layer.linear1");
    l->l1_w = add(m, p, "weight", 3, (int64_t[]){bneck / 2, bneck, 1});
    l->l1_b = add(m, p, "bias", 1, (int64_t[]){bneck / 2});
    join(p, prefix, "cam_layer.linear_local");
    l->local_w = add(m, p, "weight", 3, (int64_t[]){growth, bneck, 3});
    join(p, prefix, "linear1");
    join(bn, prefix, "nonlinear2.batchnorm");
    conv2d_bn_register(&l->lin, m, p, bn, cin, bneck, conv2d_geom_1d(1, 1, 0, 1));
    join(p, prefix, "nonlinear1.batchnorm");
    bn_register(m, p, cin, &l->bn1_w, &l->bn1_b, &l->bn1_mean, &l->bn1_var);
}

void dense_block_register(dense_block_t *k, model_t *m, int index, int c0, int layers, int growth, int bn_size,
                          int dilation) {
    char p[PARAM_NAME_MAX];
    *k = (dense_block_t){.c0 = c0, .n = layers, .growth = growth, .bneck = bn_size * growth, .dilation = dilation};
    k->cmax = c0 + layers * growth;
    snprintf(p, sizeof p, "xvector.transit%d.linear", index);
    k->tr_w = add(m, p, "weight", 3, (int64_t[]){k->cmax / 2, k->cmax, 1});
    snprintf(p, sizeof p, "xvector.transit%d.nonlinear.batchnorm", index);
    bn_register(m, p, k->cmax, &k->tr_bn_w, &k->tr_bn_b, &k->tr_bn_mean, &k->tr_bn_var);
    k->layer = callocCheck((size_t)layers, sizeof *k->layer);
    for (int i = layers - 1; i >= 0; i--) {
        snprintf(p, sizeof p, "xvector.block%d.tdnnd%d", index, i + 1);
        layer_register(&k->layer[i], m, p, c0 + i * growth, growth, k->bneck);
    }
}

int64_t dense_block_end(const dense_block_t *k) { return k->layer[0].bn1_b + k->c0; }

static int64_t layer_end(const cam_layer_t *l) { return l->bn1_b + l->cin; }

// ---- buffers ----------------------------------------------------------------------------------------

// An nn.Conv1d of kernel k, stride 1, 'same' padding, over B maps of one row of T frames.
static conv2d_shape_t conv1d_shape(int B, int cin, int cout, int T, int k, int dilation) {
    return conv2d_geom_shape(conv2d_geom_1d(k, 1, dilation * (k - 1) / 2, dilation), B, cin, cout, 1, T);
}

static void free_layer(cam_layer_t *l, const model_t *m) {
    float **const bufs[] = {&l->z, &l->y, &l->ctx, &l->q, &l->mask};
    model_bufs_free(m, bufs, sizeof bufs / sizeof bufs[0]);
    model_buf_bf16_free(m, &l->yh);
}

static void free_buffers(dense_block_t *k, const model_t *m) {
    float **const bufs[] = {&k->buf, &k->mean, &k->var, &k->zt, &k->out};
    model_bufs_free(m, bufs, sizeof bufs / sizeof bufs[0]);
    model_buf_bf16_free(m, &k->zth);
    for (int i = 0; i < k->n; i++) free_layer(&k->layer[i], m);
    k->cap_r = k->cap_bs = k->cap_stats = 0;
}

void dense_block_release(dense_block_t *k, const model_t *m) {
    free_buffers(k, m);
    for (int i = 0; i < k->n; i++) conv2d_bn_release(&k->layer[i].lin, m);
}

size_t dense_block_reserve(dense_block_t *k, const model_t *m, int B, int T, int recompute) {
    k->B = B, k->T = T, k->S = (T + CAMPP_SEG - 1) / CAMPP_SEG;
    k->tr = conv1d_shape(B, k->cmax, k->cmax / 2, T, 1, 1);
    size_t work = model_conv2d_work_floats(m, &k->tr);
    for (int i = 0; i < k->n; i++) {
        cam_layer_t *l = &k->layer[i];
        int oh, ow;
        conv2d_bn_shape(&l->lin, B, 1, T, &oh, &ow);
        conv2d_bn_alloc(&l->lin, m);
        l->local = conv1d_shape(B, k->bneck, k->growth, T, 3, k->dilation);
        const size_t a = conv2d_bn_work_floats(&l->lin, m), b = model_conv2d_work_floats(m, &l->local);
        work = a > work ? a : work;
        work = b > work ? b : work;
    }
    const size_t R = (size_t)B * T, BS = (size_t)B * k->S, stats = model_bn_stats_floats(m, B, k->cmax);
    if (R <= k->cap_r && BS <= k->cap_bs && stats <= k->cap_stats && recompute == k->recompute) return work;
    free_buffers(k, m);
    const size_t cr = R > k->cap_r ? R : k->cap_r, cbs = BS > k->cap_bs ? BS : k->cap_bs;
    k->recompute = recompute;
    k->buf = model_buf(m, cr * k->cmax);
    k->mean = model_buf(m, stats);
    k->var = model_buf(m, stats);
    if (!recompute && !m->bf16) k->zt = model_buf(m, cr * k->cmax);  // bf16: zth alone
    if (m->bf16) k->zth = model_buf_bf16(m, cr * k->cmax);
    k->out = model_buf(m, cr * (k->cmax / 2));
    for (int i = 0; i < k->n; i++) {
        cam_layer_t *l = &k->layer[i];
        if (!recompute && !m->bf16) l->z = model_buf(m, cr * l->cin);  // bf16: lin.xh alone
        l->y = model_buf(m, cr * k->growth);
        if (m->bf16) l->yh = model_buf_bf16(m, cr * k->bneck);
        l->ctx = model_buf(m, cbs * k->bneck);
        l->q = model_buf(m, cbs * (k->bneck / 2));
        l->mask = model_buf(m, cbs * k->growth);
    }
    k->cap_r = cr, k->cap_bs = cbs, k->cap_stats = stats;
    return work;
}

void dense_scratch_release(dense_scratch_t *s, const model_t *m) {
    float **const bufs[] = {&s->g,  &s->gz,    &s->zs,  &s->gy, &s->gl,   &s->gh,
                            &s->ga, &s->gmask, &s->gm2, &s->gq, &s->gctx, &s->part};
    model_bufs_free(m, bufs, sizeof bufs / sizeof bufs[0]);
    model_dense_sums_free(m, &s->sums);
    s->cap_r = s->cap_bs = 0;
    s->cap_c = s->cap_b = 0;
}

void dense_scratch_reserve(dense_scratch_t *s, const model_t *m, const dense_block_t *k) {
    const size_t R = (size_t)k->B * k->T, BS = (size_t)k->B * k->S;
    const int recompute = k->recompute;
    if (R <= s->cap_r && BS <= s->cap_bs && k->cmax <= s->cap_c && k->B <= s->cap_b && (!recompute || m->bf16 || s->zs))
        return;
    const size_t cr = R > s->cap_r ? R : s->cap_r, cbs = BS > s->cap_bs ? BS : s->cap_bs;
    const int cb = k->B > s->cap_b ? k->B : s->cap_b;
    const int cc = k->cmax > s->cap_c ? k->cmax : s->cap_c, want_zs = (recompute && !m->bf16) || s->zs;
    dense_scratch_release(s, m);
    const size_t G = (size_t)k->growth, H = (size_t)k->bneck;
    s->g = model_buf(m, cr * cc);
    s->gz = model_buf(m, cr * cc);
    if (want_zs) s->zs = model_buf(m, cr * cc);
    s->gy = model_buf(m, cr * G);
    s->gl = model_buf(m, cr * G);
    s->gh = model_buf(m, cr * H);
    s->ga = model_buf(m, cr * H);
    s->gmask = model_buf(m, cbs * G);
    s->gm2 = model_buf(m, cbs * G);
    s->gq = model_buf(m, cbs * (H / 2));
    s->gctx = model_buf(m, cbs * H);
    s->part = model_buf(m, 4 * (size_t)cb * cc);
    s->sums = model_dense_sums(m, cc, cb);
    s->cap_r = cr, s->cap_bs = cbs, s->cap_c = cc, s->cap_b = cb;
}

// ---- forward ----------------------------------------------------------------------------------------

// The batch statistics of the block's channels [c0, c0 + C) (the invariant mode's sums shifted by
// the transition's running mean, the same on every rank there).
static void channel_stats(dense_block_t *k, model_t *m, int c0, int C, dense_scratch_t *s) {
    model_dense_bn_stats(m, k->mean + c0, k->var + c0, k->cmax, k->buf + c0, k->cmax, m->state + k->tr_bn_mean + c0,
                         k->B, k->T, C, s->part);
}

// z = relu(bn(channels [0, C))) for a reader (w, b, its running statistics rm, rv): the shared batch
// statistics in training (updating the reader's running ones), else its running statistics. Into
// z, or for bf16 models straight into zh, its convolution's rounded operand (z NULL).
static void normalise(dense_block_t *k, model_t *m, float *z, spk_bf16 *zh, int C, int64_t w, int64_t b, int64_t rm,
                      int64_t rv, int train) {
    const float *mean = train ? k->mean : m->state + rm, *var = train ? k->var : m->state + rv;
    model_dense_bn_relu_forward(m, z, zh, C, k->buf, k->cmax, mean, var, train ? k->cmax : 0, w, b, k->B, k->T, C);
    if (train) model_dense_bn_running(m, rm, rv, k->mean, k->var, k->B, k->T, C);
}

// The CAM layer on the bottleneck h (R, bneck): its masked output into the block's columns at l->cin.
static void cam_forward(dense_block_t *k, model_t *m, cam_layer_t *l, const float *h, float *work) {
    const spk_backend_t *K = m->be;
    const float *p = m->params;
    const int H = k->bneck, BS = k->B * k->S;
    if (m->bf16)
        K->conv2d_bf16_forward(l->y, l->yh, h, m->params_bf16 + l->local_w, NULL, &l->local, work);
    else
        K->conv2d_forward(l->y, h, p + l->local_w, NULL, &l->local, work);
    K->segment_context_forward(l->ctx, h, k->B, k->T, H, CAMPP_SEG);
    K->linear_forward(l->q, l->ctx, p + l->l1_w, p + l->l1_b, BS, H, H / 2);
    K->relu_forward(l->q, l->q, (size_t)BS * (H / 2));
    K->linear_forward(l->mask, l->q, p + l->l2_w, p + l->l2_b, BS, H / 2, k->growth);
    K->sigmoid_forward(l->mask, l->mask, (size_t)BS * k->growth);
    K->segment_mask_forward(k->buf + l->cin, k->cmax, l->y, l->mask, k->B, k->T, k->growth, CAMPP_SEG);
}

void dense_block_forward(dense_block_t *k, model_t *m, const float *in, int train, dense_scratch_t *s, float *work) {
    const spk_backend_t *K = m->be;
    SPK_ASSERT((size_t)k->B * k->T <= k->cap_r);
    K->channel_slice_copy(k->buf, k->cmax, in, k->c0, k->B * k->T, k->c0, 1);  // rows of c0 columns
    if (train) channel_stats(k, m, 0, k->c0, s);
    for (int i = 0; i < k->n; i++) {
        cam_layer_t *l = &k->layer[i];
        float *z = m->bf16 ? NULL : k->recompute ? s->zs : l->z;
        normalise(k, m, z, m->bf16 ? l->lin.xh : NULL, l->cin, l->bn1_w, l->bn1_b, l->bn1_mean, l->bn1_var, train);
        conv2d_bn_forward(&l->lin, m, z, NULL, NULL, 1, train, work);
        cam_forward(k, m, l, l->lin.y, work);
        if (train) channel_stats(k, m, l->cin, k->growth, s);
    }
    float *zt = m->bf16 ? NULL : k->recompute ? s->zs : k->zt;
    normalise(k, m, zt, m->bf16 ? k->zth : NULL, k->cmax, k->tr_bn_w, k->tr_bn_b, k->tr_bn_mean, k->tr_bn_var, train);
    if (m->bf16)
        K->conv2d_bf16_forward(k->out, k->zth, zt, m->params_bf16 + k->tr_w, NULL, &k->tr, work);
    else
        K->conv2d_forward(k->out, zt, m->params + k->tr_w, NULL, &k->tr, work);
}

// ---- backward ---------------------------------------------------------------------------------------

// A reader's normalised input for its convolution's backward: kept, or made again (recompute;
// bf16 models read the rounded copy their forward kept instead).
static const float *reader_input(dense_block_t *k, model_t *m, float *kept, int C, int64_t w, int64_t b,
                                 dense_scratch_t *s) {
    if (!k->recompute || m->bf16) return kept;
    model_dense_bn_relu_forward(m, s->zs, NULL, C, k->buf, k->cmax, k->mean, k->var, k->cmax, w, b, k->B, k->T, C);
    return s->zs;
}

// The CAM layer's backward from gy (R, growth), the gradient of its masked output: its
// parameters' gradients and the bottleneck's gradient in s->gh.
static void cam_backward(dense_block_t *k, model_t *m, cam_layer_t *l, const float *gy, dense_scratch_t *s,
                         float *work) {
    const spk_backend_t *K = m->be;
    const int H = k->bneck, BS = k->B * k->S, G = k->growth;
    K->segment_mask_backward(s->gl, s->gmask, gy, G, l->y, l->mask, k->B, k->T, G, CAMPP_SEG);
    K->vec_zero(s->gm2, (size_t)BS * G);
    K->sigmoid_backward(s->gm2, s->gmask, l->mask, (size_t)BS * G);
    K->vec_zero(s->gq, (size_t)BS * (H / 2));
    model_linear_backward_rows(m, s->gq, l->l2_w, l->l2_b, s->gm2, l->q, k->B, k->S, H / 2, G);
    K->relu_mask(s->gq, l->q, (size_t)BS * (H / 2));
    K->vec_zero(s->gctx, (size_t)BS * H);
    model_linear_backward_rows(m, s->gctx, l->l1_w, l->l1_b, s->gq, l->ctx, k->B, k->S, H, H / 2);
    model_conv2d_backward(m, s->gh, 0, l->local_w, s->gl, NULL, l->lin.y, l->yh, &l->local, work);
    K->segment_context_backward(s->gh, s->gctx, k->B, k->T, H, CAMPP_SEG);
}

void dense_block_backward(dense_block_t *k, model_t *m, const float *g_out, float *g_in, dense_scratch_t *s,
                          float *work) {
    const int B = k->B, T = k->T, cmax = k->cmax;
    model_dense_sums_zero(m, &s->sums);
    // the transition: its convolution, then its BatchNorm starts the accumulators of every channel
    const float *zt = reader_input(k, m, k->zt, cmax, k->tr_bn_w, k->tr_bn_b, s);
    model_conv2d_backward(m, s->gz, 0, k->tr_w, g_out, NULL, zt, k->zth, &k->tr, work);
    model_dense_bn_backward(m, s->g, cmax, 0, &s->sums, k->tr_bn_w, k->tr_bn_b, s->gz, cmax, k->buf, cmax, k->mean,
                            k->var, cmax, B, T, cmax, s->part);
    model_grads_ready(m, k->tr_bn_b + cmax);
    for (int i = k->n - 1; i >= 0; i--) {
        cam_layer_t *l = &k->layer[i];
        // every reader of this layer's channels has run: their gradient, then the layer's own
        model_dense_bn_input_grad(m, s->gy, k->growth, s->g + l->cin, cmax, k->buf + l->cin, cmax, k->mean + l->cin,
                                  k->var + l->cin, cmax, &s->sums, l->cin, B, T, k->growth);
        cam_backward(k, m, l, s->gy, s, work);
        const float *z = reader_input(k, m, l->z, l->cin, l->bn1_w, l->bn1_b, s);
        conv2d_bn_backward(&l->lin, m, s->gz, 0, NULL, s->gh, z, 1, s->ga, work);
        model_dense_bn_backward(m, s->g, cmax, 1, &s->sums, l->bn1_w, l->bn1_b, s->gz, l->cin, k->buf, cmax, k->mean,
                                k->var, cmax, B, T, l->cin, s->part);
        model_grads_ready(m, layer_end(l));
    }
    model_dense_bn_input_grad(m, g_in, k->c0, s->g, cmax, k->buf, cmax, k->mean, k->var, cmax, &s->sums, 0, B, T,
                              k->c0);
}

double dense_block_macs(int c0, int layers, int growth, int bn_size, double T) {
    const double H = (double)bn_size * growth;
    double f = 0;
    for (int i = 0; i < layers; i++) {
        const double cin = c0 + (double)i * growth;
        f += cin * H * T + H * growth * 3 * T;  // linear1, linear_local (the mask's linears run per segment)
    }
    const double cmax = c0 + (double)layers * growth;
    return f + cmax * (cmax / 2) * T;
}
