// The double-precision adjoint of the reference convolution (conv1d_forward_reference), and the
// shapes every backend is checked on, shared by the float32 and bf16 convolution tests.
#pragma once
#include <stddef.h>
#include <stdio.h>

#include "exact_check.h"
#include "kernels/backend.h"
#include "test_common.h"

// Direct adjoint of the reference conv (double): dx, dw, dbias for upstream r.
static void conv_backward_reference(double *dx, double *dw, double *db, const float *r, const float *x, const float *w,
                                    int B, int Cin, int Cout, int T, int K, int d) {
    const int p = d * (K - 1) / 2;
    for (int b = 0; b < B; b++)
        for (int co = 0; co < Cout; co++)
            for (int t = 0; t < T; t++) {
                const double g = r[((size_t)b * Cout + co) * T + t];
                db[co] += g;
                for (int ci = 0; ci < Cin; ci++)
                    for (int k = 0; k < K; k++) {
                        int u = t + k * d - p;
                        if (u < 0) u = -u;
                        if (u >= T) u = 2 * (T - 1) - u;
                        dw[((size_t)co * Cin + ci) * K + k] += g * x[((size_t)b * Cin + ci) * T + u];
                        dx[((size_t)b * Cin + ci) * T + u] += g * w[((size_t)co * Cin + ci) * K + k];
                    }
            }
}

// B, Cin, Cout, T, K, dilation, with a bias: the shapes each backend runs against the CPU kernels.
static const int conv_backend_shapes[][7] = {
    {3, 5, 7, 20, 3, 1, 1},   {2, 8, 6, 17, 5, 3, 0},  // pad 6 of T 17
    {2, 4, 4, 5, 3, 2, 1},                             // pad 2 of T 5: most positions reflect
    {4, 16, 12, 9, 1, 1, 1},  // K = 1: no padding (dx accumulated by cuDNN in the float32 conv)
    {4, 32, 24, 64, 3, 4, 1},
};

// Runs backend_case(B, Cin, Cout, T, K, dilation, with_bias) for every shape above.
static void conv_backend_checks(void (*backend_case)(int, int, int, int, int, int, int)) {
    for (size_t i = 0; i < sizeof conv_backend_shapes / sizeof conv_backend_shapes[0]; i++) {
        const int *s = conv_backend_shapes[i];
        backend_case(s[0], s[1], s[2], s[3], s[4], s[5], s[6]);
    }
}

// A backend case's shape and random operands: x (B, Cin, T), w (Cout, Cin, K), with_bias a bias
// (else NULL), room for y (B, Cout, T); tag names the case in messages.
typedef struct {
    char tag[96];
    size_t nx, ny, nw;
    float *x, *w, *y, *bias;
} conv_case_t;

static conv_case_t conv_case(int B, int Cin, int Cout, int T, int K, int d, int with_bias) {
    conv_case_t c;
    snprintf(c.tag, sizeof c.tag, "B%d Cin%d Cout%d T%d K%d d%d%s", B, Cin, Cout, T, K, d, with_bias ? " bias" : "");
    c.nx = (size_t)B * Cin * T, c.ny = (size_t)B * Cout * T, c.nw = (size_t)Cout * Cin * K;
    c.x = rand_f(c.nx, -1, 1), c.w = rand_f(c.nw, -0.5f, 0.5f), c.y = alloc_f(c.ny);
    c.bias = with_bias ? rand_f(Cout, -1, 1) : NULL;
    return c;
}

// The operands of a convolution's backward on a backend (a backward_fn's context): dy, and x and w
// (float32), or with bf16 set their bf16 copies xh and wh (conv1d_bf16_backward).
typedef struct {
    const spk_backend_t *be;
    int bf16;
    const float *dy, *x, *w;
    const spk_bf16 *xh, *wh;
    int B, Cin, Cout, T, K, d;
    float *ws;
    int group;            // the exact backward's samples per term (0: 1)
    int dx_set;           // dx overwritten (dx_accumulate 0) instead of added to
    const spk_bf16 *dyh;  // the exact bf16 backward's output gradient rounded already, (B, Cout, T):
                          // dy unused, no bias gradient
} conv_call_t;

static conv_call_t conv_call(const spk_backend_t *be, const float *dy, const float *x, const float *w, int B, int Cin,
                             int Cout, int T, int K, int d, float *ws) {
    return (conv_call_t){be, 0, dy, x, w, NULL, NULL, B, Cin, Cout, T, K, d, ws, 1, 0, NULL};
}

static conv_call_t conv_call_bf16(const spk_backend_t *be, const float *dy, const spk_bf16 *xh, const spk_bf16 *wh,
                                  int B, int Cin, int Cout, int T, int K, int d, float *ws) {
    return (conv_call_t){be, 1, dy, NULL, NULL, xh, wh, B, Cin, Cout, T, K, d, ws, 1, 0, NULL};
}

static void conv_backward_call(void *p, grad3_t g) {
    const conv_call_t *c = (const conv_call_t *)p;
    if (c->bf16)
        c->be->conv1d_bf16_backward(g.x, !c->dx_set, g.w, g.b, c->dy, NULL, c->xh, c->wh, c->B, c->Cin, c->Cout, c->T,
                                    c->K, c->d, c->ws);
    else
        c->be->conv1d_backward(g.x, !c->dx_set, g.w, g.b, c->dy, c->x, c->w, c->B, c->Cin, c->Cout, c->T, c->K, c->d,
                               c->ws);
}

// dx overwritten (dx_accumulate 0) on c's backend, from a random prefill: the bits the
// accumulating call gives into a zeroed dx, with dw and dbias still accumulated (their prefills
// alike). Needs tests/kernels/backends.h (included first by the tests).
static void conv_dx_set_check(const char *op, const char *tag, conv_call_t c, size_t nx, size_t nw, size_t nb) {
    const float *pw = rand_f(nw, -1, 1), *pb = rand_f(nb, -1, 1);
    float *want_x = dev_f(zeros_f(nx), nx), *want_w = dev_f(pw, nw), *want_b = dev_f(pb, nb);
    float *got_x = dev_f(rand_f(nx, -1, 1), nx), *got_w = dev_f(pw, nw), *got_b = dev_f(pb, nb);
    c.dx_set = 0;
    conv_backward_call(&c, (grad3_t){want_x, want_w, want_b});
    c.dx_set = 1;
    conv_backward_call(&c, (grad3_t){got_x, got_w, got_b});
    same_bits(cname("%s dx overwritten = accumulated into zeros %s", op, tag), got_x, want_x, nx);
    same_bits(cname("%s dw beside an overwritten dx %s", op, tag), got_w, want_w, nw);
    same_bits(cname("%s dbias beside an overwritten dx %s", op, tag), got_b, want_b, nb);
}

// The invariant mode's exact backward on c's operands, dx added (dx_accumulate) or written;
// c->ws is the fixed ops' workspace.
static void conv_exact(const conv_call_t *c, float *dx, int dx_accumulate, float *dw_tmp, xsum_t dw, xsum_t dbias) {
    const int group = c->group > 1 ? c->group : 1;
    if (c->bf16)
        c->be->conv1d_bf16_backward_exact(dx, dx_accumulate, dw_tmp, dw, c->dyh ? xsum_none() : dbias,
                                          c->dyh ? NULL : c->dy, c->dyh, c->xh, c->wh, c->B, c->Cin, c->Cout, c->T,
                                          c->K, c->d, c->ws, group);
    else
        c->be->conv1d_backward_exact(dx, dx_accumulate, dw_tmp, dw, dbias, c->dy, c->x, c->w, c->B, c->Cin, c->Cout,
                                     c->T, c->K, c->d, c->ws, group);
}

// The same, dx written (an exact_backward_fn, tests/kernels/backends.h).
static void conv_exact_call(void *p, float *dx, float *dw_tmp, xsum_t dw, xsum_t dbias) {
    conv_exact((const conv_call_t *)p, dx, 0, dw_tmp, dw, dbias);
}

// What an exact backward gave: dx, and the parameter gradients' sums (test buffers).
typedef struct {
    float *dx;
    xsum_t dw, db;
} exact_grads_t;

// The exact backward of c's batch on 2 and on 8 threads, and split between two calls of whole groups (the
// second part first) on one thread: the same dx and the same sums, or the check fails. Returns
// the whole batch's, from a zero dx, for the caller's other checks.
static exact_grads_t conv_exact_split_check(const char *op, const char *tag, const conv_call_t *c) {
    const int group = c->group > 1 ? c->group : 1, first = (c->B / group + 1) / 2 * group;
    const size_t nx = (size_t)c->B * c->Cin * c->T, nw = (size_t)c->Cout * c->Cin * c->K;
    conv_call_t tail = *c, head = *c;
    tail.B -= first, head.B = first;
    tail.dy += (size_t)first * c->Cout * c->T;
    if (c->dyh) tail.dyh += (size_t)first * c->Cout * c->T;
    if (c->bf16)
        tail.xh += (size_t)first * c->Cin * c->T;
    else
        tail.x += (size_t)first * c->Cin * c->T;
    float *dx = zeros_f(nx), *dx1 = zeros_f(nx), *tmp = alloc_f(nw);
    xsum_t dw = host_sums((int64_t)nw), db = host_sums(c->Cout), dw1 = host_sums((int64_t)nw), db1 = host_sums(c->Cout);
    const int before = with_threads(1);
    conv_exact_call(&tail, dx1 + (size_t)first * c->Cin * c->T, tmp, dw1, db1);
    conv_exact_call(&head, dx1, tmp, dw1, db1);
    // 2 threads, and 8: past the blocks of most shapes, tiles of their rows
    for (int threads = 2; threads <= 8; threads *= 4) {
        xsum_t dwt = host_sums((int64_t)nw), dbt = host_sums(c->Cout);
        with_threads(threads);
        conv_exact_call((void *)c, dx, tmp, dwt, dbt);
        check_true(
            memcmp(dx1, dx, sizeof(float) * nx) == 0 && same_sums(dw1, dwt, (int64_t)nw) &&
                same_sums(db1, dbt, c->Cout),
            cname("%s %s group %d: batch split, 1 or %d threads: the same dx and sums", op, tag, group, threads));
        dw = dwt, db = dbt;
    }
    with_threads(before);
    float *added = zeros_f(nx), *written = rand_f(nx, -1, 1);  // over a garbage prefill
    conv_exact(c, added, 1, NULL, xsum_none(), xsum_none());
    conv_exact(c, written, 0, NULL, xsum_none(), xsum_none());
    check_true(memcmp(written, added, sizeof(float) * nx) == 0 && memcmp(written, dx, sizeof(float) * nx) == 0,
               cname("%s %s: dx written = added into zeros", op, tag));
    return (exact_grads_t){dx, dw, db};
}

// A convolution's gradients g against double references, at the tolerances of both convolution
// tests (dx sums Cout K terms, dw and dbias B T).
static void check_conv_grads(const char *op, const char *tag, grad3_t g, const double *dxr, const double *dwr,
                             const double *dbr, grad3_sizes_t n, int B, int Cout, int T, int K) {
    char nm[320];
    snprintf(nm, sizeof nm, "%s dx vs adjoint %s", op, tag);
    check_close_d(nm, g.x, dxr, n.x, 1e-4, 1e-5 * (1 + Cout * K));
    snprintf(nm, sizeof nm, "%s dw vs adjoint %s", op, tag);
    check_close_d(nm, g.w, dwr, n.w, 1e-4, 1e-5 * (1 + B * T));
    snprintf(nm, sizeof nm, "%s dbias vs reference %s", op, tag);
    check_close_d(nm, g.b, dbr, n.b, 1e-4, 1e-5 * (1 + B * T));
}
