// Turns the sampler's sample indices into a batch of frames: whole utterances, or random
// crops of a fixed length. A crop's offset is drawn from (seed, epoch, sample index) only,
// never from the rank, so a sample gets the same crop on any world size. Utterances shorter
// than the crop are repeated to length. Optional per-crop mean normalisation (CMN).
#pragma once
#include "io/dataset.h"

#include <stdint.h>

typedef struct {
    int n;                // samples
    int64_t feature_dim;  // F
    int64_t *frame_off;   // (n+1,) sample i is frames [frame_off[i], frame_off[i+1])
    float *x;             // (frame_off[n], F) time-major, as stored
    int32_t *labels;      // (n,)
    int64_t *index;       // (n,) dataset indices
} batch_t;

typedef struct {
    dataset_t *ds;
    int64_t crop;  // frames per sample, 0 = whole utterances
    int cmn;       // subtract each sample's mean frame
    uint64_t seed;
    int max_batch;
    batch_t batch;
    segment_t *segs;   // (max_batch,)
    float *raw;        // staging for short utterances before repetition
    int64_t raw_cap;
    int64_t x_cap;     // floats allocated in batch.x
    double *mean;      // (F,) CMN accumulator
} loader_t;

void loader_init(loader_t *l, dataset_t *ds, int max_batch, int64_t crop, int cmn, uint64_t seed);
// Collective (dataset_read): every rank calls it once per step. Returns the filled batch.
const batch_t *loader_load(loader_t *l, int64_t epoch, const int64_t *index, int n);
void loader_free(loader_t *l);
