// The shared-statistics BatchNorm + ReLU of a dense block (CAM++; kernels/dense_bn.h) in training
// and inference (app/model/layers/dense_bn.c): the block's readers share one set of batch
// statistics. Statistics sets: one over this rank's batch, or in the invariant mode the global
// one, or with BatchNorm by groups one a group, each a batch of its own as the plain mode's (set
// i's mean and variance at i * ldm).
#pragma once
#include "app/model/core/model_core.h"

#include <stdint.h>

// The readers' sums of a block's channels: S1 in [0, cap), S2 in [cap, 2 cap) as floats (what
// dense_bn_input_grad reads; a set's at set * 2 cap) and, over the global batch, as exact sums too.
typedef struct {
    int cap, sets;
    float *f;
    xsum_t x;
} model_dense_sums_t;
// The sums of cap channels, a set's for each set a batch of at most B samples holds.
model_dense_sums_t model_dense_sums(const model_t *m, int cap, int B);
void model_dense_sums_free(const model_t *m, model_dense_sums_t *s);
void model_dense_sums_zero(model_t *m, model_dense_sums_t *s);

// The batch statistics (mean, biased variance) of C channels of x (row stride ld) over B samples
// of HW rows, each set's: in the invariant mode over the global batch their sums taken from shift
// (C; identical on every rank: the running mean, which the mode keeps global), else from the
// set's own mean, from a first pass (shift unused). part: scratch of max(2 B, 3) C floats.
void model_dense_bn_stats(model_t *m, float *mean, float *var, int ldm, const float *x, int ld, const float *shift,
                          int B, int HW, int C, float *part);
// A reader's running statistics (state offsets) from the first set's statistics.
void model_dense_bn_running(model_t *m, int64_t running_mean, int64_t running_var, const float *mean, const float *var,
                            int B, int HW, int C);
// A reader's forward, z (or zh) = relu(bn(x)) with its weight and bias (kernels/dense_bn.h), each
// set by its statistics (ldm 0: the same ones for every sample, inference's running ones).
void model_dense_bn_relu_forward(model_t *m, float *z, spk_bf16 *zh, int ldz, const float *x, int ldx,
                                 const float *mean, const float *var, int ldm, int64_t w, int64_t b, int B, int HW,
                                 int C);
// A reader's backward (its BatchNorm weight and bias at w, b): g (row stride ldg) overwritten or
// added to (accumulate), its parameter gradients, and its terms of s for channels [0, C).
// part: scratch of 4 B C floats.
void model_dense_bn_backward(model_t *m, float *g, int ldg, int accumulate, model_dense_sums_t *s, int64_t w, int64_t b,
                             const float *dz, int ldz, const float *x, int ldx, const float *mean, const float *var,
                             int ldm, int B, int HW, int C, float *part);
// The input gradient of the channels [c0, c0 + C) once all their readers ran (g, x, mean, var
// at column c0; dx overwritten): s's terms of those channels reduced over the ranks first in the
// invariant mode's global statistics.
void model_dense_bn_input_grad(model_t *m, float *dx, int lddx, const float *g, int ldg, const float *x, int ldx,
                               const float *mean, const float *var, int ldm, model_dense_sums_t *s, int c0, int B,
                               int HW, int C);
