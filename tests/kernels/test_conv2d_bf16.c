// conv2d_bf16: forward and backward against the double references of the float32 convolution
// (tests/kernels/conv2d_reference.h) on the bf16-rounded x, w and dy (products of bf16 values are
// exact in float32, so only float32 summation error is allowed), the rounded input it stores,
// dx overwritten or accumulated, dw and dbias accumulated, NULL outputs; with oneDNN's bf16
// convolutions and with the widened path on oneDNN's and on the im2col float32 convolution. The
// invariant mode's twins: widened, the float32 ones on the rounded operands, bit for bit; native,
// invariant themselves and close to those. Then every backend against the CPU kernels (a backend may round
// its outputs to bf16, as cuDNN's bf16 convolutions do: bf16 tolerance).
#include <stdio.h>
#include <string.h>

#include "backends.h"
#include "conv2d_parts.h"
#include "conv2d_reference.h"
#include "exact_check.h"
#include "kernels/conv2d_bf16.h"
#include "kernels/cpu/conv2d_dnnl_plan.h"
#include "kernels/cpu/conv2d_phases.h"
#include "kernels/gemm.h"
#include "kernels/gemm_bf16.h"

#define TOL_BF16 1e-2  // a backend's bf16 outputs: 8 bits of mantissa

static spk_bf16 *alloc_h(size_t n) { return (spk_bf16 *)test_alloc(n * sizeof(spk_bf16)); }

static spk_bf16 *to_bf16(const float *x, size_t n) {
    spk_bf16 *h = alloc_h(n);
    bf16_from_f32(h, x, n);
    return h;
}

// The floats of h.
static float *widened(const spk_bf16 *h, size_t n) {
    float *r = alloc_f(n);
    bf16_to_f32(r, h, n);
    return r;
}

// The floats of bf16(x): what the bf16 kernels multiply.
static float *rounded(const float *x, size_t n) { return widened(to_bf16(x, n), n); }

// On the backend: x rounded to bf16 and widened (the floats of bf16(x)).
static float *rounded_dev(const float *x_, size_t n) {
    spk_bf16 *h_ = dev_alloc(n * sizeof(spk_bf16));
    float *r_ = dev_f(NULL, n);
    g_be->bf16_from_f32(h_, x_, n);
    g_be->bf16_to_f32(r_, h_, n);
    return r_;
}

static void run_case(conv2d_shape_t s, int with_bias, const char *path) {
    const size_t nx = conv2d_x_size(&s), ny = conv2d_y_size(&s), nw = conv2d_w_size(&s);
    char tag[200];
    snprintf(tag, sizeof tag, "[%s] B%d %dx%d C%d->%d k%dx%d s%d,%d%s", path, s.B, s.H, s.W, s.Cin, s.Cout, s.KH, s.KW,
             s.SH, s.SW, with_bias ? " bias" : "");
    float *x = rand_f(nx, -1, 1), *w = rand_f(nw, -0.5f, 0.5f), *bias = with_bias ? rand_f(s.Cout, -1, 1) : NULL;
    float *dy = rand_f(ny, -1, 1);
    float *xr = rounded(x, nx), *wr = rounded(w, nw), *dyr = rounded(dy, ny);
    spk_bf16 *wh = to_bf16(w, nw), *xh = alloc_h(nx);
    float *yref = alloc_f(ny);
    conv2d_forward_reference(yref, xr, wr, bias, &s);
    double *dxr = zeros_d(nx), *dwr = zeros_d(nw), *dbr = zeros_d(s.Cout), *dbr_exact = zeros_d(s.Cout);
    conv2d_backward_reference(dxr, dwr, dbr, dyr, xr, wr, &s);
    for (size_t i = 0; i < ny; i++) dbr_exact[i % s.Cout] += dy[i];  // the bias gradient sums dy unrounded

    float *ws = alloc_f(conv2d_bf16_workspace_floats(&s)), *y = alloc_f(ny);
    conv2d_bf16_forward(y, xh, x, wh, bias, &s, ws);
    char nm[300];
    snprintf(nm, sizeof nm, "forward vs reference on rounded operands %s", tag);
    check_close(nm, y, yref, ny, 1e-5, 1e-5 * (1 + s.Cin * s.KH * s.KW));
    snprintf(nm, sizeof nm, "stored input is bf16(x) %s", tag);
    check_true(memcmp(xh, to_bf16(x, nx), nx * sizeof(spk_bf16)) == 0, nm);
    // x NULL: the forward reads xh as it is
    float *y2 = alloc_f(ny);
    conv2d_bf16_forward(y2, xh, NULL, wh, bias, &s, ws);
    snprintf(nm, sizeof nm, "forward from xh alone %s", tag);
    check_true(memcmp(y, y2, ny * 4) == 0, nm);
    // the rounded forward: the bf16 rounding of the float32 forward's sums, bit for bit
    spk_bf16 *yh = alloc_h(ny), *xh2 = alloc_h(nx);
    conv2d_bf16_forward_rounded(yh, xh2, x, wh, &s, ws);
    conv2d_bf16_forward(y2, xh, NULL, wh, NULL, &s, ws);
    snprintf(nm, sizeof nm, "rounded forward = bf16(forward), xh = bf16(x) %s", tag);
    check_true(!memcmp(yh, to_bf16(y2, ny), ny * sizeof(spk_bf16)) && !memcmp(xh2, xh, nx * sizeof(spk_bf16)), nm);
    conv2d_bf16_forward_rounded(yh, xh2, NULL, wh, &s, ws);
    snprintf(nm, sizeof nm, "rounded forward from xh alone %s", tag);
    check_true(!memcmp(yh, to_bf16(y2, ny), ny * sizeof(spk_bf16)), nm);

    float *dx = rand_f(nx, -1, 1), *dw = zeros_f(nw), *db = zeros_f(s.Cout);
    conv2d_bf16_backward(dx, 0, dw, db, dy, NULL, xh, wh, &s, ws);
    const double nsum = (double)s.B * conv2d_out_h(&s) * conv2d_out_w(&s);
    snprintf(nm, sizeof nm, "dx vs adjoint %s", tag);
    check_close_d(nm, dx, dxr, nx, 1e-4, 1e-5 * (1 + s.Cout * s.KH * s.KW));
    snprintf(nm, sizeof nm, "dw vs adjoint %s", tag);
    check_close_d(nm, dw, dwr, nw, 1e-4, 1e-5 * (1 + nsum));
    snprintf(nm, sizeof nm, "dbias vs sums of dy %s", tag);
    check_close_d(nm, db, dbr_exact, s.Cout, 1e-4, 1e-5 * (1 + nsum));

    float *px = rand_f(nx, -1, 1), *pw = rand_f(nw, -1, 1), *pb = rand_f(s.Cout, -1, 1);
    float *ax = copy_f(px, nx), *aw = copy_f(pw, nw), *ab = copy_f(pb, s.Cout);
    conv2d_bf16_backward(ax, 1, aw, ab, dy, NULL, xh, wh, &s, ws);
    check_accumulated3("conv2d_bf16", tag, (grad3_t){ax, aw, ab}, (grad3_t){px, pw, pb}, (grad3_t){dx, dw, db},
                       (grad3_sizes_t){nx, nw, (size_t)s.Cout});
    float *ox = alloc_f(nx), *ow = zeros_f(nw);
    conv2d_bf16_backward(ox, 0, NULL, NULL, dy, NULL, xh, wh, &s, ws);
    conv2d_bf16_backward(NULL, 0, ow, NULL, dy, NULL, xh, wh, &s, ws);
    snprintf(nm, sizeof nm, "outputs alone %s", tag);
    check_true(!memcmp(ox, dx, nx * 4) && !memcmp(ow, dw, nw * 4), nm);
    // dy handed over rounded (dyh), on this path: dy's bits
    float *hx = alloc_f(nx), *hw = zeros_f(nw);
    conv2d_bf16_backward(hx, 0, hw, NULL, NULL, to_bf16(dy, ny), xh, wh, &s, ws);
    snprintf(nm, sizeof nm, "dx and dw from dyh: dy's bits %s", tag);
    check_true(!memcmp(hx, dx, nx * 4) && !memcmp(hw, dw, nw * 4), nm);
    // the rounded backward: dx rounded, dw the same bits (dxh overwritten, dw accumulated)
    spk_bf16 *dxh = alloc_h(nx);
    float *rw = zeros_f(nw);
    conv2d_bf16_backward_rounded(dxh, rw, to_bf16(dy, ny), xh, wh, &s, ws);
    snprintf(nm, sizeof nm, "rounded backward: bf16(dx), dw's bits %s", tag);
    check_true(!memcmp(dxh, to_bf16(dx, nx), nx * sizeof(spk_bf16)) && !memcmp(rw, dw, nw * 4), nm);
    test_release();
}

// ---- the world-size-invariant mode ---------------------------------------------------------------
// Widened: the float32 twins on the rounded operands, bit for bit (their invariance is
// test_conv2d's). Native (oneDNN's plans of one sample): a sample's output and input gradient
// the same alone as in the batch and on 1 or 2 threads, the exact sums the same for the batch
// split into two calls, and all close to the float32 twins on the rounded operands.
static void invariant_case(conv2d_shape_t s, int group, int native) {
    const size_t nx = conv2d_x_size(&s), ny = conv2d_y_size(&s), nw = conv2d_w_size(&s);
    const size_t xs = nx / s.B, ys = ny / s.B;
    char t[120];
    conv2d_tag(t, sizeof t, &s, 1);
    snprintf(t + strlen(t), sizeof t - strlen(t), " group %d %s", group, native ? "onednn-bf16" : "widened");
    float *x = rand_f(nx, -1, 1), *w = rand_f(nw, -0.5f, 0.5f), *bias = rand_f(s.Cout, -1, 1), *dy = rand_f(ny, -1, 1);
    float *xr = rounded(x, nx), *wr = rounded(w, nw), *dyr = rounded(dy, ny);
    spk_bf16 *wh = to_bf16(w, nw), *xh = alloc_h(nx), *xh1 = alloc_h(nx);
    float *ws = alloc_f(conv2d_bf16_workspace_floats_fixed(&s)), *ws32 = alloc_f(conv2d_workspace_floats_fixed(&s));
    float *y = alloc_f(ny), *y1 = alloc_f(ny), *y32 = alloc_f(ny), *tmp = alloc_f(nw);
    conv2d_shape_t one = s, head = s, rest = s;
    one.B = 1;
    int before = with_threads(2);
    conv2d_bf16_forward_fixed(y, xh, x, wh, bias, &s, ws);
    with_threads(1);
    for (int b = 0; b < s.B; b++) conv2d_bf16_forward_fixed(y1 + b * ys, xh1 + b * xs, x + b * xs, wh, bias, &one, ws);
    with_threads(before);
    conv2d_forward_fixed(y32, xr, wr, bias, &s, ws32);
    check_true(memcmp(y, y1, ny * 4) == 0 && memcmp(xh, to_bf16(x, nx), nx * sizeof(spk_bf16)) == 0 &&
                   memcmp(xh1, xh, nx * sizeof(spk_bf16)) == 0,
               cname("conv2d_bf16_forward_fixed %s: a sample alone == in the batch, xh = bf16(x)", t));
    if (native)
        check_close(cname("conv2d_bf16_forward_fixed %s vs the float32 one on rounded operands", t), y, y32, ny, 1e-5,
                    1e-4);
    else
        check_true(memcmp(y, y32, ny * 4) == 0,
                   cname("conv2d_bf16_forward_fixed %s == conv2d_forward_fixed on rounded operands", t));
    // the rounded twin: bf16 of the fixed forward's sums (no bias), bit for bit, a sample alone as in
    // the batch, on 2 threads and 1
    spk_bf16 *yh = alloc_h(ny), *yh1 = alloc_h(ny), *xh2 = alloc_h(nx);
    conv2d_bf16_forward_fixed(y1, xh, NULL, wh, NULL, &s, ws);
    before = with_threads(2);
    conv2d_bf16_forward_rounded_fixed(yh, xh2, x, wh, &s, ws);
    with_threads(1);
    for (int b = 0; b < s.B; b++) conv2d_bf16_forward_rounded_fixed(yh1 + b * ys, xh + b * xs, NULL, wh, &one, ws);
    with_threads(before);
    check_true(!memcmp(yh, to_bf16(y1, ny), ny * sizeof(spk_bf16)) && !memcmp(yh1, yh, ny * sizeof(spk_bf16)) &&
                   !memcmp(xh2, xh, nx * sizeof(spk_bf16)),
               cname("conv2d_bf16_forward_rounded_fixed %s = bf16(the fixed forward), alone as in the batch", t));

    float *dx = zeros_f(nx), *dx1 = zeros_f(nx), *dx32 = zeros_f(nx);
    xsum_t dw = host_sums((int64_t)nw), dw1 = host_sums((int64_t)nw), dw32 = host_sums((int64_t)nw);
    xsum_t db = host_sums(s.Cout), db1 = host_sums(s.Cout), db32 = host_sums(s.Cout);
    const int first = (s.B / group + 1) / 2 * group;  // whole groups in both calls
    head.B = first, rest.B = s.B - first;
    before = with_threads(2);
    conv2d_bf16_backward_exact(dx, 0, tmp, dw, db, dy, NULL, xh, wh, &s, ws, group);
    with_threads(1);  // the batch in two calls, the second first
    conv2d_bf16_backward_exact(dx1 + first * xs, 0, tmp, dw1, db1, dy + first * ys, NULL, xh + first * xs, wh, &rest,
                               ws, group);
    conv2d_bf16_backward_exact(dx1, 0, tmp, dw1, db1, dy, NULL, xh, wh, &head, ws, group);
    with_threads(before);
    check_true(memcmp(dx, dx1, nx * 4) == 0 && same_sums(dw, dw1, (int64_t)nw) && same_sums(db, db1, s.Cout),
               cname("conv2d_bf16_backward_exact %s: batch split, 1 or 2 threads: the same dx and sums", t));
    float *dxr = zeros_f(nx);  // the output gradient handed over rounded: the same bits
    xsum_t dwr = host_sums((int64_t)nw);
    conv2d_bf16_backward_exact(dxr, 0, tmp, dwr, xsum_none(), NULL, to_bf16(dy, ny), xh, wh, &s, ws, group);
    check_true(memcmp(dxr, dx, nx * 4) == 0 && same_sums(dwr, dw, (int64_t)nw),
               cname("conv2d_bf16_backward_exact %s: from dyh, dy's bits", t));
    // the rounded twin: bf16 of that dx, the same sums; the batch split in two calls on 1 thread
    spk_bf16 *dxh = alloc_h(nx), *dxh1 = alloc_h(nx), *dyh = to_bf16(dy, ny);
    xsum_t dwh = host_sums((int64_t)nw), dwh1 = host_sums((int64_t)nw);
    before = with_threads(2);
    conv2d_bf16_backward_rounded_exact(dxh, tmp, dwh, dyh, xh, wh, &s, ws, group);
    with_threads(1);
    conv2d_bf16_backward_rounded_exact(dxh1 + first * xs, tmp, dwh1, dyh + first * ys, xh + first * xs, wh, &rest, ws,
                                       group);
    conv2d_bf16_backward_rounded_exact(dxh1, tmp, dwh1, dyh, xh, wh, &head, ws, group);
    with_threads(before);
    check_true(!memcmp(dxh, to_bf16(dxr, nx), nx * sizeof(spk_bf16)) && same_sums(dwh, dwr, (int64_t)nw) &&
                   !memcmp(dxh1, dxh, nx * sizeof(spk_bf16)) && same_sums(dwh1, dwh, (int64_t)nw),
               cname("conv2d_bf16_backward_rounded_exact %s = bf16(dx), dw's sums; batch split, 1 or 2 threads", t));
    conv2d_backward_exact(dx32, 0, tmp, dw32, xsum_none(), dyr, xr, wr, &s, ws32, group);
    conv2d_backward_exact(NULL, 0, NULL, xsum_none(), db32, dy, NULL, NULL, &s, ws32, group);  // dy unrounded
    if (native) {
        check_close(cname("conv2d_bf16_backward_exact %s dx vs the float32 one", t), dx, dx32, nx, 1e-5, 1e-4);
        check_close(cname("conv2d_bf16_backward_exact %s dw vs the float32 one", t), sums_to_floats(dw, (int64_t)nw),
                    sums_to_floats(dw32, (int64_t)nw), nw, 1e-4, 1e-4);
        check_true(same_sums(db, db32, s.Cout), cname("conv2d_bf16_backward_exact %s dbias == the float32 one", t));
    } else {
        check_true(memcmp(dx, dx32, nx * 4) == 0 && same_sums(dw, dw32, (int64_t)nw) && same_sums(db, db32, s.Cout),
                   cname("conv2d_bf16_backward_exact %s == the float32 one on rounded operands", t));
    }
    test_release();
}

static void invariant_checks(void) {
    for (int native = 0; native < 2; native++) {
        if (native && (spk_gemm_set_backend(SPK_GEMM_DNNL) != 0 || !spk_gemm_bf16_native())) {
            printf("conv2d_bf16: no native bf16 here; the invariant mode's widened path only\n");
            break;
        }
        conv2d_bf16_set_path(native ? CONV2D_BF16_NATIVE : CONV2D_BF16_WIDENED);
        invariant_case(conv2d_shape(4, 3, 4, 6, 7, 3, 3, 1, 1, 1, 1, 1, 1), 1, native);
        invariant_case(conv2d_shape(4, 1, 8, 12, 10, 3, 3, 1, 1, 1, 1, 1, 1), 2, native);  // the first layer
        invariant_case(conv2d_shape(4, 16, 32, 9, 8, 3, 3, 2, 2, 1, 1, 1, 1), 2, native);
        invariant_case(conv2d_shape(6, 32, 32, 8, 10, 3, 3, 1, 1, 1, 1, 1, 1), 3, native);
        invariant_case(conv2d_shape(8, 16, 32, 10, 9, 1, 1, 2, 2, 0, 0, 1, 1), 4, native);
        invariant_case(conv2d_shape(20, 32, 32, 8, 10, 3, 3, 1, 1, 1, 1, 1, 1), 10, native);  // blocks of 8, short ones
        // pointwise layers' weight gradient by tiles of 256 x 256 (kernels/cpu/conv2d_pointwise.h)
        invariant_case(conv2d_shape(4, 300, 260, 1, 20, 1, 1, 1, 1, 0, 0, 1, 1), 2, native);
        invariant_case(conv2d_shape(6, 24, 40, 5, 7, 1, 1, 1, 1, 0, 0, 1, 1), 3, native);
    }
    conv2d_bf16_set_path(CONV2D_BF16_AUTO);
}

// ---- the input gradient by phases (kernels/cpu/conv2d_phases.c) ---------------------------------
// Each phase's forward convolution of dy by its turned weights as loops here, laid into dx by
// conv2d_phases_interleave: dx against the adjoint (overwritten, accumulated, bf16), on any CPU
// (oneDNN runs the phases only where it has bf16 kernels).
static void phase_forward(float *out, const float *dy, const spk_bf16 *wt, const conv2d_shape_t *s,
                          const conv2d_phase_t *p) {
    const int OH = conv2d_out_h(s), OW = conv2d_out_w(s), th = p->taps_h, tw = p->taps_w;
    for (int b = 0; b < s->B; b++)
        for (int m = 0; m < p->out_h; m++)
            for (int l = 0; l < p->out_w; l++)
                for (int ci = 0; ci < s->Cin; ci++) {
                    float acc = 0.0f;
                    for (int jh = 0; jh < th; jh++)
                        for (int jw = 0; jw < tw; jw++) {
                            const int u = m - p->pad_t + jh * p->dil_h, v = l - p->pad_l + jw * p->dil_w;
                            if (u < 0 || u >= OH || v < 0 || v >= OW) continue;
                            for (int co = 0; co < s->Cout; co++)  // the turned weights: (Cout, Cin, th, tw)
                                acc += dy[(((size_t)b * OH + u) * OW + v) * s->Cout + co] *
                                       spk_bf16_to_f32(wt[(((size_t)co * s->Cin + ci) * th + jh) * tw + jw]);
                        }
                    out[(((size_t)b * p->out_h + m) * p->out_w + l) * s->Cin + ci] = acc;
                }
}

static void phases_case(conv2d_shape_t s) {
    const size_t nx = conv2d_x_size(&s), ny = conv2d_y_size(&s), nw = conv2d_w_size(&s);
    char t[120], nm[200];
    conv2d_tag(t, sizeof t, &s, 0);
    conv2d_phase_t ph[CONV2D_MAX_PHASES];
    const int n = conv2d_phases_of(ph, &s);
    snprintf(nm, sizeof nm, "phases: SH x SW of them %s", t);
    check_true(n == s.SH * s.SW, nm);
    if (n != s.SH * s.SW) return;
    float *w = rand_f(nw, -0.5f, 0.5f), *dy = rand_f(ny, -1, 1), *wr = rounded(w, nw);
    spk_bf16 *wh = to_bf16(w, nw);
    double *dxr = zeros_d(nx), *dwr = zeros_d(nw), *dbr = zeros_d(s.Cout);
    conv2d_backward_reference(dxr, dwr, dbr, dy, alloc_f(nx), wr, &s);
    float *parts = alloc_f(conv2d_phases_size(ph, n, &s));
    for (int i = 0; i < n; i++) {
        if (!ph[i].taps_h) continue;
        spk_bf16 *wt = wh;
        if (conv2d_phase_turns(&ph[i], &s)) conv2d_phase_turn(wt = alloc_h(nw), wh, &s, &ph[i]);
        phase_forward(parts + ph[i].offset, dy, wt, &s, &ph[i]);
    }
    float *dx = rand_f(nx, -1, 1), *px = rand_f(nx, -1, 1), *ax = copy_f(px, nx);
    conv2d_phases_interleave(dx, 0, parts, ph, &s, sizeof(float));
    snprintf(nm, sizeof nm, "phases: dx vs adjoint %s", t);
    check_close_d(nm, dx, dxr, nx, 1e-4, 1e-5 * (1 + s.Cout * s.KH * s.KW));
    conv2d_phases_interleave(ax, 1, parts, ph, &s, sizeof(float));
    check_accumulated(nm, ax, px, dx, nx);
    const size_t np = conv2d_phases_size(ph, n, &s);
    spk_bf16 *dxh = alloc_h(nx);
    conv2d_phases_interleave(dxh, 0, to_bf16(parts, np), ph, &s, sizeof(spk_bf16));
    snprintf(nm, sizeof nm, "phases: bf16 dx = bf16(dx) %s", t);
    check_true(memcmp(dxh, to_bf16(dx, nx), nx * sizeof(spk_bf16)) == 0, nm);
    test_release();
}

static void phases_checks(void) {
    phases_case(conv2d_shape(2, 3, 5, 7, 9, 3, 3, 1, 1, 1, 1, 1, 1));    // one phase: the kernel flipped
    phases_case(conv2d_shape(2, 4, 6, 9, 11, 3, 3, 1, 1, 0, 0, 1, 1));   // valid
    phases_case(conv2d_shape(2, 5, 4, 12, 10, 3, 3, 1, 1, 2, 3, 2, 3));  // dilated
    phases_case(conv2d_shape(2, 4, 4, 9, 8, 5, 3, 1, 1, 2, 1, 1, 1));    // rectangular
    phases_case(conv2d_shape(2, 6, 3, 7, 9, 1, 1, 1, 1, 0, 0, 1, 1));    // 1x1: w as it is
    phases_case(conv2d_shape(2, 3, 5, 10, 12, 3, 3, 2, 2, 1, 1, 1, 1));  // ResNet's downsampling
    phases_case(conv2d_shape(2, 3, 5, 9, 11, 3, 3, 2, 2, 1, 1, 1, 1));   // odd sizes
    phases_case(conv2d_shape(2, 4, 4, 9, 11, 5, 5, 2, 2, 2, 2, 1, 1));
    phases_case(conv2d_shape(3, 6, 4, 8, 9, 1, 1, 2, 2, 0, 0, 1, 1));   // phases no tap reaches
    phases_case(conv2d_shape(2, 4, 5, 9, 10, 3, 3, 2, 1, 1, 1, 1, 1));  // CAM++'s stride (2, 1)
    phases_case(conv2d_shape(2, 4, 5, 7, 10, 3, 5, 1, 2, 1, 2, 1, 1));  // stride (1, 2)
    phases_case(conv2d_shape(2, 4, 4, 8, 9, 2, 2, 2, 2, 0, 0, 1, 1));   // one tap each
    phases_case(conv2d_shape(2, 4, 4, 8, 10, 4, 4, 2, 2, 1, 1, 1, 1));  // even kernel
    conv2d_phase_t ph[CONV2D_MAX_PHASES];
    const conv2d_shape_t none[] = {conv2d_shape(1, 4, 4, 9, 9, 3, 3, 3, 3, 1, 1, 1, 1),   // stride 3
                                   conv2d_shape(1, 4, 4, 9, 9, 3, 3, 2, 2, 1, 1, 2, 2),   // stride and dilation
                                   conv2d_shape(1, 4, 4, 6, 7, 3, 3, 1, 1, 3, 2, 1, 1)};  // past the reach
    for (size_t i = 0; i < sizeof none / sizeof none[0]; i++)
        check_true(conv2d_phases_of(ph, &none[i]) == 0, "phases: none where they do not apply");
}

// Inference's workspace (conv2d_bf16_forward_workspace_floats): a phased shape's plan makes no
// phases for it, the workspace holds at most the training one's, and the forward in it writes
// nothing past it and the bits of the forward in the training one.
static void forward_workspace_checks(void) {
#ifdef SPK_USE_DNNL
    if (spk_gemm_set_backend(SPK_GEMM_DNNL) != 0 || !spk_gemm_bf16_native()) return;
    const conv2d_shape_t s = conv2d_shape(2, 16, 32, 12, 14, 3, 3, 2, 2, 1, 1, 1, 1);  // in no other case
    const size_t nx = conv2d_x_size(&s), ny = conv2d_y_size(&s), nw = conv2d_w_size(&s), guard = 4096;
    const size_t nf = conv2d_bf16_forward_workspace_floats(&s);
    const plan_t *p = plan_lookup(&s, CONV2D_BF16, CONV2D_ALGO_DIRECT, 0, 0);
    check_true(!p->complete && !p->phases, "forward workspace: no phases made");
    float *x = rand_f(nx, -1, 1), *y = alloc_f(ny), *y2 = alloc_f(ny), *wf = alloc_f(nf + guard);
    for (size_t i = 0; i < guard; i++) wf[nf + i] = 1234.5f;
    spk_bf16 *w = to_bf16(rand_f(nw, -0.5f, 0.5f), nw), *xh = alloc_h(nx);
    conv2d_bf16_forward(y, xh, x, w, NULL, &s, wf);
    int clean = 1;
    for (size_t i = 0; i < guard; i++) clean &= wf[nf + i] == 1234.5f;
    check_true(clean, "forward workspace: nothing written past it");
    const size_t nb = conv2d_bf16_workspace_floats(&s);
    p = plan_lookup(&s, CONV2D_BF16, CONV2D_ALGO_DIRECT, 0, 0);
    check_true(nf <= nb && p->complete && (p->phases > 0 || !spk_dnnl_isa_has(dnnl_cpu_isa_avx512_core_amx)),
               "forward workspace: the training one's sizing makes the phases");
    conv2d_bf16_forward(y2, xh, x, w, NULL, &s, alloc_f(nb));
    check_true(memcmp(y, y2, ny * sizeof(float)) == 0, "forward workspace: the training workspace's bits");
#endif
}

static void cpu_checks(void) {
    const spk_gemm_backend keep = spk_gemm_get_backend();
    phases_checks();
    forward_workspace_checks();
#ifdef SPK_USE_DNNL
    if (spk_gemm_set_backend(SPK_GEMM_DNNL) == 0 && spk_gemm_bf16_native()) parts_checks(CONV2D_BF16);
#endif
    spk_gemm_set_backend(keep);
    invariant_checks();
    spk_gemm_set_backend(keep);
    const struct {
        spk_gemm_backend gemm;
        conv2d_bf16_path path;
        const char *name;
    } configs[3] = {{SPK_GEMM_DNNL, CONV2D_BF16_NATIVE, "onednn-bf16"},
                    {SPK_GEMM_DNNL, CONV2D_BF16_WIDENED, "widened/onednn"},
                    {SPK_GEMM_BLAS, CONV2D_BF16_WIDENED, "widened/im2col"}};
    for (int k = 0; k < 3; k++) {
        if (spk_gemm_set_backend(configs[k].gemm) != 0) continue;
        if (configs[k].path == CONV2D_BF16_NATIVE && !spk_gemm_bf16_native()) {
            printf("conv2d_bf16: no native bf16 here; the widened paths only\n");
            continue;
        }
        conv2d_bf16_set_path(configs[k].path);
        const char *path = configs[k].name;
        run_case(conv2d_shape(2, 3, 4, 6, 7, 3, 3, 1, 1, 1, 1, 1, 1), 1, path);
        run_case(conv2d_shape(2, 16, 32, 9, 8, 3, 3, 2, 2, 1, 1, 1, 1), 0, path);
        run_case(conv2d_shape(3, 16, 32, 10, 9, 1, 1, 2, 2, 0, 0, 1, 1), 0, path);
        run_case(conv2d_shape(2, 4, 8, 11, 6, 3, 3, 2, 1, 1, 1, 1, 1), 1, path);
        run_case(conv2d_shape(2, 1, 32, 16, 20, 3, 3, 1, 1, 1, 1, 1, 1), 0, path);
        run_case(conv2d_shape(2, 32, 32, 8, 10, 3, 3, 1, 1, 1, 1, 1, 1), 0, path);
        // the input gradient by phases (kernels/cpu/conv2d_phases.h): stride 1 valid, dilated,
        // 1x1, rectangular, padding past the kernel's reach (no phases); strides 2 and (2, 1),
        // odd and even sizes, phases no tap reaches (1x1) and one tap each (2x2). Not 16 -> 32
        // channels at 9 x 10 with stride (2, 1): oneDNN 2.6 reads past a buffer of its own while
        // it generates that shape's AMX forward (under AddressSanitizer a fault in 10 of 40 runs,
        // and in 1 of 40 on the tree before the phases, by where the buffer lands)
        run_case(conv2d_shape(2, 16, 32, 9, 11, 3, 3, 1, 1, 0, 0, 1, 1), 0, path);
        run_case(conv2d_shape(2, 32, 16, 12, 10, 3, 3, 1, 1, 2, 2, 2, 2), 0, path);
        run_case(conv2d_shape(2, 32, 32, 7, 9, 1, 1, 1, 1, 0, 0, 1, 1), 0, path);
        run_case(conv2d_shape(2, 300, 260, 1, 20, 1, 1, 1, 1, 0, 0, 1, 1), 1, path);  // its weight gradient a GEMM
        run_case(conv2d_shape(2, 16, 16, 9, 8, 5, 3, 1, 1, 2, 1, 1, 1), 1, path);
        run_case(conv2d_shape(2, 16, 16, 6, 7, 3, 3, 1, 1, 3, 2, 1, 1), 0, path);
        run_case(conv2d_shape(2, 16, 32, 10, 12, 3, 3, 2, 2, 1, 1, 1, 1), 0, path);
        run_case(conv2d_shape(2, 16, 16, 9, 11, 5, 5, 2, 2, 2, 2, 1, 1), 1, path);
        run_case(conv2d_shape(2, 32, 16, 8, 8, 1, 1, 2, 2, 0, 0, 1, 1), 0, path);
        run_case(conv2d_shape(2, 32, 32, 10, 12, 3, 3, 2, 1, 1, 1, 1, 1), 0, path);
        run_case(conv2d_shape(2, 16, 16, 8, 9, 2, 2, 2, 2, 0, 0, 1, 1), 0, path);
    }
    conv2d_bf16_set_path(CONV2D_BF16_AUTO);
    spk_gemm_set_backend(keep);
}

static void backend_case(const int *a) {
    conv2d_shape_t s = conv2d_shape_of(a);
    const int with_bias = a[13];
    const size_t nx = conv2d_x_size(&s), ny = conv2d_y_size(&s), nw = conv2d_w_size(&s);
    char t[96];
    conv2d_tag(t, sizeof t, &s, with_bias);
    float *x = rand_f(nx, -1, 1), *w = rand_f(nw, -0.5f, 0.5f), *bias = with_bias ? rand_f(s.Cout, -1, 1) : NULL;
    float *dy = rand_f(ny, -1, 1), *y = alloc_f(ny), *ws = alloc_f(conv2d_bf16_workspace_floats(&s));
    spk_bf16 *wh = to_bf16(w, nw), *xh = alloc_h(nx);
    conv2d_bf16_forward(y, xh, x, wh, bias, &s, ws);
    spk_bf16 *xh_ = dev_alloc(nx * sizeof(spk_bf16)), *wh_ = dev_alloc(nw * sizeof(spk_bf16));
    g_be->upload(wh_, wh, nw * sizeof(spk_bf16));
    float *x_ = dev_f(x, nx), *b_ = bias ? dev_f(bias, s.Cout) : NULL, *dy_ = dev_f(dy, ny), *y_ = dev_f(NULL, ny);
    float *ws_ = dev_f(NULL, g_be->conv2d_bf16_workspace_floats(&s));
    g_be->conv2d_bf16_forward(y_, xh_, x_, wh_, b_, &s, ws_);
    cmp(cname("conv2d_bf16 forward %s", t), y_, y, ny, TOL_BF16);
    // inference's workspace: the forward's alone, no larger
    const size_t nf = g_be->conv2d_bf16_forward_workspace_floats(&s);
    check_true(nf <= g_be->conv2d_bf16_workspace_floats(&s), "conv2d_bf16: the forward's workspace within the whole");
    float *fy_ = dev_f(NULL, ny);
    g_be->conv2d_bf16_forward(fy_, xh_, x_, wh_, b_, &s, dev_f(NULL, nf));
    cmp(cname("conv2d_bf16 forward in its own workspace %s", t), fy_, y, ny, TOL_BF16);
    // the rounded forward: the bits of the backend's forward (without bias) rounded, and close to
    // the CPU's
    spk_bf16 *yh_ = dev_alloc(ny * sizeof(spk_bf16)), *xr_ = dev_alloc(nx * sizeof(spk_bf16));
    float *yn_ = dev_f(NULL, ny), *yw_ = dev_f(NULL, ny), *yc = alloc_f(ny);
    g_be->conv2d_bf16_forward_rounded(yh_, xr_, x_, wh_, &s, ws_);
    g_be->conv2d_bf16_forward(yn_, xh_, NULL, wh_, NULL, &s, ws_);
    g_be->bf16_to_f32(yw_, yh_, ny);
    same_bits(cname("conv2d_bf16_forward_rounded = its forward rounded %s", t), yw_, rounded_dev(yn_, ny), ny);
    conv2d_bf16_forward(yc, xh, x, wh, NULL, &s, ws);
    cmp(cname("conv2d_bf16_forward_rounded %s", t), yw_, rounded(yc, ny), ny, TOL_BF16);
    spk_bf16 *got = alloc_h(nx);
    g_be->download(got, xh_, nx * sizeof(spk_bf16));
    be_verdict(cname("conv2d_bf16 stored input %s", t), memcmp(got, xh, nx * sizeof(spk_bf16)) == 0,
               memcmp(got, xh, nx * sizeof(spk_bf16)) == 0 ? 0.0 : INFINITY, 0.0);
    conv2d_call_t cpu = {&spk_backend_cpu, 1, &s, dy, NULL, NULL, xh, wh, ws},
                  dev = {g_be, 1, &s, dy_, NULL, NULL, xh_, wh_, ws_};
    grads_t g = grads_prefill(3, (size_t[]){nx, nw, (size_t)s.Cout});
    conv2d_backward_call(&cpu, (grad3_t){g.cpu[0], g.cpu[1], g.cpu[2]});
    conv2d_backward_call(&dev, (grad3_t){g.dev[0], g.dev[1], g.dev[2]});
    conv2d_backward_call(&dev, (grad3_t){g.dev2[0], g.dev2[1], g.dev2[2]});
    grads_check(&g, "conv2d_bf16", t, (const char *[]){"dx", "dw", "dbias"}, (double[]){TOL_BF16, TOL_BF16, TOL});
    // dy handed over rounded (dyh; dy and dbias NULL): the bits of the call that rounds it, dx
    // overwritten and accumulated, dw accumulated
    spk_bf16 *dyh_ = dev_alloc(ny * sizeof(spk_bf16));
    g_be->bf16_from_f32(dyh_, dy_, ny);
    for (int acc = 0; acc < 2; acc++) {
        float *x0 = rand_f(nx, -1, 1), *w0 = rand_f(nw, -1, 1);
        float *dx1 = dev_f(x0, nx), *dw1 = dev_f(w0, nw), *dx2 = dev_f(x0, nx), *dw2 = dev_f(w0, nw);
        g_be->conv2d_bf16_backward(dx1, acc, dw1, NULL, dy_, NULL, xh_, wh_, &s, ws_);
        g_be->conv2d_bf16_backward(dx2, acc, dw2, NULL, NULL, dyh_, xh_, wh_, &s, ws_);
        same_bits(cname("conv2d_bf16 dx from dyh (accumulate %d) %s", acc, t), dx2, dx1, nx);
        same_bits(cname("conv2d_bf16 dw from dyh %s", t), dw2, dw1, nw);
    }
    // the rounded backward: the backend's dx rounded, bitwise, dw its bits too; close to the CPU's
    {
        float *dx1 = dev_f(NULL, nx), *dw1 = dev_f(zeros_f(nw), nw), *dw2 = dev_f(zeros_f(nw), nw);
        float *dxw_ = dev_f(NULL, nx), *dxc = alloc_f(nx);
        spk_bf16 *dxh_ = dev_alloc(nx * sizeof(spk_bf16));
        g_be->conv2d_bf16_backward(dx1, 0, dw1, NULL, NULL, dyh_, xh_, wh_, &s, ws_);
        g_be->conv2d_bf16_backward_rounded(dxh_, dw2, dyh_, xh_, wh_, &s, ws_);
        g_be->bf16_to_f32(dxw_, dxh_, nx);
        same_bits(cname("conv2d_bf16_backward_rounded = its backward's dx rounded %s", t), dxw_, rounded_dev(dx1, nx),
                  nx);
        same_bits(cname("conv2d_bf16_backward_rounded dw %s", t), dw2, dw1, nw);
        conv2d_bf16_backward(dxc, 0, NULL, NULL, dy, NULL, xh, wh, &s, ws);
        cmp(cname("conv2d_bf16_backward_rounded %s", t), dxw_, rounded(dxc, nx), nx, TOL_BF16);
    }

    // the invariant mode's forward (the invariant table) and exact backward
    const spk_backend_t *twin = spk_backend_invariant(g_be);
    float *iws = alloc_f(conv2d_bf16_workspace_floats_fixed(&s)),
          *iws_ = dev_f(NULL, twin->conv2d_bf16_workspace_floats(&s));
    conv2d_bf16_forward_fixed(y, xh, x, wh, bias, &s, iws);
    twin->conv2d_bf16_forward(y_, xh_, x_, wh_, b_, &s, iws_);
    cmp(cname("conv2d_bf16_forward_fixed %s", t), y_, y, ny, TOL_BF16);
    spk_bf16 *iyh_ = dev_alloc(ny * sizeof(spk_bf16)), *ixh_ = dev_alloc(nx * sizeof(spk_bf16));
    float *iyw_ = dev_f(NULL, ny);
    twin->conv2d_bf16_forward_rounded(iyh_, ixh_, x_, wh_, &s, iws_);
    twin->conv2d_bf16_forward(y_, xh_, NULL, wh_, NULL, &s, iws_);
    twin->bf16_to_f32(iyw_, iyh_, ny);
    same_bits(cname("conv2d_bf16_forward_rounded_fixed = its forward rounded %s", t), iyw_, rounded_dev(y_, ny), ny);
    spk_bf16 *idyh_ = dev_alloc(ny * sizeof(spk_bf16)), *idxh_ = dev_alloc(nx * sizeof(spk_bf16)), *hdxh = alloc_h(nx);
    float *idx_ = dev_f(NULL, nx), *itmp_ = dev_f(NULL, nw), *htmp = alloc_f(nw);
    xsum_t hdw = host_sums((int64_t)nw), idw_ = xsum_layout(dev_alloc(xsum_bytes((int64_t)nw)), (int64_t)nw);
    twin->bf16_from_f32(idyh_, dy_, ny);
    conv2d_bf16_backward_rounded_exact(hdxh, htmp, hdw, to_bf16(dy, ny), xh, wh, &s, iws, 1);
    twin->conv2d_bf16_backward_rounded_exact(idxh_, itmp_, idw_, idyh_, xh_, wh_, &s, iws_, 1);
    twin->bf16_to_f32(idx_, idxh_, nx);
    cmp(cname("conv2d_bf16_backward_rounded_exact dx %s", t), idx_, widened(hdxh, nx), nx, TOL_BF16);
    float *idw = dev_f(NULL, nw);
    twin->xsum_to_float(idw, idw_, (int64_t)nw);
    cmp(cname("conv2d_bf16_backward_rounded_exact dw %s", t), idw, sums_to_floats(hdw, (int64_t)nw), nw, TOL_BF16);
    conv2d_call_t icpu = {&spk_backend_cpu, 1, &s, dy, NULL, NULL, xh, wh, iws},
                  idev = {g_be, 1, &s, dy_, NULL, NULL, xh_, wh_, iws_};
    backend_exact_checks("conv2d_bf16_backward_exact", t, conv2d_exact_call, &icpu, &idev, nx, nw,
                         with_bias ? s.Cout : 0, TOL_BF16);
    dev_release();
    test_release();
}

static void backend_checks(void) {
    for (size_t i = 0; i < sizeof conv2d_backend_shapes / sizeof conv2d_backend_shapes[0]; i++)
        backend_case(conv2d_backend_shapes[i]);
}

int main(int argc, char **argv) { return test_main(argc, argv, "test_conv2d_bf16", 11, cpu_checks, backend_checks); }
