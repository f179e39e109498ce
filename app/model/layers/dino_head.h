// DINO's projection head (Caron et al. 2021; the DINOHead of 3D-Speaker's RDINO and of
// WeSpeaker's DINO recipe, use_bn and 3 layers):
//   Linear(E, H) - BatchNorm1d(H) - GELU - Linear(H, H) - BatchNorm1d(H) - GELU - Linear(H, D)
//   - L2 normalisation - weight-normalised Linear(D, K) without bias, its norms (weight_g) fixed at 1
// so the logits are cosines between the bottleneck and K prototypes. Its tensors carry the
// toolkits' names under "dino_head." (mlp.0, mlp.1, mlp.3, mlp.4, mlp.6, last_layer.weight_v).
// The BatchNorms are synchronized (nn.SyncBatchNorm): their statistics cover every rank's rows,
// as exact sums (kernels/exact_sum.h) that m->exact_allreduce adds across the ranks, so every
// rank normalises with the same bits whatever the number of ranks. The same head runs the
// student and, on the teacher's copy of the parameters (app/model/layers/dino.h), the teacher.
#pragma once
#include "app/model/core/model_config.h"
#include "app/model/core/model_core.h"

#include <stdint.h>

// One hidden layer: Linear, synchronized BatchNorm, GELU.
typedef struct {
    int64_t w, b, g, beta;  // the Linear's weight and bias, the BatchNorm's (parameter offsets)
    int64_t rm, rv;         // its running statistics (state offsets)
    const float *in;        // (rows, in_dim) the last forward's input
    int in_dim;             //
    float *h, *y, *a;       // (rows, H): the Linear's output, normalised, after the GELU
    float *mean, *rstd;     // (H) the last forward's batch statistics
} dino_hidden_t;

typedef struct {
    int E, H, D, K;
    dino_hidden_t layer[2];               // mlp.0-2 and mlp.3-5
    int64_t w6, b6, v;                    // mlp.6, last_layer.weight_v
    int cap;                              // rows the activations hold
    float *p, *z, *pnorm;                 // (rows, D) the bottleneck, normalised, (rows) its norms
    float *wn, *vnorm;                    // (K, D) the prototypes, (K) their norms
    float *ga, *gb, *gc, *gp, *gz, *gwn;  // backward scratch
    float *local;                         // (2H) a rank's sums of a BatchNorm's backward
    xsum_t sums;                          // (2H) the synchronized statistics
    int frozen;                           // the last backward left the prototypes without a gradient
} dino_head_t;

// Registers the head's parameters (after the classifier, before the encoder: their gradients
// are final before the encoder's) and running statistics, for E-dimensional embeddings.
void dino_head_register(dino_head_t *h, model_t *m, const model_config_t *cfg, int64_t emb_dim);
// The toolkits' initialisation in m->host_params, drawn from seed: truncated normal (std 0.02)
// Linear weights, zero biases, BatchNorm 1 and 0, prototypes uniform in +-1/sqrt(D) (nn.Linear).
void dino_head_init(const dino_head_t *h, model_t *m, uint64_t seed);
// Training-mode forward of N rows x (N, E) on m->params (the student's or the teacher's) and
// m->state's running statistics: logits (N, K), backend memory. n_global: the rows of every
// rank together, which the synchronized statistics cover.
void dino_head_forward(dino_head_t *h, model_t *m, const float *x, int N, int64_t n_global, float *logits);
// Backward of the last forward from dlogits (N, K): parameter gradients into m->grads (the
// invariant mode: m->xgrads), dx (N, E) += the input's gradient. The prototypes' gradient
// (unless frozen) is left as that of their normalised rows: dino_head_after_averaging finishes it.
void dino_head_backward(dino_head_t *h, model_t *m, const float *dlogits, float *dx, int N, int64_t n_global,
                        int freeze_last);
// Once the gradients are summed or averaged over the ranks: the weight normalisation's backward
// of the prototypes' gradient, the same on every rank.
void dino_head_after_averaging(dino_head_t *h, model_t *m);
// The end of the head's tensors in the parameters: gradients below it are final after
// dino_head_backward.
int64_t dino_head_end(const dino_head_t *h);
void dino_head_release(dino_head_t *h, const model_t *m);
