// video_frames.h in a build without FFmpeg's libraries (SPKDDP_MEDIA=OFF): no video decoding.
#include "io/video/video_frames.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int video_read_frames(const char *path, const video_spec_t *spec, video_frames_t *v, char *err, size_t cap) {
    (void)spec;
    (void)v;
    snprintf(err, cap, "%s: this spkddp was built without video decoding (SPKDDP_MEDIA=OFF)", path);
    return -1;
}

void video_frames_free(video_frames_t *v) {
    free(v->pixels);
    memset(v, 0, sizeof *v);
}
