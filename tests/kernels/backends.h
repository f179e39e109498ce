// Every op's test checks each backend of a list with the same code: the CPU kernels ("cpu"),
// the same kernels behind upload/download ("cpu-staged") and the CUDA kernels ("cuda"). The
// backends come from the command line (default: cpu cpu-staged):
//
//   test_kernel_<op> [cpu] [cpu-staged] [cuda]
//
// "cpu" also runs the op's own checks (double references, finite differences, accumulation).
// Each backend then runs the op through its table (kernels/backend.h) on backend copies of
// random inputs and must give what the CPU kernel gives on the host: bit for bit when the
// backend runs the CPU kernels, within a normalised error ||got - want|| / ||want|| otherwise.
// Backward calls start from prefilled gradients (accumulation) and run twice from the same
// prefill (same bits: deterministic). A backend that cannot run here (no CUDA device, or a build
// without CUDA) is reported SKIPPED, and a binary that skipped one exits 77, which ctest shows as
// skipped, never as passed.
#pragma once
#include <math.h>
#include <stdarg.h>

#include "exact_check.h"
#include "kernels/backend.h"
#include "kernels/device.h"
#include "test_common.h"
#ifdef SPKDDP_HAVE_CUDA
#include "kernels/cuda/context.h"
#endif

// Normalised-error bounds for backends that run other kernels than the CPU's: elementwise ops
// and row reductions, and the GEMM family (longer sums in another order than the CPU's GEMM).
#define TOL      1e-5
#define TOL_GEMM 1e-4

static const spk_backend_t *g_be;  // the backend being checked
static int g_be_exact;             // it runs the CPU kernels: results must be bitwise the CPU's
static int g_be_checks;
static double g_be_worst;

// ---- backend buffers ------------------------------------------------------------------------
static void *g_dev[256];
static int g_ndev;

static void *dev_alloc(size_t bytes) {
    if (g_ndev == (int)(sizeof g_dev / sizeof g_dev[0])) {
        fprintf(stderr, "backends.h: more than %d backend buffers in one check\n", g_ndev);
        exit(2);
    }
    return g_dev[g_ndev++] = g_be->alloc(bytes);  // zero-filled
}
// A backend copy of n host floats (host NULL: zeros).
static float *dev_f(const float *host, size_t n) {
    float *d = (float *)dev_alloc(sizeof(float) * n);
    if (host) g_be->upload(d, host, sizeof(float) * n);
    return d;
}
static int *dev_i(const int *host, size_t n) {
    int *d = (int *)dev_alloc(sizeof(int) * n);
    g_be->upload(d, host, sizeof(int) * n);
    return d;
}
static void dev_set(float *dev, const float *host, size_t n) { g_be->upload(dev, host, sizeof(float) * n); }
// A host copy of n backend floats (a test buffer: test_release frees it).
static float *dev_get(const float *dev, size_t n) {
    float *h = alloc_f(n);
    g_be->download(h, dev, sizeof(float) * n);
    return h;
}
static void dev_release(void) {
    for (int i = 0; i < g_ndev; i++) g_be->free(g_dev[i]);
    g_ndev = 0;
}

// ---- comparisons with the CPU's result ------------------------------------------------------
static double norm_err(const float *got, const float *want, size_t n) {
    double num = 0.0, den = 0.0;
    for (size_t i = 0; i < n; i++) {
        const double d = (double)got[i] - want[i];
        num += d * d;
        den += (double)want[i] * want[i];
    }
    if (num != num) return INFINITY;  // NaN somewhere
    return den > 0.0 ? sqrt(num / den) : sqrt(num);
}

// One check's verdict: exact backends must match bitwise (`same`), others within `tol`.
static void be_verdict(const char *name, int same, double err, double tol) {
    g_be_checks++;
    const int ok = g_be_exact ? same : err <= tol;
    if (!ok) {
        printf("FAIL [%s] %-48s %s %.3g (bound %.0e)\n", g_be->name, name,
               g_be_exact ? "differs from the CPU kernel, normalised error" : "normalised error", err,
               g_be_exact ? 0.0 : tol);
        g_failures++;
    } else if (!g_be_exact) {
        printf("  ok [%s] %-48s %.2e\n", g_be->name, name, err);
    }
    if (err > g_be_worst) g_be_worst = err;
}

// Backend buffer `dev` against the CPU kernel's host result `want`.
static void cmp(const char *name, const float *dev, const float *want, size_t n, double tol) {
    const float *got = dev_get(dev, n);
    be_verdict(name, memcmp(got, want, sizeof(float) * n) == 0, norm_err(got, want, n), tol);
}
static void cmp_scalar(const char *name, const float *dev, float want, double tol) { cmp(name, dev, &want, 1, tol); }
static void cmp_int(const char *name, const int *dev, int want) {
    int got;
    g_be->download(&got, dev, sizeof got);
    be_verdict(name, got == want, got == want ? 0.0 : INFINITY, 0.0);
}
// Two backend results of the same call from the same inputs must hold the same bits.
static void same_bits(const char *name, const float *d1, const float *d2, size_t n) {
    const float *a = dev_get(d1, n), *b = dev_get(d2, n);
    const int same = memcmp(a, b, sizeof(float) * n) == 0;
    g_be_checks++;
    if (!same) {
        printf("FAIL [%s] %-48s two runs differ\n", g_be->name, name);
        g_failures++;
    }
}

static char g_name[192];
// A check's name, formatted (valid until the next call).
__attribute__((format(printf, 1, 2))) static const char *cname(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(g_name, sizeof g_name, fmt, ap);
    va_end(ap);
    return g_name;
}

// The gradient outputs of a backward call under check (backward accumulates): random prefills,
// copied to the host for the CPU kernel and twice to the backend for two runs.
#define MAX_GRADS 4
typedef struct {
    int n;
    size_t len[MAX_GRADS];
    float *cpu[MAX_GRADS];   // host: the prefill, then the CPU kernel's result
    float *dev[MAX_GRADS];   // backend: the first run
    float *dev2[MAX_GRADS];  // backend: the second run, from the same prefill
} grads_t;

static grads_t grads_prefill(int n, const size_t *len) {
    grads_t g = {n, {0}, {0}, {0}, {0}};
    for (int i = 0; i < n; i++) {
        g.len[i] = len[i];
        g.cpu[i] = rand_f(len[i], -1, 1);
        g.dev[i] = dev_f(g.cpu[i], len[i]);
        g.dev2[i] = dev_f(g.cpu[i], len[i]);
    }
    return g;
}

// Two device bf16 buffers with the same bits.
static void same_bits_bf16(const char *name, const spk_bf16 *d1, const spk_bf16 *d2, size_t n) {
    spk_bf16 *a = (spk_bf16 *)test_alloc(n * sizeof(spk_bf16)), *b = (spk_bf16 *)test_alloc(n * sizeof(spk_bf16));
    g_be->download(a, d1, n * sizeof(spk_bf16));
    g_be->download(b, d2, n * sizeof(spk_bf16));
    g_be_checks++;
    if (memcmp(a, b, n * sizeof(spk_bf16)) != 0) {
        printf("FAIL [%s] %s\n", g_be->name, name);
        g_failures++;
    }
}

// The device's rounded values within one bf16 step of the CPU's, or within TOL of the largest
// of them: their float sums differ in the last bits, which can move a rounding, and near zero
// (finer steps) a difference within the float tolerance spans several.
static void cmp_bf16_step(const char *name, const spk_bf16 *dev, const spk_bf16 *want, size_t n) {
    spk_bf16 *got = (spk_bf16 *)test_alloc(n * sizeof(spk_bf16));
    g_be->download(got, dev, n * sizeof(spk_bf16));
    double scale = 0.0;
    for (size_t i = 0; i < n; i++) scale = fmax(scale, fabs(spk_bf16_to_f32(want[i])));
    size_t bad = 0;
    for (size_t i = 0; i < n; i++) {
        const int d = (int)got[i] - (int)want[i];
        const double diff = fabs((double)spk_bf16_to_f32(got[i]) - spk_bf16_to_f32(want[i]));
        bad += (d < -1 || d > 1) && diff > TOL * scale;
    }
    g_be_checks++;
    if (bad) {
        printf("FAIL [%s] %s: %zu of %zu values more than a bf16 step (or TOL of the largest) from the CPU's\n",
               g_be->name, name, bad, n);
        g_failures++;
    }
}

// After the CPU call and both backend runs: each output (checked as "<op> <names[i]> <tag>") is
// the CPU's within tol[i], and the second run has the first one's bits.
static void grads_check(const grads_t *g, const char *op, const char *tag, const char *const *names,
                        const double *tol) {
    for (int i = 0; i < g->n; i++) {
        cmp(cname("%s %s %s", op, names[i], tag), g->dev[i], g->cpu[i], g->len[i], tol[i]);
        same_bits(cname("%s %s twice %s", op, names[i], tag), g->dev[i], g->dev2[i], g->len[i]);
    }
}

// A layer's backward (backward_fn, tests/kernels/test_common.h) on the CPU (cpu, cpu_ctx) and on
// the backend (dev, dev_ctx), from the same random prefills of its dx, dw and dbias: the
// backend's within tolerance of the CPU's and the same bits twice, then its dw alone (dx and
// dbias NULL) the bits it had with them.
static void backend_backward_checks(const char *op, const char *tag, backward_fn cpu, void *cpu_ctx, backward_fn dev,
                                    void *dev_ctx, grad3_sizes_t n) {
    grads_t g = grads_prefill(3, (size_t[]){n.x, n.w, n.b});
    const float *gw0 = copy_f(g.cpu[1], n.w);
    cpu(cpu_ctx, (grad3_t){g.cpu[0], g.cpu[1], g.cpu[2]});
    dev(dev_ctx, (grad3_t){g.dev[0], g.dev[1], g.dev[2]});
    dev(dev_ctx, (grad3_t){g.dev2[0], g.dev2[1], g.dev2[2]});
    grads_check(&g, op, tag, (const char *[]){"dx", "dw", "dbias"}, (double[]){TOL_GEMM, TOL_GEMM, TOL});
    dev_set(g.dev2[1], gw0, n.w);
    dev(dev_ctx, (grad3_t){NULL, g.dev2[1], NULL});
    same_bits(cname("%s dw alone %s", op, tag), g.dev[1], g.dev2[1], n.w);
}

// An invariant-mode backward through an op's call context: dx (added to or written, as the op
// does) and its parameter gradients' exact sums dw and dbias (either may be empty), with dw_tmp
// of the weight's size as scratch.
typedef void exact_backward_fn(void *ctx, float *dx, float *dw_tmp, xsum_t dw, xsum_t dbias);

// A layer's exact backward on the CPU (cpu_ctx) and on the backend (dev_ctx) from zeroed dx:
// dx, and the sums rounded to floats, within tol of the CPU's (the bias's within TOL). nb = 0:
// no bias.
static void backend_exact_checks(const char *op, const char *tag, exact_backward_fn *f, void *cpu_ctx, void *dev_ctx,
                                 size_t nx, size_t nw, int nb, double tol) {
    float *hx = zeros_f(nx), *htmp = alloc_f(nw), *dx = dev_f(NULL, nx), *dtmp = dev_f(NULL, nw);
    xsum_t hw = host_sums((int64_t)nw), hb = nb ? host_sums(nb) : xsum_none();
    xsum_t xw = xsum_layout(dev_alloc(xsum_bytes((int64_t)nw)), (int64_t)nw),
           xb = nb ? xsum_layout(dev_alloc(xsum_bytes(nb)), nb) : xsum_none();
    f(cpu_ctx, hx, htmp, hw, hb);
    f(dev_ctx, dx, dtmp, xw, xb);
    cmp(cname("%s dx %s", op, tag), dx, hx, nx, tol);
    float *w = dev_f(NULL, nw);
    g_be->xsum_to_float(w, xw, (int64_t)nw);
    cmp(cname("%s dw %s", op, tag), w, sums_to_floats(hw, (int64_t)nw), nw, tol);
    if (!nb) return;
    float *b = dev_f(NULL, (size_t)nb);
    g_be->xsum_to_float(b, xb, nb);
    cmp(cname("%s dbias %s", op, tag), b, sums_to_floats(hb, nb), (size_t)nb, TOL);
}

// ---- the list of backends -------------------------------------------------------------------
// The CUDA backend on device 0, or NULL with the reason in `why` (no device: skipped) or with
// *failed set (a driver that cannot run this build, a device that does not start: a failure).
static const spk_backend_t *open_cuda(char *why, size_t cap, int *failed) {
    const int count = spk_device_count(why, cap);
    *failed = count < 0;
    if (count <= 0) return NULL;
#ifdef SPKDDP_HAVE_CUDA
    if (spk_cuda_init(0) == 0) {
        char desc[256];
        spk_device_describe(0, desc, sizeof desc);
        printf("cuda: device 0: %s\n", desc);
        return spk_backend_cuda();
    }
#endif
    snprintf(why, cap, "spk_cuda_init(0) could not set up device 0");
    *failed = 1;
    return NULL;
}

static void close_backend(const spk_backend_t *be) {
#ifdef SPKDDP_HAVE_CUDA
    if (be == spk_backend_cuda()) spk_cuda_shutdown();
#else
    (void)be;
#endif
}

static void run_backend(const spk_backend_t *be, uint64_t seed, void (*checks)(void)) {
    g_be = be;
    g_be_exact = be == &spk_backend_cpu || be == &spk_backend_cpu_staged;
    g_be_checks = 0;
    g_be_worst = 0.0;
    const int failures = g_failures;
    rng_seed(seed);  // every backend sees the same inputs
    checks();
    dev_release();
    test_release();
    if (g_be_exact)
        printf("[%s] %d checks%s\n", be->name, g_be_checks,
               g_failures == failures ? ", all bitwise equal to the CPU kernels" : "");
    else
        printf("[%s] %d checks, worst normalised error %.2e\n", be->name, g_be_checks, g_be_worst);
}

// The test's main: `cpu_checks` (may be NULL) run for "cpu", `backend_checks` for every
// backend named on the command line. Exit 0 passed, 1 failed, 77 skipped.
static int test_main(int argc, char **argv, const char *name, uint64_t seed, void (*cpu_checks)(void),
                     void (*backend_checks)(void)) {
    static char *defaults[] = {"cpu", "cpu-staged"};
    char **list = argc > 1 ? argv + 1 : defaults;
    const int n = argc > 1 ? argc - 1 : 2;
    int skipped = 0;
    for (int i = 0; i < n; i++) {
        const spk_backend_t *be = NULL;
        if (strcmp(list[i], "cpu") == 0) {
            be = &spk_backend_cpu;
            if (cpu_checks) {
                rng_seed(seed);
                cpu_checks();
                test_release();
            }
        } else if (strcmp(list[i], "cpu-staged") == 0) {
            be = &spk_backend_cpu_staged;
        } else if (strcmp(list[i], "cuda") == 0) {
            char why[256] = "";
            int failed;
            be = open_cuda(why, sizeof why, &failed);
            if (!be) {
                printf("%s [cuda]: %s%s\n", name, failed ? "FAIL: " : "SKIPPED: ", why);
                g_failures += failed;
                skipped += !failed;
                continue;
            }
        } else {
            fprintf(stderr, "usage: %s [cpu] [cpu-staged] [cuda]\n", argv[0]);
            return 2;
        }
        run_backend(be, seed + 1, backend_checks);
        close_backend(be);
    }
    if (skipped && !g_failures) {
        printf("%s: SKIPPED (see above)\n", name);
        return 77;
    }
    return test_finish(name);
}

// The main of a GPU-only test (tests/gpu): `checks` on the CUDA backend alone; skipped (exit
// 77) without a device, and so in a build without CUDA, where `checks` may be empty.
static inline int test_main_cuda(char *argv0, const char *name, uint64_t seed, void (*checks)(void)) {
    char *cuda_only[] = {argv0, "cuda"};
    return test_main(2, cuda_only, name, seed, NULL, checks);
}
