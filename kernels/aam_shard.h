// The AAM-softmax head (kernels/aam_softmax.h) with its classes split across ranks: a rank
// holds the class rows [first, first + S) of the classifier and scores the global batch's G
// embeddings against them only. Its softmax is local; the ranks then combine each row's
// log-sum-exp (app/model/layers/aam_head_shard.h) and the backward rescales the local
// probabilities by the factor exp(lse_local - lse_global) of each row, so that the gradients
// are those of the whole head:
//   rows[g] = {lse: log sum_j exp(logit[g, j]) over the slice,
//              target: the label's logit s * phi when the label is in the slice, else 0,
//              cosmax: max_j cos[g, j]}
//   argmax[g] = first + the first j of cosmax (the whole head's first maximum is the first
//               rank's, in class order, that reaches the global maximum).
// Labels are global class indices; every row's label is in exactly one rank's slice.
// Cache and workspace: kernels/aam_layout.h with B = G.
#pragma once
#include <stddef.h>

#define AAM_SHARD_ROW 3  // floats of rows[] per embedding
enum { AAM_SHARD_LSE = 0, AAM_SHARD_TARGET = 1, AAM_SHARD_COSMAX = 2 };

size_t aam_shard_cache_floats(int G, int E, int S);
size_t aam_shard_workspace_floats(int G, int E, int S);

void aam_shard_forward(float *rows,        // (G, AAM_SHARD_ROW) out
                       int *argmax,        // (G) out: global class index
                       float *cache,       // (aam_shard_cache_floats) out
                       const float *emb,   // (G, E) the global batch
                       const float *w,     // (S, E) this rank's classes
                       const int *labels,  // (G) global class indices
                       int G, int E, int S, int first, float margin, float scale);

// demb = the gradient of g * (sum of the G losses) through this slice of the head (overwritten:
// the ranks' demb add up to the whole gradient); dw += this slice's gradient. factor[g] =
// exp(rows[g].lse - the row's global log-sum-exp). Either output may be NULL.
void aam_shard_backward(float *demb,          // (G, E) =
                        float *dw,            // (S, E) +=
                        const float *factor,  // (G)
                        float g, const float *cache, const int *labels, int G, int E, int S, int first, float margin,
                        float scale, float *workspace);  // (aam_shard_workspace_floats)
