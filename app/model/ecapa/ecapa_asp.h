// ECAPA's attentive statistics pooling with global context (app/model/ecapa/ecapa_asp.c).
#pragma once
#include "app/model/ecapa/ecapa_blocks.h"

#include <stddef.h>
#include <stdint.h>

// Attentive statistics pooling with global context over (B, cin, T) -> [mean | std].
// The TDNN over [h, mean, std] never builds that (B, 3 cin, T) tensor: mean and std are
// constant in time, so their part of the 1x1 convolution is a per-sample bias.
typedef struct {
    int cin, att;
    tdnn_t tdnn;             // <prefix>.tdnn: TDNN(3 cin -> att, k=1) over [h, mean, std]
    int64_t conv_w, conv_b;  // <prefix>.conv.conv.weight (cin, att, 1), bias (cin)
    spk_bf16 *hh;            // (cin, B*T) h rounded to bf16, batch folded into time (bf16 models)
    spk_bf16 *attn_th;       // (att, B*T) attn_t rounded to bf16 (bf16 models)
    spk_bf16 *gh;            // (att, B*T) backward: the TDNN output gradient in bf16 (bf16 models)
    float *gstats;           // (B, 2 cin) uniform-weight [mean | std]
    float *ctx;              // (B, att) the statistics' part of the TDNN's convolution, with its bias
    float *attn_t;           // (B, att, T) tanh
    float *attn_w;           // (B, cin, T) softmax over time
    float *g_logit;          // (B, cin, T) backward: the attention's logits' gradient
    float *g_t, *g_a;        // (B, att, T)
    float *g_ctx;            // (B, att)
    float *g_gstats;         // (B, 2 cin)
} asp_t;

void asp_register(asp_t *a, model_t *m, const char *prefix, int cin, int att);
void asp_alloc(asp_t *a, const model_t *m, int B, size_t bt);
void asp_free(asp_t *a, const model_t *m);
size_t asp_work_floats(const asp_t *a, const model_t *m, int B, int T);
// pooled[b * ld + c] = mean, pooled[b * ld + cin + c] = std of h (B, cin, T).
void asp_forward(asp_t *a, model_t *m, const float *h, float *pooled, int ld, int B, int T, int train, float *work);
// dh = the gradient through the pooling (written: h has no other use); dpooled has the same
// layout as pooled.
void asp_backward(asp_t *a, model_t *m, float *dh, const float *dpooled, const float *h, const float *pooled, int ld,
                  int B, int T, float *work);
