// conv1d: GEMM path vs a direct reference (several K, dilation, T down to pad + 1, several
// chunkings of the batch), gradients by finite differences, accumulation, NULL outputs. The
// invariant mode's: a sample's output and input gradient the same alone as in a batch and on 1 or
// 2 threads, the exact weight and bias gradient sums the same for a batch split between calls,
// all close to the default kernels. Then every backend against the CPU kernels
// (tests/kernels/backends.h).
#include <stdio.h>
#include <string.h>

#include "backends.h"
#include "conv_reference.h"
#include "exact_check.h"
#include "kernels/conv1d.h"
#include "kernels/cpu/gemm_row_tiles.h"
#include "kernels/gemm.h"

#define GUARD 4096

typedef struct {
    int B, Cin, Cout, T, K, d;
    float *x, *w, *bias, *y, *r, *ws;
} conv_ctx;

static void conv_backward_of(void *p, grad3_t g) {
    conv_ctx *c = (conv_ctx *)p;
    conv1d_backward(g.x, 1, g.w, g.b, c->r, c->x, c->w, c->B, c->Cin, c->Cout, c->T, c->K, c->d, c->ws);
}

static double conv_loss(void *p) {
    conv_ctx *c = (conv_ctx *)p;
    conv1d_forward(c->y, c->x, c->w, c->bias, c->B, c->Cin, c->Cout, c->T, c->K, c->d, c->ws);
    return dot_d(c->y, c->r, (size_t)c->B * c->Cout * c->T);
}

typedef struct {
    spk_gemm_backend backend;
    conv1d_algo algo;
    const char *name;
} config;
static const config g_configs[4] = {
    {SPK_GEMM_BLAS, CONV1D_FOLDED, "blas/folded"},
    {SPK_GEMM_BLAS, CONV1D_PER_SAMPLE, "blas/per-sample"},
    {SPK_GEMM_DNNL, CONV1D_FOLDED, "dnnl/folded"},
    {SPK_GEMM_DNNL, CONV1D_PER_SAMPLE, "dnnl/per-sample"},
};

static spk_gemm_backend g_default_backend;

// Every case runs on both schedules of the default GEMM backend and on the default schedule of
// the other backend (when compiled in); the (slow, double) references are computed once.
static void run_case(int B, int Cin, int Cout, int T, int K, int d, int do_fd) {
    const size_t nx = (size_t)B * Cin * T, ny = (size_t)B * Cout * T, nw = (size_t)Cout * Cin * K;
    conv_ctx c = {B, Cin, Cout, T, K, d, NULL, NULL, NULL, NULL, NULL, NULL};
    c.x = rand_f(nx, -1, 1);
    c.w = rand_f(nw, -0.5f, 0.5f);
    c.bias = rand_f(Cout, -1, 1);
    c.y = alloc_f(ny);
    c.r = rand_f(ny, -1, 1);
    // workspace of exactly the advertised size, followed by a guard band that must survive
    const size_t nws = conv1d_workspace_floats(B, Cin, Cout, T, K, d);
    c.ws = alloc_f(nws + GUARD);
    for (size_t i = 0; i < GUARD; i++) c.ws[nws + i] = 1234.5f;
    float *yref = alloc_f(ny);
    float *yref_nb = alloc_f(ny);
    conv1d_forward_reference(yref, c.x, c.w, c.bias, B, Cin, Cout, T, K, d);
    conv1d_forward_reference(yref_nb, c.x, c.w, NULL, B, Cin, Cout, T, K, d);
    double *dxr = zeros_d(nx), *dwr = zeros_d(nw), *dbr = zeros_d(Cout);
    conv_backward_reference(dxr, dwr, dbr, c.r, c.x, c.w, B, Cin, Cout, T, K, d);
    float *dx = alloc_f(nx), *dw = alloc_f(nw), *db = alloc_f(Cout);
    float *ax = alloc_f(nx), *aw = alloc_f(nw), *ab = alloc_f(Cout);
    float *ox = alloc_f(nx), *ow = alloc_f(nw), *ob = alloc_f(Cout);
    float *px = rand_f(nx, -1, 1), *pw = rand_f(nw, -1, 1), *pb = rand_f(Cout, -1, 1);

    for (int cfg = 0; cfg < 4; cfg++) {
        // both schedules on the default backend; the other backend with the default schedule
        if (g_configs[cfg].backend != g_default_backend && g_configs[cfg].algo != CONV1D_PER_SAMPLE) continue;
        if (spk_gemm_set_backend(g_configs[cfg].backend) != 0) continue;
        conv1d_set_algo(g_configs[cfg].algo);
        char name[200];
        snprintf(name, sizeof name, "[%s] B%d Cin%d Cout%d T%d K%d d%d", g_configs[cfg].name, B, Cin, Cout, T, K, d);
        // forward vs direct reference (with and without bias)
        fill_nan(c.y, ny);
        conv1d_forward(c.y, c.x, c.w, c.bias, B, Cin, Cout, T, K, d, c.ws);
        char nm[260];
        snprintf(nm, sizeof nm, "conv fwd %s", name);
        check_close(nm, c.y, yref, ny, 1e-5, 1e-5 * (1 + Cin * K) / 8.0);
        fill_nan(c.y, ny);
        conv1d_forward(c.y, c.x, c.w, NULL, B, Cin, Cout, T, K, d, c.ws);
        snprintf(nm, sizeof nm, "conv fwd nobias %s", name);
        check_close(nm, c.y, yref_nb, ny, 1e-5, 1e-5 * (1 + Cin * K) / 8.0);

        // backward into zeroed buffers vs the direct adjoint; accumulation and NULL outputs
        const grad3_t fresh = {dx, dw, db};
        const grad3_sizes_t sizes = {nx, nw, (size_t)Cout};
        backward_zeroed(conv_backward_of, &c, fresh, sizes);
        check_conv_grads("conv", name, fresh, dxr, dwr, dbr, sizes, B, Cout, T, K);
        check_backward_contract("conv", name, conv_backward_of, &c, fresh, (grad3_t){px, pw, pb}, (grad3_t){ax, aw, ab},
                                (grad3_t){ox, ow, ob}, sizes);

        // finite differences (the loss is linear in each argument: only rounding error)
        if (do_fd) {
            snprintf(nm, sizeof nm, "conv fd dx %s", name);
            fd_check(nm, c.x, dx, nx, conv_loss, &c, 1e-2f, 1e-3, 1e-3, 200);
            snprintf(nm, sizeof nm, "conv fd dw %s", name);
            fd_check(nm, c.w, dw, nw, conv_loss, &c, 1e-2f, 1e-3, 1e-3, 200);
            snprintf(nm, sizeof nm, "conv fd dbias %s", name);
            fd_check(nm, c.bias, db, Cout, conv_loss, &c, 1e-2f, 1e-3, 1e-3, 200);
        }
    }
    int guard_ok = 1;
    for (size_t i = 0; i < GUARD; i++) guard_ok &= c.ws[nws + i] == 1234.5f;
    char gm[160];
    snprintf(gm, sizeof gm, "conv workspace bound B%d Cin%d Cout%d T%d K%d d%d", B, Cin, Cout, T, K, d);
    check_true(guard_ok, gm);
    test_release();
}

static void run_all(void) {
    // K, dilation, T just above the padding (T = pad + 1), odd sizes
    run_case(2, 3, 4, 7, 1, 1, 1);
    run_case(2, 3, 5, 2, 3, 1, 1);  // pad 1, T = 2
    run_case(3, 4, 3, 3, 3, 2, 1);  // pad 2, T = 3
    run_case(2, 5, 6, 4, 3, 3, 1);  // pad 3, T = 4
    run_case(2, 4, 4, 5, 3, 4, 1);  // pad 4, T = 5
    run_case(2, 3, 4, 3, 5, 1, 1);  // pad 2, T = 3
    run_case(2, 3, 4, 9, 5, 2, 1);  // pad 4
    run_case(3, 7, 5, 16, 3, 2, 1);
    run_case(2, 6, 9, 23, 5, 1, 1);
    run_case(1, 8, 8, 10, 7, 1, 1);
    // several chunks of the batch (chunks hold ~2048 columns): uneven chunk sizes
    run_case(9, 4, 3, 500, 3, 3, 0);
    run_case(5, 3, 4, 900, 1, 1, 0);
    run_case(3, 2, 3, 2100, 5, 1, 0);
    run_case(12, 32, 48, 96, 3, 2, 0);    // enough work for the threaded per-sample loops
    run_case(8, 32, 160, 128, 1, 1, 0);   // threaded, K = 1, Cout > Cin: dW split by rows
    run_case(1, 1024, 1024, 3, 1, 1, 0);  // >= 2^20 weights: transposed-weight path
    run_case(2, 512, 683, 4, 3, 1, 0);
}

// ---- the world-size-invariant mode ----------------------------------------------------------
static void invariant_case(int B, int Cin, int Cout, int T, int K, int d, int group) {
    char tag[96];
    snprintf(tag, sizeof tag, "B%d Cin%d Cout%d T%d K%d d%d group %d", B, Cin, Cout, T, K, d, group);
    const size_t nx = (size_t)B * Cin * T, ny = (size_t)B * Cout * T, nw = (size_t)Cout * Cin * K;
    float *x = rand_f(nx, -1, 1), *w = rand_f(nw, -0.5f, 0.5f), *bias = rand_f(Cout, -1, 1), *gy = rand_f(ny, -1, 1);
    float *ws = alloc_f(conv1d_workspace_floats_fixed(B, Cin, Cout, T, K, d));  // >= the default's
    float *y2 = alloc_f(ny), *y1 = alloc_f(ny), *y = alloc_f(ny);
    int before = with_threads(2);
    conv1d_forward_fixed(y2, x, w, bias, B, Cin, Cout, T, K, d, ws);
    with_threads(1);
    for (int b = 0; b < B; b++)
        conv1d_forward_fixed(y1 + (size_t)b * Cout * T, x + (size_t)b * Cin * T, w, bias, 1, Cin, Cout, T, K, d, ws);
    with_threads(before);
    check_true(memcmp(y1, y2, sizeof(float) * ny) == 0,
               cname("conv1d_forward_fixed %s: a sample alone == in the batch", tag));
    conv1d_forward(y, x, w, bias, B, Cin, Cout, T, K, d, ws);
    check_close(cname("conv1d_forward_fixed %s vs conv1d_forward", tag), y2, y, ny, 1e-5, 1e-4);
    if (group > 1) {  // the batch's groups on 2 threads == each group alone on 1
        before = with_threads(2);
        conv1d_forward_grouped(y2, x, w, bias, B, Cin, Cout, T, K, d, ws, group);
        with_threads(1);
        for (int b = 0; b < B; b += group)
            conv1d_forward_grouped(y1 + (size_t)b * Cout * T, x + (size_t)b * Cin * T, w, bias, group, Cin, Cout, T, K,
                                   d, ws, group);
        with_threads(before);
        check_true(memcmp(y1, y2, sizeof(float) * ny) == 0,
                   cname("conv1d_forward_grouped %s: a group alone == in the batch", tag));
        check_close(cname("conv1d_forward_grouped %s vs conv1d_forward", tag), y2, y, ny, 1e-5, 1e-4);
    }

    conv_call_t c = conv_call(&spk_backend_cpu, gy, x, w, B, Cin, Cout, T, K, d, ws);
    c.group = group;
    const exact_grads_t g = conv_exact_split_check("conv1d_backward_exact", tag, &c);
    float *dx = zeros_f(nx), *dw = zeros_f(nw), *db = zeros_f(Cout);
    conv1d_backward(dx, 1, dw, db, gy, x, w, B, Cin, Cout, T, K, d, ws);
    check_close(cname("conv1d_backward_exact %s dx vs conv1d_backward", tag), g.dx, dx, nx, 1e-5, 1e-4);
    check_close(cname("conv1d_backward_exact %s dw vs conv1d_backward", tag), sums_to_floats(g.dw, (int64_t)nw), dw, nw,
                1e-4, 1e-4);
    check_close(cname("conv1d_backward_exact %s dbias vs conv1d_backward", tag), sums_to_floats(g.db, Cout), db, Cout,
                1e-4, 1e-4);
    test_release();
}

static void cpu_checks(void) {
    g_default_backend = spk_gemm_get_backend();
    invariant_case(6, 32, 48, 40, 3, 2, 1);
    invariant_case(6, 32, 48, 40, 3, 2, 3);
    invariant_case(5, 64, 40, 30, 1, 1, 1);
    invariant_case(4, 200, 300, 12, 3, 1, 2);   // 3 x 3 blocks of the exact weight gradient
    invariant_case(4, 280, 520, 6, 3, 1, 2);    // 2 x 2 blocks of a group's folded weight gradient
    invariant_case(4, 256, 512, 20, 1, 1, 2);   // in place, one block of 256 columns: 8 threads take tiles
    invariant_case(2, 1024, 1024, 3, 1, 1, 1);  // >= 2^20 weights: transposed-weight input gradient
    // >= 2^20 weights in groups: the forward and the input gradient by chunks of each group (one
    // chunk a group; then chunks of 2 and 1 samples, which hold about 2048 columns)
    invariant_case(4, 1024, 1024, 24, 1, 1, 2);
    invariant_case(4, 512, 683, 16, 3, 1, 2);
    invariant_case(6, 1024, 1024, 1100, 1, 1, 3);
    // oneDNN's GEMM gives these shapes' row tiles their blocks' bits: 8 threads took tiles
    if (g_default_backend == SPK_GEMM_DNNL)
        check_true(gemm_row_tiles_allowed() > 0,
                   "conv1d_backward_exact: tiles of the weight gradient's blocks checked and taken");
    run_all();
    spk_gemm_set_backend(g_default_backend);
    conv1d_set_algo(CONV1D_AUTO);
}

// ---- every backend against the CPU kernels --------------------------------------------------
static void backend_case(int B, int Cin, int Cout, int T, int K, int d, int with_bias) {
    const conv_case_t cc = conv_case(B, Cin, Cout, T, K, d, with_bias);
    const char *tag = cc.tag;
    const size_t nx = cc.nx, ny = cc.ny, nw = cc.nw;
    float *x = cc.x, *w = cc.w, *y = cc.y, *bias = cc.bias;
    float *ws = alloc_f(conv1d_workspace_floats(B, Cin, Cout, T, K, d));
    conv1d_forward(y, x, w, bias, B, Cin, Cout, T, K, d, ws);
    float *dws = dev_f(NULL, g_be->conv1d_workspace_floats(B, Cin, Cout, T, K, d));
    float *dx = dev_f(x, nx), *dw = dev_f(w, nw), *db = with_bias ? dev_f(bias, Cout) : NULL;
    float *dy = dev_f(NULL, ny);
    g_be->conv1d_forward(dy, dx, dw, db, B, Cin, Cout, T, K, d, dws);
    cmp(cname("conv1d forward %s", tag), dy, y, ny, TOL_GEMM);

    // backward into prefilled gradients, twice, then dw alone (dx and dbias NULL)
    float *gy = rand_f(ny, -1, 1), *dgy = dev_f(gy, ny);
    conv_call_t on_cpu = conv_call(&spk_backend_cpu, gy, x, w, B, Cin, Cout, T, K, d, ws),
                on_dev = conv_call(g_be, dgy, dx, dw, B, Cin, Cout, T, K, d, dws);
    backend_backward_checks("conv1d", tag, conv_backward_call, &on_cpu, conv_backward_call, &on_dev,
                            (grad3_sizes_t){nx, nw, (size_t)Cout});
    conv_dx_set_check("conv1d", tag, on_dev, nx, nw, (size_t)Cout);

    // the invariant mode's forward (the invariant table) and exact backward
    const spk_backend_t *twin = spk_backend_invariant(g_be);
    float *iws = dev_f(NULL, twin->conv1d_workspace_floats(B, Cin, Cout, T, K, d));
    conv1d_forward_fixed(y, x, w, bias, B, Cin, Cout, T, K, d, ws);
    twin->conv1d_forward(dy, dx, dw, db, B, Cin, Cout, T, K, d, iws);
    cmp(cname("conv1d_forward_fixed %s", tag), dy, y, ny, TOL_GEMM);
    conv_call_t icpu = conv_call(&spk_backend_cpu, gy, x, w, B, Cin, Cout, T, K, d, ws),
                idev = conv_call(g_be, dgy, dx, dw, B, Cin, Cout, T, K, d, iws);
    backend_exact_checks("conv1d_backward_exact", tag, conv_exact_call, &icpu, &idev, nx, nw, with_bias ? Cout : 0,
                         TOL_GEMM);
    if (B % 2 == 0) {  // groups of two samples: the grouped forward and the exact backward's terms
        float *gws = alloc_f(conv1d_workspace_floats_fixed(B, Cin, Cout, T, K, d));
        conv1d_forward_grouped(y, x, w, bias, B, Cin, Cout, T, K, d, gws, 2);
        g_be->conv1d_forward_grouped(dy, dx, dw, db, B, Cin, Cout, T, K, d, iws, 2);
        cmp(cname("conv1d_forward_grouped %s group 2", tag), dy, y, ny, TOL_GEMM);
        conv_call_t gcpu = icpu, gdev = idev;
        gcpu.ws = gws, gcpu.group = gdev.group = 2;
        backend_exact_checks("conv1d_backward_exact group 2", tag, conv_exact_call, &gcpu, &gdev, nx, nw,
                             with_bias ? Cout : 0, TOL_GEMM);
    }
    dev_release();
    test_release();
}

static void backend_checks(void) { conv_backend_checks(backend_case); }

int main(int argc, char **argv) { return test_main(argc, argv, "test_conv1d", 1234, cpu_checks, backend_checks); }
