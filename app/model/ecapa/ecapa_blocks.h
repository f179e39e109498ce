// ECAPA's building blocks (app/model/ecapa/ecapa_blocks.c): the TDNN block and the SE-Res2Net
// block, their parameters (offsets into model->params / model->grads, BatchNorm statistics in
// model->state) and their activations on the model's backend, forward and backward.
#pragma once
#include "app/model/core/model_core.h"

#include <stddef.h>
#include <stdint.h>

#define ECAPA_SCALE 8  // Res2Net scale

// Conv1d -> ReLU -> BatchNorm1d
typedef struct {
    int cin, cout, k, dil;
    int64_t w, b, bn_w,
        bn_b;  // params: conv.conv.weight (cout, cin, k), conv.conv.bias (cout), norm.norm.weight/bias (cout)
    int64_t run_mean, run_var;  // state: norm.norm.running_mean/var (cout)
    spk_bf16 *xh;               // the conv input rounded to bf16 (bf16 models): (cin, B*T), batch folded into time;
                                // (B, cin, T) in the invariant mode
    float *a;                   // (B, cout, T) conv(x); relu(conv(x)) in inference and in the invariant mode
    float *y;                   // (B, cout, T) output
    float *mean, *rstd;         // (cout) batch statistics for backward
} tdnn_t;

// TDNN 1x1 -> Res2Net (scale 8) -> TDNN 1x1 -> squeeze-excitation -> + residual
typedef struct {
    tdnn_t tdnn1, tdnn2;
    tdnn_t res[ECAPA_SCALE - 1];     // res2net_block.blocks.i
    int64_t se1_w, se1_b;            // se_block.conv1.conv.weight (se, C), bias (se)
    int64_t se2_w, se2_b;            // se_block.conv2.conv.weight (C, se), bias (C)
    float *res_in[ECAPA_SCALE - 1];  // (B, C/8, T) input of res[i] (NULL in bf16)
    float *res_out;                  // (B, C, T) concatenated Res2Net output (the same)
    float *s0;                       // (B, C) time mean
    float *s1;                       // (B, se) relu(conv1)
    float *s;                        // (B, C) sigmoid(conv2)
    float *out;                      // (B, C, T) block output
} seres_t;

void tdnn_register(tdnn_t *l, model_t *m, const char *prefix, int cin, int cout, int k, int dil);
void tdnn_alloc(tdnn_t *l, const model_t *m, int B, size_t bt);       // activations for bt = B * T sample-frames
void tdnn_alloc_post(tdnn_t *l, const model_t *m, int B, size_t bt);  // the same but for the conv input
void tdnn_free(tdnn_t *l, const model_t *m);
// x may be NULL in bf16 models when l->xh holds the rounded input already.
void tdnn_forward(tdnn_t *l, model_t *m, const float *x, int B, int T, int train, float *work);
// dx += d(loss)/dx (dx_accumulate), else dx = it (dx may be NULL); dy is not modified. g: scratch
// of (B, cout, T). x, the forward's input, is read only in float32 models (bf16 ones read l->xh).
void tdnn_backward(tdnn_t *l, model_t *m, float *dx, int dx_accumulate, const float *dy, const float *x, int B, int T,
                   float *g, float *work);
size_t tdnn_work_floats(const tdnn_t *l, const model_t *m, int B, int T);
// End of the block's parameters (it registers norm weight/bias, then conv weight/bias, last).
static inline int64_t tdnn_end(const tdnn_t *l) { return l->b + l->cout; }
// The block without its convolution: ReLU and BatchNorm of l->a (the conv output, filled by
// the caller), and their backward into g (B, cout, T), the gradient at the conv output. Such a
// block takes tdnn_alloc_post.
void tdnn_post_forward(tdnn_t *l, model_t *m, int B, int T, int train);
void tdnn_post_backward(tdnn_t *l, model_t *m, const float *dy, float *g, int B, int T);

void seres_register(seres_t *s, model_t *m, const char *prefix, int C, int se, int k, int dil);
void seres_alloc(seres_t *s, const model_t *m, int C, int se, int B, size_t bt);
void seres_free(seres_t *s, const model_t *m);
void seres_forward(seres_t *s, model_t *m, const float *x, int C, int se, int B, int T, int train, float *work);
// dx += gradient; dout is the gradient of the block output. g[0..3]: scratch of (B, C, T) each.
void seres_backward(seres_t *s, model_t *m, float *dx, const float *dout, const float *x, int C, int se, int B, int T,
                    float *const g[4], float *work);
