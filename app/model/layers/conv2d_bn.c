// Conv2d + BatchNorm2d units (app/model/layers/conv2d_bn.h).
#include "app/model/layers/conv2d_bn.h"

#include "app/model/layers/bn_sets.h"
#include "app/model/layers/model_layers.h"
#include "kernels/base/check.h"
#include "kernels/base/spk_assert.h"

#include <stdio.h>
#include <string.h>

void bn_register(model_t *m, const char *bn, int64_t c, int64_t *w, int64_t *b, int64_t *mean, int64_t *var) {
    char name[PARAM_NAME_MAX];
    int64_t *const off[4] = {w, b, mean, var};
    const char *const what[4] = {"weight", "bias", "running_mean", "running_var"};
    for (int i = 0; i < 4; i++) {
        const int n = snprintf(name, sizeof name, "%s.%s", bn, what[i]);
        SPK_ASSERT(n > 0 && n < (int)sizeof name);
        *off[i] = param_table_add(i < 2 ? &m->table : &m->state_table, name, 1, &c);
    }
}

void conv2d_bn_register(conv2d_bn_t *u, model_t *m, const char *conv, const char *bn, int cin, int cout,
                        conv2d_geom_t g) {
    char name[PARAM_NAME_MAX];
    memset(u, 0, sizeof *u);
    u->cin = cin, u->cout = cout, u->g = g;
    bn_register(m, bn, cout, &u->bn_w, &u->bn_b, &u->bn_mean, &u->bn_var);
    snprintf(name, sizeof name, "%s.weight", conv);
    if (g.conv1d)
        u->w = param_table_add(&m->table, name, 3, (int64_t[]){cout, cin, g.kw});
    else
        u->w = param_table_add(&m->table, name, 4, (int64_t[]){cout, cin, g.kh, g.kw});
}

void conv2d_bn_shape(conv2d_bn_t *u, int B, int H, int W, int *oh, int *ow) {
    u->s = conv2d_geom_shape(u->g, B, u->cin, u->cout, H, W);
    *oh = conv2d_out_h(&u->s);
    *ow = conv2d_out_w(&u->s);
}

size_t conv2d_bn_out_size(const conv2d_bn_t *u) { return conv2d_y_size(&u->s); }

// The BatchNorm's batch: samples of per_sample maps each.
static int samples(const conv2d_bn_t *u) { return u->per_sample > 1 ? u->s.B / u->per_sample : u->s.B; }

static int rows(const conv2d_bn_t *u) { return (int)(conv2d_y_size(&u->s) / (size_t)u->cout); }

size_t conv2d_bn_work_floats(const conv2d_bn_t *u, const model_t *m) {
    const size_t conv = model_conv2d_work_floats(m, &u->s);
    const size_t bn = m->be->batchnorm2d_workspace_floats(rows(u), u->cout);
    return conv > bn ? conv : bn;
}

void conv2d_bn_release(conv2d_bn_t *u, const model_t *m) {
    model_buf_free(m, &u->a);
    model_buf_free(m, &u->y);
    model_buf_free(m, &u->mean);
    model_buf_free(m, &u->rstd);
    model_buf_bf16_free(m, &u->xh);
    u->cap = u->cap_x = u->cap_stats = 0;
}

void conv2d_bn_alloc(conv2d_bn_t *u, const model_t *m) {
    const size_t n = conv2d_bn_out_size(u), nx = conv2d_x_size(&u->s);
    const size_t stats = model_bn_stats_floats(m, samples(u), u->cout);
    if (n <= u->cap && (!m->bf16 || nx <= u->cap_x) && stats <= u->cap_stats) return;
    conv2d_bn_release(u, m);
    u->a = model_buf(m, n);
    u->y = model_buf(m, n);
    u->mean = model_buf(m, stats);
    u->rstd = model_buf(m, stats);
    if (m->bf16 && !u->xh_of) u->xh = model_buf_bf16(m, nx);
    u->cap = n;
    u->cap_x = nx;
    u->cap_stats = stats;
}

void conv2d_bn_forward(conv2d_bn_t *u, model_t *m, const float *x, const float *residual, const spk_bf16 *residual_h,
                       int relu, int train, float *work) {
    const spk_backend_t *K = m->be;
    const float *p = m->params;
    float *st = m->state;
    SPK_ASSERT(conv2d_bn_out_size(u) <= u->cap);
    // bf16 training keeps the convolution's output in bf16, as PyTorch AMP does (in a's storage)
    const int rounded = train && model_writes_bf16(m);
    spk_bf16 *ah = rounded ? (spk_bf16 *)u->a : NULL;
    // x NULL: the unit before wrote xh, or xh_of rounded it
    const float *xin = u->xh_ready || u->xh_of ? NULL : x;
    if (rounded)
        K->conv2d_bf16_forward_rounded(ah, conv2d_bn_xh(u), xin, m->params_bf16 + u->w, &u->s, work);
    else if (m->bf16)
        K->conv2d_bf16_forward(u->a, conv2d_bn_xh(u), xin, m->params_bf16 + u->w, NULL, &u->s, work);
    else
        K->conv2d_forward(u->a, x, p + u->w, NULL, &u->s, work);
    u->xh_ready = 0;
    const int B = samples(u), HW = rows(u) / B;
    const int fused = rounded && u->next;
    SPK_ASSERT(!fused || conv2d_x_size(&u->next->s) == conv2d_bn_out_size(u));
    SPK_ASSERT(!residual_h || rounded);
    // the BatchNorm's outputs: y, and the next unit's rounded input; out_bf16: the output in bf16 alone
    spk_bf16 *yh = fused ? u->next->xh : rounded && u->out_bf16 ? (spk_bf16 *)u->y : NULL;
    float *y = (fused && u->only_next) || (rounded && u->out_bf16) ? NULL : u->y;
    u->wrote_next = 0;
    if (train) {
        const int wrote = model_batchnorm2d_train(m, y, yh, u->mean, u->rstd, u->bn_mean, u->bn_var, ah ? NULL : u->a,
                                                  ah, u->bn_w, u->bn_b, residual, residual_h, relu, B, HW, u->cout,
                                                  CONV2D_BN_EPS, CONV2D_BN_MOMENTUM, work);
        u->wrote_next = wrote && fused;
        if (u->wrote_next) u->next->xh_ready = 1;
    } else
        K->batchnorm2d_forward_infer(u->y, u->a, st + u->bn_mean, st + u->bn_var, p + u->bn_w, p + u->bn_b, residual,
                                     relu, rows(u), u->cout, CONV2D_BN_EPS);
}

// The gradient between the BatchNorm and the bf16 convolution only as the convolution's rounded
// output gradient, in ga's storage (half its floats); the BatchNorm's input is the bf16 output the
// forward kept in a's storage.
static void rounded_backward(conv2d_bn_t *u, model_t *m, float *dx, int dx_accumulate, float *dres, const float *dy,
                             int relu, float *ga, float *work) {
    spk_bf16 *gh = (spk_bf16 *)ga;
    const spk_bf16 *yh = u->wrote_next ? u->next->xh : NULL;  // the next unit's backward left it as it was
    const spk_bf16 *dyh = u->dy_bf16 ? (const spk_bf16 *)dy : NULL;
    const model_bn2d_in_t in = {dyh ? NULL : dy, yh ? NULL : u->y, NULL, dyh, yh, (const spk_bf16 *)u->a};
    model_batchnorm2d_backward_rounded(m, gh, dres, u->bn_w, u->bn_b, &in, u->mean, u->rstd, relu, samples(u),
                                       rows(u) / samples(u), u->cout, work);
    if (dx && u->dx_bf16) {
        SPK_ASSERT(!dx_accumulate);
        model_conv2d_backward_rounded(m, (spk_bf16 *)dx, u->w, gh, conv2d_bn_xh(u), &u->s, work);
    } else
        model_conv2d_backward(m, dx, dx_accumulate, u->w, NULL, gh, NULL, conv2d_bn_xh(u), &u->s, work);
}

void conv2d_bn_backward(conv2d_bn_t *u, model_t *m, float *dx, int dx_accumulate, float *dres, const float *dy,
                        const float *x, int relu, float *ga, float *work) {
    if (model_writes_bf16(m)) {
        rounded_backward(u, m, dx, dx_accumulate, dres, dy, relu, ga, work);
        return;
    }
    // the invariant mode's bf16 convolution reads its output gradient rounded: the BatchNorm writes
    // it so, in ga's storage, and no float32 copy
    spk_bf16 *gh = m->bf16 && m->invariant ? (spk_bf16 *)ga : NULL;
    model_batchnorm2d_backward(m, gh ? NULL : ga, gh, dres, u->bn_w, u->bn_b, dy, u->y, u->a, u->mean, u->rstd, relu,
                               samples(u), rows(u) / samples(u), u->cout, work);
    model_conv2d_backward(m, dx, dx_accumulate, u->w, gh ? NULL : ga, gh, x, conv2d_bn_xh(u), &u->s, work);
}

int64_t conv2d_bn_end(const conv2d_bn_t *u) { return u->w + (int64_t)u->cout * u->cin * u->g.kh * u->g.kw; }

void conv2d_check_front_rows(const char *model, const char *toolkit, const model_data_t *data, int64_t F) {
    if (F >= 8 && conv2d_halved_rows(F, 3) == F / 8) return;
    char what[600], has[64] = "";
    if (data->source) {
        snprintf(what, sizeof what, "%.500s", data->source);
        snprintf(has, sizeof has, "; this dataset has F = %lld", (long long)F);
    } else {
        snprintf(what, sizeof what, "--feat %lld", (long long)F);
    }
    spk_fail_all(data->source ? SPK_EXIT_DATA : SPK_EXIT_USAGE,
                 "%s: %s needs features whose count F is a multiple of 8 (or leaves F / 8 rows after three stride-2 "
                 "stages, as %s expects)%s",
                 what, model, toolkit, has);
}
