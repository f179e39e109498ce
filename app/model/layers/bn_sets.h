// BatchNorm's sets of statistics in training (app/model/layers/bn_sets.c), shared by the layers
// that normalise (model_layers.c, dense_bn.c): by default one over this rank's batch; in the
// world-size-invariant mode one over the global batch (exchanged), or with --invariant-bn group
// one for each group of samples (this rank's alone), of which the global batch's first group
// updates the running statistics.
#pragma once
#include "app/model/core/model_core.h"

#include <stddef.h>
#include <stdint.h>

typedef struct {
    int sets, samples;  // sets, and samples in each
    int64_t per_set;    // samples each set's statistics are over
} bn_sets_t;

// The invariant mode's sets in a batch of B.
bn_sets_t model_bn_sets(const model_t *m, int B);
// Whether set i updates the running statistics: over the global batch the one set; by groups,
// the global batch's first group alone (held where batch_offset is 0), so their bits are the
// same on any world size.
int model_bn_set_runs(const model_t *m, int i);
// Floats of a BatchNorm layer's saved mean (and of its rstd) for a batch of B: C, or with
// --invariant-bn group C for each group of samples.
size_t model_bn_stats_floats(const model_t *m, int B, int C);
// Room for n exact BatchNorm sums on the model's backend, zeroed (grown once, on the first step).
xsum_t model_bn_stats_sums(model_t *m, int64_t n);
