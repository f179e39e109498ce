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
#include <stdint.h>

#include "kernels/exact_sum.h"

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

// ---- the world-size-invariant mode (--invariant --head sharded) ---------------------------------
// A row's softmax sums over every class, across the slices, so those sums are exact
// (kernels/exact_sum.h), and every other number is computed from one class, or from one block
// of classes, alone. Blocks are `block` consecutive global classes (aam_shard_block), which the
// slices never split (app/dist/head_comm.h), so a block is computed alike in any slice. In this
// mode the cache's probs slot holds the logits in the backend's own layout (class-major, (S, G),
// on the CPU; sample-major on CUDA). A row's denominator takes one exact term per class, so a
// head may have at most XSUM_MAX_TERMS classes (the trainer checks).

// Classes per block for a head of `classes`: 1 below 2,048 classes (the slices are then those
// of the plain mode), up to 64 for large heads. It bounds the ranks a head can be split over
// (ceil(classes / block) >= ranks) and the exact sums of the embeddings' gradient (G x E per
// block and step).
static inline int aam_shard_block(int64_t classes) {
    const int64_t b = classes / 1024;
    return b < 1 ? 1 : b > 64 ? 64 : (int)b;
}
// The number of blocks of a head of `classes` (the last one may be short).
static inline int64_t aam_shard_blocks(int64_t classes) {
    const int64_t b = aam_shard_block(classes);
    return (classes + b - 1) / b;
}

// aam_shard_forward's results, with each block's cosines by one fixed GEMM (kernels/gemm.h) and
// rows[g].lse replaced by the slice's largest logit; the logits (margin at the label) stay in
// the cache for the two calls below. cls (backend memory): the global class of each of the S
// rows, in increasing order (Partial FC's sampled rows, whose labels are positions among them,
// first 0); NULL: row j is class first + j.
void aam_shard_forward_fixed(float *rows, int *argmax, float *cache, const float *emb, const float *w,
                             const int *labels, const int *cls, int G, int E, int S, int first, int block, float margin,
                             float scale);
// sums[g] += exp(logit[j, g] - mx[g]) over the slice's classes j (G exact sums): the whole
// head's sums, once added over the slices, whatever the slices are.
void aam_shard_expsum_exact(xsum_t sums, const float *mx, const float *cache, int G, int E, int S);
// The gradient of g * (sum of the G losses) through the slice, with the whole head's
// probabilities p[j, g] = exp(logit[j, g] - mx[g]) / sum[g] (mx_sum: mx (G) | sum (G)):
//   dehat (G x E exact sums) += the gradient w.r.t. the normalised embeddings, each block's
//                              classes summed in float in class order as one term (the
//                              normalisation's backward comes after the sum over slices);
//   dw (S x E exact sums)    += the class rows' gradient, each group of `group` samples summed
//                              in float (in dw_tmp, S x E scratch) as one term.
void aam_shard_backward_exact(xsum_t dehat, float *dw_tmp, xsum_t dw, const float *mx_sum, float g, const float *cache,
                              const int *labels, const int *cls, int G, int E, int S, int first, int block,
                              float margin, float scale, float *workspace, int group);
