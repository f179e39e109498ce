// The seed job's model: a linear classifier over the utterance's mean frame.
//   pooled (B, F) = mean over time of the frames; logits (B, S) = pooled W^T + b
// Parameters (reverse execution order): fc.weight (S, F), fc.bias (S).
#include "app/model/linear/linear.h"

#include "app/model/core/model_stats.h"
#include "app/model/layers/model_layers.h"
#include "kernels/base/check.h"
#include "kernels/base/rng.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    int64_t w, b;        // offsets of fc.weight, fc.bias
    int cap;             // batch capacity of the buffers below
    float *host_pooled;  // (cap, F) pooling runs on the host, as part of reading the batch
    float *logits;       // (cap, S)
    float *probs;        // (cap, S) softmax, kept for backward
    float *dlogits;      // (cap, S)
    float *scalars;      // [loss, correct (an int)]; invariant mode: (cap, 2), one pair per sample
} linear_t;

static void release(model_t *m, linear_t *l) {
    free(l->host_pooled);
    l->host_pooled = NULL;
    float **bufs[] = {&l->logits, &l->dlogits, &l->probs, &l->scalars};
    model_bufs_free(m, bufs, sizeof bufs / sizeof bufs[0]);
}

static void ensure(model_t *m, linear_t *l, int n) {
    if (n <= l->cap) return;
    release(m, l);
    const size_t F = (size_t)m->feature_dim, S = (size_t)m->num_classes;
    l->cap = n;
    l->host_pooled = mallocCheck((size_t)n * F * sizeof(float));
    l->logits = model_buf(m, (size_t)n * S);
    l->dlogits = model_buf(m, (size_t)n * S);
    l->probs = model_buf(m, (size_t)n * S);
    l->scalars = model_buf(m, 2 * (size_t)n);
}

static void pool(const batch_t *b, float *pooled) {
    const int64_t F = b->feature_dim;
    for (int i = 0; i < b->n; i++) {
        int64_t t0 = b->frame_off[i], t1 = b->frame_off[i + 1];
        float *p = pooled + i * F;
        for (int64_t j = 0; j < F; j++) p[j] = 0.0f;
        for (int64_t t = t0; t < t1; t++)
            for (int64_t j = 0; j < F; j++) p[j] += b->x[t * F + j];
        float inv = 1.0f / (float)(t1 - t0);
        for (int64_t j = 0; j < F; j++) p[j] *= inv;
    }
}

typedef struct {
    const float *pooled;  // (n, F) on the backend
    const int *labels;    // (n)
} staged_t;

// The invariant mode needs each sample's loss: xent_forward row by row (the mean of one row is
// its loss), the losses summed exactly in terms of `group` samples (model_sum_losses), and the
// correct count into scalars[1] for model_stats_fetch. The host waits for the forward here.
static void sample_losses(model_t *m, linear_t *l, const int *labels, int n, int group) {
    const spk_backend_t *K = m->be;
    const int S = (int)m->num_classes;
    for (int i = 0; i < n; i++)
        K->xent_forward(l->scalars + 2 * i, (int *)(l->scalars + 2 * i + 1), l->probs + (size_t)i * S,
                        l->logits + (size_t)i * S, labels + i, 1, S);
    float *v = mallocCheck(2 * (size_t)n * sizeof(float));
    K->download(v, l->scalars, 2 * (size_t)n * sizeof(float));
    int correct = 0;
    for (int i = 0; i < n; i++) {
        int c;
        memcpy(&c, &v[2 * i + 1], sizeof c);
        correct += c;
        v[i] = v[2 * i];  // the losses, packed
    }
    K->upload(l->dlogits, v, (size_t)n * sizeof(float));  // scratch until the backward zeroes it
    model_sum_losses(m, l->dlogits, n, group);
    memcpy(&v[1], &correct, sizeof correct);
    K->upload(l->scalars, v, 2 * sizeof(float));  // [unused, correct]
    free(v);
}

// Forward and loss (invariant mode: the losses in terms of `group` samples); the loss and
// accuracy are fetched back without waiting (model_read_stats). Returns the pooled batch and
// the labels on the backend.
static staged_t forward(model_t *m, const batch_t *b, int group) {
    linear_t *l = m->impl;
    const spk_backend_t *K = m->be;
    const int F = (int)m->feature_dim, S = (int)m->num_classes;
    ensure(m, l, b->n);
    pool(b, l->host_pooled);  // staging copies it (or, on the CPU, uses it within this step)
    const size_t pb = (size_t)b->n * F * sizeof(float), lb = (size_t)b->n * sizeof(int);
    model_stage_begin(m, pb + lb);
    const staged_t in = {model_stage(m, l->host_pooled, pb), model_stage(m, b->labels, lb)};
    model_stage_ready(m);
    K->linear_forward(l->logits, in.pooled, m->params + l->w, m->params + l->b, b->n, F, S);
    if (m->invariant)
        sample_losses(m, l, in.labels, b->n, group);
    else
        K->xent_forward(l->scalars, (int *)(l->scalars + 1), l->probs, l->logits, in.labels, b->n, S);
    model_stats_fetch(m, l->scalars, b->n);
    return in;
}

static void train_step(model_t *m, const batch_t *b) {
    linear_t *l = m->impl;
    const spk_backend_t *K = m->be;
    const int64_t global = model_begin_step(m, b->n);
    const staged_t in = forward(m, b, m->group);
    const int S = (int)m->num_classes;
    K->vec_zero(l->dlogits, (size_t)b->n * S);
    if (m->invariant)  // the mean over the global batch: row by row, each weighing 1 / global
        for (int i = 0; i < b->n; i++)
            K->xent_backward(l->dlogits + (size_t)i * S, 1.0f / (float)global, l->probs + (size_t)i * S, in.labels + i,
                             1, S);
    else
        K->xent_backward(l->dlogits, 1.0f, l->probs, in.labels, b->n, S);
    model_linear_backward(m, NULL, l->w, l->b, l->dlogits, in.pooled, b->n, (int)m->feature_dim, S);
}

static void eval_step(model_t *m, const batch_t *b, step_stats_t *st) {
    forward(m, b, 1);
    model_read_stats(m, st);
}

// The linear model's "embedding" is the input to its classifier: the mean frame.
static void embed(model_t *m, const batch_t *b, float *out) {
    (void)m;
    pool(b, out);
}

static void free_impl(model_t *m) { release(m, m->impl); }

static const model_ops_t linear_ops = {
    .train_step = train_step, .eval_step = eval_step, .embed = embed, .free_impl = free_impl};

void model_linear_build(model_t *m, const model_config_t *cfg, const model_data_t *data) {
    linear_t *l = callocCheck(1, sizeof *l);
    int64_t F = m->feature_dim, S = m->num_classes;
    l->w = param_table_add(&m->table, "fc.weight", 2, (int64_t[]){S, F});
    l->b = param_table_add(&m->table, "fc.bias", 1, (int64_t[]){S});
    m->ops = &linear_ops;
    m->impl = l;
    m->input = (loader_spec_t){.crop = 0, .min_frames = 1, .cmn = 0, .visual = 0};  // whole utterances, mean-pooled
    m->emb_dim = F;
    m->min_batch = 1;
    model_alloc_buffers(m, data);
    // PyTorch nn.Linear's default: weight and bias uniform in +-1/sqrt(fan_in).
    float bound = 1.0f / sqrtf((float)F);
    rng_t r = rng_init(cfg->seed, RNG_PURPOSE_INIT, 0, 0);
    for (int64_t i = 0; i < m->table.total; i++) m->host_params[i] = (float)((2.0 * rng_uniform(&r) - 1.0) * bound);
}
