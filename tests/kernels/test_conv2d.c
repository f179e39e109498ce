// conv2d (and its world-size-invariant twins): against PyTorch (tests/golden/kernels2d_golden.h: forward and all three gradients of
// five shapes), against a direct double reference and its adjoint on every GEMM backend (oneDNN's
// convolutions and the im2col path), finite differences, dx overwritten or accumulated, dw and
// dbias accumulated, NULL outputs, a guard band after the workspace. Then every backend against
// the CPU kernels (tests/kernels/backends.h).
#include <stdio.h>
#include <string.h>

#include "../golden/kernels2d_golden.h"
#include "backends.h"
#include "conv2d_parts.h"
#include "conv2d_reference.h"
#include "exact_check.h"
#include "kernels/conv2d.h"
#include "kernels/cpu/conv2d_dnnl.h"
#include "kernels/cpu/conv2d_dnnl_plan.h"
#include "kernels/cpu/conv2d_taps.h"
#include "kernels/gemm.h"

#define GUARD 4096

typedef struct {
    conv2d_shape_t s;
    float *x, *w, *bias, *y, *r, *ws;
} conv_ctx;

static double conv_loss(void *p) {
    conv_ctx *c = (conv_ctx *)p;
    conv2d_forward(c->y, c->x, c->w, c->bias, &c->s, c->ws);
    return dot_d(c->y, c->r, conv2d_y_size(&c->s));
}

static const char *backend_name(spk_gemm_backend b) { return b == SPK_GEMM_DNNL ? "dnnl" : "im2col"; }

static float *workspace_with_guard(size_t n) {
    float *ws = alloc_f(n + GUARD);
    for (size_t i = 0; i < GUARD; i++) ws[n + i] = 1234.5f;
    return ws;
}

static void check_guard(const char *tag, const float *ws, size_t n) {
    for (size_t i = 0; i < GUARD; i++)
        if (ws[n + i] != 1234.5f) {
            printf("FAIL %s: wrote past the advertised workspace\n", tag);
            g_failures++;
            return;
        }
}

// One shape on the current GEMM backend: forward vs reference, gradients vs the adjoint, the
// accumulation rules and NULL outputs.
static void reference_case(conv2d_shape_t s, int with_bias, int do_fd) {
    const size_t nx = conv2d_x_size(&s), ny = conv2d_y_size(&s), nw = conv2d_w_size(&s);
    char tag[200];
    snprintf(tag, sizeof tag, "[%s] B%d %dx%d C%d->%d k%dx%d s%d,%d p%d,%d d%d,%d%s",
             backend_name(spk_gemm_get_backend()), s.B, s.H, s.W, s.Cin, s.Cout, s.KH, s.KW, s.SH, s.SW, s.PH, s.PW,
             s.DH, s.DW, with_bias ? " bias" : "");
    conv_ctx c = {s,
                  rand_f(nx, -1, 1),
                  rand_f(nw, -0.5f, 0.5f),
                  with_bias ? rand_f(s.Cout, -1, 1) : NULL,
                  alloc_f(ny),
                  rand_f(ny, -1, 1),
                  NULL};
    const size_t nws = conv2d_workspace_floats(&s);
    c.ws = workspace_with_guard(nws);
    float *yref = alloc_f(ny);
    conv2d_forward_reference(yref, c.x, c.w, c.bias, &s);
    conv2d_forward(c.y, c.x, c.w, c.bias, &s, c.ws);
    char nm[300];
    snprintf(nm, sizeof nm, "forward vs reference %s", tag);
    check_close(nm, c.y, yref, ny, 1e-5, 1e-5 * (1 + s.Cin * s.KH * s.KW));

    double *dxr = zeros_d(nx), *dwr = zeros_d(nw), *dbr = zeros_d(s.Cout);
    conv2d_backward_reference(dxr, dwr, dbr, c.r, c.x, c.w, &s);
    float *dx = rand_f(nx, -1, 1), *dw = zeros_f(nw), *db = zeros_f(s.Cout);  // dx overwritten: garbage first
    conv2d_backward(dx, 0, dw, db, c.r, c.x, c.w, &s, c.ws);
    const double nsum = (double)s.B * conv2d_out_h(&s) * conv2d_out_w(&s);
    snprintf(nm, sizeof nm, "dx vs adjoint %s", tag);
    check_close_d(nm, dx, dxr, nx, 1e-4, 1e-5 * (1 + s.Cout * s.KH * s.KW));
    snprintf(nm, sizeof nm, "dw vs adjoint %s", tag);
    check_close_d(nm, dw, dwr, nw, 1e-4, 1e-5 * (1 + nsum));
    snprintf(nm, sizeof nm, "dbias vs reference %s", tag);
    check_close_d(nm, db, dbr, s.Cout, 1e-4, 1e-5 * (1 + nsum));

    // dx accumulated, dw and dbias accumulated, from random prefills
    float *px = rand_f(nx, -1, 1), *pw = rand_f(nw, -1, 1), *pb = rand_f(s.Cout, -1, 1);
    float *ax = copy_f(px, nx), *aw = copy_f(pw, nw), *ab = copy_f(pb, s.Cout);
    conv2d_backward(ax, 1, aw, ab, c.r, c.x, c.w, &s, c.ws);
    check_accumulated3("conv2d", tag, (grad3_t){ax, aw, ab}, (grad3_t){px, pw, pb}, (grad3_t){dx, dw, db},
                       (grad3_sizes_t){nx, nw, (size_t)s.Cout});
    // each output alone: the same bits as with the others
    float *ox = alloc_f(nx), *ow = zeros_f(nw), *ob = zeros_f(s.Cout);
    conv2d_backward(ox, 0, NULL, NULL, c.r, c.x, c.w, &s, c.ws);
    conv2d_backward(NULL, 0, ow, NULL, c.r, c.x, c.w, &s, c.ws);
    conv2d_backward(NULL, 0, NULL, ob, c.r, c.x, c.w, &s, c.ws);
    snprintf(nm, sizeof nm, "outputs alone %s", tag);
    check_true(!memcmp(ox, dx, nx * 4) && !memcmp(ow, dw, nw * 4) && !memcmp(ob, db, (size_t)s.Cout * 4), nm);
    check_guard(tag, c.ws, nws);

    if (do_fd) {
        snprintf(nm, sizeof nm, "fd dx %s", tag);
        fd_check(nm, c.x, dx, nx, conv_loss, &c, 1e-2f, 2e-3, 2e-3, 40);
        snprintf(nm, sizeof nm, "fd dw %s", tag);
        fd_check(nm, c.w, dw, nw, conv_loss, &c, 1e-2f, 2e-3, 2e-3, 40);
        if (c.bias) {
            snprintf(nm, sizeof nm, "fd dbias %s", tag);
            fd_check(nm, c.bias, db, s.Cout, conv_loss, &c, 1e-2f, 2e-3, 2e-3, 40);
        }
    }
    test_release();
}

// The PyTorch references, on the current GEMM backend.
static void golden_cases(void) {
    for (size_t i = 0; i < sizeof g_golden_conv2d / sizeof g_golden_conv2d[0]; i++) {
        const golden_conv2d_t *g = &g_golden_conv2d[i];
        conv2d_shape_t s;
        memcpy(&s, g->shape, sizeof s);
        const size_t nx = conv2d_x_size(&s), ny = conv2d_y_size(&s), nw = conv2d_w_size(&s);
        float *ws = alloc_f(conv2d_workspace_floats(&s)), *y = alloc_f(ny), *dx = alloc_f(nx);
        float *dw = zeros_f(nw), *db = zeros_f(s.Cout);
        conv2d_forward(y, g->x, g->w, g->bias ? g->b : NULL, &s, ws);
        conv2d_backward(dx, 0, dw, g->bias ? db : NULL, g->dy, g->x, g->w, &s, ws);
        char nm[160];
        const char *be = backend_name(spk_gemm_get_backend());
        snprintf(nm, sizeof nm, "[%s] PyTorch case %zu: y", be, i);
        check_close(nm, y, g->y, ny, 1e-5, 1e-5);
        snprintf(nm, sizeof nm, "[%s] PyTorch case %zu: dx", be, i);
        check_close(nm, dx, g->dx, nx, 1e-5, 1e-5);
        snprintf(nm, sizeof nm, "[%s] PyTorch case %zu: dw", be, i);
        check_close(nm, dw, g->dw, nw, 1e-5, 1e-5);
        if (g->bias) {
            snprintf(nm, sizeof nm, "[%s] PyTorch case %zu: dbias", be, i);
            check_close(nm, db, g->db, (size_t)s.Cout, 1e-5, 1e-5);
        }
        test_release();
    }
}

// ---- the world-size-invariant mode ---------------------------------------------------------------
// A sample's output and input gradient the same alone as in the batch and on 1 or 2 threads; the
// exact weight and bias gradient sums the same for the batch split into two calls; all close to
// the default kernels.
static void invariant_case(conv2d_shape_t s, int group) {
    char tag[120];
    conv2d_tag(tag, sizeof tag, &s, 1);
    snprintf(tag + strlen(tag), sizeof tag - strlen(tag), " group %d", group);
    const size_t nx = conv2d_x_size(&s), ny = conv2d_y_size(&s), nw = conv2d_w_size(&s);
    const size_t xs = nx / s.B, ys = ny / s.B;
    float *x = rand_f(nx, -1, 1), *w = rand_f(nw, -0.5f, 0.5f), *bias = rand_f(s.Cout, -1, 1), *gy = rand_f(ny, -1, 1);
    float *ws = alloc_f(conv2d_workspace_floats_fixed(&s) + conv2d_workspace_floats(&s)), *tmp = alloc_f(nw);
    float *y2 = alloc_f(ny), *y1 = alloc_f(ny), *y = alloc_f(ny);
    conv2d_shape_t one = s;
    one.B = 1;
    int before = with_threads(2);
    conv2d_forward_fixed(y2, x, w, bias, &s, ws);
    with_threads(1);
    for (int b = 0; b < s.B; b++) conv2d_forward_fixed(y1 + b * ys, x + b * xs, w, bias, &one, ws);
    with_threads(before);
    check_true(memcmp(y1, y2, sizeof(float) * ny) == 0,
               cname("conv2d_forward_fixed %s: a sample alone == in the batch", tag));
    conv2d_forward(y, x, w, bias, &s, ws);
    check_close(cname("conv2d_forward_fixed %s vs conv2d_forward", tag), y2, y, ny, 1e-5, 1e-4);

    float *dx2 = rand_f(nx, -1, 1), *dx1 = rand_f(nx, -1, 1);  // overwritten
    xsum_t dw2 = host_sums((int64_t)nw), db2 = host_sums(s.Cout), dw1 = host_sums((int64_t)nw), db1 = host_sums(s.Cout);
    const int first = (s.B / group + 1) / 2 * group;  // whole groups in both calls
    conv2d_shape_t head = s, rest = s;
    head.B = first, rest.B = s.B - first;
    before = with_threads(2);
    conv2d_backward_exact(dx2, 0, tmp, dw2, db2, gy, x, w, &s, ws, group);
    with_threads(1);  // the batch in two calls, the second first
    conv2d_backward_exact(dx1 + first * xs, 0, tmp, dw1, db1, gy + first * ys, x + first * xs, w, &rest, ws, group);
    conv2d_backward_exact(dx1, 0, tmp, dw1, db1, gy, x, w, &head, ws, group);
    with_threads(before);
    check_true(
        memcmp(dx1, dx2, sizeof(float) * nx) == 0 && same_sums(dw1, dw2, (int64_t)nw) && same_sums(db1, db2, s.Cout),
        cname("conv2d_backward_exact %s: batch split, 1 or 2 threads: the same dx and sums", tag));
    float *dx = alloc_f(nx), *dw = zeros_f(nw), *db = zeros_f(s.Cout);
    conv2d_backward(dx, 0, dw, db, gy, x, w, &s, ws);
    check_close(cname("conv2d_backward_exact %s dx vs conv2d_backward", tag), dx2, dx, nx, 1e-5, 1e-4);
    check_close(cname("conv2d_backward_exact %s dw vs conv2d_backward", tag), sums_to_floats(dw2, (int64_t)nw), dw, nw,
                1e-4, 1e-4);
    check_close(cname("conv2d_backward_exact %s dbias vs conv2d_backward", tag), sums_to_floats(db2, s.Cout), db,
                s.Cout, 1e-4, 1e-4);
    test_release();
}

// ---- every backend against the CPU kernels -----------------------------------------------------
static void backend_case(const int *a) {
    conv2d_shape_t s = conv2d_shape_of(a);
    const int with_bias = a[13];
    const size_t nx = conv2d_x_size(&s), ny = conv2d_y_size(&s), nw = conv2d_w_size(&s);
    char t[96];
    conv2d_tag(t, sizeof t, &s, with_bias);
    float *x = rand_f(nx, -1, 1), *w = rand_f(nw, -0.5f, 0.5f), *bias = with_bias ? rand_f(s.Cout, -1, 1) : NULL;
    float *dy = rand_f(ny, -1, 1), *y = alloc_f(ny);
    float *ws = alloc_f(conv2d_workspace_floats(&s));
    conv2d_forward(y, x, w, bias, &s, ws);
    float *dx_ = dev_f(x, nx), *dw_ = dev_f(w, nw), *db_ = bias ? dev_f(bias, s.Cout) : NULL, *dy_ = dev_f(dy, ny);
    float *y_ = dev_f(NULL, ny), *ws_ = dev_f(NULL, g_be->conv2d_workspace_floats(&s));
    g_be->conv2d_forward(y_, dx_, dw_, db_, &s, ws_);
    cmp(cname("conv2d forward %s", t), y_, y, ny, TOL_GEMM);
    // inference's workspace: the forward's alone, no larger
    const size_t nf = g_be->conv2d_forward_workspace_floats(&s);
    check_true(nf <= g_be->conv2d_workspace_floats(&s), "conv2d: the forward's workspace within the whole one");
    float *fy_ = dev_f(NULL, ny), *fws_ = dev_f(NULL, nf);
    g_be->conv2d_forward(fy_, dx_, dw_, db_, &s, fws_);
    cmp(cname("conv2d forward in its own workspace %s", t), fy_, y, ny, TOL_GEMM);
    conv2d_call_t cpu = {&spk_backend_cpu, 0, &s, dy, x, w, NULL, NULL, ws},
                  dev = {g_be, 0, &s, dy_, dx_, dw_, NULL, NULL, ws_};
    backend_backward_checks("conv2d", t, conv2d_backward_call, &cpu, conv2d_backward_call, &dev,
                            (grad3_sizes_t){nx, nw, (size_t)s.Cout});
    // dx overwritten, whatever it held
    float *ox_ = dev_f(NULL, nx), *ox = alloc_f(nx);
    fill_nan(ox, nx);
    dev_set(ox_, ox, nx);
    g_be->conv2d_backward(ox_, 0, NULL, NULL, dy_, dx_, dw_, &s, ws_);
    conv2d_backward(ox, 0, NULL, NULL, dy, x, w, &s, ws);
    cmp(cname("conv2d dx overwritten %s", t), ox_, ox, nx, TOL_GEMM);

    // the invariant mode's forward (the invariant table) and exact backward
    const spk_backend_t *twin = spk_backend_invariant(g_be);
    float *iws = dev_f(NULL, twin->conv2d_workspace_floats(&s)), *hws = alloc_f(conv2d_workspace_floats_fixed(&s));
    conv2d_forward_fixed(y, x, w, bias, &s, hws);
    twin->conv2d_forward(y_, dx_, dw_, db_, &s, iws);
    cmp(cname("conv2d_forward_fixed %s", t), y_, y, ny, TOL_GEMM);
    conv2d_call_t icpu = {&spk_backend_cpu, 0, &s, dy, x, w, NULL, NULL, hws},
                  idev = {g_be, 0, &s, dy_, dx_, dw_, NULL, NULL, iws};
    backend_exact_checks("conv2d_backward_exact", t, conv2d_exact_call, &icpu, &idev, nx, nw, with_bias ? s.Cout : 0,
                         TOL_GEMM);
    dev_release();
    test_release();
}

static void backend_checks(void) {
    for (size_t i = 0; i < sizeof conv2d_backend_shapes / sizeof conv2d_backend_shapes[0]; i++)
        backend_case(conv2d_backend_shapes[i]);
}

// Winograd (kernels/conv2d.h: oneDNN's where it has one, kernels/cpu/conv2d_winograd.c's
// elsewhere) on the current GEMM backend: against the reference and the adjoint as above, on
// shapes that take it (3x3, stride 1, channels in sixteens, more than one transform chunk of
// 64; maps not multiples of the 4x4 tiles; more tiles than one block of 24) and on shapes that
// run direct; wide enough (512 channels) that the weight gradient's sums are kept once rather
// than per thread; not the direct convolution's bits (else it did not run), and the forward and
// input gradient the same bits on 1 and 2 threads.
// Where oneDNN has Winograd, the invariant mode's forward takes it when asked: not the direct
// convolution's bits.
static void fixed_winograd_case(conv2d_shape_t s) {
    if (!conv2d_dnnl_winograd_available()) return;
    const size_t ny = conv2d_y_size(&s);
    float *x = rand_f(conv2d_x_size(&s), -1, 1), *w = rand_f(conv2d_w_size(&s), -0.5f, 0.5f);
    float *ws = alloc_f(conv2d_workspace_floats_fixed(&s)), *yw = alloc_f(ny), *yd = alloc_f(ny);
    conv2d_forward_fixed(yw, x, w, NULL, &s, ws);
    conv2d_set_algorithm(CONV2D_ALGO_DIRECT);
    conv2d_forward_fixed(yd, x, w, NULL, &s, ws);
    conv2d_set_algorithm(CONV2D_ALGO_WINOGRAD);
    check_true(memcmp(yw, yd, ny * 4) != 0, "conv2d_forward_fixed: Winograd where asked for, not the direct bits");
    test_release();
}

static void winograd_checks(void) {
    conv2d_set_algorithm(CONV2D_ALGO_WINOGRAD);
    reference_case(conv2d_shape(2, 16, 32, 7, 9, 3, 3, 1, 1, 1, 1, 1, 1), 1, 1);
    reference_case(conv2d_shape(3, 32, 16, 5, 6, 3, 3, 1, 1, 1, 1, 1, 1), 0, 0);
    reference_case(conv2d_shape(1, 48, 48, 10, 25, 3, 3, 1, 1, 1, 1, 1, 1), 0, 0);
    reference_case(conv2d_shape(4, 80, 32, 16, 13, 3, 3, 1, 1, 1, 1, 1, 1), 1, 0);
    reference_case(conv2d_shape(2, 512, 512, 5, 6, 3, 3, 1, 1, 1, 1, 1, 1), 0, 0);  // the sums kept once
    reference_case(conv2d_shape(3, 16, 24, 9, 11, 3, 3, 1, 1, 1, 1, 1, 1), 1, 0);   // channels not in sixteens
    reference_case(conv2d_shape(2, 3, 4, 6, 7, 3, 3, 1, 1, 1, 1, 1, 1), 1, 0);      // nor these
    reference_case(conv2d_shape(2, 32, 32, 8, 10, 3, 3, 2, 2, 1, 1, 1, 1), 0, 0);   // not a Winograd shape
    // the invariant mode's plans of one sample: Winograd's too, as invariant
    invariant_case(conv2d_shape(4, 16, 32, 7, 9, 3, 3, 1, 1, 1, 1, 1, 1), 2);
    invariant_case(conv2d_shape(6, 32, 16, 5, 6, 3, 3, 1, 1, 1, 1, 1, 1), 3);
    invariant_case(conv2d_shape(20, 16, 32, 7, 9, 3, 3, 1, 1, 1, 1, 1, 1), 10);  // blocks of 8 and short ones
    invariant_case(conv2d_shape(16, 48, 32, 5, 6, 3, 3, 1, 1, 1, 1, 1, 1), 8);   // our Winograd's blocks of 8
    invariant_case(conv2d_shape(4, 32, 48, 25, 30, 3, 3, 1, 1, 1, 1, 1, 1), 2);  // of 1, 3 blocks of tiles
    fixed_winograd_case(conv2d_shape(2, 16, 32, 7, 9, 3, 3, 1, 1, 1, 1, 1, 1));
    const conv2d_shape_t s =
        conv2d_shape(1, 32, 48, 11, 18, 3, 3, 1, 1, 1, 1, 1, 1);  // blocks of 12 tiles on 2 threads, 18 on 1
    const size_t nx = conv2d_x_size(&s), ny = conv2d_y_size(&s), nw = conv2d_w_size(&s);
    const int threads = with_threads(2);  // the workspace is sized for the most threads it will see
    float *x = rand_f(nx, -1, 1), *w = rand_f(nw, -0.5f, 0.5f), *y[3], *dx[3], *dw[3];
    // a workspace sized under one algorithm serves the other (models in one process may differ)
    // (oneDNN's kernels are not instrumented, so the sizes are compared, not only the guard)
    const size_t nws_winograd = conv2d_workspace_floats(&s);
    conv2d_set_algorithm(CONV2D_ALGO_DIRECT);
    const size_t nws = conv2d_workspace_floats(&s);
    check_true(nws == nws_winograd, "winograd: the workspace size does not depend on the algorithm");
    float *ws = workspace_with_guard(nws);
    for (int k = 0; k < 3; k++) {  // direct; Winograd on 2 threads; on 1
        conv2d_set_algorithm(k ? CONV2D_ALGO_WINOGRAD : CONV2D_ALGO_DIRECT);
        with_threads(k == 2 ? 1 : 2);
        y[k] = alloc_f(ny), dx[k] = alloc_f(nx), dw[k] = zeros_f(nw);
        conv2d_forward(y[k], x, w, NULL, &s, ws);
        conv2d_backward(dx[k], 0, dw[k], NULL, y[k], x, w, &s, ws);
    }
    with_threads(threads);
    check_guard("winograd in a workspace sized under direct", ws, nws);
    check_true(memcmp(y[0], y[1], ny * 4) != 0 && memcmp(dw[0], dw[1], nw * 4) != 0,
               "winograd: its own rounding, not the direct convolution's bits");
    check_true(memcmp(y[1], y[2], ny * 4) == 0 && memcmp(dx[1], dx[2], nx * 4) == 0,
               "winograd: the forward and input gradient the same bits on 1 and 2 threads");
    conv2d_set_algorithm(CONV2D_ALGO_DIRECT);
    test_release();
}

// The height-strided 3x3 layers (kernels/cpu/conv2d_taps.c where the backend is not oneDNN, or
// oneDNN's kernels are AVX2's): the forward and input gradient the same bits on 1 and 2 threads.
static void strided_thread_checks(void) {
    const conv2d_shape_t s = conv2d_shape(3, 16, 32, 10, 13, 3, 3, 2, 1, 1, 1, 1, 1);
    const size_t nx = conv2d_x_size(&s), ny = conv2d_y_size(&s), nw = conv2d_w_size(&s);
    const int threads = with_threads(2);
    float *x = rand_f(nx, -1, 1), *w = rand_f(nw, -0.5f, 0.5f), *dy = rand_f(ny, -1, 1);
    float *ws = alloc_f(conv2d_workspace_floats(&s)), *y[2], *dx[2];
    for (int k = 0; k < 2; k++) {
        with_threads(2 - k);
        y[k] = alloc_f(ny), dx[k] = alloc_f(nx);
        conv2d_forward(y[k], x, w, NULL, &s, ws);
        conv2d_backward(dx[k], 0, NULL, NULL, dy, x, w, &s, ws);
    }
    with_threads(threads);
    check_true(memcmp(y[0], y[1], ny * 4) == 0 && memcmp(dx[0], dx[1], nx * 4) == 0,
               "stride (2, 1): the forward and input gradient the same bits on 1 and 2 threads");
    test_release();
}

// kernels/cpu/conv2d_taps.c called directly, on shapes beyond those conv2d.c gives it (other
// kernels, paddings, dilations and strides along the height), against the double reference and
// its adjoint; a guard band after its workspace; dx accumulated; NaN in the workspace at entry.
static void taps_case(conv2d_shape_t s, int with_bias) {
    if (!conv2d_taps_shape(&s)) {
        printf("conv2d_taps: no vector micro-kernel in this build: skipped\n");
        return;
    }
    const size_t nx = conv2d_x_size(&s), ny = conv2d_y_size(&s), nw = conv2d_w_size(&s);
    char tag[160];
    snprintf(tag, sizeof tag, "taps B%d %dx%d C%d->%d k%dx%d s%d p%d,%d d%d,%d", s.B, s.H, s.W, s.Cin, s.Cout, s.KH,
             s.KW, s.SH, s.PH, s.PW, s.DH, s.DW);
    const size_t nws = conv2d_taps_workspace_floats(&s);
    float *ws = workspace_with_guard(nws);
    fill_nan(ws, nws);
    float *x = rand_f(nx, -1, 1), *w = rand_f(nw, -0.5f, 0.5f), *bias = with_bias ? rand_f(s.Cout, -1, 1) : NULL;
    float *y = alloc_f(ny), *yref = alloc_f(ny), *dy = rand_f(ny, -1, 1);
    conv2d_forward_reference(yref, x, w, bias, &s);
    conv2d_taps_forward(y, x, w, bias, &s, ws);
    char nm[240];
    snprintf(nm, sizeof nm, "forward vs reference %s", tag);
    check_close(nm, y, yref, ny, 1e-5, 1e-5 * (1 + s.Cin * s.KH * s.KW));
    double *dxr = zeros_d(nx), *dwr = zeros_d(nw), *dbr = zeros_d(s.Cout);
    conv2d_backward_reference(dxr, dwr, dbr, dy, x, w, &s);
    float *dx = rand_f(nx, -1, 1), *dw = zeros_f(nw);
    fill_nan(ws, nws);
    conv2d_taps_backward(dx, 0, dw, dy, x, w, &s, ws);
    const double nsum = (double)s.B * conv2d_out_h(&s) * conv2d_out_w(&s);
    snprintf(nm, sizeof nm, "dx vs adjoint %s", tag);
    check_close_d(nm, dx, dxr, nx, 1e-4, 1e-5 * (1 + s.Cout * s.KH * s.KW));
    snprintf(nm, sizeof nm, "dw vs adjoint %s", tag);
    check_close_d(nm, dw, dwr, nw, 1e-4, 1e-5 * (1 + nsum));
    float *px = rand_f(nx, -1, 1), *ax = copy_f(px, nx);
    conv2d_taps_backward(ax, 1, NULL, dy, x, w, &s, ws);
    check_accumulated(tag, ax, px, dx, nx);
    check_guard(tag, ws, nws);
    test_release();
}

static void taps_checks(void) {
    taps_case(conv2d_shape(2, 16, 32, 9, 7, 3, 3, 2, 1, 1, 1, 1, 1), 1);    // CAM++'s front end
    taps_case(conv2d_shape(2, 16, 16, 1, 23, 1, 3, 1, 1, 0, 2, 1, 2), 0);   // CAM++'s context layers
    taps_case(conv2d_shape(3, 16, 16, 10, 11, 5, 5, 2, 1, 2, 2, 1, 1), 1);  // 5x5
    taps_case(conv2d_shape(2, 32, 16, 12, 9, 3, 3, 2, 1, 2, 1, 2, 1), 0);   // dilated height
    taps_case(conv2d_shape(2, 16, 32, 8, 10, 1, 1, 2, 1, 0, 0, 1, 1), 0);   // a 1x1 shortcut
    taps_case(conv2d_shape(2, 16, 16, 7, 12, 3, 3, 1, 1, 0, 0, 1, 1), 1);   // no padding
    taps_case(conv2d_shape(1, 16, 16, 13, 6, 3, 3, 5, 1, 1, 1, 1, 1), 0);   // rows no output reads
}

// A plan's primitives are made when first run, not when the workspace is sized: inference sizes
// the workspace of every layer for each new utterance length and runs one forward in four. A
// forward's workspace makes none of the backward's parts, holds less, and runs the forward the
// same way within it, before and after a backward's sizing has made them.
static void lazy_plan_checks(void) {
#ifdef SPK_USE_DNNL
    if (spk_gemm_set_backend(SPK_GEMM_DNNL) != 0) return;
    const conv2d_shape_t s = conv2d_shape(2, 8, 16, 11, 13, 3, 3, 1, 1, 1, 1, 1, 1);  // in no other case
    const size_t nx = conv2d_x_size(&s), ny = conv2d_y_size(&s), nw = conv2d_w_size(&s);
    const size_t nf = (conv2d_dnnl_forward_workspace_bytes(&s, CONV2D_F32) + 3) / 4;
    const plan_t *p = plan_lookup(&s, CONV2D_F32, CONV2D_ALGO_DIRECT, 0, 0);
    check_true(!p->fwd && !p->fwd_bias && !p->bwd_data && !p->bwd_weights, "plans: nothing generated by sizing");
    float *x = rand_f(nx, -1, 1), *y = alloc_f(ny), *y2 = alloc_f(ny), *w = rand_f(nw, -0.5f, 0.5f);
    float *dx = alloc_f(nx), *dw = zeros_f(nw), *wf = workspace_with_guard(nf);
    conv2d_dnnl_forward(y, x, w, NULL, &s, CONV2D_F32, CONV2D_ALGO_DIRECT, wf);
    check_guard("plans: the forward in its own workspace", wf, nf);
    p = plan_lookup(&s, CONV2D_F32, CONV2D_ALGO_DIRECT, 0, 0);
    check_true(p->fwd && !p->fwd_bias && !p->bwd_data && !p->bwd_weights, "plans: the forward run, alone");
    const size_t nb = (conv2d_dnnl_workspace_bytes(&s, CONV2D_F32) + 3) / 4;
    check_true(nf < nb && plan_lookup(&s, CONV2D_F32, CONV2D_ALGO_DIRECT, 0, 0)->complete,
               "plans: a backward's sizing makes its parts, in more bytes");
    float *ws = alloc_f(nb);
    conv2d_dnnl_forward(y2, x, w, NULL, &s, CONV2D_F32, CONV2D_ALGO_DIRECT, wf);
    check_guard("plans: the forward in its own workspace, the plan complete", wf, nf);
    check_true(memcmp(y, y2, ny * sizeof(float)) == 0, "plans: the same forward either way");
    conv2d_dnnl_backward(dx, 0, dw, y, x, w, &s, CONV2D_F32, CONV2D_ALGO_DIRECT, ws);
    p = plan_lookup(&s, CONV2D_F32, CONV2D_ALGO_DIRECT, 0, 0);
    check_true(!p->fwd_bias && (p->bwd_data || p->phases) && p->bwd_weights, "plans: the backward's once run");
#endif
}

// The plan cache holds a few hundred shapes at once (CAM++'s training in bf16 in the invariant
// mode uses 148) and evicts none of them; more shapes than it holds evict the least recently
// used, and a plan evicted and made again runs the same forward.
static void plan_cache_checks(void) {
#ifdef SPK_USE_DNNL
    if (spk_gemm_set_backend(SPK_GEMM_DNNL) != 0) return;
    enum { KEPT = 200, MANY = 1100, C = 8, W0 = 100 };  // widths W0 + i: in no other case
    conv2d_shape_t s[MANY];
    size_t bytes = 0;
    for (int i = 0; i < MANY; i++) {
        s[i] = conv2d_shape(1, C, C, 1, W0 + i, 1, 1, 1, 1, 0, 0, 1, 1);
        const size_t b = i < KEPT ? conv2d_dnnl_forward_workspace_bytes(&s[i], CONV2D_F32) : 0;
        bytes = b > bytes ? b : bytes;
    }
    const size_t ny = (size_t)C * (W0 + KEPT);
    float *x = rand_f((size_t)C * (W0 + MANY), -1, 1), *w = rand_f(C * C, -0.5f, 0.5f), *y = alloc_f(ny);
    float *first = alloc_f(KEPT * ny), *ws = alloc_f((bytes + 3) / 4);
    int kept = 1, evicted = 0, same = 1;
    for (int pass = 0; pass < 2; pass++)
        for (int i = 0; i < KEPT; i++) {
            if (pass == 1) kept &= plan_lookup(&s[i], CONV2D_F32, CONV2D_ALGO_DIRECT, 0, 0)->fwd != NULL;
            conv2d_dnnl_forward(pass ? y : first + i * ny, x, w, NULL, &s[i], CONV2D_F32, CONV2D_ALGO_DIRECT, ws);
            if (pass) same &= memcmp(y, first + i * ny, conv2d_y_size(&s[i]) * sizeof(float)) == 0;
        }
    check_true(kept && same, "plan cache: 200 shapes held at once, none evicted");
    // sized, not run: each plan made, its primitives not generated
    for (int i = KEPT; i < MANY; i++) (void)conv2d_dnnl_forward_workspace_bytes(&s[i], CONV2D_F32);
    for (int i = 0; i < KEPT; i++) {
        evicted += plan_lookup(&s[i], CONV2D_F32, CONV2D_ALGO_DIRECT, 0, 0)->fwd == NULL;
        conv2d_dnnl_forward(y, x, w, NULL, &s[i], CONV2D_F32, CONV2D_ALGO_DIRECT, ws);
        same &= memcmp(y, first + i * ny, conv2d_y_size(&s[i]) * sizeof(float)) == 0;
    }
    check_true(evicted > 0 && same, "plan cache: 1100 shapes evict the oldest; a plan made again, the same forward");
    test_release();
#endif
}

static void cpu_checks(void) {
    const spk_gemm_backend backends[2] = {SPK_GEMM_DNNL, SPK_GEMM_BLAS};
    const spk_gemm_backend keep = spk_gemm_get_backend();
    for (int k = 0; k < 2; k++) {
        if (spk_gemm_set_backend(backends[k]) != 0) {
            printf("conv2d: the %s path is not built in\n", backend_name(backends[k]));
            continue;
        }
        golden_cases();
        reference_case(conv2d_shape(2, 3, 4, 6, 7, 3, 3, 1, 1, 1, 1, 1, 1), 1, k == 0);
        reference_case(conv2d_shape(2, 4, 6, 9, 8, 3, 3, 2, 2, 1, 1, 1, 1), 0, k == 0);
        reference_case(conv2d_shape(3, 8, 16, 10, 9, 1, 1, 2, 2, 0, 0, 1, 1), 0, 0);
        reference_case(conv2d_shape(2, 3, 5, 11, 6, 3, 3, 2, 1, 1, 1, 1, 1), 1, 0);
        reference_case(conv2d_shape(1, 2, 3, 9, 12, 3, 5, 1, 2, 2, 1, 2, 1), 1, k == 0);
        reference_case(conv2d_shape(4, 1, 8, 16, 20, 3, 3, 1, 1, 1, 1, 1, 1), 0, 0);
        reference_case(conv2d_shape(2, 32, 32, 8, 10, 3, 3, 1, 1, 1, 1, 1, 1), 0, 0);
        // dilated, channels in eights: on AVX2 its blocked weight gradient would be oneDNN's
        // reference loops, so the plan falls back to channels-last
        reference_case(conv2d_shape(2, 8, 16, 9, 12, 3, 3, 1, 1, 2, 2, 2, 2), 1, 0);
        reference_case(conv2d_shape(2, 5, 3, 4, 4, 3, 3, 1, 1, 0, 0, 1, 1), 1, 0);    // no padding
        reference_case(conv2d_shape(4, 64, 16, 3, 4, 1, 1, 1, 1, 0, 0, 1, 1), 0, 0);  // a Bottleneck's 1x1s
        reference_case(conv2d_shape(4, 16, 64, 3, 4, 1, 1, 1, 1, 0, 0, 1, 1), 0, 0);
        reference_case(conv2d_shape(3, 8, 4, 1, 5, 1, 1, 1, 1, 0, 0, 1, 1), 1, k == 0);  // 1x1 with a bias
        reference_case(conv2d_shape(2, 256, 16, 1, 9, 1, 1, 1, 1, 0, 0, 1, 1), 0, 0);    // 1x1 of 256 inputs
        // strided heights (CAM++'s front end: ours where oneDNN's kernels are AVX2's or it is not
        // the backend), including strides whose input rows some classes of taps leave alone
        reference_case(conv2d_shape(2, 16, 32, 9, 7, 3, 3, 2, 1, 1, 1, 1, 1), 1, k == 0);
        reference_case(conv2d_shape(3, 32, 16, 8, 13, 3, 3, 2, 1, 1, 1, 1, 1), 0, 0);
        reference_case(conv2d_shape(2, 16, 16, 11, 8, 3, 3, 3, 1, 1, 1, 1, 1), 1, 0);
        reference_case(conv2d_shape(2, 16, 16, 13, 5, 3, 3, 4, 1, 1, 1, 1, 1), 0, 0);
        reference_case(conv2d_shape(2, 16, 32, 8, 10, 1, 1, 2, 1, 0, 0, 1, 1), 0, 0);  // its shortcuts
        reference_case(conv2d_shape(2, 16, 32, 1, 21, 1, 3, 1, 1, 0, 2, 1, 2), 1, 0);  // its context layers
        // a narrow strided 1x1 on maps large enough that oneDNN 2.6's weight gradient overran its
        // scratchpad (kernels/cpu/conv2d.c: im2col takes it)
        reference_case(conv2d_shape(2, 4, 8, 80, 100, 1, 1, 2, 2, 0, 0, 1, 1), 0, 0);
        invariant_case(conv2d_shape(4, 8, 16, 9, 10, 3, 3, 2, 2, 1, 1, 1, 1), 1);
        invariant_case(conv2d_shape(6, 8, 8, 7, 9, 3, 3, 1, 1, 1, 1, 1, 1), 3);
        invariant_case(conv2d_shape(4, 1, 8, 12, 10, 3, 3, 1, 1, 1, 1, 1, 1), 2);  // the first layer
        invariant_case(conv2d_shape(4, 16, 32, 6, 5, 1, 1, 2, 2, 0, 0, 1, 1), 1);
        // kernels/cpu/conv2d_dnnl_fixed.c's plans of 8 samples on maps of at most 1024 pixels: whole
        // and short blocks; groups of whole blocks, of a block and a part, of less than a block; a
        // map above 1024 pixels (a sample a plan)
        invariant_case(conv2d_shape(20, 16, 16, 6, 7, 3, 3, 1, 1, 1, 1, 1, 1), 4);
        invariant_case(conv2d_shape(20, 16, 16, 6, 7, 3, 3, 1, 1, 1, 1, 1, 1), 10);
        invariant_case(conv2d_shape(32, 16, 32, 12, 14, 3, 3, 2, 2, 1, 1, 1, 1), 16);
        invariant_case(conv2d_shape(3, 8, 8, 36, 30, 3, 3, 1, 1, 1, 1, 1, 1), 1);
        // pointwise layers' weight gradient by tiles of 256 x 256 (CAM++'s dense layers: one row),
        // short tiles both ways, and a group of samples of several rows each
        invariant_case(conv2d_shape(4, 300, 260, 1, 20, 1, 1, 1, 1, 0, 0, 1, 1), 2);
        invariant_case(conv2d_shape(6, 24, 40, 5, 7, 1, 1, 1, 1, 0, 0, 1, 1), 3);
        winograd_checks();
        if (backends[k] == SPK_GEMM_BLAS) strided_thread_checks();
        // a workspace sized under either backend serves the taps kernels (AVX-512 CPUs run them
        // under the im2col backend only)
        const conv2d_shape_t strided = conv2d_shape(2, 32, 32, 8, 10, 3, 3, 2, 1, 1, 1, 1, 1);
        check_true(
            !conv2d_taps_shape(&strided) || conv2d_workspace_floats(&strided) >= conv2d_taps_workspace_floats(&strided),
            "stride (2, 1): the workspace holds the taps kernels' on either backend");
    }
    lazy_plan_checks();
    plan_cache_checks();
#ifdef SPK_USE_DNNL
    if (spk_gemm_set_backend(SPK_GEMM_DNNL) == 0) parts_checks(CONV2D_F32);
#endif
    spk_gemm_set_backend(keep);
    taps_checks();
}

int main(int argc, char **argv) { return test_main(argc, argv, "test_conv2d", 7, cpu_checks, backend_checks); }
