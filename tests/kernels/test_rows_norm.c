// Row L2 normalisation: norm and z vs a double reference (also rows under eps and a zero row),
// in place, finite-difference dx (both sides of the clamp), dx vs a double reference,
// accumulation, a row's bits the same within any batch and on any thread count; then every
// backend against the CPU kernels (tests/kernels/backends.h).
#include "backends.h"
#include "kernels/rows_norm.h"

typedef struct {
    int B, E;
    float eps;
    float *x, *z, *norm, *r;
} rn_ctx;

static double rn_loss(void *p) {
    rn_ctx *c = (rn_ctx *)p;
    rows_normalize_forward(c->z, c->norm, c->x, c->B, c->E, c->eps);
    return dot_d(c->z, c->r, (size_t)c->B * c->E);
}

// Random rows of E floats in [-1, 1); for tiny > 0, row 1 scaled to a norm of tiny (under eps
// when tiny < eps) and row 2 zero, when there are that many rows (finite differences across the
// clamp of these would step over the kink: tiny = 0 for those).
static float *rows_input(int B, int E, float tiny) {
    float *x = rand_f((size_t)B * E, -1, 1);
    if (tiny <= 0.0f) return x;
    if (B > 1) {
        double ss = 0;
        for (int j = 0; j < E; j++) ss += (double)x[E + j] * x[E + j];
        for (int j = 0; j < E; j++) x[E + j] = (float)(x[E + j] * tiny / sqrt(ss));
    }
    if (B > 2)
        for (int j = 0; j < E; j++) x[2 * E + j] = 0.0f;
    return x;
}

static void run_case(int B, int E, float eps, float tiny, int fd_checks) {
    char nm[128];
    const size_t n = (size_t)B * E;
    rn_ctx c = {B, E, eps, rows_input(B, E, tiny), alloc_f(n), alloc_f(B), rand_f(n, -1, 1)};
    rows_normalize_forward(c.z, c.norm, c.x, B, E, eps);
    double *wn = alloc_d(B), *wz = alloc_d(n), *wdx = alloc_d(n);
    for (int i = 0; i < B; i++) {
        const float *xi = c.x + (size_t)i * E, *ri = c.r + (size_t)i * E;
        double ss = 0, zr = 0;
        for (int j = 0; j < E; j++) ss += (double)xi[j] * xi[j];
        wn[i] = sqrt(ss);
        const double d = wn[i] < eps ? eps : wn[i];
        for (int j = 0; j < E; j++) {
            wz[(size_t)i * E + j] = xi[j] / d;
            zr += wz[(size_t)i * E + j] * ri[j];
        }
        for (int j = 0; j < E; j++)
            wdx[(size_t)i * E + j] = wn[i] < eps ? ri[j] / eps : (ri[j] - wz[(size_t)i * E + j] * zr) / wn[i];
    }
    snprintf(nm, sizeof nm, "rows_normalize norm B%d E%d eps %g", B, E, eps);
    check_close_d(nm, c.norm, wn, B, 2e-7, 1e-30);
    snprintf(nm, sizeof nm, "rows_normalize z B%d E%d eps %g", B, E, eps);
    check_close_d(nm, c.z, wz, n, 4e-7, 1e-30);
    float *xin = copy_f(c.x, n), *nin = alloc_f(B);
    rows_normalize_forward(xin, nin, xin, B, E, eps);
    snprintf(nm, sizeof nm, "rows_normalize in place B%d E%d", B, E);
    check_close(nm, xin, c.z, n, 0, 0);

    float *dx = zeros_f(n);
    rows_normalize_backward(dx, c.r, c.z, c.norm, B, E, eps);
    double scale = 0;
    for (size_t i = 0; i < n; i++) scale = fabs(wdx[i]) > scale ? fabs(wdx[i]) : scale;
    snprintf(nm, sizeof nm, "rows_normalize dx vs reference B%d E%d eps %g", B, E, eps);
    check_close_d(nm, dx, wdx, n, 1e-5, 1e-6 * scale);
    if (fd_checks) {
        snprintf(nm, sizeof nm, "rows_normalize fd dx B%d E%d eps %g", B, E, eps);
        fd_check(nm, c.x, dx, n, rn_loss, &c, 1e-3f, 5e-3, 1e-3, fd_checks);
        rn_loss(&c);
    }
    float *pre = rand_f(n, -1, 1), *acc = copy_f(pre, n);
    rows_normalize_backward(acc, c.r, c.z, c.norm, B, E, eps);
    snprintf(nm, sizeof nm, "rows_normalize dx accumulates B%d E%d", B, E);
    check_accumulated(nm, acc, pre, dx, n);

    // the rows from the second on, as a batch of their own, on one thread: the same bits
    if (B > 1) {
        const size_t off = (size_t)E;
        float *z1 = alloc_f(n - off), *n1 = alloc_f(B - 1), *dx1 = zeros_f(n - off);
        const int threads = omp_get_max_threads();
        omp_set_num_threads(1);
        rows_normalize_forward(z1, n1, c.x + off, B - 1, E, eps);
        rows_normalize_backward(dx1, c.r + off, z1, n1, B - 1, E, eps);
        omp_set_num_threads(threads);
        snprintf(nm, sizeof nm, "rows_normalize z of a sub-batch, one thread, same bits B%d E%d", B, E);
        check_close(nm, z1, c.z + off, n - off, 0, 0);
        snprintf(nm, sizeof nm, "rows_normalize norm of a sub-batch, same bits B%d E%d", B, E);
        check_close(nm, n1, c.norm + 1, B - 1, 0, 0);
        snprintf(nm, sizeof nm, "rows_normalize dx of a sub-batch, same bits B%d E%d", B, E);
        check_close(nm, dx1, dx + off, n - off, 0, 0);
    }
    test_release();
}

static void cpu_checks(void) {
    run_case(5, 7, 1e-12f, 1e-14f, 0);      // a row under eps and a zero row
    run_case(4, 33, 0.5f, 0.3f, 132);       // the same under a large eps, with finite differences
    run_case(6, 40, 1e-12f, 0.0f, 240);     // plain rows
    run_case(3, 300, 1e-12f, 1e-3f, 0);     // a small but unclamped row
    run_case(1000, 16, 1e-12f, 1e-20f, 0);  // many short rows: threaded
    run_case(600, 256, 1e-12f, 0.0f, 100);  // the DINO head's last-layer shape, threaded
    run_case(2, 70001, 1e-12f, 2.0f, 0);    // few long rows
}

// ---- every backend against the CPU kernels --------------------------------------------------
static void backend_case(int B, int E, float eps) {
    const size_t n = (size_t)B * E;
    float *x = rows_input(B, E, eps * 0.5f), *z = alloc_f(n), *norm = alloc_f(B);
    rows_normalize_forward(z, norm, x, B, E, eps);
    float *dx = dev_f(x, n), *dz = dev_f(NULL, n), *dnorm = dev_f(NULL, B);
    g_be->rows_normalize_forward(dz, dnorm, dx, B, E, eps);
    cmp(cname("rows_normalize z B%d E%d", B, E), dz, z, n, TOL);
    cmp(cname("rows_normalize norm B%d E%d", B, E), dnorm, norm, B, TOL);
    float *dxin = dev_f(x, n), *dnorm2 = dev_f(NULL, B);
    g_be->rows_normalize_forward(dxin, dnorm2, dxin, B, E, eps);
    same_bits(cname("rows_normalize in place B%d E%d", B, E), dxin, dz, n);
    if (B > 1) {  // the rows from the second on as a batch of their own: the same bits
        float *dz1 = dev_f(NULL, n - E), *dn1 = dev_f(NULL, B - 1);
        g_be->rows_normalize_forward(dz1, dn1, dx + E, B - 1, E, eps);
        same_bits(cname("rows_normalize z of a sub-batch B%d E%d", B, E), dz1, dz + E, n - E);
    }

    float *gz = rand_f(n, -1, 1), *dgz = dev_f(gz, n);
    grads_t g = grads_prefill(1, &n);
    rows_normalize_backward(g.cpu[0], gz, z, norm, B, E, eps);
    g_be->rows_normalize_backward(g.dev[0], dgz, dz, dnorm, B, E, eps);
    g_be->rows_normalize_backward(g.dev2[0], dgz, dz, dnorm, B, E, eps);
    char tag[32];
    snprintf(tag, sizeof tag, "B%d E%d", B, E);
    grads_check(&g, "rows_normalize", tag, (const char *[]){"dx"}, (double[]){TOL});
    dev_release();
    test_release();
}

static void backend_checks(void) {
    backend_case(37, 300, 1e-12f);  // a row under eps, a zero row
    backend_case(1001, 7, 1e-12f);  // rows sharing blocks
    backend_case(70, 100, 0.5f);
    backend_case(300, 256, 1e-12f);  // the DINO head's last layer
    backend_case(3, 70001, 1e-12f);  // few long rows
}

int main(int argc, char **argv) { return test_main(argc, argv, "test_rows_norm", 41, cpu_checks, backend_checks); }
