// Time pooling ops: time mean, channel scale, weighted statistics (explicit and uniform
// weights, packed and [mean | std] strided outputs, clamp), attentive statistics (a softmax
// over time, then the statistics it weights), and the TSTP of
// channels-last maps (against PyTorch too, tests/golden/kernels2d_golden.h). Forward vs double
// references, finite-difference backward for every input, accumulation; then every backend
// against the CPU kernels (tests/kernels/backends.h).
#include "../golden/kernels2d_golden.h"
#include "backends.h"
#include "kernels/pooling.h"

enum { OP_MEAN, OP_SCALE, OP_STATS, OP_STATS_UNIFORM, OP_ATTENTIVE };

typedef struct {
    int op, B, C, T, ld;
    float *x, *w, *s;    // inputs (w: weights or softmax-free; s: channel scales)
    float *out1, *out2;  // outputs
    float *r1, *r2;      // probe weights for the outputs
    float *z;            // the attention's logits
} pool_ctx;

static double pool_loss(void *p) {
    pool_ctx *c = (pool_ctx *)p;
    const size_t nbc = (size_t)c->B * c->C, n = nbc * c->T;
    switch (c->op) {
        case OP_MEAN:
            time_mean_forward(c->out1, c->x, c->B, c->C, c->T);
            return dot_d(c->out1, c->r1, nbc);
        case OP_SCALE:
            channel_scale_forward(c->out1, c->x, c->s, c->B, c->C, c->T);
            return dot_d(c->out1, c->r1, n);
        case OP_STATS:
        case OP_STATS_UNIFORM:
            weighted_stats_forward(c->out1, c->out2, c->x, c->op == OP_STATS ? c->w : NULL, c->B, c->C, c->T, c->ld,
                                   1e-12f);
            return dot_d(c->out1, c->r1, (size_t)c->B * c->ld) + dot_d(c->out2, c->r2, (size_t)c->B * c->ld);
        default:
            attentive_stats_forward(c->w, c->out1, c->out2, c->z, c->x, c->B, c->C, c->T, c->ld, 1e-12f);
            return dot_d(c->out1, c->r1, (size_t)c->B * c->ld) + dot_d(c->out2, c->r2, (size_t)c->B * c->ld);
    }
}

static void test_mean_scale(int B, int C, int T) {
    char nm[128];
    const size_t nbc = (size_t)B * C, n = nbc * T;
    pool_ctx c = {OP_MEAN,          B,    C,   T, C, rand_f(n, -2, 2), NULL, rand_f(nbc, -1, 1), alloc_f(n), NULL,
                  rand_f(n, -1, 1), NULL, NULL};
    pool_loss(&c);
    double *want = alloc_d(n);
    for (size_t i = 0; i < nbc; i++) {
        double s = 0;
        for (int t = 0; t < T; t++) s += c.x[i * T + t];
        want[i] = s / T;
    }
    snprintf(nm, sizeof nm, "time_mean fwd T%d", T);
    check_close_d(nm, c.out1, want, nbc, 1e-6, 1e-7);
    float *dx = zeros_f(n);
    time_mean_backward(dx, c.r1, B, C, T);
    snprintf(nm, sizeof nm, "time_mean fd dx T%d", T);
    fd_check(nm, c.x, dx, n, pool_loss, &c, 1e-2f, 1e-3, 1e-3, 200);
    float *pre = rand_f(n, -1, 1), *acc = copy_f(pre, n);
    time_mean_backward(acc, c.r1, B, C, T);
    snprintf(nm, sizeof nm, "time_mean dx accumulates T%d", T);
    check_accumulated(nm, acc, pre, dx, n);

    c.op = OP_SCALE;
    pool_loss(&c);
    for (size_t i = 0; i < n; i++) want[i] = (double)c.x[i] * c.s[i / T];
    snprintf(nm, sizeof nm, "channel_scale fwd T%d", T);
    check_close_d(nm, c.out1, want, n, 1e-7, 0);
    float *dx2 = zeros_f(n), *ds = zeros_f(nbc);
    channel_scale_backward(dx2, ds, c.r1, c.x, c.s, B, C, T);
    snprintf(nm, sizeof nm, "channel_scale fd dx T%d", T);
    fd_check(nm, c.x, dx2, n, pool_loss, &c, 1e-2f, 1e-3, 1e-3, 200);
    snprintf(nm, sizeof nm, "channel_scale fd ds T%d", T);
    fd_check(nm, c.s, ds, nbc, pool_loss, &c, 1e-2f, 1e-3, 1e-3, 200);
    float *pds = rand_f(nbc, -1, 1), *ads = copy_f(pds, nbc), *adx = copy_f(pre, n);
    channel_scale_backward(adx, ads, c.r1, c.x, c.s, B, C, T);
    snprintf(nm, sizeof nm, "channel_scale dx is written T%d", T);
    check_close(nm, adx, dx2, n, 0, 0);
    snprintf(nm, sizeof nm, "channel_scale ds accumulates T%d", T);
    check_accumulated(nm, ads, pds, ds, nbc);
    pool_loss(&c);  // fresh output at the unperturbed inputs
    float *inpl = copy_f(c.x, n);
    channel_scale_forward(inpl, inpl, c.s, B, C, T);
    snprintf(nm, sizeof nm, "channel_scale in place T%d", T);
    check_close(nm, inpl, c.out1, n, 0, 0);
    test_release();
}

// weights: positive rows summing to ~1 (softmax of random logits), or arbitrary positive
// rows (normalized = 0) to check the gradient does not assume sum_t w = 1.
static void test_stats(int B, int C, int T, int uniform, int ld, int normalized) {
    char nm[160];
    snprintf(nm, sizeof nm, "B%d C%d T%d %s ld%d%s", B, C, T, uniform ? "uniform" : "weighted", ld,
             normalized ? "" : " unnormalized");
    char buf[256];
    const size_t n = (size_t)B * C * T, no = (size_t)B * ld;
    pool_ctx c = {uniform ? OP_STATS_UNIFORM : OP_STATS,
                  B,
                  C,
                  T,
                  ld,
                  rand_f(n, -2, 2),
                  alloc_f(n),
                  NULL,
                  alloc_f(no),
                  alloc_f(no),
                  rand_f(no, -1, 1),
                  rand_f(no, -1, 1),
                  NULL};
    for (size_t i = 0; i < (size_t)B * C; i++) {
        double s = 0;
        for (int t = 0; t < T; t++) s += (c.w[i * T + t] = expf(rng_uniform(-2, 2)));
        if (normalized)
            for (int t = 0; t < T; t++) c.w[i * T + t] = (float)(c.w[i * T + t] / s);
        else
            for (int t = 0; t < T; t++) c.w[i * T + t] *= 0.5f / T;
    }
    // A constant row exercises the clamp (variance 0 < eps). Zeros (a silent channel after mean
    // normalisation) have a float mean of exactly 0 in any summation order; another constant's
    // float mean is off by rounding that depends on the order the compiler sums in (vectorised
    // or not), e.g. 0.75 summed one term after the other over 250 frames gives a mean 1.25e-6
    // off and a variance above eps.
    for (int t = 0; t < T; t++) c.x[t] = 0.0f;
    // the probes must not touch the padding columns of strided outputs
    for (int b = 0; b < B; b++)
        for (int j = C; j < ld; j++) c.r1[(size_t)b * ld + j] = c.r2[(size_t)b * ld + j] = 0;
    fill_nan(c.out1, no);
    fill_nan(c.out2, no);
    pool_loss(&c);
    double *wm = alloc_d(no), *ws = alloc_d(no);
    for (int b = 0; b < B; b++)
        for (int ch = 0; ch < C; ch++) {
            const size_t row = ((size_t)b * C + ch) * T;
            double m = 0, v = 0;
            for (int t = 0; t < T; t++) m += (uniform ? 1.0 / T : c.w[row + t]) * c.x[row + t];
            for (int t = 0; t < T; t++) {
                const double d = c.x[row + t] - m;
                v += (uniform ? 1.0 / T : c.w[row + t]) * d * d;
            }
            wm[(size_t)b * ld + ch] = m;
            ws[(size_t)b * ld + ch] = sqrt(v > 1e-12 ? v : 1e-12);
        }
    for (int b = 0; b < B; b++)
        for (int j = C; j < ld; j++) {
            c.out1[(size_t)b * ld + j] = c.out2[(size_t)b * ld + j] = 0;  // untouched padding
            wm[(size_t)b * ld + j] = ws[(size_t)b * ld + j] = 0;
        }
    snprintf(buf, sizeof buf, "stats mean %s", nm);
    check_close_d(buf, c.out1, wm, no, 1e-5, 1e-6);
    snprintf(buf, sizeof buf, "stats std %s", nm);
    check_close_d(buf, c.out2, ws, no, 1e-4, 1e-6);
    snprintf(buf, sizeof buf, "stats std of a constant row is sqrt(eps) %s", nm);
    if (normalized) check_scalar(buf, c.out2[0], 1e-6, 1e-6, 0);

    pool_loss(&c);
    float *dx = zeros_f(n), *dw = zeros_f(n);
    weighted_stats_backward(dx, uniform ? NULL : dw, c.r1, c.r2, c.x, uniform ? NULL : c.w, c.out1, c.out2, B, C, T, ld,
                            1e-12f);
    for (int t = 0; t < T; t++) check_true(dx[t] == dx[t], "stats dx finite on clamped row");
    // finite differences away from the clamped row (perturbing it un-clamps the variance)
    snprintf(buf, sizeof buf, "stats fd dx %s", nm);
    fd_check(buf, c.x + T, dx + T, n - T, pool_loss, &c, 1e-2f, 1e-2, 2e-3, 200);
    if (!uniform) {
        snprintf(buf, sizeof buf, "stats fd dw %s", nm);
        fd_check(buf, c.w + T, dw + T, n - T, pool_loss, &c, 1e-3f, 1e-2, 2e-3, 200);
    }
    pool_loss(&c);
    // gradient only through the mean, and only through std (NULL upstream for the other)
    float *dxm = zeros_f(n);
    weighted_stats_backward(dxm, NULL, c.r1, NULL, c.x, uniform ? NULL : c.w, c.out1, c.out2, B, C, T, ld, 1e-12f);
    float *dxs = zeros_f(n);
    weighted_stats_backward(dxs, NULL, NULL, c.r2, c.x, uniform ? NULL : c.w, c.out1, c.out2, B, C, T, ld, 1e-12f);
    for (size_t i = 0; i < n; i++) dxm[i] += dxs[i];
    snprintf(buf, sizeof buf, "stats dmean + dstd parts %s", nm);
    check_close(buf, dxm, dx, n, 1e-5, 1e-6 * max_abs(dx, n));
    float *px = rand_f(n, -1, 1), *pw = rand_f(n, -1, 1), *ax = copy_f(px, n), *aw = copy_f(pw, n);
    weighted_stats_backward(ax, uniform ? NULL : aw, c.r1, c.r2, c.x, uniform ? NULL : c.w, c.out1, c.out2, B, C, T, ld,
                            1e-12f);
    snprintf(buf, sizeof buf, "stats dx accumulates %s", nm);
    check_accumulated(buf, ax, px, dx, n);
    if (!uniform) {  // dw is written: whatever it held is gone
        snprintf(buf, sizeof buf, "stats dw is written %s", nm);
        check_close(buf, aw, dw, n, 0, 0);
    }
    test_release();
}

// The softmax against a double reference, the statistics bit for bit those of
// weighted_stats_forward over its weights; the backward by finite differences for the logits
// and the frames, dx bit for bit weighted_stats_backward's, dlogits against the softmax's
// backward of its dw in double; dx written or added.
static void test_attentive(int B, int C, int T, int ld, float range) {
    char nm[160];
    const size_t n = (size_t)B * C * T, no = (size_t)B * ld;
    pool_ctx c = {.op = OP_ATTENTIVE,
                  .B = B,
                  .C = C,
                  .T = T,
                  .ld = ld,
                  .x = rand_f(n, -2, 2),
                  .w = alloc_f(n),
                  .out1 = zeros_f(no),
                  .out2 = zeros_f(no),
                  .r1 = rand_f(no, -1, 1),
                  .r2 = rand_f(no, -1, 1),
                  .z = rand_f(n, -range, range)};
    for (int t = 0; t < T; t++) c.x[t] = 0.0f;  // a constant row: the variance's clamp
    // the probes must not touch the padding columns, which stay 0 (zeros_f) in every output
    for (int b = 0; b < B; b++)
        for (int j = C; j < ld; j++) c.r1[(size_t)b * ld + j] = c.r2[(size_t)b * ld + j] = 0;
    pool_loss(&c);
    double *want = alloc_d(n);
    for (size_t i = 0; i < (size_t)B * C; i++) {
        double mx = -INFINITY, s = 0;
        for (int t = 0; t < T; t++) mx = fmax(mx, c.z[i * T + t]);
        for (int t = 0; t < T; t++) s += exp(c.z[i * T + t] - mx);
        for (int t = 0; t < T; t++) want[i * T + t] = exp(c.z[i * T + t] - mx) / s;
    }
    snprintf(nm, sizeof nm, "attentive softmax T%d range %g", T, range);
    check_close_d(nm, c.w, want, n, 2e-6, 1e-9);
    float *m1 = zeros_f(no), *s1 = zeros_f(no);
    weighted_stats_forward(m1, s1, c.x, c.w, B, C, T, ld, 1e-12f);
    snprintf(nm, sizeof nm, "attentive mean is weighted_stats' T%d", T);
    check_close(nm, c.out1, m1, no, 0, 0);
    snprintf(nm, sizeof nm, "attentive std is weighted_stats' T%d", T);
    check_close(nm, c.out2, s1, no, 0, 0);
    float *inpl = copy_f(c.z, n), *m2 = zeros_f(no), *s2 = zeros_f(no);
    attentive_stats_forward(inpl, m2, s2, inpl, c.x, B, C, T, ld, 1e-12f);
    snprintf(nm, sizeof nm, "attentive in place T%d", T);
    check_close(nm, inpl, c.w, n, 0, 0);
    check_close(nm, m2, c.out1, no, 0, 0);

    float *dx = alloc_f(n), *dl = alloc_f(n);
    fill_nan(dx, n);  // written: whatever it held is gone
    attentive_stats_backward(dx, dl, c.r1, c.r2, c.x, c.w, c.out1, c.out2, B, C, T, ld, 1e-12f, 0);
    float *wx = zeros_f(n), *wdw = alloc_f(n);
    weighted_stats_backward(wx, wdw, c.r1, c.r2, c.x, c.w, c.out1, c.out2, B, C, T, ld, 1e-12f);
    snprintf(nm, sizeof nm, "attentive dx is weighted_stats' T%d", T);
    check_close(nm, dx, wx, n, 0, 0);
    for (size_t i = 0; i < (size_t)B * C; i++) {
        double s = 0;
        for (int t = 0; t < T; t++) s += (double)wdw[i * T + t] * c.w[i * T + t];
        for (int t = 0; t < T; t++) want[i * T + t] = c.w[i * T + t] * (wdw[i * T + t] - s);
    }
    snprintf(nm, sizeof nm, "attentive dlogits is the softmax's backward of dw T%d", T);
    check_close_d(nm, dl, want, n, 1e-5, 1e-6 * max_abs(dl, n));
    snprintf(nm, sizeof nm, "attentive fd dlogits T%d range %g", T, range);
    fd_check(nm, c.z, dl, n, pool_loss, &c, 1e-2f, 1e-2, 2e-3, 200);
    snprintf(nm, sizeof nm, "attentive fd dx T%d range %g", T, range);
    fd_check(nm, c.x + T, dx + T, n - T, pool_loss, &c, 1e-2f, 1e-2, 2e-3, 200);
    pool_loss(&c);
    float *px = rand_f(n, -1, 1), *ax = copy_f(px, n), *al = alloc_f(n);
    attentive_stats_backward(ax, al, c.r1, c.r2, c.x, c.w, c.out1, c.out2, B, C, T, ld, 1e-12f, 1);
    snprintf(nm, sizeof nm, "attentive dx accumulates T%d", T);
    check_accumulated(nm, ax, px, dx, n);
    test_release();
}

// ---- TSTP -------------------------------------------------------------------------------------
typedef struct {
    int B, H, W, C;
    float *x, *out, *r;
} tstp_ctx;

static double tstp_loss(void *p) {
    tstp_ctx *c = (tstp_ctx *)p;
    tstp_forward(c->out, c->x, c->B, c->H, c->W, c->C, 1e-7f);
    return dot_d(c->out, c->r, (size_t)c->B * 2 * c->C * c->H);
}

static void test_tstp(int B, int H, int W, int C) {
    const size_t n = (size_t)B * H * W * C, no = (size_t)B * 2 * C * H;
    tstp_ctx c = {B, H, W, C, rand_f(n, -1, 2), alloc_f(no), rand_f(no, -1, 1)};
    tstp_loss(&c);
    double *want = zeros_d(no);  // the double reference
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++)
            for (int k = 0; k < C; k++) {
                double m = 0, v = 0;
                for (int w = 0; w < W; w++) m += c.x[(((size_t)b * H + h) * W + w) * C + k];
                m /= W;
                for (int w = 0; w < W; w++) {
                    const double d = c.x[(((size_t)b * H + h) * W + w) * C + k] - m;
                    v += d * d;
                }
                want[(size_t)b * 2 * C * H + (size_t)k * H + h] = m;
                want[(size_t)b * 2 * C * H + (size_t)C * H + (size_t)k * H + h] = sqrt(v / (W - 1) + 1e-7);
            }
    char nm[96];
    snprintf(nm, sizeof nm, "tstp forward B%d H%d W%d C%d", B, H, W, C);
    check_close_d(nm, c.out, want, no, 1e-5, 1e-6);
    float *pre = rand_f(n, -1, 1), *dx = copy_f(pre, n), *fresh = zeros_f(n);
    tstp_backward(dx, c.r, c.x, c.out, B, H, W, C);
    tstp_backward(fresh, c.r, c.x, c.out, B, H, W, C);
    snprintf(nm, sizeof nm, "tstp dx accumulates B%d H%d W%d C%d", B, H, W, C);
    check_accumulated(nm, dx, pre, fresh, n);
    snprintf(nm, sizeof nm, "fd tstp dx B%d H%d W%d C%d", B, H, W, C);
    fd_check(nm, c.x, fresh, n, tstp_loss, &c, 1e-3f, 2e-3, 2e-3, 80);
    test_release();
}

static void test_tstp_golden(void) {
    const int B = G_TSTP_B, C = G_TSTP_C, H = G_TSTP_H, W = G_TSTP_W;
    const size_t n = (size_t)B * H * W * C, no = (size_t)B * 2 * C * H;
    float *out = alloc_f(no), *dx = zeros_f(n);
    tstp_forward(out, g_tstp_x, B, H, W, C, 1e-7f);
    check_close("PyTorch: tstp forward", out, g_tstp_out, no, 1e-6, 1e-7);
    tstp_backward(dx, g_tstp_dout, g_tstp_x, out, B, H, W, C);
    check_close("PyTorch: tstp dx", dx, g_tstp_dx, n, 1e-5, 1e-6);
    test_release();
}

static void cpu_checks(void) {
    test_tstp_golden();
    test_tstp(2, 3, 5, 4);
    test_tstp(3, 10, 25, 64);
    test_mean_scale(2, 3, 7);
    test_mean_scale(3, 5, 1);
    test_mean_scale(4, 40, 250);  // threaded path
    for (int uniform = 0; uniform < 2; uniform++) {
        test_stats(2, 3, 8, uniform, 3, 1);
        test_stats(3, 4, 13, uniform, 8, 1);  // [mean | std] concatenation layout
        test_stats(4, 40, 250, uniform, 40, 1);
    }
    test_stats(2, 3, 9, 0, 3, 0);
    test_attentive(2, 3, 9, 3, 3);
    test_attentive(2, 2, 5, 4, 40);     // large logits, [mean | std]
    test_attentive(4, 40, 250, 80, 5);  // threaded path
}

// ---- every backend against the CPU kernels --------------------------------------------------
static void backend_mean_scale(void) {
    const int B = 3, C = 5, T = 300;  // T > the CUDA block size: strided loops
    const size_t n = (size_t)B * C * T, r = (size_t)B * C;
    float *x = rand_f(n, -1, 1), *m = alloc_f(r);
    float *dxd = dev_f(x, n), *dmd = dev_f(NULL, r);
    time_mean_forward(m, x, B, C, T);
    g_be->time_mean_forward(dmd, dxd, B, C, T);
    cmp("time_mean forward", dmd, m, r, TOL);
    float *gm = rand_f(r, -1, 1), *gx0 = rand_f(n, -1, 1), *gx = copy_f(gx0, n);
    float *dgm = dev_f(gm, r), *dgx = dev_f(gx0, n);
    time_mean_backward(gx, gm, B, C, T);
    g_be->time_mean_backward(dgx, dgm, B, C, T);
    cmp("time_mean backward", dgx, gx, n, TOL);

    float *s = rand_f(r, -2, 2), *y = alloc_f(n);
    float *dsd = dev_f(s, r), *dyd = dev_f(x, n);
    channel_scale_forward(y, x, s, B, C, T);
    g_be->channel_scale_forward(dyd, dyd, dsd, B, C, T);  // in place
    cmp("channel_scale forward (in place)", dyd, y, n, TOL);
    float *gy = rand_f(n, -1, 1), *gs0 = rand_f(r, -1, 1), *gs = copy_f(gs0, r);
    memcpy(gx, gx0, sizeof(float) * n);
    channel_scale_backward(gx, gs, gy, x, s, B, C, T);
    float *dgy = dev_f(gy, n), *dgs = dev_f(gs0, r);
    dev_set(dgx, gx0, n);
    g_be->channel_scale_backward(dgx, dgs, dgy, dxd, dsd, B, C, T);
    cmp("channel_scale dx", dgx, gx, n, TOL);
    cmp("channel_scale ds", dgs, gs, r, TOL);
    dev_release();
    test_release();
}

// weights = NULL (uniform) or rows of a softmax; ld = 2C with std = mean + C ([mean | std]) or
// ld = C with separate buffers; row 0 constant (eps clamp active).
static void backend_weighted_stats(int uniform) {
    const char *tag = uniform ? "uniform" : "weighted";
    const int B = 4, C = 6, T = 270;
    const float eps = 1e-12f;
    const int ld = uniform ? C : 2 * C;
    const size_t n = (size_t)B * C * T, no = (size_t)B * ld;
    float *x = rand_f(n, -1, 2);
    for (int t = 0; t < T; t++) x[t] = 0.0f;
    float *w = NULL;
    if (!uniform) {  // a softmax's rows
        w = rand_f(n, -3, 3);
        float *unused = alloc_f((size_t)B * 2 * C);
        attentive_stats_forward(w, unused, unused + C, w, x, B, C, T, 2 * C, eps);
    }
    float *ms = zeros_f(2 * no);
    float *mean = ms, *std = uniform ? ms + no : ms + C;
    weighted_stats_forward(mean, std, x, w, B, C, T, ld, eps);
    float *dxd = dev_f(x, n), *dwd = w ? dev_f(w, n) : NULL, *dms = dev_f(NULL, 2 * no);
    float *dmean = dms, *dstd = uniform ? dms + no : dms + C;
    g_be->weighted_stats_forward(dmean, dstd, dxd, dwd, B, C, T, ld, eps);
    cmp(cname("weighted_stats forward %s", tag), dms, ms, 2 * no, TOL);

    float *gms = rand_f(2 * no, -1, 1);
    float *gmean = gms, *gstd = uniform ? gms + no : gms + C;
    float *dgms = dev_f(gms, 2 * no), *dgmean = dgms, *dgstd = uniform ? dgms + no : dgms + C;
    // dx and dw (weighted) or dx alone (uniform); then dx through dstd only
    grads_t g = grads_prefill(w ? 2 : 1, (size_t[]){n, n});
    const float *gx0 = copy_f(g.cpu[0], n);
    weighted_stats_backward(g.cpu[0], g.cpu[1], gmean, gstd, x, w, mean, std, B, C, T, ld, eps);
    g_be->weighted_stats_backward(g.dev[0], g.dev[1], dgmean, dgstd, dxd, dwd, dmean, dstd, B, C, T, ld, eps);
    g_be->weighted_stats_backward(g.dev2[0], g.dev2[1], dgmean, dgstd, dxd, dwd, dmean, dstd, B, C, T, ld, eps);
    grads_check(&g, "weighted_stats", tag, (const char *[]){"dx", "dw"}, (double[]){TOL, TOL});
    float *gx = copy_f(gx0, n);
    weighted_stats_backward(gx, NULL, NULL, gstd, x, w, mean, std, B, C, T, ld, eps);
    dev_set(g.dev[0], gx0, n);
    g_be->weighted_stats_backward(g.dev[0], NULL, NULL, dgstd, dxd, dwd, dmean, dstd, B, C, T, ld, eps);
    cmp(cname("weighted_stats dx from dstd only %s", tag), g.dev[0], gx, n, TOL);
    dev_release();
    test_release();
}

// [mean | std] rows (ld = 2C), row 0 constant (the clamp); T > the CUDA block size.
static void backend_attentive_stats(void) {
    const int B = 3, C = 7, T = 301, ld = 2 * C;
    const float eps = 1e-12f;
    const size_t n = (size_t)B * C * T, no = (size_t)B * ld;
    float *x = rand_f(n, -1, 2), *z = rand_f(n, -6, 6), *w = alloc_f(n), *ms = zeros_f(no);
    for (int t = 0; t < T; t++) x[t] = 0.0f;
    attentive_stats_forward(w, ms, ms + C, z, x, B, C, T, ld, eps);
    float *xd = dev_f(x, n), *wd = dev_f(z, n), *msd = dev_f(NULL, no);
    g_be->attentive_stats_forward(wd, msd, msd + C, wd, xd, B, C, T, ld, eps);  // in place
    cmp("attentive_stats forward w (in place)", wd, w, n, TOL);
    cmp("attentive_stats forward [mean | std]", msd, ms, no, TOL);
    float *gms = rand_f(no, -1, 1), *gmsd = dev_f(gms, no);
    for (int acc = 0; acc <= 1; acc++) {
        const char *tag = acc ? "dx added" : "dx written";
        grads_t g = grads_prefill(2, (size_t[]){n, n});
        attentive_stats_backward(g.cpu[0], g.cpu[1], gms, gms + C, x, w, ms, ms + C, B, C, T, ld, eps, acc);
        g_be->attentive_stats_backward(g.dev[0], g.dev[1], gmsd, gmsd + C, xd, wd, msd, msd + C, B, C, T, ld, eps, acc);
        g_be->attentive_stats_backward(g.dev2[0], g.dev2[1], gmsd, gmsd + C, xd, wd, msd, msd + C, B, C, T, ld, eps,
                                       acc);
        grads_check(&g, "attentive_stats", tag, (const char *[]){"dx", "dlogits"}, (double[]){TOL, TOL});
    }
    dev_release();
    test_release();
}

static void backend_tstp(void) {
    const int B = 3, H = 10, W = 37, C = 70;
    const size_t n = (size_t)B * H * W * C, no = (size_t)B * 2 * C * H;
    float *x = rand_f(n, -1, 2), *out = alloc_f(no);
    tstp_forward(out, x, B, H, W, C, 1e-7f);
    float *x_ = dev_f(x, n), *out_ = dev_f(NULL, no);
    g_be->tstp_forward(out_, x_, B, H, W, C, 1e-7f);
    cmp("tstp forward", out_, out, no, TOL);
    float *g = rand_f(no, -1, 1), *dx0 = rand_f(n, -1, 1), *dx = copy_f(dx0, n);
    tstp_backward(dx, g, x, out, B, H, W, C);
    float *g_ = dev_f(g, no), *dx_ = dev_f(dx0, n);
    dev_set(out_, out, no);
    g_be->tstp_backward(dx_, g_, x_, out_, B, H, W, C);
    cmp("tstp backward", dx_, dx, n, TOL);
    dev_release();
    test_release();
}

static void backend_checks(void) {
    backend_tstp();
    backend_mean_scale();
    backend_weighted_stats(0);
    backend_weighted_stats(1);
    backend_attentive_stats();
}

int main(int argc, char **argv) { return test_main(argc, argv, "test_pooling", 2024, cpu_checks, backend_checks); }
