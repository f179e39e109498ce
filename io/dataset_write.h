// Serial writer for the feature dataset contract (docs/dataset-format.md). The file is
// written as PATH.tmp and renamed into place by dataset_writer_finish, so a reader never
// sees a half-written dataset.
#pragma once
#include <hdf5.h>
#include <stdint.h>

typedef struct {
    char path[4096];
    char tmp_path[4200];
    hid_t file;
    hid_t features;
    int64_t num_utts;      // N
    int64_t feature_dim;   // F
    int64_t fixed_frames;  // T, or 0 for variable length
    int64_t *offsets;      // (N+1,) frame offsets, filled as utterances are put
    hid_t vfeatures;       // /visual/features (rows, Fv), when a visual stream is added
    int64_t visual_dim;    // Fv, 0 without
    int64_t *voffsets;     // (N+1,)
} dataset_writer_t;

// fixed_frames > 0: /features is (N, T, F); fixed_frames == 0: (total_frames, F) + /offsets,
// where lengths[i] gives utterance i's frame count.
void dataset_writer_create(dataset_writer_t *w, const char *path, int64_t num_utts, int64_t feature_dim,
                           int64_t num_speakers, int64_t fixed_frames, const int64_t *lengths);
// Write utterance `utt` (its length as declared at create time): frames (len, F).
void dataset_writer_put(dataset_writer_t *w, int64_t utt, const float *frames);
// Adds a variable-length /visual stream at frame_rate (the audio's rate is audio_rate):
// lengths[i] visual frames for utterance i.
void dataset_writer_add_visual(dataset_writer_t *w, int64_t visual_dim, double frame_rate, double audio_rate,
                               const int64_t *lengths);
void dataset_writer_put_visual(dataset_writer_t *w, int64_t utt, const float *frames);  // (len, Fv)
// Labels (N,), optional utterance ids and speaker names (NULL to omit); closes and renames.
void dataset_writer_finish(dataset_writer_t *w, const int32_t *labels, const char *const *utt_ids,
                           const char *const *speakers, int64_t num_speakers);
