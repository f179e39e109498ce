// Inference-mode embeddings of every utterance of a dataset: contiguous blocks of utterances
// per rank, full length, gathered so every rank holds all of them in utterance order.
#pragma once
#include "app/dist/comm.h"
#include "app/model/model.h"
#include "io/dataset/dataset.h"

// Collective. Returns a malloc'ed (N, emb_dim) array on every rank. met (may be NULL) is
// called after each batch's collective read: the ranks have just met (the trainer's stop
// grace counts from there).
float *embed_dataset(const comm_t *comm, model_t *m, dataset_t *ds, int64_t batch, void (*met)(void));
