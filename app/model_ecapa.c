// ECAPA-TDNN encoder + AAM-softmax head as a model_t (SpeechBrain topology, app/ecapa.h), and
// ecapa-av: the same with a visual branch whose pooled statistics join the audio's before
// the embedding layer.
#include "app/check.h"
#include "app/ecapa.h"
#include "io/rng.h"
#include "kernels/aam_softmax.h"
#include "kernels/batchnorm.h"
#include "kernels/conv1d.h"
#include "kernels/linear.h"
#include "kernels/spk_assert.h"
#include "kernels/tensor_ops.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static const int kernel_sizes[3] = {3, 3, 3};
static const int dilations[3] = {2, 3, 4};

// ---- parameters ----------------------------------------------------------------------------

void ecapa_register(ecapa_t *e, model_t *m) {
    const int F = (int)e->d.feat, C = (int)e->d.channels, A = (int)e->d.att, E = (int)e->d.emb;
    const int64_t S = e->d.classes, P = e->pooled_dim;
    // Reverse execution order: the head's gradients are ready first.
    e->cls_w = param_table_add(&m->table, "classifier.weight", 2, (int64_t[]){S, E});
    e->fc_w = param_table_add(&m->table, "fc.conv.weight", 3, (int64_t[]){E, P, 1});
    e->fc_b = param_table_add(&m->table, "fc.conv.bias", 1, (int64_t[]){E});
    e->asp_bn_w = param_table_add(&m->table, "asp_bn.norm.weight", 1, (int64_t[]){P});
    e->asp_bn_b = param_table_add(&m->table, "asp_bn.norm.bias", 1, (int64_t[]){P});
    e->asp_bn_mean = param_table_add(&m->state_table, "asp_bn.norm.running_mean", 1, (int64_t[]){P});
    e->asp_bn_var = param_table_add(&m->state_table, "asp_bn.norm.running_var", 1, (int64_t[]){P});
    if (e->has_visual) {
        const int Fv = (int)e->d.vfeat, Cv = (int)e->d.vchannels;
        asp_register(&e->vis.asp, m, "visual.asp", Cv, A);
        tdnn_register(&e->vis.blocks[1], m, "visual.blocks.1", Cv, Cv, 3, 2);
        tdnn_register(&e->vis.blocks[0], m, "visual.blocks.0", Fv, Cv, 3, 1);
    }
    asp_register(&e->asp, m, "asp", 3 * C, A);
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

static float *alloc_f(size_t n) { return mallocCheck((n ? n : 1) * sizeof(float)); }

static void free_bufs(float **const *bufs, size_t n) {
    for (size_t i = 0; i < n; i++) {
        free(*bufs[i]);
        *bufs[i] = NULL;
    }
}

void ecapa_free_acts(ecapa_t *e) {
    tdnn_free(&e->block0);
    for (int i = 0; i < 3; i++) seres_free(&e->blocks[i]);
    tdnn_free(&e->mfa);
    asp_free(&e->asp);
    if (e->has_visual) {
        tdnn_free(&e->vis.blocks[0]);
        tdnn_free(&e->vis.blocks[1]);
        asp_free(&e->vis.asp);
        float **const vb[] = {&e->vis.x, &e->vis.g_h, &e->vis.g_mid, &e->vis.g_tmp};
        free_bufs(vb, sizeof vb / sizeof vb[0]);
    }
    float **const bufs[] = {&e->x,       &e->cat,     &e->pooled,  &e->pooled_bn, &e->bn_mean, &e->bn_rstd,
                            &e->emb,     &e->aam_cache, &e->g3[0], &e->g3[1],     &e->gblk[0], &e->gblk[1],
                            &e->gblk[2], &e->gblk[3], &e->gvec[0], &e->gvec[1],   &e->g_emb,   &e->work};
    free_bufs(bufs, sizeof bufs / sizeof bufs[0]);
    e->cap_b = 0;
    e->cap_bt = 0;
    e->work_floats = 0;
}

// Largest conv / AAM workspace any layer needs for B samples of T frames.
static size_t work_floats(const ecapa_t *e, int B, int T) {
    size_t w = aam_softmax_workspace_floats(B, (int)e->d.emb, (int)e->d.classes);
    const tdnn_t *all[] = {&e->block0, &e->mfa, &e->blocks[0].tdnn1, &e->blocks[0].res[0], &e->blocks[1].res[0],
                           &e->blocks[2].res[0]};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) {
        size_t need = tdnn_work_floats(all[i], B, T);
        if (need > w) w = need;
    }
    size_t need = asp_work_floats(&e->asp, B, T);
    if (need > w) w = need;
    if (e->has_visual) {
        int Tv = T / (int)e->d.vratio;
        for (int i = 0; i < 2; i++) {
            need = tdnn_work_floats(&e->vis.blocks[i], B, Tv);
            if (need > w) w = need;
        }
        need = asp_work_floats(&e->vis.asp, B, Tv);
        if (need > w) w = need;
    }
    return w;
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
    const size_t F = (size_t)e->d.feat, C = (size_t)e->d.channels, E = (size_t)e->d.emb, P = (size_t)e->pooled_dim;
    tdnn_alloc(&e->block0, bt);
    for (int i = 0; i < 3; i++) seres_alloc(&e->blocks[i], (int)C, (int)e->d.se, B, bt);
    tdnn_alloc(&e->mfa, bt);
    asp_alloc(&e->asp, B, bt);
    if (e->has_visual) {
        size_t bv = bt / (size_t)e->d.vratio + (size_t)B, Cv = (size_t)e->d.vchannels;
        tdnn_alloc(&e->vis.blocks[0], bv);
        tdnn_alloc(&e->vis.blocks[1], bv);
        asp_alloc(&e->vis.asp, B, bv);
        e->vis.x = alloc_f(bv * (size_t)e->d.vfeat);
        e->vis.g_h = alloc_f(bv * Cv);
        e->vis.g_mid = alloc_f(bv * Cv);
        e->vis.g_tmp = alloc_f(bv * Cv);
    }
    e->x = alloc_f(bt * F);
    e->cat = alloc_f(bt * 3 * C);
    e->pooled = alloc_f((size_t)B * P);
    e->pooled_bn = alloc_f((size_t)B * P);
    e->bn_mean = alloc_f(P);
    e->bn_rstd = alloc_f(P);
    e->emb = alloc_f((size_t)B * E);
    e->aam_cache = alloc_f(aam_softmax_cache_floats(B, (int)E, (int)e->d.classes));
    for (int i = 0; i < 2; i++) e->g3[i] = alloc_f(bt * (3 * C > F ? 3 * C : F));  // g3[1] also holds the input gradient
    for (int i = 0; i < 4; i++) e->gblk[i] = alloc_f(bt * C);
    for (int i = 0; i < 2; i++) e->gvec[i] = alloc_f((size_t)B * P);
    e->g_emb = alloc_f((size_t)B * E);
    e->work = alloc_f(w);
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

void ecapa_forward(ecapa_t *e, model_t *m, const float *frames, const float *vframes, int B, int T, int train) {
    const int F = (int)e->d.feat, C = (int)e->d.channels, E = (int)e->d.emb, se = (int)e->d.se, P = (int)e->pooled_dim;
    const float *p = m->params;
    float *st = m->state;
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
    asp_forward(&e->asp, m, e->mfa.y, e->pooled, P, B, T, train, e->work);
    if (e->has_visual) {  // visual statistics fill pooled[6C, 6C + 2Cv)
        visual_t *v = &e->vis;
        const int Tv = T / (int)e->d.vratio;
        transpose_in(v->x, vframes, B, Tv, (int)e->d.vfeat);
        tdnn_forward(&v->blocks[0], m, v->x, B, Tv, train, e->work);
        tdnn_forward(&v->blocks[1], m, v->blocks[0].y, B, Tv, train, e->work);
        asp_forward(&v->asp, m, v->blocks[1].y, e->pooled + 6 * C, P, B, Tv, train, e->work);
    }
    if (train)
        batchnorm1d_forward_train(e->pooled_bn, e->bn_mean, e->bn_rstd, st + e->asp_bn_mean, st + e->asp_bn_var, e->pooled,
                                  p + e->asp_bn_w, p + e->asp_bn_b, B, P, 1, 1e-5f, 0.1f);
    else
        batchnorm1d_forward_infer(e->pooled_bn, e->pooled, st + e->asp_bn_mean, st + e->asp_bn_var, p + e->asp_bn_w,
                                  p + e->asp_bn_b, B, P, 1, 1e-5f);
    linear_forward(e->emb, e->pooled_bn, p + e->fc_w, p + e->fc_b, B, P, E);
}

static void visual_backward(ecapa_t *e, model_t *m, const float *d_pooled, int B, int T) {
    visual_t *v = &e->vis;
    const int C = (int)e->d.channels, Cv = (int)e->d.vchannels, P = (int)e->pooled_dim, Tv = T / (int)e->d.vratio;
    const size_t n = (size_t)B * Cv * Tv;
    memset(v->g_h, 0, n * sizeof(float));
    asp_backward(&v->asp, m, v->g_h, d_pooled + 6 * C, v->blocks[1].y, e->pooled + 6 * C, P, B, Tv, e->work);
    memset(v->g_mid, 0, n * sizeof(float));
    tdnn_backward(&v->blocks[1], m, v->g_mid, v->g_h, v->blocks[0].y, B, Tv, v->g_tmp, e->work);
    tdnn_backward(&v->blocks[0], m, NULL, v->g_mid, v->x, B, Tv, v->g_tmp, e->work);
}

void ecapa_backward(ecapa_t *e, model_t *m, const float *g_emb, float *dframes, int B, int T) {
    const int F = (int)e->d.feat, C = (int)e->d.channels, E = (int)e->d.emb, se = (int)e->d.se, P = (int)e->pooled_dim;
    const float *p = m->params;
    float *gr = m->grads;
    const size_t bt = (size_t)B * T;
    float *d_pooled_bn = e->gvec[0], *d_pooled = e->gvec[1];
    float *dh = e->g3[0], *d_cat = e->g3[1];

    memset(d_pooled_bn, 0, (size_t)B * P * sizeof(float));
    linear_backward(d_pooled_bn, gr + e->fc_w, gr + e->fc_b, g_emb, e->pooled_bn, p + e->fc_w, B, P, E);
    memset(d_pooled, 0, (size_t)B * P * sizeof(float));
    batchnorm1d_backward(d_pooled, gr + e->asp_bn_w, gr + e->asp_bn_b, d_pooled_bn, e->pooled, p + e->asp_bn_w, e->bn_mean,
                         e->bn_rstd, B, P, 1);
    if (e->has_visual) visual_backward(e, m, d_pooled, B, T);

    memset(dh, 0, bt * 3 * C * sizeof(float));
    asp_backward(&e->asp, m, dh, d_pooled, e->mfa.y, e->pooled, P, B, T, e->work);

    // MFA and the blocks, last first; each block's output gradient collects its uses.
    memset(d_cat, 0, bt * 3 * C * sizeof(float));
    tdnn_backward(&e->mfa, m, d_cat, dh, e->cat, B, T, e->asp.g_w, e->work);
    for (int i = 0; i < 3; i++) channel_slice_copy(e->gblk[i + 1], C, d_cat + (size_t)i * C * T, 3 * C, B, C, T);
    memset(e->gblk[0], 0, bt * C * sizeof(float));
    // The pooling scratch and the MFA input gradient (copied out) serve the blocks now.
    float *const scratch[4] = {e->asp.g_w, e->asp.g_logit, dh, d_cat};
    for (int i = 2; i >= 0; i--) {
        const float *x = i == 0 ? e->block0.y : e->blocks[i - 1].out;
        seres_backward(&e->blocks[i], m, e->gblk[i], e->gblk[i + 1], x, C, se, B, T, scratch, e->work);
    }
    float *dx = NULL;
    if (dframes) {
        dx = d_cat;
        memset(dx, 0, bt * F * sizeof(float));
    }
    tdnn_backward(&e->block0, m, dx, e->gblk[0], e->x, B, T, dh, e->work);
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

static void forward_loss(ecapa_t *e, model_t *m, const batch_t *b, int train, step_stats_t *st) {
    int T = batch_frames(b);
    ecapa_reserve(e, b->n, T);
    ecapa_forward(e, m, b->x, b->vx, b->n, T, train);
    float loss = 0.0f;
    int correct = 0;
    aam_softmax_forward(&loss, &correct, e->aam_cache, e->emb, m->params + e->cls_w, b->labels, b->n, (int)e->d.emb,
                        (int)e->d.classes, e->margin, e->scale, e->work);
    st->loss_sum += (double)loss * b->n;
    st->correct += correct;
    st->count += b->n;
}

static void train_step(model_t *m, const batch_t *b, step_stats_t *st) {
    ecapa_t *e = m->impl;
    forward_loss(e, m, b, 1, st);
    const int E = (int)e->d.emb, S = (int)e->d.classes;
    memset(e->g_emb, 0, (size_t)b->n * E * sizeof(float));
    aam_softmax_backward(e->g_emb, m->grads + e->cls_w, 1.0f, e->aam_cache, e->emb, m->params + e->cls_w, b->labels, b->n,
                         E, S, e->margin, e->scale, e->work);
    ecapa_backward(e, m, e->g_emb, NULL, b->n, batch_frames(b));
}

static void eval_step(model_t *m, const batch_t *b, step_stats_t *st) { forward_loss(m->impl, m, b, 0, st); }

// Inference-mode embeddings; samples of equal length go through together, others one by one.
static void embed(model_t *m, const batch_t *b, float *out) {
    ecapa_t *e = m->impl;
    const int64_t E = e->d.emb, F = e->d.feat, Fv = e->d.vfeat;
    int i = 0;
    while (i < b->n) {
        int64_t T = b->frame_off[i + 1] - b->frame_off[i];
        int j = i + 1;
        while (j < b->n && b->frame_off[j + 1] - b->frame_off[j] == T) j++;
        ecapa_reserve(e, j - i, (int)T);
        ecapa_forward(e, m, b->x + b->frame_off[i] * F, e->has_visual ? b->vx + b->vframe_off[i] * Fv : NULL, j - i, (int)T,
                      0);
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
    e->has_visual = strcmp(cfg->model, "ecapa-av") == 0;
    if (e->has_visual) {
        if (m->visual_dim <= 0)
            spk_fail_all(SPK_EXIT_DATA, "train: --model ecapa-av needs a dataset with a /visual stream (%s has none)", cfg->data);
        e->d.vfeat = m->visual_dim;
        e->d.vchannels = cfg->visual_channels;
        e->d.vratio = m->visual_ratio;
    }
    e->pooled_dim = 6 * e->d.channels + 2 * e->d.vchannels;
    e->margin_max = e->margin = (float)cfg->margin;
    e->scale = (float)cfg->scale;
    e->margin_start = cfg->margin_warmup_start;
    e->margin_end = cfg->margin_warmup_end;
    ecapa_register(e, m);
    m->ops = &ecapa_ops;
    m->impl = e;
    // Crops cover whole visual frames; every convolution needs more frames than its padding
    // (audio: 4 at dilation 4; visual: 2 at dilation 2).
    int64_t crop = cfg->frames > 0 ? cfg->frames : 200, r = e->has_visual ? e->d.vratio : 1;
    m->input = (loader_spec_t){.crop = crop - crop % r, .min_frames = e->has_visual ? 3 * r > 5 ? 3 * r : 5 : 5,
                               .cmn = 1, .visual = e->has_visual};
    if (m->input.crop < m->input.min_frames)
        spk_fail_all(SPK_EXIT_USAGE, "train: --frames %lld is too short for %s (at least %lld)", (long long)cfg->frames,
                     cfg->model, (long long)m->input.min_frames);
    m->emb_dim = cfg->emb_dim;
    model_alloc_buffers(m);
    ecapa_init_params(e, m, (uint64_t)cfg->seed);
}
