// Audio decoding for feature extraction: any format libsndfile reads (WAV, FLAC, OGG/Vorbis,
// Opus, MP3, AIFF, ...), FFmpeg for the rest (m4a/AAC: io/audio_ffmpeg.h), and WAV streams
// written by a command, to one channel of float samples, resampled with libsoxr when the
// file's rate differs from the rate asked for.
//
// Samples come back on libsndfile's normalised scale: 16-bit PCM value v becomes v / 32768
// (exactly), other integer widths are scaled to the same [-1, 1) range, float files are
// passed through unchanged. io/fbank.h multiplies by 32768 to work on 16-bit sample values,
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
#include <stddef.h>
#include <stdint.h>

#define AUDIO_MIX (-1)

typedef struct {
    float *samples;  // (n,) mono, at `rate`
    int64_t n;
    int rate;             // sample rate of `samples` (the rate asked for)
    int file_rate;        // sample rate stored in the file
    int channels;         // channels in the file
    int64_t file_frames;  // sample frames decoded from the file (before resampling)
} audio_t;

// Return codes of audio_read; the message written to `err` always names the file.
enum audio_status {
    AUDIO_OK = 0,
    AUDIO_ERR_OPEN = 1,      // missing, unreadable, or not a format libsndfile knows
    AUDIO_ERR_EMPTY = 2,     // a 0-byte file, or a valid header with no samples
    AUDIO_ERR_READ = 3,      // decoding failed part-way
    AUDIO_ERR_CHANNEL = 4,   // asked for a channel the file does not have
    AUDIO_ERR_SAMPLES = 5,   // NaN or Inf samples (float files)
    AUDIO_ERR_RESAMPLE = 6,  // libsoxr failed
    AUDIO_ERR_MEMORY = 7,
    AUDIO_ERR_ARG = 8,  // target_rate negative
};

// Reads `path` into a->samples (malloc'ed; release with audio_free). target_rate > 0 is the
// rate wanted; the file is resampled when its own rate differs (0 keeps the file's rate).
// On failure returns a non-zero audio_status, writes one sentence to err ("PATH: ..."), and
// leaves *a empty.
int audio_read(const char *path, int target_rate, int channel, audio_t *a, char *err, size_t errcap);
// The same for the WAV stream a shell command writes to stdout (Kaldi's `cmd |`); a command
// that fails (non-zero exit) or writes nothing is an AUDIO_ERR_OPEN / AUDIO_ERR_EMPTY.
int audio_read_command(const char *cmd, int target_rate, int channel, audio_t *a, char *err, size_t errcap);
void audio_free(audio_t *a);
// The number of samples audio_read gives at out_rate for n samples at in_rate (libsoxr's
// one-shot output length).
int64_t audio_resampled_length(int64_t n, int in_rate, int out_rate);
// frames of `channels` interleaved values -> one channel (or the average, AUDIO_MIX) into
// mono. Returns -1, or the first frame whose value is NaN or Inf.
int64_t audio_take_channel(const float *inter, int64_t frames, int channels, int channel, float *mono);
// Writes one sentence to err and returns code (the decoders' shared failure path).
int audio_fail(char *err, size_t cap, int code, const char *fmt, ...) __attribute__((format(printf, 4, 5)));

// Resamples x (n samples at in_rate) to out_rate with the same libsoxr settings as
// audio_read. On success *out is malloc'ed and *out_n set; returns 0, or -1 with err filled.
int audio_resample(const float *x, int64_t n, int in_rate, int out_rate, float **out, int64_t *out_n, char *err,
                   size_t errcap);
