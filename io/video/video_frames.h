// Frames of a video file at a fixed rate, as a face encoder takes them: libavformat opens any
// container FFmpeg knows (mp4 as VoxCeleb2, LRS3 and AVSpeech ship), libavcodec decodes the
// first video stream, and libswscale crops the centre square and scales it to size x size, in
// gray or RGB. Frame k shows what the video shows at time k / fps (the last decoded picture whose
// presentation time is not after it), so a stream of any rate, constant or variable, lands on
// the dataset's clock, whose origin is the container's (the earliest stream's first presentation
// time, so a video that starts after its audio keeps its place); the count is the video's
// duration times fps, rounded down, or max_frames. Scaling is bit-exact (the same pixels on any
// CPU).
#pragma once
#include <stddef.h>
#include <stdint.h>

typedef struct {
    double fps;          // frames per second wanted
    int size;            // the square frames' side in pixels
    int channels;        // 1 (gray) or 3 (RGB)
    double timeout;      // seconds one file may take (a stalled network mount is a bad entry, not a hang)
    int64_t max_frames;  // frames wanted at most (decoding stops there; 0: the whole video)
} video_spec_t;

typedef struct {
    uint8_t *pixels;    // (n, size, size, channels), row-major, interleaved channels
    int64_t n, cap;     // frames held, frames allocated
    double duration;    // seconds of video the stream covers
    int width, height;  // the source's picture size
} video_frames_t;

// Decodes `path` into v (reusing its buffer). Returns 0, or -1 with one sentence in err naming
// the file and the reason (no video stream, undecodable, no frame at this rate, time out).
int video_read_frames(const char *path, const video_spec_t *spec, video_frames_t *v, char *err, size_t cap);
void video_frames_free(video_frames_t *v);
