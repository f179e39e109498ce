// ECAPA-TDNN (SpeechBrain's ECAPA_TDNN topology) built from kernels/: layer structs hold
// parameter offsets (into model->params / model->grads), state offsets (BatchNorm running
// statistics in model->state) and pointers to their activations, which are allocated once
// per (batch, frames) shape and reused every step.
// Parameter names follow SpeechBrain's state_dict, so its checkpoints map one to one.
#pragma once
#include "app/model.h"

#include <stddef.h>
#include <stdint.h>

#define ECAPA_SCALE 8  // Res2Net scale

typedef struct {
    int64_t feat;      // F
    int64_t channels;  // C
    int64_t att;       // attention channels (128)
    int64_t se;        // SE bottleneck (128)
    int64_t emb;       // embedding size (192)
    int64_t classes;   // S, AAM-softmax classes
} ecapa_dims_t;

// Conv1d -> ReLU -> BatchNorm1d
typedef struct {
    int cin, cout, k, dil;
    int64_t w, b, bn_w, bn_b;  // params: conv.conv.weight (cout, cin, k), conv.conv.bias (cout), norm.norm.weight/bias (cout)
    int64_t run_mean, run_var; // state: norm.norm.running_mean/var (cout)
    float *a;                  // (B, cout, T) relu(conv(x))
    float *y;                  // (B, cout, T) output
    float *mean, *rstd;        // (cout) batch statistics for backward
} tdnn_t;

// TDNN 1x1 -> Res2Net (scale 8) -> TDNN 1x1 -> squeeze-excitation -> + residual
typedef struct {
    tdnn_t tdnn1, tdnn2;
    tdnn_t res[ECAPA_SCALE - 1];   // res2net_block.blocks.i
    int64_t se1_w, se1_b;          // se_block.conv1.conv.weight (se, C), bias (se)
    int64_t se2_w, se2_b;          // se_block.conv2.conv.weight (C, se), bias (C)
    float *res_in[ECAPA_SCALE - 1];// (B, C/8, T) input of res[i]
    float *res_out;                // (B, C, T) concatenated Res2Net output
    float *s0;                     // (B, C) time mean
    float *s1;                     // (B, se) relu(conv1)
    float *s;                      // (B, C) sigmoid(conv2)
    float *out;                    // (B, C, T) block output
} seres_t;

typedef struct {
    ecapa_dims_t d;
    tdnn_t block0;
    seres_t blocks[3];
    tdnn_t mfa, asp_tdnn;
    int64_t asp_conv_w, asp_conv_b;     // asp.conv.conv.weight (3C, att, 1), bias (3C)
    int64_t asp_bn_w, asp_bn_b;         // asp_bn.norm.weight/bias (6C)
    int64_t asp_bn_mean, asp_bn_var;    // state (6C)
    int64_t fc_w, fc_b;                 // fc.conv.weight (E, 6C, 1), fc.conv.bias (E)
    int64_t cls_w;                      // classifier.weight (S, E)
    float margin, scale;                // AAM-softmax (margin follows the schedule)
    float margin_max;
    int64_t margin_start, margin_end;   // epochs of the margin ramp
    // activations for the current shape
    int cap_b;               // activations hold up to cap_b samples
    size_t cap_bt;           // and up to cap_bt sample-frames (B * T)
    float *x;                // (B, F, T) transposed input
    float *cat;              // (B, 3C, T) blocks 1..3 concatenated (MFA input)
    float *gstats;           // (B, 6C) global context [mean | std] of the MFA output
    float *attn_in;          // (B, 9C, T) [h, mean, std]
    float *attn_t;           // (B, att, T) tanh of the attention TDNN
    float *attn_w;           // (B, 3C, T) attention weights (softmax over time)
    float *pooled;           // (B, 6C) [mean | std]
    float *pooled_bn;        // (B, 6C)
    float *bn_mean, *bn_rstd;// (6C)
    float *emb;              // (B, E)
    float *aam_cache;        // (aam_softmax_cache_floats)
    // gradient scratch, reused by every step
    float *g9;               // (B, 9C, T) attention-input gradient
    float *g3[3];            // (B, 3C, T) each
    float *gblk[4];          // (B, C, T) gradients of the outputs of blocks 0..3
    float *gatt[2];          // (B, att, T) each
    float *gvec[3];          // (B, 6C) each
    float *g_emb;            // (B, E)
    float *work;             // conv / AAM workspace
    size_t work_floats;
} ecapa_t;

// Registers every tensor (reverse execution order) into m->table / m->state_table.
void ecapa_register(ecapa_t *e, model_t *m);
// Initialises parameters like PyTorch's defaults from the seed.
void ecapa_init_params(const ecapa_t *e, model_t *m, uint64_t seed);
// Makes room for B samples of T frames (grows the buffers when needed, never shrinks).
void ecapa_reserve(ecapa_t *e, int B, int T);
void ecapa_free_acts(ecapa_t *e);

// Encoder forward on frames (B, T, F) time-major: fills e->emb. train = 1 uses batch
// statistics and updates running statistics; train = 0 uses running statistics.
void ecapa_forward(ecapa_t *e, model_t *m, const float *frames, int B, int T, int train);
// Backward from g_emb (B, E) through the encoder; accumulates parameter gradients into
// m->grads and, when dframes is not NULL, the input gradient (B, T, F).
void ecapa_backward(ecapa_t *e, model_t *m, const float *g_emb, float *dframes, int B, int T);

// Blocks (app/ecapa_blocks.c)
void tdnn_register(tdnn_t *l, model_t *m, const char *prefix, int cin, int cout, int k, int dil);
void tdnn_alloc(tdnn_t *l, size_t bt);  // activations for bt = B * T sample-frames
void tdnn_free(tdnn_t *l);
void tdnn_forward(tdnn_t *l, model_t *m, const float *x, int B, int T, int train, float *work);
// dx += d(loss)/dx (dx may be NULL); dy is not modified. g: scratch of (B, cout, T).
void tdnn_backward(tdnn_t *l, model_t *m, float *dx, const float *dy, const float *x, int B, int T, float *g,
                   float *work);
size_t tdnn_work_floats(const tdnn_t *l, int B, int T);

void seres_register(seres_t *s, model_t *m, const char *prefix, int C, int se, int k, int dil);
void seres_alloc(seres_t *s, int C, int se, int B, size_t bt);
void seres_free(seres_t *s);
void seres_forward(seres_t *s, model_t *m, const float *x, int C, int se, int B, int T, int train, float *work);
// dx += gradient; dout is the gradient of the block output. g[0..3]: scratch of (B, C, T) each.
void seres_backward(seres_t *s, model_t *m, float *dx, const float *dout, const float *x, int C, int se, int B,
                    int T, float *const g[4], float *work);
