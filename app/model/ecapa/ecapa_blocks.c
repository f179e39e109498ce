// ECAPA building blocks: the TDNN block and the SE-Res2Net block, forward and backward.
#include "app/model/ecapa/ecapa_blocks.h"

#include "app/model/layers/bn_sets.h"
#include "app/model/layers/model_layers.h"

#include <stdio.h>
#include <string.h>

#define BN_EPS      1e-5f
#define BN_MOMENTUM 0.1f

static size_t n_of(int B, int C, int T) { return (size_t)B * (size_t)C * (size_t)T; }

// ---- TDNN block: Conv1d -> ReLU -> BatchNorm1d ------------------------------------------------

void tdnn_register(tdnn_t *l, model_t *m, const char *prefix, int cin, int cout, int k, int dil) {
    char name[PARAM_NAME_MAX];
    memset(l, 0, sizeof *l);
    l->cin = cin, l->cout = cout, l->k = k, l->dil = dil;
    // Reverse execution order inside the block too: the norm runs last, so it comes first.
    snprintf(name, sizeof name, "%s.norm.norm.weight", prefix);
    l->bn_w = param_table_add(&m->table, name, 1, (int64_t[]){cout});
    snprintf(name, sizeof name, "%s.norm.norm.bias", prefix);
    l->bn_b = param_table_add(&m->table, name, 1, (int64_t[]){cout});
    snprintf(name, sizeof name, "%s.conv.conv.weight", prefix);
    l->w = param_table_add(&m->table, name, 3, (int64_t[]){cout, cin, k});
    snprintf(name, sizeof name, "%s.conv.conv.bias", prefix);
    l->b = param_table_add(&m->table, name, 1, (int64_t[]){cout});
    snprintf(name, sizeof name, "%s.norm.norm.running_mean", prefix);
    l->run_mean = param_table_add(&m->state_table, name, 1, (int64_t[]){cout});
    snprintf(name, sizeof name, "%s.norm.norm.running_var", prefix);
    l->run_var = param_table_add(&m->state_table, name, 1, (int64_t[]){cout});
}

void tdnn_alloc_post(tdnn_t *l, const model_t *m, int B, size_t bt) {
    l->a = model_buf(m, bt * (size_t)l->cout);
    l->y = model_buf(m, bt * (size_t)l->cout);
    l->mean = model_buf(m, model_bn_stats_floats(m, B, l->cout));
    l->rstd = model_buf(m, model_bn_stats_floats(m, B, l->cout));
}

void tdnn_alloc(tdnn_t *l, const model_t *m, int B, size_t bt) {
    tdnn_alloc_post(l, m, B, bt);
    if (m->bf16) l->xh = model_buf_bf16(m, bt * (size_t)l->cin);
}

void tdnn_free(tdnn_t *l, const model_t *m) {
    model_buf_bf16_free(m, &l->xh);
    model_buf_free(m, &l->a);
    model_buf_free(m, &l->y);
    model_buf_free(m, &l->mean);
    model_buf_free(m, &l->rstd);
}

size_t tdnn_work_floats(const tdnn_t *l, const model_t *m, int B, int T) {
    if (m->bf16) return m->be->conv1d_bf16_workspace_floats(B, l->cin, l->cout, T, l->k, l->dil);
    return m->be->conv1d_workspace_floats(B, l->cin, l->cout, T, l->k, l->dil);
}

void tdnn_forward(tdnn_t *l, model_t *m, const float *x, int B, int T, int train, float *work) {
    model_conv1d_forward(m, l->a, l->xh, x, l->w, l->b, B, l->cin, l->cout, T, l->k, l->dil, train, work);
    tdnn_post_forward(l, m, B, T, train);
}

void tdnn_post_forward(tdnn_t *l, model_t *m, int B, int T, int train) {
    const spk_backend_t *K = m->be;
    const float *p = m->params;
    float *st = m->state;
    if (train) {  // a keeps the ReLU's input, which the BatchNorm reads through the ReLU
        model_batchnorm_relu_train(m, l->y, l->mean, l->rstd, l->run_mean, l->run_var, l->a, l->bn_w, l->bn_b, B,
                                   l->cout, T, BN_EPS, BN_MOMENTUM);
        return;
    }
    K->relu_forward(l->a, l->a, n_of(B, l->cout, T));
    K->batchnorm1d_forward_infer(l->y, l->a, st + l->run_mean, st + l->run_var, p + l->bn_w, p + l->bn_b, B, l->cout, T,
                                 BN_EPS);
}

void tdnn_backward(tdnn_t *l, model_t *m, float *dx, int dx_accumulate, const float *dy, const float *x, int B, int T,
                   float *g, float *work) {
    if (model_writes_bf16(m)) {
        model_bn_relu_conv1d_bf16_backward(m, dx, dx_accumulate, l->w, l->b, l->bn_w, l->bn_b, dy, l->a, l->mean,
                                           l->rstd, l->xh, B, l->cin, l->cout, T, l->k, l->dil, g, work);
        return;
    }
    model_bn_relu_conv1d_backward(m, dx, dx_accumulate, l->w, l->b, l->bn_w, l->bn_b, dy, l->a, l->mean, l->rstd, x,
                                  l->xh, B, l->cin, l->cout, T, l->k, l->dil, g, work);
}

void tdnn_post_backward(tdnn_t *l, model_t *m, const float *dy, float *g, int B, int T) {
    // a is the ReLU's input or output (the BatchNorm's input is relu(a)): a > 0 marks where the
    // gradient passes.
    model_batchnorm_relu_backward(m, g, l->bn_w, l->bn_b, dy, l->a, l->mean, l->rstd, B, l->cout, T);
}

// ---- SE-Res2Net block --------------------------------------------------------------------------

void seres_register(seres_t *s, model_t *m, const char *prefix, int C, int se, int k, int dil) {
    char name[PARAM_NAME_MAX];
    memset(s, 0, sizeof *s);
    snprintf(name, sizeof name, "%s.se_block.conv2.conv.weight", prefix);
    s->se2_w = param_table_add(&m->table, name, 3, (int64_t[]){C, se, 1});
    snprintf(name, sizeof name, "%s.se_block.conv2.conv.bias", prefix);
    s->se2_b = param_table_add(&m->table, name, 1, (int64_t[]){C});
    snprintf(name, sizeof name, "%s.se_block.conv1.conv.weight", prefix);
    s->se1_w = param_table_add(&m->table, name, 3, (int64_t[]){se, C, 1});
    snprintf(name, sizeof name, "%s.se_block.conv1.conv.bias", prefix);
    s->se1_b = param_table_add(&m->table, name, 1, (int64_t[]){se});
    snprintf(name, sizeof name, "%s.tdnn2", prefix);
    tdnn_register(&s->tdnn2, m, name, C, C, 1, 1);
    int c = C / ECAPA_SCALE;
    for (int i = ECAPA_SCALE - 2; i >= 0; i--) {
        snprintf(name, sizeof name, "%s.res2net_block.blocks.%d", prefix, i);
        tdnn_register(&s->res[i], m, name, c, c, k, dil);
    }
    snprintf(name, sizeof name, "%s.tdnn1", prefix);
    tdnn_register(&s->tdnn1, m, name, C, C, 1, 1);
}

void seres_alloc(seres_t *s, const model_t *m, int C, int se, int B, size_t bt) {
    size_t c = (size_t)C / ECAPA_SCALE;
    tdnn_alloc(&s->tdnn1, m, B, bt);
    tdnn_alloc(&s->tdnn2, m, B, bt);
    for (int i = 0; i < ECAPA_SCALE - 1; i++) tdnn_alloc(&s->res[i], m, B, bt);
    if (!m->bf16) {  // else the branches' inputs exist only as their rounded operands
        for (int i = 0; i < ECAPA_SCALE - 1; i++) s->res_in[i] = model_buf(m, bt * c);
        s->res_out = model_buf(m, bt * (size_t)C);
    }
    s->s0 = model_buf(m, (size_t)B * (size_t)C);
    s->s1 = model_buf(m, (size_t)B * (size_t)se);
    s->s = model_buf(m, (size_t)B * (size_t)C);
    s->out = model_buf(m, bt * (size_t)C);
}

void seres_free(seres_t *s, const model_t *m) {
    tdnn_free(&s->tdnn1, m);
    tdnn_free(&s->tdnn2, m);
    for (int i = 0; i < ECAPA_SCALE - 1; i++) {
        tdnn_free(&s->res[i], m);
        model_buf_free(m, &s->res_in[i]);
    }
    float **const bufs[] = {&s->res_out, &s->s0, &s->s1, &s->s, &s->out};
    model_bufs_free(m, bufs, sizeof bufs / sizeof bufs[0]);
}

void seres_forward(seres_t *s, model_t *m, const float *x, int C, int se, int B, int T, int train, float *work) {
    const spk_backend_t *K = m->be;
    const float *p = m->params;
    const int c = C / ECAPA_SCALE;
    const size_t nc = n_of(B, c, T);
    tdnn_forward(&s->tdnn1, m, x, B, T, train, work);
    const float *t1 = s->tdnn1.y;
    // Res2Net: chunk 0 passes through; chunk 1 -> res[0]; chunk i -> res[i-1](x_i + y_{i-1}).
    if (m->bf16) {  // each piece rounded into its convolution's operand
        spk_bf16 *cat = s->tdnn2.xh;
        const int g = model_conv1d_group(m, train);
        model_round_conv1d_input(m, g, cat, C, 0, t1, C, NULL, B, c, T);
        for (int i = 1; i < ECAPA_SCALE; i++) {
            tdnn_t *r = &s->res[i - 1];
            model_round_conv1d_input(m, g, r->xh, c, 0, t1 + (size_t)i * c * T, C, i >= 2 ? s->res[i - 2].y : NULL, B,
                                     c, T);
            tdnn_forward(r, m, NULL, B, T, train, work);
            model_round_conv1d_input(m, g, cat, C, i * c, r->y, c, NULL, B, c, T);
        }
        tdnn_forward(&s->tdnn2, m, NULL, B, T, train, work);
    } else {
        K->channel_slice_copy(s->res_out, C, t1, C, B, c, T);
        for (int i = 1; i < ECAPA_SCALE; i++) {
            float *in = s->res_in[i - 1];
            K->channel_slice_copy(in, c, t1 + (size_t)i * c * T, C, B, c, T);
            if (i >= 2) K->vec_acc(in, s->res[i - 2].y, nc);
            tdnn_forward(&s->res[i - 1], m, in, B, T, train, work);
            K->channel_slice_copy(s->res_out + (size_t)i * c * T, C, s->res[i - 1].y, c, B, c, T);
        }
        tdnn_forward(&s->tdnn2, m, s->res_out, B, T, train, work);
    }
    // Squeeze-excitation: time mean -> 1x1 conv -> ReLU -> 1x1 conv -> sigmoid -> scale.
    const float *t2 = s->tdnn2.y;
    K->time_mean_forward(s->s0, t2, B, C, T);
    K->linear_forward(s->s1, s->s0, p + s->se1_w, p + s->se1_b, B, C, se);
    K->relu_forward(s->s1, s->s1, (size_t)B * se);
    K->linear_forward(s->s, s->s1, p + s->se2_w, p + s->se2_b, B, se, C);
    K->sigmoid_forward(s->s, s->s, (size_t)B * C);
    K->channel_scale_forward(s->out, t2, s->s, B, C, T);
    K->vec_acc(s->out, x, n_of(B, C, T));  // residual
}

void seres_backward(seres_t *s, model_t *m, float *dx, const float *dout, const float *x, int C, int se, int B, int T,
                    float *const g[4], float *work) {
    const spk_backend_t *K = m->be;
    const int c = C / ECAPA_SCALE;
    const size_t n = n_of(B, C, T), nc = n_of(B, c, T);
    float *d_t2 = g[0], *d_res = g[1], *d_t1 = g[2], *tmp = g[3];
    K->vec_acc(dx, dout, n);  // residual

    // SE: the (B, C) and (B, se) gradients live in the head of `tmp`.
    float *ds = tmp, *ds1 = tmp + (size_t)B * C, *ds0 = ds1 + (size_t)B * se;
    K->vec_zero(tmp, (size_t)B * (2 * C + se));
    K->channel_scale_backward(d_t2, ds, dout, s->tdnn2.y, s->s, B, C, T);
    float *ds2 = ds0 + (size_t)B * C;  // pre-sigmoid gradient (B, C)
    K->vec_zero(ds2, (size_t)B * C);
    K->sigmoid_backward(ds2, ds, s->s, (size_t)B * C);
    float *ds1r = ds2 + (size_t)B * C;  // gradient at the ReLU output (B, se)
    K->vec_zero(ds1r, (size_t)B * se);
    model_linear_backward(m, ds1r, s->se2_w, s->se2_b, ds2, s->s1, B, se, C);
    K->relu_backward(ds1, ds1r, s->s1, (size_t)B * se);
    model_linear_backward(m, ds0, s->se1_w, s->se1_b, ds1, s->s0, B, C, se);
    K->time_mean_backward(d_t2, ds0, B, C, T);

    tdnn_backward(&s->tdnn2, m, d_res, 0, d_t2, s->res_out, B, T, tmp, work);

    // Res2Net backward, last chunk first: y_{i-1} also fed x_i's branch. Every chunk of d_t1 is
    // written once, so copied in rather than added to zeros.
    K->channel_slice_copy(d_t1, C, d_res, C, B, c, T);  // chunk 0 passed through
    // d_in and d_carry trade places: a branch's input gradient is the next one's carry.
    float *gy = tmp, *d_in = tmp + nc, *d_carry = tmp + 2 * nc, *scratch = tmp + 3 * nc;
    for (int i = ECAPA_SCALE - 1; i >= 1; i--) {
        K->channel_slice_copy(gy, c, d_res + (size_t)i * c * T, C, B, c, T);
        if (i < ECAPA_SCALE - 1) K->vec_acc(gy, d_carry, nc);  // from x_{i+1} + y_i
        tdnn_backward(&s->res[i - 1], m, d_in, 0, gy, s->res_in[i - 1], B, T, scratch, work);
        K->channel_slice_copy(d_t1 + (size_t)i * c * T, C, d_in, c, B, c, T);
        float *const next_carry = d_in;  // d y_{i-1} from x_i + y_{i-1}
        d_in = d_carry;
        d_carry = next_carry;
    }
    tdnn_backward(&s->tdnn1, m, dx, 1, d_t1, x, B, T, tmp, work);  // dx holds the residual's
}
