// Layout helpers: channel slices, time repeat (with its backward by finite differences, and the
// ld = 0 broadcast), per-sample transposes, vector accumulate/zero/copy; then every backend
// against the CPU kernels (tests/kernels/backends.h).
#include "backends.h"
#include "kernels/tensor_ops.h"

// time_repeat_forward into channels [d0, d0 + C) of a (B, Cy, T) tensor; loss over all of it
typedef struct {
    int B, C, T, Cy, ld, d0;
    float *s, *y, *r;
} rep_ctx;

static double rep_loss(void *p) {
    rep_ctx *c = (rep_ctx *)p;
    time_repeat_forward(c->y + (size_t)c->d0 * c->T, c->Cy, c->s, c->ld, c->B, c->C, c->T);
    return dot_d(c->y, c->r, (size_t)c->B * c->Cy * c->T);
}

static void cpu_checks(void) {
    const int B = 3, T = 11, Cs = 7, Cd = 12, C = 5, c0 = 2, d0 = 6;
    // copy channels [c0, c0 + C) of a (B, Cs, T) tensor into channels [d0, d0 + C) of (B, Cd, T)
    float *src = rand_f((size_t)B * Cs * T, -1, 1);
    float *dst = rand_f((size_t)B * Cd * T, -1, 1);
    float *dst0 = copy_f(dst, (size_t)B * Cd * T);
    channel_slice_copy(dst + (size_t)d0 * T, Cd, src + (size_t)c0 * T, Cs, B, C, T);
    float *want = copy_f(dst0, (size_t)B * Cd * T);
    for (int b = 0; b < B; b++)
        for (int c = 0; c < C; c++)
            for (int t = 0; t < T; t++)
                want[((size_t)b * Cd + d0 + c) * T + t] = src[((size_t)b * Cs + c0 + c) * T + t];
    check_close("channel_slice_copy", dst, want, (size_t)B * Cd * T, 0, 0);
    channel_slice_add(dst + (size_t)d0 * T, Cd, src + (size_t)c0 * T, Cs, B, C, T);
    for (int b = 0; b < B; b++)
        for (int c = 0; c < C; c++)
            for (int t = 0; t < T; t++)
                want[((size_t)b * Cd + d0 + c) * T + t] += src[((size_t)b * Cs + c0 + c) * T + t];
    check_close("channel_slice_add", dst, want, (size_t)B * Cd * T, 0, 0);

    // time repeat into a channel slice of a wider tensor, from a strided (B, ld) source
    const int ld = 9;
    rep_ctx rc = {B,
                  C,
                  T,
                  Cd,
                  ld,
                  d0,
                  rand_f((size_t)B * ld, -1, 1),
                  rand_f((size_t)B * Cd * T, -1, 1),
                  rand_f((size_t)B * Cd * T, -1, 1)};
    float *y0 = copy_f(rc.y, (size_t)B * Cd * T);
    time_repeat_forward(rc.y + (size_t)d0 * T, Cd, rc.s, ld, B, C, T);
    for (int b = 0; b < B; b++)
        for (int c = 0; c < Cd; c++)
            for (int t = 0; t < T; t++) {
                const size_t i = ((size_t)b * Cd + c) * T + t;
                want[i] = (c >= d0 && c < d0 + C) ? rc.s[(size_t)b * ld + c - d0] : y0[i];
            }
    check_close("time_repeat_forward", rc.y, want, (size_t)B * Cd * T, 0, 0);
    // backward: gradient w.r.t. s by finite differences and by direct sums
    rep_ctx rcx = {B, C, T, Cd, ld, d0, rc.s, rc.y, rc.r};
    float *ds = zeros_f((size_t)B * ld);
    time_repeat_backward(ds, ld, rc.r + (size_t)d0 * T, Cd, B, C, T);
    fd_check("time_repeat fd ds", rc.s, ds, (size_t)B * ld, rep_loss, &rcx, 1e-2f, 1e-3, 1e-3, 100);
    for (int b = 0; b < B; b++)
        for (int c = C; c < ld; c++) check_true(ds[(size_t)b * ld + c] == 0, "repeat ds padding");
    double *dsw = zeros_d((size_t)B * ld);
    for (int b = 0; b < B; b++)
        for (int c = 0; c < C; c++)
            for (int t = 0; t < T; t++) dsw[(size_t)b * ld + c] += rc.r[((size_t)b * Cd + d0 + c) * T + t];
    check_close_d("time_repeat_backward", ds, dsw, (size_t)B * ld, 1e-6, 1e-6);
    float *pre = rand_f((size_t)B * ld, -1, 1);
    float *acc = copy_f(pre, (size_t)B * ld);
    time_repeat_backward(acc, ld, rc.r + (size_t)d0 * T, Cd, B, C, T);
    check_accumulated("time_repeat_backward accumulates", acc, pre, ds, (size_t)B * ld);

    // ld = 0: the same C values repeated for every sample
    float *s0 = rand_f(C, -1, 1);
    memcpy(rc.y, y0, sizeof(float) * B * Cd * T);
    time_repeat_forward(rc.y + (size_t)d0 * T, Cd, s0, 0, B, C, T);
    for (int b = 0; b < B; b++)
        for (int c = 0; c < Cd; c++)
            for (int t = 0; t < T; t++) {
                const size_t i = ((size_t)b * Cd + c) * T + t;
                want[i] = (c >= d0 && c < d0 + C) ? s0[c - d0] : y0[i];
            }
    check_close("time_repeat_forward ld 0", rc.y, want, (size_t)B * Cd * T, 0, 0);

    // batch_transpose: odd shapes (partial tiles), R < C and R > C, and a threaded size; a
    // second transpose must give back the input exactly
    const int tshape[][3] = {{1, 1, 1}, {3, 5, 70}, {2, 45, 33}, {4, 200, 80}};
    for (size_t k = 0; k < sizeof tshape / sizeof tshape[0]; k++) {
        const int TB = tshape[k][0], R = tshape[k][1], TC = tshape[k][2];
        const size_t tn = (size_t)TB * R * TC;
        float *x = rand_f(tn, -1, 1), *xt = alloc_f(tn), *xtt = alloc_f(tn), *tw = alloc_f(tn);
        batch_transpose(xt, x, TB, R, TC);
        for (int b = 0; b < TB; b++)
            for (int r = 0; r < R; r++)
                for (int c = 0; c < TC; c++) tw[((size_t)b * TC + c) * R + r] = x[((size_t)b * R + r) * TC + c];
        char nm[96];
        snprintf(nm, sizeof nm, "batch_transpose B%d R%d C%d", TB, R, TC);
        check_close(nm, xt, tw, tn, 0, 0);
        batch_transpose(xtt, xt, TB, TC, R);
        snprintf(nm, sizeof nm, "batch_transpose round trip B%d R%d C%d", TB, R, TC);
        check_close(nm, xtt, x, tn, 0, 0);
    }

    // vec ops, including the threaded size
    const size_t n = 100003;
    float *a = rand_f(n, -1, 1), *b = rand_f(n, -1, 1), *y = copy_f(b, n), *w2 = copy_f(b, n);
    vec_acc(y, a, n);
    for (size_t i = 0; i < n; i++) w2[i] += a[i];
    check_close("vec_acc", y, w2, n, 0, 0);
    vec_zero(y, n);
    check_true(max_abs(y, n) == 0, "vec_zero");
    vec_copy(y, a, n);
    check_close("vec_copy", y, a, n, 0, 0);
    vec_copy(NULL, NULL, 0);  // empty copy is a no-op
}

// ---- every backend against the CPU kernels --------------------------------------------------
static void backend_checks(void) {
    const int B = 3, T = 11, Cd = 7, Cs = 5, C = 3;  // dst/src channel counts, copied channels
    const size_t nd = (size_t)B * Cd * T, ns = (size_t)B * Cs * T;
    float *dst = rand_f(nd, -1, 1), *src = rand_f(ns, -1, 1);
    float *ddst = dev_f(dst, nd), *dsrc = dev_f(src, ns);
    channel_slice_copy(dst + 2 * T, Cd, src + 1 * T, Cs, B, C, T);
    g_be->channel_slice_copy(ddst + 2 * T, Cd, dsrc + 1 * T, Cs, B, C, T);
    cmp("channel_slice_copy", ddst, dst, nd, 0.0);
    channel_slice_add(dst + 4 * T, Cd, src, Cs, B, C, T);
    g_be->channel_slice_add(ddst + 4 * T, Cd, dsrc, Cs, B, C, T);
    cmp("channel_slice_add", ddst, dst, nd, TOL);

    // time_repeat: y has 9 channels (write 3 from channel 4), s rows of ld = 7 (from column 2)
    const int Cy = 9, ld = 7;
    const size_t ny = (size_t)B * Cy * T, nsr = (size_t)B * ld;
    float *y = rand_f(ny, -1, 1), *s = rand_f(nsr, -1, 1);
    float *dyd = dev_f(y, ny), *dsd = dev_f(s, nsr);
    time_repeat_forward(y + 4 * T, Cy, s + 2, ld, B, C, T);
    g_be->time_repeat_forward(dyd + 4 * T, Cy, dsd + 2, ld, B, C, T);
    cmp("time_repeat forward", dyd, y, ny, 0.0);
    float *gy = rand_f(ny, -1, 1);
    float *dgy = dev_f(gy, ny);
    time_repeat_backward(s + 2, ld, gy + 4 * T, Cy, B, C, T);
    g_be->time_repeat_backward(dsd + 2, ld, dgy + 4 * T, Cy, B, C, T);
    cmp("time_repeat backward", dsd, s, nsr, TOL);
    // ld = 0: one vector of C values repeated for every sample, into channels [1, 1 + C)
    float *s1 = rand_f(C, -1, 1);
    float *ds1 = dev_f(s1, C);
    time_repeat_forward(y + 1 * T, Cy, s1, 0, B, C, T);
    g_be->time_repeat_forward(dyd + 1 * T, Cy, ds1, 0, B, C, T);
    cmp("time_repeat forward ld 0", dyd, y, ny, 0.0);
    dev_release();

    // batch_transpose: partial tiles, R < C, more tiles than CUDA blocks, and the round trip
    const int tshape[][3] = {{3, 5, 70}, {2, 45, 33}, {4, 200, 80}, {5000, 40, 3}};
    for (size_t k = 0; k < sizeof tshape / sizeof tshape[0]; k++) {
        const int TB = tshape[k][0], R = tshape[k][1], TC = tshape[k][2];
        const size_t tn = (size_t)TB * R * TC;
        float *x = rand_f(tn, -1, 1), *xt = alloc_f(tn);
        float *dxd = dev_f(x, tn), *dxt = dev_f(NULL, tn), *dxtt = dev_f(NULL, tn);
        batch_transpose(xt, x, TB, R, TC);
        g_be->batch_transpose(dxt, dxd, TB, R, TC);
        cmp(cname("batch_transpose B%d R%d C%d", TB, R, TC), dxt, xt, tn, 0.0);
        g_be->batch_transpose(dxtt, dxt, TB, TC, R);
        cmp(cname("batch_transpose round trip B%d R%d C%d", TB, R, TC), dxtt, x, tn, 0.0);
        dev_release();
    }

    const size_t n = 5003;
    float *a = rand_f(n, -1, 1), *b = rand_f(n, -1, 1);
    float *da = dev_f(a, n), *db = dev_f(b, n);
    vec_acc(a, b, n);
    g_be->vec_acc(da, db, n);
    cmp("vec_acc", da, a, n, 0.0);
    vec_zero(a, n);
    g_be->vec_zero(da, n);
    cmp("vec_zero", da, a, n, 0.0);
    vec_copy(a, b, n);
    g_be->vec_copy(da, db, n);
    cmp("vec_copy", da, a, n, 0.0);

    // rows by index: 7 of 40 rows of 33, out of order, and back
    const int rows = 40, E = 33, k = 7, idx[7] = {39, 3, 17, 0, 22, 5, 38};
    float *w = rand_f((size_t)rows * E, -1, 1), *g = alloc_f((size_t)k * E), *acc = copy_f(w, (size_t)rows * E);
    int *didx = dev_i(idx, k);
    float *dw = dev_f(w, (size_t)rows * E), *dg = dev_f(NULL, (size_t)k * E), *dacc = dev_f(w, (size_t)rows * E);
    rows_gather(g, w, idx, k, E);
    for (int i = 0; i < k; i++)
        check_true(memcmp(g + (size_t)i * E, w + (size_t)idx[i] * E, sizeof(float) * E) == 0, "rows_gather row");
    g_be->rows_gather(dg, dw, didx, k, E);
    cmp("rows_gather", dg, g, (size_t)k * E, 0.0);
    rows_scatter_add(acc, g, idx, k, E);
    for (int i = 0; i < k; i++)
        check_true(acc[(size_t)idx[i] * E + 1] == 2 * w[(size_t)idx[i] * E + 1], "rows_scatter_add");
    check_true(acc[E] == w[E], "rows_scatter_add leaves the other rows");
    g_be->rows_scatter_add(dacc, dg, didx, k, E);
    cmp("rows_scatter_add", dacc, acc, (size_t)rows * E, 0.0);
}

int main(int argc, char **argv) { return test_main(argc, argv, "test_tensor_ops", 5, cpu_checks, backend_checks); }
