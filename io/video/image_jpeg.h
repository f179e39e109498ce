// JPEG frames through libjpeg-turbo's TurboJPEG API: how a dataset stores a visual stream of
// pictures (docs/dataset-format.md). A face track at 5 frames/s in JPEG is about the size of its
// 16-bit audio, where raw pixels would be tens of times larger. One codec per thread (a
// TurboJPEG handle is not shared between threads).
#pragma once
#include <stddef.h>
#include <stdint.h>

typedef struct jpeg_codec jpeg_codec_t;

jpeg_codec_t *jpeg_codec_create(void);  // NULL when out of memory
void jpeg_codec_free(jpeg_codec_t *c);

// Compresses a (size, size, channels) picture (channels 1: gray; 3: RGB, chroma subsampled
// 4:2:0) at quality 1..100. *out points into the codec's buffer, valid until its next call.
// Returns 0, or -1 with the reason in err.
int jpeg_encode(jpeg_codec_t *c, const uint8_t *pixels, int size, int channels, int quality, const uint8_t **out,
                size_t *out_len, char *err, size_t cap);
// Decompresses `len` bytes into a (size, size, channels) picture. Returns 0, or -1 when the
// bytes are not a JPEG of that shape (with the reason in err).
int jpeg_decode(jpeg_codec_t *c, const uint8_t *bytes, size_t len, int size, int channels, uint8_t *pixels, char *err,
                size_t cap);
