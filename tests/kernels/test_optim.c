// Optimizers: hand-computed PyTorch steps (first-step momentum buffer, dampening, Nesterov,
// coupled vs decoupled weight decay, bias correction) and multi-step runs on a large buffer
// against a double re-implementation of torch.optim's update rules; then every backend against
// the CPU kernels (tests/kernels/backends.h).
#include "backends.h"
#include "kernels/optim.h"

// Two SGD steps from p = 1 with gradients 0.5 then -0.2, lr 0.1, momentum 0.9, computed by hand.
static void sgd_hand(void) {
    static const struct {
        const char *name;
        double dampening, weight_decay;
        int nesterov;
        double buf[2], p[2];  // the momentum buffer and the parameter after steps 1 and 2
    } cases[] = {
        // d1 = 0.51, buf1 = d1 (first step), p1 = 0.949;
        // d2 = -0.2 + 0.01 * 0.949 = -0.19051, buf2 = 0.9 * 0.51 + d2 = 0.26849, p2 = 0.922151
        {"sgd", 0.0, 0.01, 0, {0.51, 0.26849}, {0.949, 0.922151}},
        // Nesterov: p1 = 1 - 0.1 * (0.51 + 0.9 * 0.51) = 0.9031;
        //   d2 = -0.190969, buf2 = 0.268031, p2 = 0.9031 - 0.1 * (d2 + 0.9 * buf2) = 0.89807411
        {"sgd nesterov", 0.0, 0.01, 1, {0.51, 0.268031}, {0.9031, 0.89807411}},
        // dampening 0.5 (not applied on the first step): buf1 = 0.5, p1 = 0.95;
        //   buf2 = 0.9 * 0.5 + 0.5 * (-0.2) = 0.35, p2 = 0.915
        {"sgd dampening", 0.5, 0.0, 0, {0.5, 0.35}, {0.95, 0.915}},
    };
    const float g[2] = {0.5f, -0.2f};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        float p = 1.0f, buf = 123.0f;  // the first step overwrites the buffer
        for (int step = 1; step <= 2; step++) {
            char nm[64];
            sgd_step(&p, &g[step - 1], &buf, 1, 0.1, 0.9, cases[i].dampening, cases[i].weight_decay, cases[i].nesterov,
                     step);
            snprintf(nm, sizeof nm, "%s step%d buf", cases[i].name, step);
            check_scalar(nm, buf, cases[i].buf[step - 1], 1e-6, 0);
            snprintf(nm, sizeof nm, "%s step%d p", cases[i].name, step);
            check_scalar(nm, p, cases[i].p[step - 1], 1e-6, 0);
        }
    }
    // plain SGD, no momentum buffer
    float p = 1.0f;
    sgd_step(&p, &g[0], NULL, 1, 0.1, 0.0, 0.0, 0.0, 0, 5);
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
static void ref_sgd(double *p, double *buf, const float *g, size_t n, double lr, double mom, double damp, double wd,
                    int nesterov, int step) {
    for (size_t i = 0; i < n; i++) {
        double d = g[i] + wd * p[i];
        if (mom != 0) {
            buf[i] = step == 1 ? d : mom * buf[i] + (1 - damp) * d;
            d = nesterov ? d + mom * buf[i] : buf[i];
        }
        p[i] -= lr * d;
    }
}
static void ref_adam(double *p, double *m, double *v, const float *g, size_t n, double lr, double b1, double b2,
                     double eps, double wd, int decoupled, int step) {
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
    const char *names[] = {"sgd", "sgd nesterov", "adam", "adamw"};
    float *p = rand_f(n, -1, 1), *s1 = zeros_f(n), *s2 = zeros_f(n);
    double *pd = alloc_d(n), *d1 = zeros_d(n), *d2 = zeros_d(n);
    for (size_t i = 0; i < n; i++) pd[i] = p[i];
    for (int step = 1; step <= 6; step++) {
        float *g = rand_f(n, -1, 1);
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
    test_release();
}

static void cpu_checks(void) {
    sgd_hand();
    adam_hand();
    for (int w = 0; w < 4; w++) multi_step(w);
}

// ---- every backend against the CPU kernels --------------------------------------------------
static void backend_sgd(double momentum, double dampening, double wd, int nesterov) {
    char tag[96];
    snprintf(tag, sizeof tag, "mom %.2g damp %.2g wd %.2g%s", momentum, dampening, wd, nesterov ? " nesterov" : "");
    const size_t n = 5000;
    float *p = rand_f(n, -1, 1), *buf = zeros_f(n);
    float *dp = dev_f(p, n), *dbuf = dev_f(buf, n), *dg = dev_f(NULL, n);
    for (int step = 1; step <= 3; step++) {
        float *g = rand_f(n, -1, 1);
        dev_set(dg, g, n);
        sgd_step(p, g, momentum != 0.0 ? buf : NULL, n, 0.05, momentum, dampening, wd, nesterov, step);
        g_be->sgd_step(dp, dg, momentum != 0.0 ? dbuf : NULL, n, 0.05, momentum, dampening, wd, nesterov, step);
    }
    cmp(cname("sgd params after 3 steps %s", tag), dp, p, n, TOL);
    if (momentum != 0.0) cmp(cname("sgd momentum buffer %s", tag), dbuf, buf, n, TOL);
    dev_release();
    test_release();
}

static void backend_adam(int decoupled) {
    const char *tag = decoupled ? "adamw" : "adam";
    const size_t n = 5000;
    float *p = rand_f(n, -1, 1), *m = zeros_f(n), *v = zeros_f(n);
    float *dp = dev_f(p, n), *dm = dev_f(m, n), *dv = dev_f(v, n), *dg = dev_f(NULL, n);
    for (int step = 1; step <= 3; step++) {
        float *g = rand_f(n, -1, 1);
        dev_set(dg, g, n);
        if (decoupled) {
            adamw_step(p, g, m, v, n, 1e-3, 0.9, 0.999, 1e-8, 0.01, step);
            g_be->adamw_step(dp, dg, dm, dv, n, 1e-3, 0.9, 0.999, 1e-8, 0.01, step);
        } else {
            adam_step(p, g, m, v, n, 1e-3, 0.9, 0.999, 1e-8, 2e-4, step);
            g_be->adam_step(dp, dg, dm, dv, n, 1e-3, 0.9, 0.999, 1e-8, 2e-4, step);
        }
    }
    cmp(cname("%s params after 3 steps", tag), dp, p, n, TOL);
    cmp(cname("%s exp_avg", tag), dm, m, n, TOL);
    cmp(cname("%s exp_avg_sq", tag), dv, v, n, TOL);
    dev_release();
    test_release();
}

static void backend_checks(void) {
    backend_sgd(0.0, 0.0, 0.01, 0);
    backend_sgd(0.9, 0.1, 1e-3, 0);
    backend_sgd(0.9, 0.0, 0.0, 1);
    backend_adam(0);
    backend_adam(1);
}

int main(int argc, char **argv) { return test_main(argc, argv, "test_optim", 8, cpu_checks, backend_checks); }
