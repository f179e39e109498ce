// The double-precision adjoint of the reference 2-D convolution (conv2d_forward_reference), and
// the shapes every backend is checked on, shared by the float32 and bf16 convolution tests.
#pragma once
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "kernels/backend.h"
#include "kernels/conv2d.h"
#include "test_common.h"

// The adjoint of the direct reference in double: dx, dw, db for the output gradient dy.
static void conv2d_backward_reference(double *dx, double *dw, double *db, const float *dy, const float *x,
                                      const float *w, const conv2d_shape_t *s) {
    const int OH = conv2d_out_h(s), OW = conv2d_out_w(s);
    for (int b = 0; b < s->B; b++)
        for (int i = 0; i < OH; i++)
            for (int j = 0; j < OW; j++)
                for (int o = 0; o < s->Cout; o++) {
                    const double g = dy[(((size_t)b * OH + i) * OW + j) * s->Cout + o];
                    db[o] += g;
                    for (int r = 0; r < s->KH; r++)
                        for (int q = 0; q < s->KW; q++) {
                            const int u = i * s->SH - s->PH + r * s->DH, v = j * s->SW - s->PW + q * s->DW;
                            if (u < 0 || u >= s->H || v < 0 || v >= s->W) continue;
                            for (int c = 0; c < s->Cin; c++) {
                                const size_t xi = (((size_t)b * s->H + u) * s->W + v) * s->Cin + c;
                                const size_t wi = (((size_t)o * s->Cin + c) * s->KH + r) * s->KW + q;
                                dw[wi] += g * x[xi];
                                dx[xi] += g * w[wi];
                            }
                        }
                }
}

static conv2d_shape_t conv2d_shape(int B, int Cin, int Cout, int H, int W, int KH, int KW, int SH, int SW, int PH,
                                   int PW, int DH, int DW) {
    return (conv2d_shape_t){B, Cin, Cout, H, W, KH, KW, SH, SW, PH, PW, DH, DW};
}

// B, Cin, Cout, H, W, KH, KW, SH, SW, PH, PW, DH, DW, bias: the shapes each backend runs
// against the CPU kernels.
static const int conv2d_backend_shapes[][14] = {
    {3, 5, 7, 9, 11, 3, 3, 1, 1, 1, 1, 1, 1, 1},     // 3x3, bias
    {2, 16, 32, 10, 12, 3, 3, 2, 2, 1, 1, 1, 1, 0},  // a ResNet stage's first conv
    {2, 16, 32, 10, 12, 1, 1, 2, 2, 0, 0, 1, 1, 0},  // its shortcut
    {2, 4, 8, 12, 7, 3, 3, 2, 1, 1, 1, 1, 1, 0},     // stride (2, 1)
    {1, 1, 8, 20, 16, 3, 3, 1, 1, 1, 1, 1, 1, 0},    // the first layer: one input channel
    {2, 3, 4, 9, 9, 3, 5, 1, 2, 2, 1, 2, 1, 1},      // dilation, rectangular kernel
};

// The shape of a row of conv2d_backend_shapes.
static conv2d_shape_t conv2d_shape_of(const int *a) {
    conv2d_shape_t s;
    memcpy(&s, a, sizeof s);
    return s;
}

// A case's name: its sizes, kernel, stride, and whether it has a bias.
static void conv2d_tag(char *out, size_t cap, const conv2d_shape_t *s, int with_bias) {
    snprintf(out, cap, "B%d %dx%d C%d->%d k%dx%d s%d,%d%s", s->B, s->H, s->W, s->Cin, s->Cout, s->KH, s->KW, s->SH,
             s->SW, with_bias ? " bias" : "");
}

// A backward on a backend (a backward_fn's context, tests/kernels/test_common.h): the float32
// convolution on x and w, or with bf16 set the bf16 one on their rounded copies xh and wh; dx
// accumulated (the backends are checked on the accumulating form; the CPU tests cover both).
typedef struct {
    const spk_backend_t *be;
    int bf16;
    const conv2d_shape_t *s;
    const float *dy, *x, *w;
    const spk_bf16 *xh, *wh;
    float *ws;
} conv2d_call_t;

static void conv2d_backward_call(void *p, grad3_t g) {
    const conv2d_call_t *c = (const conv2d_call_t *)p;
    if (c->bf16)
        c->be->conv2d_bf16_backward(g.x, 1, g.w, g.b, c->dy, NULL, c->xh, c->wh, c->s, c->ws);
    else
        c->be->conv2d_backward(g.x, 1, g.w, g.b, c->dy, c->x, c->w, c->s, c->ws);
}

// The invariant mode's exact backward on c's operands, dx written (groups of one sample; an
// exact_backward_fn, tests/kernels/backends.h); c->ws is the fixed ops' workspace.
static void conv2d_exact_call(void *p, float *dx, float *dw_tmp, xsum_t dw, xsum_t dbias) {
    const conv2d_call_t *c = (const conv2d_call_t *)p;
    if (c->bf16)
        c->be->conv2d_bf16_backward_exact(dx, 0, dw_tmp, dw, dbias, c->dy, NULL, c->xh, c->wh, c->s, c->ws, 1);
    else
        c->be->conv2d_backward_exact(dx, 0, dw_tmp, dw, dbias, c->dy, c->x, c->w, c->s, c->ws, 1);
}
