// AAM-softmax head: forward loss / correct count vs a double reference of SpeechBrain's
// formula (both margin branches), margin 0 == plain scaled-cosine softmax cross-entropy,
// finite-difference d emb and d W, accumulation, finite gradients at cos = 1. The invariant
// mode's: each row's loss and embedding gradient the same alone as in a batch and on 1 or 2
// threads, the class-weight gradient sums the same for a batch split between calls, all close to
// the default kernels. Then every backend against the CPU kernels (tests/kernels/backends.h).
#include <omp.h>

#include "backends.h"
#include "exact_check.h"
#include "kernels/aam_softmax.h"
#include "kernels/xent.h"

typedef struct {
    int B, E, S;
    float m, s;
    float *emb, *w, *cache, *ws;
    int *y;
} aam_ctx;

static double aam_loss(void *p) {
    aam_ctx *c = (aam_ctx *)p;
    float loss;
    int correct;
    aam_softmax_forward(&loss, &correct, c->cache, c->emb, c->w, c->y, c->B, c->E, c->S, c->m, c->s, c->ws);
    return loss;
}

// double reference: returns the loss, sets *correct; cosd (B, S) receives the cosines
static double reference(const aam_ctx *c, int *correct, double *cosd) {
    const int B = c->B, E = c->E, S = c->S;
    const double m = c->m, s = c->s, pi = 3.14159265358979323846;
    double total = 0;
    int ok = 0;
    for (int b = 0; b < B; b++) {
        double ne = 0;
        for (int e = 0; e < E; e++) ne += (double)c->emb[(size_t)b * E + e] * c->emb[(size_t)b * E + e];
        ne = fmax(sqrt(ne), 1e-12);
        int am = 0;
        for (int j = 0; j < S; j++) {
            double nw = 0, dot = 0;
            for (int e = 0; e < E; e++) {
                nw += (double)c->w[(size_t)j * E + e] * c->w[(size_t)j * E + e];
                dot += (double)c->emb[(size_t)b * E + e] * c->w[(size_t)j * E + e];
            }
            cosd[(size_t)b * S + j] = dot / ne / fmax(sqrt(nw), 1e-12);
            if (cosd[(size_t)b * S + j] > cosd[(size_t)b * S + am]) am = j;
        }
        ok += am == c->y[b];
        double mx = -INFINITY, sum = 0, zy = 0;
        double *z = alloc_d(S);
        for (int j = 0; j < S; j++) {
            const double cs = cosd[(size_t)b * S + j];
            double v = cs;
            if (j == c->y[b]) {
                const double sn = sqrt(fmin(fmax(1 - cs * cs, 0), 1));
                const double phi = cs * cos(m) - sn * sin(m);
                v = cs > cos(pi - m) ? phi : cs - sin(pi - m) * m;
                zy = s * v;
            }
            z[j] = s * v;
            mx = fmax(mx, z[j]);
        }
        for (int j = 0; j < S; j++) sum += exp(z[j] - mx);
        total += mx + log(sum) - zy;
    }
    *correct = ok;
    return total / B;
}

static aam_ctx make(int B, int E, int S, float m, float s) {
    aam_ctx c = {B,
                 E,
                 S,
                 m,
                 s,
                 rand_f((size_t)B * E, -1, 1),
                 rand_f((size_t)S * E, -1, 1),
                 alloc_f(aam_softmax_cache_floats(B, E, S)),
                 alloc_f(aam_softmax_workspace_floats(B, E, S)),
                 alloc_i(B)};
    for (int b = 0; b < B; b++) c.y[b] = rng_int(S);
    return c;
}

static void run_case(int B, int E, int S, float m, float s, int special_rows) {
    char nm[160], buf[200];
    snprintf(nm, sizeof nm, "B%d E%d S%d m%g s%g", B, E, S, m, s);
    aam_ctx c = make(B, E, S, m, s);
    if (special_rows && B >= 3) {
        // row 0: embedding opposite its class (cos ~ -1 < cos(pi - m): second branch)
        // row 1: embedding along its class (cos ~ 1: correct, margin branch, sin ~ 0)
        for (int e = 0; e < E; e++) {
            c.emb[e] = -2.0f * c.w[(size_t)c.y[0] * E + e] + rng_uniform(-1e-3f, 1e-3f);
            c.emb[E + e] = 0.5f * c.w[(size_t)c.y[1] * E + e] + rng_uniform(-0.05f, 0.05f);
        }
    }
    float loss;
    int correct;
    aam_softmax_forward(&loss, &correct, c.cache, c.emb, c.w, c.y, B, E, S, m, s, c.ws);
    double *cosd = alloc_d((size_t)B * S);
    int wc;
    const double want = reference(&c, &wc, cosd);
    snprintf(buf, sizeof buf, "aam loss %s", nm);
    check_scalar(buf, loss, want, 2e-5, 1e-5);
    snprintf(buf, sizeof buf, "aam correct %s", nm);
    check_true(correct == wc, buf);
    if (special_rows) check_true(cosd[c.y[0]] < cos(3.14159265358979 - m), "row 0 hits branch 2");

    const size_t ne = (size_t)B * E, nw = (size_t)S * E;
    float *de = zeros_f(ne), *dw = zeros_f(nw);
    aam_softmax_backward(de, dw, 1.0f, c.cache, c.emb, c.w, c.y, B, E, S, m, s, c.ws);
    // the loss is a float mean, so finite differences only resolve gradients of small batches;
    // the large case is compared with a single-threaded run instead (same math up to the
    // GEMM's summation order, which may depend on the thread count)
    if (B <= 8) {
        snprintf(buf, sizeof buf, "aam fd demb %s", nm);
        fd_check(buf, c.emb, de, ne, aam_loss, &c, 2e-3f, 2e-2, 3e-3, 200);
        snprintf(buf, sizeof buf, "aam fd dW %s", nm);
        fd_check(buf, c.w, dw, nw, aam_loss, &c, 2e-3f, 2e-2, 3e-3, 200);
    } else {
        const int nt = omp_get_max_threads();
        omp_set_num_threads(1);
        float *de1 = zeros_f(ne), *dw1 = zeros_f(nw), loss1;
        int correct1;
        aam_softmax_forward(&loss1, &correct1, c.cache, c.emb, c.w, c.y, B, E, S, m, s, c.ws);
        aam_softmax_backward(de1, dw1, 1.0f, c.cache, c.emb, c.w, c.y, B, E, S, m, s, c.ws);
        omp_set_num_threads(nt);
        snprintf(buf, sizeof buf, "aam 1 thread == %d threads %s", nt, nm);
        check_true(fabsf(loss1 - loss) <= 1e-5f * fabsf(loss) && correct1 == correct, buf);
        check_close(buf, de1, de, ne, 1e-5, 1e-5 * max_abs(de, ne));
        check_close(buf, dw1, dw, nw, 1e-5, 1e-5 * max_abs(dw, nw));
    }
    aam_loss(&c);
    float *pe = rand_f(ne, -1, 1), *pw = rand_f(nw, -1, 1), *ae = copy_f(pe, ne), *aw = copy_f(pw, nw);
    aam_softmax_backward(ae, aw, 1.0f, c.cache, c.emb, c.w, c.y, B, E, S, m, s, c.ws);
    snprintf(buf, sizeof buf, "aam demb accumulates %s", nm);
    check_accumulated(buf, ae, pe, de, ne);
    snprintf(buf, sizeof buf, "aam dW accumulates %s", nm);
    check_accumulated(buf, aw, pw, dw, nw);
    float *de3 = zeros_f(ne);
    aam_softmax_backward(de3, NULL, 3.0f, c.cache, c.emb, c.w, c.y, B, E, S, m, s, c.ws);
    for (size_t i = 0; i < ne; i++) de[i] *= 3.0f;
    snprintf(buf, sizeof buf, "aam dloss scaling %s", nm);
    check_close(buf, de3, de, ne, 1e-4, 1e-7 * max_abs(de, ne));
    test_release();
}

// margin 0: the head is softmax cross-entropy over s * cos
static void margin_zero(void) {
    const int B = 6, E = 12, S = 9;
    const float s = 30.0f;
    aam_ctx c = make(B, E, S, 0.0f, s);
    float loss;
    int correct;
    aam_softmax_forward(&loss, &correct, c.cache, c.emb, c.w, c.y, B, E, S, 0.0f, s, c.ws);
    double *cosd = alloc_d((size_t)B * S);
    int wc;
    reference(&c, &wc, cosd);
    float *z = alloc_f((size_t)B * S), *p = alloc_f((size_t)B * S);
    for (int i = 0; i < B * S; i++) z[i] = (float)(s * cosd[i]);
    float xl;
    int xc;
    xent_forward(&xl, &xc, p, z, c.y, B, S);
    check_scalar("aam m=0 loss == xent(s*cos)", loss, xl, 1e-5, 1e-6);
    check_true(correct == xc, "aam m=0 correct == xent correct");
    // gradients: d/dz of xent, mapped through z = s * cos, must equal the AAM gradient w.r.t.
    // cos; compare the full chain via d emb against finite differences of the xent objective
    float *de = zeros_f((size_t)B * E);
    aam_softmax_backward(de, NULL, 1.0f, c.cache, c.emb, c.w, c.y, B, E, S, 0.0f, s, c.ws);
    fd_check("aam m=0 fd demb", c.emb, de, (size_t)B * E, aam_loss, &c, 2e-3f, 2e-2, 3e-3, 100);
    test_release();
}

// embedding exactly along its class: cos rounds to ~1, gradients must stay finite
static void cos_one(void) {
    const int B = 2, E = 8, S = 5;
    aam_ctx c = make(B, E, S, 0.2f, 30.0f);
    for (int b = 0; b < B; b++)
        for (int e = 0; e < E; e++) c.emb[(size_t)b * E + e] = c.w[(size_t)c.y[b] * E + e];
    aam_loss(&c);
    float *de = zeros_f((size_t)B * E), *dw = zeros_f((size_t)S * E);
    aam_softmax_backward(de, dw, 1.0f, c.cache, c.emb, c.w, c.y, B, E, S, 0.2f, 30.0f, c.ws);
    int finite = 1;
    for (int i = 0; i < B * E; i++) finite &= isfinite(de[i]);
    for (int i = 0; i < S * E; i++) finite &= isfinite(dw[i]);
    check_true(finite, "aam gradients finite at cos = 1");
    test_release();
}

// ---- the world-size-invariant mode ----------------------------------------------------------
// Rows [b0, b1) of c through forward_rows and backward_exact (dloss per sample), on `threads`.
static void rows_pass(const aam_ctx *c, int b0, int b1, float dloss, float *row_loss, int *correct, float *demb,
                      float *dw_tmp, xsum_t dw, int threads) {
    const int n = b1 - b0, before = with_threads(threads);
    float *cache = alloc_f(aam_softmax_cache_floats(n, c->E, c->S)),
          *ws = alloc_f(aam_softmax_workspace_floats(n, c->E, c->S));
    const float *emb = c->emb + (size_t)b0 * c->E;
    aam_softmax_forward_rows(row_loss + b0, correct, cache, emb, c->w, c->y + b0, n, c->E, c->S, c->m, c->s, ws);
    aam_softmax_backward_exact(demb + (size_t)b0 * c->E, dw_tmp, dw, dloss, cache, emb, c->w, c->y + b0, n, c->E, c->S,
                               c->m, c->s, ws, 1);
    with_threads(before);
}

static void invariant_case(int B, int E, int S) {
    aam_ctx c = make(B, E, S, 0.2f, 30.0f);
    const size_t ne = (size_t)B * E, nw = (size_t)S * E;
    float *loss2 = alloc_f(B), *loss1 = alloc_f(B), *demb2 = zeros_f(ne), *demb1 = zeros_f(ne), *tmp = alloc_f(nw);
    xsum_t dw2 = host_sums((int64_t)nw), dw1 = host_sums((int64_t)nw);
    int correct2, correct1 = 0, part;
    rows_pass(&c, 0, B, 1.0f / B, loss2, &correct2, demb2, tmp, dw2, 2);
    for (int b = B - 1; b >= 0; b--) {  // one sample at a time, on one thread
        rows_pass(&c, b, b + 1, 1.0f / B, loss1, &part, demb1, tmp, dw1, 1);
        correct1 += part;
    }
    check_true(memcmp(loss1, loss2, 4 * (size_t)B) == 0 && memcmp(demb1, demb2, 4 * ne) == 0 && correct1 == correct2 &&
                   same_sums(dw1, dw2, (int64_t)nw),
               cname("aam rows B%d E%d S%d: each sample alone == in the batch (losses, gradients, sums)", B, E, S));
    float loss, *demb = zeros_f(ne), *dw = zeros_f(nw);
    int correct;
    aam_softmax_forward(&loss, &correct, c.cache, c.emb, c.w, c.y, B, E, S, c.m, c.s, c.ws);
    aam_softmax_backward(demb, dw, 1.0f, c.cache, c.emb, c.w, c.y, B, E, S, c.m, c.s, c.ws);
    double sum = 0;
    for (int b = 0; b < B; b++) sum += loss2[b];
    check_scalar(cname("aam rows B%d E%d S%d: mean of the row losses", B, E, S), sum / B, loss, 1e-5, 1e-6);
    check_true(correct == correct2, "aam rows: the same hits");
    check_close(cname("aam exact B%d E%d S%d demb vs backward", B, E, S), demb2, demb, ne, 1e-4, 1e-6);
    check_close(cname("aam exact B%d E%d S%d dw vs backward", B, E, S), sums_to_floats(dw2, (int64_t)nw), dw, nw, 1e-4,
                1e-6);
    // groups of 3 samples (B a multiple): whole, or split along the groups
    const int gb = B / 3 * 3, first = gb / 3 / 2 * 3;  // B >= 6: both parts hold whole groups
    if (gb < 6) {
        test_release();
        return;
    }
    float *cache = alloc_f(aam_softmax_cache_floats(gb, E, S)), *ws = alloc_f(aam_softmax_workspace_floats(gb, E, S));
    float *de = zeros_f(ne);
    xsum_t g3 = host_sums((int64_t)nw), g3split = host_sums((int64_t)nw);
    aam_softmax_forward_rows(loss2, &correct, cache, c.emb, c.w, c.y, gb, E, S, c.m, c.s, ws);
    aam_softmax_backward_exact(de, tmp, g3, 1.0f / gb, cache, c.emb, c.w, c.y, gb, E, S, c.m, c.s, ws, 3);
    for (int k = 0; k < 2; k++) {
        const int b0 = k ? first : 0, b1 = k ? gb : first;
        aam_softmax_forward_rows(loss2, &correct, cache, c.emb + (size_t)b0 * E, c.w, c.y + b0, b1 - b0, E, S, c.m, c.s,
                                 ws);
        aam_softmax_backward_exact(de, tmp, g3split, 1.0f / gb, cache, c.emb + (size_t)b0 * E, c.w, c.y + b0, b1 - b0,
                                   E, S, c.m, c.s, ws, 3);
    }
    check_true(same_sums(g3, g3split, (int64_t)nw), cname("aam exact B%d groups of 3: a split along the groups", gb));
    test_release();
}

static void cpu_checks(void) {
    invariant_case(5, 16, 10);
    invariant_case(33, 32, 300);  // threaded rows, several blocks of class rows
    margin_zero();
    cos_one();
    run_case(4, 16, 10, 0.2f, 30.0f, 1);
    run_case(5, 8, 7, 0.2f, 30.0f, 1);
    run_case(3, 12, 6, 0.35f, 10.0f, 1);
    run_case(7, 24, 40, 0.2f, 30.0f, 0);
    run_case(40, 32, 300, 0.2f, 30.0f, 0);  // threaded rows
}

// ---- every backend against the CPU kernels --------------------------------------------------
static void backend_case(int B, int E, int S) {
    const float margin = 0.2f, scale = 30.0f;
    aam_ctx c = make(B, E, S, margin, scale);
    for (int b = 0; b < B; b += 2)  // close to its class weight: a likely hit
        for (int e = 0; e < E; e++)
            c.emb[(size_t)b * E + e] = c.w[(size_t)c.y[b] * E + e] + 0.3f * c.emb[(size_t)b * E + e];
    const size_t ne = (size_t)B * E, nw = (size_t)S * E;
    float loss;
    int correct;
    aam_softmax_forward(&loss, &correct, c.cache, c.emb, c.w, c.y, B, E, S, margin, scale, c.ws);
    float *demb = dev_f(c.emb, ne), *dw = dev_f(c.w, nw), *dloss = dev_f(NULL, 1);
    float *dcache = dev_f(NULL, g_be->aam_softmax_cache_floats(B, E, S));
    float *dws = dev_f(NULL, g_be->aam_softmax_workspace_floats(B, E, S));
    int *dlabels = dev_i(c.y, B), *dcorrect = dev_i(&correct, 1);
    g_be->aam_softmax_forward(dloss, dcorrect, dcache, demb, dw, dlabels, B, E, S, margin, scale, dws);
    cmp_scalar(cname("aam loss B%d E%d S%d", B, E, S), dloss, loss, TOL_GEMM);
    cmp_int(cname("aam correct B%d E%d S%d", B, E, S), dcorrect, correct);
    cmp(cname("aam probs B%d E%d S%d", B, E, S), dcache, c.cache, (size_t)B * S, TOL_GEMM);

    grads_t g = grads_prefill(2, (size_t[]){ne, nw});
    aam_softmax_backward(g.cpu[0], g.cpu[1], 1.0f, c.cache, c.emb, c.w, c.y, B, E, S, margin, scale, c.ws);
    g_be->aam_softmax_backward(g.dev[0], g.dev[1], 1.0f, dcache, demb, dw, dlabels, B, E, S, margin, scale, dws);
    g_be->aam_softmax_backward(g.dev2[0], g.dev2[1], 1.0f, dcache, demb, dw, dlabels, B, E, S, margin, scale, dws);
    char tag[48];
    snprintf(tag, sizeof tag, "B%d E%d S%d", B, E, S);
    grads_check(&g, "aam", tag, (const char *[]){"demb", "dw"}, (double[]){TOL_GEMM, TOL_GEMM});

    // the invariant mode's row losses and exact class-weight gradient
    float *rl = alloc_f(B), *hde = zeros_f(ne), *tmp = alloc_f(nw), *drl = dev_f(NULL, B), *dde = dev_f(NULL, ne);
    float *dtmp = dev_f(NULL, nw), *dsw = dev_f(NULL, nw);
    xsum_t hs = host_sums((int64_t)nw), ds = xsum_layout(dev_alloc(xsum_bytes((int64_t)nw)), (int64_t)nw);
    aam_softmax_forward_rows(rl, &correct, c.cache, c.emb, c.w, c.y, B, E, S, margin, scale, c.ws);
    g_be->aam_softmax_forward_rows(drl, dcorrect, dcache, demb, dw, dlabels, B, E, S, margin, scale, dws);
    cmp(cname("aam row losses %s", tag), drl, rl, B, TOL_GEMM);
    cmp_int(cname("aam rows correct %s", tag), dcorrect, correct);
    aam_softmax_backward_exact(hde, tmp, hs, 0.25f, c.cache, c.emb, c.w, c.y, B, E, S, margin, scale, c.ws, 1);
    g_be->aam_softmax_backward_exact(dde, dtmp, ds, 0.25f, dcache, demb, dw, dlabels, B, E, S, margin, scale, dws, 1);
    cmp(cname("aam exact demb %s", tag), dde, hde, ne, TOL_GEMM);
    g_be->xsum_to_float(dsw, ds, (int64_t)nw);
    cmp(cname("aam exact dw %s", tag), dsw, sums_to_floats(hs, (int64_t)nw), nw, TOL_GEMM);
    dev_release();
    test_release();
}

static void backend_checks(void) {
    backend_case(19, 40, 300);
    backend_case(6, 7, 5);
}

int main(int argc, char **argv) { return test_main(argc, argv, "test_aam_softmax", 11, cpu_checks, backend_checks); }
