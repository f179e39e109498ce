// Synthetic datasets, deterministic from a seed (every draw keyed on (seed, item) through
// kernels/base/rng.h). See docs/dataset-format.md for the generative model of `speakers`.
#pragma once
#include <stdint.h>

typedef struct {
    uint64_t seed;
    // toy: the seed job's data -- N gaussian vectors of dimension F, labels uniform in
    // [0, classes). separation > 0 shifts each class mean so the task becomes learnable.
    int64_t toy_samples;    // 128
    int64_t toy_dim;        // 64
    int64_t toy_classes;    // 2
    double toy_separation;  // 0 = pure noise as in the seed job
    // speakers: S speakers, variable-length utterances of F-dim frames.
    int64_t speakers;              // S
    int64_t first_speaker;         // voices first..first+S-1: disjoint ranges give unseen speakers
    int64_t utts_per_speaker;      // training utterances per speaker
    int64_t val_utts_per_speaker;  // held-out utterances per speaker (same speakers)
    int64_t dim;                   // F
    int64_t min_frames, max_frames;
    int64_t visual_dim;  // > 0: also a /visual stream at 25 frames/s carrying the speaker's lips
    int spectral;        // frames with a spectrum's structure: phones, voices and their variation smooth
                         // along the feature axis, each voice reading them at its own frequency scale
} synth_config_t;

synth_config_t synth_defaults(void);
void synth_write_toy(const synth_config_t *c, const char *path);
// Writes the training set to `path` and, when val_path is not NULL, the held-out
// utterances of the same speakers (same label space) to `val_path`.
void synth_write_speakers(const synth_config_t *c, const char *path, const char *val_path);
