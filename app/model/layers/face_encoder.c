// The face encoder (app/model/layers/face_encoder.h).
#include "app/model/layers/face_encoder.h"

#include "kernels/base/spk_assert.h"

#include <math.h>
#include <stdio.h>

// A perfect square's root, or 0.
static int64_t square_root(int64_t n) {
    int64_t r = (int64_t)sqrt((double)n);
    while (r * r > n) r--;
    while ((r + 1) * (r + 1) <= n) r++;
    return r * r == n ? r : 0;
}

int face_encoder_picture_shape(int64_t values, int *size, int *channels) {
    const int64_t gray = square_root(values), rgb = values % 3 == 0 ? square_root(values / 3) : 0;
    *size = (int)(gray ? gray : rgb);
    *channels = gray ? 1 : 3;
    return *size >= FACE_MIN_SIZE ? 0 : -1;
}

void face_encoder_register(face_encoder_t *f, model_t *m, const char *prefix, int size, int cin, int width) {
    f->size = size, f->cin = cin, f->width = width;
    for (int s = FACE_STAGES - 1; s >= 0; s--)
        for (int j = FACE_BLOCKS - 1; j >= 0; j--) {
            char name[64];
            snprintf(name, sizeof name, "%s.layer%d.%d", prefix, s + 1, j);
            const int planes = width << s, in = j > 0 ? planes : s > 0 ? planes / 2 : width;
            const int stride = j == 0 && s > 0 ? 2 : 1;
            res_block_register(&f->block[s * FACE_BLOCKS + j], m, name, in, planes, stride, stride, 1);
        }
    char conv[64], bn[64];
    snprintf(conv, sizeof conv, "%s.conv1", prefix);
    snprintf(bn, sizeof bn, "%s.bn1", prefix);
    conv2d_bn_register(&f->stem, m, conv, bn, cin, width, conv2d_geom_square(3, 2));
    res_blocks_chain(&f->stem, f->block, FACE_STAGES * FACE_BLOCKS, NULL);
    f->units[f->nunits++] = &f->stem;
    for (int b = 0; b < FACE_STAGES * FACE_BLOCKS; b++)
        f->nunits += res_block_units(&f->block[b], f->units + f->nunits);
}

// Every unit's shape for n pictures, per_sample of them a sample; the last map's side and channels.
static void set_shapes(face_encoder_t *f, int n, int per_sample) {
    for (int i = 0; i < f->nunits; i++) f->units[i]->per_sample = per_sample;
    int h = f->size, w = f->size;
    conv2d_bn_shape(&f->stem, n, h, w, &h, &w);
    for (int b = 0; b < FACE_STAGES * FACE_BLOCKS; b++) res_block_shape(&f->block[b], n, &h, &w);
    f->out_side = h;
    f->out_c = res_block_out_channels(&f->block[FACE_STAGES * FACE_BLOCKS - 1]);
    SPK_ASSERT(h == w && h * w >= 2);
}

void face_encoder_reserve(face_encoder_t *f, const model_t *m, int n) {
    if (n <= f->cap_n) return;
    set_shapes(f, n, 1);
    size_t map = 0, work = 0;
    for (int i = 0; i < f->nunits; i++) {
        conv2d_bn_alloc(f->units[i], m);
        const size_t w = conv2d_bn_work_floats(f->units[i], m), o = conv2d_bn_out_size(f->units[i]);
        if (w > work) work = w;
        if (o > map) map = o;
    }
    for (int i = 0; i < 4; i++) {
        model_buf_free(m, &f->g[i]);
        f->g[i] = model_buf(m, map);
    }
    f->map_floats = map, f->work = work, f->cap_n = n;
}

size_t face_encoder_work_floats(const face_encoder_t *f) { return f->work; }

void face_encoder_release(face_encoder_t *f, const model_t *m) {
    for (int i = 0; i < f->nunits; i++) conv2d_bn_release(f->units[i], m);
    for (int i = 0; i < 4; i++) model_buf_free(m, &f->g[i]);
    f->cap_n = 0;
    f->map_floats = f->work = 0;
}

static const float *block_input(const face_encoder_t *f, int b) {
    return b == 0 ? f->stem.y : res_block_out(&f->block[b - 1]);
}

// n pictures, per_sample of them a sample's, all at once.
static void forward_pictures(face_encoder_t *f, model_t *m, const float *pictures, float *out, int n, int per_sample,
                             int train, float *work) {
    SPK_ASSERT(n <= f->cap_n);
    set_shapes(f, n, per_sample);
    conv2d_bn_forward(&f->stem, m, pictures, NULL, NULL, 1, train, work);
    for (int b = 0; b < FACE_STAGES * FACE_BLOCKS; b++)
        res_block_forward(&f->block[b], m, block_input(f, b), train, work);
    // the positions as one row of out_side^2 "frames": mean and deviation per channel
    const int side = f->out_side;
    m->be->tstp_forward(out, block_input(f, FACE_STAGES * FACE_BLOCKS), n, 1, side * side, f->out_c, FACE_POOL_EPS);
}

void face_encoder_backward(face_encoder_t *f, model_t *m, const float *g_out, const float *pictures, const float *out,
                           int B, int Tv, float *work) {
    const spk_backend_t *K = m->be;
    const int n = B * Tv;
    const int side = f->out_side, nb = FACE_STAGES * FACE_BLOCKS;
    float *go = f->g[0], *gx = f->g[1];
    K->vec_zero(go, (size_t)n * side * side * f->out_c);
    K->tstp_backward(go, g_out, block_input(f, nb), out, n, 1, side * side, f->out_c);
    for (int b = nb - 1; b >= 0; b--) {
        res_block_backward(&f->block[b], m, block_input(f, b), go, gx, f->g[2], f->g[3], work);
        model_grads_ready(m, res_block_end(&f->block[b]));
        float *t = go;
        go = gx, gx = t;
    }
    conv2d_bn_backward(&f->stem, m, NULL, 0, NULL, go, pictures, 1, f->g[2], work);
}

void face_encoder_forward(face_encoder_t *f, model_t *m, const float *pictures, float *out, int B, int Tv, int train,
                          float *work) {
    const int n = B * Tv;
    if (train || n <= f->cap_n) {
        forward_pictures(f, m, pictures, out, n, Tv, train, work);
        return;
    }
    const int64_t px = (int64_t)f->size * f->size * f->cin;
    for (int k = 0; k < n; k += f->cap_n) {
        const int c = n - k < f->cap_n ? n - k : f->cap_n;
        forward_pictures(f, m, pictures + k * px, out + k * face_encoder_dim(f), c, 1, 0, work);
    }
}

int64_t face_encoder_end(const face_encoder_t *f) { return conv2d_bn_end(&f->stem); }
