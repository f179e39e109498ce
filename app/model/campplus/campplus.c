// 3D-Speaker's CAM++ as a model_t (app/model/campplus/campplus.h).
#include "app/model/campplus/campplus.h"

#include "app/model/layers/bn_sets.h"
#include "app/model/layers/model_layers.h"
#include "kernels/base/check.h"
#include "kernels/base/rng.h"
#include "kernels/base/spk_assert.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CAMPP_EPS      1e-5f  // PyTorch's BatchNorm1d
#define CAMPP_MOMENTUM 0.1f

static const int block_layers[CAMPP_BLOCKS] = {12, 24, 16}, block_dilation[CAMPP_BLOCKS] = {1, 2, 2};

// The channels after block i's transition (i = -1: the TDNN layer's).
static int64_t channels_after(const campp_dims_t *d, int i) {
    int64_t c = d->channels;
    for (int j = 0; j <= i; j++) c = (c + (int64_t)d->layers[j] * d->growth) / 2;
    return c;
}

// ---- parameters ---------------------------------------------------------------------------------

// In reverse execution order: the embedding layer, out_nonlinear, the blocks last first, the TDNN
// layer, the front end last unit first.
static void campplus_register(campplus_t *c, model_t *m) {
    const campp_dims_t *d = &c->d;
    const int64_t C = channels_after(d, CAMPP_BLOCKS - 1), E = d->emb;
    c->dense_w = param_table_add(&m->table, "xvector.dense.linear.weight", 3, (int64_t[]){E, c->dense_in, 1});
    c->dense_mean = param_table_add(&m->state_table, "xvector.dense.nonlinear.batchnorm.running_mean", 1, &E);
    c->dense_var = param_table_add(&m->state_table, "xvector.dense.nonlinear.batchnorm.running_var", 1, &E);
    if (c->has_face) face_branch_register(&c->av, m);  // (executed before the dense layer, beside the blocks)
    bn_register(m, "xvector.out_nonlinear.batchnorm", C, &c->out_bn_w, &c->out_bn_b, &c->out_bn_mean, &c->out_bn_var);
    for (int i = CAMPP_BLOCKS - 1; i >= 0; i--)
        dense_block_register(&c->blocks[i], m, i + 1, (int)channels_after(d, i - 1), d->layers[i], d->growth,
                             d->bn_size, block_dilation[i]);
    const int fh = (int)(d->feat / 8);
    conv2d_bn_register(&c->tdnn, m, "xvector.tdnn.linear", "xvector.tdnn.nonlinear.batchnorm", CAMPP_FCM * fh,
                       (int)d->channels, conv2d_geom_1d(5, 2, 2, 1));
    conv2d_geom_t down = conv2d_geom_square(3, 1);
    down.sh = 2;  // (2, 1): frequency halves, time stays
    conv2d_bn_register(&c->fcm_out, m, "head.conv2", "head.bn2", CAMPP_FCM, CAMPP_FCM, down);
    for (int i = 2 * CAMPP_FCM_BLOCKS - 1; i >= 0; i--) {
        char prefix[32];
        const int stage = i / CAMPP_FCM_BLOCKS, j = i % CAMPP_FCM_BLOCKS;
        snprintf(prefix, sizeof prefix, "head.layer%d.%d", stage + 1, j);
        res_block_register(&c->fcm[i], m, prefix, CAMPP_FCM, CAMPP_FCM, j == 0 ? 2 : 1, 1, 1);
    }
    conv2d_bn_register(&c->stem, m, "head.conv1", "head.bn1", 1, CAMPP_FCM, conv2d_geom_square(3, 1));
    res_blocks_chain(&c->stem, c->fcm, 2 * CAMPP_FCM_BLOCKS, &c->fcm_out);
    c->units[c->nunits++] = &c->stem;
    for (int i = 0; i < 2 * CAMPP_FCM_BLOCKS; i++) c->nunits += res_block_units(&c->fcm[i], c->units + c->nunits);
    c->units[c->nunits++] = &c->fcm_out;
    c->units[c->nunits++] = &c->tdnn;
}

// 3D-Speaker's initialisation: every Conv1d and Linear weight kaiming-normal (std sqrt(2 / fan_in)),
// their biases 0; the front end's Conv2d PyTorch's default (uniform in +-1/sqrt(fan_in));
// BatchNorm weight 1, bias 0, running mean 0, variance 1; the classifier xavier-uniform.
static void campplus_init_params(const campplus_t *c, model_t *m, uint64_t seed) {
    for (int i = 0; i < m->table.count; i++) {
        const param_tensor_t *t = &m->table.t[i];
        float *p = m->host_params + t->offset;
        if (t->offset == c->head.cls_w) {
            aam_encoder_init_classifier(&c->head, m, seed, i);
            continue;
        }
        const int is_bn = strstr(t->name, "batchnorm.") || strstr(t->name, ".bn") || strstr(t->name, "shortcut.1");
        if (t->ndim == 1) {  // a BatchNorm's weight or bias, or a mask linear's bias
            const float v = is_bn && strstr(t->name, ".weight") ? 1.0f : 0.0f;
            for (int64_t j = 0; j < t->numel; j++) p[j] = v;
            continue;
        }
        const double fan_in = (double)(t->numel / t->shape[0]);
        rng_t g = rng_init(seed, RNG_PURPOSE_INIT, (uint64_t)i, 0);
        if (t->ndim == 4) {
            const double bound = 1.0 / sqrt(fan_in);
            for (int64_t j = 0; j < t->numel; j++) p[j] = (float)((2.0 * rng_uniform(&g) - 1.0) * bound);
        } else {
            const double std = sqrt(2.0 / fan_in);
            for (int64_t j = 0; j < t->numel; j++) p[j] = (float)(rng_normal(&g) * std);
        }
    }
    for (int i = 0; i < m->state_table.count; i++) {
        const param_tensor_t *t = &m->state_table.t[i];
        const float v = strstr(t->name, "running_var") ? 1.0f : 0.0f;
        for (int64_t j = 0; j < t->numel; j++) m->host_state[t->offset + j] = v;
    }
}

// ---- activations --------------------------------------------------------------------------------

static int64_t last_channels(const campplus_t *c) { return channels_after(&c->d, CAMPP_BLOCKS - 1); }

// Every unit's shape for B samples of T frames.
static void set_shapes(campplus_t *c, int B, int T) {
    int H = (int)c->d.feat, W = T;
    conv2d_bn_shape(&c->stem, B, H, W, &H, &W);
    for (int i = 0; i < 2 * CAMPP_FCM_BLOCKS; i++) res_block_shape(&c->fcm[i], B, &H, &W);
    conv2d_bn_shape(&c->fcm_out, B, H, W, &H, &W);
    SPK_ASSERT(W == T);
    c->fh = H;
    conv2d_bn_shape(&c->tdnn, B, 1, T, &H, &W);
    c->t1 = W;
}

static void release_buffers(campplus_t *c, const model_t *m) {
    float **const bufs[] = {&c->x,         &c->flat,    &c->out_y,    &c->out_mean, &c->out_rstd, &c->pooled,
                            &c->dense_out, &c->emb_out, &c->emb_mean, &c->emb_rstd, &c->g[0],     &c->g[1],
                            &c->g[2],      &c->g[3],    &c->g_pooled, &c->g_dense,  &c->g_rows,   &c->work};
    model_bufs_free(m, bufs, sizeof bufs / sizeof bufs[0]);
    c->work_floats = c->map_floats = 0;
    c->cap_b = c->cap_t = 0;
}

static void release(model_t *m) {
    campplus_t *c = m->impl;
    for (int i = 0; i < c->nunits; i++) conv2d_bn_release(c->units[i], m);
    for (int i = 0; i < CAMPP_BLOCKS; i++) {
        dense_block_release(&c->blocks[i], m);
        free(c->blocks[i].layer);
        c->blocks[i].layer = NULL;
    }
    dense_scratch_release(&c->scratch, m);
    if (c->has_face) face_branch_release(&c->av, m);
    release_buffers(c, m);
}

static void reserve(model_t *m, int B, int T) {
    campplus_t *c = m->impl;
    if (c->has_face) face_branch_reserve(&c->av, m, B, T);  // (grows itself)
    set_shapes(c, B, T);
    const size_t R1 = (size_t)B * c->t1, C = (size_t)last_channels(c);
    size_t work = c->work_floats, map = c->map_floats;
    const size_t need[] = {(size_t)B * T * c->d.feat, R1 * c->d.channels, R1 * c->blocks[0].cmax / 2,
                           R1 * c->blocks[1].cmax / 2, R1 * C};
    for (size_t i = 0; i < sizeof need / sizeof need[0]; i++) map = need[i] > map ? need[i] : map;
    for (int i = 0; i < c->nunits; i++) {
        conv2d_bn_alloc(c->units[i], m);
        const size_t w = conv2d_bn_work_floats(c->units[i], m), n = conv2d_x_size(&c->units[i]->s),
                     o = conv2d_bn_out_size(c->units[i]);
        work = w > work ? w : work;
        map = n > map ? n : map;
        map = o > map ? o : map;
    }
    for (int i = 0; i < CAMPP_BLOCKS; i++) {
        const size_t w = dense_block_reserve(&c->blocks[i], m, B, c->t1, c->d.recompute);
        work = w > work ? w : work;
        dense_scratch_reserve(&c->scratch, m, &c->blocks[i]);
    }
    const size_t bn = m->be->batchnorm2d_workspace_floats((int)R1, (int)C);
    work = bn > work ? bn : work;
    if (c->has_face && face_branch_work_floats(&c->av) > work) work = face_branch_work_floats(&c->av);
    if (B <= c->cap_b && T <= c->cap_t && work == c->work_floats && map == c->map_floats) return;
    const int cb = B > c->cap_b ? B : c->cap_b, ct = T > c->cap_t ? T : c->cap_t;
    release_buffers(c, m);
    const size_t E = (size_t)c->d.emb, rows = (size_t)cb * ct;  // T1 <= T rows per sample
    c->x = model_buf(m, rows * c->d.feat);
    c->flat = model_buf(m, rows * CAMPP_FCM * (c->d.feat / 8));
    c->out_y = model_buf(m, rows * C);
    c->out_mean = model_buf(m, model_bn_stats_floats(m, cb, (int)C));  // (a set of statistics a group's)
    c->out_rstd = model_buf(m, model_bn_stats_floats(m, cb, (int)C));
    c->pooled = model_buf(m, (size_t)cb * 2 * C);
    c->dense_out = model_buf(m, (size_t)cb * E);
    c->emb_out = model_buf(m, (size_t)cb * E);
    c->emb_mean = model_buf(m, model_bn_stats_floats(m, cb, (int)E));
    c->emb_rstd = model_buf(m, model_bn_stats_floats(m, cb, (int)E));
    c->g_pooled = model_buf(m, (size_t)cb * (size_t)c->dense_in);
    c->g_dense = model_buf(m, (size_t)cb * E);
    c->g_rows = model_buf(m, rows * C);
    for (int i = 0; i < 4; i++) c->g[i] = model_buf(m, map);
    c->work = model_buf(m, work);
    c->work_floats = work, c->map_floats = map, c->cap_b = cb, c->cap_t = ct;
}

// ---- forward / backward -------------------------------------------------------------------------

static const float *fcm_input(const campplus_t *c, int i) { return i == 0 ? c->stem.y : res_block_out(&c->fcm[i - 1]); }

static const float *block_input(const campplus_t *c, int i) { return i == 0 ? c->tdnn.y : c->blocks[i - 1].out; }

// campplus-av passes its pictures (NULL otherwise).
static const float *forward_streams(campplus_t *c, model_t *m, const float *frames, const float *pictures, int B, int T,
                                    int train) {
    const spk_backend_t *K = m->be;
    const float *p = m->params;
    float *st = m->state;
    SPK_ASSERT(B <= c->cap_b && T <= c->cap_t);
    const int C = (int)last_channels(c), E = (int)c->d.emb, R1 = B * c->t1;
    K->batch_transpose(c->x, frames, B, T, (int)c->d.feat);  // (B, T, F) -> (B, F, T): an F x T image
    conv2d_bn_forward(&c->stem, m, c->x, NULL, NULL, 1, train, c->work);
    for (int i = 0; i < 2 * CAMPP_FCM_BLOCKS; i++) res_block_forward(&c->fcm[i], m, fcm_input(c, i), train, c->work);
    conv2d_bn_forward(&c->fcm_out, m, fcm_input(c, 2 * CAMPP_FCM_BLOCKS), NULL, NULL, 1, train, c->work);
    // (B, F/8, T, 32) -> (B, T, 32, F/8): channel c * F/8 + h, as the toolkit's reshape
    K->batch_transpose(c->flat, c->fcm_out.y, B, c->fh, T * CAMPP_FCM);
    conv2d_bn_forward(&c->tdnn, m, c->flat, NULL, NULL, 1, train, c->work);
    for (int i = 0; i < CAMPP_BLOCKS; i++)
        dense_block_forward(&c->blocks[i], m, block_input(c, i), train, &c->scratch, c->work);
    const float *last = block_input(c, CAMPP_BLOCKS);
    if (train)
        model_batchnorm2d_train(m, c->out_y, NULL, c->out_mean, c->out_rstd, c->out_bn_mean, c->out_bn_var, last, NULL,
                                c->out_bn_w, c->out_bn_b, NULL, NULL, 1, B, c->t1, C, CAMPP_EPS, CAMPP_MOMENTUM,
                                c->work);
    else
        K->batchnorm2d_forward_infer(c->out_y, last, st + c->out_bn_mean, st + c->out_bn_var, p + c->out_bn_w,
                                     p + c->out_bn_b, NULL, 1, R1, C, CAMPP_EPS);
    K->tstp_forward(c->pooled, c->out_y, B, 1, c->t1, C, 0.0f);  // the mean and the unbiased std
    c->dense_x = c->has_face ? face_branch_forward(&c->av, m, c->pooled, pictures, B, T, train, c->work) : c->pooled;
    K->linear_forward(c->dense_out, c->dense_x, p + c->dense_w, NULL, B, (int)c->dense_in, E);
    if (train)
        model_batchnorm_train(m, c->emb_out, c->emb_mean, c->emb_rstd, c->dense_mean, c->dense_var, c->dense_out, -1,
                              -1, B, E, 1, CAMPP_EPS, CAMPP_MOMENTUM);
    else
        K->batchnorm1d_forward_infer(c->emb_out, c->dense_out, st + c->dense_mean, st + c->dense_var, NULL, NULL, B, E,
                                     1, CAMPP_EPS);
    return c->emb_out;
}

const float *campplus_forward(campplus_t *c, model_t *m, const float *frames, int B, int T, int train) {
    return forward_streams(c, m, frames, NULL, B, T, train);
}

void campplus_backward(campplus_t *c, model_t *m, const float *g_emb, float *dframes, int B, int T) {
    const spk_backend_t *K = m->be;
    const int C = (int)last_channels(c), E = (int)c->d.emb, R1 = B * c->t1;
    K->vec_zero(c->g_dense, (size_t)B * E);
    model_batchnorm_backward(m, c->g_dense, -1, -1, g_emb, c->dense_out, c->emb_mean, c->emb_rstd, B, E, 1);
    K->vec_zero(c->g_pooled, (size_t)B * c->dense_in);
    model_linear_backward(m, c->g_pooled, c->dense_w, -1, c->g_dense, c->dense_x, B, (int)c->dense_in, E);
    model_grads_ready(m, c->dense_w + E * c->dense_in);
    // (the face encoder, registered next, then the audio's statistics)
    const float *g_audio = c->has_face ? face_branch_backward(&c->av, m, c->g_pooled, B, T, c->work) : c->g_pooled;
    K->vec_zero(c->g_rows, (size_t)R1 * C);
    K->tstp_backward(c->g_rows, g_audio, c->out_y, c->pooled, B, 1, c->t1, C);
    float *go = c->g[0], *gx = c->g[1];
    model_batchnorm2d_backward(m, go, NULL, NULL, c->out_bn_w, c->out_bn_b, c->g_rows, c->out_y,
                               block_input(c, CAMPP_BLOCKS), c->out_mean, c->out_rstd, 1, B, c->t1, C, c->work);
    model_grads_ready(m, c->out_bn_b + C);
    for (int i = CAMPP_BLOCKS - 1; i >= 0; i--) {
        dense_block_backward(&c->blocks[i], m, go, gx, &c->scratch, c->work);
        float *t = go;  // this block's input gradient is the output gradient of the one before
        go = gx, gx = t;
    }
    conv2d_bn_backward(&c->tdnn, m, c->g[2], 0, NULL, go, c->flat, 1, c->g[3], c->work);
    model_grads_ready(m, conv2d_bn_end(&c->tdnn));
    go = c->g[0], gx = c->g[1];
    K->batch_transpose(go, c->g[2], B, T * CAMPP_FCM, c->fh);  // back to (B, F/8, T, 32)
    conv2d_bn_backward(&c->fcm_out, m, gx, 0, NULL, go, fcm_input(c, 2 * CAMPP_FCM_BLOCKS), 1, c->g[2], c->work);
    model_grads_ready(m, conv2d_bn_end(&c->fcm_out));
    for (int i = 2 * CAMPP_FCM_BLOCKS - 1; i >= 0; i--) {
        float *t = go;
        go = gx, gx = t;
        res_block_backward(&c->fcm[i], m, fcm_input(c, i), go, gx, c->g[2], c->g[3], c->work);
        model_grads_ready(m, res_block_end(&c->fcm[i]));
    }
    conv2d_bn_backward(&c->stem, m, dframes ? go : NULL, 0, NULL, gx, c->x, 1, c->g[2], c->work);
    model_grads_ready(m, m->table.total);
    if (dframes) K->batch_transpose(dframes, go, B, (int)c->d.feat, T);  // (B, F, T) -> (B, T, F)
}

static const float *forward(model_t *m, const float *frames, const float *vframes, int B, int T, int train) {
    return forward_streams(m->impl, m, frames, vframes, B, T, train);
}

static void backward(model_t *m, const float *g_emb, int B, int T) { campplus_backward(m->impl, m, g_emb, NULL, B, T); }

static const aam_encoder_ops_t campplus_encoder = {reserve, forward, backward, release};

// ---- the model ----------------------------------------------------------------------------------

static campp_dims_t dims_of(const model_config_t *cfg, int64_t feat) {
    campp_dims_t d = {.feat = feat,
                      .channels = cfg->channels ? cfg->channels : CAMPP_CHANNELS,
                      .emb = cfg->emb_dim ? cfg->emb_dim : CAMPP_EMB,
                      .growth = cfg->growth_rate ? (int)cfg->growth_rate : CAMPP_GROWTH,
                      .bn_size = cfg->bn_size ? (int)cfg->bn_size : CAMPP_BN_SIZE,
                      .recompute = cfg->recompute};
    memcpy(d.layers, block_layers, sizeof d.layers);
    return d;
}

void model_campplus_build(model_t *m, const model_config_t *cfg, const model_data_t *data) {
    const int64_t F = m->feature_dim;
    conv2d_check_front_rows("campplus", "3D-Speaker's front end", data, F);
    campplus_t *c = callocCheck(1, sizeof *c);
    c->d = dims_of(cfg, F);
    c->dense_in = 2 * channels_after(&c->d, CAMPP_BLOCKS - 1);
    if (strcmp(cfg->name, "campplus-av") == 0) {
        face_branch_setup(&c->av, m, cfg, data, c->dense_in);
        c->has_face = 1;
        c->dense_in = c->av.joined_dim;
    } else if (cfg->face_channels > 0 || cfg->modality_dropout > 0) {
        spk_fail_all(SPK_EXIT_USAGE, "--%s applies to audio-visual models (--model campplus-av)",
                     cfg->face_channels > 0 ? "face-channels" : "modality-dropout");
    }
    m->impl = c;
    aam_encoder_init(&c->head, m, cfg, &campplus_encoder, c->d.emb);
    c->head.visual = c->has_face;
    c->head.vratio = c->has_face ? c->av.vratio : 0;
    campplus_register(c, m);
    // the TDNN layer halves the frames: two must remain (the unbiased standard deviation); with
    // faces, crops of whole visual frames, two of them at least
    const int64_t v = c->has_face ? c->av.vratio : 1, crop = cfg->frames > 0 ? cfg->frames : CAMPP_FRAMES;
    m->input = (loader_spec_t){.crop = crop - crop % v,
                               .min_frames = c->has_face ? (2 * v > 3 ? 2 * v : 3 * v) : 3,
                               .cmn = 1,
                               .visual = c->has_face};
    if (m->input.crop < m->input.min_frames)
        spk_fail_all(SPK_EXIT_USAGE, "campplus: --frames %lld is too short (at least %lld)", (long long)cfg->frames,
                     (long long)m->input.min_frames);
    m->min_batch = 2;  // BatchNorm over the batch
    model_alloc_buffers(m, data);
    campplus_init_params(c, m, cfg->seed);
    if (cfg->zero_init_residual) {
        res_blocks_zero_residual(c->fcm, 2 * CAMPP_FCM_BLOCKS, m);
        if (c->has_face) face_encoder_zero_residual(&c->av.face, m);
    }
}

double campplus_forward_flop(const model_config_t *cfg, int64_t feat) {
    const campp_dims_t d = dims_of(cfg, feat);
    const double T = (double)cfg->frames, T1 = ceil(T / 2), m = CAMPP_FCM;
    double h = (double)feat, f = 9 * m * h * T;  // the stem
    for (int s = 0; s < 2; s++) {
        for (int j = 0; j < CAMPP_FCM_BLOCKS; j++) {
            const double oh = j == 0 ? ceil(h / 2) : h;
            f += 2 * 9 * m * m * oh * T + (j == 0 ? m * m * oh * T : 0);
            h = oh;
        }
    }
    h = ceil(h / 2);
    f += 9 * m * m * h * T;                             // head.conv2
    f += m * (double)(feat / 8) * d.channels * 5 * T1;  // the TDNN layer
    for (int i = 0; i < CAMPP_BLOCKS; i++)
        f += dense_block_macs((int)channels_after(&d, i - 1), d.layers[i], d.growth, d.bn_size, T1);
    f += 2.0 * (double)channels_after(&d, CAMPP_BLOCKS - 1) * (double)d.emb;  // the embedding layer
    return 2.0 * f;
}
