// `spkddp prepare`'s pipeline: a Kaldi data directory (wav.scp, optional segments, utt2spk) ->
// a dataset of log mel filterbanks or of waveforms (docs/features.md,
// docs/dataset-format.md), or an augmentation bank (docs/augmentation.md), computed by every
// rank in parallel with memory bounded by buffer_mb. The steps are listed atop
// app/prepare/prepare.c; app/cli/cmd_prepare.c parses the flags into prepare_config_t.
#pragma once
#include "app/dist/comm.h"

#include <stdint.h>

#define PREPARE_TEXT_MAX 512  // the text fields below (the option table's longest value)

typedef struct {
    char wav_scp[PREPARE_TEXT_MAX];   // 'ID PATH' or 'ID COMMAND |' per line
    char segments[PREPARE_TEXT_MAX];  // optional: 'UTTERANCE-ID RECORDING-ID START END' per line
    char utt2spk[PREPARE_TEXT_MAX];   // 'UTTERANCE-ID SPEAKER-ID' per line
    char spk2id[PREPARE_TEXT_MAX];    // optional: 'SPEAKER-ID INDEX' per line
    char out[PREPARE_TEXT_MAX];       // the dataset, written as OUT.tmp then renamed
    char store[PREPARE_TEXT_MAX];     // fbank | audio
    char kind[PREPARE_TEXT_MAX];      // speech | noise | rir
    int64_t num_bins, sample_rate, channel, seed, buffer_mb;
    double dither, progress;              // dither in 16-bit sample units; seconds between progress lines
    double pipe_timeout;                  // seconds a 'COMMAND |' entry may take (then it is a bad entry)
    int64_t pipe_max_mib;                 // the most a 'COMMAND |' entry may write
    int skip_bad;                         // leave unreadable entries out (listed in OUT.bad)
    char video_scp[PREPARE_TEXT_MAX];     // optional: 'UTTERANCE-ID PATH' per line: the /visual stream's videos
    char visual_scp[PREPARE_TEXT_MAX];    // or its per-frame feature matrices (npy, Kaldi 'ark:OFFSET')
    char visual_color[PREPARE_TEXT_MAX];  // gray | rgb
    double visual_fps;                    // frames per second stored (the audio's 100 a multiple of it)
    int64_t visual_size, visual_quality;  // square frames' side; JPEG quality 1..100
} prepare_config_t;

// Collective. Stops every rank with one line (and the exit code of docs/features.md) on a bad
// list, an unreadable entry without skip_bad, or a failed write; returns SPK_EXIT_OK.
int prepare_run(const comm_t *comm, const prepare_config_t *cfg);
