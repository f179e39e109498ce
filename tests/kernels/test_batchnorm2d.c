// batchnorm2d: against PyTorch (tests/golden/kernels2d_golden.h: a ResNet block's
// relu(bn(x) + residual) in training mode, its gradients, the running statistics after it and
// the inference forward), against a double reference of the forward and backward with and without
// ReLU and residual, finite differences (without the ReLU), overwriting and accumulating outputs,
// the same bits on 1 and 2 threads, the training forward's rounded copy (yh) the bits of bf16(y).
// The world-size-invariant mode's passes: partial sums independent of the split and the threads,
// global passes close to the plain ones. Then every backend against the CPU kernels
// (tests/kernels/backends.h).
#include <stdio.h>
#include <string.h>

#include "../golden/kernels2d_golden.h"
#include "backends.h"
#include "exact_check.h"
#include "kernels/batchnorm2d.h"

#define EPS 1e-5f
#define MOM 0.1f

static void golden_case(void) {
    const int N = G_BN_B * G_BN_H * G_BN_W, C = G_BN_C;
    const size_t n = (size_t)N * C;
    float *ws = alloc_f(batchnorm2d_workspace_floats(N, C)), *y = alloc_f(n), *mean = alloc_f(C), *rstd = alloc_f(C);
    float *rm = copy_f(g_bn_rm, C), *rv = copy_f(g_bn_rv, C);
    batchnorm2d_forward_train(y, NULL, mean, rstd, rm, rv, g_bn_x, NULL, g_bn_w, g_bn_b, g_bn_res, NULL, 1, N, C, EPS,
                              MOM, ws);
    check_close("PyTorch: y = relu(bn(x) + residual)", y, g_bn_y, n, 1e-5, 1e-6);
    check_close("PyTorch: running mean", rm, g_bn_rm_after, C, 1e-6, 1e-7);
    check_close("PyTorch: running var", rv, g_bn_rv_after, C, 1e-6, 1e-7);
    float *dx = alloc_f(n), *dres = alloc_f(n), *dw = zeros_f(C), *db = zeros_f(C);
    batchnorm2d_backward(dx, dres, 0, dw, db, g_bn_dy, y, g_bn_x, g_bn_w, mean, rstd, 1, N, C, ws);
    check_close("PyTorch: dx", dx, g_bn_dx, n, 1e-4, 1e-6);
    check_close("PyTorch: dresidual", dres, g_bn_dres, n, 0, 0);
    check_close("PyTorch: dweight", dw, g_bn_dw, C, 1e-5, 1e-6);
    check_close("PyTorch: dbias", db, g_bn_db, C, 1e-5, 1e-6);
    batchnorm2d_forward_infer(y, g_bn_x, rm, rv, g_bn_w, g_bn_b, NULL, 0, N, C, EPS);
    check_close("PyTorch: inference forward", y, g_bn_y_infer, n, 1e-5, 1e-6);
    test_release();
}

// The training forward and backward in double: y, and the gradients of sum(r * y) (dx, dres,
// dw, db), the ReLU's mask from the double pre-activation.
static void reference(double *y, double *dx, double *dres, double *dw, double *db, const float *x, const float *w,
                      const float *b, const float *res, const float *r, int relu, int N, int C) {
    double mu[C], rs[C];
    for (int c = 0; c < C; c++) {
        double s = 0, ss = 0;
        for (int i = 0; i < N; i++) s += x[(size_t)i * C + c];
        mu[c] = s / N;
        for (int i = 0; i < N; i++) ss += (x[(size_t)i * C + c] - mu[c]) * (x[(size_t)i * C + c] - mu[c]);
        rs[c] = 1.0 / sqrt(ss / N + EPS);
        for (int i = 0; i < N; i++) {
            const size_t j = (size_t)i * C + c;
            double v = (x[j] - mu[c]) * rs[c] * w[c] + b[c] + (res ? res[j] : 0.0);
            y[j] = relu && v < 0 ? 0 : v;
            dres[j] = relu && v < 0 ? 0 : r[j];
        }
        double sg = 0, sgx = 0;
        for (int i = 0; i < N; i++) {
            const size_t j = (size_t)i * C + c;
            sg += dres[j];
            sgx += dres[j] * (x[j] - mu[c]) * rs[c];
        }
        db[c] = sg, dw[c] = sgx;
        for (int i = 0; i < N; i++) {
            const size_t j = (size_t)i * C + c;
            dx[j] = w[c] * rs[c] * (dres[j] - sg / N - (x[j] - mu[c]) * rs[c] * sgx / N);
        }
    }
}

typedef struct {
    int N, C, relu, with_res;
    float *x, *w, *b, *res, *r, *y, *mean, *rstd, *ws;
} bn_ctx;

static double bn_loss(void *p) {
    bn_ctx *c = (bn_ctx *)p;
    batchnorm2d_forward_train(c->y, NULL, c->mean, c->rstd, NULL, NULL, c->x, NULL, c->w, c->b,
                              c->with_res ? c->res : NULL, NULL, c->relu, c->N, c->C, EPS, MOM, c->ws);
    return dot_d(c->y, c->r, (size_t)c->N * c->C);
}

static void reference_case(int N, int C, int relu, int with_res) {
    const size_t n = (size_t)N * C;
    char tag[96];
    snprintf(tag, sizeof tag, "N%d C%d%s%s", N, C, relu ? " relu" : "", with_res ? " residual" : "");
    bn_ctx c = {N,
                C,
                relu,
                with_res,
                rand_f(n, -1, 3),
                rand_f(C, 0.5f, 1.5f),
                rand_f(C, -0.5f, 0.5f),
                rand_f(n, -1, 1),
                rand_f(n, -1, 1),
                alloc_f(n),
                alloc_f(C),
                alloc_f(C),
                alloc_f(batchnorm2d_workspace_floats(N, C))};
    double *yr = alloc_d(n), *dxr = alloc_d(n), *dresr = alloc_d(n), *dwr = alloc_d(C), *dbr = alloc_d(C);
    reference(yr, dxr, dresr, dwr, dbr, c.x, c.w, c.b, with_res ? c.res : NULL, c.r, relu, N, C);
    bn_loss(&c);
    char nm[200];
    snprintf(nm, sizeof nm, "forward vs double %s", tag);
    check_close_d(nm, c.y, yr, n, 1e-5, 1e-5);
    // the same bits on one thread, and with the rounded copy written beside
    float *y1 = alloc_f(n);
    spk_bf16 *yh1 = (spk_bf16 *)test_alloc(n * sizeof(spk_bf16)),
             *yh_want = (spk_bf16 *)test_alloc(n * sizeof(spk_bf16));
    const int threads = omp_get_max_threads();
    omp_set_num_threads(1);
    batchnorm2d_forward_train(y1, yh1, c.mean, c.rstd, NULL, NULL, c.x, NULL, c.w, c.b, with_res ? c.res : NULL, NULL,
                              relu, N, C, EPS, MOM, c.ws);
    float *g1 = alloc_f(n);
    batchnorm2d_backward(g1, NULL, 0, NULL, NULL, c.r, c.y, c.x, c.w, c.mean, c.rstd, relu, N, C, c.ws);
    omp_set_num_threads(threads);
    snprintf(nm, sizeof nm, "forward the same bits on 1 thread %s", tag);
    check_true(memcmp(y1, c.y, n * 4) == 0, nm);
    bf16_from_f32(yh_want, y1, n);
    snprintf(nm, sizeof nm, "forward's yh = bf16(y) %s", tag);
    check_true(memcmp(yh1, yh_want, n * sizeof *yh1) == 0, nm);
    spk_bf16 *yh_only = (spk_bf16 *)test_alloc(n * sizeof(spk_bf16));  // y NULL: yh alone, the same bits
    batchnorm2d_forward_train(NULL, yh_only, c.mean, c.rstd, NULL, NULL, c.x, NULL, c.w, c.b, with_res ? c.res : NULL,
                              NULL, relu, N, C, EPS, MOM, c.ws);
    snprintf(nm, sizeof nm, "forward with y NULL: yh alone, the same bits %s", tag);
    check_true(memcmp(yh_only, yh1, n * sizeof *yh1) == 0, nm);

    float *dx = rand_f(n, -1, 1), *dres = rand_f(n, -1, 1), *dw = zeros_f(C), *db = zeros_f(C);
    batchnorm2d_backward(dx, with_res ? dres : NULL, 0, dw, db, c.r, c.y, c.x, c.w, c.mean, c.rstd, relu, N, C, c.ws);
    snprintf(nm, sizeof nm, "backward the same bits on 1 thread %s", tag);
    check_true(memcmp(g1, dx, n * 4) == 0, nm);
    snprintf(nm, sizeof nm, "dx vs double %s", tag);
    check_close_d(nm, dx, dxr, n, 1e-4, 1e-5);
    snprintf(nm, sizeof nm, "dweight vs double %s", tag);
    check_close_d(nm, dw, dwr, C, 1e-4, 1e-5 * N);
    snprintf(nm, sizeof nm, "dbias vs double %s", tag);
    check_close_d(nm, db, dbr, C, 1e-4, 1e-5 * N);
    if (with_res) {  // the masked dy
        snprintf(nm, sizeof nm, "dresidual %s", tag);
        check_close_d(nm, dres, dresr, n, 0, 0);
    }
    if (!relu) {  // finite differences through a ReLU's kinks would test the probe, not the kernel
        snprintf(nm, sizeof nm, "fd dx %s", tag);
        fd_check(nm, c.x, dx, n, bn_loss, &c, 1e-3f, 3e-3, 3e-3, 60);
        snprintf(nm, sizeof nm, "fd dweight %s", tag);
        fd_check(nm, c.w, dw, C, bn_loss, &c, 1e-3f, 3e-3, 3e-3, 60);
        snprintf(nm, sizeof nm, "fd dbias %s", tag);
        fd_check(nm, c.b, db, C, bn_loss, &c, 1e-3f, 3e-3, 3e-3, 60);
        bn_loss(&c);  // the probes left the last perturbed forward's statistics
    }
    // accumulate: prefill + the overwritten result
    float *px = rand_f(n, -1, 1), *pr = rand_f(n, -1, 1), *pw = rand_f(C, -1, 1), *pb = rand_f(C, -1, 1);
    float *ax = copy_f(px, n), *ar = copy_f(pr, n), *aw = copy_f(pw, C), *ab = copy_f(pb, C);
    batchnorm2d_backward(ax, with_res ? ar : NULL, 1, aw, ab, c.r, c.y, c.x, c.w, c.mean, c.rstd, relu, N, C, c.ws);
    check_accumulated3("batchnorm2d", tag, (grad3_t){ax, aw, ab}, (grad3_t){px, pw, pb}, (grad3_t){dx, dw, db},
                       (grad3_sizes_t){n, (size_t)C, (size_t)C});
    if (with_res) {
        snprintf(nm, sizeof nm, "batchnorm2d dresidual accumulates %s", tag);
        check_accumulated(nm, ar, pr, dres, n);
    }
    // rounded: bf16 of the overwritten dx, the other outputs' bits (into the same prefills)
    spk_bf16 *h = (spk_bf16 *)test_alloc(n * sizeof(spk_bf16)), *want = (spk_bf16 *)test_alloc(n * sizeof(spk_bf16));
    bf16_from_f32(want, dx, n);
    float *rr = copy_f(pr, n), *rw = copy_f(pw, C), *rb = copy_f(pb, C);
    batchnorm2d_backward_rounded(h, with_res ? rr : NULL, 1, rw, rb, c.r, NULL, c.y, NULL, c.x, NULL, c.w, c.mean,
                                 c.rstd, relu, N, C, c.ws);
    snprintf(nm, sizeof nm, "batchnorm2d_backward_rounded: bf16 of dx, the other outputs' bits %s", tag);
    check_true(memcmp(h, want, n * sizeof *h) == 0 && (!with_res || memcmp(rr, ar, n * sizeof *rr) == 0) &&
                   memcmp(rw, aw, C * sizeof *rw) == 0 && memcmp(rb, ab, C * sizeof *rb) == 0,
               nm);
    // the mask from the forward's rounded output (y NULL): the same bits
    spk_bf16 *hm = (spk_bf16 *)test_alloc(n * sizeof(spk_bf16));
    float *mr = copy_f(pr, n), *mw = copy_f(pw, C), *mb = copy_f(pb, C);
    batchnorm2d_backward_rounded(hm, with_res ? mr : NULL, 1, mw, mb, c.r, NULL, NULL, yh1, c.x, NULL, c.w, c.mean,
                                 c.rstd, relu, N, C, c.ws);
    snprintf(nm, sizeof nm, "batchnorm2d_backward_rounded: the mask from yh, the same bits %s", tag);
    check_true(memcmp(hm, h, n * sizeof *h) == 0 && (!with_res || memcmp(mr, rr, n * sizeof *rr) == 0) &&
                   memcmp(mw, rw, C * sizeof *rw) == 0 && memcmp(mb, rb, C * sizeof *rb) == 0,
               nm);
    test_release();
}

// ---- the world-size-invariant mode ---------------------------------------------------------------
// The partial sums the same for the batch split into two calls on 1 thread as in one call on 2;
// the global passes with the sums of the whole batch close to the plain kernels.
static void invariant_case(int B, int HW, int C, int relu, int with_res, int group) {
    const int N = B * HW, first = (B / group + 1) / 2 * group;
    const size_t n = (size_t)N * C, head = (size_t)first * HW * C;
    const char *t0 =
        cname("B%d HW%d C%d%s%s group %d", B, HW, C, relu ? " relu" : "", with_res ? " residual" : "", group);
    char tag[96];
    snprintf(tag, sizeof tag, "%s", t0);
    float *x = rand_f(n, -1, 3), *w = rand_f(C, 0.5f, 1.5f), *b = rand_f(C, -0.5f, 0.5f), *res = rand_f(n, -1, 1);
    float *dy = rand_f(n, -1, 1), *rm = rand_f(C, -0.1f, 0.1f), *rv = rand_f(C, 0.9f, 1.1f);
    float *rm1 = copy_f(rm, C), *rv1 = copy_f(rv, C);
    xsum_t s2 = host_sums(2 * C), s1 = host_sums(2 * C);
    int before = with_threads(2);
    batchnorm2d_stats_partial(s2, x, rm, B, HW, C, group);
    with_threads(1);
    batchnorm2d_stats_partial(s1, x + head, rm, B - first, HW, C, group);
    batchnorm2d_stats_partial(s1, x, rm, first, HW, C, group);
    with_threads(before);
    check_true(same_sums(s1, s2, 2 * C), cname("batchnorm2d_stats_partial %s: batch split, 1 or 2 threads", tag));
    float *y = alloc_f(n), *mean = alloc_f(C), *rstd = alloc_f(C), *yp = alloc_f(n), *mp = alloc_f(C), *sp = alloc_f(C);
    batchnorm2d_forward_global(y, mean, rstd, rm, rv, x, w, b, with_res ? res : NULL, relu, s2, N, N, C, EPS, MOM);
    float *ws = alloc_f(batchnorm2d_workspace_floats(N, C));
    batchnorm2d_forward_train(yp, NULL, mp, sp, rm1, rv1, x, NULL, w, b, with_res ? res : NULL, NULL, relu, N, C, EPS,
                              MOM, ws);
    check_close(cname("batchnorm2d_forward_global %s vs forward_train", tag), y, yp, n, 1e-5, 1e-5);
    check_close(cname("batchnorm2d_forward_global %s running variance", tag), rv, rv1, C, 1e-6, 1e-7);

    xsum_t g2 = host_sums(2 * C), g1 = host_sums(2 * C), dw2 = host_sums(C), dw1 = host_sums(C), db2 = host_sums(C),
           db1 = host_sums(C);
    before = with_threads(2);
    batchnorm2d_backward_partial(g2, dw2, db2, dy, y, x, mean, rstd, relu, B, HW, C, group);
    with_threads(1);
    batchnorm2d_backward_partial(g1, dw1, db1, dy + head, y + head, x + head, mean, rstd, relu, B - first, HW, C,
                                 group);
    batchnorm2d_backward_partial(g1, dw1, db1, dy, y, x, mean, rstd, relu, first, HW, C, group);
    with_threads(before);
    check_true(same_sums(g1, g2, 2 * C) && same_sums(dw1, dw2, C) && same_sums(db1, db2, C),
               cname("batchnorm2d_backward_partial %s: batch split, 1 or 2 threads", tag));
    float *dx = rand_f(n, -1, 1), *dres = rand_f(n, -1, 1), *dxp = alloc_f(n), *dresp = alloc_f(n);
    float *dwp = zeros_f(C), *dbp = zeros_f(C);
    batchnorm2d_backward_global(dx, NULL, with_res ? dres : NULL, 0, dy, y, x, w, mean, rstd, relu, g2, N, N, C);
    batchnorm2d_backward(dxp, with_res ? dresp : NULL, 0, dwp, dbp, dy, y, x, w, mean, rstd, relu, N, C, ws);
    check_close(cname("batchnorm2d_backward_global %s dx vs backward", tag), dx, dxp, n, 1e-4, 1e-5);
    if (with_res) check_close(cname("batchnorm2d_backward_global %s dresidual", tag), dres, dresp, n, 0, 0);
    spk_bf16 *dxh = (spk_bf16 *)test_alloc(n * sizeof(spk_bf16)), *dxh_want = (spk_bf16 *)test_alloc(n * 2);
    batchnorm2d_backward_global(NULL, dxh, NULL, 0, dy, y, x, w, mean, rstd, relu, g2, N, N, C);
    bf16_from_f32(dxh_want, dx, n);
    check_true(!memcmp(dxh, dxh_want, n * sizeof(spk_bf16)),
               cname("batchnorm2d_backward_global %s: dxh alone = bf16(dx)", tag));
    check_close(cname("batchnorm2d_backward_partial %s dweight", tag), sums_to_floats(dw2, C), dwp, C, 1e-5, 1e-5 * N);
    check_close(cname("batchnorm2d_backward_partial %s dbias", tag), sums_to_floats(db2, C), dbp, C, 1e-5, 1e-5 * N);
    test_release();
}

// Outputs below bf16's range: with yh written, y is zero where yh is (the rounded backward's
// mask may read yh), where without it y keeps them.
static void tiny_outputs_case(void) {
    const int N = 64, C = 16;
    const size_t n = (size_t)N * C;
    float *x = rand_f(n, -1, 1), *w = alloc_f(C), *b = zeros_f(C), *y = alloc_f(n), *y0 = alloc_f(n);
    float *mean = alloc_f(C), *rstd = alloc_f(C), *ws = alloc_f(batchnorm2d_workspace_floats(N, C));
    for (int c = 0; c < C; c++) w[c] = 1e-40f;  // outputs of at most a few 1e-40: subnormal
    spk_bf16 *yh = (spk_bf16 *)test_alloc(n * sizeof(spk_bf16));
    batchnorm2d_forward_train(y0, NULL, mean, rstd, NULL, NULL, x, NULL, w, b, NULL, NULL, 1, N, C, EPS, MOM, ws);
    batchnorm2d_forward_train(y, yh, mean, rstd, NULL, NULL, x, NULL, w, b, NULL, NULL, 1, N, C, EPS, MOM, ws);
    size_t kept = 0, agree = 0;
    for (size_t j = 0; j < n; j++) {
        kept += y0[j] > 0.0f && spk_bf16_round(y0[j]) == 0;
        agree += (yh[j] != 0) == (y[j] > 0.0f);
    }
    check_true(kept > 0, "tiny outputs: some positive outputs round to a bf16 zero (the case is exercised)");
    check_true(agree == n, "tiny outputs: with yh written, y > 0 exactly where yh is nonzero");
    test_release();
}

static void cpu_checks(void) {
    golden_case();
    tiny_outputs_case();
    reference_case(7, 3, 0, 0);
    reference_case(300, 5, 1, 0);
    reference_case(600, 9, 0, 1);   // finite differences over three blocks
    reference_case(513, 70, 1, 1);  // rows over two blocks, channels over two lanes
    reference_case(64, 16, 0, 1);
    invariant_case(6, 20, 5, 1, 1, 1);
    invariant_case(6, 50, 70, 1, 0, 3);
    invariant_case(4, 9, 16, 0, 1, 2);
}

// The training passes with their input, residual and output gradient in bf16 (xh, residual_h,
// dyh): bitwise the passes on the float32 ones equal to them (widened), on the backend.
static void bf16_input_case(int N, int C, int relu, int with_res, const char *t) {
    const size_t n = (size_t)N * C;
    float *x_ = dev_f(rand_f(n, -1, 3), n), *w_ = dev_f(rand_f(C, 0.5f, 1.5f), C),
          *b_ = dev_f(rand_f(C, -0.5f, 0.5f), C);
    float *res_ = with_res ? dev_f(rand_f(n, -1, 1), n) : NULL, *dy_ = dev_f(rand_f(n, -1, 1), n);
    float *ws_ = dev_f(NULL, g_be->batchnorm2d_workspace_floats(N, C)), *rm = rand_f(C, -0.1f, 0.1f),
          *rv = rand_f(C, 0.9f, 1.1f);
    spk_bf16 *xh_ = (spk_bf16 *)dev_alloc(n * sizeof(spk_bf16));
    float *xw_ = dev_f(NULL, n);
    g_be->bf16_from_f32(xh_, x_, n);
    g_be->bf16_to_f32(xw_, xh_, n);
    spk_bf16 *rh_ = with_res ? (spk_bf16 *)dev_alloc(n * sizeof(spk_bf16)) : NULL;
    float *rw_ = with_res ? dev_f(NULL, n) : NULL;
    if (with_res) g_be->bf16_from_f32(rh_, res_, n), g_be->bf16_to_f32(rw_, rh_, n);
    spk_bf16 *dyh_ = (spk_bf16 *)dev_alloc(n * sizeof(spk_bf16));
    float *dyw_ = dev_f(NULL, n);
    g_be->bf16_from_f32(dyh_, dy_, n);
    g_be->bf16_to_f32(dyw_, dyh_, n);
    float *out[2][8];  // per input: y, mean, rstd, running mean, running var, dresidual, dweight, dbias; yh, dxh
    spk_bf16 *hout[2][2];
    for (int k = 0; k < 2; k++) {
        float **o = out[k];
        o[0] = dev_f(NULL, n), o[1] = dev_f(NULL, C), o[2] = dev_f(NULL, C), o[3] = dev_f(rm, C), o[4] = dev_f(rv, C);
        o[5] = dev_f(NULL, n), o[6] = dev_f(zeros_f(C), C), o[7] = dev_f(zeros_f(C), C);
        hout[k][0] = (spk_bf16 *)dev_alloc(n * sizeof(spk_bf16)),
        hout[k][1] = (spk_bf16 *)dev_alloc(n * sizeof(spk_bf16));
        const float *x = k ? NULL : xw_;
        const spk_bf16 *xh = k ? xh_ : NULL;
        g_be->batchnorm2d_forward_train(o[0], hout[k][0], o[1], o[2], o[3], o[4], x, xh, w_, b_, k ? NULL : rw_,
                                        k ? rh_ : NULL, relu, N, C, EPS, MOM, ws_);
        g_be->batchnorm2d_backward_rounded(hout[k][1], with_res ? o[5] : NULL, 0, o[6], o[7], k ? NULL : dyw_,
                                           k ? dyh_ : NULL, o[0], NULL, x, xh, w_, o[1], o[2], relu, N, C, ws_);
    }
    const char *names[8] = {"y", "mean", "rstd", "running mean", "running var", "dresidual", "dweight", "dbias"};
    const size_t len[8] = {n, C, C, C, C, n, C, C};
    for (int i = 0; i < 8; i++)
        if (i != 5 || with_res)
            same_bits(cname("batchnorm2d with bf16 inputs: the %s of their widening %s", names[i], t), out[1][i],
                      out[0][i], len[i]);
    same_bits_bf16(cname("batchnorm2d with bf16 inputs: the yh of their widening %s", t), hout[1][0], hout[0][0], n);
    same_bits_bf16(cname("batchnorm2d with bf16 inputs: the dxh of their widening %s", t), hout[1][1], hout[0][1], n);
}

static void backend_case(int N, int C, int relu, int with_res) {
    const size_t n = (size_t)N * C;
    const char *t0 = cname("N%d C%d%s%s", N, C, relu ? " relu" : "", with_res ? " residual" : "");
    char t[96];
    snprintf(t, sizeof t, "%s", t0);
    float *x = rand_f(n, -1, 3), *w = rand_f(C, 0.5f, 1.5f), *b = rand_f(C, -0.5f, 0.5f), *res = rand_f(n, -1, 1);
    float *dy = rand_f(n, -1, 1), *rm = rand_f(C, -0.1f, 0.1f), *rv = rand_f(C, 0.9f, 1.1f);
    float *y = alloc_f(n), *mean = alloc_f(C), *rstd = alloc_f(C), *ws = alloc_f(batchnorm2d_workspace_floats(N, C));
    float *rm_ = dev_f(rm, C), *rv_ = dev_f(rv, C);
    batchnorm2d_forward_train(y, NULL, mean, rstd, rm, rv, x, NULL, w, b, with_res ? res : NULL, NULL, relu, N, C, EPS,
                              MOM, ws);
    float *x_ = dev_f(x, n), *w_ = dev_f(w, C), *b_ = dev_f(b, C), *res_ = dev_f(res, n), *dy_ = dev_f(dy, n);
    float *y_ = dev_f(NULL, n), *mean_ = dev_f(NULL, C), *rstd_ = dev_f(NULL, C);
    float *ws_ = dev_f(NULL, g_be->batchnorm2d_workspace_floats(N, C));
    spk_bf16 *yh_ = (spk_bf16 *)dev_alloc(n * sizeof(spk_bf16)), *yw_ = (spk_bf16 *)dev_alloc(n * sizeof(spk_bf16));
    g_be->batchnorm2d_forward_train(y_, yh_, mean_, rstd_, rm_, rv_, x_, NULL, w_, b_, with_res ? res_ : NULL, NULL,
                                    relu, N, C, EPS, MOM, ws_);
    cmp(cname("batchnorm2d forward %s", t), y_, y, n, TOL);
    g_be->bf16_from_f32(yw_, y_, n);
    same_bits_bf16(cname("batchnorm2d forward's yh = the backend's y rounded %s", t), yh_, yw_, n);
    g_be->batchnorm2d_forward_train(NULL, yw_, mean_, rstd_, NULL, NULL, x_, NULL, w_, b_, with_res ? res_ : NULL, NULL,
                                    relu, N, C, EPS, MOM, ws_);
    same_bits_bf16(cname("batchnorm2d forward with y NULL: yh alone %s", t), yw_, yh_, n);
    cmp(cname("batchnorm2d mean %s", t), mean_, mean, C, TOL);
    cmp(cname("batchnorm2d rstd %s", t), rstd_, rstd, C, TOL);
    cmp(cname("batchnorm2d running mean %s", t), rm_, rm, C, TOL);
    cmp(cname("batchnorm2d running var %s", t), rv_, rv, C, TOL);
    // backward from the CPU's forward results, accumulating into random prefills
    dev_set(y_, y, n), dev_set(mean_, mean, C), dev_set(rstd_, rstd, C);
    grads_t g = grads_prefill(4, (size_t[]){n, n, (size_t)C, (size_t)C});
    batchnorm2d_backward(g.cpu[0], with_res ? g.cpu[1] : NULL, 1, g.cpu[2], g.cpu[3], dy, y, x, w, mean, rstd, relu, N,
                         C, ws);
    for (int k = 0; k < 2; k++) {
        float **d = k ? g.dev2 : g.dev;
        g_be->batchnorm2d_backward(d[0], with_res ? d[1] : NULL, 1, d[2], d[3], dy_, y_, x_, w_, mean_, rstd_, relu, N,
                                   C, ws_);
    }
    grads_check(&g, "batchnorm2d", t, (const char *[]){"dx", "dresidual", "dweight", "dbias"},
                (double[]){TOL, TOL, TOL, TOL});
    // overwriting
    float *o = alloc_f(n), *o_ = dev_f(NULL, n);
    fill_nan(o, n);
    dev_set(o_, o, n);
    batchnorm2d_backward(o, NULL, 0, NULL, NULL, dy, y, x, w, mean, rstd, relu, N, C, ws);
    g_be->batchnorm2d_backward(o_, NULL, 0, NULL, NULL, dy_, y_, x_, w_, mean_, rstd_, relu, N, C, ws_);
    cmp(cname("batchnorm2d dx overwritten %s", t), o_, o, n, TOL);
    // rounded: the backend's overwritten dx rounded, bitwise; within a bf16 step of the CPU's
    spk_bf16 *hh = (spk_bf16 *)test_alloc(n * sizeof(spk_bf16)), *dh_ = (spk_bf16 *)dev_alloc(n * sizeof(spk_bf16));
    spk_bf16 *wh_ = (spk_bf16 *)dev_alloc(n * sizeof(spk_bf16));
    batchnorm2d_backward_rounded(hh, NULL, 0, NULL, NULL, dy, NULL, y, NULL, x, NULL, w, mean, rstd, relu, N, C, ws);
    g_be->bf16_from_f32(wh_, o_, n);
    g_be->batchnorm2d_backward_rounded(dh_, NULL, 0, NULL, NULL, dy_, NULL, y_, NULL, x_, NULL, w_, mean_, rstd_, relu,
                                       N, C, ws_);
    same_bits_bf16(cname("batchnorm2d_backward_rounded = the backend's dx rounded %s", t), dh_, wh_, n);
    g_be->bf16_from_f32(yh_, y_, n);  // (y_ is the CPU's forward output here)
    g_be->batchnorm2d_backward_rounded(wh_, NULL, 0, NULL, NULL, dy_, NULL, NULL, yh_, x_, NULL, w_, mean_, rstd_, relu,
                                       N, C, ws_);
    same_bits_bf16(cname("batchnorm2d_backward_rounded with the mask from yh %s", t), wh_, dh_, n);
    cmp_bf16_step(cname("batchnorm2d_backward_rounded %s", t), dh_, hh, n);
    bf16_input_case(N, C, relu, with_res, t);
    // inference
    batchnorm2d_forward_infer(y, x, rm, rv, w, b, with_res ? res : NULL, relu, N, C, EPS);
    g_be->batchnorm2d_forward_infer(y_, x_, rm_, rv_, w_, b_, with_res ? res_ : NULL, relu, N, C, EPS);
    cmp(cname("batchnorm2d inference %s", t), y_, y, n, TOL);

    // the invariant mode's passes, the batch as N / 4 samples of 4 rows
    if (N % 4 == 0) {
        const int Bs = N / 4;
        xsum_t hs = host_sums(2 * C), hg = host_sums(2 * C), hdw = host_sums(C), hdb = host_sums(C);
        xsum_t ds = xsum_layout(dev_alloc(xsum_bytes(2 * C)), 2 * C),
               dg = xsum_layout(dev_alloc(xsum_bytes(2 * C)), 2 * C);
        xsum_t ddw = xsum_layout(dev_alloc(xsum_bytes(C)), C), ddb = xsum_layout(dev_alloc(xsum_bytes(C)), C);
        g_be->xsum_zero(ds, 2 * C), g_be->xsum_zero(dg, 2 * C), g_be->xsum_zero(ddw, C), g_be->xsum_zero(ddb, C);
        batchnorm2d_stats_partial(hs, x, rm, Bs, 4, C, 1);
        g_be->batchnorm2d_stats_partial(ds, x_, rm_, Bs, 4, C, 1);
        float *f2 = dev_f(NULL, 2 * C);
        g_be->xsum_to_float(f2, ds, 2 * C);
        cmp(cname("batchnorm2d_stats_partial %s", t), f2, sums_to_floats(hs, 2 * C), 2 * C, TOL);
        batchnorm2d_forward_global(y, mean, rstd, rm, rv, x, w, b, with_res ? res : NULL, relu, hs, N, N, C, EPS, MOM);
        g_be->batchnorm2d_forward_global(y_, mean_, rstd_, rm_, rv_, x_, w_, b_, with_res ? res_ : NULL, relu, ds, N, N,
                                         C, EPS, MOM);
        cmp(cname("batchnorm2d_forward_global %s", t), y_, y, n, TOL);
        dev_set(y_, y, n), dev_set(mean_, mean, C), dev_set(rstd_, rstd, C);
        batchnorm2d_backward_partial(hg, hdw, hdb, dy, y, x, mean, rstd, relu, Bs, 4, C, 1);
        g_be->batchnorm2d_backward_partial(dg, ddw, ddb, dy_, y_, x_, mean_, rstd_, relu, Bs, 4, C, 1);
        g_be->xsum_to_float(f2, dg, 2 * C);
        cmp(cname("batchnorm2d_backward_partial %s", t), f2, sums_to_floats(hg, 2 * C), 2 * C, TOL);
        float *gx = alloc_f(n), *gx_ = dev_f(NULL, n);
        batchnorm2d_backward_global(gx, NULL, NULL, 0, dy, y, x, w, mean, rstd, relu, hg, N, N, C);
        g_be->batchnorm2d_backward_global(gx_, NULL, NULL, 0, dy_, y_, x_, w_, mean_, rstd_, relu, dg, N, N, C);
        cmp(cname("batchnorm2d_backward_global %s", t), gx_, gx, n, TOL);
        spk_bf16 *gxh_ = (spk_bf16 *)dev_alloc(n * sizeof(spk_bf16)), *gxh_want_ = (spk_bf16 *)dev_alloc(n * 2);
        g_be->batchnorm2d_backward_global(NULL, gxh_, NULL, 0, dy_, y_, x_, w_, mean_, rstd_, relu, dg, N, N, C);
        g_be->bf16_from_f32(gxh_want_, gx_, n);
        same_bits_bf16(cname("batchnorm2d_backward_global %s: dxh alone = bf16(dx)", t), gxh_, gxh_want_, n);
    }
    dev_release();
    test_release();
}

static void backend_checks(void) {
    backend_case(7, 3, 0, 0);
    backend_case(600, 32, 1, 1);
    backend_case(1000, 70, 1, 0);
    backend_case(40, 256, 0, 1);
}

int main(int argc, char **argv) { return test_main(argc, argv, "test_batchnorm2d", 5, cpu_checks, backend_checks); }
