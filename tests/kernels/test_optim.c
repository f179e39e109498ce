// Optimizers: hand-computed PyTorch steps (first-step momentum buffer, dampening, Nesterov,
// coupled vs decoupled weight decay, bias correction) and multi-step runs on a large buffer
// against a double re-implementation of torch.optim's update rules.
#include "kernels/optim.h"
#include "test_common.h"

static void sgd_hand(void) {
    // lr 0.1, momentum 0.9, wd 0.01, p0 = 1, grads 0.5 then -0.2
    //   d1 = 0.51, buf1 = d1 (first step), p1 = 0.949
    //   d2 = -0.2 + 0.01 * 0.949 = -0.19051, buf2 = 0.9 * 0.51 + d2 = 0.26849, p2 = 0.922151
    float p = 1.0f, buf = 123.0f, g1 = 0.5f, g2 = -0.2f;
    sgd_step(&p, &g1, &buf, 1, 0.1, 0.9, 0.0, 0.01, 0, 1);
    check_scalar("sgd step1 buf = d", buf, 0.51, 1e-6, 0);
    check_scalar("sgd step1 p", p, 0.949, 1e-6, 0);
    sgd_step(&p, &g2, &buf, 1, 0.1, 0.9, 0.0, 0.01, 0, 2);
    check_scalar("sgd step2 buf", buf, 0.26849, 1e-6, 0);
    check_scalar("sgd step2 p", p, 0.922151, 1e-6, 0);
    // Nesterov: p1 = 1 - 0.1 * (0.51 + 0.9 * 0.51) = 0.9031;
    //   d2 = -0.190969, buf2 = 0.268031, p2 = 0.9031 - 0.1 * (d2 + 0.9 * buf2) = 0.89807411
    p = 1.0f;
    buf = -7.0f;
    sgd_step(&p, &g1, &buf, 1, 0.1, 0.9, 0.0, 0.01, 1, 1);
    check_scalar("sgd nesterov step1 p", p, 0.9031, 1e-6, 0);
    sgd_step(&p, &g2, &buf, 1, 0.1, 0.9, 0.0, 0.01, 1, 2);
    check_scalar("sgd nesterov step2 buf", buf, 0.268031, 1e-6, 0);
    check_scalar("sgd nesterov step2 p", p, 0.89807411, 1e-6, 0);
    // dampening 0.5 (not applied on the first step): buf1 = 0.5, p1 = 0.95;
    //   buf2 = 0.9 * 0.5 + 0.5 * (-0.2) = 0.35, p2 = 0.915
    p = 1.0f;
    sgd_step(&p, &g1, &buf, 1, 0.1, 0.9, 0.5, 0.0, 0, 1);
    check_scalar("sgd dampening step1 buf", buf, 0.5, 1e-6, 0);
    sgd_step(&p, &g2, &buf, 1, 0.1, 0.9, 0.5, 0.0, 0, 2);
    check_scalar("sgd dampening step2 buf", buf, 0.35, 1e-6, 0);
    check_scalar("sgd dampening step2 p", p, 0.915, 1e-6, 0);
    // plain SGD, no momentum buffer
    p = 1.0f;
    sgd_step(&p, &g1, NULL, 1, 0.1, 0.0, 0.0, 0.0, 0, 5);
    check_scalar("sgd plain p", p, 0.95, 1e-7, 0);
}

static void adam_hand(void) {
    // Adam lr 0.01, betas (0.9, 0.999), eps 1e-8, wd 0.1 (coupled), p0 = 1, g = 0.5:
    //   g' = 0.6, m = 0.06, v = 0.00036, step = 0.01 / 0.1, denom = 0.6 / 1 + 1e-8 -> p = 0.99
    float p = 1.0f, m = 0.0f, v = 0.0f, g = 0.5f;
    adam_step(&p, &g, &m, &v, 1, 0.01, 0.9, 0.999, 1e-8, 0.1, 1);
    check_scalar("adam step1 m", m, 0.06, 1e-6, 0);
    check_scalar("adam step1 v", v, 0.00036, 1e-5, 0);
    check_scalar("adam step1 p", p, 0.99, 1e-6, 0);
    // AdamW: p = 1 * (1 - 0.01 * 0.1) = 0.999, m = 0.05, v = 0.00025, denom 0.5 -> p = 0.989
    p = 1.0f;
    m = v = 0.0f;
    adamw_step(&p, &g, &m, &v, 1, 0.01, 0.9, 0.999, 1e-8, 0.1, 1);
    check_scalar("adamw step1 m", m, 0.05, 1e-6, 0);
    check_scalar("adamw step1 p", p, 0.989, 1e-6, 0);
}

// double re-implementation of torch.optim (single tensor, for-loop version)
static void ref_sgd(double* p, double* buf, const float* g, size_t n, double lr, double mom,
                    double damp, double wd, int nesterov, int step) {
    for (size_t i = 0; i < n; i++) {
        double d = g[i] + wd * p[i];
        if (mom != 0) {
            buf[i] = step == 1 ? d : mom * buf[i] + (1 - damp) * d;
            d = nesterov ? d + mom * buf[i] : buf[i];
        }
        p[i] -= lr * d;
    }
}
static void ref_adam(double* p, double* m, double* v, const float* g, size_t n, double lr,
                     double b1, double b2, double eps, double wd, int decoupled, int step) {
    const double bc1 = 1 - pow(b1, step), bc2 = 1 - pow(b2, step);
    for (size_t i = 0; i < n; i++) {
        double gi = g[i];
        if (decoupled)
            p[i] *= 1 - lr * wd;
        else
            gi += wd * p[i];
        m[i] = b1 * m[i] + (1 - b1) * gi;
        v[i] = b2 * v[i] + (1 - b2) * gi * gi;
        p[i] -= lr / bc1 * m[i] / (sqrt(v[i]) / sqrt(bc2) + eps);
    }
}

static void multi_step(int which) {
    const size_t n = 100003;
    const char* names[] = {"sgd", "sgd nesterov", "adam", "adamw"};
    float *p = rand_f(n, -1, 1), *s1 = zeros_f(n), *s2 = zeros_f(n);
    double *pd = malloc(sizeof(double) * n), *d1 = calloc(n, sizeof(double)),
           *d2 = calloc(n, sizeof(double));
    for (size_t i = 0; i < n; i++) pd[i] = p[i];
    for (int step = 1; step <= 6; step++) {
        float* g = rand_f(n, -1, 1);
        switch (which) {
            case 0:
                sgd_step(p, g, s1, n, 0.05, 0.9, 0.1, 1e-3, 0, step);
                ref_sgd(pd, d1, g, n, 0.05, 0.9, 0.1, 1e-3, 0, step);
                break;
            case 1:
                sgd_step(p, g, s1, n, 0.05, 0.9, 0.0, 1e-3, 1, step);
                ref_sgd(pd, d1, g, n, 0.05, 0.9, 0.0, 1e-3, 1, step);
                break;
            case 2:
                adam_step(p, g, s1, s2, n, 1e-3, 0.9, 0.999, 1e-8, 0.01, step);
                ref_adam(pd, d1, d2, g, n, 1e-3, 0.9, 0.999, 1e-8, 0.01, 0, step);
                break;
            default:
                adamw_step(p, g, s1, s2, n, 1e-3, 0.9, 0.999, 1e-8, 0.05, step);
                ref_adam(pd, d1, d2, g, n, 1e-3, 0.9, 0.999, 1e-8, 0.05, 1, step);
        }
        free(g);
    }
    char nm[64];
    snprintf(nm, sizeof nm, "%s 6 steps params", names[which]);
    check_close_d(nm, p, pd, n, 1e-5, 1e-6);
    snprintf(nm, sizeof nm, "%s 6 steps state", names[which]);
    check_close_d(nm, s1, d1, n, 1e-5, 1e-6);
    if (which >= 2) {
        snprintf(nm, sizeof nm, "%s 6 steps second moment", names[which]);
        check_close_d(nm, s2, d2, n, 1e-5, 1e-9);
    }
    free(p);
    free(s1);
    free(s2);
    free(pd);
    free(d1);
    free(d2);
}

int main(void) {
    rng_seed(8);
    sgd_hand();
    adam_hand();
    for (int w = 0; w < 4; w++) multi_step(w);
    return test_finish("test_optim");
}
