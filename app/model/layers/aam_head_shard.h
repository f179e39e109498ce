// The AAM-softmax head with its classes sharded across ranks (--head sharded; the kernels are
// kernels/aam_shard.h). A step gathers the ranks' embeddings and labels into the global batch,
// scores it against this rank's slice of the classes, and combines each row's log-sum-exp over
// the slices on every rank (the same numbers in the same order everywhere, so every rank
// reaches the same loss). The backward sends each slice's embedding gradients back to the rank
// whose samples they are (a reduce-scatter); the classifier's gradient never leaves its rank.
// Communication goes through model_t.head_comm (app/dist/head_comm.h); on GPUs with NCCL the
// embeddings and their gradients move between the devices directly.
#pragma once
#include "app/model/core/model_core.h"

typedef struct aam_head_shard aam_head_shard_t;

aam_head_shard_t *aam_head_shard_create(void);
void aam_head_shard_free(aam_head_shard_t *s, const model_t *m);  // NULL is fine
// Partial FC (An et al., 2022): each step scores the global batch's own classes and each other
// class with probability `rate`, the draw keyed on (seed, m->step_key, class), so the same
// classes on any number of ranks and after a resume. rate 1: every class (the default).
void aam_head_shard_sample(aam_head_shard_t *s, double rate, uint64_t seed);

// This rank's B embeddings (backend memory; B may be 0 in evaluation, the rank still takes
// part) with their labels (host): scalars (backend memory) <- [mean loss of these B samples,
// their argmax hits as an int]. w: this rank's classifier rows (m->head_rows, E). train: a
// training step's (its classes sampled, aam_head_shard_sample), else every class is scored.
// In the world-size-invariant mode (m->invariant) the sums over classes are exact
// (kernels/aam_shard.h) and row_loss (backend, (B)) <- each sample's loss, in place of the mean.
void aam_head_shard_forward(aam_head_shard_t *s, model_t *m, const float *emb, const int *labels, int B, int E,
                            const float *w, int train, float margin, float scale, float *scalars, float *row_loss);
// After a forward with B > 0: g_emb (backend, (B, E)) <- the gradient of the mean loss of this
// rank's samples (the replicated head's, so that averaging over the ranks gives the global
// batch's), dw += the gradient of the global batch's mean loss w.r.t. this rank's rows. In the
// invariant mode: g_emb += the gradient of the global batch's mean loss w.r.t. this rank's
// embeddings, xdw (exact sums of this rank's rows) += that w.r.t. the rows, dw its scratch.
void aam_head_shard_backward(aam_head_shard_t *s, model_t *m, float *g_emb, float *dw, xsum_t xdw, int E, float margin,
                             float scale);
