// conv1d_bf16: forward and backward against the double references of the float32 convolution
// (tests/kernels/conv_reference.h) evaluated on the bf16-rounded x, w and dy (products are
// exact in float32, so only float32 summation error is allowed), against the float32 kernel on
// the unrounded operands at bf16 tolerance, the rounded input it stores (folded), accumulation, NULL
// outputs, the advertised workspace, same bits twice; on both schedules and on the native and
// widened bf16 GEMMs. The invariant mode's twins: a group alone == in the batch, on 1, 2 or 8
// threads, xh stored by groups, the exact sums the same for a batch split between calls, and
// against the references. Then every backend against the CPU kernels.
#include <stdio.h>
#include <string.h>

#include "backends.h"
#include "conv_reference.h"
#include "exact_check.h"
#include "kernels/conv1d.h"
#include "kernels/conv1d_bf16.h"
#include "kernels/cpu/gemm_row_tiles.h"
#include "kernels/gemm.h"
#include "kernels/gemm_bf16.h"

#define GUARD 4096

static spk_bf16 *alloc_h(size_t n) { return (spk_bf16 *)test_alloc(n * sizeof(spk_bf16)); }

// The floats of bf16(x): what the bf16 kernels multiply.
static float *rounded(const float *x, size_t n) {
    spk_bf16 *h = alloc_h(n);
    float *r = alloc_f(n);
    bf16_from_f32(h, x, n);
    bf16_to_f32(r, h, n);
    return r;
}

// Normalised error ||got - want|| / ||want||
static double rel_err(const float *got, const float *want, size_t n) {
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        num += ((double)got[i] - want[i]) * ((double)got[i] - want[i]);
        den += (double)want[i] * want[i];
    }
    return den > 0 ? sqrt(num / den) : sqrt(num);
}

typedef struct {
    const char *name;
    conv1d_algo algo;
    int widened;  // the float32 GEMM instead of the native bf16 one
} config;

static void run_case(int B, int Cin, int Cout, int T, int K, int d) {
    const size_t nx = (size_t)B * Cin * T, ny = (size_t)B * Cout * T, nw = (size_t)Cout * Cin * K;
    float *x = rand_f(nx, -1, 1), *w = rand_f(nw, -0.5f, 0.5f), *bias = rand_f(Cout, -1, 1), *r = rand_f(ny, -1, 1);
    float *xr = rounded(x, nx), *wr = rounded(w, nw), *rr = rounded(r, ny);
    spk_bf16 *wh = alloc_h(nw);
    bf16_from_f32(wh, w, nw);
    // references: the float32 convolution's own, on the rounded operands (double sums)
    float *yref = alloc_f(ny);
    conv1d_forward_reference(yref, xr, wr, bias, B, Cin, Cout, T, K, d);
    double *dxr = zeros_d(nx), *dwr = zeros_d(nw), *dbr = zeros_d(Cout);
    conv_backward_reference(dxr, dwr, dbr, rr, xr, wr, B, Cin, Cout, T, K, d);
    double *dbr_exact = zeros_d(Cout);  // the bias gradient sums the float32 dy, unrounded
    for (int b = 0; b < B; b++)
        for (int co = 0; co < Cout; co++)
            for (int t = 0; t < T; t++) dbr_exact[co] += r[((size_t)b * Cout + co) * T + t];
    // and the float32 kernel on the unrounded operands, for the bf16 tolerance check
    float *y32 = alloc_f(ny), *ws32 = alloc_f(conv1d_workspace_floats(B, Cin, Cout, T, K, d));
    conv1d_forward(y32, x, w, bias, B, Cin, Cout, T, K, d, ws32);

    const size_t nws = conv1d_bf16_workspace_floats(B, Cin, Cout, T, K, d);
    float *ws = alloc_f(nws + GUARD);
    for (size_t i = 0; i < GUARD; i++) ws[nws + i] = 1234.5f;
    float *y = alloc_f(ny), *y2 = alloc_f(ny);
    spk_bf16 *xh = alloc_h(nx), *xh_want = alloc_h(nx);  // (Cin, B*T): the batch folded into time
    for (int b = 0; b < B; b++)
        for (int c = 0; c < Cin; c++)
            for (int t = 0; t < T; t++)
                xh_want[((size_t)c * B + b) * T + t] = spk_bf16_round(x[((size_t)b * Cin + c) * T + t]);
    float *dx = alloc_f(nx), *dw = alloc_f(nw), *db = alloc_f(Cout);
    float *ax = alloc_f(nx), *aw = alloc_f(nw), *ab = alloc_f(Cout);
    float *px = rand_f(nx, -1, 1), *pw = rand_f(nw, -1, 1), *pb = rand_f(Cout, -1, 1);
    float *ox = alloc_f(nx), *ow = alloc_f(nw), *ob = alloc_f(Cout);

    const spk_gemm_backend library = spk_gemm_get_backend();
    const config configs[4] = {{"per-sample", CONV1D_PER_SAMPLE, 0},
                               {"folded", CONV1D_FOLDED, 0},
                               {"per-sample, widened", CONV1D_PER_SAMPLE, 1},
                               {"folded, widened", CONV1D_FOLDED, 1}};
    const int before = with_threads(1);
    for (int i = 0; i < 8; i++) {  // each configuration on 1 thread, and on 2 (the folded ones share chunks)
        const int c = i / 2;
        if (!configs[c].widened && !spk_gemm_bf16_native()) continue;  // no native bf16 here
        spk_gemm_set_backend(configs[c].widened ? SPK_GEMM_BLAS : library);
        conv1d_set_algo(configs[c].algo);
        with_threads(1 + i % 2);
        char tag[160], nm[260];
        snprintf(tag, sizeof tag, "[%s, %d threads] B%d Cin%d Cout%d T%d K%d d%d", configs[c].name, 1 + i % 2, B, Cin,
                 Cout, T, K, d);

        fill_nan(y, ny);
        memset(xh, 0xff, nx * sizeof(spk_bf16));
        conv1d_bf16_forward(y, xh, x, wh, bias, B, Cin, Cout, T, K, d, ws);
        snprintf(nm, sizeof nm, "conv_bf16 fwd vs reference on rounded operands %s", tag);
        check_close(nm, y, yref, ny, 1e-5, 1e-5 * (1 + Cin * K) / 8.0);
        snprintf(nm, sizeof nm, "conv_bf16 stores bf16(x), folded %s", tag);
        check_true(memcmp(xh, xh_want, nx * sizeof(spk_bf16)) == 0, nm);
        snprintf(nm, sizeof nm, "conv_bf16 fwd within bf16 tolerance of fp32 (%.1e) %s", rel_err(y, y32, ny), tag);
        check_true(rel_err(y, y32, ny) < 1e-2, nm);
        fill_nan(y2, ny);
        conv1d_bf16_forward(y2, xh, NULL, wh, bias, B, Cin, Cout, T, K, d, ws);  // x NULL: xh as it is
        snprintf(nm, sizeof nm, "conv_bf16 fwd from stored xh, same bits %s", tag);
        check_close(nm, y2, y, ny, 0, 0);

        // the bias gradient sums the float32 dy (dbr_exact), the others the rounded operands
        const grad3_t fresh = {dx, dw, db};
        const grad3_sizes_t sizes = {nx, nw, (size_t)Cout};
        conv_call_t bc = conv_call_bf16(&spk_backend_cpu, r, xh, wh, B, Cin, Cout, T, K, d, ws);
        backward_zeroed(conv_backward_call, &bc, fresh, sizes);
        check_conv_grads("conv_bf16", tag, fresh, dxr, dwr, dbr_exact, sizes, B, Cout, T, K);
        check_backward_contract("conv_bf16", tag, conv_backward_call, &bc, fresh, (grad3_t){px, pw, pb},
                                (grad3_t){ax, aw, ab}, (grad3_t){ox, ow, ob}, sizes);
    }
    with_threads(before);
    spk_gemm_set_backend(library);
    conv1d_set_algo(CONV1D_AUTO);
    int guard_ok = 1;
    for (size_t i = 0; i < GUARD; i++) guard_ok &= ws[nws + i] == 1234.5f;
    char gm[160];
    snprintf(gm, sizeof gm, "conv_bf16 workspace bound B%d Cin%d Cout%d T%d K%d d%d", B, Cin, Cout, T, K, d);
    check_true(guard_ok, gm);
    test_release();
}

// ---- the world-size-invariant mode ----------------------------------------------------------
// x (B, C, T) rounded into the mode's layout (kernels/conv1d_bf16.h): groups of `group` samples,
// each folded (C, group*T).
static spk_bf16 *by_groups(const float *x, int B, int C, int T, int group) {
    spk_bf16 *h = alloc_h((size_t)B * C * T);
    for (int b = 0; b < B; b++)
        for (int c = 0; c < C; c++)
            for (int t = 0; t < T; t++)
                h[(((size_t)(b / group) * C + c) * group + b % group) * T + t] =
                    spk_bf16_round(x[((size_t)b * C + c) * T + t]);
    return h;
}

static void invariant_case(int B, int Cin, int Cout, int T, int K, int d, int group, int widened) {
    char tag[128], nm[260];
    snprintf(tag, sizeof tag, "[%s] B%d Cin%d Cout%d T%d K%d d%d group %d", widened ? "widened" : "native", B, Cin,
             Cout, T, K, d, group);
    const size_t nx = (size_t)B * Cin * T, ny = (size_t)B * Cout * T, nw = (size_t)Cout * Cin * K;
    float *x = rand_f(nx, -1, 1), *w = rand_f(nw, -0.5f, 0.5f), *bias = rand_f(Cout, -1, 1), *gy = rand_f(ny, -1, 1);
    float *xr = rounded(x, nx), *wr = rounded(w, nw), *gr = rounded(gy, ny);
    spk_bf16 *wh = alloc_h(nw), *xh2 = alloc_h(nx), *xh1 = alloc_h(nx), *xh8 = alloc_h(nx);
    spk_bf16 *xh_want = by_groups(x, B, Cin, T, group);
    bf16_from_f32(wh, w, nw);
    float *ws = alloc_f(conv1d_bf16_workspace_floats_fixed(B, Cin, Cout, T, K, d));
    float *y2 = alloc_f(ny), *y1 = alloc_f(ny), *y8 = alloc_f(ny), *yref = alloc_f(ny);
    int before = with_threads(2);
    conv1d_bf16_forward_grouped(y2, xh2, x, wh, bias, B, Cin, Cout, T, K, d, ws, group);
    with_threads(8);
    conv1d_bf16_forward_grouped(y8, xh8, x, wh, bias, B, Cin, Cout, T, K, d, ws, group);
    with_threads(1);
    for (int b = 0; b < B; b += group)
        conv1d_bf16_forward_grouped(y1 + (size_t)b * Cout * T, xh1 + (size_t)b * Cin * T, x + (size_t)b * Cin * T, wh,
                                    bias, group, Cin, Cout, T, K, d, ws, group);
    with_threads(before);
    snprintf(nm, sizeof nm,
             "conv1d_bf16_forward_grouped %s: a group alone == in the batch, on 1, 2 or 8 threads, xh = bf16(x) by "
             "groups",
             tag);
    check_true(memcmp(y1, y2, sizeof(float) * ny) == 0 && memcmp(y8, y2, sizeof(float) * ny) == 0 &&
                   memcmp(xh2, xh_want, nx * 2) == 0 && memcmp(xh1, xh_want, nx * 2) == 0 &&
                   memcmp(xh8, xh_want, nx * 2) == 0,
               nm);
    if (group == 1) {  // the fixed forward is the grouped one's groups of one sample
        conv1d_bf16_forward_fixed(y8, xh8, x, wh, bias, B, Cin, Cout, T, K, d, ws);
        snprintf(nm, sizeof nm, "conv1d_bf16_forward_fixed %s == grouped by one sample", tag);
        check_true(memcmp(y8, y2, sizeof(float) * ny) == 0 && memcmp(xh8, xh_want, nx * 2) == 0, nm);
    }
    conv1d_forward_reference(yref, xr, wr, bias, B, Cin, Cout, T, K, d);
    snprintf(nm, sizeof nm, "conv1d_bf16_forward_grouped %s vs reference on rounded operands", tag);
    check_close(nm, y2, yref, ny, 1e-5, 1e-5 * (1 + Cin * K) / 8.0);

    conv_call_t c = conv_call_bf16(&spk_backend_cpu, gy, xh2, wh, B, Cin, Cout, T, K, d, ws);
    c.group = group;
    const exact_grads_t g = conv_exact_split_check("conv1d_bf16_backward_exact", tag, &c);
    spk_bf16 *gyh = by_groups(gy, B, Cout, T, group);  // the output gradient rounded already: the same dx and dw
    conv_call_t ch = c;
    ch.dyh = gyh;
    const exact_grads_t gh = conv_exact_split_check("conv1d_bf16_backward_exact from dyh", tag, &ch);
    snprintf(nm, sizeof nm, "conv1d_bf16_backward_exact %s: dy rounded already (dyh), the same dx and dw", tag);
    check_true(memcmp(gh.dx, g.dx, sizeof(float) * nx) == 0 && same_sums(gh.dw, g.dw, (int64_t)nw), nm);
    double *dxr = zeros_d(nx), *dwr = zeros_d(nw), *dbr = zeros_d(Cout);
    conv_backward_reference(dxr, dwr, dbr, gr, xr, wr, B, Cin, Cout, T, K, d);
    float *fdx = alloc_f(nx), *fdw = alloc_f(nw), *fdb = alloc_f(Cout);
    for (size_t i = 0; i < nx; i++) fdx[i] = (float)dxr[i];
    for (size_t i = 0; i < nw; i++) fdw[i] = (float)dwr[i];
    for (int co = 0; co < Cout; co++) {  // the bias gradient sums the float32 dy
        double acc = 0;
        for (int b = 0; b < B; b++)
            for (int t = 0; t < T; t++) acc += gy[((size_t)b * Cout + co) * T + t];
        fdb[co] = (float)acc;
    }
    snprintf(nm, sizeof nm, "conv1d_bf16_backward_exact %s dx vs reference", tag);
    check_close(nm, g.dx, fdx, nx, 1e-5, 1e-5 * (1 + Cout * K) / 8.0);
    snprintf(nm, sizeof nm, "conv1d_bf16_backward_exact %s dw vs reference", tag);
    check_close(nm, sums_to_floats(g.dw, (int64_t)nw), fdw, nw, 1e-5, 1e-5 * (1 + B * T) / 8.0);
    snprintf(nm, sizeof nm, "conv1d_bf16_backward_exact %s dbias vs reference", tag);
    check_close(nm, sums_to_floats(g.db, Cout), fdb, Cout, 1e-5, 1e-5 * (1 + B * T) / 8.0);
    test_release();
}

static void invariant_checks(void) {
    const spk_gemm_backend library = spk_gemm_get_backend();
    for (int widened = 0; widened < 2; widened++) {
        if (!widened && !spk_gemm_bf16_native()) continue;
        spk_gemm_set_backend(widened ? SPK_GEMM_BLAS : library);
        invariant_case(6, 32, 48, 40, 3, 2, 1, widened);
        invariant_case(6, 32, 48, 40, 3, 2, 3, widened);
        invariant_case(5, 64, 40, 30, 1, 1, 1, widened);
        invariant_case(4, 200, 300, 12, 3, 1, 2, widened);  // 3 x 3 blocks of the exact weight gradient
        invariant_case(4, 280, 520, 6, 3, 1, 2, widened);   // 2 blocks: 8 threads take tiles of their rows
        invariant_case(4, 256, 512, 20, 1, 1, 2, widened);
        invariant_case(8, 16, 24, 1000, 3, 2, 4, widened);  // groups of two chunks each
        invariant_case(8, 16, 24, 1000, 1, 1, 4, widened);  // read in place, by chunks and whole groups
        if (!widened)  // oneDNN's bf16 matmul gives row tiles their blocks' bits: 8 threads took tiles
            check_true(gemm_row_tiles_allowed() > 0,
                       "conv1d_bf16_backward_exact: tiles of the weight gradient's blocks");
    }
    spk_gemm_set_backend(library);
}

static void cpu_checks(void) {
    if (!spk_gemm_bf16_native()) printf("test_conv1d_bf16: no native bf16 GEMM here; the widened path only\n");
    run_case(2, 3, 4, 7, 1, 1);
    run_case(2, 3, 5, 2, 3, 1);  // pad 1, T = 2
    run_case(3, 4, 3, 3, 3, 2);  // pad 2, T = 3
    run_case(2, 4, 4, 5, 3, 4);  // pad 4, T = 5
    run_case(2, 3, 4, 9, 5, 2);
    run_case(3, 7, 5, 16, 3, 2);
    run_case(9, 4, 3, 500, 3, 3);      // several chunks of the folded schedule
    run_case(12, 32, 48, 96, 3, 2);    // threaded per-sample loops
    run_case(8, 32, 160, 128, 1, 1);   // K = 1, Cout > Cin: dW split by rows
    run_case(1, 1024, 1024, 3, 1, 1);  // >= 2^20 weights: transposed weight, folded weight gradient
    invariant_checks();
}

// ---- every backend against the CPU kernels --------------------------------------------------
// The output gradient handed over rounded and folded (dyh, dy and dbias NULL): the bits of the
// call that rounds dy itself, dx overwritten and accumulated, dw accumulated.
static void dyh_check(const char *tag, conv_call_t c, size_t nx, size_t nw) {
    const size_t ny = (size_t)c.B * c.Cout * c.T;
    spk_bf16 *dyh = (spk_bf16 *)dev_alloc(ny * sizeof(spk_bf16));
    c.be->bf16_fold_from_f32(dyh, NULL, c.dy, c.B, c.Cout, c.T);
    for (int acc = 0; acc < 2; acc++) {
        float *x0 = rand_f(nx, -1, 1), *w0 = rand_f(nw, -1, 1);
        float *dx1 = dev_f(x0, nx), *dw1 = dev_f(w0, nw), *dx2 = dev_f(x0, nx), *dw2 = dev_f(w0, nw);
        c.be->conv1d_bf16_backward(dx1, acc, dw1, NULL, c.dy, NULL, c.xh, c.wh, c.B, c.Cin, c.Cout, c.T, c.K, c.d,
                                   c.ws);
        c.be->conv1d_bf16_backward(dx2, acc, dw2, NULL, NULL, dyh, c.xh, c.wh, c.B, c.Cin, c.Cout, c.T, c.K, c.d, c.ws);
        same_bits(cname("conv1d_bf16 dx from dyh (accumulate %d) %s", acc, tag), dx2, dx1, nx);
        same_bits(cname("conv1d_bf16 dw from dyh %s", tag), dw2, dw1, nw);
    }
}

// The rounded input a forward on the backend stored (dev_xh) has the CPU's bits (want).
static void stored_input_check(const char *op, const char *tag, const spk_bf16 *dev_xh, const spk_bf16 *want,
                               size_t nx) {
    spk_bf16 *got = alloc_h(nx);
    g_be->download(got, dev_xh, nx * 2);
    g_be_checks++;
    if (memcmp(got, want, nx * 2) != 0) {
        printf("FAIL [%s] %s stored input differs %s\n", g_be->name, op, tag);
        g_failures++;
    }
}

static void backend_case(int B, int Cin, int Cout, int T, int K, int d, int with_bias) {
    const conv_case_t cc = conv_case(B, Cin, Cout, T, K, d, with_bias);
    const char *tag = cc.tag;
    const size_t nx = cc.nx, ny = cc.ny, nw = cc.nw;
    float *x = cc.x, *w = cc.w, *y = cc.y, *bias = cc.bias;
    spk_bf16 *wh = alloc_h(nw), *xh = alloc_h(nx);
    bf16_from_f32(wh, w, nw);
    float *ws = alloc_f(conv1d_bf16_workspace_floats(B, Cin, Cout, T, K, d));
    conv1d_bf16_forward(y, xh, x, wh, bias, B, Cin, Cout, T, K, d, ws);
    float *dws = dev_f(NULL, g_be->conv1d_bf16_workspace_floats(B, Cin, Cout, T, K, d));
    float *dx = dev_f(x, nx), *db = with_bias ? dev_f(bias, Cout) : NULL, *dy = dev_f(NULL, ny);
    spk_bf16 *dwh = (spk_bf16 *)dev_alloc(nw * 2), *dxh = (spk_bf16 *)dev_alloc(nx * 2);
    g_be->upload(dwh, wh, nw * 2);
    g_be->conv1d_bf16_forward(dy, dxh, dx, dwh, db, B, Cin, Cout, T, K, d, dws);
    cmp(cname("conv1d_bf16 forward %s", tag), dy, y, ny, TOL_GEMM);
    stored_input_check("conv1d_bf16", tag, dxh, xh, nx);

    float *gy = rand_f(ny, -1, 1), *dgy = dev_f(gy, ny);
    conv_call_t on_cpu = conv_call_bf16(&spk_backend_cpu, gy, xh, wh, B, Cin, Cout, T, K, d, ws),
                on_dev = conv_call_bf16(g_be, dgy, dxh, dwh, B, Cin, Cout, T, K, d, dws);
    backend_backward_checks("conv1d_bf16", tag, conv_backward_call, &on_cpu, conv_backward_call, &on_dev,
                            (grad3_sizes_t){nx, nw, (size_t)Cout});
    conv_dx_set_check("conv1d_bf16", tag, on_dev, nx, nw, (size_t)Cout);
    dyh_check(tag, on_dev, nx, nw);

    // the invariant mode's forward (the invariant table) and exact backward, xh unfolded
    const spk_backend_t *twin = spk_backend_invariant(g_be);
    float *fws = alloc_f(conv1d_bf16_workspace_floats_fixed(B, Cin, Cout, T, K, d));
    float *iws = dev_f(NULL, twin->conv1d_bf16_workspace_floats(B, Cin, Cout, T, K, d));
    conv1d_bf16_forward_fixed(y, xh, x, wh, bias, B, Cin, Cout, T, K, d, fws);
    twin->conv1d_bf16_forward(dy, dxh, dx, dwh, db, B, Cin, Cout, T, K, d, iws);
    cmp(cname("conv1d_bf16_forward_fixed %s", tag), dy, y, ny, TOL_GEMM);
    stored_input_check("conv1d_bf16_forward_fixed", tag, dxh, xh, nx);
    conv_call_t icpu = conv_call_bf16(&spk_backend_cpu, gy, xh, wh, B, Cin, Cout, T, K, d, fws),
                idev = conv_call_bf16(g_be, dgy, dxh, dwh, B, Cin, Cout, T, K, d, iws);
    backend_exact_checks("conv1d_bf16_backward_exact", tag, conv_exact_call, &icpu, &idev, nx, nw, with_bias ? Cout : 0,
                         TOL_GEMM);
    spk_bf16 *gyh = alloc_h(ny), *dgyh = (spk_bf16 *)dev_alloc(ny * 2);
    bf16_from_f32(gyh, gy, ny);
    g_be->upload(dgyh, gyh, ny * 2);
    conv_call_t idev_h = idev;  // the output gradient rounded already
    idev_h.dyh = dgyh;
    backend_exact_checks("conv1d_bf16_backward_exact from dyh", tag, conv_exact_call, &icpu, &idev_h, nx, nw, 0,
                         TOL_GEMM);
    if (B % 2 == 0) {  // groups of two samples: the grouped forward, its layout, the exact backward
        spk_bf16 *gxh = alloc_h(nx), *dgxh = (spk_bf16 *)dev_alloc(nx * 2);
        conv1d_bf16_forward_grouped(y, gxh, x, wh, bias, B, Cin, Cout, T, K, d, fws, 2);
        g_be->conv1d_bf16_forward_grouped(dy, dgxh, dx, dwh, db, B, Cin, Cout, T, K, d, iws, 2);
        cmp(cname("conv1d_bf16_forward_grouped %s group 2", tag), dy, y, ny, TOL_GEMM);
        stored_input_check("conv1d_bf16_forward_grouped group 2", tag, dgxh, gxh, nx);
        conv_call_t gcpu = icpu, gdev = idev;
        gcpu.xh = gxh, gdev.xh = dgxh, gcpu.group = gdev.group = 2;
        backend_exact_checks("conv1d_bf16_backward_exact group 2", tag, conv_exact_call, &gcpu, &gdev, nx, nw,
                             with_bias ? Cout : 0, TOL_GEMM);
    }
    dev_release();
    test_release();
}

static void backend_checks(void) { conv_backend_checks(backend_case); }

int main(int argc, char **argv) { return test_main(argc, argv, "test_conv1d_bf16", 4321, cpu_checks, backend_checks); }
