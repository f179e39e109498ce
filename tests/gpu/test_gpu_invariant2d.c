// The world-size-invariant mode's 2-D ops on CUDA (conv2d_forward_fixed, conv2d_backward_exact,
// batchnorm2d_stats_partial / forward_global / backward_partial / backward_global) at ResNet's
// layer shapes, for what the kernel tests (tests/kernels/test_conv2d.c, test_batchnorm2d.c: group
// 1, against the CPU) leave to the GPU:
//   test_gpu_invariant2d [C B H W]   (default: width C=32, batch 16, 80 x 200 input)
// - a sample's output the same bits alone as in the batch (cuDNN plans of one sample);
// - dx and the exact sums the same bits for the batch split into two calls (whole groups, the
//   second first) as in one, and in a second run, and a group's terms those of its call alone
//   (cuDNN plans of one group); groups of 1, 2 and 4;
// - every output within the kernel tests' tolerance of the CPU kernels with the same group;
// - dx accumulated, dw alone; BatchNorm without running statistics (shift 0), y over x, dx NULL.
// Without a CUDA device it reports SKIPPED (exit 77).
#include "../kernels/backends.h"
#include "../kernels/exact_check.h"
#include "kernels/batchnorm2d.h"
#include "kernels/conv2d.h"

#define EPS_BN 1e-5f

static int g_C = 32, g_B = 16, g_H = 80, g_W = 200;

// ---- exact sums on the backend ----------------------------------------------------------------
typedef struct {
    xsum_t s;
    void *buf;  // xsum_bytes(n), zero-filled: empty sums
    int64_t n;
} dev_sums_t;

static dev_sums_t dev_sums(int64_t n) {
    void *p = dev_alloc(xsum_bytes(n));
    return (dev_sums_t){xsum_layout(p, n), p, n};
}

// Two backend sums must hold the same bits (bins and limbs).
static void same_sums_check(const char *name, dev_sums_t a, dev_sums_t b) {
    const size_t bytes = xsum_bytes(a.n);
    void *ha = test_alloc(bytes), *hb = test_alloc(bytes);
    g_be->download(ha, a.buf, bytes);
    g_be->download(hb, b.buf, bytes);
    const int same = memcmp(ha, hb, bytes) == 0;
    be_verdict(name, same, same ? 0.0 : INFINITY, 0.0);
}

// A backend sum against sums made on the host (host_sums' layout starts at the bins).
static void same_as_host_sums(const char *name, dev_sums_t d, xsum_t h) {
    const size_t bytes = xsum_bytes(d.n);
    void *got = test_alloc(bytes);
    g_be->download(got, d.buf, bytes);
    const int same = memcmp(got, h.bin, bytes) == 0;
    be_verdict(name, same, same ? 0.0 : INFINITY, 0.0);
}

// A backend sum's values against the CPU's sums, rounded to float.
static void cmp_sums(const char *name, dev_sums_t d, xsum_t want, double tol) {
    float *f = dev_f(NULL, (size_t)d.n);
    g_be->xsum_to_float(f, d.s, d.n);
    cmp(name, f, sums_to_floats(want, d.n), (size_t)d.n, tol);
}

static void same_bits_check(const char *name, const float *d1, const float *d2, size_t n) {
    const float *a = dev_get(d1, n), *b = dev_get(d2, n);
    const int same = memcmp(a, b, sizeof(float) * n) == 0;
    be_verdict(name, same, same ? 0.0 : INFINITY, 0.0);
}

// Samples of the first call when B samples in groups of `group` are split in two.
static int split_of(int B, int group) { return (B / group + 1) / 2 * group; }

// ---- Conv2d -------------------------------------------------------------------------------------
static void conv_case(const char *layer, conv2d_shape_t s, int group, int with_bias) {
    const spk_backend_t *inv = spk_backend_invariant(g_be);
    const size_t nx = conv2d_x_size(&s), ny = conv2d_y_size(&s), nw = conv2d_w_size(&s);
    const size_t xs = nx / s.B, ys = ny / s.B;
    const char *t0 = cname("%s group %d%s", layer, group, with_bias ? " bias" : "");
    char tag[120];
    snprintf(tag, sizeof tag, "%s", t0);
    float *x = rand_f(nx, -1, 1), *w = rand_f(nw, -0.2f, 0.2f), *bias = rand_f(s.Cout, -1, 1);
    float *gy = rand_f(ny, -1, 1), *prefill = rand_f(nx, -1, 1);
    float *x_ = dev_f(x, nx), *w_ = dev_f(w, nw), *b_ = with_bias ? dev_f(bias, s.Cout) : NULL, *gy_ = dev_f(gy, ny);
    float *ws_ = dev_f(NULL, inv->conv2d_workspace_floats(&s)), *tmp_ = dev_f(NULL, nw);
    float *hws = alloc_f(conv2d_workspace_floats_fixed(&s));
    conv2d_shape_t one = s;
    one.B = 1;

    // forward: the batch, and every sample alone
    float *y = alloc_f(ny), *yb_ = dev_f(NULL, ny), *y1_ = dev_f(NULL, ny);
    conv2d_forward_fixed(y, x, w, with_bias ? bias : NULL, &s, hws);
    inv->conv2d_forward(yb_, x_, w_, b_, &s, ws_);
    for (int b = 0; b < s.B; b++) inv->conv2d_forward(y1_ + b * ys, x_ + b * xs, w_, b_, &one, ws_);
    cmp(cname("conv2d_forward_fixed %s", tag), yb_, y, ny, TOL_GEMM);
    same_bits_check(cname("conv2d_forward_fixed %s: a sample alone == in the batch", tag), y1_, yb_, ny);

    dev_sums_t dw_all = {0}, db_all = {0};  // the batch in one call, dx overwritten
    const int first = split_of(s.B, group);
    conv2d_shape_t head = s, rest = s;
    head.B = first, rest.B = s.B - first;
    for (int acc = 0; acc < 2; acc++) {
        // the CPU, the batch in one call (twice), and split in two calls, the second first
        float *hx = copy_f(prefill, nx);
        xsum_t hw = host_sums((int64_t)nw), hb = host_sums(s.Cout);
        conv2d_backward_exact(hx, acc, alloc_f(nw), hw, with_bias ? hb : xsum_none(), gy, x, w, &s, hws, group);
        float *dx[3];
        dev_sums_t dw[3], db[3];
        for (int k = 0; k < 3; k++) {
            dx[k] = dev_f(prefill, nx), dw[k] = dev_sums((int64_t)nw), db[k] = dev_sums(s.Cout);
            const xsum_t dbk = with_bias ? db[k].s : xsum_none();
            if (k < 2) {
                g_be->conv2d_backward_exact(dx[k], acc, tmp_, dw[k].s, dbk, gy_, x_, w_, &s, ws_, group);
            } else {
                g_be->conv2d_backward_exact(dx[k] + first * xs, acc, tmp_, dw[k].s, dbk, gy_ + first * ys,
                                            x_ + first * xs, w_, &rest, ws_, group);
                g_be->conv2d_backward_exact(dx[k], acc, tmp_, dw[k].s, dbk, gy_, x_, w_, &head, ws_, group);
            }
        }
        if (!acc) dw_all = dw[0], db_all = db[0];
        const char *mode = acc ? "accumulated" : "overwritten";
        cmp(cname("conv2d_backward_exact dx %s %s", mode, tag), dx[0], hx, nx, TOL_GEMM);
        cmp_sums(cname("conv2d_backward_exact dw %s", tag), dw[0], hw, TOL_GEMM);
        if (with_bias) cmp_sums(cname("conv2d_backward_exact dbias %s", tag), db[0], hb, TOL);
        for (int k = 1; k < 3; k++) {
            const char *how = k == 1 ? "twice" : "split in two calls";
            same_bits_check(cname("conv2d_backward_exact dx %s %s: %s", mode, tag, how), dx[k], dx[0], nx);
            same_sums_check(cname("conv2d_backward_exact dw %s: %s", tag, how), dw[k], dw[0]);
            if (with_bias) same_sums_check(cname("conv2d_backward_exact dbias %s: %s", tag, how), db[k], db[0]);
        }
    }
    // The groups' terms: every group's float gradients alone (a call of the group's samples, whose
    // sums of one float term hold them whole), deposited on the host one term a group, are the
    // batch's sums bit for bit (cuDNN's plan of B = group, whatever B is).
    conv2d_shape_t grp = s;
    grp.B = group;
    const int groups = s.B / group;
    float *per_w = alloc_f((size_t)groups * nw), *per_b = alloc_f((size_t)groups * s.Cout);
    for (int g = 0; g < groups; g++) {
        dev_sums_t w1 = dev_sums((int64_t)nw), b1 = dev_sums(s.Cout);
        g_be->conv2d_backward_exact(NULL, 0, tmp_, w1.s, b1.s, gy_ + (size_t)g * group * ys,
                                    x_ + (size_t)g * group * xs, w_, &grp, ws_, group);
        float *fw = dev_f(NULL, nw), *fb = dev_f(NULL, s.Cout);
        g_be->xsum_to_float(fw, w1.s, (int64_t)nw);
        g_be->xsum_to_float(fb, b1.s, s.Cout);
        g_be->download(per_w + (size_t)g * nw, fw, sizeof(float) * nw);
        g_be->download(per_b + (size_t)g * s.Cout, fb, sizeof(float) * s.Cout);
    }
    xsum_t gw = host_sums((int64_t)nw), gb = host_sums(s.Cout);
    xsum_add(gw, per_w, groups, (int64_t)nw, 1);
    xsum_add(gb, per_b, groups, s.Cout, 1);
    same_as_host_sums(cname("conv2d_backward_exact dw %s: the groups' calls alone, one term each", tag), dw_all, gw);
    if (with_bias)
        same_as_host_sums(cname("conv2d_backward_exact dbias %s: the groups' calls alone, one term each", tag), db_all,
                          gb);

    // the weight gradient alone: the bits it had with dx and dbias
    dev_sums_t dw0 = dev_sums((int64_t)nw), dw1 = dev_sums((int64_t)nw);
    g_be->conv2d_backward_exact(dev_f(NULL, nx), 0, tmp_, dw0.s, xsum_none(), gy_, x_, w_, &s, ws_, group);
    g_be->conv2d_backward_exact(NULL, 0, tmp_, dw1.s, xsum_none(), gy_, x_, w_, &s, ws_, group);
    same_sums_check(cname("conv2d_backward_exact dw alone %s", tag), dw1, dw0);
    dev_release();
    test_release();
}

// ---- BatchNorm2d --------------------------------------------------------------------------------
static void bn_case(const char *layer, int B, int HW, int C, int group, int relu, int with_res, int running) {
    const int N = B * HW, first = split_of(B, group);
    const size_t n = (size_t)N * C, off = (size_t)first * HW * C;
    const char *t0 = cname("%s group %d%s%s%s", layer, group, relu ? " relu" : "", with_res ? " residual" : "",
                           running ? "" : " no running stats");
    char tag[120];
    snprintf(tag, sizeof tag, "%s", t0);
    float *x = rand_f(n, -1, 3), *w = rand_f(C, 0.5f, 1.5f), *b = rand_f(C, -0.5f, 0.5f), *res = rand_f(n, -1, 1);
    float *dy = rand_f(n, -1, 1), *rm = rand_f(C, 0.5f, 1.5f), *rv = rand_f(C, 0.9f, 1.1f);
    float *pdx = rand_f(n, -1, 1), *pdres = rand_f(n, -1, 1);
    float *x_ = dev_f(x, n), *w_ = dev_f(w, C), *b_ = dev_f(b, C), *dy_ = dev_f(dy, n);
    float *res_ = with_res ? dev_f(res, n) : NULL;
    float *rm_ = running ? dev_f(rm, C) : NULL, *rv_ = running ? dev_f(rv, C) : NULL;
    float *hrm = running ? rm : NULL, *hrv = running ? rv : NULL;

    // statistics: the CPU; the batch in one call, and in two, the second first
    xsum_t hs = host_sums(2 * C);
    batchnorm2d_stats_partial(hs, x, hrm, B, HW, C, group);
    dev_sums_t s0 = dev_sums(2 * C), s1 = dev_sums(2 * C);
    g_be->batchnorm2d_stats_partial(s0.s, x_, rm_, B, HW, C, group);
    g_be->batchnorm2d_stats_partial(s1.s, x_ + off, rm_, B - first, HW, C, group);
    g_be->batchnorm2d_stats_partial(s1.s, x_, rm_, first, HW, C, group);
    cmp_sums(cname("batchnorm2d_stats_partial %s", tag), s0, hs, TOL);
    same_sums_check(cname("batchnorm2d_stats_partial %s: split in two calls", tag), s1, s0);

    // forward with the CPU's sums on both (the kernels' own sums differ in the last bits), y over x
    float *y = alloc_f(n), *mean = alloc_f(C), *rstd = alloc_f(C);
    float *y_ = dev_f(x, n), *mean_ = dev_f(NULL, C), *rstd_ = dev_f(NULL, C);
    g_be->upload(s0.buf, hs.bin, xsum_bytes(2 * C));  // host_sums' layout starts at bin
    batchnorm2d_forward_global(y, mean, rstd, hrm, hrv, x, w, b, with_res ? res : NULL, relu, hs, N, N, C, EPS_BN,
                               0.1f);
    g_be->batchnorm2d_forward_global(y_, mean_, rstd_, rm_, rv_, y_, w_, b_, res_, relu, s0.s, N, N, C, EPS_BN, 0.1f);
    cmp(cname("batchnorm2d_forward_global y %s", tag), y_, y, n, TOL);
    cmp(cname("batchnorm2d_forward_global mean %s", tag), mean_, mean, C, TOL);
    cmp(cname("batchnorm2d_forward_global rstd %s", tag), rstd_, rstd, C, TOL);
    if (running) {
        cmp(cname("batchnorm2d_forward_global running mean %s", tag), rm_, hrm, C, TOL);
        cmp(cname("batchnorm2d_forward_global running var %s", tag), rv_, hrv, C, TOL);
    }
    // the backward from the CPU's forward
    dev_set(y_, y, n), dev_set(mean_, mean, C), dev_set(rstd_, rstd, C);
    xsum_t hg = host_sums(2 * C), hdw = host_sums(C), hdb = host_sums(C);
    batchnorm2d_backward_partial(hg, hdw, hdb, dy, y, x, mean, rstd, relu, B, HW, C, group);
    dev_sums_t g[2], dw[2], db[2];
    for (int k = 0; k < 2; k++) g[k] = dev_sums(2 * C), dw[k] = dev_sums(C), db[k] = dev_sums(C);
    g_be->batchnorm2d_backward_partial(g[0].s, dw[0].s, db[0].s, dy_, y_, x_, mean_, rstd_, relu, B, HW, C, group);
    g_be->batchnorm2d_backward_partial(g[1].s, dw[1].s, db[1].s, dy_ + off, y_ + off, x_ + off, mean_, rstd_, relu,
                                       B - first, HW, C, group);
    g_be->batchnorm2d_backward_partial(g[1].s, dw[1].s, db[1].s, dy_, y_, x_, mean_, rstd_, relu, first, HW, C, group);
    cmp_sums(cname("batchnorm2d_backward_partial %s", tag), g[0], hg, TOL);
    cmp_sums(cname("batchnorm2d_backward_partial dweight %s", tag), dw[0], hdw, TOL);
    cmp_sums(cname("batchnorm2d_backward_partial dbias %s", tag), db[0], hdb, TOL);
    same_sums_check(cname("batchnorm2d_backward_partial %s: split in two calls", tag), g[1], g[0]);
    same_sums_check(cname("batchnorm2d_backward_partial dweight %s: split", tag), dw[1], dw[0]);
    same_sums_check(cname("batchnorm2d_backward_partial dbias %s: split", tag), db[1], db[0]);

    // the gradients, with the CPU's sums: written, then added to prefills; dresidual alone
    g_be->upload(g[0].buf, hg.bin, xsum_bytes(2 * C));
    for (int acc = 0; acc < 2; acc++) {
        float *hx = acc ? copy_f(pdx, n) : alloc_f(n), *hr = acc ? copy_f(pdres, n) : alloc_f(n);
        float *dx_ = dev_f(acc ? pdx : NULL, n), *dr_ = dev_f(acc ? pdres : NULL, n);
        float *dr2_ = dev_f(acc ? pdres : NULL, n);
        batchnorm2d_backward_global(hx, NULL, with_res ? hr : NULL, acc, dy, y, x, w, mean, rstd, relu, hg, N, N, C);
        g_be->batchnorm2d_backward_global(dx_, NULL, with_res ? dr_ : NULL, acc, dy_, y_, x_, w_, mean_, rstd_, relu,
                                          g[0].s, N, N, C);
        const char *mode = acc ? "accumulated" : "overwritten";
        cmp(cname("batchnorm2d_backward_global dx %s %s", mode, tag), dx_, hx, n, TOL);
        if (!with_res) continue;
        cmp(cname("batchnorm2d_backward_global dresidual %s %s", mode, tag), dr_, hr, n, TOL);
        g_be->batchnorm2d_backward_global(NULL, NULL, dr2_, acc, dy_, y_, x_, w_, mean_, rstd_, relu, g[0].s, N, N, C);
        same_bits_check(cname("batchnorm2d_backward_global dresidual alone %s %s", mode, tag), dr2_, dr_, n);
    }
    dev_release();
    test_release();
}

static void invariant2d_checks(void) {
    const int C = g_C, B = g_B, H = g_H, W = g_W;
    printf("shapes: width C=%d, batch %d, input %d x %d\n", C, B, H, W);
    // ResNet's first conv, a block's 3x3, the downsampling 3x3 and its 1x1 shortcut
    conv_case("first layer 1->C", conv2d_square(B, 1, C, H, W, 3, 1), 1, 0);
    conv_case("block C->C", conv2d_square(B, C, C, H, W, 3, 1), 2, 0);
    conv_case("down C->2C s2", conv2d_square(B, C, 2 * C, H, W, 3, 2), 4, 1);
    conv_case("shortcut 1x1 C->2C s2", conv2d_square(B, C, 2 * C, H, W, 1, 2), 1, 1);
    const int HW = H * W, HW2 = ((H + 1) / 2) * ((W + 1) / 2);
    bn_case("bn C", B, HW, C, 1, 1, 0, 1);
    bn_case("bn C", B, HW, C, 2, 1, 1, 1);
    bn_case("bn 2C", B, HW2, 2 * C, 4, 0, 1, 0);
    bn_case("bn 2C", B, HW2, 2 * C, 2, 1, 1, 0);
}

int main(int argc, char **argv) {
    if (argc == 5) {
        g_C = atoi(argv[1]), g_B = atoi(argv[2]), g_H = atoi(argv[3]), g_W = atoi(argv[4]);
    } else if (argc != 1) {
        fprintf(stderr, "usage: %s [C B H W]\n", argv[0]);
        return 2;
    }
    if (g_C < 1 || g_B < 8 || g_B % 4 || g_H < 2 || g_W < 2) {
        fprintf(stderr, "%s: C >= 1, B a multiple of 4 and >= 8, H and W >= 2\n", argv[0]);
        return 2;
    }
    return test_main_cuda(argv[0], "test_gpu_invariant2d", 20260215, invariant2d_checks);
}
