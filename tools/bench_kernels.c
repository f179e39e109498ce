// Convolution throughput for the ECAPA-TDNN shapes (B = 32, T = 200, C = 512): the
// spk_kernels conv1d path on each compiled-in GEMM backend, and (built with SPK_BENCH_DNNL)
// oneDNN's own convolution primitives on the same data (input pre-padded by reflection, then
// an unpadded dilated convolution; plain ncw layouts). Runs interleave the candidates and
// report the best of several repetitions, since shared machines are noisy.
//   usage: bench_kernels [reps [shape-filter]]   e.g. bench_kernels 9 1536
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kernels/activation.h"
#include "kernels/batchnorm.h"
#include "kernels/conv1d.h"
#include "kernels/base/clock.h"
#include "kernels/gemm.h"
#include "kernels/pooling.h"

#ifdef SPK_BENCH_DNNL
#include <oneapi/dnnl/dnnl.h>
#endif

static float* rnd(size_t n) {
    float* p = (float*)malloc(sizeof(float) * n);
    if (!p) {
        fprintf(stderr, "out of memory\n");
        exit(1);
    }
    unsigned s = 12345;
    for (size_t i = 0; i < n; i++) {
        s = s * 1664525u + 1013904223u;
        p[i] = (float)(s >> 8) / 16777216.0f - 0.5f;
    }
    return p;
}

typedef struct {
    const char* name;
    int cin, cout, k, d, need_dx, count;  // count: occurrences in ECAPA-TDNN (C = 512)
} shape;

#ifdef SPK_BENCH_DNNL
#define CK(x)                                                                            \
    do {                                                                                 \
        dnnl_status_t s_ = (x);                                                          \
        if (s_ != dnnl_success) {                                                        \
            fprintf(stderr, "%s:%d: %s failed (%d)\n", __FILE__, __LINE__, #x, (int)s_); \
            exit(1);                                                                     \
        }                                                                                \
    } while (0)

typedef struct {
    dnnl_engine_t eng;
    dnnl_stream_t st;
    dnnl_primitive_t fwd, bwd_data, bwd_w;
    dnnl_memory_t m[12];
    dnnl_exec_arg_t fa[4], da[3], wa[4];
    float* xpad;  // (B, Cin, T + 2p)
} dnnl_conv;

static dnnl_memory_t mem(dnnl_conv* c, const dnnl_memory_desc_t* md, void* h) {
    dnnl_memory_t m;
    CK(dnnl_memory_create(&m, md, c->eng, h));
    return m;
}

static void dnnl_conv_init(dnnl_conv* c, int B, int Cin, int Cout, int T, int K, int d, float* y,
                           const float* w, const float* bias, float* dx, float* dw, float* db,
                           const float* dy) {
    const int p = d * (K - 1) / 2;
    CK(dnnl_engine_create(&c->eng, dnnl_cpu, 0));
    CK(dnnl_stream_create(&c->st, c->eng, dnnl_stream_default_flags));
    dnnl_dims_t sd = {B, Cin, T + 2 * p}, wd = {Cout, Cin, K}, bd = {Cout}, dd = {B, Cout, T};
    dnnl_dims_t str = {1}, dil = {d - 1}, pad = {0};
    dnnl_memory_desc_t smd, wmd, bmd, dmd;
    CK(dnnl_memory_desc_init_by_tag(&smd, 3, sd, dnnl_f32, dnnl_ncw));
    CK(dnnl_memory_desc_init_by_tag(&wmd, 3, wd, dnnl_f32, dnnl_oiw));
    CK(dnnl_memory_desc_init_by_tag(&bmd, 1, bd, dnnl_f32, dnnl_x));
    CK(dnnl_memory_desc_init_by_tag(&dmd, 3, dd, dnnl_f32, dnnl_ncw));
    dnnl_convolution_desc_t fd, bdd, bwd;
    dnnl_primitive_desc_t fpd, dpd, wpd;
    CK(dnnl_dilated_convolution_forward_desc_init(&fd, dnnl_forward_training,
                                                  dnnl_convolution_direct, &smd, &wmd, &bmd, &dmd,
                                                  str, dil, pad, pad));
    CK(dnnl_primitive_desc_create(&fpd, &fd, NULL, c->eng, NULL));
    CK(dnnl_dilated_convolution_backward_data_desc_init(&bdd, dnnl_convolution_direct, &smd, &wmd,
                                                        &dmd, str, dil, pad, pad));
    CK(dnnl_primitive_desc_create(&dpd, &bdd, NULL, c->eng, fpd));
    CK(dnnl_dilated_convolution_backward_weights_desc_init(&bwd, dnnl_convolution_direct, &smd,
                                                           &wmd, &bmd, &dmd, str, dil, pad, pad));
    CK(dnnl_primitive_desc_create(&wpd, &bwd, NULL, c->eng, fpd));
    CK(dnnl_primitive_create(&c->fwd, fpd));
    CK(dnnl_primitive_create(&c->bwd_data, dpd));
    CK(dnnl_primitive_create(&c->bwd_w, wpd));
    c->xpad = rnd((size_t)B * Cin * (T + 2 * p));
    float* dxpad = rnd((size_t)B * Cin * (T + 2 * p));
    (void)dx;
    c->fa[0] = (dnnl_exec_arg_t){DNNL_ARG_SRC, mem(c, &smd, c->xpad)};
    c->fa[1] = (dnnl_exec_arg_t){DNNL_ARG_WEIGHTS, mem(c, &wmd, (void*)w)};
    c->fa[2] = (dnnl_exec_arg_t){DNNL_ARG_BIAS, mem(c, &bmd, (void*)bias)};
    c->fa[3] = (dnnl_exec_arg_t){DNNL_ARG_DST, mem(c, &dmd, y)};
    c->da[0] = (dnnl_exec_arg_t){DNNL_ARG_DIFF_SRC, mem(c, &smd, dxpad)};
    c->da[1] = (dnnl_exec_arg_t){DNNL_ARG_WEIGHTS, mem(c, &wmd, (void*)w)};
    c->da[2] = (dnnl_exec_arg_t){DNNL_ARG_DIFF_DST, mem(c, &dmd, (void*)dy)};
    c->wa[0] = (dnnl_exec_arg_t){DNNL_ARG_SRC, mem(c, &smd, c->xpad)};
    c->wa[1] = (dnnl_exec_arg_t){DNNL_ARG_DIFF_WEIGHTS, mem(c, &wmd, dw)};
    c->wa[2] = (dnnl_exec_arg_t){DNNL_ARG_DIFF_BIAS, mem(c, &bmd, db)};
    c->wa[3] = (dnnl_exec_arg_t){DNNL_ARG_DIFF_DST, mem(c, &dmd, (void*)dy)};
}

static void dnnl_run(dnnl_conv* c, int which) {
    if (which == 0) CK(dnnl_primitive_execute(c->fwd, c->st, 4, c->fa));
    if (which == 1) CK(dnnl_primitive_execute(c->bwd_data, c->st, 3, c->da));
    if (which == 2) CK(dnnl_primitive_execute(c->bwd_w, c->st, 4, c->wa));
    CK(dnnl_stream_wait(c->st));
}
#endif

// Memory-bound kernels at ECAPA sizes: milliseconds per call (best of reps).
static void bench_elementwise(int reps) {
    const int B = 32, T = 200, C = 512, C3 = 1536;
    const size_t n = (size_t)B * C * T, n3 = (size_t)B * C3 * T;
    float *x = rnd(n3), *y = rnd(n3), *dy = rnd(n3), *dx = rnd(n3), *w = rnd(n3);
    float *g = rnd(C3), *b = rnd(C3), *mean = rnd(C3), *rstd = rnd(C3), *rm = rnd(C3);
    float* rv = rnd(C3);
    float *st = rnd((size_t)B * 2 * C3), *dst = rnd((size_t)B * 2 * C3);
    for (size_t i = 0; i < n3; i++) w[i] = 1.0f / T;
    for (int i = 0; i < C3; i++) rv[i] = 1.0f;
    const char* names[] = {"batchnorm fwd (B,512,T)",
                           "batchnorm bwd (B,512,T)",
                           "relu fwd (B,512,T)",
                           "relu bwd (B,512,T)",
                           "softmax_time fwd (B,1536,T)",
                           "softmax_time bwd (B,1536,T)",
                           "weighted_stats fwd (B,1536,T)",
                           "weighted_stats bwd (B,1536,T)"};
    printf("\nmemory-bound kernels, B=%d T=%d: ms per call (best of %d)\n", B, T, reps);
    for (int k = 0; k < 8; k++) {
        double best = 1e30;
        for (int r = 0; r < reps + 1; r++) {
            const double t0 = spk_seconds();
            switch (k) {
                case 0:
                    batchnorm1d_forward_train(y, mean, rstd, rm, rv, x, g, b, B, C, T, 1e-5f, 0.1f);
                    break;
                case 1:
                    batchnorm1d_backward(dx, g, b, dy, x, g, mean, rstd, B, C, T);
                    break;
                case 2:
                    relu_forward(y, x, n);
                    break;
                case 3:
                    relu_backward(dx, dy, y, n);
                    break;
                case 4:
                    softmax_time_forward(y, x, B, C3, T);
                    break;
                case 5:
                    softmax_time_backward(dx, dy, y, B, C3, T);
                    break;
                case 6:
                    weighted_stats_forward(st, st + C3, x, w, B, C3, T, 2 * C3, 1e-12f);
                    break;
                default:
                    weighted_stats_backward(dx, dy, dst, dst + C3, x, w, st, st + C3, B, C3, T,
                                            2 * C3, 1e-12f);
            }
            const double t = spk_seconds() - t0;
            if (r > 0 && t < best) best = t;
        }
        printf("  %-32s %7.2f ms\n", names[k], best * 1e3);
    }
    free(x);
    free(y);
    free(dy);
    free(dx);
    free(w);
    free(g);
    free(b);
    free(mean);
    free(rstd);
    free(rm);
    free(rv);
    free(st);
    free(dst);
}

int main(int argc, char** argv) {
    const int reps = argc > 1 ? atoi(argv[1]) : 5;
    const int B = 32, T = 200;
    const shape shapes[] = {
        {"80->512 K5", 80, 512, 5, 1, 0, 1},      {"512->512 1x1", 512, 512, 1, 1, 1, 6},
        {"64->64 K3 d2", 64, 64, 3, 2, 1, 7},     {"64->64 K3 d3", 64, 64, 3, 3, 1, 7},
        {"64->64 K3 d4", 64, 64, 3, 4, 1, 7},     {"1536->1536 1x1", 1536, 1536, 1, 1, 1, 1},
        {"4608->128 1x1", 4608, 128, 1, 1, 1, 1}, {"128->1536 1x1", 128, 1536, 1, 1, 1, 1},
    };
    const int nshapes = (int)(sizeof shapes / sizeof shapes[0]);
    const char* what[3] = {"fwd", "bwd-data", "bwd-weights"};
    // candidates: conv1d schedules on each GEMM backend, then oneDNN's convolution
    typedef struct {
        const char* name;
        spk_gemm_backend backend;
        conv1d_algo algo;
    } cand;
    cand cands[5];
    int nc = 0;
    if (spk_gemm_set_backend(SPK_GEMM_DNNL) == 0) {
        cands[nc++] = (cand){"per-sample+dnnl", SPK_GEMM_DNNL, CONV1D_PER_SAMPLE};
        cands[nc++] = (cand){"folded+dnnl", SPK_GEMM_DNNL, CONV1D_FOLDED};
    }
    cands[nc++] = (cand){"per-sample+openblas", SPK_GEMM_BLAS, CONV1D_PER_SAMPLE};
    cands[nc++] = (cand){"folded+openblas", SPK_GEMM_BLAS, CONV1D_FOLDED};
    int ncol = nc;
#ifdef SPK_BENCH_DNNL
    ncol++;
#endif
    printf("B=%d T=%d, GFLOP/s (2*B*T*Cout*Cin*K flops per pass) and ms, best of %d\n", B, T, reps);
    printf("%-16s %-11s", "shape", "pass");
    for (int c = 0; c < nc; c++) printf(" %18s", cands[c].name);
#ifdef SPK_BENCH_DNNL
    printf(" %18s", "oneDNN conv (ncw)");
#endif
    printf("\n");
    double total[8] = {0};
    const char* filter = argc > 2 ? argv[2] : NULL;
    for (int s = 0; s < nshapes; s++) {
        const shape* sh = &shapes[s];
        if (filter && !strstr(sh->name, filter)) continue;
        const size_t nx = (size_t)B * sh->cin * T, ny = (size_t)B * sh->cout * T;
        const size_t nw = (size_t)sh->cout * sh->cin * sh->k;
        float *x = rnd(nx), *w = rnd(nw), *bias = rnd(sh->cout), *y = rnd(ny), *dy = rnd(ny);
        float *dx = rnd(nx), *dw = rnd(nw), *db = rnd(sh->cout);
        float* ws = rnd(conv1d_workspace_floats(B, sh->cin, sh->cout, T, sh->k, sh->d));
        const double flops = 2.0 * B * T * sh->cout * sh->cin * sh->k;
#ifdef SPK_BENCH_DNNL
        dnnl_conv dc;
        dnnl_conv_init(&dc, B, sh->cin, sh->cout, T, sh->k, sh->d, y, w, bias, dx, dw, db, dy);
#endif
        double best[3][8];
        for (int i = 0; i < 3; i++)
            for (int j = 0; j < 8; j++) best[i][j] = 1e30;
        for (int r = 0; r < reps + 1; r++) {  // first round is warm-up
            for (int p = 0; p < 3; p++) {
                if (p == 1 && !sh->need_dx) continue;
                for (int c = 0; c < nc; c++) {
                    spk_gemm_set_backend(cands[c].backend);
                    conv1d_set_algo(cands[c].algo);
                    const double t0 = spk_seconds();
                    if (p == 0)
                        conv1d_forward(y, x, w, bias, B, sh->cin, sh->cout, T, sh->k, sh->d, ws);
                    else if (p == 1)
                        conv1d_backward(dx, NULL, NULL, dy, x, w, B, sh->cin, sh->cout, T, sh->k,
                                        sh->d, ws);
                    else
                        conv1d_backward(NULL, dw, db, dy, x, w, B, sh->cin, sh->cout, T, sh->k,
                                        sh->d, ws);
                    const double t = spk_seconds() - t0;
                    if (r > 0 && t < best[p][c]) best[p][c] = t;
                }
#ifdef SPK_BENCH_DNNL
                const double t0 = spk_seconds();
                dnnl_run(&dc, p);
                const double t = spk_seconds() - t0;
                if (r > 0 && t < best[p][nc]) best[p][nc] = t;
#endif
            }
        }
        for (int p = 0; p < 3; p++) {
            if (p == 1 && !sh->need_dx) continue;
            printf("%-16s %-11s", sh->name, what[p]);
            for (int c = 0; c < ncol; c++) {
                printf(" %8.1f (%5.1fms)", flops / best[p][c] / 1e9, best[p][c] * 1e3);
                total[c] += best[p][c] * sh->count;
            }
            printf("\n");
        }
        fflush(stdout);
        free(x);
        free(w);
        free(bias);
        free(y);
        free(dy);
        free(dx);
        free(dw);
        free(db);
        free(ws);
    }
    if (!filter) {
        printf("%-28s", "ECAPA conv total per batch");
        for (int c = 0; c < ncol; c++) printf(" %15.1fms   ", total[c] * 1e3);
        printf(
            "\n(uses per layer count: 1x conv1, 6x 512 1x1, 7x each dilated 64 K3, 1x MFA, 1x each"
            " attention conv; conv1 has no bwd-data)\n");
    }
    if (!filter) bench_elementwise(reps);
    return 0;
}
