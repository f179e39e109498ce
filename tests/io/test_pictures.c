// The visual stream's pictures: JPEG frames through TurboJPEG (a gradient survives compression
// within a few levels; a damaged or mis-sized picture is refused with a reason) and picture
// augmentation (the identity transform gives the plain values exactly, a flip mirrors the
// columns exactly, brightness and contrast are the affine map they claim, the draws stay in
// their ranges and depend only on the stream).
#include "io/video/image_jpeg.h"
#include "io/video/picture_augment.h"
#include "tests/test_util.h"

#include <math.h>
#include <string.h>

enum { S = 24, C = 3, N = S * S * C };

static void gradient(uint8_t *p) {
    for (int y = 0; y < S; y++)
        for (int x = 0; x < S; x++)
            for (int c = 0; c < C; c++) p[(y * S + x) * C + c] = (uint8_t)(40 + 6 * x + 3 * y + 20 * c);
}

static void test_jpeg(void) {
    uint8_t pix[N], back[N];
    gradient(pix);
    jpeg_codec_t *codec = jpeg_codec_create();
    const uint8_t *jpg;
    size_t len;
    char err[256];
    EXPECT(jpeg_encode(codec, pix, S, C, 95, &jpg, &len, err, sizeof err) == 0, "encode: %s", err);
    uint8_t copy[4096];
    EXPECT(len < sizeof copy, "a %zu-byte JPEG of a %dx%d gradient", len, S, S);
    memcpy(copy, jpg, len);
    EXPECT(jpeg_decode(codec, copy, len, S, C, back, err, sizeof err) == 0, "decode: %s", err);
    double mad = 0;
    for (int j = 0; j < N; j++) mad += fabs((double)pix[j] - back[j]);
    mad /= N;
    EXPECT(mad < 5, "mean |difference| %.2f levels after JPEG at quality 95 (4:2:0 chroma)", mad);
    printf("JPEG %dx%dx%d at quality 95: %zu bytes (raw %d), mean |difference| %.2f levels\n", S, S, C, len, N, mad);
    EXPECT(jpeg_decode(codec, copy, len, S + 2, C, back, err, sizeof err) != 0 && strstr(err, "declares"),
           "a picture of another size is refused: '%s'", err);
    copy[len / 2] ^= 0xff, copy[len / 2 + 1] ^= 0x55;
    copy[2] = 0;  // no longer a JPEG marker
    EXPECT(jpeg_decode(codec, copy, len, S, C, back, err, sizeof err) != 0, "damaged bytes are refused");
    jpeg_codec_free(codec);
}

static void test_augment(void) {
    uint8_t pix[N];
    gradient(pix);
    float plain[N], same[N], flip[N], lit[N];
    picture_transform_t off = {0}, id = {.on = 1, .scale = 1, .gain = 1};
    picture_transform_apply(&off, pix, S, C, plain);
    picture_transform_apply(&id, pix, S, C, same);
    EXPECT(memcmp(plain, same, sizeof plain) == 0, "the identity transform gives the plain values");
    EXPECT(plain[0] == (40.0f - 127.5f) / 128.0f, "values are (v - 127.5) / 128");
    picture_transform_t f = id, g = id;
    f.flip = 1;
    picture_transform_apply(&f, pix, S, C, flip);
    int mirrored = 1;
    for (int y = 0; y < S; y++)
        for (int x = 0; x < S; x++)
            for (int c = 0; c < C; c++) mirrored &= flip[(y * S + x) * C + c] == plain[(y * S + S - 1 - x) * C + c];
    EXPECT(mirrored, "a flip mirrors the columns exactly");
    g.gain = 1.2f, g.offset = -0.1f;
    picture_transform_apply(&g, pix, S, C, lit);
    double worst = 0;
    for (int j = 0; j < N; j++) worst = fmax(worst, fabs(lit[j] - (1.2 * plain[j] - 0.1)));
    EXPECT(worst < 1e-6, "brightness and contrast: off by %g", worst);
    int in_range = 1;
    for (int k = 0; k < 1000; k++) {
        rng_t r1 = rng_init(7, RNG_PURPOSE_PICTURES, (uint64_t)k, 3),
              r2 = rng_init(7, RNG_PURPOSE_PICTURES, (uint64_t)k, 3);
        picture_transform_t a = picture_transform_draw(&r1, S), b = picture_transform_draw(&r2, S);
        in_range &= memcmp(&a, &b, sizeof a) == 0 && a.scale >= 0.8f && a.scale <= 1.0f && a.ox >= 0 &&
                    a.ox <= (1 - a.scale) * S + 1e-4f && a.gain >= 0.75f && a.gain <= 1.25f && fabsf(a.offset) <= 0.25f;
    }
    EXPECT(in_range, "1000 draws: the same stream gives the same transform, within the documented ranges");
}

int main(void) {
    test_jpeg();
    test_augment();
    return test_report("test_pictures");
}
