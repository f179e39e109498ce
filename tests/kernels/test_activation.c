// Activations: forward values vs double libm, spk_expf accuracy, finite-difference backward
// (through the forward output; GELU's through its input), accumulation, in-place forward, the
// in-place ReLU mask; then every backend against the CPU kernels (tests/kernels/backends.h).
#include "backends.h"
#include "kernels/activation.h"
#include "kernels/elementwise_math.h"

typedef void (*fwd_fn)(float *, const float *, size_t);
typedef void (*bwd_fn)(float *, const float *, const float *, size_t);

typedef struct {
    fwd_fn f;
    float *x, *y, *r;
    size_t n;
} act_ctx;

static double act_loss(void *p) {
    act_ctx *c = (act_ctx *)p;
    c->f(c->y, c->x, c->n);
    return dot_d(c->y, c->r, c->n);
}

static double ref_relu(double x) { return x > 0 ? x : 0; }
static double ref_sigmoid(double x) { return 1.0 / (1.0 + exp(-x)); }
static double ref_tanh(double x) { return tanh(x); }
static double ref_gelu(double x) { return x * 0.5 * erfc(-x / sqrt(2.0)); }

// Backward takes the forward input x (GELU) rather than its output y.
static int takes_input(bwd_fn b) { return b == gelu_backward; }

static void run(const char *name, fwd_fn f, bwd_fn b, double (*ref)(double), size_t n, int fd_checks) {
    char nm[128];
    act_ctx c = {f, rand_f(n, -6, 6), alloc_f(n), rand_f(n, -1, 1), n};
    if (ref == ref_relu)  // keep finite differences away from the kink
        for (size_t i = 0; i < n; i++)
            if (fabsf(c.x[i]) < 0.05f) c.x[i] += 0.1f;
    f(c.y, c.x, n);
    double *want = alloc_d(n);
    for (size_t i = 0; i < n; i++) want[i] = ref(c.x[i]);
    snprintf(nm, sizeof nm, "%s forward", name);
    check_close_d(nm, c.y, want, n, 4e-7, 1e-7);
    float *xin = copy_f(c.x, n);
    f(xin, xin, n);
    snprintf(nm, sizeof nm, "%s forward in place", name);
    check_close(nm, xin, c.y, n, 0, 0);

    float *dx = zeros_f(n);
    const float *bin = takes_input(b) ? c.x : c.y;
    b(dx, c.r, bin, n);
    snprintf(nm, sizeof nm, "%s fd dx", name);
    fd_check(nm, c.x, dx, n, act_loss, &c, 1e-3f, 5e-3, 1e-3, fd_checks);
    act_loss(&c);
    float *pre = rand_f(n, -1, 1);
    float *acc = copy_f(pre, n);
    b(acc, c.r, bin, n);
    snprintf(nm, sizeof nm, "%s dx accumulates", name);
    check_accumulated(nm, acc, pre, dx, n);
    test_release();
}

// relu_mask(g, y) must leave in g what relu_backward(0, g, y) accumulates into zeros, with
// exact zeros in y (ReLU outputs) masked and y == -0 treated as not positive.
static void relu_mask_check(size_t n) {
    char nm[64];
    float *x = rand_f(n, -1, 1);
    for (size_t i = 0; i < n; i += 7) x[i] = 0.0f;
    float *y = alloc_f(n);
    relu_forward(y, x, n);
    y[2] = -0.0f;
    float *g = rand_f(n, -1, 1);
    float *want = zeros_f(n);
    relu_backward(want, g, y, n);
    relu_mask(g, y, n);
    snprintf(nm, sizeof nm, "relu_mask n %zu", n);
    check_close(nm, g, want, n, 0, 0);
    test_release();
}

static void exp_accuracy(void) {
    double worst = 0;
    float wx = 0;
    for (int i = 0; i <= 400000; i++) {
        const float x = -87.0f + 175.0f * (float)i / 400000.0f;
        const double want = exp((double)x);
        const double rel = fabs(spk_expf(x) - want) / want;
        if (rel > worst) {
            worst = rel;
            wx = x;
        }
    }
    if (worst > 3.6e-7) {  // 3 ulp
        printf("FAIL spk_expf: max relative error %.3g at x = %.9g\n", worst, wx);
        g_failures++;
    }
    check_true(spk_expf(-100.0f) == 0.0f, "spk_expf underflows to 0");
    check_true(spk_expf(0.0f) == 1.0f, "spk_expf(0) == 1");
    check_true(isfinite(spk_expf(1000.0f)), "spk_expf large input stays finite");
}

// spk_tanh on a grid of 800001 points over [-20, 20] (both sides of its switch at |x| = 0.625,
// and its saturation), against tanh in double, in ulps of the result: within 1.5; odd; and its
// special values.
static void tanh_accuracy(void) {
    const int n = 800001;
    double worst = 0;
    float wx = 0;
    for (int i = 0; i < n; i++) {
        const float x = -20.0f + 40.0f * (float)i / (float)(n - 1);
        const double want = tanh((double)x);
        const float wf = (float)want;
        const double ulp = wf == 0.0f ? 1e-45 : (double)nextafterf(fabsf(wf), INFINITY) - fabsf(wf);
        const double e = fabs(spk_tanh(x) - want) / ulp;
        if (e > worst) {
            worst = e;
            wx = x;
        }
        if (spk_tanh(-x) != -spk_tanh(x)) {
            printf("FAIL spk_tanh is not odd at x = %.9g\n", x);
            g_failures++;
            return;
        }
    }
    if (worst > 1.5) {
        printf("FAIL spk_tanh: %.3g ulp at x = %.9g\n", worst, wx);
        g_failures++;
    }
    check_true(signbit(spk_tanh(-0.0f)) && spk_tanh(-0.0f) == 0.0f, "spk_tanh(-0) == -0");
    check_true(spk_tanh(INFINITY) == 1.0f && spk_tanh(-INFINITY) == -1.0f, "spk_tanh(+-inf) == +-1");
    check_true(spk_tanh(1e-30f) == 1e-30f, "spk_tanh(tiny) == tiny");
    check_true(isnan(spk_tanh(NAN)), "spk_tanh(NaN) is NaN");
}

// GELU beyond the random inputs, on a grid over [-12, 12]: the forward within a few ulp of a
// double reference even in the far negative tail (x * Phi(x) keeps its relative precision: erfc
// of a split argument, not 1 + erf), the derivative against its double reference; special values.
static void gelu_checks(void) {
    const size_t n = 20001;
    float *x = alloc_f(n), *y = alloc_f(n), *dy = alloc_f(n), *dx = zeros_f(n);
    double *want = alloc_d(n), *wantd = alloc_d(n);
    for (size_t i = 0; i < n; i++) {
        x[i] = -12.0f + 24.0f * (float)i / (float)(n - 1);
        dy[i] = 1.0f;
        const double xd = x[i], pdf = exp(-0.5 * xd * xd) / sqrt(2.0 * 3.14159265358979323846);
        want[i] = ref_gelu(xd);
        wantd[i] = 0.5 * erfc(-xd / sqrt(2.0)) + xd * pdf;
    }
    gelu_forward(y, x, n);
    check_close_d("gelu forward on [-12, 12]", y, want, n, 4e-7, 1e-30);
    gelu_backward(dx, dy, x, n);
    check_close_d("gelu derivative on [-12, 12]", dx, wantd, n, 1e-6, 2e-7);
    const float sp[4] = {0.0f, -0.0f, 1e30f, INFINITY};
    float ys[4];
    gelu_forward(ys, sp, 4);
    check_true(ys[0] == 0.0f && ys[1] == 0.0f && ys[2] == 1e30f && ys[3] == INFINITY, "gelu(0, -0, 1e30, inf)");
    float nan_in = NAN, nan_out;
    gelu_forward(&nan_out, &nan_in, 1);
    check_true(nan_out != nan_out, "gelu(NaN) is NaN");
    test_release();
}

static void cpu_checks(void) {
    exp_accuracy();
    tanh_accuracy();
    run("relu", relu_forward, relu_backward, ref_relu, 1000, 300);
    run("sigmoid", sigmoid_forward, sigmoid_backward, ref_sigmoid, 1000, 300);
    run("tanh", tanh_forward, tanh_backward, ref_tanh, 1000, 300);
    run("gelu", gelu_forward, gelu_backward, ref_gelu, 1000, 300);
    run("relu large", relu_forward, relu_backward, ref_relu, 100000, 10);  // threaded path
    run("sigmoid large", sigmoid_forward, sigmoid_backward, ref_sigmoid, 100000, 10);
    run("tanh large", tanh_forward, tanh_backward, ref_tanh, 100000, 10);
    run("gelu large", gelu_forward, gelu_backward, ref_gelu, 100000, 10);
    gelu_checks();
    relu_mask_check(1000);
    relu_mask_check(100000);  // threaded path
}

// ---- every backend against the CPU kernels --------------------------------------------------
static void backend_activation(const char *name, fwd_fn f, fwd_fn fb, bwd_fn b, bwd_fn bb) {
    const size_t n = 10007;
    float *x = rand_f(n, -4, 4), *y = alloc_f(n);
    f(y, x, n);
    float *dx = dev_f(x, n), *dy = dev_f(NULL, n), *dxin = dev_f(x, n);
    fb(dy, dx, n);
    cmp(cname("%s forward", name), dy, y, n, TOL);
    fb(dx, dx, n);
    cmp(cname("%s forward in place", name), dx, y, n, TOL);
    const int in = takes_input(b);
    float *gy = rand_f(n, -1, 1), *gx0 = rand_f(n, -1, 1), *gx = copy_f(gx0, n);
    b(gx, gy, in ? x : y, n);
    float *dgy = dev_f(gy, n), *dgx = dev_f(gx0, n), *dgx2 = dev_f(gx0, n);
    bb(dgx, dgy, in ? dxin : dy, n);
    bb(dgx2, dgy, in ? dxin : dy, n);
    cmp(cname("%s backward", name), dgx, gx, n, TOL);
    same_bits(cname("%s backward twice", name), dgx, dgx2, n);
    dev_release();
    test_release();
}

// ReLU backward in place: g = y > 0 ? g : 0, y the forward output (with exact zeros)
static void backend_relu_mask(void) {
    const size_t n = 10007;
    float *x = rand_f(n, -4, 4), *y = alloc_f(n), *g = rand_f(n, -1, 1);
    relu_forward(y, x, n);
    float *dyd = dev_f(y, n), *dgd = dev_f(g, n);
    relu_mask(g, y, n);
    g_be->relu_mask(dgd, dyd, n);
    cmp("relu_mask", dgd, g, n, 0.0);
    dev_release();
    test_release();
}

static void backend_checks(void) {
    backend_activation("relu", relu_forward, g_be->relu_forward, relu_backward, g_be->relu_backward);
    backend_activation("sigmoid", sigmoid_forward, g_be->sigmoid_forward, sigmoid_backward, g_be->sigmoid_backward);
    backend_activation("tanh", tanh_forward, g_be->tanh_forward, tanh_backward, g_be->tanh_backward);
    backend_activation("gelu", gelu_forward, g_be->gelu_forward, gelu_backward, g_be->gelu_backward);
    backend_relu_mask();
}

int main(int argc, char **argv) { return test_main(argc, argv, "test_activation", 99, cpu_checks, backend_checks); }
