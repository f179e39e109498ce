// Dense layer: forward vs naive loops, finite-difference dx/dw/db, accumulation, NULL outputs;
// the invariant mode's forward: a row the same alone as in a batch and on 1 or 2 threads, close
// to linear_forward. Then every backend against the CPU kernels (tests/kernels/backends.h).
#include "backends.h"
#include "exact_check.h"
#include "kernels/linear.h"

typedef struct {
    int B, In, Out;
    float *x, *w, *b, *y, *r;
} lin_ctx;

static double lin_loss(void *p) {
    lin_ctx *c = (lin_ctx *)p;
    linear_forward(c->y, c->x, c->w, c->b, c->B, c->In, c->Out);
    return dot_d(c->y, c->r, (size_t)c->B * c->Out);
}

static void run_case(int B, int In, int Out) {
    char nm[128];
    const size_t nx = (size_t)B * In, nw = (size_t)Out * In, ny = (size_t)B * Out;
    lin_ctx c = {B, In, Out, rand_f(nx, -1, 1), rand_f(nw, -1, 1), rand_f(Out, -1, 1), alloc_f(ny), rand_f(ny, -1, 1)};
    for (int pass = 0; pass < 2; pass++) {
        const float *bias = pass ? NULL : c.b;
        fill_nan(c.y, ny);
        linear_forward(c.y, c.x, c.w, bias, B, In, Out);
        double *want = alloc_d(ny);
        for (int i = 0; i < B; i++)
            for (int o = 0; o < Out; o++) {
                double s = bias ? bias[o] : 0;
                for (int k = 0; k < In; k++) s += (double)c.x[(size_t)i * In + k] * c.w[(size_t)o * In + k];
                want[(size_t)i * Out + o] = s;
            }
        snprintf(nm, sizeof nm, "linear fwd%s B%d In%d Out%d", pass ? " nobias" : "", B, In, Out);
        check_close_d(nm, c.y, want, ny, 1e-5, 1e-5 * (1 + In / 16.0));
    }
    float *dx = zeros_f(nx), *dw = zeros_f(nw), *db = zeros_f(Out);
    linear_backward(dx, dw, db, c.r, c.x, c.w, B, In, Out);
    snprintf(nm, sizeof nm, "linear fd dx B%d In%d Out%d", B, In, Out);
    fd_check(nm, c.x, dx, nx, lin_loss, &c, 1e-2f, 1e-3, 1e-3, 150);
    snprintf(nm, sizeof nm, "linear fd dw B%d In%d Out%d", B, In, Out);
    fd_check(nm, c.w, dw, nw, lin_loss, &c, 1e-2f, 1e-3, 1e-3, 150);
    snprintf(nm, sizeof nm, "linear fd db B%d In%d Out%d", B, In, Out);
    fd_check(nm, c.b, db, Out, lin_loss, &c, 1e-2f, 1e-3, 1e-3, 150);
    float *px = rand_f(nx, -1, 1), *pw = rand_f(nw, -1, 1), *pb = rand_f(Out, -1, 1);
    float *ax = copy_f(px, nx), *aw = copy_f(pw, nw), *ab = copy_f(pb, Out);
    linear_backward(ax, aw, ab, c.r, c.x, c.w, B, In, Out);
    snprintf(nm, sizeof nm, "B%d In%d Out%d", B, In, Out);
    check_accumulated3("linear", nm, (grad3_t){ax, aw, ab}, (grad3_t){px, pw, pb}, (grad3_t){dx, dw, db},
                       (grad3_sizes_t){nx, nw, (size_t)Out});
    float *ow = zeros_f(nw);
    linear_backward(NULL, ow, NULL, c.r, c.x, c.w, B, In, Out);
    snprintf(nm, sizeof nm, "linear dw-only B%d In%d Out%d", B, In, Out);
    check_close(nm, ow, dw, nw, 0, 0);
    test_release();
}

static void invariant_case(int B, int In, int Out) {
    float *x = rand_f((size_t)B * In, -1, 1), *w = rand_f((size_t)Out * In, -1, 1), *b = rand_f(Out, -1, 1);
    float *y2 = alloc_f((size_t)B * Out), *y1 = alloc_f((size_t)B * Out), *y = alloc_f((size_t)B * Out);
    const int before = with_threads(2);
    linear_forward_rows(y2, x, w, b, B, In, Out);
    with_threads(1);
    for (int i = 0; i < B; i++) linear_forward_rows(y1 + (size_t)i * Out, x + (size_t)i * In, w, b, 1, In, Out);
    with_threads(before);
    check_true(memcmp(y1, y2, sizeof(float) * B * Out) == 0,
               cname("linear_forward_rows B%d In%d Out%d: a row alone == in the batch", B, In, Out));
    linear_forward(y, x, w, b, B, In, Out);
    check_close(cname("linear_forward_rows B%d In%d Out%d vs linear_forward", B, In, Out), y2, y, (size_t)B * Out, 1e-5,
                1e-4);
    test_release();
}

static void cpu_checks(void) {
    invariant_case(16, 3072, 192);
    run_case(1, 5, 3);
    run_case(4, 13, 7);
    run_case(32, 96, 40);
    run_case(33, 200, 129);
}

// ---- every backend against the CPU kernels --------------------------------------------------
static void backend_case(int with_bias) {
    const char *tag = with_bias ? "bias" : "no bias";
    const int B = 13, In = 70, Out = 33;
    const size_t nx = (size_t)B * In, ny = (size_t)B * Out, nw = (size_t)Out * In;
    float *x = rand_f(nx, -1, 1), *w = rand_f(nw, -1, 1), *y = alloc_f(ny);
    float *b = with_bias ? rand_f(Out, -1, 1) : NULL;
    linear_forward(y, x, w, b, B, In, Out);
    float *dx = dev_f(x, nx), *dw = dev_f(w, nw), *db = b ? dev_f(b, Out) : NULL;
    float *dy = dev_f(NULL, ny);
    g_be->linear_forward(dy, dx, dw, db, B, In, Out);
    cmp(cname("linear forward %s", tag), dy, y, ny, TOL_GEMM);
    linear_forward_rows(y, x, w, b, B, In, Out);
    spk_backend_invariant(g_be)->linear_forward(dy, dx, dw, db, B, In, Out);
    cmp(cname("linear forward rows %s", tag), dy, y, ny, TOL_GEMM);
    float *gy = rand_f(ny, -1, 1), *dgy = dev_f(gy, ny);
    grads_t g = grads_prefill(3, (size_t[]){nx, nw, Out});
    linear_backward(g.cpu[0], g.cpu[1], g.cpu[2], gy, x, w, B, In, Out);
    g_be->linear_backward(g.dev[0], g.dev[1], g.dev[2], dgy, dx, dw, B, In, Out);
    g_be->linear_backward(g.dev2[0], g.dev2[1], g.dev2[2], dgy, dx, dw, B, In, Out);
    grads_check(&g, "linear", tag, (const char *[]){"dx", "dw", "db"}, (double[]){TOL_GEMM, TOL_GEMM, TOL});
    dev_release();
    test_release();
}

static void backend_checks(void) {
    backend_case(1);
    backend_case(0);
}

int main(int argc, char **argv) { return test_main(argc, argv, "test_linear", 3, cpu_checks, backend_checks); }
