// Residual blocks of conv2d_bn units (app/model/layers/res_block.h).
#include "app/model/layers/res_block.h"

#include "kernels/base/spk_assert.h"

#include <stdio.h>

// Registered in reverse execution order: the last unit (its BatchNorm's gradient is the first
// the backward finishes), the shortcut, then the others down to the first.
void res_block_register(res_block_t *b, model_t *m, const char *prefix, int in, int planes, int sh, int sw,
                        int expansion) {
    char conv[64], bn[64];
    b->n = expansion == 1 ? 2 : 3;
    const int out = planes * expansion;
    // BasicBlock: 3x3 (stride) then 3x3; Bottleneck: 1x1, 3x3 (stride), 1x1 to 4 planes
    const int k[3] = {expansion == 1 ? 3 : 1, 3, 1}, strided = expansion == 1 ? 0 : 1;
    const int cin[3] = {in, planes, planes}, cout[3] = {planes, b->n == 2 ? out : planes, out};
    for (int i = b->n - 1; i >= 0; i--) {
        snprintf(conv, sizeof conv, "%s.conv%d", prefix, i + 1);
        snprintf(bn, sizeof bn, "%s.bn%d", prefix, i + 1);
        conv2d_geom_t g = conv2d_geom_square(k[i], 1);
        if (i == strided) g.sh = sh, g.sw = sw;
        conv2d_bn_register(&b->u[i], m, conv, bn, cin[i], cout[i], g);
        if (i == b->n - 1) {
            b->has_sc = sh != 1 || sw != 1 || in != out;
            if (!b->has_sc) continue;
            snprintf(conv, sizeof conv, "%s.shortcut.0", prefix);
            snprintf(bn, sizeof bn, "%s.shortcut.1", prefix);
            conv2d_geom_t s = conv2d_geom_square(1, 1);
            s.sh = sh, s.sw = sw;
            conv2d_bn_register(&b->sc, m, conv, bn, in, out, s);
            b->sc.xh_of = &b->u[0];  // (its input is the first unit's)
            b->sc.out_bf16 = 1;      // bf16 training: its one reader takes it as a bf16 residual
        }
    }
    // bf16 training: the gradients between the main path's units pass in bf16
    for (int i = 0; i < b->n; i++) {
        b->u[i].dy_bf16 = i < b->n - 1;  // its output's one reader is the next unit's convolution
        b->u[i].dx_bf16 = i > 0;         // its input's one reader is the unit before's BatchNorm2d
    }
}

void res_block_shape(res_block_t *b, int B, int *H, int *W) {
    int h = *H, w = *W;
    if (b->has_sc) conv2d_bn_shape(&b->sc, B, *H, *W, &h, &w);
    for (int k = 0; k < b->n; k++) conv2d_bn_shape(&b->u[k], B, *H, *W, H, W);
    SPK_ASSERT(!b->has_sc || (h == *H && w == *W));
}

int res_block_units(res_block_t *b, conv2d_bn_t **units) {
    int n = 0;
    for (int k = 0; k < b->n; k++) units[n++] = &b->u[k];
    if (b->has_sc) units[n++] = &b->sc;
    return n;
}

// Every output with a next unit has no other reader in bf16 training: a block reads its input as
// its first unit's rounded input (res_block_forward), and `after` reads only its own.
void res_blocks_chain(conv2d_bn_t *before, res_block_t *b, int count, conv2d_bn_t *after) {
    SPK_ASSERT(count > 0);
    before->next = &b[0].u[0];
    before->only_next = 1;
    for (int i = 0; i < count; i++) {
        for (int k = 0; k < b[i].n - 1; k++) b[i].u[k].next = &b[i].u[k + 1], b[i].u[k].only_next = 1;
        conv2d_bn_t *last = &b[i].u[b[i].n - 1];
        last->next = i + 1 < count ? &b[i + 1].u[0] : after;
        last->only_next = last->next != NULL;
    }
}

const float *res_block_out(const res_block_t *b) { return b->u[b->n - 1].y; }
int res_block_out_channels(const res_block_t *b) { return b->u[b->n - 1].cout; }

// bf16 training adds the residual in bf16, as PyTorch AMP's blocks do: the block's input as its
// first unit rounded it, or the shortcut's output, which it keeps in bf16 alone (out_bf16).
void res_block_forward(res_block_t *b, model_t *m, const float *in, int train, float *work) {
    for (int k = 0; k < b->n - 1; k++)
        conv2d_bn_forward(&b->u[k], m, k ? b->u[k - 1].y : in, NULL, NULL, 1, train, work);
    if (b->has_sc) conv2d_bn_forward(&b->sc, m, in, NULL, NULL, 0, train, work);
    const float *res = b->has_sc ? b->sc.y : in;
    const spk_bf16 *res_h = !train || !model_writes_bf16(m) ? NULL : b->has_sc ? (const spk_bf16 *)b->sc.y : b->u[0].xh;
    conv2d_bn_forward(&b->u[b->n - 1], m, b->u[b->n - 2].y, res_h ? NULL : res, res_h, 1, train, work);
}

// (bf16 training: go holds the inner units' gradients in bf16, conv2d_bn_t.dy_bf16.)
void res_block_backward(res_block_t *b, model_t *m, const float *in, float *go, float *gx, float *ga, float *gres,
                        float *work) {
    const int n = b->n;
    if (!b->has_sc) gres = gx;  // the identity shortcut's gradient is the input's first term
    conv2d_bn_backward(&b->u[n - 1], m, go, 0, gres, go, b->u[n - 2].y, 1, ga, work);
    if (b->has_sc) conv2d_bn_backward(&b->sc, m, gx, 0, NULL, gres, in, 0, ga, work);
    for (int k = n - 2; k >= 0; k--)
        conv2d_bn_backward(&b->u[k], m, k ? go : gx, k ? 0 : 1, NULL, go, k ? b->u[k - 1].y : in, 1, ga, work);
}

int64_t res_block_end(const res_block_t *b) { return conv2d_bn_end(&b->u[0]); }

void res_blocks_zero_residual(const res_block_t *b, int count, model_t *m) {
    for (int i = 0; i < count; i++) {
        const conv2d_bn_t *last = &b[i].u[b[i].n - 1];
        for (int c = 0; c < last->cout; c++) m->host_params[last->bn_w + c] = 0.0f;
    }
    m->residual_zeroed = 1;
}
