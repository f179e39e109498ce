// What every decoder shares (the libsndfile path of io/audio/audio.c, io/audio/audio_ffmpeg.c,
// and io/audio/audio_none.c in a build without them): the audio_t they fill and its release,
// the status codes, the failure path, the choice of channel and the resampled length. It sits
// below both decoders and below the front door (io/audio/audio.h) that dispatches to them, so
// no decoder calls back into the file that calls it.
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

// frames of `channels` interleaved values -> one channel (or the average, AUDIO_MIX) into
// mono. Returns -1, or the first frame whose value is NaN, Inf or beyond AUDIO_MAX_SAMPLE:
// 60 dB over full scale, where float files hold garbage, not sound (squared in the
// filterbank, 1e30 would be an Inf feature).
#define AUDIO_MAX_SAMPLE 1000.0f
#define AUDIO_BAD_SAMPLE "is NaN, Inf or over 60 dB above full scale"
int64_t audio_take_channel(const float *inter, int64_t frames, int channels, int channel, float *mono);
// Writes one sentence to err and returns code (the decoders' shared failure path).
int audio_fail(char *err, size_t cap, int code, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
void audio_free(audio_t *a);
// The number of samples audio_read gives at out_rate for n samples at in_rate (libsoxr's
// one-shot output length).
int64_t audio_resampled_length(int64_t n, int in_rate, int out_rate);
