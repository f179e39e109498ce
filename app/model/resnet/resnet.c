// WeSpeaker's ResNet encoders as a model_t (app/model/resnet/resnet.h).
#include "app/model/resnet/resnet.h"

#include "app/model/layers/model_layers.h"
#include "kernels/base/check.h"
#include "kernels/base/rng.h"
#include "kernels/base/spk_assert.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TSTP_EPS 1e-7f  // WeSpeaker's TSTP: sqrt(var + 1e-7)

// The depths WeSpeaker defines (ResNet18 ... ResNet293): block kind and blocks per stage.
static const struct {
    const char *name;
    int expansion;
    int blocks[RESNET_STAGES];
} depths[] = {
    {"resnet18", 1, {2, 2, 2, 2}},     {"resnet34", 1, {3, 4, 6, 3}},   {"resnet50", 4, {3, 4, 6, 3}},
    {"resnet101", 4, {3, 4, 23, 3}},   {"resnet152", 4, {3, 8, 36, 3}}, {"resnet221", 4, {6, 16, 48, 3}},
    {"resnet293", 4, {10, 20, 64, 3}},
};

// ---- parameters ---------------------------------------------------------------------------------

static void resnet_register(resnet_t *r, model_t *m) {
    const int64_t E = r->emb, P = r->seg_dim;
    r->seg_w = param_table_add(&m->table, "seg_1.weight", 2, (int64_t[]){E, P});
    r->seg_b = param_table_add(&m->table, "seg_1.bias", 1, (int64_t[]){E});
    if (r->has_face) face_branch_register(&r->av, m);  // (executed before seg_1, beside the stages)
    // stages and blocks last first; stage s has m * 2^s planes, stride 2 but for the first
    int count = 0;
    for (int s = 0; s < RESNET_STAGES; s++) count += r->blocks[s];
    r->nblocks = count;
    r->block = callocCheck((size_t)count, sizeof *r->block);
    int in_of[RESNET_STAGES];  // each stage's input channels
    for (int s = 0; s < RESNET_STAGES; s++)
        in_of[s] = s == 0 ? (int)r->m_channels : (int)(r->m_channels << (s - 1)) * r->expansion;
    int i = count;
    for (int s = RESNET_STAGES - 1; s >= 0; s--) {
        const int planes = (int)(r->m_channels << s);
        for (int j = r->blocks[s] - 1; j >= 0; j--) {
            char prefix[32];
            snprintf(prefix, sizeof prefix, "layer%d.%d", s + 1, j);
            const int stride = j == 0 && s > 0 ? 2 : 1;
            res_block_register(&r->block[--i], m, prefix, j == 0 ? in_of[s] : planes * r->expansion, planes, stride,
                               stride, r->expansion);
        }
    }
    conv2d_bn_register(&r->stem, m, "conv1", "bn1", 1, (int)r->m_channels, conv2d_geom_square(3, 1));
    res_blocks_chain(&r->stem, r->block, count, NULL);
    // every unit, for the loops over all of them
    r->units = callocCheck((size_t)(1 + 4 * count), sizeof *r->units);
    r->units[r->nunits++] = &r->stem;
    for (int b = 0; b < count; b++) r->nunits += res_block_units(&r->block[b], r->units + r->nunits);
}

// PyTorch's defaults: convolution and linear weights uniform in +-1/sqrt(fan_in) (kaiming_uniform
// with a = sqrt(5)), the linear bias too; BatchNorm weight 1, bias 0, running mean 0, variance 1;
// the classifier xavier-uniform (WeSpeaker's ArcMarginProduct).
static void resnet_init_params(const resnet_t *r, model_t *m, uint64_t seed) {
    for (int i = 0; i < m->table.count; i++) {
        const param_tensor_t *t = &m->table.t[i];
        float *p = m->host_params + t->offset;
        if (t->offset == r->head.cls_w) {
            aam_encoder_init_classifier(&r->head, m, seed, i);
            continue;
        }
        if (t->ndim == 1 && t->offset != r->seg_b) {  // a BatchNorm's weight or bias
            const float v = strstr(t->name, ".weight") ? 1.0f : 0.0f;
            for (int64_t j = 0; j < t->numel; j++) p[j] = v;
            continue;
        }
        const int64_t fan_in = t->offset == r->seg_b ? r->seg_dim : t->numel / t->shape[0];
        const double bound = 1.0 / sqrt((double)fan_in);
        rng_t g = rng_init(seed, RNG_PURPOSE_INIT, (uint64_t)i, 0);
        for (int64_t j = 0; j < t->numel; j++) p[j] = (float)((2.0 * rng_uniform(&g) - 1.0) * bound);
    }
    for (int i = 0; i < m->state_table.count; i++) {
        const param_tensor_t *t = &m->state_table.t[i];
        const float v = strstr(t->name, "running_var") ? 1.0f : 0.0f;
        for (int64_t j = 0; j < t->numel; j++) m->host_state[t->offset + j] = v;
    }
}

// ---- activations --------------------------------------------------------------------------------

// Every unit's shape for B samples of T frames; the last stage's map in r->out_*.
static void set_shapes(resnet_t *r, int B, int T) {
    int H = (int)r->feat, W = T;
    conv2d_bn_shape(&r->stem, B, H, W, &H, &W);
    for (int i = 0; i < r->nblocks; i++) res_block_shape(&r->block[i], B, &H, &W);
    r->out_h = H, r->out_w = W, r->out_c = res_block_out_channels(&r->block[r->nblocks - 1]);
}

static void release_buffers(resnet_t *r, const model_t *m) {
    float **const bufs[] = {&r->x,    &r->pooled, &r->emb_out, &r->g_pooled, &r->g[0],
                            &r->g[1], &r->g[2],   &r->g[3],    &r->work};
    model_bufs_free(m, bufs, sizeof bufs / sizeof bufs[0]);
    r->work_floats = r->map_floats = 0;
    r->cap_b = r->cap_t = 0;
}

static void release(model_t *m) {
    resnet_t *r = m->impl;
    for (int i = 0; i < r->nunits; i++) conv2d_bn_release(r->units[i], m);
    if (r->has_face) face_branch_release(&r->av, m);
    release_buffers(r, m);
    free(r->block);
    free(r->units);
    r->block = NULL;
    r->units = NULL;
}

static void reserve(model_t *m, int B, int T) {
    resnet_t *r = m->impl;
    if (r->has_face) face_branch_reserve(&r->av, m, B, T);  // (grows itself)
    set_shapes(r, B, T);
    size_t work = r->work_floats, map = r->map_floats, input = (size_t)B * T * r->feat;  // (tests: dframes)
    if (input > map) map = input;
    for (int i = 0; i < r->nunits; i++) {
        conv2d_bn_alloc(r->units[i], m);
        const size_t w = conv2d_bn_work_floats(r->units[i], m), n = conv2d_bn_out_size(r->units[i]);
        if (w > work) work = w;
        if (n > map) map = n;
    }
    if (r->has_face && face_branch_work_floats(&r->av) > work) work = face_branch_work_floats(&r->av);
    if (B <= r->cap_b && T <= r->cap_t && work == r->work_floats && map == r->map_floats) return;
    const int cb = B > r->cap_b ? B : r->cap_b, ct = T > r->cap_t ? T : r->cap_t;
    release_buffers(r, m);
    const size_t P = (size_t)r->pooled_dim;
    r->x = model_buf(m, (size_t)cb * ct * r->feat);
    r->pooled = model_buf(m, (size_t)cb * P);
    r->emb_out = model_buf(m, (size_t)cb * r->emb);
    r->g_pooled = model_buf(m, (size_t)cb * (size_t)r->seg_dim);
    for (int i = 0; i < 4; i++) r->g[i] = model_buf(m, map);
    r->work = model_buf(m, work);
    r->work_floats = work, r->map_floats = map, r->cap_b = cb, r->cap_t = ct;
}

// ---- forward / backward -------------------------------------------------------------------------

static const float *block_input(const resnet_t *r, int i) {
    return i == 0 ? r->stem.y : res_block_out(&r->block[i - 1]);
}

// The audio's statistics (B, audio_dim) into stats.
static void trunk_forward(resnet_t *r, model_t *m, const float *frames, float *stats, int B, int T, int train) {
    const spk_backend_t *K = m->be;
    SPK_ASSERT(B <= r->cap_b && T <= r->cap_t);
    K->batch_transpose(r->x, frames, B, T, (int)r->feat);  // (B, T, F) -> (B, F, T): an F x T image
    conv2d_bn_forward(&r->stem, m, r->x, NULL, NULL, 1, train, r->work);
    for (int i = 0; i < r->nblocks; i++) res_block_forward(&r->block[i], m, block_input(r, i), train, r->work);
    K->tstp_forward(stats, block_input(r, r->nblocks), B, r->out_h, r->out_w, r->out_c, TSTP_EPS);
}

static const float *seg_forward(resnet_t *r, model_t *m, const float *in, int B) {
    r->seg_in = in;
    m->be->linear_forward(r->emb_out, in, m->params + r->seg_w, m->params + r->seg_b, B, (int)r->seg_dim, (int)r->emb);
    return r->emb_out;
}

const float *resnet_forward(resnet_t *r, model_t *m, const float *frames, int B, int T, int train) {
    trunk_forward(r, m, frames, r->pooled, B, T, train);
    return seg_forward(r, m, r->pooled, B);
}

// resnet34-av: the audio's statistics, then the face's (app/model/layers/face_branch.h), into seg_1.
static const float *av_forward(resnet_t *r, model_t *m, const float *frames, const float *pictures, int B, int T,
                               int train) {
    trunk_forward(r, m, frames, r->pooled, B, T, train);
    return seg_forward(r, m, face_branch_forward(&r->av, m, r->pooled, pictures, B, T, train, r->work), B);
}

// seg_1's gradients, and its input's into g_pooled.
static void seg_backward(resnet_t *r, model_t *m, const float *g_emb, int B) {
    const int P = (int)r->seg_dim, E = (int)r->emb;
    m->be->vec_zero(r->g_pooled, (size_t)B * P);
    model_linear_backward(m, r->g_pooled, r->seg_w, r->seg_b, g_emb, r->seg_in, B, P, E);
    model_grads_ready(m, r->seg_b + E);
}

// From the gradient of the audio's statistics (g_stats, of the forward's stats) to the stem.
static void trunk_backward(resnet_t *r, model_t *m, const float *g_stats, const float *stats, float *dframes, int B,
                           int T) {
    const spk_backend_t *K = m->be;
    float *go = r->g[0], *gx = r->g[1];
    K->vec_zero(go, (size_t)B * r->out_h * r->out_w * r->out_c);
    K->tstp_backward(go, g_stats, block_input(r, r->nblocks), stats, B, r->out_h, r->out_w, r->out_c);
    for (int i = r->nblocks - 1; i >= 0; i--) {
        res_block_backward(&r->block[i], m, block_input(r, i), go, gx, r->g[2], r->g[3], r->work);
        model_grads_ready(m, res_block_end(&r->block[i]));
        float *t = go;  // this block's input gradient is the output gradient of the one before
        go = gx, gx = t;
    }
    conv2d_bn_backward(&r->stem, m, dframes ? gx : NULL, 0, NULL, go, r->x, 1, r->g[2], r->work);
    model_grads_ready(m, m->table.total);
    if (dframes) K->batch_transpose(dframes, gx, B, (int)r->feat, T);  // (B, F, T) -> (B, T, F)
}

void resnet_backward(resnet_t *r, model_t *m, const float *g_emb, float *dframes, int B, int T) {
    seg_backward(r, m, g_emb, B);
    trunk_backward(r, m, r->g_pooled, r->pooled, dframes, B, T);
}

// resnet34-av: seg_1, then the face encoder (registered next), then the audio's stages.
static void av_backward(resnet_t *r, model_t *m, const float *g_emb, int B, int T) {
    seg_backward(r, m, g_emb, B);
    trunk_backward(r, m, face_branch_backward(&r->av, m, r->g_pooled, B, T, r->work), r->pooled, NULL, B, T);
}

static const float *forward(model_t *m, const float *frames, const float *vframes, int B, int T, int train) {
    resnet_t *r = m->impl;
    return r->has_face ? av_forward(r, m, frames, vframes, B, T, train) : resnet_forward(r, m, frames, B, T, train);
}

static void backward(model_t *m, const float *g_emb, int B, int T) {
    resnet_t *r = m->impl;
    if (r->has_face)
        av_backward(r, m, g_emb, B, T);
    else
        resnet_backward(r, m, g_emb, NULL, B, T);
}

static const aam_encoder_ops_t resnet_encoder = {reserve, forward, backward, release};

// ---- the model ----------------------------------------------------------------------------------

// The depth of a name, with or without "-av".
static int depth_of(const char *name) {
    const size_t n = strlen(name), base = n > 3 && strcmp(name + n - 3, "-av") == 0 ? n - 3 : n;
    for (size_t i = 0; i < sizeof depths / sizeof depths[0]; i++)
        if (strlen(depths[i].name) == base && strncmp(depths[i].name, name, base) == 0) return (int)i;
    return -1;
}

void model_resnet_build(model_t *m, const model_config_t *cfg, const model_data_t *data) {
    const int d = depth_of(cfg->name);
    SPK_ASSERT(d >= 0);
    const int64_t F = m->feature_dim;
    conv2d_check_front_rows(cfg->name, "WeSpeaker's embedding layer", data, F);
    resnet_t *r = callocCheck(1, sizeof *r);
    r->feat = F;
    r->m_channels = cfg->channels;
    r->emb = cfg->emb_dim;
    r->expansion = depths[d].expansion;
    memcpy(r->blocks, depths[d].blocks, sizeof r->blocks);
    r->seg_dim = r->pooled_dim = 2 * (F / 8) * r->m_channels * 8 * r->expansion;
    const size_t n = strlen(cfg->name);
    if (n > 3 && strcmp(cfg->name + n - 3, "-av") == 0) {
        face_branch_setup(&r->av, m, cfg, data, r->pooled_dim);
        r->has_face = 1;
        r->seg_dim = r->av.joined_dim;
    } else if (cfg->face_channels > 0 || cfg->modality_dropout > 0) {
        spk_fail_all(SPK_EXIT_USAGE, "--%s applies to audio-visual models (--model %s-av)",
                     cfg->face_channels > 0 ? "face-channels" : "modality-dropout", cfg->name);
    }
    m->impl = r;
    aam_encoder_init(&r->head, m, cfg, &resnet_encoder, cfg->emb_dim);
    r->head.visual = r->has_face;
    r->head.vratio = r->has_face ? r->av.vratio : 0;
    resnet_register(r, m);
    // three stride-2 stages: ceil(T / 8) frames must remain, two at least (the unbiased variance);
    // with faces, crops of whole visual frames, two of them at least (their deviation over time)
    const int64_t v = r->has_face ? r->av.vratio : 1, crop = cfg->frames > 0 ? cfg->frames : RESNET_FRAMES;
    const int64_t least = r->has_face && 2 * v > 9 ? 2 * v : (9 + v - 1) / v * v;
    m->input = (loader_spec_t){.crop = crop - crop % v, .min_frames = least, .cmn = 1, .visual = r->has_face};
    if (m->input.crop < m->input.min_frames)
        spk_fail_all(SPK_EXIT_USAGE, "%s: --frames %lld is too short (at least %lld)", cfg->name,
                     (long long)cfg->frames, (long long)m->input.min_frames);
    m->min_batch = 2;  // BatchNorm over the batch
    model_alloc_buffers(m, data);
    resnet_init_params(r, m, cfg->seed);
    if (cfg->zero_init_residual) {
        res_blocks_zero_residual(r->block, r->nblocks, m);
        if (r->has_face) face_encoder_zero_residual(&r->av.face, m);
    }
}

// Multiply-adds of a convolution of cin -> cout channels, k x k, over an h x w output.
static double conv_macs(double cin, double cout, int k, double h, double w) { return cin * cout * k * k * h * w; }

double resnet_forward_flop(const model_config_t *cfg, int64_t feat) {
    const int d = depth_of(cfg->name);
    if (d < 0) return 0;
    const int ex = depths[d].expansion;
    double h = (double)feat, w = (double)cfg->frames, in = (double)cfg->channels, f = 0;
    f += conv_macs(1, in, 3, h, w);
    for (int s = 0; s < RESNET_STAGES; s++) {
        const double planes = (double)(cfg->channels << s);
        for (int j = 0; j < depths[d].blocks[s]; j++) {
            const int stride = j == 0 && s > 0 ? 2 : 1;
            const double oh = ceil(h / stride), ow = ceil(w / stride);
            if (ex == 1) {
                f += conv_macs(in, planes, 3, oh, ow) + conv_macs(planes, planes, 3, oh, ow);
            } else {
                f += conv_macs(in, planes, 1, h, w) + conv_macs(planes, planes, 3, oh, ow) +
                     conv_macs(planes, 4 * planes, 1, oh, ow);
            }
            if (stride != 1 || in != planes * ex) f += conv_macs(in, planes * ex, 1, oh, ow);
            in = planes * ex, h = oh, w = ow;
        }
    }
    f += 2.0 * (double)(feat / 8) * (double)(cfg->channels * 8 * ex) * (double)cfg->emb_dim;  // seg_1
    return 2.0 * f;
}
