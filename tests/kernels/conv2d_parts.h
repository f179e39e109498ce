// Whether oneDNN's passes keep to their parts of a plan's workspace (kernels/cpu/conv2d_dnnl.c):
// the forward writes nothing past the forward's parts (inference's workspace ends there), the
// weight gradient nothing past its own. A pass that writes past the scratchpad it asked for
// lands on the plan's next part: oneDNN 2.6's weight gradient of narrow strided 1x1 layers did
// (kernels/cpu/conv2d.c sends those to im2col). Shapes of the models' layers at their sizes.
#pragma once
#ifdef SPK_USE_DNNL
#include <stdlib.h>
#include <string.h>

#include "conv2d_reference.h"
#include "kernels/cpu/conv2d_dnnl.h"
#include "kernels/cpu/conv2d_dnnl_plan.h"

// Bytes [from, n) of ws still hold 0xA5.
static int parts_untouched(const unsigned char *ws, size_t from, size_t n) {
    for (size_t i = from; i < n; i++)
        if (ws[i] != 0xA5) return 0;
    return 1;
}

static void parts_case(conv2d_shape_t s, conv2d_operands t) {
    const size_t n = conv2d_dnnl_workspace_bytes(&s, t), e = t == CONV2D_F32 ? sizeof(float) : sizeof(uint16_t);
    const plan_t *p = plan_lookup(&s, t, CONV2D_ALGO_DIRECT, 0, 1);
    const size_t front = p->w_fwd_bytes + p->xb_bytes + p->yb_bytes;
    const size_t fwd_end = front + p->forward_scratch_bytes,
                 dw_end = front + p->scratch_bytes + p->w_bwd_bytes + p->dw_bytes;
    unsigned char *ws = test_alloc(n + 64), *ws0 = ws + (64 - (uintptr_t)ws % 64) % 64;  // parts from byte 0
    const size_t nx = conv2d_x_size(&s), ny = conv2d_y_size(&s), nw = conv2d_w_size(&s);
    unsigned char *x = test_alloc(nx * e), *w = test_alloc(nw * e), *dy = test_alloc(ny * e);
    for (size_t i = 0; i < nx * e; i++) x[i] = (unsigned char)(i * 7 % 61 + (e == 2 && i % 2 ? 60 : 0));
    for (size_t i = 0; i < nw * e; i++) w[i] = (unsigned char)(i * 5 % 59 + (e == 2 && i % 2 ? 60 : 0));
    for (size_t i = 0; i < ny * e; i++) dy[i] = (unsigned char)(i * 3 % 53 + (e == 2 && i % 2 ? 60 : 0));
    float *y = alloc_f(ny), *dw = zeros_f(nw);
    char what[160];
    snprintf(what, sizeof what, "parts: B%d %dx%d C%d->%d k%dx%d s%d,%d d%d,%d (%s): the forward within its own", s.B,
             s.H, s.W, s.Cin, s.Cout, s.KH, s.KW, s.SH, s.SW, s.DH, s.DW, e == 2 ? "bf16" : "fp32");
    memset(ws0, 0xA5, n - 64);
    conv2d_dnnl_forward(y, x, w, NULL, &s, t, CONV2D_ALGO_DIRECT, ws0);
    check_true(parts_untouched(ws0, fwd_end, n - 64), what);
    memset(ws0, 0xA5, n - 64);
    conv2d_dnnl_backward(NULL, 0, dw, dy, x, w, &s, t, CONV2D_ALGO_DIRECT, ws0);
    strcpy(strstr(what, "the forward"), "the weight gradient within its own");
    check_true(parts_untouched(ws0, dw_end, n - 64), what);
}

static void parts_checks(conv2d_operands t) {
    const conv2d_shape_t shapes[] = {
        conv2d_shape(2, 32, 32, 80, 200, 3, 3, 1, 1, 1, 1, 1, 1),  // ResNet34 (m 32) at 200 frames
        conv2d_shape(2, 32, 64, 80, 200, 3, 3, 2, 2, 1, 1, 1, 1),
        conv2d_shape(2, 32, 64, 80, 200, 1, 1, 2, 2, 0, 0, 1, 1),
        conv2d_shape(2, 64, 64, 40, 100, 3, 3, 1, 1, 1, 1, 1, 1),
        conv2d_shape(2, 64, 128, 40, 100, 1, 1, 2, 2, 0, 0, 1, 1),
        conv2d_shape(2, 128, 256, 20, 50, 3, 3, 2, 2, 1, 1, 1, 1),
        conv2d_shape(2, 256, 256, 10, 25, 3, 3, 1, 1, 1, 1, 1, 1),
        conv2d_shape(2, 32, 32, 40, 200, 3, 3, 2, 1, 1, 1, 1, 1),  // CAM++'s front end
        conv2d_shape(2, 32, 32, 40, 200, 1, 1, 2, 1, 0, 0, 1, 1),
        conv2d_shape(2, 320, 128, 1, 200, 1, 5, 1, 2, 0, 2, 1, 1),
        conv2d_shape(2, 128, 32, 1, 100, 1, 3, 1, 1, 0, 2, 1, 2),   // a dense layer's dilated convolution
        conv2d_shape(2, 3, 32, 112, 112, 3, 3, 2, 2, 1, 1, 1, 1)};  // the face encoder's stem
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) parts_case(shapes[i], t);
}
#endif
