// Audio decoding for feature extraction: any format libsndfile reads (WAV, FLAC, OGG/Vorbis,
// Opus, MP3, AIFF, ...), FFmpeg for the rest (m4a/AAC: io/audio/audio_ffmpeg.h), and WAV streams
// written by a command, to one channel of float samples, resampled with libsoxr when the
// file's rate differs from the rate asked for.
//
// Samples come back on libsndfile's normalised scale: 16-bit PCM value v becomes v / 32768
// (exactly), other integer widths are scaled to the same [-1, 1) range, float files are
// passed through unchanged. io/audio/fbank.h multiplies by 32768 to work on 16-bit sample values,
// as Kaldi does.
//
// Channels: `channel` >= 0 keeps that channel (0 is what Kaldi's compute-fbank-feats takes
// from a multi-channel file); AUDIO_MIX (-1) averages all channels.
//
// Resampling: libsoxr, "high quality" recipe (20-bit precision, linear phase, passband to
// 91% of the lower Nyquist), single-threaded so results do not depend on the machine's
// thread count. libsoxr was chosen over libsamplerate because it is several times faster at
// equal or better quality (its HQ recipe is sox's default `rate` effect), and it has a
// one-call API for whole signals.
#pragma once
#include "io/audio/audio_decode.h"

#include <stddef.h>
#include <stdint.h>

// Reads `path` into a->samples (malloc'ed; release with audio_free). target_rate > 0 is the
// rate wanted; the file is resampled when its own rate differs (0 keeps the file's rate).
// On failure returns a non-zero audio_status, writes one sentence to err ("PATH: ..."), and
// leaves *a empty.
int audio_read(const char *path, int target_rate, int channel, audio_t *a, char *err, size_t errcap);
// The same for the WAV stream a shell command writes to stdout (Kaldi's `cmd |`); a command
// that fails (non-zero exit) or writes nothing is an AUDIO_ERR_OPEN / AUDIO_ERR_EMPTY.
int audio_read_command(const char *cmd, int target_rate, int channel, audio_t *a, char *err, size_t errcap);
// Bounds on a command's run (prepare's --pipe-timeout and --pipe-max-mib; defaults 300 s and
// 1 GiB): a command that has not finished its output in time, or writes more, is ended with
// its whole pipeline and its entry fails (AUDIO_ERR_OPEN) with the reason.
void audio_set_command_limits(double timeout_s, size_t max_bytes);

// 1 when this build decodes and resamples audio (libsndfile, FFmpeg, libsoxr), 0 when it was
// configured without them (-DSPKDDP_MEDIA=OFF: io/audio/audio_none.c).
int audio_can_decode(void);
// The decoding and resampling libraries with their versions, or that the build has none.
void audio_libraries(char *out, size_t cap);
#define AUDIO_NO_DECODING "this spkddp was built without audio decoding (configured with -DSPKDDP_MEDIA=OFF)"
// Resamples x (n samples at in_rate) to out_rate with the same libsoxr settings as
// audio_read. On success *out is malloc'ed and *out_n set; returns 0, or -1 with err filled.
int audio_resample(const float *x, int64_t n, int in_rate, int out_rate, float **out, int64_t *out_n, char *err,
                   size_t errcap);
