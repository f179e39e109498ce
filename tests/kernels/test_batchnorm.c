// batchnorm1d: training forward vs a double reference, running-statistics update values
// (unbiased running variance), inference mode, finite-difference gradients, accumulation,
// T = 1 ((B, C) inputs), in-place forward; then every backend against the CPU kernels
// (tests/kernels/backends.h).
// The invariant mode's BatchNorm over the global batch: a batch split between two "ranks",
// whose partial sums are merged, normalises each half exactly as the whole batch (outputs,
// saved and running statistics, input and parameter gradients, on 1 or 2 threads), close to
// batchnorm1d_forward_train / _backward on the whole batch. batchnorm1d_relu_backward: the bits of
// zeroing, the backward and relu_mask, its dsum those of conv1d_backward's bias gradient, on the
// CPU; every backend within tolerance of it; folded
// to bf16 (batchnorm1d_relu_backward_bf16), the bits of bf16_fold_from_f32 of it on the CPU and
// within a bf16 step of them on every backend.
#include "backends.h"
#include "exact_check.h"
#include "kernels/activation.h"
#include "kernels/batchnorm.h"
#include "kernels/conv1d.h"

#include <string.h>

typedef struct {
    int B, C, T;
    float *x, *w, *b, *y, *mean, *rstd, *r;
} bn_ctx;

static double bn_loss(void *p) {
    bn_ctx *c = (bn_ctx *)p;
    batchnorm1d_forward_train(c->y, c->mean, c->rstd, NULL, NULL, c->x, c->w, c->b, c->B, c->C, c->T, 1e-5f, 0.1f);
    return dot_d(c->y, c->r, (size_t)c->B * c->C * c->T);
}

static void run_case(int B, int C, int T, int affine) {
    char nm[160];
    const size_t n = (size_t)B * C * T;
    const float eps = 1e-5f, mom = 0.1f;
    bn_ctx c = {B, C, T, NULL, NULL, NULL, NULL, NULL, NULL, NULL};
    c.x = alloc_f(n);
    for (size_t i = 0; i < n; i++) c.x[i] = rng_uniform(-1, 1) * 2.0f + 3.0f;  // mean ~3, var ~1.3
    c.w = affine ? rand_f(C, 0.5f, 1.5f) : NULL;
    c.b = affine ? rand_f(C, -1, 1) : NULL;
    c.y = alloc_f(n);
    c.mean = alloc_f(C);
    c.rstd = alloc_f(C);
    c.r = rand_f(n, -1, 1);
    float *rm = rand_f(C, -1, 1);
    float *rv = rand_f(C, 0.5f, 2);
    float *rm0 = copy_f(rm, C);
    float *rv0 = copy_f(rv, C);

    batchnorm1d_forward_train(c.y, c.mean, c.rstd, rm, rv, c.x, c.w, c.b, B, C, T, eps, mom);
    // reference in double
    double *yref = alloc_d(n), *mref = alloc_d(C), *sref = alloc_d(C);
    double *rmref = alloc_d(C), *rvref = alloc_d(C);
    const double N = (double)B * T;
    for (int ch = 0; ch < C; ch++) {
        double s = 0, ss = 0;
        for (int b = 0; b < B; b++)
            for (int t = 0; t < T; t++) s += c.x[((size_t)b * C + ch) * T + t];
        const double mu = s / N;
        for (int b = 0; b < B; b++)
            for (int t = 0; t < T; t++) {
                const double d = c.x[((size_t)b * C + ch) * T + t] - mu;
                ss += d * d;
            }
        const double var = ss / N;
        mref[ch] = mu;
        sref[ch] = 1.0 / sqrt(var + eps);
        rmref[ch] = (1 - mom) * rm0[ch] + mom * mu;
        rvref[ch] = (1 - mom) * rv0[ch] + mom * var * N / (N - 1);
        for (int b = 0; b < B; b++)
            for (int t = 0; t < T; t++) {
                const size_t i = ((size_t)b * C + ch) * T + t;
                yref[i] = (c.x[i] - mu) * sref[ch] * (affine ? c.w[ch] : 1.0) + (affine ? c.b[ch] : 0.0);
            }
    }
    snprintf(nm, sizeof nm, "bn fwd B%d C%d T%d", B, C, T);
    check_close_d(nm, c.y, yref, n, 1e-5, 1e-5);
    snprintf(nm, sizeof nm, "bn mean B%d C%d T%d", B, C, T);
    check_close_d(nm, c.mean, mref, C, 1e-6, 1e-6);
    snprintf(nm, sizeof nm, "bn rstd B%d C%d T%d", B, C, T);
    check_close_d(nm, c.rstd, sref, C, 1e-5, 0);
    snprintf(nm, sizeof nm, "bn running_mean B%d C%d T%d", B, C, T);
    check_close_d(nm, rm, rmref, C, 1e-6, 1e-7);
    snprintf(nm, sizeof nm, "bn running_var (unbiased) B%d C%d T%d", B, C, T);
    check_close_d(nm, rv, rvref, C, 1e-6, 1e-7);

    // in place (y == x) gives the same output
    float *xin = copy_f(c.x, n);
    batchnorm1d_forward_train(xin, c.mean, c.rstd, NULL, NULL, xin, c.w, c.b, B, C, T, eps, mom);
    snprintf(nm, sizeof nm, "bn fwd in place B%d C%d T%d", B, C, T);
    check_close(nm, xin, c.y, n, 0, 0);

    // inference mode uses the running statistics
    float *yi = alloc_f(n);
    batchnorm1d_forward_infer(yi, c.x, rm, rv, c.w, c.b, B, C, T, eps);
    for (int ch = 0; ch < C; ch++)
        for (int b = 0; b < B; b++)
            for (int t = 0; t < T; t++) {
                const size_t i = ((size_t)b * C + ch) * T + t;
                yref[i] = (c.x[i] - (double)rm[ch]) / sqrt((double)rv[ch] + eps) * (affine ? c.w[ch] : 1.0) +
                          (affine ? c.b[ch] : 0.0);
            }
    snprintf(nm, sizeof nm, "bn infer B%d C%d T%d", B, C, T);
    check_close_d(nm, yi, yref, n, 1e-5, 1e-5);

    // backward: finite differences and accumulation
    bn_loss(&c);  // refresh mean/rstd
    float *dx = zeros_f(n), *dw = zeros_f(C), *db = zeros_f(C);
    batchnorm1d_backward(dx, affine ? dw : NULL, affine ? db : NULL, c.r, c.x, c.w, c.mean, c.rstd, B, C, T);
    snprintf(nm, sizeof nm, "bn fd dx B%d C%d T%d", B, C, T);
    fd_check(nm, c.x, dx, n, bn_loss, &c, 1e-2f, 1e-2, 2e-3, 150);
    if (affine) {
        snprintf(nm, sizeof nm, "bn fd dweight B%d C%d T%d", B, C, T);
        fd_check(nm, c.w, dw, C, bn_loss, &c, 1e-2f, 1e-3, 1e-3, 100);
        snprintf(nm, sizeof nm, "bn fd dbias B%d C%d T%d", B, C, T);
        fd_check(nm, c.b, db, C, bn_loss, &c, 1e-2f, 1e-3, 1e-3, 100);
    }
    bn_loss(&c);  // the finite differences left mean/rstd from a perturbed input
    float *px = rand_f(n, -1, 1), *pw = rand_f(C, -1, 1), *pb = rand_f(C, -1, 1);
    float *ax = copy_f(px, n), *aw = copy_f(pw, C), *ab = copy_f(pb, C);
    batchnorm1d_backward(ax, aw, ab, c.r, c.x, c.w, c.mean, c.rstd, B, C, T);
    snprintf(nm, sizeof nm, "B%d C%d T%d", B, C, T);  // without affine parameters, dx alone
    check_accumulated3("bn", nm, (grad3_t){ax, affine ? aw : NULL, affine ? ab : NULL}, (grad3_t){px, pw, pb},
                       (grad3_t){dx, dw, db}, (grad3_sizes_t){n, (size_t)C, (size_t)C});
    test_release();
}

// Hand-computed running statistics for one channel: x = {1, 2, 3, 6} (B = 2, T = 2):
// mean 3, biased var 3.5, unbiased var 14/3. From running (0, 1) with momentum 0.1:
// running_mean = 0.3, running_var = 0.9 + 0.1 * 14/3.
static void hand_case(void) {
    float x[4] = {1, 2, 3, 6}, y[4], mean, rstd, rm = 0, rv = 1;
    batchnorm1d_forward_train(y, &mean, &rstd, &rm, &rv, x, NULL, NULL, 2, 1, 2, 1e-5f, 0.1f);
    check_scalar("bn hand mean", mean, 3.0, 1e-7, 0);
    check_scalar("bn hand rstd", rstd, 1.0 / sqrt(3.5 + 1e-5), 1e-6, 0);
    check_scalar("bn hand running_mean", rm, 0.3, 1e-6, 0);
    check_scalar("bn hand running_var", rv, 0.9 + 0.1 * 14.0 / 3.0, 1e-6, 0);
    check_scalar("bn hand y[3]", y[3], 3.0 / sqrt(3.5 + 1e-5), 1e-6, 0);
}

// ---- the world-size-invariant mode ----------------------------------------------------------
typedef struct {
    float *y, *mean, *rstd, *rm, *rv, *dx;
    xsum_t dw, db;
} bn_global_t;

static void invariant_case(int B, int C, int T, int group) {
    const size_t n = (size_t)B * C * T;
    const int64_t N = (int64_t)B * T;
    float *x = rand_f(n, 2, 4), *gy = rand_f(n, -1, 1), *w = rand_f(C, 0.5f, 1.5f), *bias = rand_f(C, -1, 1);
    const float *rm0 = rand_f(C, 2.5f, 3.5f), *rv0 = rand_f(C, 0.5f, 2);
    bn_global_t whole, split;
    bn_global_t *both[2] = {&whole, &split};
    for (int k = 0; k < 2; k++) {
        bn_global_t *o = both[k];
        *o = (bn_global_t){alloc_f(n),     alloc_f(C), alloc_f(C),   copy_f(rm0, C),
                           copy_f(rv0, C), zeros_f(n), host_sums(C), host_sums(C)};
    }
    const int before = with_threads(2);
    xsum_t fwd = host_sums(2 * C), bwd = host_sums(2 * C);
    batchnorm1d_stats_partial(fwd, x, whole.rm, B, C, T, group);
    batchnorm1d_forward_global(whole.y, whole.mean, whole.rstd, whole.rm, whole.rv, x, w, bias, fwd, N, B, C, T, 1e-5f,
                               0.1f);
    batchnorm1d_backward_partial(bwd, whole.dw, whole.db, gy, x, whole.mean, whole.rstd, B, C, T, group);
    batchnorm1d_backward_global(whole.dx, 0, gy, x, w, whole.mean, whole.rstd, bwd, N, B, C, T);
    with_threads(1);                      // two "ranks": halves [0, h) and [h, B), each with its own partial sums
    const int h = B / group / 2 * group;  // whole groups on each rank
    const size_t off = (size_t)h * C * T;
    xsum_t f0 = host_sums(2 * C), f1 = host_sums(2 * C), g0 = host_sums(2 * C), g1 = host_sums(2 * C);
    float *rm1 = copy_f(rm0, C), *rv1 = copy_f(rv0, C), *mean1 = alloc_f(C), *rstd1 = alloc_f(C), *y1 = alloc_f(n);
    batchnorm1d_stats_partial(f1, x + off, rm1, B - h, C, T, group);
    batchnorm1d_stats_partial(f0, x, split.rm, h, C, T, group);
    xsum_merge(f0, f1, 2 * C);  // the reduction over ranks: both get these sums
    batchnorm1d_forward_global(split.y, split.mean, split.rstd, split.rm, split.rv, x, w, bias, f0, N, h, C, T, 1e-5f,
                               0.1f);
    batchnorm1d_forward_global(y1 + off, mean1, rstd1, rm1, rv1, x + off, w, bias, f0, N, B - h, C, T, 1e-5f, 0.1f);
    memcpy(split.y + off, y1 + off, sizeof(float) * (n - off));
    batchnorm1d_backward_partial(g0, split.dw, split.db, gy, x, split.mean, split.rstd, h, C, T, group);
    batchnorm1d_backward_partial(g1, split.dw, split.db, gy + off, x + off, mean1, rstd1, B - h, C, T, group);
    xsum_merge(g0, g1, 2 * C);
    batchnorm1d_backward_global(split.dx, 0, gy, x, w, split.mean, split.rstd, g0, N, h, C, T);
    batchnorm1d_backward_global(split.dx + off, 0, gy + off, x + off, w, mean1, rstd1, g0, N, B - h, C, T);
    with_threads(before);
    {  // relu_set: the bits of zeroing dx, adding the gradient, then relu_mask, over a ReLU's output
        float *xr = alloc_f(n), *want = zeros_f(n), *got = rand_f(n, -1, 1);
        for (size_t i = 0; i < n; i++) xr[i] = i % 3 ? x[i] : 0.0f;
        batchnorm1d_backward_global(want, 0, gy, xr, w, whole.mean, whole.rstd, bwd, N, B, C, T);
        relu_mask(want, xr, n);
        batchnorm1d_backward_global(got, 1, gy, xr, w, whole.mean, whole.rstd, bwd, N, B, C, T);
        check_true(memcmp(got, want, sizeof(float) * n) == 0,
                   cname("bn global B%d C%d T%d relu_set: zeroing, the gradient and relu_mask's bits", B, C, T));
    }
    check_true(
        memcmp(split.y, whole.y, sizeof(float) * n) == 0 && memcmp(split.mean, whole.mean, 4 * C) == 0 &&
            memcmp(mean1, whole.mean, 4 * C) == 0 && memcmp(rstd1, whole.rstd, 4 * C) == 0 &&
            memcmp(split.rm, whole.rm, 4 * C) == 0 && memcmp(rv1, whole.rv, 4 * C) == 0,
        cname("bn global B%d C%d T%d group %d: halves on two ranks normalise as the whole batch", B, C, T, group));
    check_true(memcmp(split.dx, whole.dx, sizeof(float) * n) == 0 && same_sums(split.dw, whole.dw, C) &&
                   same_sums(split.db, whole.db, C),
               cname("bn global B%d C%d T%d group %d: the same input and parameter gradients", B, C, T, group));
    float *y = alloc_f(n), *mean = alloc_f(C), *rstd = alloc_f(C), *rm = copy_f(rm0, C), *rv = copy_f(rv0, C);
    batchnorm1d_forward_train(y, mean, rstd, rm, rv, x, w, bias, B, C, T, 1e-5f, 0.1f);
    check_close(cname("bn global B%d C%d T%d y vs forward_train", B, C, T), whole.y, y, n, 1e-4, 1e-4);
    check_close("bn global rstd vs forward_train", whole.rstd, rstd, C, 1e-5, 0);
    check_close("bn global running var vs forward_train", whole.rv, rv, C, 1e-5, 0);
    float *dx = zeros_f(n), *dw = zeros_f(C), *db = zeros_f(C);
    batchnorm1d_backward(dx, dw, db, gy, x, w, mean, rstd, B, C, T);
    check_close(cname("bn global B%d C%d T%d dx vs backward", B, C, T), whole.dx, dx, n, 1e-3, 1e-4);
    check_close("bn global dweight vs backward", sums_to_floats(whole.dw, C), dw, C, 1e-4, 1e-4);
    check_close("bn global dbias vs backward", sums_to_floats(whole.db, C), db, C, 1e-4, 1e-4);
    test_release();
}

// A ReLU's output (about half of it exactly 0) into the BatchNorm: batchnorm1d_relu_backward
// overwrites a garbage dx with the bits of zeroing it, batchnorm1d_backward and relu_mask, and
// accumulates dweight and dbias the same.
static float *relu_of(const float *x, size_t n) {
    float *r = alloc_f(n);
    for (size_t i = 0; i < n; i++) r[i] = x[i] > 0.0f ? x[i] : 0.0f;
    return r;
}

static void relu_case(int B, int C, int T, int affine) {
    const size_t n = (size_t)B * C * T;
    float *pre = rand_f(n, -1, 1);
    pre[0] = -0.0f;  // relu(-0) is +0
    float *x = relu_of(pre, n), *gy = rand_f(n, -1, 1);
    float *w = affine ? rand_f(C, 0.5f, 1.5f) : NULL, *mean = alloc_f(C), *rstd = alloc_f(C), *y = alloc_f(n);
    float *rm = rand_f(C, -1, 1), *rv = rand_f(C, 0.5f, 2), *rm2 = copy_f(rm, C), *rv2 = copy_f(rv, C);
    float *b = affine ? rand_f(C, -1, 1) : NULL, *y2 = alloc_f(n), *mean2 = alloc_f(C), *rstd2 = alloc_f(C);
    batchnorm1d_forward_train(y, mean, rstd, rm, rv, x, w, b, B, C, T, 1e-5f, 0.1f);
    // the forward over the ReLU's input: the bits of relu_forward then the forward
    batchnorm1d_relu_forward_train(y2, mean2, rstd2, rm2, rv2, pre, w, b, B, C, T, 1e-5f, 0.1f);
    char fn[96];
    snprintf(fn, sizeof fn, "bn relu forward B%d C%d T%d: relu_forward then the forward's bits", B, C, T);
    check_true(memcmp(y2, y, n * sizeof *y) == 0 && memcmp(mean2, mean, C * sizeof *mean) == 0 &&
                   memcmp(rstd2, rstd, C * sizeof *rstd) == 0 && memcmp(rm2, rm, C * sizeof *rm) == 0 &&
                   memcmp(rv2, rv, C * sizeof *rv) == 0,
               fn);
    float *dw = rand_f(C, -1, 1), *db = rand_f(C, -1, 1), *rdw = copy_f(dw, C), *rdb = copy_f(db, C);
    float *dx = rand_f(n, -1, 1), *ref = zeros_f(n);
    batchnorm1d_backward(ref, affine ? rdw : NULL, affine ? rdb : NULL, gy, x, w, mean, rstd, B, C, T);
    relu_mask(ref, x, n);
    batchnorm1d_relu_backward(dx, NULL, affine ? dw : NULL, affine ? db : NULL, gy, x, w, mean, rstd, B, C, T);
    char nm[96];
    snprintf(nm, sizeof nm, "bn relu backward dx B%d C%d T%d: the composition's bits", B, C, T);
    check_true(memcmp(dx, ref, n * sizeof *dx) == 0, nm);
    snprintf(nm, sizeof nm, "bn relu backward dweight, dbias B%d C%d T%d: the composition's bits", B, C, T);
    check_true(memcmp(dw, rdw, C * sizeof *dw) == 0 && memcmp(db, rdb, C * sizeof *db) == 0, nm);
    // dsum: the bits conv1d_backward adds as the bias gradient of dx, into a prefill
    float *sum = rand_f(C, -1, 1), *want_sum = copy_f(sum, C), *dx2 = alloc_f(n);
    conv1d_backward(NULL, 0, NULL, want_sum, ref, NULL, NULL, B, 1, C, T, 1, 1, NULL);
    batchnorm1d_relu_backward(dx2, sum, NULL, NULL, gy, x, w, mean, rstd, B, C, T);
    snprintf(nm, sizeof nm, "bn relu backward dsum B%d C%d T%d: conv1d_backward's bias gradient bits", B, C, T);
    check_true(memcmp(sum, want_sum, C * sizeof *sum) == 0 && memcmp(dx2, ref, n * sizeof *dx2) == 0, nm);
    size_t zeros = 0;
    for (size_t i = 0; i < n; i++) zeros += x[i] == 0.0f && dx[i] == 0.0f;
    snprintf(nm, sizeof nm, "bn relu backward B%d C%d T%d: the ReLU's zeros pass no gradient", B, C, T);
    check_true(zeros > n / 4, nm);

    // the ReLU's input in place of its output: the same bits
    memcpy(dw, rdw, C * sizeof *dw), memcpy(db, rdb, C * sizeof *db);
    batchnorm1d_relu_backward(ref, NULL, affine ? rdw : NULL, affine ? rdb : NULL, gy, x, w, mean, rstd, B, C, T);
    batchnorm1d_relu_backward(dx, NULL, affine ? dw : NULL, affine ? db : NULL, gy, pre, w, mean, rstd, B, C, T);
    snprintf(nm, sizeof nm, "bn relu backward B%d C%d T%d from the ReLU's input: its output's bits", B, C, T);
    check_true(memcmp(dx, ref, n * sizeof *dx) == 0 && memcmp(dw, rdw, C * sizeof *dw) == 0 &&
                   memcmp(db, rdb, C * sizeof *db) == 0,
               nm);

    // folded: the bits of bf16_fold_from_f32 of that dx, its sums added to a prefill
    spk_bf16 *want = (spk_bf16 *)test_alloc(n * sizeof(spk_bf16)), *got = (spk_bf16 *)test_alloc(n * sizeof(spk_bf16));
    float *sums = rand_f(C, -1, 1), *rsums = copy_f(sums, C);
    bf16_fold_from_f32(want, rsums, ref, B, C, T);
    memcpy(dw, rdw, C * sizeof *dw), memcpy(db, rdb, C * sizeof *db);
    batchnorm1d_relu_backward(ref, NULL, affine ? rdw : NULL, affine ? rdb : NULL, gy, x, w, mean, rstd, B, C, T);
    batchnorm1d_relu_backward_bf16(got, (size_t)B * T, T, sums, affine ? dw : NULL, affine ? db : NULL, gy, pre, w,
                                   mean, rstd, B, C, T);
    snprintf(nm, sizeof nm, "bn relu backward folded B%d C%d T%d: bf16_fold_from_f32's bits and sums", B, C, T);
    check_true(memcmp(got, want, n * sizeof *got) == 0 && memcmp(sums, rsums, C * sizeof *sums) == 0, nm);
    snprintf(nm, sizeof nm, "bn relu backward folded dweight, dbias B%d C%d T%d: the unfolded one's bits", B, C, T);
    check_true(memcmp(dw, rdw, C * sizeof *dw) == 0 && memcmp(db, rdb, C * sizeof *db) == 0, nm);
    // in the (B, C, T) layout: bf16_from_f32's bits, the same sums
    float *sums3 = rand_f(C, -1, 1), *rsums3 = copy_f(sums3, C);
    bf16_fold_from_f32(want, rsums3, ref, B, C, T);  // (for the sums)
    bf16_from_f32(want, ref, n);
    batchnorm1d_relu_backward_bf16(got, T, (size_t)C * T, sums3, NULL, NULL, gy, pre, w, mean, rstd, B, C, T);
    snprintf(nm, sizeof nm, "bn relu backward into (B, C, T) B%d C%d T%d: bf16_from_f32's bits, the same sums", B, C,
             T);
    check_true(memcmp(got, want, n * sizeof *got) == 0 && memcmp(sums3, rsums3, C * sizeof *sums3) == 0, nm);
    test_release();
}

static void cpu_checks(void) {
    relu_case(4, 6, 23, 1);
    relu_case(3, 5, 64, 0);
    invariant_case(5, 7, 30, 1);
    invariant_case(8, 7, 30, 2);
    invariant_case(6, 9, 1, 1);  // (B, C): the pooled statistics' BatchNorm
    hand_case();
    run_case(4, 3, 5, 1);
    run_case(3, 6, 17, 1);
    run_case(2, 4, 9, 0);
    run_case(16, 10, 1, 1);  // (B, C) input
    run_case(5, 7, 1, 0);
}

// ---- every backend against the CPU kernels --------------------------------------------------

// A training forward's outputs on the backend (y, mean, rstd, running mean and variance) within
// TOL of the CPU's.
static void cmp_train(const char *op, const char *tag, const float *const dev[5], const float *const cpu[5], size_t n,
                      int C) {
    static const char *const names[5] = {"y", "mean", "rstd", "running_mean", "running_var"};
    for (int i = 0; i < 5; i++) cmp(cname("%s %s %s", op, names[i], tag), dev[i], cpu[i], i ? (size_t)C : n, TOL);
}
static void backend_case(int B, int C, int T, int affine) {
    char tag[64];
    snprintf(tag, sizeof tag, "B%d C%d T%d%s", B, C, T, affine ? " affine" : "");
    const size_t n = (size_t)B * C * T;
    const float eps = 1e-5f, momentum = 0.1f;
    float *x = rand_f(n, -2, 3);
    float *wt = affine ? rand_f(C, 0.5f, 1.5f) : NULL;
    float *bs = affine ? rand_f(C, -1, 1) : NULL;
    float *rm = rand_f(C, -1, 1), *rv = rand_f(C, 0.5f, 2);
    float *dx = dev_f(x, n), *dwt = affine ? dev_f(wt, C) : NULL, *dbs = affine ? dev_f(bs, C) : NULL;
    float *drm = dev_f(rm, C), *drv = dev_f(rv, C);
    float *y = alloc_f(n), *mean = alloc_f(C), *rstd = alloc_f(C);
    batchnorm1d_forward_train(y, mean, rstd, rm, rv, x, wt, bs, B, C, T, eps, momentum);
    float *dy = dev_f(x, n), *dmean = dev_f(NULL, C), *drstd = dev_f(NULL, C);
    // in place (y == x is allowed)
    g_be->batchnorm1d_forward_train(dy, dmean, drstd, drm, drv, dy, dwt, dbs, B, C, T, eps, momentum);
    cmp_train("bn train (in place)", tag, (const float *[]){dy, dmean, drstd, drm, drv},
              (const float *[]){y, mean, rstd, rm, rv}, n, C);

    // inference with the updated running statistics
    float *yi = alloc_f(n);
    batchnorm1d_forward_infer(yi, x, rm, rv, wt, bs, B, C, T, eps);
    g_be->batchnorm1d_forward_infer(dy, dx, drm, drv, dwt, dbs, B, C, T, eps);
    cmp(cname("bn infer y %s", tag), dy, yi, n, TOL);

    float *gy = rand_f(n, -1, 1), *dgy = dev_f(gy, n);
    grads_t g = grads_prefill(3, (size_t[]){n, C, C});
    batchnorm1d_backward(g.cpu[0], g.cpu[1], g.cpu[2], gy, x, wt, mean, rstd, B, C, T);
    g_be->batchnorm1d_backward(g.dev[0], g.dev[1], g.dev[2], dgy, dx, dwt, dmean, drstd, B, C, T);
    g_be->batchnorm1d_backward(g.dev2[0], g.dev2[1], g.dev2[2], dgy, dx, dwt, dmean, drstd, B, C, T);
    grads_check(&g, "bn", tag, (const char *[]){"dx", "dweight", "dbias"}, (double[]){TOL, TOL, TOL});

    // after a ReLU: dx overwritten (from a random prefill), dweight and dbias accumulated
    float *xr = relu_of(x, n), *dxr = dev_f(xr, n);
    {  // the forward over the ReLU's input (x) against the CPU's
        float *ry = alloc_f(n), *rmean = alloc_f(C), *rrstd = alloc_f(C), *rrm = rand_f(C, -1, 1);
        float *rrv = rand_f(C, 0.5f, 2), *drrm = dev_f(rrm, C), *drrv = dev_f(rrv, C);
        float *dry = dev_f(NULL, n), *drmean = dev_f(NULL, C), *drrstd = dev_f(NULL, C);
        batchnorm1d_relu_forward_train(ry, rmean, rrstd, rrm, rrv, x, wt, bs, B, C, T, eps, momentum);
        g_be->batchnorm1d_relu_forward_train(dry, drmean, drrstd, drrm, drrv, dx, dwt, dbs, B, C, T, eps, momentum);
        cmp_train("bn relu train", tag, (const float *[]){dry, drmean, drrstd, drrm, drrv},
                  (const float *[]){ry, rmean, rrstd, rrm, rrv}, n, C);
    }
    grads_t r = grads_prefill(4, (size_t[]){n, C, C, C});  // dx, dsum (the convolution's bias gradient), ...
    batchnorm1d_relu_backward(r.cpu[0], r.cpu[1], r.cpu[2], r.cpu[3], gy, xr, wt, mean, rstd, B, C, T);
    g_be->batchnorm1d_relu_backward(r.dev[0], r.dev[1], r.dev[2], r.dev[3], dgy, dxr, dwt, dmean, drstd, B, C, T);
    g_be->batchnorm1d_relu_backward(r.dev2[0], r.dev2[1], r.dev2[2], r.dev2[3], dgy, dx, dwt, dmean, drstd, B, C,
                                    T);  // input
    grads_check(&r, "bn relu", tag, (const char *[]){"dx", "dsum", "dweight", "dbias"}, (double[]){TOL, TOL, TOL, TOL});

    // and folded to bf16 with the sums of dx (into prefills), twice
    spk_bf16 *hh = (spk_bf16 *)test_alloc(n * sizeof(spk_bf16)), *dh = (spk_bf16 *)dev_alloc(n * sizeof(spk_bf16));
    spk_bf16 *ones = (spk_bf16 *)test_alloc(n * sizeof(spk_bf16));
    for (size_t i = 0; i < n; i++) ones[i] = spk_bf16_round(1.0f);
    grads_t f = grads_prefill(3, (size_t[]){C, C, C});
    // the backend's own unfolded op then its fold, whose bits the folded op promises
    float *gdx = dev_f(NULL, n), *wsum = dev_f(f.cpu[0], C);
    spk_bf16 *wh = (spk_bf16 *)dev_alloc(n * sizeof(spk_bf16));
    g_be->batchnorm1d_relu_backward(gdx, NULL, NULL, NULL, dgy, dxr, dwt, dmean, drstd, B, C, T);
    g_be->bf16_fold_from_f32(wh, wsum, gdx, B, C, T);
    batchnorm1d_relu_backward_bf16(hh, (size_t)B * T, T, f.cpu[0], f.cpu[1], f.cpu[2], gy, xr, wt, mean, rstd, B, C, T);
    for (int rep = 0; rep < 2; rep++) {  // from the ReLU's output, then from its input
        float *const *o = rep ? f.dev2 : f.dev;
        g_be->upload(dh, ones, n * sizeof(spk_bf16));  // a prefill of ones, all overwritten
        g_be->batchnorm1d_relu_backward_bf16(dh, (size_t)B * T, T, o[0], o[1], o[2], dgy, rep ? dx : dxr, dwt, dmean,
                                             drstd, B, C, T);
        cmp_bf16_step(cname("bn relu folded dxh %s", tag), dh, hh, n);
        same_bits_bf16(
            cname("bn relu folded dxh (%s) = the backend's backward and fold %s", rep ? "input" : "output", tag), dh,
            wh, n);
    }
    same_bits(cname("bn relu folded dsum = the backend's fold's sums %s", tag), f.dev[0], wsum, C);
    // into the (B, C, T) layout: the bits of the backend's own backward, rounded in place
    g_be->bf16_from_f32(wh, gdx, n);
    g_be->upload(dh, ones, n * sizeof(spk_bf16));
    g_be->batchnorm1d_relu_backward_bf16(dh, T, (size_t)C * T, NULL, NULL, NULL, dgy, dxr, dwt, dmean, drstd, B, C, T);
    same_bits_bf16(cname("bn relu dxh into (B, C, T) = the backend's backward, rounded %s", tag), dh, wh, n);
    grads_check(&f, "bn relu folded", tag, (const char *[]){"dsum", "dweight", "dbias"}, (double[]){TOL, TOL, TOL});

    // the invariant mode's BatchNorm from (here unreduced) sums
    const int64_t N = (int64_t)B * T;
    xsum_t hf = host_sums(2 * C), hg = host_sums(2 * C), hw = host_sums(C), hb = host_sums(C);
    xsum_t df = xsum_layout(dev_alloc(xsum_bytes(2 * C)), 2 * C), dg = xsum_layout(dev_alloc(xsum_bytes(2 * C)), 2 * C);
    xsum_t dsw = xsum_layout(dev_alloc(xsum_bytes(C)), C), dsb = xsum_layout(dev_alloc(xsum_bytes(C)), C);
    float *hdx = zeros_f(n), *ddx = dev_f(NULL, n), *sf = dev_f(NULL, 2 * C);
    batchnorm1d_stats_partial(hf, x, rm, B, C, T, 1);
    g_be->batchnorm1d_stats_partial(df, dx, drm, B, C, T, 1);
    g_be->xsum_to_float(sf, df, 2 * C);
    cmp(cname("bn stats_partial %s", tag), sf, sums_to_floats(hf, 2 * C), 2 * C, TOL);
    batchnorm1d_forward_global(y, mean, rstd, rm, rv, x, wt, bs, hf, N, B, C, T, eps, momentum);
    g_be->batchnorm1d_forward_global(dy, dmean, drstd, drm, drv, dx, dwt, dbs, df, N, B, C, T, eps, momentum);
    cmp(cname("bn forward_global y %s", tag), dy, y, n, TOL);
    cmp(cname("bn forward_global running_var %s", tag), drv, rv, C, TOL);
    batchnorm1d_backward_partial(hg, affine ? hw : xsum_none(), affine ? hb : xsum_none(), gy, x, mean, rstd, B, C, T,
                                 1);
    g_be->batchnorm1d_backward_partial(dg, affine ? dsw : xsum_none(), affine ? dsb : xsum_none(), dgy, dx, dmean,
                                       drstd, B, C, T, 1);
    g_be->xsum_to_float(sf, dg, 2 * C);
    cmp(cname("bn backward_partial %s", tag), sf, sums_to_floats(hg, 2 * C), 2 * C, TOL);
    if (affine) {
        g_be->xsum_to_float(sf, dsw, C);
        cmp(cname("bn backward_partial dweight %s", tag), sf, sums_to_floats(hw, C), C, TOL);
    }
    batchnorm1d_backward_global(hdx, 0, gy, x, wt, mean, rstd, hg, N, B, C, T);
    g_be->batchnorm1d_backward_global(ddx, 0, dgy, dx, dwt, dmean, drstd, dg, N, B, C, T);
    cmp(cname("bn backward_global dx %s", tag), ddx, hdx, n, TOL);
    // after a ReLU (its output, a third of it 0): dx overwritten with the gradient at its input
    float *xz = relu_of(x, n);
    for (size_t i = 0; i < n; i += 3) xz[i] = 0.0f;
    float *dxz = dev_f(xz, n);
    batchnorm1d_backward_global(hdx, 1, gy, xz, wt, mean, rstd, hg, N, B, C, T);
    g_be->batchnorm1d_backward_global(ddx, 1, dgy, dxz, dwt, dmean, drstd, dg, N, B, C, T);
    cmp(cname("bn backward_global relu_set dx %s", tag), ddx, hdx, n, TOL);
    dev_release();
    test_release();
}

static void backend_checks(void) {
    backend_case(4, 6, 23, 1);
    backend_case(3, 5, 200, 0);
    backend_case(8, 5, 1, 1);  // (B, C) input
}

int main(int argc, char **argv) { return test_main(argc, argv, "test_batchnorm", 42, cpu_checks, backend_checks); }
