// What the loader hands a model, and what a model asks of the loader: plain structs of host
// memory, so that models include this and not the loader itself (HDF5, MPI, threads;
// io/loader/loader.h).
#pragma once
#include <stdint.h>

typedef struct {
    int n;                // samples
    int64_t feature_dim;  // F
    int64_t *frame_off;   // (n+1,) sample i is frames [frame_off[i], frame_off[i+1])
    float *x;             // (frame_off[n], F) time-major, as stored
    int64_t visual_dim;   // Fv, 0 without the visual stream
    int64_t *vframe_off;  // (n+1,) visual frames of sample i
    float *vx;            // (vframe_off[n], Fv)
    int32_t *labels;      // (n,)
    int64_t *index;       // (n,) dataset indices
} batch_t;

// What a model wants from the loader.
typedef struct {
    int64_t crop;        // frames per sample, 0 = whole utterances
    int64_t min_frames;  // shorter samples are repeated to this length (convolution padding)
    int cmn;             // subtract each sample's mean frame
    int visual;          // also load the visual stream
} loader_spec_t;
