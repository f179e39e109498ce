// Helpers shared by the kernel unit tests: a seeded RNG, buffers, closeness checks and central
// finite-difference gradient checks. Each test counts failures and exits non-zero.
#pragma once
#include <math.h>
#include <omp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int g_failures = 0;

#if defined(__GNUC__)
#pragma GCC diagnostic ignored "-Wunused-function"
#endif

// ---- RNG (splitmix64) -----------------------------------------------------------------------
static uint64_t g_rng = 0x9E3779B97F4A7C15ull;
static void rng_seed(uint64_t s) { g_rng = s; }
static uint64_t rng_u64(void) {
    uint64_t z = (g_rng += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
static float rng_uniform(float lo, float hi) {  // [lo, hi)
    return lo + (hi - lo) * (float)((rng_u64() >> 40) * (1.0 / 16777216.0));
}
static int rng_int(int n) { return (int)(rng_u64() % (uint64_t)n); }

// ---- buffers --------------------------------------------------------------------------------
// Every buffer a test takes from here lives until test_release(), which each case calls when
// it is done with them, so cases need no free lists.
static void **g_bufs = NULL;
static size_t g_nbufs = 0, g_cap_bufs = 0;

static void *test_alloc(size_t bytes) {
    void *p = malloc(bytes ? bytes : 1);
    if (p && g_nbufs == g_cap_bufs) {
        g_cap_bufs = g_cap_bufs ? 2 * g_cap_bufs : 64;
        g_bufs = (void **)realloc(g_bufs, sizeof(void *) * g_cap_bufs);
    }
    if (!p || !g_bufs) {
        fprintf(stderr, "out of memory\n");
        exit(2);
    }
    g_bufs[g_nbufs++] = p;
    return p;
}
static void test_release(void) {
    for (size_t i = 0; i < g_nbufs; i++) free(g_bufs[i]);
    g_nbufs = 0;
}
static float *alloc_f(size_t n) { return (float *)test_alloc(sizeof(float) * n); }
static double *alloc_d(size_t n) { return (double *)test_alloc(sizeof(double) * n); }
static int *alloc_i(size_t n) { return (int *)test_alloc(sizeof(int) * n); }
static float *rand_f(size_t n, float lo, float hi) {
    float *p = alloc_f(n);
    for (size_t i = 0; i < n; i++) p[i] = rng_uniform(lo, hi);
    return p;
}
static float *copy_f(const float *src, size_t n) {
    float *p = alloc_f(n);
    memcpy(p, src, sizeof(float) * n);
    return p;
}
static float *zeros_f(size_t n) {
    float *p = alloc_f(n);
    memset(p, 0, sizeof(float) * n);
    return p;
}
static double *zeros_d(size_t n) {
    double *p = alloc_d(n);
    memset(p, 0, sizeof(double) * n);
    return p;
}
static void fill_nan(float *p, size_t n) {
    for (size_t i = 0; i < n; i++) p[i] = NAN;
}

// ---- checks ---------------------------------------------------------------------------------
static void check_true(int cond, const char *what) {
    if (!cond) {
        printf("FAIL: %s\n", what);
        g_failures++;
    }
}

// |got - want| <= atol + rtol * |want| elementwise; reports the worst element.
static int check_close_d(const char *name, const float *got, const double *want, size_t n, double rtol, double atol) {
    double worst = 0.0;
    size_t wi = 0;
    int bad = 0;
    for (size_t i = 0; i < n; i++) {
        const double err = fabs((double)got[i] - want[i]);
        const double lim = atol + rtol * fabs(want[i]);
        if (!(err <= lim)) {  // also catches NaN
            bad++;
            if (!(err / lim <= worst)) {
                worst = err / lim;
                wi = i;
            }
        }
    }
    if (bad) {
        printf("FAIL %s: %d/%zu elements off; worst [%zu] got %.8g want %.8g\n", name, bad, n, wi, (double)got[wi],
               want[wi]);
        g_failures++;
        return 0;
    }
    return 1;
}
static int check_close(const char *name, const float *got, const float *want, size_t n, double rtol, double atol) {
    double *w = (double *)calloc(n ? n : 1, sizeof(double));
    for (size_t i = 0; i < n; i++) w[i] = want[i];
    const int ok = check_close_d(name, got, w, n, rtol, atol);
    free(w);
    return ok;
}
static void check_scalar(const char *name, double got, double want, double rtol, double atol) {
    const double err = fabs(got - want);
    if (!(err <= atol + rtol * fabs(want))) {
        printf("FAIL %s: got %.10g want %.10g\n", name, got, want);
        g_failures++;
    }
}

static int first_argmax(const float *z, int n) {
    int am = 0;
    for (int j = 1; j < n; j++)
        if (z[j] > z[am]) am = j;
    return am;
}

static double max_abs(const float *p, size_t n) {
    double m = 0.0;
    for (size_t i = 0; i < n; i++) m = fabs(p[i]) > m ? fabs(p[i]) : m;
    return m;
}

// ---- finite differences ---------------------------------------------------------------------
// Scalar objective evaluated in double by running the forward kernel(s) under test.
typedef double (*loss_fn)(void *ctx);

// sum_i out[i] * r[i] in double: the usual probe objective, whose gradient w.r.t. out is r.
static double dot_d(const float *out, const float *r, size_t n) {
    double s = 0.0;
    for (size_t i = 0; i < n; i++) s += (double)out[i] * r[i];
    return s;
}

// Compares the analytic gradient `grad` of f w.r.t. `param` (n floats) with central
// differences at up to `max_checks` positions (all if n is smaller; else random ones).
// Tolerance: |num - ana| <= atol_frac * max|grad| + rtol * |num|.
static int fd_check(const char *name, float *param, const float *grad, size_t n, loss_fn f, void *ctx, float h,
                    double rtol, double atol_frac, int max_checks) {
    const double scale = max_abs(grad, n) > 1e-30 ? max_abs(grad, n) : 1.0;
    // the probes run the forward hundreds of times: do it on one thread (threaded forwards are
    // checked against references elsewhere), so a loaded machine does not stall every fork/join
    const int threads = omp_get_max_threads();
    omp_set_num_threads(1);
    int bad = 0, checked = 0;
    double worst = 0.0;
    size_t wi = 0;
    double wnum = 0, wana = 0;
    for (size_t c = 0; c < n && (int)c < max_checks; c++) {
        const size_t i = n <= (size_t)max_checks ? c : (size_t)(rng_u64() % n);
        const float orig = param[i];
        param[i] = orig + h;
        const double lp = f(ctx);
        param[i] = orig - h;
        const double lm = f(ctx);
        param[i] = orig;
        const double num = (lp - lm) / ((double)(orig + h) - (double)(orig - h));
        const double ana = grad[i];
        const double err = fabs(num - ana), lim = atol_frac * scale + rtol * fabs(num);
        checked++;
        if (!(err <= lim)) {
            bad++;
            if (!(err / lim <= worst)) {
                worst = err / lim;
                wi = i;
                wnum = num;
                wana = ana;
            }
        }
    }
    omp_set_num_threads(threads);
    if (bad) {
        printf("FAIL %s: %d/%d gradient entries off; worst [%zu] numeric %.8g analytic %.8g\n", name, bad, checked, wi,
               wnum, wana);
        g_failures++;
        return 0;
    }
    return 1;
}

static int test_finish(const char *name) {
    if (g_failures) {
        printf("%s: %d check(s) FAILED\n", name, g_failures);
        return 1;
    }
    printf("%s: all checks passed\n", name);
    return 0;
}

// Backward kernels accumulate: a run into gradients pre-filled with `prefill` must give
// prefill + (the run into zeroed gradients), up to rounding (kernels may add partial sums in
// several steps, so the tolerance scales with the largest increment).
static int check_accumulated(const char *name, const float *acc, const float *prefill, const float *fresh, size_t n) {
    int bad = 0;
    size_t wi = 0;
    const double scale = max_abs(fresh, n);
    for (size_t i = 0; i < n; i++) {
        const double want = (double)prefill[i] + fresh[i];
        const double lim = 2e-6 * fabs(prefill[i]) + 2e-5 * scale + 1e-30;
        if (!(fabs(acc[i] - want) <= lim)) {
            if (!bad) wi = i;
            bad++;
        }
    }
    if (bad) {
        printf("FAIL %s: %d/%zu elements not accumulated; e.g. [%zu] got %.8g want %.8g\n", name, bad, n, wi,
               (double)acc[wi], (double)prefill[wi] + fresh[wi]);
        g_failures++;
        return 0;
    }
    return 1;
}

// The three gradients of a layer's backward: of its input, its weights and its bias (NULL: not
// computed, not checked). n: their sizes.
typedef struct {
    float *x, *w, *b;
} grad3_t;
typedef struct {
    size_t x, w, b;
} grad3_sizes_t;

// check_accumulated for each gradient: `acc` ran into gradients pre-filled with `prefill`,
// `fresh` into zeroed ones. op and tag name the case.
static void check_accumulated3(const char *op, const char *tag, grad3_t acc, grad3_t prefill, grad3_t fresh,
                               grad3_sizes_t n) {
    const char *what[3] = {"dx", "dw", "dbias"};
    float *a[3] = {acc.x, acc.w, acc.b}, *p[3] = {prefill.x, prefill.w, prefill.b}, *f[3] = {fresh.x, fresh.w, fresh.b};
    const size_t len[3] = {n.x, n.w, n.b};
    char nm[320];
    for (int i = 0; i < 3; i++) {
        if (!a[i]) continue;
        snprintf(nm, sizeof nm, "%s %s accumulates %s", op, what[i], tag);
        check_accumulated(nm, a[i], p[i], f[i], len[i]);
    }
}

// A backward pass under test: adds its gradients into g's buffers that are not NULL.
typedef void (*backward_fn)(void *ctx, grad3_t g);

// bw into zeroed gradients g.
static void backward_zeroed(backward_fn bw, void *ctx, grad3_t g, grad3_sizes_t n) {
    memset(g.x, 0, sizeof(float) * n.x);
    memset(g.w, 0, sizeof(float) * n.w);
    memset(g.b, 0, sizeof(float) * n.b);
    bw(ctx, g);
}

// What every backward kernel promises, given what bw gave zeroed gradients (`fresh`): into
// gradients pre-filled with `prefill` (copied into the scratch `acc`) it adds the same
// increments, and asked for the input gradient alone, then for the weight and bias gradients
// alone (into the scratch `alone`), it gives the same bits.
static void check_backward_contract(const char *op, const char *tag, backward_fn bw, void *ctx, grad3_t fresh,
                                    grad3_t prefill, grad3_t acc, grad3_t alone, grad3_sizes_t n) {
    memcpy(acc.x, prefill.x, sizeof(float) * n.x);
    memcpy(acc.w, prefill.w, sizeof(float) * n.w);
    memcpy(acc.b, prefill.b, sizeof(float) * n.b);
    bw(ctx, acc);
    check_accumulated3(op, tag, acc, prefill, fresh, n);
    char nm[320];
    memset(alone.x, 0, sizeof(float) * n.x);
    bw(ctx, (grad3_t){alone.x, NULL, NULL});
    snprintf(nm, sizeof nm, "%s dx-only, same bits %s", op, tag);
    check_close(nm, alone.x, fresh.x, n.x, 0, 0);
    memset(alone.w, 0, sizeof(float) * n.w);
    memset(alone.b, 0, sizeof(float) * n.b);
    bw(ctx, (grad3_t){NULL, alone.w, alone.b});
    snprintf(nm, sizeof nm, "%s dw-only, same bits %s", op, tag);
    check_close(nm, alone.w, fresh.w, n.w, 0, 0);
    snprintf(nm, sizeof nm, "%s dbias-only, same bits %s", op, tag);
    check_close(nm, alone.b, fresh.b, n.b, 0, 0);
}

// f(transa, transb) for the four cases of a GEMM: NN, NT, TN, TT.
static void for_each_transpose(void (*f)(char transa, char transb)) {
    const char ops[2] = {'N', 'T'};
    for (int a = 0; a < 2; a++)
        for (int b = 0; b < 2; b++) f(ops[a], ops[b]);
}
