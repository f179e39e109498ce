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

size_t aam_softmax_cache_floats(int B, int E, int S);      // forward -> backward state
size_t aam_softmax_workspace_floats(int B, int E, int S);  // scratch for either call

void aam_softmax_forward(float* loss,        // scalar out: mean CE
                         int* correct,       // scalar out: # argmax(cos) == label
                         float* cache,       // (aam_softmax_cache_floats) out
                         const float* emb,   // (B, E)
                         const float* w,     // (S, E) class weights
                         const int* labels,  // (B) in [0, S)
                         int B, int E, int S, float margin, float scale,
                         float* workspace);  // (aam_softmax_workspace_floats)

// Gradient of dloss * loss (dloss = 1 for plain training). ACCUMULATES into demb and dw
// (either may be NULL).
void aam_softmax_backward(float* demb,  // (B, E) +=
                          float* dw,    // (S, E) +=
                          float dloss,
                          const float* cache,  // from aam_softmax_forward
                          const float* emb,    // (B, E)
                          const float* w,      // (S, E)
                          const int* labels,   // (B)
                          int B, int E, int S, float margin, float scale,
                          float* workspace);  // (aam_softmax_workspace_floats)
