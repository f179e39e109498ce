// The seed job's model: a linear classifier over the utterance's mean frame.
//   pooled (B, F) = mean over time of the frames; logits (B, S) = pooled W^T + b
// Parameters (reverse execution order): fc.weight (S, F), fc.bias (S).
#include "app/check.h"
#include "app/model.h"
#include "io/rng.h"
#include "kernels/linear.h"
#include "kernels/xent.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    int64_t w, b;       // offsets of fc.weight, fc.bias
    int cap;            // batch capacity of the activations below
    float *pooled;      // (cap, F)
    float *logits;      // (cap, S)
    float *probs;       // (cap, S) softmax, kept for backward
    float *dlogits;     // (cap, S)
} linear_t;

static void ensure(linear_t *l, int n, int64_t F, int64_t S) {
    if (n <= l->cap) return;
    free(l->pooled);
    free(l->logits);
    free(l->dlogits);
    free(l->probs);
    l->cap = n;
    l->pooled = mallocCheck((size_t)(n * F) * sizeof(float));
    l->logits = mallocCheck((size_t)(n * S) * sizeof(float));
    l->dlogits = mallocCheck((size_t)(n * S) * sizeof(float));
    l->probs = mallocCheck((size_t)(n * S) * sizeof(float));
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

// Forward and loss; adds the batch's loss and accuracy to st.
static void forward(model_t *m, const batch_t *b, step_stats_t *st) {
    linear_t *l = m->impl;
    ensure(l, b->n, m->feature_dim, m->num_classes);
    pool(b, l->pooled);
    linear_forward(l->logits, l->pooled, m->params + l->w, m->params + l->b, b->n, (int)m->feature_dim,
                   (int)m->num_classes);
    float loss = 0.0f;
    int correct = 0;
    xent_forward(&loss, &correct, l->probs, l->logits, b->labels, b->n, (int)m->num_classes);
    st->loss_sum += (double)loss * b->n;
    st->correct += correct;
    st->count += b->n;
}

static void train_step(model_t *m, const batch_t *b, step_stats_t *st) {
    linear_t *l = m->impl;
    forward(m, b, st);
    memset(l->dlogits, 0, (size_t)(b->n * m->num_classes) * sizeof(float));
    xent_backward(l->dlogits, 1.0f, l->probs, b->labels, b->n, (int)m->num_classes);
    linear_backward(NULL, m->grads + l->w, m->grads + l->b, l->dlogits, l->pooled, m->params + l->w, b->n,
                    (int)m->feature_dim, (int)m->num_classes);
}

static void eval_step(model_t *m, const batch_t *b, step_stats_t *st) {
    forward(m, b, st);
}

// The linear model's "embedding" is the input to its classifier: the mean frame.
static void embed(model_t *m, const batch_t *b, float *out) {
    (void)m;
    pool(b, out);
}

static void free_impl(model_t *m) {
    linear_t *l = m->impl;
    free(l->pooled);
    free(l->logits);
    free(l->dlogits);
    free(l->probs);
    free(l);
}

static const model_ops_t linear_ops = {train_step, eval_step, embed, NULL, free_impl};

void model_linear_build(model_t *m, const train_config_t *cfg) {
    linear_t *l = callocCheck(1, sizeof *l);
    int64_t F = m->feature_dim, S = m->num_classes;
    l->w = param_table_add(&m->table, "fc.weight", 2, (int64_t[]){S, F});
    l->b = param_table_add(&m->table, "fc.bias", 1, (int64_t[]){S});
    m->ops = &linear_ops;
    m->impl = l;
    m->input = (loader_spec_t){.crop = 0, .min_frames = 1, .cmn = 0, .visual = 0};  // whole utterances, mean-pooled
    m->emb_dim = F;
    model_alloc_buffers(m);
    // PyTorch nn.Linear's default: weight and bias uniform in +-1/sqrt(fan_in).
    float bound = 1.0f / sqrtf((float)F);
    rng_t r = rng_init((uint64_t)cfg->seed, RNG_PURPOSE_INIT, 0, 0);
    for (int64_t i = 0; i < m->table.total; i++) m->params[i] = (float)((2.0 * rng_uniform(&r) - 1.0) * bound);
}
