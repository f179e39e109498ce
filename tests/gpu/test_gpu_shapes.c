// Every CUDA op at the shapes of production training, against the CPU kernels:
//   test_gpu_shapes [C B T]      (default ECAPA C=1024, batch 128, T=200 frames)
// At these sizes cuDNN and cuBLAS choose other algorithms than at the kernel tests' small
// shapes, reductions split across blocks, and a race has room to show: each backward runs
// twice from the same prefilled gradients and must give the same bits. Tolerances are the
// kernel tests' (tests/kernels/backends.h). GPU only (the CUDA stand-in runs it at small
// shapes); without a CUDA device it reports SKIPPED (exit 77). The CPU side needs a few GiB and
// takes tens of seconds on 16 cores.
#include "../kernels/backends.h"

static int g_C = 1024, g_B = 128, g_T = 200;
static const int kFeat = 80, kAtt = 128, kEmb = 192, kClasses = 5994;

// Convolution forward and backward (dx, dw, dbias) of one layer.
static void conv_case(const char *layer, int Cin, int Cout, int K, int d) {
    const int B = g_B, T = g_T;
    const size_t nx = (size_t)B * Cin * T, ny = (size_t)B * Cout * T, nw = (size_t)Cout * Cin * K;
    float *x = rand_f(nx, -1, 1), *w = rand_f(nw, -0.1f, 0.1f), *bias = rand_f(Cout, -1, 1);
    float *gy = rand_f(ny, -1, 1), *y = alloc_f(ny);
    float *ws = alloc_f(conv1d_workspace_floats(B, Cin, Cout, T, K, d));
    float *dx = dev_f(x, nx), *dw = dev_f(w, nw), *db = dev_f(bias, Cout), *dgy = dev_f(gy, ny);
    float *dy = dev_f(NULL, ny), *dy2 = dev_f(NULL, ny);
    float *dws = dev_f(NULL, g_be->conv1d_workspace_floats(B, Cin, Cout, T, K, d));
    conv1d_forward(y, x, w, bias, B, Cin, Cout, T, K, d, ws);
    g_be->conv1d_forward(dy, dx, dw, db, B, Cin, Cout, T, K, d, dws);
    g_be->conv1d_forward(dy2, dx, dw, db, B, Cin, Cout, T, K, d, dws);
    cmp(cname("conv1d %s forward", layer), dy, y, ny, TOL_GEMM);
    same_bits(cname("conv1d %s forward twice", layer), dy, dy2, ny);
    const size_t len[3] = {nx, nw, (size_t)Cout};
    grads_t g = grads_prefill(3, len);
    conv1d_backward(g.cpu[0], 1, g.cpu[1], g.cpu[2], gy, x, w, B, Cin, Cout, T, K, d, ws);
    g_be->conv1d_backward(g.dev[0], 1, g.dev[1], g.dev[2], dgy, dx, dw, B, Cin, Cout, T, K, d, dws);
    g_be->conv1d_backward(g.dev2[0], 1, g.dev2[1], g.dev2[2], dgy, dx, dw, B, Cin, Cout, T, K, d, dws);
    grads_check(&g, "conv1d", layer, (const char *const[]){"dx", "dw", "dbias"},
                (const double[]){TOL_GEMM, TOL_GEMM, TOL});
    dev_release();
    test_release();
}

static void batchnorm_case(const char *layer, int C, int T) {
    const int B = g_B;
    const size_t n = (size_t)B * C * T;
    float *x = rand_f(n, -2, 3), *w = rand_f(C, 0.5f, 1.5f), *b = rand_f(C, -1, 1), *gy = rand_f(n, -1, 1);
    float *rm = rand_f(C, -1, 1), *rv = rand_f(C, 0.5f, 2), *y = alloc_f(n), *mean = alloc_f(C), *rstd = alloc_f(C);
    float *dx = dev_f(x, n), *dw = dev_f(w, C), *db = dev_f(b, C), *dgy = dev_f(gy, n);
    float *drm = dev_f(rm, C), *drv = dev_f(rv, C), *dy = dev_f(NULL, n);
    float *dmean = dev_f(NULL, C), *drstd = dev_f(NULL, C);
    batchnorm1d_forward_train(y, mean, rstd, rm, rv, x, w, b, B, C, T, 1e-5f, 0.1f);
    g_be->batchnorm1d_forward_train(dy, dmean, drstd, drm, drv, dx, dw, db, B, C, T, 1e-5f, 0.1f);
    cmp(cname("batchnorm %s forward", layer), dy, y, n, TOL);
    cmp(cname("batchnorm %s mean", layer), dmean, mean, C, TOL);
    cmp(cname("batchnorm %s rstd", layer), drstd, rstd, C, TOL);
    cmp(cname("batchnorm %s running var", layer), drv, rv, C, TOL);
    const size_t len[3] = {n, (size_t)C, (size_t)C};
    grads_t g = grads_prefill(3, len);
    batchnorm1d_backward(g.cpu[0], g.cpu[1], g.cpu[2], gy, x, w, mean, rstd, B, C, T);
    g_be->batchnorm1d_backward(g.dev[0], g.dev[1], g.dev[2], dgy, dx, dw, dmean, drstd, B, C, T);
    g_be->batchnorm1d_backward(g.dev2[0], g.dev2[1], g.dev2[2], dgy, dx, dw, dmean, drstd, B, C, T);
    grads_check(&g, "batchnorm", layer, (const char *const[]){"dx", "dweight", "dbias"},
                (const double[]){TOL, TOL, TOL});
    dev_release();
    test_release();
}

// The attentive pooling over (B, 3C, T): statistics with and without weights, the attentive
// statistics (softmax over time and the statistics it weights), and its three GEMM batches
// (one summed over the batch: the weight gradient).
static void pooling_case(void) {
    const int B = g_B, C = 3 * g_C, T = g_T, A = kAtt;
    const size_t n = (size_t)B * C * T, na = (size_t)B * A * T;
    float *x = rand_f(n, -1, 1), *z = rand_f(n, -3, 3), *p = alloc_f(n);
    float *dx = dev_f(x, n), *dz = dev_f(z, n), *dp = dev_f(NULL, n);
    const size_t ns = (size_t)B * 2 * C;
    float *st = alloc_f(ns), *gst = rand_f(ns, -1, 1), *dst = dev_f(NULL, ns), *dgst = dev_f(gst, ns);
    attentive_stats_forward(p, st, st + C, z, x, B, C, T, 2 * C, 1e-12f);
    g_be->attentive_stats_forward(dp, dst, dst + C, dz, dx, B, C, T, 2 * C, 1e-12f);
    cmp("attentive statistics' softmax over time (B, 3C, T)", dp, p, n, TOL);
    cmp("attentive statistics (B, 3C, T)", dst, st, ns, TOL);
    const size_t len2[2] = {n, n};
    grads_t g = grads_prefill(2, len2);
    attentive_stats_backward(g.cpu[0], g.cpu[1], gst, gst + C, x, p, st, st + C, B, C, T, 2 * C, 1e-12f, 0);
    g_be->attentive_stats_backward(g.dev[0], g.dev[1], dgst, dgst + C, dx, dp, dst, dst + C, B, C, T, 2 * C, 1e-12f, 0);
    g_be->attentive_stats_backward(g.dev2[0], g.dev2[1], dgst, dgst + C, dx, dp, dst, dst + C, B, C, T, 2 * C, 1e-12f,
                                   0);
    grads_check(&g, "attentive statistics", "(B, 3C, T)", (const char *const[]){"dx", "dlogits"},
                (const double[]){TOL, TOL});
    for (int weighted = 0; weighted <= 1; weighted++) {
        const float *w = weighted ? p : NULL;
        const float *dw = weighted ? dp : NULL;
        const char *tag = weighted ? "attention-weighted" : "plain";
        weighted_stats_forward(st, st + C, x, w, B, C, T, 2 * C, 1e-12f);
        g_be->weighted_stats_forward(dst, dst + C, dx, dw, B, C, T, 2 * C, 1e-12f);
        cmp(cname("weighted stats %s forward", tag), dst, st, ns, TOL);
        const size_t len[2] = {n, n};
        grads_t h = grads_prefill(weighted ? 2 : 1, len);
        weighted_stats_backward(h.cpu[0], weighted ? h.cpu[1] : NULL, gst, gst + C, x, w, st, st + C, B, C, T, 2 * C,
                                1e-12f);
        g_be->weighted_stats_backward(h.dev[0], weighted ? h.dev[1] : NULL, dgst, dgst + C, dx, dw, dst, dst + C, B, C,
                                      T, 2 * C, 1e-12f);
        g_be->weighted_stats_backward(h.dev2[0], weighted ? h.dev2[1] : NULL, dgst, dgst + C, dx, dw, dst, dst + C, B,
                                      C, T, 2 * C, 1e-12f);
        grads_check(&h, "weighted stats", tag, (const char *const[]){"dx", "dw"}, (const double[]){TOL, TOL});
    }
    // conv (B, A, T) += W_h (A, C) h_b; dh_b += W_h^T g_b; dW_h += sum_b g_b h_b^T (W: (A, 3C) rows)
    float *W = rand_f((size_t)A * 3 * C, -0.05f, 0.05f), *gg = rand_f(na, -1, 1), *o = rand_f(na, -1, 1);
    float *dW = dev_f(W, (size_t)A * 3 * C), *dgg = dev_f(gg, na), *dO = dev_f(o, na);
    spk_sgemm_batched('N', 'N', A, T, C, 1.0f, W, 3 * C, 0, x, T, (int64_t)C * T, 1.0f, o, T, (int64_t)A * T, B);
    g_be->spk_sgemm_batched('N', 'N', A, T, C, 1.0f, dW, 3 * C, 0, dx, T, (int64_t)C * T, 1.0f, dO, T, (int64_t)A * T,
                            B);
    cmp("attention GEMM batch (A x T x C) x B", dO, o, na, TOL_GEMM);
    const size_t nW = (size_t)A * 3 * C;
    grads_t gw = grads_prefill(1, &nW);
    spk_sgemm_batched('N', 'T', A, C, T, 1.0f, gg, T, (int64_t)A * T, x, T, (int64_t)C * T, 1.0f, gw.cpu[0], 3 * C, 0,
                      B);
    g_be->spk_sgemm_batched('N', 'T', A, C, T, 1.0f, dgg, T, (int64_t)A * T, dx, T, (int64_t)C * T, 1.0f, gw.dev[0],
                            3 * C, 0, B);
    g_be->spk_sgemm_batched('N', 'T', A, C, T, 1.0f, dgg, T, (int64_t)A * T, dx, T, (int64_t)C * T, 1.0f, gw.dev2[0],
                            3 * C, 0, B);
    grads_check(&gw, "attention weight gradient", "(summed over the batch)", (const char *const[]){"dW"},
                (const double[]){TOL_GEMM});
    grads_t gh = grads_prefill(1, &n);  // dh_b += W_h^T g_b
    spk_sgemm_batched('T', 'N', C, T, A, 1.0f, W, 3 * C, 0, gg, T, (int64_t)A * T, 1.0f, gh.cpu[0], T, (int64_t)C * T,
                      B);
    g_be->spk_sgemm_batched('T', 'N', C, T, A, 1.0f, dW, 3 * C, 0, dgg, T, (int64_t)A * T, 1.0f, gh.dev[0], T,
                            (int64_t)C * T, B);
    g_be->spk_sgemm_batched('T', 'N', C, T, A, 1.0f, dW, 3 * C, 0, dgg, T, (int64_t)A * T, 1.0f, gh.dev2[0], T,
                            (int64_t)C * T, B);
    grads_check(&gh, "attention input gradient", "(B x (C x T x A))", (const char *const[]){"dh"},
                (const double[]){TOL_GEMM});
    dev_release();
    test_release();
}

// Squeeze-excitation and the smaller (B, C, T) / (B, A, T) ops.
static void elementwise_case(void) {
    const int B = g_B, C = g_C, T = g_T, A = kAtt;
    const size_t n = (size_t)B * C * T, na = (size_t)B * A * T, nb = (size_t)B * C;
    float *x = rand_f(n, -2, 2), *g = rand_f(n, -1, 1), *y = alloc_f(n), *s = rand_f(nb, 0, 1), *m = alloc_f(nb);
    float *dx = dev_f(x, n), *dg = dev_f(g, n), *dy = dev_f(NULL, n), *ds = dev_f(s, nb), *dm = dev_f(NULL, nb);
    relu_forward(y, x, n);
    g_be->relu_forward(dy, dx, n);
    cmp("relu forward (B, C, T)", dy, y, n, TOL);
    // the elementwise backward ops and copies over (B, C, T), accumulating into prefilled outputs
    grads_t e = grads_prefill(1, &n);
    relu_backward(e.cpu[0], g, y, n);
    g_be->relu_backward(e.dev[0], dg, dy, n);
    g_be->relu_backward(e.dev2[0], dg, dy, n);
    grads_check(&e, "relu", "(B, C, T)", (const char *const[]){"dx"}, (const double[]){TOL});
    e = grads_prefill(1, &n);
    sigmoid_backward(e.cpu[0], g, y, n);
    g_be->sigmoid_backward(e.dev[0], dg, dy, n);
    g_be->sigmoid_backward(e.dev2[0], dg, dy, n);
    grads_check(&e, "sigmoid", "(B, C, T)", (const char *const[]){"dx"}, (const double[]){TOL});
    e = grads_prefill(1, &n);
    time_mean_backward(e.cpu[0], s, B, C, T);
    g_be->time_mean_backward(e.dev[0], ds, B, C, T);
    g_be->time_mean_backward(e.dev2[0], ds, B, C, T);
    grads_check(&e, "time mean", "(B, C, T)", (const char *const[]){"dx"}, (const double[]){TOL});
    e = grads_prefill(1, &n);
    channel_slice_add(e.cpu[0], C, g, C, B, C / 2, T);
    g_be->channel_slice_add(e.dev[0], C, dg, C, B, C / 2, T);
    g_be->channel_slice_add(e.dev2[0], C, dg, C, B, C / 2, T);
    grads_check(&e, "channel slice add", "(B, C/2 of C, T)", (const char *const[]){"dst"}, (const double[]){TOL});
    e = grads_prefill(1, &n);
    vec_acc(e.cpu[0], g, n);
    g_be->vec_acc(e.dev[0], dg, n);
    g_be->vec_acc(e.dev2[0], dg, n);
    grads_check(&e, "vec_acc", "(B, C, T)", (const char *const[]){"y"}, (const double[]){TOL});
    sigmoid_forward(m, s, nb);
    g_be->sigmoid_forward(dm, ds, nb);
    cmp("sigmoid forward (B, C)", dm, m, nb, TOL);
    time_mean_forward(m, x, B, C, T);
    g_be->time_mean_forward(dm, dx, B, C, T);
    cmp("time mean (B, C, T)", dm, m, nb, TOL);
    channel_scale_forward(y, x, s, B, C, T);
    g_be->channel_scale_forward(dy, dx, ds, B, C, T);
    cmp("channel scale forward (B, C, T)", dy, y, n, TOL);
    const size_t len[2] = {n, nb};
    grads_t h = grads_prefill(2, len);
    channel_scale_backward(h.cpu[0], h.cpu[1], g, x, s, B, C, T);
    g_be->channel_scale_backward(h.dev[0], h.dev[1], dg, dx, ds, B, C, T);
    g_be->channel_scale_backward(h.dev2[0], h.dev2[1], dg, dx, ds, B, C, T);
    grads_check(&h, "channel scale", "(B, C, T)", (const char *const[]){"dx", "ds"}, (const double[]){TOL, TOL});
    float *xa = rand_f(na, -2, 2), *t = alloc_f(na), *dxa = dev_f(xa, na), *dt = dev_f(NULL, na);
    tanh_forward(t, xa, na);
    g_be->tanh_forward(dt, dxa, na);
    cmp("tanh forward (B, A, T)", dt, t, na, TOL);
    grads_t ta = grads_prefill(1, &na);
    tanh_backward(ta.cpu[0], xa, t, na);
    g_be->tanh_backward(ta.dev[0], dxa, dt, na);
    g_be->tanh_backward(ta.dev2[0], dxa, dt, na);
    grads_check(&ta, "tanh", "(B, A, T)", (const char *const[]){"dx"}, (const double[]){TOL});
    const int Cr = A < C ? A : C;  // a (B, Cr) slice of s repeated over time
    time_repeat_forward(t, Cr, s, C, B, Cr, T);
    g_be->time_repeat_forward(dt, Cr, ds, C, B, Cr, T);
    cmp("time repeat forward (B, A, T)", dt, t, (size_t)B * Cr * T, TOL);
    const size_t nr = (size_t)B * A;
    grads_t r = grads_prefill(1, &nr);
    time_repeat_backward(r.cpu[0], A, xa, A, B, A, T);
    g_be->time_repeat_backward(r.dev[0], A, dxa, A, B, A, T);
    g_be->time_repeat_backward(r.dev2[0], A, dxa, A, B, A, T);
    grads_check(&r, "time repeat", "(B, A, T)", (const char *const[]){"ds"}, (const double[]){TOL});
    const size_t nf = (size_t)B * T * kFeat;
    float *xf = rand_f(nf, -2, 2), *f = alloc_f(nf), *dxf = dev_f(xf, nf), *df = dev_f(NULL, nf);
    batch_transpose(f, xf, B, T, kFeat);
    g_be->batch_transpose(df, dxf, B, T, kFeat);
    cmp("batch transpose (B, T, F)", df, f, nf, TOL);
    dev_release();
    test_release();
}

// The head: the embedding layer and the AAM-softmax over the training speakers.
static void head_case(void) {
    const int B = g_B, P = 6 * g_C, E = kEmb, S = kClasses;
    float *x = rand_f((size_t)B * P, -1, 1), *w = rand_f((size_t)E * P, -0.02f, 0.02f), *b = rand_f(E, -1, 1);
    float *y = alloc_f((size_t)B * E), *gy = rand_f((size_t)B * E, -1, 1);
    float *dx = dev_f(x, (size_t)B * P), *dw = dev_f(w, (size_t)E * P), *db = dev_f(b, E);
    float *dy = dev_f(NULL, (size_t)B * E), *dgy = dev_f(gy, (size_t)B * E);
    linear_forward(y, x, w, b, B, P, E);
    g_be->linear_forward(dy, dx, dw, db, B, P, E);
    cmp("linear forward (B, 6C) -> E", dy, y, (size_t)B * E, TOL_GEMM);
    const size_t len[3] = {(size_t)B * P, (size_t)E * P, (size_t)E};
    grads_t g = grads_prefill(3, len);
    linear_backward(g.cpu[0], g.cpu[1], g.cpu[2], gy, x, w, B, P, E);
    g_be->linear_backward(g.dev[0], g.dev[1], g.dev[2], dgy, dx, dw, B, P, E);
    g_be->linear_backward(g.dev2[0], g.dev2[1], g.dev2[2], dgy, dx, dw, B, P, E);
    grads_check(&g, "linear", "(B, 6C) -> E", (const char *const[]){"dx", "dw", "db"},
                (const double[]){TOL_GEMM, TOL_GEMM, TOL});
    int *labels = alloc_i(B);
    for (int i = 0; i < B; i++) labels[i] = rng_int(S);
    float *emb = rand_f((size_t)B * E, -1, 1), *cw = rand_f((size_t)S * E, -1, 1);
    const size_t nc = aam_softmax_cache_floats(B, E, S), nws = aam_softmax_workspace_floats(B, E, S);
    float *cache = alloc_f(nc), *ws = alloc_f(nws), loss;
    int correct;
    aam_softmax_forward(&loss, &correct, cache, emb, cw, labels, B, E, S, 0.2f, 30.0f, ws);
    int *dl = dev_i(labels, B);
    float *demb = dev_f(emb, (size_t)B * E), *dcw = dev_f(cw, (size_t)S * E);
    float *dcache = dev_f(NULL, g_be->aam_softmax_cache_floats(B, E, S));
    float *dws = dev_f(NULL, g_be->aam_softmax_workspace_floats(B, E, S)), *dloss = dev_f(NULL, 2);
    g_be->aam_softmax_forward(dloss, (int *)(dloss + 1), dcache, demb, dcw, dl, B, E, S, 0.2f, 30.0f, dws);
    cmp_scalar("aam softmax loss (B, E) x S", dloss, loss, TOL_GEMM);
    const size_t la[2] = {(size_t)B * E, (size_t)S * E};
    grads_t a = grads_prefill(2, la);
    aam_softmax_backward(a.cpu[0], a.cpu[1], 1.0f, cache, emb, cw, labels, B, E, S, 0.2f, 30.0f, ws);
    g_be->aam_softmax_backward(a.dev[0], a.dev[1], 1.0f, dcache, demb, dcw, dl, B, E, S, 0.2f, 30.0f, dws);
    g_be->aam_softmax_backward(a.dev2[0], a.dev2[1], 1.0f, dcache, demb, dcw, dl, B, E, S, 0.2f, 30.0f, dws);
    grads_check(&a, "aam softmax", "(B, E) x S", (const char *const[]){"demb", "dw"},
                (const double[]){TOL_GEMM, TOL_GEMM});
    const size_t nz = (size_t)B * S;
    float *z = rand_f(nz, -5, 5), *probs = alloc_f(nz), *dz = dev_f(z, nz), *dprobs = dev_f(NULL, nz);
    xent_forward(&loss, &correct, probs, z, labels, B, S);
    g_be->xent_forward(dloss, (int *)(dloss + 1), dprobs, dz, dl, B, S);
    cmp_scalar("xent loss (B, S)", dloss, loss, TOL);
    cmp_int("xent correct (B, S)", (int *)(dloss + 1), correct);
    grads_t xz = grads_prefill(1, &nz);
    xent_backward(xz.cpu[0], 1.0f, probs, labels, B, S);
    g_be->xent_backward(xz.dev[0], 1.0f, dprobs, dl, B, S);
    g_be->xent_backward(xz.dev2[0], 1.0f, dprobs, dl, B, S);
    grads_check(&xz, "xent", "(B, S)", (const char *const[]){"dlogits"}, (const double[]){TOL});
    // Adam over the classifier's weights (the update each parameter gets)
    const size_t np = (size_t)S * E;
    float *gp = rand_f(np, -1, 1), *m1 = rand_f(np, -0.1f, 0.1f), *m2 = rand_f(np, 0, 0.1f);
    float *dgp = dev_f(gp, np), *dm1 = dev_f(m1, np), *dm2 = dev_f(m2, np);
    adam_step(cw, gp, m1, m2, np, 1e-3, 0.9, 0.999, 1e-8, 2e-5, 7);
    g_be->adam_step(dcw, dgp, dm1, dm2, np, 1e-3, 0.9, 0.999, 1e-8, 2e-5, 7);
    cmp("adam step: params", dcw, cw, np, TOL);
    cmp("adam step: second moments", dm2, m2, np, TOL);
    dev_release();
    test_release();
}

static void shape_checks(void) {
    const int C = g_C;
    printf("shapes: C=%d, batch %d, T=%d, F=%d, attention %d, %d speakers\n", C, g_B, g_T, kFeat, kAtt, kClasses);
    conv_case("block 0 (F -> C, K=5)", kFeat, C, 5, 1);
    conv_case("1x1 (C -> C)", C, C, 1, 1);
    conv_case("Res2Net branch (C/8, K=3, d=2)", C / 8, C / 8, 3, 2);
    conv_case("MFA (3C -> 3C)", 3 * C, 3 * C, 1, 1);
    conv_case("attention (A -> 3C)", kAtt, 3 * C, 1, 1);
    batchnorm_case("(B, C, T)", C, g_T);
    batchnorm_case("(B, A, T)", kAtt, g_T);
    batchnorm_case("pooled (B, 6C, 1)", 6 * C, 1);
    pooling_case();
    elementwise_case();
    head_case();
}

int main(int argc, char **argv) {
    if (argc == 4) {
        g_C = atoi(argv[1]), g_B = atoi(argv[2]), g_T = atoi(argv[3]);
    } else if (argc != 1) {
        fprintf(stderr, "usage: %s [C B T]\n", argv[0]);
        return 2;
    }
    if (g_C < 8 || g_C % 8 || g_B < 2 || g_T < 8) {
        fprintf(stderr, "%s: C must be a multiple of 8, B >= 2, T >= 8\n", argv[0]);
        return 2;
    }
    return test_main_cuda(argv[0], "test_gpu_shapes", 20251111, shape_checks);
}
