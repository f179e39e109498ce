// Pictures into the model's values, (v - 127.5) / 128, optionally through a random augmentation
// drawn once per sample (every frame of a face track alike, as one session): a crop of 80-100% of
// the side at a random place, scaled back to S x S (bilinear), a horizontal flip half the time,
// and brightness (+-0.25, about 32 of 255 levels) and contrast (x 0.75..1.25 around mid grey).
// The draws come from the caller's stream (io/loader/loader.c keys it on the seed, epoch, view and
// utterance), so the same sample gets the same pictures on any number of ranks and threads.
#pragma once
#include "kernels/base/rng.h"

#include <stdint.h>

typedef struct {
    int on;               // 0: the identity (values only)
    float scale, ox, oy;  // the crop: side fraction, top-left corner in pixels
    int flip;             //
    float gain, offset;   // contrast and brightness on the values
} picture_transform_t;

// A transform drawn from g.
picture_transform_t picture_transform_draw(rng_t *g, int size);
// dst (S, S, C) values from src (S, S, C) pixels through t.
void picture_transform_apply(const picture_transform_t *t, const uint8_t *src, int size, int channels, float *dst);
