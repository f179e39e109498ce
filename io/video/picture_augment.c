// Picture augmentation (io/video/picture_augment.h).
#include "io/video/picture_augment.h"

#include <math.h>

#define CROP_MIN   0.8
#define BRIGHTNESS 0.25
#define CONTRAST   0.25

static float value_of(uint8_t v) { return ((float)v - 127.5f) / 128.0f; }

picture_transform_t picture_transform_draw(rng_t *g, int size) {
    picture_transform_t t = {.on = 1};
    t.scale = (float)(CROP_MIN + (1.0 - CROP_MIN) * rng_uniform(g));
    const double room = (1.0 - t.scale) * size;
    t.ox = (float)(room * rng_uniform(g));
    t.oy = (float)(room * rng_uniform(g));
    t.flip = rng_uniform(g) < 0.5;
    t.gain = (float)(1.0 + CONTRAST * (2.0 * rng_uniform(g) - 1.0));
    t.offset = (float)(BRIGHTNESS * (2.0 * rng_uniform(g) - 1.0));
    return t;
}

// Pixel (x, y) of channel c, the coordinates clamped into the picture.
static float at(const uint8_t *src, int size, int channels, int x, int y, int c) {
    x = x < 0 ? 0 : x >= size ? size - 1 : x;
    y = y < 0 ? 0 : y >= size ? size - 1 : y;
    return value_of(src[((int64_t)y * size + x) * channels + c]);
}

void picture_transform_apply(const picture_transform_t *t, const uint8_t *src, int size, int channels, float *dst) {
    const int64_t n = (int64_t)size * size * channels;
    if (!t->on) {
        for (int64_t j = 0; j < n; j++) dst[j] = value_of(src[j]);
        return;
    }
    for (int y = 0; y < size; y++) {
        const float v = t->oy + ((float)y + 0.5f) * t->scale - 0.5f;
        const int y0 = (int)floorf(v);
        const float fy = v - (float)y0;
        for (int x = 0; x < size; x++) {
            const int xs = t->flip ? size - 1 - x : x;
            const float u = t->ox + ((float)xs + 0.5f) * t->scale - 0.5f;
            const int x0 = (int)floorf(u);
            const float fx = u - (float)x0;
            for (int c = 0; c < channels; c++) {
                const float top =
                    at(src, size, channels, x0, y0, c) * (1 - fx) + at(src, size, channels, x0 + 1, y0, c) * fx;
                const float bot =
                    at(src, size, channels, x0, y0 + 1, c) * (1 - fx) + at(src, size, channels, x0 + 1, y0 + 1, c) * fx;
                dst[((int64_t)y * size + x) * channels + c] = t->gain * (top * (1 - fy) + bot * fy) + t->offset;
            }
        }
    }
}
