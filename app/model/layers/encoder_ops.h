// What an encoder family gives the heads that train it (app/model/layers/aam_encoder.h,
// app/model/layers/dino.h): its buffers, its forward from frames to embeddings, its backward.
#pragma once
#include "app/model/core/model_core.h"

typedef struct aam_encoder_ops {
    // Makes room for B samples of T frames (the encoder's buffers grow, never shrink).
    void (*reserve)(model_t *m, int B, int T);
    // Forward on staged frames (B, T, F) time-major (and visual frames (B, T / ratio, Fv), or
    // NULL): returns the embeddings (B, E) in backend memory. train: batch statistics and
    // running-statistics updates; else the running statistics.
    const float *(*forward)(model_t *m, const float *frames, const float *vframes, int B, int T, int train);
    // Backward from the embeddings' gradient (B, E): accumulates the encoder's parameter
    // gradients, reporting them ready as they become final (model_grads_ready).
    void (*backward)(model_t *m, const float *g_emb, int B, int T);
    // Releases the encoder's buffers (not m->impl itself).
    void (*release)(model_t *m);
} aam_encoder_ops_t;
