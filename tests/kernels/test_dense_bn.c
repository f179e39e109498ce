// dense_bn: a dense block's buffer (rows with a stride wider than the block's channels) read by
// several layers, each with its own BatchNorm + ReLU over a prefix of the channels. The shared
// statistics, every reader's forward and its sums, and the input gradient assembled from all
// readers against a double reference of the readers' own BatchNorms (PyTorch's formulas: biased
// variance, running statistics with the unbiased one), added up. Overwriting and accumulating,
// the same bits on 1 and 2 threads, per-group sums that do not depend on how the batch is split
// (the world-size-invariant mode). Then every backend against the CPU kernels.
#include <stdio.h>
#include <string.h>

#include "backends.h"
#include "exact_check.h"
#include "kernels/dense_bn.h"

#define EPS         1e-5f
#define MOM         0.1f
#define MAX_READERS 3

typedef struct {
    int B, HW, N, C, ld, readers;
    int cin[MAX_READERS];  // each reader's prefix, widest first
    float *x;              // (N, ld)
    float *w[MAX_READERS], *b[MAX_READERS], *dz[MAX_READERS];
} block_t;

static block_t block_make(int B, int HW, int C, int pad, int readers) {
    block_t k = {B, HW, B * HW, C, C + pad, readers, {0}, NULL, {0}, {0}, {0}};
    k.x = rand_f((size_t)k.N * k.ld, -1, 3);
    for (int r = 0; r < readers; r++) {
        k.cin[r] = C - r * (C / (readers + 1));
        k.w[r] = rand_f((size_t)k.cin[r], 0.5f, 1.5f);
        k.b[r] = rand_f((size_t)k.cin[r], -0.5f, 0.5f);
        k.dz[r] = rand_f((size_t)k.N * k.cin[r], -1, 1);
    }
    return k;
}

// The readers' own BatchNorm + ReLU in double: z of every reader, the sum of their input
// gradients (dx, (N, C)), and each reader's dweight and dbias.
static void reference(const block_t *k, double **z, double *dx, double **dw, double **db) {
    const int N = k->N;
    for (size_t i = 0; i < (size_t)N * k->C; i++) dx[i] = 0.0;
    for (int c = 0; c < k->C; c++) {
        double s = 0, ss = 0;
        for (int i = 0; i < N; i++) s += k->x[(size_t)i * k->ld + c];
        const double mu = s / N;
        for (int i = 0; i < N; i++) ss += (k->x[(size_t)i * k->ld + c] - mu) * (k->x[(size_t)i * k->ld + c] - mu);
        const double rs = 1.0 / sqrt(ss / N + EPS);
        for (int r = 0; r < k->readers; r++) {
            const int C = k->cin[r];
            if (c >= C) continue;
            double sg = 0, sgx = 0;
            for (int i = 0; i < N; i++) {
                const double xh = (k->x[(size_t)i * k->ld + c] - mu) * rs, v = xh * k->w[r][c] + k->b[r][c];
                z[r][(size_t)i * C + c] = v > 0 ? v : 0;
                const double g = v > 0 ? k->dz[r][(size_t)i * C + c] : 0;
                sg += g, sgx += g * xh;
            }
            db[r][c] = sg, dw[r][c] = sgx;
            for (int i = 0; i < N; i++) {
                const double xh = (k->x[(size_t)i * k->ld + c] - mu) * rs, v = xh * k->w[r][c] + k->b[r][c];
                const double g = v > 0 ? k->dz[r][(size_t)i * C + c] : 0;
                dx[(size_t)i * k->C + c] += k->w[r][c] * rs * (g - sg / N - xh * sgx / N);
            }
        }
    }
}

// The kernels' way: statistics once, every reader's forward and backward, then the input gradient.
typedef struct {
    float *mean, *var, *z[MAX_READERS], *g, *s1, *s2, *dw[MAX_READERS], *db[MAX_READERS], *dx;
} run_t;

static run_t run_block(const block_t *k, const float *shift, float *rm, float *rv) {
    const int N = k->N, C = k->C;
    run_t o = {alloc_f(C), alloc_f(C), {0}, alloc_f((size_t)N * k->ld), zeros_f(C), zeros_f(C), {0}, {0}, NULL};
    float *part = alloc_f(4 * (size_t)C);
    dense_bn_stats_partial(part, k->x, k->ld, shift, k->B, k->HW, C, k->B);
    dense_bn_stats_finish(o.mean, o.var, rm, rv, part, part + C, shift, N, C, MOM);
    for (int r = 0; r < k->readers; r++) {
        const int Cr = k->cin[r];
        o.z[r] = alloc_f((size_t)N * Cr);
        dense_bn_relu_forward(o.z[r], NULL, Cr, k->x, k->ld, o.mean, o.var, k->w[r], k->b[r], N, Cr, EPS);
        dense_bn_relu_backward(o.g, k->ld, r > 0, part, k->dz[r], Cr, k->x, k->ld, o.mean, o.var, k->w[r], k->b[r],
                               k->B, k->HW, Cr, EPS, k->B);
        o.db[r] = copy_f(part, Cr), o.dw[r] = copy_f(part + Cr, Cr);
        for (int c = 0; c < Cr; c++) o.s1[c] += part[2 * Cr + c], o.s2[c] += part[3 * Cr + c];
    }
    o.dx = alloc_f((size_t)N * k->ld);
    fill_nan(o.dx, (size_t)N * k->ld);
    dense_bn_input_grad(o.dx, k->ld, 0, o.g, k->ld, k->x, k->ld, o.mean, o.var, o.s1, o.s2, N, N, C, EPS);
    return o;
}

static void reference_case(int B, int HW, int C, int pad, int readers) {
    const block_t k = block_make(B, HW, C, pad, readers);
    const int N = k.N;
    char tag[96];
    snprintf(tag, sizeof tag, "B%d HW%d C%d ld %d, %d readers", B, HW, C, k.ld, readers);
    double *z[MAX_READERS], *dw[MAX_READERS], *db[MAX_READERS], *dx = alloc_d((size_t)N * C);
    for (int r = 0; r < readers; r++)
        z[r] = alloc_d((size_t)N * k.cin[r]), dw[r] = alloc_d(k.cin[r]), db[r] = alloc_d(k.cin[r]);
    reference(&k, z, dx, dw, db);
    float *shift = rand_f(C, 0.5f, 1.5f), *rm = rand_f(C, -0.1f, 0.1f), *rv = rand_f(C, 0.9f, 1.1f);
    float *rm0 = copy_f(rm, C), *rv0 = copy_f(rv, C);
    const run_t o = run_block(&k, shift, rm, rv);
    for (int r = 0; r < readers; r++) {
        check_close_d(cname("z of reader %d vs double %s", r, tag), o.z[r], z[r], (size_t)N * k.cin[r], 1e-5, 1e-5);
        check_close_d(cname("dweight of reader %d vs double %s", r, tag), o.dw[r], dw[r], k.cin[r], 1e-4, 1e-5 * N);
        check_close_d(cname("dbias of reader %d vs double %s", r, tag), o.db[r], db[r], k.cin[r], 1e-4, 1e-5 * N);
    }
    float *dxp = alloc_f((size_t)N * C);  // the packed columns of the strided result
    for (int i = 0; i < N; i++) memcpy(dxp + (size_t)i * C, o.dx + (size_t)i * k.ld, sizeof(float) * C);
    check_close_d(cname("dx (every reader's) vs double %s", tag), dxp, dx, (size_t)N * C, 1e-4, 1e-5);
    int pad_ok = 1;  // the columns past C untouched
    for (int i = 0; i < N && pad; i++)
        for (int c = C; c < k.ld; c++) pad_ok &= o.dx[(size_t)i * k.ld + c] != o.dx[(size_t)i * k.ld + c];
    check_true(pad_ok, cname("dx leaves the columns past C alone %s", tag));
    // the running statistics as PyTorch's: biased mean in, the unbiased variance
    double err = 0;
    for (int c = 0; c < C; c++) {
        const double v = (double)o.var[c] * N / (N - 1);
        err = fmax(err, fabs(rm[c] - (0.9 * rm0[c] + 0.1 * o.mean[c])) + fabs(rv[c] - (0.9 * rv0[c] + 0.1 * v)));
    }
    check_true(err < 1e-6, cname("running statistics %s", tag));
    float *rm2 = copy_f(rm0, C), *rv2 = copy_f(rv0, C);
    dense_bn_running_update(rm2, rv2, o.mean, o.var, N, C, MOM);
    check_true(memcmp(rm2, rm, 4 * (size_t)C) == 0 && memcmp(rv2, rv, 4 * (size_t)C) == 0,
               cname("dense_bn_running_update = dense_bn_stats_finish's update %s", tag));

    // the same bits on one thread
    const int before = with_threads(1);
    const run_t o1 = run_block(&k, shift, NULL, NULL);
    with_threads(before);
    int same = memcmp(o1.mean, o.mean, 4 * (size_t)C) == 0 && memcmp(o1.var, o.var, 4 * (size_t)C) == 0;
    for (int r = 0; r < readers; r++) same &= memcmp(o1.z[r], o.z[r], 4 * (size_t)N * k.cin[r]) == 0;
    for (int i = 0; i < N; i++) same &= memcmp(o1.dx + (size_t)i * k.ld, o.dx + (size_t)i * k.ld, 4 * (size_t)C) == 0;
    check_true(same, cname("the same bits on 1 thread %s", tag));

    // accumulating: prefill + the overwritten result
    float *pre = rand_f((size_t)N * k.ld, -1, 1), *acc = copy_f(pre, (size_t)N * k.ld);
    dense_bn_input_grad(acc, k.ld, 1, o.g, k.ld, k.x, k.ld, o.mean, o.var, o.s1, o.s2, N, N, C, EPS);
    double worst = 0;
    for (int i = 0; i < N; i++)
        for (int c = 0; c < C; c++) {
            const size_t j = (size_t)i * k.ld + c;
            worst = fmax(worst, fabs(acc[j] - (pre[j] + o.dx[j])));
        }
    check_true(worst < 1e-5, cname("dense_bn_input_grad accumulates %s", tag));
    float *g2 = copy_f(pre, (size_t)N * k.ld), *part = alloc_f(4 * (size_t)C);
    dense_bn_relu_backward(g2, k.ld, 1, part, k.dz[0], C, k.x, k.ld, o.mean, o.var, k.w[0], k.b[0], B, HW, C, EPS, B);
    float *g0 = alloc_f((size_t)N * k.ld);
    dense_bn_relu_backward(g0, k.ld, 0, part, k.dz[0], C, k.x, k.ld, o.mean, o.var, k.w[0], k.b[0], B, HW, C, EPS, B);
    worst = 0;
    for (int i = 0; i < N; i++)
        for (int c = 0; c < C; c++) {
            const size_t j = (size_t)i * k.ld + c;
            worst = fmax(worst, fabs(g2[j] - (pre[j] + g0[j])));
        }
    check_true(worst < 1e-6, cname("dense_bn_relu_backward accumulates %s", tag));
    test_release();
}

// ---- the world-size-invariant mode: per-group sums whatever the split --------------------------
static void invariant_case(int B, int HW, int C, int pad, int group) {
    const block_t k = block_make(B, HW, C, pad, 1);
    const int first = (B / group + 1) / 2 * group, groups = B / group, g1 = first / group;
    const size_t head = (size_t)first * HW * k.ld;
    const char *t0 = cname("B%d HW%d C%d ld %d group %d", B, HW, C, k.ld, group);
    char tag[96];
    snprintf(tag, sizeof tag, "%s", t0);
    float *shift = rand_f(C, 0.5f, 1.5f), *mean = rand_f(C, 0.5f, 1.5f), *var = rand_f(C, 0.5f, 2.0f);
    float *whole = alloc_f(4 * (size_t)groups * C), *a = alloc_f(4 * (size_t)g1 * C),
          *b = alloc_f(4 * (size_t)(groups - g1) * C);
    int before = with_threads(2);
    dense_bn_stats_partial(whole, k.x, k.ld, shift, B, HW, C, group);
    with_threads(1);
    dense_bn_stats_partial(b, k.x + head, k.ld, shift, B - first, HW, C, group);
    dense_bn_stats_partial(a, k.x, k.ld, shift, first, HW, C, group);
    with_threads(before);
    int same = 1;  // whole's rows of each kind: a's groups then b's
    for (int q = 0; q < 2; q++)
        same &= memcmp(whole + (size_t)q * groups * C, a + (size_t)q * g1 * C, 4 * (size_t)g1 * C) == 0 &&
                memcmp(whole + ((size_t)q * groups + g1) * C, b + (size_t)q * (groups - g1) * C,
                       4 * (size_t)(groups - g1) * C) == 0;
    check_true(same, cname("dense_bn_stats_partial %s: batch split, 1 or 2 threads", tag));
    float *gw = alloc_f((size_t)k.N * k.ld), *gs = alloc_f((size_t)k.N * k.ld);
    before = with_threads(2);
    dense_bn_relu_backward(gw, k.ld, 0, whole, k.dz[0], C, k.x, k.ld, mean, var, k.w[0], k.b[0], B, HW, C, EPS, group);
    with_threads(1);
    const size_t dhead = (size_t)first * HW * C;
    dense_bn_relu_backward(gs + head, k.ld, 0, b, k.dz[0] + dhead, C, k.x + head, k.ld, mean, var, k.w[0], k.b[0],
                           B - first, HW, C, EPS, group);
    dense_bn_relu_backward(gs, k.ld, 0, a, k.dz[0], C, k.x, k.ld, mean, var, k.w[0], k.b[0], first, HW, C, EPS, group);
    with_threads(before);
    same = 1;
    for (int q = 0; q < 4; q++)
        same &= memcmp(whole + (size_t)q * groups * C, a + (size_t)q * g1 * C, 4 * (size_t)g1 * C) == 0 &&
                memcmp(whole + ((size_t)q * groups + g1) * C, b + (size_t)q * (groups - g1) * C,
                       4 * (size_t)(groups - g1) * C) == 0;
    for (int i = 0; i < k.N; i++) same &= memcmp(gw + (size_t)i * k.ld, gs + (size_t)i * k.ld, 4 * (size_t)C) == 0;
    check_true(same, cname("dense_bn_relu_backward %s: batch split, 1 or 2 threads", tag));
    test_release();
}

static void cpu_checks(void) {
    reference_case(2, 7, 5, 0, 1);
    reference_case(4, 50, 40, 3, 3);   // three readers over 40, 30 and 20 channels, rows over chunks
    reference_case(3, 100, 70, 6, 2);  // channels over three lanes
    invariant_case(6, 20, 5, 2, 1);
    invariant_case(6, 33, 70, 0, 3);
    invariant_case(4, 9, 36, 4, 2);
}

// ---- every backend against the CPU kernels ------------------------------------------------------
static void backend_case(int B, int HW, int C, int pad, int group) {
    const block_t k = block_make(B, HW, C, pad, 1);
    const int N = k.N, groups = B / group, ld = k.ld;
    const size_t nx = (size_t)N * ld;
    const char *t0 = cname("B%d HW%d C%d ld %d group %d", B, HW, C, ld, group);
    char t[96];
    snprintf(t, sizeof t, "%s", t0);
    float *shift = rand_f(C, 0.5f, 1.5f), *rm = rand_f(C, -0.1f, 0.1f), *rv = rand_f(C, 0.9f, 1.1f);
    float *x_ = dev_f(k.x, nx), *shift_ = dev_f(shift, C), *rm_ = dev_f(rm, C), *rv_ = dev_f(rv, C);
    float *w_ = dev_f(k.w[0], C), *b_ = dev_f(k.b[0], C), *dz_ = dev_f(k.dz[0], (size_t)N * C);
    // statistics
    float *part = alloc_f(4 * (size_t)groups * C), *part_ = dev_f(NULL, 4 * (size_t)groups * C);
    dense_bn_stats_partial(part, k.x, ld, shift, B, HW, C, group);
    g_be->dense_bn_stats_partial(part_, x_, ld, shift_, B, HW, C, group);
    cmp(cname("dense_bn_stats_partial %s", t), part_, part, 2 * (size_t)groups * C, TOL);
    float *s = alloc_f(2 * (size_t)C), *mean = alloc_f(C), *var = alloc_f(C);
    for (int c = 0; c < C; c++) {
        double s1 = 0, s2 = 0;
        for (int q = 0; q < groups; q++) s1 += part[(size_t)q * C + c], s2 += part[((size_t)groups + q) * C + c];
        s[c] = (float)s1, s[C + c] = (float)s2;
    }
    float *s_ = dev_f(s, 2 * (size_t)C), *mean_ = dev_f(NULL, C), *var_ = dev_f(NULL, C);
    dense_bn_stats_finish(mean, var, rm, rv, s, s + C, shift, N, C, MOM);
    g_be->dense_bn_stats_finish(mean_, var_, rm_, rv_, s_, s_ + C, shift_, N, C, MOM);
    cmp(cname("dense_bn_stats_finish mean %s", t), mean_, mean, C, TOL);
    cmp(cname("dense_bn_stats_finish var %s", t), var_, var, C, TOL);
    cmp(cname("dense_bn_stats_finish running mean %s", t), rm_, rm, C, TOL);
    cmp(cname("dense_bn_stats_finish running var %s", t), rv_, rv, C, TOL);
    dev_set(mean_, mean, C), dev_set(var_, var, C);
    dense_bn_running_update(rm, rv, mean, var, N, C, MOM);
    g_be->dense_bn_running_update(rm_, rv_, mean_, var_, N, C, MOM);
    cmp(cname("dense_bn_running_update mean %s", t), rm_, rm, C, TOL);
    cmp(cname("dense_bn_running_update var %s", t), rv_, rv, C, TOL);
    // forward into a strided output (the columns past C keep their prefill)
    float *z = rand_f(nx, -1, 1), *z_ = dev_f(z, nx);
    dense_bn_relu_forward(z, NULL, ld, k.x, ld, mean, var, k.w[0], k.b[0], N, C, EPS);
    g_be->dense_bn_relu_forward(z_, NULL, ld, x_, ld, mean_, var_, w_, b_, N, C, EPS);
    cmp(cname("dense_bn_relu_forward %s", t), z_, z, nx, TOL);
    {  // the bf16 output alone: the backend's float output rounded (columns past C untouched)
        float *zf = dev_get(z_, nx);
        spk_bf16 *zh = malloc(nx * sizeof *zh), *zh_ = dev_alloc(nx * sizeof *zh), *got = malloc(nx * sizeof *zh);
        for (size_t i = 0; i < nx; i++) zh[i] = (spk_bf16)(i * 7919u);
        g_be->upload(zh_, zh, nx * sizeof *zh);
        g_be->dense_bn_relu_forward(NULL, zh_, ld, x_, ld, mean_, var_, w_, b_, N, C, EPS);
        g_be->download(got, zh_, nx * sizeof *zh);
        int bad = 0;
        for (size_t i = 0; i < nx; i++) {
            const spk_bf16 want = (int)(i % (size_t)ld) < C ? spk_bf16_round(zf[i]) : (spk_bf16)(i * 7919u);
            bad += got[i] != want;
        }
        check_true(bad == 0, cname("dense_bn_relu_forward bf16 output: the float output rounded %s", t));
        free(zh), free(got);
    }
    // a reader's backward, accumulating into a prefill, twice
    grads_t g = grads_prefill(1, (size_t[]){nx});
    float *pp = alloc_f(4 * (size_t)groups * C), *pp_ = dev_f(NULL, 4 * (size_t)groups * C),
          *pp2_ = dev_f(NULL, 4 * (size_t)groups * C);
    dense_bn_relu_backward(g.cpu[0], ld, 1, pp, k.dz[0], C, k.x, ld, mean, var, k.w[0], k.b[0], B, HW, C, EPS, group);
    g_be->dense_bn_relu_backward(g.dev[0], ld, 1, pp_, dz_, C, x_, ld, mean_, var_, w_, b_, B, HW, C, EPS, group);
    g_be->dense_bn_relu_backward(g.dev2[0], ld, 1, pp2_, dz_, C, x_, ld, mean_, var_, w_, b_, B, HW, C, EPS, group);
    grads_check(&g, "dense_bn_relu_backward", t, (const char *[]){"g"}, (double[]){TOL});
    cmp(cname("dense_bn_relu_backward sums %s", t), pp_, pp, 4 * (size_t)groups * C, TOL);
    same_bits(cname("dense_bn_relu_backward sums twice %s", t), pp_, pp2_, 4 * (size_t)groups * C);
    // the input gradient, overwritten then accumulated
    float *gg = rand_f(nx, -1, 1), *gg_ = dev_f(gg, nx), *ss = rand_f(2 * (size_t)C, -5, 5), *ss_ = dev_f(ss, 2 * C);
    for (int accumulate = 0; accumulate < 2; accumulate++) {
        float *dx = rand_f(nx, -1, 1), *dx_ = dev_f(dx, nx);
        dense_bn_input_grad(dx, ld, accumulate, gg, ld, k.x, ld, mean, var, ss, ss + C, N, N, C, EPS);
        g_be->dense_bn_input_grad(dx_, ld, accumulate, gg_, ld, x_, ld, mean_, var_, ss_, ss_ + C, N, N, C, EPS);
        cmp(cname("dense_bn_input_grad %s %s", accumulate ? "accumulated" : "overwritten", t), dx_, dx, nx, TOL);
    }
    dev_release();
    test_release();
}

static void backend_checks(void) {
    backend_case(2, 7, 5, 0, 2);
    backend_case(4, 50, 40, 3, 4);
    backend_case(6, 33, 128, 32, 3);
    backend_case(8, 100, 288, 0, 1);
}

int main(int argc, char **argv) { return test_main(argc, argv, "test_dense_bn", 17, cpu_checks, backend_checks); }
