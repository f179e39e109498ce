// ECAPA-TDNN encoder + AAM-softmax head as a model_t (SpeechBrain topology, app/ecapa.h).
#include "app/check.h"
#include "app/ecapa.h"
#include "io/rng.h"
#include "kernels/spk_assert.h"
#include "kernels/aam_softmax.h"
#include "kernels/activation.h"
#include "kernels/batchnorm.h"
#include "kernels/conv1d.h"
#include "kernels/linear.h"
#include "kernels/pooling.h"
#include "kernels/tensor_ops.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define STATS_EPS 1e-12f
static const int kernel_sizes[3] = {3, 3, 3};
static const int dilations[3] = {2, 3, 4};

// ---- parameters ----------------------------------------------------------------------------

void ecapa_register(ecapa_t *e, model_t *m) {
    const int F = (int)e->d.feat, C = (int)e->d.channels, A = (int)e->d.att, E = (int)e->d.emb;
    const int64_t S = e->d.classes;
    // Reverse execution order: the head's gradients are ready first.
    e->cls_w = param_table_add(&m->table, "classifier.weight", 2, (int64_t[]){S, E});
    e->fc_w = param_table_add(&m->table, "fc.conv.weight", 3, (int64_t[]){E, 6 * C, 1});
    e->fc_b = param_table_add(&m->table, "fc.conv.bias", 1, (int64_t[]){E});
    e->asp_bn_w = param_table_add(&m->table, "asp_bn.norm.weight", 1, (int64_t[]){6 * C});
    e->asp_bn_b = param_table_add(&m->table, "asp_bn.norm.bias", 1, (int64_t[]){6 * C});
    e->asp_bn_mean = param_table_add(&m->state_table, "asp_bn.norm.running_mean", 1, (int64_t[]){6 * C});
    e->asp_bn_var = param_table_add(&m->state_table, "asp_bn.norm.running_var", 1, (int64_t[]){6 * C});
    e->asp_conv_w = param_table_add(&m->table, "asp.conv.conv.weight", 3, (int64_t[]){3 * C, A, 1});
    e->asp_conv_b = param_table_add(&m->table, "asp.conv.conv.bias", 1, (int64_t[]){3 * C});
    tdnn_register(&e->asp_tdnn, m, "asp.tdnn", 9 * C, A, 1, 1);
    tdnn_register(&e->mfa, m, "mfa", 3 * C, 3 * C, 1, 1);
    char name[32];
    for (int i = 2; i >= 0; i--) {
        snprintf(name, sizeof name, "blocks.%d", i + 1);
        seres_register(&e->blocks[i], m, name, C, (int)e->d.se, kernel_sizes[i], dilations[i]);
    }
    tdnn_register(&e->block0, m, "blocks.0", F, C, 5, 1);
}

void ecapa_init_params(const ecapa_t *e, model_t *m, uint64_t seed) {
    // PyTorch defaults: Conv1d weight and bias uniform in +-1/sqrt(fan_in) (kaiming_uniform
    // with a = sqrt(5)); BatchNorm weight 1, bias 0, running mean 0 / var 1; the AAM class
    // weights xavier-uniform (SpeechBrain's Classifier).
    for (int i = 0; i < m->table.count; i++) {
        const param_tensor_t *t = &m->table.t[i];
        float *p = m->params + t->offset;
        rng_t r = rng_init(seed, RNG_PURPOSE_INIT, (uint64_t)i, 0);
        size_t len = strlen(t->name);
        int is_bn = strstr(t->name, "norm.") != NULL;
        int is_bias = len > 5 && strcmp(t->name + len - 5, ".bias") == 0;
        float bound;
        if (is_bn) {
            for (int64_t j = 0; j < t->numel; j++) p[j] = is_bias ? 0.0f : 1.0f;
            continue;
        }
        if (t->offset == e->cls_w) {
            bound = sqrtf(6.0f / (float)(t->shape[0] + t->shape[1]));
        } else if (is_bias) {
            const param_tensor_t *w = &m->table.t[i - 1];  // each conv registers weight then bias
            bound = 1.0f / sqrtf((float)(w->shape[1] * w->shape[2]));
        } else {
            bound = 1.0f / sqrtf((float)(t->shape[1] * t->shape[2]));
        }
        for (int64_t j = 0; j < t->numel; j++) p[j] = (float)((2.0 * rng_uniform(&r) - 1.0) * bound);
    }
    for (int i = 0; i < m->state_table.count; i++) {
        const param_tensor_t *t = &m->state_table.t[i];
        float v = strstr(t->name, "running_var") ? 1.0f : 0.0f;
        for (int64_t j = 0; j < t->numel; j++) m->state[t->offset + j] = v;
    }
}

// ---- activations ---------------------------------------------------------------------------

void ecapa_free_acts(ecapa_t *e) {
    tdnn_free(&e->block0);
    for (int i = 0; i < 3; i++) seres_free(&e->blocks[i]);
    tdnn_free(&e->mfa);
    tdnn_free(&e->asp_tdnn);
    float **bufs[] = {&e->x, &e->cat, &e->gstats, &e->attn_in, &e->attn_t, &e->attn_w, &e->pooled, &e->pooled_bn,
                      &e->bn_mean, &e->bn_rstd, &e->emb, &e->aam_cache, &e->g9, &e->g3[0], &e->g3[1], &e->g3[2],
                      &e->gblk[0], &e->gblk[1], &e->gblk[2], &e->gblk[3], &e->gatt[0], &e->gatt[1], &e->gvec[0],
                      &e->gvec[1], &e->gvec[2], &e->g_emb, &e->work};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) {
        free(*bufs[i]);
        *bufs[i] = NULL;
    }
    e->cap_b = 0;
    e->cap_bt = 0;
    e->work_floats = 0;
}

static float *alloc_f(size_t n) { return mallocCheck(n * sizeof(float)); }

// Largest conv / AAM workspace any layer needs for B samples of T frames.
static size_t work_floats(const ecapa_t *e, int B, int T) {
    const int C = (int)e->d.channels, A = (int)e->d.att;
    size_t w = aam_softmax_workspace_floats(B, (int)e->d.emb, (int)e->d.classes);
    const tdnn_t *all[] = {&e->block0, &e->mfa, &e->asp_tdnn, &e->blocks[0].tdnn1,
                           &e->blocks[0].res[0], &e->blocks[1].res[0], &e->blocks[2].res[0]};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) {
        size_t need = tdnn_work_floats(all[i], B, T);
        if (need > w) w = need;
    }
    size_t need = conv1d_workspace_floats(B, A, 3 * C, T, 1, 1);
    return need > w ? need : w;
}

// Buffers hold cap_b samples and cap_bt sample-frames: any (B, T) within both fits, so
// variable-length inference does not reallocate for every utterance.
void ecapa_reserve(ecapa_t *e, int B, int T) {
    size_t bt = (size_t)B * T, w = work_floats(e, B, T);
    if (B <= e->cap_b && bt <= e->cap_bt && w <= e->work_floats) return;
    if (e->cap_b > B) B = e->cap_b;
    if (e->cap_bt > bt) bt = e->cap_bt;
    if (e->work_floats > w) w = e->work_floats;
    ecapa_free_acts(e);
    const int F = (int)e->d.feat, C = (int)e->d.channels, A = (int)e->d.att, E = (int)e->d.emb, S = (int)e->d.classes;
    tdnn_alloc(&e->block0, bt);
    for (int i = 0; i < 3; i++) seres_alloc(&e->blocks[i], C, (int)e->d.se, B, bt);
    tdnn_alloc(&e->mfa, bt);
    tdnn_alloc(&e->asp_tdnn, bt);
    e->x = alloc_f(bt * F);
    e->cat = alloc_f(bt * 3 * C);
    e->gstats = alloc_f((size_t)B * 6 * C);
    e->attn_in = alloc_f(bt * 9 * C);
    e->attn_t = alloc_f(bt * A);
    e->attn_w = alloc_f(bt * 3 * C);
    e->pooled = alloc_f((size_t)B * 6 * C);
    e->pooled_bn = alloc_f((size_t)B * 6 * C);
    e->bn_mean = alloc_f((size_t)6 * C);
    e->bn_rstd = alloc_f((size_t)6 * C);
    e->emb = alloc_f((size_t)B * E);
    e->aam_cache = alloc_f(aam_softmax_cache_floats(B, E, S));
    e->g9 = alloc_f(bt * 9 * C);
    for (int i = 0; i < 3; i++) e->g3[i] = alloc_f(bt * 3 * C);
    for (int i = 0; i < 4; i++) e->gblk[i] = alloc_f(bt * C);
    for (int i = 0; i < 2; i++) e->gatt[i] = alloc_f(bt * A);
    for (int i = 0; i < 3; i++) e->gvec[i] = alloc_f((size_t)B * 6 * C);
    e->g_emb = alloc_f((size_t)B * E);
    e->work = alloc_f(w ? w : 1);
    e->work_floats = w;
    e->cap_b = B;
    e->cap_bt = bt;
}

// ---- forward / backward ------------------------------------------------------------------------

// frames (B, T, F) time-major -> x (B, F, T)
static void transpose_in(float *x, const float *frames, int B, int T, int F) {
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++)
            for (int f = 0; f < F; f++) x[((size_t)b * F + f) * T + t] = frames[((size_t)b * T + t) * F + f];
}

void ecapa_forward(ecapa_t *e, model_t *m, const float *frames, int B, int T, int train) {
    const int F = (int)e->d.feat, C = (int)e->d.channels, A = (int)e->d.att, E = (int)e->d.emb, se = (int)e->d.se;
    const float *p = m->params;
    float *st = m->state;
    const size_t bt = (size_t)B * T;
    SPK_ASSERT(B <= e->cap_b && (size_t)B * T <= e->cap_bt && work_floats(e, B, T) <= e->work_floats);
    transpose_in(e->x, frames, B, T, F);
    tdnn_forward(&e->block0, m, e->x, B, T, train, e->work);
    const float *in = e->block0.y;
    for (int i = 0; i < 3; i++) {
        seres_forward(&e->blocks[i], m, in, C, se, B, T, train, e->work);
        in = e->blocks[i].out;
        channel_slice_copy(e->cat + (size_t)i * C * T, 3 * C, in, C, B, C, T);
    }
    tdnn_forward(&e->mfa, m, e->cat, B, T, train, e->work);
    const float *h = e->mfa.y;  // (B, 3C, T)

    // Attentive statistics pooling with global context.
    weighted_stats_forward(e->gstats, e->gstats + 3 * C, h, NULL, B, 3 * C, T, 6 * C, STATS_EPS);
    channel_slice_copy(e->attn_in, 9 * C, h, 3 * C, B, 3 * C, T);
    time_repeat_forward(e->attn_in + (size_t)3 * C * T, 9 * C, e->gstats, 6 * C, B, 3 * C, T);
    time_repeat_forward(e->attn_in + (size_t)6 * C * T, 9 * C, e->gstats + 3 * C, 6 * C, B, 3 * C, T);
    tdnn_forward(&e->asp_tdnn, m, e->attn_in, B, T, train, e->work);
    tanh_forward(e->attn_t, e->asp_tdnn.y, bt * A);
    conv1d_forward(e->attn_w, e->attn_t, p + e->asp_conv_w, p + e->asp_conv_b, B, A, 3 * C, T, 1, 1, e->work);
    softmax_time_forward(e->attn_w, e->attn_w, B, 3 * C, T);
    weighted_stats_forward(e->pooled, e->pooled + 3 * C, h, e->attn_w, B, 3 * C, T, 6 * C, STATS_EPS);

    if (train)
        batchnorm1d_forward_train(e->pooled_bn, e->bn_mean, e->bn_rstd, st + e->asp_bn_mean, st + e->asp_bn_var, e->pooled,
                                  p + e->asp_bn_w, p + e->asp_bn_b, B, 6 * C, 1, 1e-5f, 0.1f);
    else
        batchnorm1d_forward_infer(e->pooled_bn, e->pooled, st + e->asp_bn_mean, st + e->asp_bn_var, p + e->asp_bn_w,
                                  p + e->asp_bn_b, B, 6 * C, 1, 1e-5f);
    linear_forward(e->emb, e->pooled_bn, p + e->fc_w, p + e->fc_b, B, 6 * C, E);
}

void ecapa_backward(ecapa_t *e, model_t *m, const float *g_emb, float *dframes, int B, int T) {
    const int F = (int)e->d.feat, C = (int)e->d.channels, A = (int)e->d.att, E = (int)e->d.emb, se = (int)e->d.se;
    const float *p = m->params;
    float *gr = m->grads;
    const size_t bt = (size_t)B * T;
    float *d_pooled_bn = e->gvec[0], *d_pooled = e->gvec[1], *d_gstats = e->gvec[2];
    float *dh = e->g3[0], *dw = e->g3[1], *d_cat = e->g3[2];

    memset(d_pooled_bn, 0, (size_t)B * 6 * C * sizeof(float));
    linear_backward(d_pooled_bn, gr + e->fc_w, gr + e->fc_b, g_emb, e->pooled_bn, p + e->fc_w, B, 6 * C, E);
    memset(d_pooled, 0, (size_t)B * 6 * C * sizeof(float));
    batchnorm1d_backward(d_pooled, gr + e->asp_bn_w, gr + e->asp_bn_b, d_pooled_bn, e->pooled, p + e->asp_bn_w, e->bn_mean,
                         e->bn_rstd, B, 6 * C, 1);

    // Attentive statistics pooling.
    memset(dh, 0, bt * 3 * C * sizeof(float));
    memset(dw, 0, bt * 3 * C * sizeof(float));
    weighted_stats_backward(dh, dw, d_pooled, d_pooled + 3 * C, e->mfa.y, e->attn_w, e->pooled, e->pooled + 3 * C, B,
                            3 * C, T, 6 * C, STATS_EPS);
    float *d_logit = d_cat;  // (B, 3C, T) pre-softmax gradient; d_cat is free until the MFA
    memset(d_logit, 0, bt * 3 * C * sizeof(float));
    softmax_time_backward(d_logit, dw, e->attn_w, B, 3 * C, T);
    float *d_tanh = e->gatt[0], *d_att = e->gatt[1];
    memset(d_tanh, 0, bt * A * sizeof(float));
    conv1d_backward(d_tanh, gr + e->asp_conv_w, gr + e->asp_conv_b, d_logit, e->attn_t, p + e->asp_conv_w, B, A, 3 * C, T,
                    1, 1, e->work);
    memset(d_att, 0, bt * A * sizeof(float));
    tanh_backward(d_att, d_tanh, e->attn_t, bt * A);
    memset(e->g9, 0, bt * 9 * C * sizeof(float));
    tdnn_backward(&e->asp_tdnn, m, e->g9, d_att, e->attn_in, B, T, dw, e->work);
    channel_slice_add(dh, 3 * C, e->g9, 9 * C, B, 3 * C, T);
    memset(d_gstats, 0, (size_t)B * 6 * C * sizeof(float));
    time_repeat_backward(d_gstats, 6 * C, e->g9 + (size_t)3 * C * T, 9 * C, B, 3 * C, T);
    time_repeat_backward(d_gstats + 3 * C, 6 * C, e->g9 + (size_t)6 * C * T, 9 * C, B, 3 * C, T);
    weighted_stats_backward(dh, NULL, d_gstats, d_gstats + 3 * C, e->mfa.y, NULL, e->gstats, e->gstats + 3 * C, B, 3 * C,
                            T, 6 * C, STATS_EPS);

    // MFA and the blocks, last first; each block's output gradient collects its uses.
    memset(d_cat, 0, bt * 3 * C * sizeof(float));
    tdnn_backward(&e->mfa, m, d_cat, dh, e->cat, B, T, dw, e->work);
    for (int i = 0; i < 3; i++) channel_slice_copy(e->gblk[i + 1], C, d_cat + (size_t)i * C * T, 3 * C, B, C, T);
    memset(e->gblk[0], 0, bt * C * sizeof(float));
    float *const scratch[4] = {e->g3[0], e->g3[1], e->g3[2], e->g9};
    for (int i = 2; i >= 0; i--) {
        const float *x = i == 0 ? e->block0.y : e->blocks[i - 1].out;
        seres_backward(&e->blocks[i], m, e->gblk[i], e->gblk[i + 1], x, C, se, B, T, scratch, e->work);
    }
    float *dx = NULL;
    if (dframes) {
        dx = e->g3[0];
        memset(dx, 0, bt * F * sizeof(float));
    }
    tdnn_backward(&e->block0, m, dx, e->gblk[0], e->x, B, T, e->g3[1], e->work);
    if (dframes)  // (B, F, T) -> (B, T, F)
        for (int b = 0; b < B; b++)
            for (int t = 0; t < T; t++)
                for (int f = 0; f < F; f++) dframes[((size_t)b * T + t) * F + f] = dx[((size_t)b * F + f) * T + t];
}

// ---- model_t interface -------------------------------------------------------------------------

static int batch_frames(const batch_t *b) {
    int T = (int)(b->frame_off[1] - b->frame_off[0]);
    for (int i = 1; i < b->n; i++) SPK_ASSERT(b->frame_off[i + 1] - b->frame_off[i] == T);
    return T;
}

static void train_step(model_t *m, const batch_t *b, step_stats_t *st) {
    ecapa_t *e = m->impl;
    int T = batch_frames(b);
    ecapa_reserve(e, b->n, T);
    ecapa_forward(e, m, b->x, b->n, T, 1);
    float loss = 0.0f;
    int correct = 0;
    const int E = (int)e->d.emb, S = (int)e->d.classes;
    aam_softmax_forward(&loss, &correct, e->aam_cache, e->emb, m->params + e->cls_w, b->labels, b->n, E, S, e->margin,
                        e->scale, e->work);
    memset(e->g_emb, 0, (size_t)b->n * E * sizeof(float));
    aam_softmax_backward(e->g_emb, m->grads + e->cls_w, 1.0f, e->aam_cache, e->emb, m->params + e->cls_w, b->labels, b->n,
                         E, S, e->margin, e->scale, e->work);
    ecapa_backward(e, m, e->g_emb, NULL, b->n, T);
    st->loss_sum += (double)loss * b->n;
    st->correct += correct;
    st->count += b->n;
}

static void eval_step(model_t *m, const batch_t *b, step_stats_t *st) {
    ecapa_t *e = m->impl;
    int T = batch_frames(b);
    ecapa_reserve(e, b->n, T);
    ecapa_forward(e, m, b->x, b->n, T, 0);
    float loss = 0.0f;
    int correct = 0;
    aam_softmax_forward(&loss, &correct, e->aam_cache, e->emb, m->params + e->cls_w, b->labels, b->n, (int)e->d.emb,
                        (int)e->d.classes, e->margin, e->scale, e->work);
    st->loss_sum += (double)loss * b->n;
    st->correct += correct;
    st->count += b->n;
}

// Inference-mode embeddings; samples of equal length go through together, others one by one.
static void embed(model_t *m, const batch_t *b, float *out) {
    ecapa_t *e = m->impl;
    const int64_t E = e->d.emb, F = e->d.feat;
    int i = 0;
    while (i < b->n) {
        int64_t T = b->frame_off[i + 1] - b->frame_off[i];
        int j = i + 1;
        while (j < b->n && b->frame_off[j + 1] - b->frame_off[j] == T) j++;
        ecapa_reserve(e, j - i, (int)T);
        ecapa_forward(e, m, b->x + b->frame_off[i] * F, j - i, (int)T, 0);
        memcpy(out + (size_t)i * E, e->emb, (size_t)((j - i) * E) * sizeof(float));
        i = j;
    }
}

// Margin ramp: 0 before margin_start, linear to the full margin at margin_end.
static void set_epoch(model_t *m, int64_t epoch) {
    ecapa_t *e = m->impl;
    if (e->margin_end <= e->margin_start) {
        e->margin = epoch >= e->margin_start ? e->margin_max : 0.0f;
        return;
    }
    double f = (double)(epoch - e->margin_start) / (double)(e->margin_end - e->margin_start);
    e->margin = (float)(e->margin_max * fmin(fmax(f, 0.0), 1.0));
}

static void free_impl(model_t *m) {
    ecapa_t *e = m->impl;
    ecapa_free_acts(e);
    free(e);
}

static const model_ops_t ecapa_ops = {train_step, eval_step, embed, set_epoch, free_impl};

void model_ecapa_build(model_t *m, const train_config_t *cfg) {
    ecapa_t *e = callocCheck(1, sizeof *e);
    if (cfg->channels % ECAPA_SCALE != 0)
        spk_fail_all(SPK_EXIT_USAGE, "train: --channels %lld must be a multiple of %d (Res2Net scale)", (long long)cfg->channels,
                     ECAPA_SCALE);
    e->d = (ecapa_dims_t){.feat = m->feature_dim, .channels = cfg->channels, .att = cfg->att_channels,
                          .se = cfg->se_channels, .emb = cfg->emb_dim, .classes = m->num_classes};
    e->margin_max = e->margin = (float)cfg->margin;
    e->scale = (float)cfg->scale;
    e->margin_start = cfg->margin_warmup_start;
    e->margin_end = cfg->margin_warmup_end;
    ecapa_register(e, m);
    m->ops = &ecapa_ops;
    m->impl = e;
    m->crop_frames = cfg->frames > 0 ? cfg->frames : 200;
    m->cmn = 1;
    m->emb_dim = cfg->emb_dim;
    model_alloc_buffers(m);
    ecapa_init_params(e, m, (uint64_t)cfg->seed);
}
