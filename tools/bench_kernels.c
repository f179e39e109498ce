// Convolution throughput for the ECAPA-TDNN shapes (B = 32, T = 200, C = 512): the
// spk_kernels conv1d path on each compiled-in GEMM backend, its bf16-operand sibling
// (conv1d_bf16, both schedules), and (built with SPK_BENCH_DNNL) oneDNN's own convolution
// primitives on the same data (input pre-padded by reflection, then an unpadded dilated
// convolution): float32 in plain ncw layouts, and bf16 (float32 outputs) in ncw and in the
// blocked layouts it picks itself (the reorders a model would need between layers are not
// counted). Runs interleave the candidates and report the best of several
// repetitions, since shared machines are noisy.
//   usage: bench_kernels [reps [shape-filter]]   e.g. bench_kernels 9 1536
// SPKDDP_BENCH_CLOCK=cpu times in process CPU time instead of wall time: on a machine shared
// with other jobs, with OMP_NUM_THREADS=1 (or OMP_WAIT_POLICY=passive) it measures the work,
// not the waiting for a core.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kernels/activation.h"
#include "kernels/base/clock.h"
#include "kernels/batchnorm.h"
#include "kernels/conv1d.h"
#include "kernels/conv1d_bf16.h"
#include "kernels/gemm.h"
#include "kernels/gemm_bf16.h"
#include "kernels/pooling.h"

#ifdef SPK_BENCH_DNNL
#include "kernels/cpu/dnnl_check.h"
#endif

static double now(void) {
    static int cpu = -1;
    if (cpu < 0) {
        const char *c = getenv("SPKDDP_BENCH_CLOCK");
        cpu = c && strcmp(c, "cpu") == 0;
    }
    if (!cpu) return spk_seconds();
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static float *rnd(size_t n) {
    float *p = (float *)malloc(sizeof(float) * n);
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
    const char *name;
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
    dnnl_exec_arg_t fa[4], da[3], wa[4];
    const char *impl[3];  // oneDNN's implementation names: fwd, bwd-data, bwd-weights
} dnnl_conv;

// A memory object of the primitive's choice of layout for `what`, on a buffer of its own
// (contents are only timed).
static dnnl_memory_t mem(dnnl_conv *c, const_dnnl_primitive_desc_t pd, dnnl_query_t what) {
    spk_cmd md = dnnl_primitive_desc_query_md(pd, what, 0);
    void *h = calloc(1, dnnl_memory_desc_get_size(md) + 64);
    if (!h) {
        fprintf(stderr, "out of memory\n");
        exit(1);
    }
    dnnl_memory_t m;
    CK(dnnl_memory_create(&m, md, c->eng, h));
    return m;
}

// dt: the data type of src, weights and diff_dst (outputs and bias are float32); tag: the
// activation layout (dnnl_ncw, or dnnl_format_tag_any: the primitive's own blocked layout,
// weights included).
static void dnnl_conv_init(dnnl_conv *c, dnnl_data_type_t dt, dnnl_format_tag_t tag, int B, int Cin, int Cout, int T,
                           int K, int d) {
    const int p = d * (K - 1) / 2;
    CK(dnnl_engine_create(&c->eng, dnnl_cpu, 0));
    CK(dnnl_stream_create(&c->st, c->eng, dnnl_stream_default_flags));
    dnnl_dims_t sd = {B, Cin, T + 2 * p}, wd = {Cout, Cin, K}, bd = {Cout}, dd = {B, Cout, T};
    dnnl_dims_t str = {1}, dil = {d - 1}, pad = {0};
    const dnnl_format_tag_t wtag = tag == dnnl_format_tag_any ? tag : dnnl_oiw;
    spk_md smd = spk_md_tag(3, sd, dt, tag), wmd = spk_md_tag(3, wd, dt, wtag),
           bmd = spk_md_tag(1, bd, dnnl_f32, dnnl_x);
    spk_md dmd = spk_md_tag(3, dd, dt, tag);
    spk_md smd32 = spk_md_tag(3, sd, dnnl_f32, tag);   // diff_src
    spk_md wmd32 = spk_md_tag(3, wd, dnnl_f32, wtag);  // diff_weights
    spk_md dmd32 = spk_md_tag(3, dd, dnnl_f32, tag);   // dst
    dnnl_primitive_desc_t fpd, dpd, wpd;
    const dnnl_alg_kind_t direct = dnnl_convolution_direct;
    CK(spk_conv_pd(&fpd, c->eng, dnnl_forward_training, direct, smd, wmd, bmd, dmd32, str, dil, pad, pad, NULL, NULL));
    CK(spk_conv_pd(&dpd, c->eng, dnnl_backward_data, direct, smd32, wmd, NULL, dmd, str, dil, pad, pad, fpd, NULL));
    CK(spk_conv_pd(&wpd, c->eng, dnnl_backward_weights, direct, smd, wmd32, bmd, dmd, str, dil, pad, pad, fpd, NULL));
    CK(dnnl_primitive_create(&c->fwd, fpd));
    CK(dnnl_primitive_create(&c->bwd_data, dpd));
    CK(dnnl_primitive_create(&c->bwd_w, wpd));
    const_dnnl_primitive_desc_t pds[3] = {fpd, dpd, wpd};
    for (int i = 0; i < 3; i++) CK(dnnl_primitive_desc_query(pds[i], dnnl_query_impl_info_str, 0, &c->impl[i]));
    c->fa[0] = (dnnl_exec_arg_t){DNNL_ARG_SRC, mem(c, fpd, dnnl_query_src_md)};
    c->fa[1] = (dnnl_exec_arg_t){DNNL_ARG_WEIGHTS, mem(c, fpd, dnnl_query_weights_md)};
    c->fa[2].arg = DNNL_ARG_BIAS;
    CK(dnnl_memory_create(&c->fa[2].memory, bmd, c->eng, calloc(Cout, sizeof(float))));
    c->fa[3] = (dnnl_exec_arg_t){DNNL_ARG_DST, mem(c, fpd, dnnl_query_dst_md)};
    c->da[0] = (dnnl_exec_arg_t){DNNL_ARG_DIFF_SRC, mem(c, dpd, dnnl_query_diff_src_md)};
    c->da[1] = (dnnl_exec_arg_t){DNNL_ARG_WEIGHTS, mem(c, dpd, dnnl_query_weights_md)};
    c->da[2] = (dnnl_exec_arg_t){DNNL_ARG_DIFF_DST, mem(c, dpd, dnnl_query_diff_dst_md)};
    c->wa[0] = (dnnl_exec_arg_t){DNNL_ARG_SRC, mem(c, wpd, dnnl_query_src_md)};
    c->wa[1] = (dnnl_exec_arg_t){DNNL_ARG_DIFF_WEIGHTS, mem(c, wpd, dnnl_query_diff_weights_md)};
    CK(dnnl_memory_create(&c->wa[2].memory, bmd, c->eng, calloc(Cout, sizeof(float))));
    c->wa[2].arg = DNNL_ARG_DIFF_BIAS;
    c->wa[3] = (dnnl_exec_arg_t){DNNL_ARG_DIFF_DST, mem(c, wpd, dnnl_query_diff_dst_md)};
    spk_md *mds[] = {&smd, &wmd, &bmd, &dmd, &smd32, &wmd32, &dmd32};
    for (size_t i = 0; i < sizeof mds / sizeof mds[0]; i++) spk_md_free(mds[i]);
}

static void dnnl_run(dnnl_conv *c, int which) {
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
    float *rv = rnd(C3);
    float *st = rnd((size_t)B * 2 * C3), *dst = rnd((size_t)B * 2 * C3);
    for (size_t i = 0; i < n3; i++) w[i] = 1.0f / T;
    for (int i = 0; i < C3; i++) rv[i] = 1.0f;
    const char *names[] = {"batchnorm fwd (B,512,T)",
                           "batchnorm bwd (B,512,T)",
                           "relu fwd (B,512,T)",
                           "relu bwd (B,512,T)",
                           "attentive_stats fwd (B,1536,T)",
                           "attentive_stats bwd (B,1536,T)",
                           "weighted_stats fwd (B,1536,T)",
                           "weighted_stats bwd (B,1536,T)"};
    printf("\nmemory-bound kernels, B=%d T=%d: ms per call (best of %d)\n", B, T, reps);
    for (int k = 0; k < 8; k++) {
        double best = 1e30;
        for (int r = 0; r < reps + 1; r++) {
            const double t0 = now();
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
                    attentive_stats_forward(y, st, st + C3, dy, x, B, C3, T, 2 * C3, 1e-12f);
                    break;
                case 5:
                    attentive_stats_backward(dx, y, dst, dst + C3, x, w, st, st + C3, B, C3, T, 2 * C3, 1e-12f, 0);
                    break;
                case 6:
                    weighted_stats_forward(st, st + C3, x, w, B, C3, T, 2 * C3, 1e-12f);
                    break;
                default:
                    weighted_stats_backward(dx, dy, dst, dst + C3, x, w, st, st + C3, B, C3, T, 2 * C3, 1e-12f);
            }
            const double t = now() - t0;
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

// A candidate: spkddp's conv1d (float32 or bf16 operands) with a GEMM backend and schedule,
// or one of oneDNN's convolution primitives.
typedef enum { CAND_F32, CAND_BF16, CAND_DNNL_CONV } cand_kind;
typedef struct {
    const char *name;
    cand_kind kind;
    spk_gemm_backend backend;
    conv1d_algo algo;
    int dnnl_bf16, dnnl_any;  // CAND_DNNL_CONV: bf16 operands, the primitive's own layouts
} cand;

#define MAX_CANDS 12

static int candidates(cand *c) {
    int n = 0;
    if (spk_gemm_set_backend(SPK_GEMM_DNNL) == 0) {
        c[n++] = (cand){"per-sample+dnnl", CAND_F32, SPK_GEMM_DNNL, CONV1D_PER_SAMPLE, 0, 0};
        c[n++] = (cand){"folded+dnnl", CAND_F32, SPK_GEMM_DNNL, CONV1D_FOLDED, 0, 0};
    }
    c[n++] = (cand){"per-sample+openblas", CAND_F32, SPK_GEMM_BLAS, CONV1D_PER_SAMPLE, 0, 0};
    c[n++] = (cand){"folded+openblas", CAND_F32, SPK_GEMM_BLAS, CONV1D_FOLDED, 0, 0};
    const spk_gemm_backend best = spk_gemm_set_backend(SPK_GEMM_DNNL) == 0 ? SPK_GEMM_DNNL : SPK_GEMM_BLAS;
    c[n++] = (cand){"bf16 per-sample", CAND_BF16, best, CONV1D_PER_SAMPLE, 0, 0};
    c[n++] = (cand){"bf16 folded", CAND_BF16, best, CONV1D_FOLDED, 0, 0};
#ifdef SPK_BENCH_DNNL
    c[n++] = (cand){"oneDNN conv ncw", CAND_DNNL_CONV, best, CONV1D_AUTO, 0, 0};
    if (spk_dnnl_isa_has(dnnl_cpu_isa_avx512_core)) {  // oneDNN 2.6 has no bf16 convolution below AVX-512
        c[n++] = (cand){"oneDNN bf16 ncw", CAND_DNNL_CONV, best, CONV1D_AUTO, 1, 0};
        c[n++] = (cand){"oneDNN bf16 any", CAND_DNNL_CONV, best, CONV1D_AUTO, 1, 1};
    }
#endif
    return n;
}

int main(int argc, char **argv) {
    const int reps = argc > 1 ? atoi(argv[1]) : 5;
    const int B = 32, T = 200;
    const shape shapes[] = {
        {"80->512 K5", 80, 512, 5, 1, 0, 1},      {"512->512 1x1", 512, 512, 1, 1, 1, 6},
        {"64->64 K3 d2", 64, 64, 3, 2, 1, 7},     {"64->64 K3 d3", 64, 64, 3, 3, 1, 7},
        {"64->64 K3 d4", 64, 64, 3, 4, 1, 7},     {"1536->1536 1x1", 1536, 1536, 1, 1, 1, 1},
        {"1536->128 1x1", 1536, 128, 1, 1, 1, 1}, {"128->1536 1x1", 128, 1536, 1, 1, 1, 1},
    };
    const int nshapes = (int)(sizeof shapes / sizeof shapes[0]);
    const char *what[3] = {"fwd", "bwd-data", "bwd-weights"};
    cand cands[MAX_CANDS];
    const int nc = candidates(cands);
    printf("B=%d T=%d, GFLOP/s (2*B*T*Cout*Cin*K flops per pass) and ms, best of %d; bf16 GEMMs %s\n", B, T, reps,
           spk_gemm_bf16_native() ? "native (oneDNN matmul)" : "widened to float32 (no native bf16 here)");
    printf("%-16s %-11s", "shape", "pass");
    for (int c = 0; c < nc; c++) printf(" %18s", cands[c].name);
    printf("\n");
    double total[MAX_CANDS] = {0};
    const char *filter = argc > 2 ? argv[2] : NULL;
    for (int s = 0; s < nshapes; s++) {
        const shape *sh = &shapes[s];
        if (filter && !strstr(sh->name, filter)) continue;
        const size_t nx = (size_t)B * sh->cin * T, ny = (size_t)B * sh->cout * T;
        const size_t nw = (size_t)sh->cout * sh->cin * sh->k;
        float *x = rnd(nx), *w = rnd(nw), *bias = rnd(sh->cout), *y = rnd(ny), *dy = rnd(ny);
        float *dx = rnd(nx), *dw = rnd(nw), *db = rnd(sh->cout);
        float *ws = rnd(conv1d_workspace_floats(B, sh->cin, sh->cout, T, sh->k, sh->d));
        float *ws16 = rnd(conv1d_bf16_workspace_floats(B, sh->cin, sh->cout, T, sh->k, sh->d));
        spk_bf16 *xh = (spk_bf16 *)rnd(nx / 2 + 1);
        spk_bf16 *wh = (spk_bf16 *)rnd(nw / 2 + 1);
        bf16_from_f32(wh, w, nw);
        bf16_from_f32(xh, x, nx);
        const double flops = 2.0 * B * T * sh->cout * sh->cin * sh->k;
#ifdef SPK_BENCH_DNNL
        dnnl_conv dc[3];
        for (int c = 0, i = 0; c < nc; c++)
            if (cands[c].kind == CAND_DNNL_CONV)
                dnnl_conv_init(&dc[i++], cands[c].dnnl_bf16 ? dnnl_bf16 : dnnl_f32,
                               cands[c].dnnl_any ? dnnl_format_tag_any : dnnl_ncw, B, sh->cin, sh->cout, T, sh->k,
                               sh->d);
#endif
        double best[3][MAX_CANDS];
        for (int i = 0; i < 3; i++)
            for (int j = 0; j < MAX_CANDS; j++) best[i][j] = 1e30;
        for (int r = 0; r < reps + 1; r++) {  // first round is warm-up
            for (int p = 0; p < 3; p++) {
                if (p == 1 && !sh->need_dx) continue;
                for (int c = 0, di = 0; c < nc; c++) {
                    const cand *k = &cands[c];
                    spk_gemm_set_backend(k->backend);
                    conv1d_set_algo(k->algo);
                    const double t0 = now();
                    if (k->kind == CAND_F32) {
                        if (p == 0)
                            conv1d_forward(y, x, w, bias, B, sh->cin, sh->cout, T, sh->k, sh->d, ws);
                        else
                            conv1d_backward(p == 1 ? dx : NULL, 1, p == 2 ? dw : NULL, p == 2 ? db : NULL, dy, x, w, B,
                                            sh->cin, sh->cout, T, sh->k, sh->d, ws);
                    } else if (k->kind == CAND_BF16) {
                        if (p == 0)
                            conv1d_bf16_forward(y, xh, x, wh, bias, B, sh->cin, sh->cout, T, sh->k, sh->d, ws16);
                        else
                            conv1d_bf16_backward(p == 1 ? dx : NULL, 1, p == 2 ? dw : NULL, p == 2 ? db : NULL, dy,
                                                 NULL, xh, wh, B, sh->cin, sh->cout, T, sh->k, sh->d, ws16);
                    } else {
#ifdef SPK_BENCH_DNNL
                        dnnl_run(&dc[di++], p);
#endif
                    }
                    const double t = now() - t0;
                    if (r > 0 && t < best[p][c]) best[p][c] = t;
                }
            }
        }
#ifdef SPK_BENCH_DNNL
        for (int c = 0, di = 0; c < nc; c++)
            if (cands[c].kind == CAND_DNNL_CONV) {
                printf("  %s: %s / %s / %s\n", cands[c].name, dc[di].impl[0], dc[di].impl[1], dc[di].impl[2]);
                di++;
            }
#endif
        for (int p = 0; p < 3; p++) {
            if (p == 1 && !sh->need_dx) continue;
            printf("%-16s %-11s", sh->name, what[p]);
            for (int c = 0; c < nc; c++) {
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
        free(ws16);
        free(xh);
        free(wh);
    }
    if (!filter) {
        printf("%-28s", "ECAPA conv total per batch");
        for (int c = 0; c < nc; c++) printf(" %15.1fms   ", total[c] * 1e3);
        printf(
            "\n(uses per layer count: 1x conv1, 6x 512 1x1, 7x each dilated 64 K3, 1x MFA, 1x each"
            " attention GEMM; conv1 has no bwd-data)\n");
    }
    if (!filter) bench_elementwise(reps);
    return 0;
}
