// ECAPA-TDNN encoder + AAM-softmax head as a model_t (SpeechBrain topology, app/model/ecapa/ecapa.h), and
// ecapa-av: the same with a visual branch whose pooled statistics join the audio's before
// the embedding layer.
#include "app/model/ecapa/ecapa.h"

#include "app/model/layers/bn_sets.h"
#include "app/model/layers/model_layers.h"
#include "kernels/base/check.h"
#include "kernels/base/rng.h"
#include "kernels/base/spk_assert.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static const int kernel_sizes[3] = {3, 3, 3};
static const int dilations[3] = {2, 3, 4};

// ---- parameters ----------------------------------------------------------------------------

// Registers every tensor (reverse execution order) into m->table / m->state_table.
static void ecapa_register(ecapa_t *e, model_t *m) {
    const int F = (int)e->d.feat, C = (int)e->d.channels, A = (int)e->d.att, E = (int)e->d.emb;
    const int64_t P = e->pooled_dim;
    // Reverse execution order (the classifier, registered by the head, comes first).
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
        if (e->vis.has_face)
            face_encoder_register(&e->vis.face, m, "visual.face", (int)e->d.image_size, (int)e->d.image_channels,
                                  (int)e->d.face_channels);
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

// Initialises parameters like PyTorch's defaults from the seed.
static void ecapa_init_params(const ecapa_t *e, model_t *m, uint64_t seed) {
    // PyTorch defaults: Conv1d weight and bias uniform in +-1/sqrt(fan_in) (kaiming_uniform
    // with a = sqrt(5)); BatchNorm weight 1, bias 0, running mean 0 / var 1; the AAM class
    // weights xavier-uniform (SpeechBrain's Classifier).
    for (int i = 0; i < m->table.count; i++) {
        const param_tensor_t *t = &m->table.t[i];
        float *p = m->host_params + t->offset;
        rng_t r = rng_init(seed, RNG_PURPOSE_INIT, (uint64_t)i, 0);
        size_t len = strlen(t->name);
        int is_bn = strstr(t->name, "norm.") != NULL;
        int is_bias = len > 5 && strcmp(t->name + len - 5, ".bias") == 0;
        float bound;
        const int face = strncmp(t->name, "visual.face.", 12) == 0;  // PyTorch names: BatchNorm2d, Conv2d
        if (is_bn || (face && t->ndim == 1)) {
            for (int64_t j = 0; j < t->numel; j++) p[j] = is_bias ? 0.0f : 1.0f;
            continue;
        }
        if (t->offset == e->head.cls_w) {
            aam_encoder_init_classifier(&e->head, m, seed, i);
            continue;
        }
        if (is_bias) {
            const param_tensor_t *w = &m->table.t[i - 1];  // each conv registers weight then bias
            bound = 1.0f / sqrtf((float)(w->shape[1] * w->shape[2]));
        } else {
            bound = 1.0f / sqrtf((float)(t->numel / t->shape[0]));  // fan_in: in channels x kernel
        }
        for (int64_t j = 0; j < t->numel; j++) p[j] = (float)((2.0 * rng_uniform(&r) - 1.0) * bound);
    }
    for (int i = 0; i < m->state_table.count; i++) {
        const param_tensor_t *t = &m->state_table.t[i];
        float v = strstr(t->name, "running_var") ? 1.0f : 0.0f;
        for (int64_t j = 0; j < t->numel; j++) m->host_state[t->offset + j] = v;
    }
}

// ---- activations ---------------------------------------------------------------------------

static void ecapa_free_acts(ecapa_t *e, const model_t *m) {
    tdnn_free(&e->block0, m);
    for (int i = 0; i < 3; i++) seres_free(&e->blocks[i], m);
    tdnn_free(&e->mfa, m);
    asp_free(&e->asp, m);
    if (e->has_visual) {
        tdnn_free(&e->vis.blocks[0], m);
        tdnn_free(&e->vis.blocks[1], m);
        asp_free(&e->vis.asp, m);
        float **const vb[] = {&e->vis.x,  &e->vis.g_h,  &e->vis.g_mid, &e->vis.g_tmp,
                              &e->vis.fx, &e->vis.g_fx, &e->vis.g_x};
        for (size_t i = 0; i < sizeof vb / sizeof vb[0]; i++) model_buf_free(m, vb[i]);
    }
    model_buf_free(m, &e->pooled_kept);
    float **const bufs[] = {&e->x,       &e->cat,     &e->pooled,  &e->pooled_bn, &e->bn_mean, &e->bn_rstd,
                            &e->emb,     &e->g3[0],   &e->g3[1],   &e->g3[2],     &e->gblk[0], &e->gblk[1],
                            &e->gblk[2], &e->gblk[3], &e->gvec[0], &e->gvec[1],   &e->work};
    model_bufs_free(m, bufs, sizeof bufs / sizeof bufs[0]);
    e->cap_b = 0;
    e->cap_bt = 0;
    e->work_floats = 0;
}

// Largest conv / pooling workspace any layer needs for B samples of T frames.
static size_t work_floats(const ecapa_t *e, const model_t *m, int B, int T) {
    size_t w = 0;
    const tdnn_t *all[] = {
        &e->block0, &e->mfa, &e->blocks[0].tdnn1, &e->blocks[0].res[0], &e->blocks[1].res[0], &e->blocks[2].res[0]};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) {
        size_t need = tdnn_work_floats(all[i], m, B, T);
        if (need > w) w = need;
    }
    size_t need = asp_work_floats(&e->asp, m, B, T);
    if (need > w) w = need;
    if (e->has_visual) {
        int Tv = T / (int)e->d.vratio;
        for (int i = 0; i < 2; i++) {
            need = tdnn_work_floats(&e->vis.blocks[i], m, B, Tv);
            if (need > w) w = need;
        }
        need = asp_work_floats(&e->vis.asp, m, B, Tv);
        if (need > w) w = need;
        if (e->vis.has_face && face_encoder_work_floats(&e->vis.face) > w) w = face_encoder_work_floats(&e->vis.face);
    }
    return w;
}

// Buffers hold cap_b samples and cap_bt sample-frames: any (B, T) within both fits, so
// variable-length inference does not reallocate for every utterance.
void ecapa_reserve(ecapa_t *e, const model_t *m, int B, int T) {
    if (e->vis.has_face) {  // (grows itself; embed takes a long utterance's pictures in pieces)
        const int n = B * (T / (int)e->d.vratio);
        face_encoder_reserve(&e->vis.face, m, m->embedding && n > FACE_EMBED_PICTURES ? FACE_EMBED_PICTURES : n);
    }
    size_t bt = (size_t)B * T, w = work_floats(e, m, B, T);
    if (B <= e->cap_b && bt <= e->cap_bt && w <= e->work_floats) return;
    if (e->cap_b > B) B = e->cap_b;
    if (e->cap_bt > bt) bt = e->cap_bt;
    if (e->work_floats > w) w = e->work_floats;
    ecapa_free_acts(e, m);
    const size_t F = (size_t)e->d.feat, C = (size_t)e->d.channels, E = (size_t)e->d.emb, P = (size_t)e->pooled_dim;
    tdnn_alloc(&e->block0, m, B, bt);
    for (int i = 0; i < 3; i++) seres_alloc(&e->blocks[i], m, (int)C, (int)e->d.se, B, bt);
    tdnn_alloc(&e->mfa, m, B, bt);
    asp_alloc(&e->asp, m, B, bt);
    size_t bv = 0;
    if (e->has_visual) {
        size_t Cv = (size_t)e->d.vchannels;
        bv = bt / (size_t)e->d.vratio + (size_t)B;
        tdnn_alloc(&e->vis.blocks[0], m, B, bv);
        tdnn_alloc(&e->vis.blocks[1], m, B, bv);
        asp_alloc(&e->vis.asp, m, B, bv);
        e->vis.x = model_buf(m, bv * (size_t)e->d.vfeat);
        e->vis.g_h = model_buf(m, bv * Cv);
        e->vis.g_mid = model_buf(m, bv * Cv);
        e->vis.g_tmp = model_buf(m, bv * Cv);
        if (e->vis.has_face) {
            e->vis.fx = model_buf(m, bv * (size_t)e->d.vfeat);
            e->vis.g_fx = model_buf(m, bv * (size_t)e->d.vfeat);
            e->vis.g_x = model_buf(m, bv * (size_t)e->d.vfeat);
        }
    }
    e->x = model_buf(m, bt * F);
    if (!m->bf16) e->cat = model_buf(m, bt * 3 * C);
    e->pooled = model_buf(m, (size_t)B * P);
    e->pooled_bn = model_buf(m, (size_t)B * P);
    if (e->has_visual) e->pooled_kept = model_buf(m, (size_t)B * P);
    e->bn_mean = model_buf(m, model_bn_stats_floats(m, B, (int)P));
    e->bn_rstd = model_buf(m, model_bn_stats_floats(m, B, (int)P));
    e->emb = model_buf(m, (size_t)B * E);
    for (int i = 0; i < 3; i++)
        e->g3[i] = model_buf(m, bt * (3 * C > F ? 3 * C : F));  // g3[1] also holds the input gradient
    for (int i = 0; i < 4; i++) e->gblk[i] = model_buf(m, bt * C);
    for (int i = 0; i < 2; i++) e->gvec[i] = model_buf(m, (size_t)B * P);
    e->work = model_buf(m, w);
    e->work_floats = w;
    e->cap_b = B;
    e->cap_bt = bt;
}

// ---- forward / backward ------------------------------------------------------------------------

// The statistics of the stream a sample goes without, zeroed in one row of (P,).
static void zero_stream(const ecapa_t *e, const model_t *m, float *row, int modality) {
    const int64_t C = e->d.channels, P = e->pooled_dim;
    if (modality == MODALITY_AUDIO) m->be->vec_zero(row + 6 * C, (size_t)(P - 6 * C));
    if (modality == MODALITY_VISUAL) m->be->vec_zero(row, (size_t)(6 * C));
}

// Modality dropout and single-stream embeddings (m->modality): the BatchNorm after the pooling
// takes a copy of the statistics in which a sample's of the stream it goes without are zero (the
// pooling's own backward needs them whole); returns what the BatchNorm takes.
static const float *drop_streams(ecapa_t *e, const model_t *m, int B) {
    e->bn_in = e->pooled;
    if (!m->modality) return e->bn_in;
    const int64_t P = e->pooled_dim;
    m->be->vec_copy(e->pooled_kept, e->pooled, (size_t)(B * P));
    for (int b = 0; b < B; b++) zero_stream(e, m, e->pooled_kept + b * P, m->modality[b]);
    return e->bn_in = e->pooled_kept;
}

void ecapa_forward(ecapa_t *e, model_t *m, const float *frames, const float *vframes, int B, int T, int train) {
    const spk_backend_t *K = m->be;
    const int F = (int)e->d.feat, C = (int)e->d.channels, E = (int)e->d.emb, se = (int)e->d.se, P = (int)e->pooled_dim;
    const float *p = m->params;
    float *st = m->state;
    SPK_ASSERT(B <= e->cap_b && (size_t)B * T <= e->cap_bt && work_floats(e, m, B, T) <= e->work_floats);
    K->batch_transpose(e->x, frames, B, T, F);  // (B, T, F) -> (B, F, T)
    tdnn_forward(&e->block0, m, e->x, B, T, train, e->work);
    const float *in = e->block0.y;
    for (int i = 0; i < 3; i++) {
        seres_forward(&e->blocks[i], m, in, C, se, B, T, train, e->work);
        in = e->blocks[i].out;
        if (m->bf16)  // MFA's concatenation only as its convolution's rounded operand
            model_round_conv1d_input(m, model_conv1d_group(m, train), e->mfa.xh, 3 * C, i * C, in, C, NULL, B, C, T);
        else
            K->channel_slice_copy(e->cat + (size_t)i * C * T, 3 * C, in, C, B, C, T);
    }
    tdnn_forward(&e->mfa, m, m->bf16 ? NULL : e->cat, B, T, train, e->work);
    asp_forward(&e->asp, m, e->mfa.y, e->pooled, P, B, T, train, e->work);
    if (e->has_visual) {  // visual statistics fill pooled[6C, 6C + 2Cv)
        visual_t *v = &e->vis;
        const int Tv = T / (int)e->d.vratio;
        if (v->has_face) {  // each frame's picture -> Fv values
            v->pictures = vframes;
            face_encoder_forward(&v->face, m, vframes, v->fx, B, Tv, train, e->work);
            vframes = v->fx;
        }
        K->batch_transpose(v->x, vframes, B, Tv, (int)e->d.vfeat);
        tdnn_forward(&v->blocks[0], m, v->x, B, Tv, train, e->work);
        tdnn_forward(&v->blocks[1], m, v->blocks[0].y, B, Tv, train, e->work);
        asp_forward(&v->asp, m, v->blocks[1].y, e->pooled + 6 * C, P, B, Tv, train, e->work);
    }
    const float *bn_in = drop_streams(e, m, B);
    if (train)
        model_batchnorm_train(m, e->pooled_bn, e->bn_mean, e->bn_rstd, e->asp_bn_mean, e->asp_bn_var, bn_in,
                              e->asp_bn_w, e->asp_bn_b, B, P, 1, 1e-5f, 0.1f);
    else
        K->batchnorm1d_forward_infer(e->pooled_bn, bn_in, st + e->asp_bn_mean, st + e->asp_bn_var, p + e->asp_bn_w,
                                     p + e->asp_bn_b, B, P, 1, 1e-5f);
    K->linear_forward(e->emb, e->pooled_bn, p + e->fc_w, p + e->fc_b, B, P, E);
}

static void visual_backward(ecapa_t *e, model_t *m, const float *d_pooled, int B, int T) {
    const spk_backend_t *K = m->be;
    visual_t *v = &e->vis;
    const int C = (int)e->d.channels, P = (int)e->pooled_dim, Tv = T / (int)e->d.vratio;
    asp_backward(&v->asp, m, v->g_h, d_pooled + 6 * C, v->blocks[1].y, e->pooled + 6 * C, P, B, Tv, e->work);
    tdnn_backward(&v->blocks[1], m, v->g_mid, 0, v->g_h, v->blocks[0].y, B, Tv, v->g_tmp, e->work);
    tdnn_backward(&v->blocks[0], m, v->has_face ? v->g_x : NULL, 0, v->g_mid, v->x, B, Tv, v->g_tmp, e->work);
    model_grads_ready(m, tdnn_end(&v->blocks[0]));
    if (!v->has_face) return;
    K->batch_transpose(v->g_fx, v->g_x, B, (int)e->d.vfeat, Tv);  // (B, Fv, Tv) -> (B, Tv, Fv)
    face_encoder_backward(&v->face, m, v->g_fx, v->pictures, v->fx, B, Tv, e->work);
    model_grads_ready(m, face_encoder_end(&v->face));
}

void ecapa_backward(ecapa_t *e, model_t *m, const float *g_emb, float *dframes, int B, int T) {
    const spk_backend_t *K = m->be;
    const int F = (int)e->d.feat, C = (int)e->d.channels, E = (int)e->d.emb, se = (int)e->d.se, P = (int)e->pooled_dim;
    const size_t bt = (size_t)B * T;
    float *d_pooled_bn = e->gvec[0], *d_pooled = e->gvec[1];
    float *dh = e->g3[0], *d_cat = e->g3[1];

    K->vec_zero(d_pooled_bn, (size_t)B * P);
    model_linear_backward(m, d_pooled_bn, e->fc_w, e->fc_b, g_emb, e->pooled_bn, B, P, E);
    model_grads_ready(m, e->fc_b + E);
    K->vec_zero(d_pooled, (size_t)B * P);
    model_batchnorm_backward(m, d_pooled, e->asp_bn_w, e->asp_bn_b, d_pooled_bn, e->bn_in, e->bn_mean, e->bn_rstd, B, P,
                             1);
    model_grads_ready(m, e->asp_bn_b + P);
    for (int b = 0; m->modality && b < B; b++) zero_stream(e, m, d_pooled + b * P, m->modality[b]);
    if (e->has_visual) {
        visual_backward(e, m, d_pooled, B, T);
    }

    asp_backward(&e->asp, m, dh, d_pooled, e->mfa.y, e->pooled, P, B, T, e->work);
    model_grads_ready(m, tdnn_end(&e->asp.tdnn));

    // MFA and the blocks, last first; each block's output gradient collects its uses.
    tdnn_backward(&e->mfa, m, d_cat, 0, dh, e->cat, B, T, e->g3[2], e->work);
    model_grads_ready(m, tdnn_end(&e->mfa));
    for (int i = 0; i < 3; i++) K->channel_slice_copy(e->gblk[i + 1], C, d_cat + (size_t)i * C * T, 3 * C, B, C, T);
    K->vec_zero(e->gblk[0], bt * C);
    // The pooling scratch and the MFA input gradient (copied out) serve the blocks now.
    float *const scratch[4] = {e->g3[2], e->asp.g_logit, dh, d_cat};
    for (int i = 2; i >= 0; i--) {
        const float *x = i == 0 ? e->block0.y : e->blocks[i - 1].out;
        seres_backward(&e->blocks[i], m, e->gblk[i], e->gblk[i + 1], x, C, se, B, T, scratch, e->work);
        model_grads_ready(m, tdnn_end(&e->blocks[i].tdnn1));
    }
    float *dx = dframes ? d_cat : NULL;
    tdnn_backward(&e->block0, m, dx, 0, e->gblk[0], e->x, B, T, dh, e->work);
    model_grads_ready(m, m->table.total);
    if (dframes) K->batch_transpose(dframes, dx, B, F, T);  // (B, F, T) -> (B, T, F)
}

// ---- the encoder of app/model/layers/aam_encoder.h ---------------------------------------------

static void reserve(model_t *m, int B, int T) { ecapa_reserve(m->impl, m, B, T); }

static const float *forward(model_t *m, const float *frames, const float *vframes, int B, int T, int train) {
    ecapa_t *e = m->impl;
    ecapa_forward(e, m, frames, vframes, B, T, train);
    return e->emb;
}

static void backward(model_t *m, const float *g_emb, int B, int T) { ecapa_backward(m->impl, m, g_emb, NULL, B, T); }

static void release(model_t *m) {
    ecapa_t *e = m->impl;
    ecapa_free_acts(e, m);
    if (e->vis.has_face) face_encoder_release(&e->vis.face, m);  // (sized on its own, kept by the reserves)
}

static const aam_encoder_ops_t ecapa_encoder = {reserve, forward, backward, release};

// The pictures' shape from the stream's values per frame (face_encoder_picture_shape).
static void face_dims(ecapa_t *e, const model_t *m, const model_config_t *cfg, const model_data_t *data) {
    int size, channels;
    if (face_encoder_picture_shape(m->visual_dim, &size, &channels) != 0)
        spk_fail_all(SPK_EXIT_DATA,
                     "%s: --face-channels needs a /visual stream of square pictures of at least %d pixels (prepare "
                     "--video-scp); this one has %lld values a frame",
                     data->source ? data->source : "the dataset", FACE_MIN_SIZE, (long long)m->visual_dim);
    e->d.image_size = size;
    e->d.image_channels = channels;
    e->d.face_channels = cfg->face_channels;
    e->vis.has_face = 1;
    e->d.vfeat = 2 * 8 * cfg->face_channels;  // the face encoder's output (face_encoder_dim)
}

void model_ecapa_build(model_t *m, const model_config_t *cfg, const model_data_t *data) {
    ecapa_t *e = callocCheck(1, sizeof *e);
    if (cfg->channels % ECAPA_SCALE != 0)
        spk_fail_all(SPK_EXIT_USAGE, "%s: --channels %lld must be a multiple of %d (Res2Net scale)", cfg->name,
                     (long long)cfg->channels, ECAPA_SCALE);
    e->d = (ecapa_dims_t){.feat = m->feature_dim,
                          .channels = cfg->channels,
                          .att = cfg->att_channels,
                          .se = cfg->se_channels,
                          .emb = cfg->emb_dim,
                          .classes = m->num_classes};
    e->has_visual = strcmp(cfg->name, "ecapa-av") == 0;
    if (e->has_visual) {
        if (m->visual_dim <= 0)
            spk_fail_all(SPK_EXIT_DATA, "--model ecapa-av needs a dataset with a /visual stream (%s has none)",
                         data->source ? data->source : "the dataset");
        e->d.vfeat = m->visual_dim;
        e->d.vchannels = cfg->visual_channels;
        e->d.vratio = m->visual_ratio;
        if (data->visual_kind == VISUAL_PICTURES && cfg->face_channels == 0)
            spk_fail_all(SPK_EXIT_USAGE,
                         "%s: the /visual stream holds pictures: --model ecapa-av takes them through a face encoder "
                         "(--face-channels W, e.g. 32)",
                         data->source ? data->source : "the dataset");
        if (data->visual_kind == VISUAL_FEATURES && cfg->face_channels > 0)
            spk_fail_all(SPK_EXIT_USAGE,
                         "%s: --face-channels needs a /visual stream of pictures (prepare --video-scp); this one holds "
                         "feature vectors",
                         data->source ? data->source : "the dataset");
        if (cfg->face_channels > 0) face_dims(e, m, cfg, data);
    } else if (cfg->face_channels > 0 || cfg->modality_dropout > 0) {
        spk_fail_all(SPK_EXIT_USAGE, "--%s applies to --model ecapa-av (an audio-visual model)",
                     cfg->face_channels > 0 ? "face-channels" : "modality-dropout");
    }
    e->pooled_dim = 6 * e->d.channels + 2 * e->d.vchannels;
    m->impl = e;
    aam_encoder_init(&e->head, m, cfg, &ecapa_encoder, cfg->emb_dim);
    e->head.visual = e->has_visual;
    e->head.vratio = e->d.vratio;
    ecapa_register(e, m);
    // Crops cover whole visual frames; every convolution needs more frames than its padding
    // (audio: 4 at dilation 4; visual: 2 at dilation 2).
    int64_t crop = cfg->frames > 0 ? cfg->frames : ECAPA_FRAMES, r = e->has_visual ? e->d.vratio : 1;
    m->input = (loader_spec_t){.crop = crop - crop % r,
                               .min_frames = e->has_visual ? 3 * r > 5 ? 3 * r : 5 : 5,
                               .cmn = 1,
                               .visual = e->has_visual};
    if (m->input.crop < m->input.min_frames)
        spk_fail_all(SPK_EXIT_USAGE, "%s: --frames %lld is too short (at least %lld)", cfg->name,
                     (long long)cfg->frames, (long long)m->input.min_frames);
    m->min_batch = 2;  // the pooled statistics' BatchNorm normalises over the batch
    model_alloc_buffers(m, data);
    ecapa_init_params(e, m, cfg->seed);
    if (cfg->zero_init_residual && e->vis.has_face) face_encoder_zero_residual(&e->vis.face, m);
}

// Forward multiply-adds of ECAPA per sample (x2 = FLOP): every conv over T frames, the
// SE and embedding layers once.
double ecapa_forward_flop(const model_config_t *cfg, int64_t feat) {
    const int64_t F = feat;
    double c = (double)cfg->channels, t = (double)cfg->frames, f = 0;
    f += 2.0 * F * c * 5 * t;                            // block 0
    f += 3 * (2 * (2.0 * c * c * t) +                    // tdnn1, tdnn2
              7 * 2.0 * (c / 8) * (c / 8) * 3 * t +      // Res2Net branches
              2 * 2.0 * c * 128);                        // SE
    f += 2.0 * 3 * c * 3 * c * t;                        // MFA
    f += 2.0 * 9 * c * 128 * t + 2.0 * 128 * 3 * c * t;  // attention
    f += 2.0 * 6 * c * 192;                              // embedding
    return f;
}
