// JPEG frames through TurboJPEG (io/video/image_jpeg.h).
#include "io/video/image_jpeg.h"

#include <stdio.h>
#include <stdlib.h>
#include <turbojpeg.h>

struct jpeg_codec {
    tjhandle enc, dec;
    unsigned char *buf;  // the last compressed picture (TurboJPEG grows it as needed)
    unsigned long buf_len;
};

jpeg_codec_t *jpeg_codec_create(void) { return calloc(1, sizeof(jpeg_codec_t)); }

void jpeg_codec_free(jpeg_codec_t *c) {
    if (!c) return;
    if (c->enc) tjDestroy(c->enc);
    if (c->dec) tjDestroy(c->dec);
    tjFree(c->buf);
    free(c);
}

int jpeg_encode(jpeg_codec_t *c, const uint8_t *pixels, int size, int channels, int quality, const uint8_t **out,
                size_t *out_len, char *err, size_t cap) {
    if (!c->enc && !(c->enc = tjInitCompress())) {
        snprintf(err, cap, "cannot start a JPEG compressor (%s)", tjGetErrorStr2(NULL));
        return -1;
    }
    const int gray = channels == 1;
    unsigned long len = c->buf_len;
    if (tjCompress2(c->enc, pixels, size, 0, size, gray ? TJPF_GRAY : TJPF_RGB, &c->buf, &len,
                    gray ? TJSAMP_GRAY : TJSAMP_420, quality, TJFLAG_ACCURATEDCT) != 0) {
        snprintf(err, cap, "JPEG compression failed (%s)", tjGetErrorStr2(c->enc));
        return -1;
    }
    if (len > c->buf_len) c->buf_len = len;
    *out = c->buf;
    *out_len = len;
    return 0;
}

int jpeg_decode(jpeg_codec_t *c, const uint8_t *bytes, size_t len, int size, int channels, uint8_t *pixels, char *err,
                size_t cap) {
    if (!c->dec && !(c->dec = tjInitDecompress())) {
        snprintf(err, cap, "cannot start a JPEG decompressor (%s)", tjGetErrorStr2(NULL));
        return -1;
    }
    int w = 0, h = 0, sub = 0, space = 0;
    if (tjDecompressHeader3(c->dec, bytes, (unsigned long)len, &w, &h, &sub, &space) != 0) {
        snprintf(err, cap, "not a JPEG picture (%s)", tjGetErrorStr2(c->dec));
        return -1;
    }
    if (w != size || h != size) {
        snprintf(err, cap, "a %dx%d JPEG picture where the stream declares %dx%d", w, h, size, size);
        return -1;
    }
    // The accurate integer IDCT gives the same pixels on every machine and thread,
    // so a sample's input does not depend on where it was decoded.
    if (tjDecompress2(c->dec, bytes, (unsigned long)len, pixels, size, 0, size, channels == 1 ? TJPF_GRAY : TJPF_RGB,
                      TJFLAG_ACCURATEDCT) != 0) {
        snprintf(err, cap, "a damaged JPEG picture (%s)", tjGetErrorStr2(c->dec));
        return -1;
    }
    return 0;
}
