// A metric-learning loss on an encoder's embeddings (kernels/contrastive.h: supervised
// contrastive, angular prototypical, GE2E), alone or beside the AAM-softmax head
// (app/model/layers/aam_encoder.h), over the GLOBAL batch: every rank's embeddings and labels
// are all-gathered (model_t.batch_comm), each rank computes the loss of its own anchors against
// all of them, and the gradients with respect to other ranks' embeddings go back to those ranks
// (reduce-scatter), so K ranks train as one rank with the whole global batch would. With
// --negatives local (no batch_comm) each rank's batch is its own contrastive batch, as the
// toolkits do. On GPUs with NCCL (head_comm_t's device collectives) the embeddings are gathered
// and the gradients reduce-scattered on the devices; the loss itself runs on the host. In the
// world-size-invariant mode every rank computes every anchor of the global
// batch (the same bits everywhere) and keeps its own rows' gradient: no reduce-scatter, no sum
// whose order depends on the number of ranks.
//
// The loss is the mean over the global batch's anchors (its samples; angular prototypical: its
// speaker groups) times the weight, so it is the same figure on any number of ranks.
#pragma once
#include "app/model/core/model_core.h"
#include "kernels/contrastive.h"

typedef struct contrastive_head contrastive_head_t;

// NULL for `--loss aam`; *aam says whether the AAM-softmax is part of the loss. An unknown name
// stops with a usage error (the trainer checks them first).
contrastive_head_t *contrastive_head_create(const model_config_t *cfg, int *aam);
void contrastive_head_free(contrastive_head_t *h, const model_t *m);

// The loss of a batch: emb (B, E) on the model's backend, labels and dataset indices on the host
// (with --labels utterance training contrasts utterances: the index is the label, so only the
// views of one utterance are positives). train: the global
// batch (when m->batch_comm is set) and the gradient kept for contrastive_head_backward;
// evaluation scores each rank's batch alone, with the supervised contrastive loss for the losses
// that need speaker groups. *loss: this rank's share (its anchors' loss sum times G / (B A),
// whose mean over the ranks is the global loss); row_loss (B, host, may be NULL): each own
// sample's part of the global loss times G (their sum over the global batch divided by G is
// the loss); *hits: own anchors whose best match is their own speaker.
void contrastive_head_forward(contrastive_head_t *h, model_t *m, const float *emb, const int *labels,
                              const int64_t *index, int B, int E, int train, double *loss, float *row_loss, int *hits);
// Adds the loss's gradient with respect to this rank's embeddings to g_emb (B, E, backend):
// in the plain mode that of this rank's share (the gradient averaging over ranks makes it the
// global loss's), in the invariant mode that of the global loss itself (the exact sums add the
// ranks' parts).
void contrastive_head_backward(contrastive_head_t *h, model_t *m, float *g_emb);
