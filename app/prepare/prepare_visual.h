// The visual stream of `spkddp prepare --video-scp`: each utterance's video decoded at
// --visual-fps, cropped and scaled to --visual-size (gray or RGB), JPEG-compressed, and stored
// as the dataset's /visual stream of pictures (docs/dataset-format.md), aligned to the audio on
// the dataset's clock. The scan decodes each video once and spools its compressed frames to an
// unlinked file beside the output (memory stays bounded; nothing is left behind on any exit);
// the write copies the spool into /visual/jpeg in collective rounds. With --visual-scp the list
// names per-frame feature matrices instead (io/dataset/matrix_file.h), stored as /visual/features.
#pragma once
#include "app/dist/comm.h"
#include "io/audio/kaldi_data.h"
#include "io/dataset/dataset_write.h"

#include <stddef.h>
#include <stdint.h>

typedef struct prepare_visual prepare_visual_t;

// Rank 0: --video-scp or --visual-scp ('UTTERANCE-ID PATH' per line) matched to the utterances of d: video[i]
// is utterance i's file (pointing into *list). Returns 0, or -1 with the verdict filled (a bad
// line, an utterance without a video).
int prepare_visual_match(const char *video_scp, const kaldi_data_t *d, kaldi_list_t *list, const char ***video,
                         kaldi_verdict_t *v);

typedef struct {
    const char *out;  // the dataset (the spool goes beside it)
    double fps;       // frames per second stored; audio_rate / fps is an integer
    double audio_rate;
    int size, channels, quality;  // square frames' side, 1 (gray) or 3 (RGB), JPEG quality
    double timeout;               // seconds one video may take to decode
    int features;                 // the list names feature matrices (--visual-scp), not videos
} prepare_visual_opts_t;

prepare_visual_t *prepare_visual_create(const prepare_visual_opts_t *o);
void prepare_visual_free(prepare_visual_t *v);

// Collective, feature matrices only: rank 0 reads the list's first matrices (specs, n) until one
// reads, and its width is the one every utterance must have.
void prepare_visual_agree_width(prepare_visual_t *v, const comm_t *comm, const char *const *specs, int64_t n);

// Decodes one utterance's video and spools the frames its audio_frames need (audio_frames /
// ratio, at least 1; a video a little shorter than its audio repeats its last frame). Returns
// 0 with the frames and bytes spooled, or -1 with one sentence in err (the file and reason).
int prepare_visual_scan(prepare_visual_t *v, const char *path, int64_t audio_frames, int64_t *frames, int64_t *bytes,
                        char *err, size_t cap);

// Collective. Adds /visual to w (kept[i]: utterance i is written; frames and bytes over all
// utterances) and copies this rank's spool into it, buffer_bytes at a time; first: this rank's
// first kept utterance (or N).
void prepare_visual_write(prepare_visual_t *v, dataset_writer_t *w, const comm_t *comm, const int64_t *frames,
                          const int64_t *bytes, const int64_t *rows, int64_t n, int64_t first, int64_t buffer_bytes);
