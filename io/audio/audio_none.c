// io/audio.h in a build without audio decoding (configured with -DSPKDDP_MEDIA=OFF: no
// libsndfile, FFmpeg or libsoxr, as in the GPU bundle, tools/gpu_bundle.sh). Datasets of
// features, and of waveforms already stored by `prepare --store audio`, train as usual; what
// would decode or resample audio fails with a sentence naming the file.
#include "io/audio/audio.h"

#include <stdio.h>
#include <string.h>

#define NO_MEDIA AUDIO_NO_DECODING

int audio_can_decode(void) { return 0; }

void audio_libraries(char *out, size_t cap) { snprintf(out, cap, "none (built without SPKDDP_MEDIA)"); }

int audio_read(const char *path, int target_rate, int channel, audio_t *a, char *err, size_t errcap) {
    (void)target_rate, (void)channel;
    memset(a, 0, sizeof *a);
    return audio_fail(err, errcap, AUDIO_ERR_OPEN, "%s: cannot decode it: " NO_MEDIA, path);
}

int audio_read_command(const char *cmd, int target_rate, int channel, audio_t *a, char *err, size_t errcap) {
    (void)target_rate, (void)channel;
    memset(a, 0, sizeof *a);
    return audio_fail(err, errcap, AUDIO_ERR_OPEN, "'%s |': cannot decode its output: " NO_MEDIA, cmd);
}

void audio_set_command_limits(double timeout_s, size_t max_bytes) { (void)timeout_s, (void)max_bytes; }

int audio_resample(const float *x, int64_t n, int in_rate, int out_rate, float **out, int64_t *out_n, char *err,
                   size_t errcap) {
    (void)x, (void)n;
    *out = NULL;
    *out_n = 0;
    return audio_fail(err, errcap, -1, "cannot resample %d Hz -> %d Hz: " NO_MEDIA, in_rate, out_rate);
}
