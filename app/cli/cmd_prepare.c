// `spkddp prepare`: the flags into a prepare_config_t, checked, and the pipeline of
// app/prepare/prepare.h run with them.
#include "app/cli/commands.h"
#include "app/cli/options.h"
#include "app/prepare/prepare.h"
#include "io/common/out_paths.h"
#include "kernels/base/check.h"

#include <math.h>
#include <stddef.h>
#include <string.h>

_Static_assert(PREPARE_TEXT_MAX == OPT_STR_MAX, "prepare's text fields hold what the option table takes");

static const opt_t opts[] = {
    OPT_TEXT(prepare_config_t, wav_scp, "wav-scp", OPT_OPTIONAL,
             "Kaldi wav.scp: 'ID PATH' or 'ID COMMAND |' (stdout a WAV stream) per line"),
    OPT_TEXT(prepare_config_t, segments, "segments", OPT_OPTIONAL,
             "Kaldi segments: 'UTTERANCE-ID RECORDING-ID START END' (seconds) per line"),
    OPT_TEXT(prepare_config_t, utt2spk, "utt2spk", OPT_OPTIONAL, "Kaldi utt2spk: 'UTTERANCE-ID SPEAKER-ID' per line"),
    OPT_TEXT(prepare_config_t, out, "out", OPT_OPTIONAL, "output dataset (HDF5, written as OUT.tmp then renamed)"),
    OPT_CHOICE(
        prepare_config_t, store, "store", "fbank|audio",
        "fbank: log mel filterbanks (default); audio: int16 waveforms, fbank computed when training (banks: always)"),
    OPT_INTEGER(prepare_config_t, num_bins, "num-mel-bins", 3, 1024, "mel filterbank bins = feature_dim (default 80)"),
    OPT_TEXT(prepare_config_t, spk2id, "spk2id", OPT_OPTIONAL,
             "'SPEAKER-ID INDEX' per line, indices 0..S-1 (default: sorted speaker names)"),
    OPT_INTEGER(prepare_config_t, sample_rate, "sample-rate", 1000, 384000,
                "resample audio to this rate (default 16000)"),
    OPT_INTEGER(prepare_config_t, channel, "channel", -1, 1023,
                "channel of multi-channel files (default 0, as Kaldi; -1 averages)"),
    OPT_NUMBER(prepare_config_t, dither, "dither", 0, 1e6,
               "Gaussian dither in 16-bit sample units (default 0; Kaldi's is 1)"),
    OPT_INTEGER(prepare_config_t, seed, "seed", 0, 9e15, "dither seed (noise is keyed on seed and utterance index)"),
    OPT_SWITCH(prepare_config_t, skip_bad, "skip-bad",
               "leave unreadable entries out (listed in OUT.bad) instead of failing"),
    OPT_NUMBER(
        prepare_config_t, pipe_timeout, "pipe-timeout", 0.001, 1e7,
        "seconds a 'COMMAND |' entry may run, or a video take to decode, before it is a bad entry (default 300)"),
    OPT_INTEGER(prepare_config_t, pipe_max_mib, "pipe-max-mib", 1, 1 << 20,
                "MiB a 'COMMAND |' entry may write before it is ended as a bad entry (default 1024)"),
    OPT_INTEGER(prepare_config_t, buffer_mb, "buffer-mb", 1, 1 << 20,
                "rows a rank holds before a collective write, MiB (default 64)"),
    OPT_NUMBER(prepare_config_t, progress, "progress", 0, 1e6, "seconds between progress lines (default 10; 0: none)"),
    OPT_TEXT(prepare_config_t, video_scp, "video-scp", OPT_OPTIONAL,
             "'UTTERANCE-ID PATH' per line: each utterance's video (mp4, or any container FFmpeg reads), stored as "
             "the /visual stream of JPEG frames"),
    OPT_TEXT(prepare_config_t, visual_scp, "visual-scp", OPT_OPTIONAL,
             "or 'UTTERANCE-ID MATRIX' per line: each utterance's own per-frame visual features (a .npy float array "
             "frames x values, or a Kaldi matrix 'archive.ark:OFFSET' as feats.scp lists them), at --visual-fps, "
             "stored as the /visual stream of feature vectors"),
    OPT_NUMBER(prepare_config_t, visual_fps, "visual-fps", 0.01, 100,
               "video frames per second stored (default 5; 100 must be a multiple of it)"),
    OPT_INTEGER(prepare_config_t, visual_size, "visual-size", 8, 1024,
                "side of the square frames: the centre square of the picture, scaled (default 112)"),
    OPT_CHOICE(prepare_config_t, visual_color, "visual-color", "rgb|gray", "frames in colour (default) or gray"),
    OPT_INTEGER(prepare_config_t, visual_quality, "visual-quality", 1, 100, "JPEG quality of the frames (default 90)"),
    OPT_CHOICE(
        prepare_config_t, kind, "kind", "speech|noise|rir",
        "speech: a training/test set (default); noise, rir: an augmentation bank of waveforms (utt2spk gives each "
        "entry's category; docs/augmentation.md)"),
};
static const opt_table_t table = OPT_TABLE(
    "prepare", "Compute log mel filterbanks (or keep waveforms) of a Kaldi data directory into a dataset.", opts);

int cmd_prepare(const comm_t *comm, int argc, char **argv) {
    prepare_config_t o = {.num_bins = 80,
                          .sample_rate = 16000,
                          .channel = 0,
                          .buffer_mb = 64,
                          .progress = 10,
                          .pipe_timeout = 300,
                          .pipe_max_mib = 1024,
                          .visual_fps = 5,
                          .visual_size = 112,
                          .visual_quality = 90};
    strcpy(o.kind, "speech");
    strcpy(o.visual_color, "rgb");
    opt_parse(&table, &o, argc, argv, NULL, 0);
    const int bank = strcmp(o.kind, "speech") != 0;
    if (bank && strcmp(o.store, "fbank") == 0)
        spk_fail_all(SPK_EXIT_USAGE, "prepare: --kind %s keeps waveforms; leave out --store fbank", o.kind);
    if (!o.store[0]) strcpy(o.store, bank ? "audio" : "fbank");
    if (!o.wav_scp[0]) spk_fail_all(SPK_EXIT_USAGE, "prepare: --wav-scp is required");
    if (!o.utt2spk[0]) spk_fail_all(SPK_EXIT_USAGE, "prepare: --utt2spk is required");
    if (!o.out[0]) spk_fail_all(SPK_EXIT_USAGE, "prepare: --out is required");
    const path_arg_t ins[] = {{"--wav-scp", o.wav_scp}, {"--segments", o.segments},   {"--utt2spk", o.utt2spk},
                              {"--spk2id", o.spk2id},   {"--video-scp", o.video_scp}, {"--visual-scp", o.visual_scp}};
    out_paths_check("prepare", (const path_arg_t[]){{"--out", o.out}}, 1, ins, 6);
    if (strcmp(o.store, "audio") == 0 && o.dither > 0)
        spk_fail_all(SPK_EXIT_USAGE, "prepare: --dither applies to --store fbank only");
    if (o.video_scp[0] && o.visual_scp[0])
        spk_fail_all(SPK_EXIT_USAGE, "prepare: give --video-scp or --visual-scp, not both (one visual stream)");
    if (o.video_scp[0] || o.visual_scp[0]) {
        const double ratio = 100.0 / o.visual_fps;  // audio frames (10 ms) per video frame
        if (fabs(ratio - nearbyint(ratio)) > 1e-9)
            spk_fail_all(SPK_EXIT_USAGE,
                         "prepare: --visual-fps %g does not divide the audio's 100 frames/s (5, 10, 12.5, 20, 25 do)",
                         o.visual_fps);
        if (bank)
            spk_fail_all(SPK_EXIT_USAGE, "prepare: a visual stream makes a training or test set, not a --kind %s bank",
                         o.kind);
        if (o.segments[0])
            spk_fail_all(SPK_EXIT_USAGE,
                         "prepare: a visual stream with --segments is not supported: give each utterance its own video "
                         "or matrix "
                         "(cut with ffmpeg -ss START -to END)");
    }
    return prepare_run(comm, &o);
}
