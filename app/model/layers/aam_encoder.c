// An encoder with an AAM-softmax head as a model_t (app/model/layers/aam_encoder.h).
#include "app/model/layers/aam_encoder.h"

#include "app/model/core/model_stats.h"
#include "app/model/layers/aam_head_shard.h"
#include "app/model/layers/contrastive_head.h"
#include "app/model/layers/dino.h"
#include "kernels/base/check.h"
#include "kernels/base/rng.h"
#include "kernels/base/spk_assert.h"

#include <math.h>
#include <stdlib.h>

static aam_encoder_t *head_of(model_t *m) { return (aam_encoder_t *)m->impl; }

static void release_head(aam_encoder_t *h, const model_t *m) {
    float **const bufs[] = {&h->aam_cache, &h->work, &h->g_emb, &h->scalars, &h->row_loss, &h->d_rows};
    model_bufs_free(m, bufs, sizeof bufs / sizeof bufs[0]);
    free(h->h_rows);
    free(h->modality);
    h->h_rows = NULL;
    h->modality = NULL;
    h->cap_b = 0;
    aam_head_shard_free(h->shard, m);
    h->shard = NULL;
}

// The head's buffers for B samples.
static void reserve_head(model_t *m, int B) {
    aam_encoder_t *h = head_of(m);
    if (B <= h->cap_b) return;
    release_head(h, m);
    const int E = (int)h->emb, S = (int)m->head_rows;
    if (m->head_comm) {  // the sharded head's buffers are for the global batch
        h->shard = aam_head_shard_create();
        aam_head_shard_sample(h->shard, h->sample, h->seed);
    } else {
        h->aam_cache = model_buf(m, m->be->aam_softmax_cache_floats(B, E, S));
        h->work = model_buf(m, m->be->aam_softmax_workspace_floats(B, E, S));
    }
    h->g_emb = model_buf(m, (size_t)B * E);
    h->scalars = model_buf(m, 2);
    h->row_loss = model_buf(m, (size_t)B);
    h->modality = mallocCheck((size_t)B);
    if (h->con) {
        h->h_rows = mallocCheck((size_t)B * sizeof(float));
        h->d_rows = model_buf(m, (size_t)B);
    }
    h->cap_b = B;
}

void aam_encoder_reserve(model_t *m, int B, int T) {
    head_of(m)->enc->reserve(m, B, T);
    reserve_head(m, B);
}

static int batch_frames(const batch_t *b) {
    if (b->n == 0) return 0;
    int T = (int)(b->frame_off[1] - b->frame_off[0]);
    for (int i = 1; i < b->n; i++) SPK_ASSERT(b->frame_off[i + 1] - b->frame_off[i] == T);
    return T;
}

// The metric-learning term of the loss: added to the AAM-softmax's loss (scalars[0] in the plain
// mode, each sample's row_loss in the invariant mode) or in its place, with its hits then.
static void add_contrastive(model_t *m, const batch_t *b, int train, const float *emb) {
    aam_encoder_t *h = head_of(m);
    const spk_backend_t *K = m->be;
    const int B = b->n;
    double loss;
    int hits;
    contrastive_head_forward(h->con, m, emb, b->labels, b->index, B, (int)h->emb, train, &loss, h->h_rows, &hits);
    if (m->invariant) {
        K->upload(h->aam ? h->d_rows : h->row_loss, h->h_rows, (size_t)B * sizeof(float));
        if (h->aam) K->vec_acc(h->row_loss, h->d_rows, (size_t)B);
    } else {
        const float v = (float)loss;
        K->upload(h->aam ? h->d_rows : h->scalars, &v, sizeof v);
        if (h->aam) K->vec_acc(h->scalars, h->d_rows, 1);
    }
    if (!h->aam) K->upload(h->scalars + 1, &hits, sizeof hits);
}

// The streams each sample of a visual model's forward keeps: in training, modality dropout's
// draws (keyed on the update and the utterance, so any number of ranks draws alike); embed's
// choice otherwise.
static const int8_t *modality_of(model_t *m, const batch_t *b, int train) {
    aam_encoder_t *h = head_of(m);
    if (!h->visual || (train ? h->modality_p <= 0 : m->embed_modality == MODALITY_BOTH)) return NULL;
    for (int i = 0; i < b->n; i++) {
        if (!train) {
            h->modality[i] = (int8_t)m->embed_modality;
            continue;
        }
        rng_t g = rng_init(h->seed, RNG_PURPOSE_MODALITY, (uint64_t)m->step_key, (uint64_t)b->index[i]);
        const double u = rng_uniform(&g);
        h->modality[i] = (int8_t)(u >= h->modality_p      ? MODALITY_BOTH
                                  : u < h->modality_p / 2 ? MODALITY_AUDIO
                                                          : MODALITY_VISUAL);
    }
    return h->modality;
}

// Forward and AAM loss of a batch; the loss and the correct count are fetched back without
// waiting (model_read_stats), so a training step queues its backward before the host waits.
// Returns the labels as the backend sees them, and the embeddings in *emb.
static const int *forward_loss(model_t *m, const batch_t *b, int train, const float **emb) {
    aam_encoder_t *h = head_of(m);
    const spk_backend_t *K = m->be;
    const int T = batch_frames(b), B = b->n;
    const int E = (int)h->emb, S = (int)m->head_rows;
    if (m->head_comm && B == 0) {  // nothing of its own to evaluate; the sharded head still needs this rank
        reserve_head(m, 1);
        *emb = NULL;
        aam_head_shard_forward(h->shard, m, NULL, NULL, 0, E, m->params + h->cls_w, 0, h->margin, h->scale, h->scalars,
                               NULL);
        if (m->invariant) model_sum_losses(m, h->row_loss, 0, 1);  // (the empty sum, not the last batch's)
        model_stats_fetch(m, h->scalars, 0);
        return NULL;
    }
    aam_encoder_reserve(m, B, T);
    const size_t xb = (size_t)B * T * m->feature_dim * sizeof(float), lb = (size_t)B * sizeof(int);
    const size_t vb = h->visual ? (size_t)B * (T / h->vratio) * m->visual_dim * sizeof(float) : 0;
    model_stage_begin(m, xb + vb + lb);
    const float *x = model_stage(m, b->x, xb);
    const float *vx = h->visual ? model_stage(m, b->vx, vb) : NULL;
    const int *labels = model_stage(m, b->labels, lb);
    model_stage_ready(m);
    model_round_params(m);
    m->modality = modality_of(m, b, train);
    *emb = h->enc->forward(m, x, vx, B, T, train);
    int *correct = (int *)(h->scalars + 1);
    if (m->head_comm)
        aam_head_shard_forward(h->shard, m, *emb, b->labels, B, E, m->params + h->cls_w, train, h->margin, h->scale,
                               h->scalars, h->row_loss);
    else if (h->aam && !m->invariant)
        K->aam_softmax_forward(h->scalars, correct, h->aam_cache, *emb, m->params + h->cls_w, labels, B, E, S,
                               h->margin, h->scale, h->work);
    else if (h->aam)  // each sample's loss, summed exactly (model_read_stats reads the sum; scalars[0] is unused)
        K->aam_softmax_forward_rows(h->row_loss, correct, h->aam_cache, *emb, m->params + h->cls_w, labels, B, E, S,
                                    h->margin, h->scale, h->work);
    if (h->con) add_contrastive(m, b, train, *emb);
    if (m->invariant) model_sum_losses(m, h->row_loss, B, train ? m->group : 1);
    model_stats_fetch(m, h->scalars, B);
    return labels;
}

static void train_step(model_t *m, const batch_t *b) {
    aam_encoder_t *h = head_of(m);
    const spk_backend_t *K = m->be;
    if (h->dino) {
        reserve_head(m, 1);
        dino_train_step(h->dino, m, h->enc, b, h->scalars);
        return;
    }
    const int64_t global = model_begin_step(m, b->n);
    const float *emb;
    const int *labels = forward_loss(m, b, 1, &emb);
    const int E = (int)h->emb, S = (int)m->head_rows;
    K->vec_zero(h->g_emb, (size_t)b->n * E);
    if (m->head_comm)
        aam_head_shard_backward(h->shard, m, h->g_emb, m->grads + h->cls_w,
                                m->invariant ? xsum_at(m->xgrads, h->cls_w) : xsum_none(), E, h->margin, h->scale);
    else if (h->aam && m->invariant)  // the mean over the global batch: each sample's loss weighs 1 / global
        K->aam_softmax_backward_exact(h->g_emb, m->grads + h->cls_w, xsum_at(m->xgrads, h->cls_w), 1.0f / (float)global,
                                      h->aam_cache, emb, m->params + h->cls_w, labels, b->n, E, S, h->margin, h->scale,
                                      h->work, m->group);
    else if (h->aam)
        K->aam_softmax_backward(h->g_emb, m->grads + h->cls_w, 1.0f, h->aam_cache, emb, m->params + h->cls_w, labels,
                                b->n, E, S, h->margin, h->scale, h->work);
    model_grads_ready(m, h->cls_w + (int64_t)S * E);  // (a loss without the AAM-softmax leaves them zero)
    if (h->con) contrastive_head_backward(h->con, m, h->g_emb);
    h->enc->backward(m, h->g_emb, b->n, batch_frames(b));
}

static void eval_step(model_t *m, const batch_t *b, step_stats_t *st) {
    const float *emb;
    forward_loss(m, b, 0, &emb);
    model_read_stats(m, st);
}

// Inference-mode embeddings; samples of equal length go through together, others one by one.
static void embed(model_t *m, const batch_t *b, float *out) {
    aam_encoder_t *h = head_of(m);
    const int64_t E = h->emb, F = m->feature_dim, Fv = m->visual_dim;
    model_round_params(m);
    m->embedding = 1;
    int i = 0;
    while (i < b->n) {
        int64_t T = b->frame_off[i + 1] - b->frame_off[i];
        int j = i + 1;
        while (j < b->n && b->frame_off[j + 1] - b->frame_off[j] == T) j++;
        h->enc->reserve(m, j - i, (int)T);
        const size_t xb = (size_t)((j - i) * T * F) * sizeof(float);
        const int64_t Tv = h->visual ? b->vframe_off[i + 1] - b->vframe_off[i] : 0;
        const size_t vb = (size_t)((j - i) * Tv * Fv) * sizeof(float);
        model_stage_begin(m, xb + vb);
        const float *x = model_stage(m, b->x + b->frame_off[i] * F, xb);
        const float *vx = h->visual ? model_stage(m, b->vx + b->vframe_off[i] * Fv, vb) : NULL;
        model_stage_ready(m);
        reserve_head(m, j - i);
        for (int k = i; k < j && h->visual; k++) h->modality[k - i] = (int8_t)m->embed_modality;
        m->modality = h->visual && m->embed_modality != MODALITY_BOTH ? h->modality : NULL;
        const float *emb = h->enc->forward(m, x, vx, j - i, (int)T, 0);
        m->be->download(out + (size_t)i * E, emb, (size_t)((j - i) * E) * sizeof(float));
        i = j;
    }
    m->embedding = 0;
}

// Margin ramp: 0 before margin_start, linear to the full margin at margin_end.
static void set_epoch(model_t *m, int64_t epoch) {
    aam_encoder_t *h = head_of(m);
    if (h->dino) dino_set_epoch(h->dino, epoch);
    if (h->margin_end <= h->margin_start) {
        h->margin = epoch >= h->margin_start ? h->margin_max : 0.0f;
        return;
    }
    double f = (double)(epoch - h->margin_start) / (double)(h->margin_end - h->margin_start);
    h->margin = (float)(h->margin_max * fmin(fmax(f, 0.0), 1.0));
}

static void free_impl(model_t *m) {
    aam_encoder_t *h = head_of(m);
    h->enc->release(m);
    release_head(h, m);
    contrastive_head_free(h->con, m);
    h->con = NULL;
    dino_free(h->dino, m);
    h->dino = NULL;
}

static void after_update(model_t *m, int64_t step, int64_t total) {
    aam_encoder_t *h = head_of(m);
    if (h->dino) dino_after_update(h->dino, m, step, total);
}

static void after_averaging(model_t *m) {
    aam_encoder_t *h = head_of(m);
    if (h->dino) dino_after_averaging(h->dino, m);
}

static void finish(model_t *m) {
    aam_encoder_t *h = head_of(m);
    if (h->dino) dino_finish(h->dino, m);
}

static const model_ops_t aam_encoder_model_ops = {train_step, eval_step,    embed,           set_epoch,
                                                  free_impl,  after_update, after_averaging, finish};

void aam_encoder_init(aam_encoder_t *h, model_t *m, const model_config_t *cfg, const aam_encoder_ops_t *enc,
                      int64_t emb_dim) {
    SPK_ASSERT(m->impl == h && m->table.count == 0);  // the head comes first in impl and in the table
    h->enc = enc;
    h->emb = emb_dim;
    h->margin_max = h->margin = (float)cfg->margin;
    h->scale = (float)cfg->scale;
    h->sample = cfg->head_sample > 0 && cfg->head_sample < 1 ? cfg->head_sample : 1.0;
    h->seed = cfg->seed;
    h->modality_p = cfg->modality_dropout;
    h->margin_start = cfg->margin_warmup_start;
    h->margin_end = cfg->margin_warmup_end;
    h->con = contrastive_head_create(cfg, &h->aam);
    m->head_unused = !h->aam;
    h->cls_w = param_table_add(&m->table, "classifier.weight", 2, (int64_t[]){m->head_rows, emb_dim});
    h->dino = dino_create(m, cfg, emb_dim);  // (its head's tensors next: their gradients are final first)
    m->ops = &aam_encoder_model_ops;
    m->emb_dim = emb_dim;
}

void aam_encoder_init_classifier(const aam_encoder_t *h, model_t *m, uint64_t seed, int index) {
    const param_tensor_t *t = &m->table.t[index];
    SPK_ASSERT(t->offset == h->cls_w);
    float *p = m->host_params + t->offset;
    rng_t r = rng_init(seed, RNG_PURPOSE_INIT, (uint64_t)index, 0);
    rng_skip(&r, (uint64_t)(m->head_first * t->shape[1]));  // a slice of the head: the whole head's values
    const float bound = sqrtf(6.0f / (float)(m->num_classes + t->shape[1]));
    for (int64_t j = 0; j < t->numel; j++) p[j] = (float)((2.0 * rng_uniform(&r) - 1.0) * bound);
}
