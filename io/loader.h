// Turns the sampler's sample indices into a batch of frames: whole utterances, or random
// crops of a fixed length. A crop's offset is drawn from (seed, epoch, sample index) only,
// never from the rank, so a sample gets the same crop on any world size. Utterances shorter
// than the crop (or than min_frames) are repeated to length. Optional per-sample mean
// normalisation (CMN). With the visual stream, the visual crop covers exactly the audio
// crop's time span (audio crops start and end on visual frame boundaries).
#pragma once
#include "io/dataset.h"

#include <stdint.h>

typedef struct {
    int n;                 // samples
    int64_t feature_dim;   // F
    int64_t *frame_off;    // (n+1,) sample i is frames [frame_off[i], frame_off[i+1])
    float *x;              // (frame_off[n], F) time-major, as stored
    int64_t visual_dim;    // Fv, 0 without the visual stream
    int64_t *vframe_off;   // (n+1,) visual frames of sample i
    float *vx;             // (vframe_off[n], Fv)
    int32_t *labels;       // (n,)
    int64_t *index;        // (n,) dataset indices
} batch_t;

// What a model wants from the loader.
typedef struct {
    int64_t crop;        // frames per sample, 0 = whole utterances
    int64_t min_frames;  // shorter samples are repeated to this length (convolution padding)
    int cmn;             // subtract each sample's mean frame
    int visual;          // also load the visual stream
} loader_spec_t;

typedef struct {
    dataset_t *ds;
    loader_spec_t spec;
    uint64_t seed;
    int max_batch;
    batch_t batch;
    segment_t *segs, *vsegs;  // (max_batch,)
    float *raw, *vraw;        // staging before repetition
    int64_t raw_cap, vraw_cap, x_cap, vx_cap;
    double *mean;             // (max(F, Fv),) CMN accumulator
} loader_t;

void loader_init(loader_t *l, dataset_t *ds, int max_batch, const loader_spec_t *spec, uint64_t seed);
// Collective (dataset_read): every rank calls it once per step. Returns the filled batch.
const batch_t *loader_load(loader_t *l, int64_t epoch, const int64_t *index, int n);
void loader_free(loader_t *l);
