// Decoding through FFmpeg's libraries (libavformat, libavcodec, libswresample) for what
// libsndfile does not read: m4a/AAC (how VoxCeleb2 ships), and any other container and
// codec FFmpeg knows. The first audio stream is decoded to the end, converted to
// interleaved float at its own rate (libswresample: 16-bit values v become v / 32768, as
// libsndfile gives them), and one channel is kept as io/audio/audio.h describes (io/audio/audio_decode.h).
#pragma once
#include "io/audio/audio_decode.h"

#include <stddef.h>

// Fills *a at the file's rate (a->rate = a->file_rate). Returns an audio_status; on
// AUDIO_ERR_OPEN, err holds FFmpeg's reason without the path (the caller words the sentence).
int audio_ffmpeg_read(const char *path, int channel, audio_t *a, char *err, size_t errcap);
// "FFmpeg 5.1.6 (libavformat 59.27.100, libavcodec 59.37.100)".
void audio_ffmpeg_library(char *out, size_t cap);
