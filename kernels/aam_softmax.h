// Additive angular margin softmax head (SpeechBrain Classifier + AdditiveAngularMargin,
// easy_margin = False) with mean cross-entropy over the batch:
//   cos[b,c] = <emb_b / |emb_b|, W_c / |W_c|>     (F.normalize, norms floored at 1e-12)
//   sin = sqrt(clamp(1 - cos^2, 0, 1)),  phi = cos*cos(m) - sin*sin(m)
//   phi = cos > cos(pi - m) ? phi : cos - sin(pi - m)*m
//   logits[b,c] = s * (c == label_b ? phi : cos),  loss = mean_b CE(logits_b, label_b)
// `correct` counts argmax_c cos[b,c] == label_b (first maximum on ties).
// Defaults in SpeechBrain ECAPA recipes: margin = 0.2, scale = 30.
// Near |cos| = 1 the derivative of sin = sqrt(1 - cos^2) is guarded: see spk_aam_dphi in
// elementwise_math.h (zero where the clamp is active, sin floored at 1e-6 in the division).
#pragma once
#include <stddef.h>

#include "kernels/exact_sum.h"

size_t aam_softmax_cache_floats(int B, int E, int S);      // forward -> backward state
size_t aam_softmax_workspace_floats(int B, int E, int S);  // scratch for either call

void aam_softmax_forward(float *loss,        // scalar out: mean CE
                         int *correct,       // scalar out: # argmax(cos) == label
                         float *cache,       // (aam_softmax_cache_floats) out
                         const float *emb,   // (B, E)
                         const float *w,     // (S, E) class weights
                         const int *labels,  // (B) in [0, S)
                         int B, int E, int S, float margin, float scale,
                         float *workspace);  // (aam_softmax_workspace_floats)

// Gradient of dloss * loss (dloss = 1 for plain training). ACCUMULATES into demb and dw
// (either may be NULL).
void aam_softmax_backward(float *demb,  // (B, E) +=
                          float *dw,    // (S, E) +=
                          float dloss,
                          const float *cache,  // from aam_softmax_forward
                          const float *emb,    // (B, E)
                          const float *w,      // (S, E)
                          const int *labels,   // (B)
                          int B, int E, int S, float margin, float scale,
                          float *workspace);  // (aam_softmax_workspace_floats)

// The world-size-invariant mode. aam_softmax_forward_rows: the forward with every row computed
// on its own (GEMM rows of M = 1), giving each sample's loss in row_loss (B) instead of the
// mean. aam_softmax_backward_exact: the gradient of dloss * (sum of the B losses) (a sum: the
// caller scales by 1 / global batch), demb += as usual, and dw the exact sums to which every
// group of `group` consecutive samples (B is a multiple) adds its (S, E) contribution as one term
// (dw_tmp: (S, E) floats of scratch, undefined afterwards). Results per sample depend neither on
// B nor on the thread count. Same cache and workspace.
void aam_softmax_forward_rows(float *row_loss,  // (B) out
                              int *correct, float *cache, const float *emb, const float *w, const int *labels, int B,
                              int E, int S, float margin, float scale, float *workspace);
void aam_softmax_backward_exact(float *demb,    // (B, E) +=, or NULL
                                float *dw_tmp,  // (S, E) scratch
                                xsum_t dw,      // (S, E) +=
                                float dloss, const float *cache, const float *emb, const float *w, const int *labels,
                                int B, int E, int S, float margin, float scale, float *workspace, int group);
