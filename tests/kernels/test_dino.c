// DINO cross-entropy: row losses and ds vs a double reference written from the definitions
// (Vg < V and Vg == V, one teacher view, small, odd and DINO-sized K, huge logits), finite
// differences of sum_u row_loss[u], grad_scale scaling, ds overwritten, an utterance's bits the
// same within any batch and on any thread count; then every backend against the CPU kernel
// (tests/kernels/backends.h).
#include "backends.h"
#include "kernels/dino.h"

typedef struct {
    int B, V, Vg, K;
    float its, itt;
    float *s, *t, *centre, *loss, *ds, *work;
} dino_ctx;

static double dino_total(void *p) {
    dino_ctx *c = (dino_ctx *)p;
    dino_xent(c->loss, c->ds, c->s, c->t, c->centre, c->B, c->V, c->Vg, c->K, c->its, c->itt, 1.0f, c->work);
    double sum = 0;
    for (int u = 0; u < c->B; u++) sum += c->loss[u];
    return sum;
}

// The loss of each utterance and ds = gs * d(sum of the losses) / ds, in double from the
// definitions, from the scaled logits as float forms them ((t - centre) * itt, s * its).
static void dino_ref(double *loss, double *ds, const dino_ctx *c, double gs) {
    const int V = c->V, Vg = c->Vg, K = c->K, P = Vg * (V - 1);
    double *pt = alloc_d((size_t)Vg * K), *lps = alloc_d((size_t)V * K);
    for (int u = 0; u < c->B; u++) {
        for (int g = 0; g < Vg; g++) {
            const float *t = c->t + ((size_t)u * Vg + g) * K;
            double *p = pt + (size_t)g * K, mx = -INFINITY, sum = 0;
            for (int k = 0; k < K; k++) {
                p[k] = (t[k] - c->centre[k]) * c->itt;
                mx = p[k] > mx ? p[k] : mx;
            }
            for (int k = 0; k < K; k++) sum += p[k] = exp(p[k] - mx);
            for (int k = 0; k < K; k++) p[k] /= sum;
        }
        for (int v = 0; v < V; v++) {
            const float *s = c->s + ((size_t)u * V + v) * K;
            double *l = lps + (size_t)v * K, mx = -INFINITY, sum = 0;
            for (int k = 0; k < K; k++) {
                l[k] = s[k] * c->its;
                mx = l[k] > mx ? l[k] : mx;
            }
            for (int k = 0; k < K; k++) sum += exp(l[k] - mx);
            for (int k = 0; k < K; k++) l[k] -= mx + log(sum);
        }
        double L = 0;
        for (int g = 0; g < Vg; g++)
            for (int v = 0; v < V; v++)
                if (v != g)
                    for (int k = 0; k < K; k++) L -= pt[(size_t)g * K + k] * lps[(size_t)v * K + k];
        loss[u] = L / P;
        for (int v = 0; v < V; v++) {
            const int nv = Vg - (v < Vg);
            for (int k = 0; k < K; k++) {
                double T = 0;
                for (int g = 0; g < Vg; g++)
                    if (g != v) T += pt[(size_t)g * K + k];
                ds[((size_t)u * V + v) * K + k] = gs * c->its / P * (nv * exp(lps[(size_t)v * K + k]) - T);
            }
        }
    }
}

static dino_ctx make_ctx(int B, int V, int Vg, int K, float srange, float trange, float its, float itt) {
    const size_t ns = (size_t)B * V * K, nt = (size_t)B * Vg * K;
    dino_ctx c = {B,
                  V,
                  Vg,
                  K,
                  its,
                  itt,
                  rand_f(ns, -srange, srange),
                  rand_f(nt, -trange, trange),
                  rand_f(K, -trange / 4, trange / 4),
                  alloc_f(B),
                  alloc_f(ns),
                  alloc_f(dino_xent_workspace_floats(B, V, Vg, K))};
    return c;
}

static void run_case(int B, int V, int Vg, int K, float srange, float trange, int fd_checks) {
    char nm[160], tag[96];
    snprintf(tag, sizeof tag, "B%d V%d Vg%d K%d ranges %g %g", B, V, Vg, K, srange, trange);
    const size_t ns = (size_t)B * V * K;
    dino_ctx c = make_ctx(B, V, Vg, K, srange, trange, 10.0f, 25.0f);  // tau_s 0.1, tau_t 0.04
    fill_nan(c.ds, ns);                                                // overwritten, not accumulated
    fill_nan(c.work, dino_xent_workspace_floats(B, V, Vg, K));
    dino_xent(c.loss, c.ds, c.s, c.t, c.centre, B, V, Vg, K, c.its, c.itt, 1.0f, c.work);
    double *wl = alloc_d(B), *wds = alloc_d(ns);
    dino_ref(wl, wds, &c, 1.0);
    snprintf(nm, sizeof nm, "dino row_loss %s", tag);
    check_close_d(nm, c.loss, wl, B, 2e-6, 1e-6);
    double scale = 0;
    for (size_t i = 0; i < ns; i++) scale = fabs(wds[i]) > scale ? fabs(wds[i]) : scale;
    snprintf(nm, sizeof nm, "dino ds %s", tag);
    check_close_d(nm, c.ds, wds, ns, 1e-5, 1e-6 * scale);
    if (fd_checks) {  // the gradient of sum_u row_loss[u]
        float *ds1 = copy_f(c.ds, ns);
        snprintf(nm, sizeof nm, "dino fd ds %s", tag);
        fd_check(nm, c.s, ds1, ns, dino_total, &c, 1e-2f, 5e-3, 2e-3, fd_checks);
        dino_total(&c);
    }

    // grad_scale scales ds alone
    float *loss2 = alloc_f(B), *ds2 = alloc_f(ns), *ds_scaled = alloc_f(ns);
    dino_xent(loss2, ds2, c.s, c.t, c.centre, B, V, Vg, K, c.its, c.itt, 2.5f, c.work);
    for (size_t i = 0; i < ns; i++) ds_scaled[i] = 2.5f * c.ds[i];
    snprintf(nm, sizeof nm, "dino grad_scale 2.5 %s", tag);
    check_close(nm, ds2, ds_scaled, ns, 1e-6, 1e-7 * scale);
    snprintf(nm, sizeof nm, "dino row_loss without grad_scale %s", tag);
    check_close(nm, loss2, c.loss, B, 0, 0);

    // the utterances from the second on, as a batch of their own, on one thread: the same bits
    if (B > 1) {
        const size_t offs = (size_t)V * K, offt = (size_t)Vg * K;
        float *l1 = alloc_f(B - 1), *d1 = alloc_f(ns - offs),
              *w1 = alloc_f(dino_xent_workspace_floats(B - 1, V, Vg, K));
        const int threads = omp_get_max_threads();
        omp_set_num_threads(1);
        dino_xent(l1, d1, c.s + offs, c.t + offt, c.centre, B - 1, V, Vg, K, c.its, c.itt, 1.0f, w1);
        omp_set_num_threads(threads);
        snprintf(nm, sizeof nm, "dino row_loss of a sub-batch, one thread, same bits %s", tag);
        check_close(nm, l1, c.loss + 1, B - 1, 0, 0);
        snprintf(nm, sizeof nm, "dino ds of a sub-batch, one thread, same bits %s", tag);
        check_close(nm, d1, c.ds + offs, ns - offs, 0, 0);
    }
    test_release();
}

static void cpu_checks(void) {
    run_case(3, 4, 2, 7, 1, 0.5f, 84);    // 2 global + 2 local crops
    run_case(2, 3, 3, 50, 1, 0.5f, 300);  // Vg == V: no local crops
    run_case(2, 2, 1, 13, 1, 0.5f, 52);   // one teacher view: view 0 has no pair of its own
    run_case(4, 6, 2, 300, 2, 1, 200);    // 6 views, threaded
    run_case(40, 3, 2, 1001, 2, 1, 0);    // many rows, odd K
    run_case(2, 4, 2, 65536, 2, 1, 0);    // DINO's K
    run_case(3, 4, 2, 257, 50, 100, 0);   // huge logits: stable
}

// ---- every backend against the CPU kernel ---------------------------------------------------
static void backend_case(int B, int V, int Vg, int K) {
    const size_t ns = (size_t)B * V * K, nt = (size_t)B * Vg * K;
    dino_ctx c = make_ctx(B, V, Vg, K, 2, 1, 10.0f, 25.0f);
    dino_xent(c.loss, c.ds, c.s, c.t, c.centre, B, V, Vg, K, c.its, c.itt, 0.5f, c.work);
    const size_t nw = g_be->dino_xent_workspace_floats(B, V, Vg, K);
    float *ds_ = dev_f(c.s, ns), *dt = dev_f(c.t, nt), *dc = dev_f(c.centre, K), *dwork = dev_f(NULL, nw);
    float *dloss = dev_f(NULL, B), *dds = dev_f(rand_f(ns, -1, 1), ns);  // ds is overwritten
    float *dloss2 = dev_f(NULL, B), *dds2 = dev_f(NULL, ns);
    g_be->dino_xent(dloss, dds, ds_, dt, dc, B, V, Vg, K, c.its, c.itt, 0.5f, dwork);
    g_be->dino_xent(dloss2, dds2, ds_, dt, dc, B, V, Vg, K, c.its, c.itt, 0.5f, dwork);
    cmp(cname("dino row_loss B%d V%d Vg%d K%d", B, V, Vg, K), dloss, c.loss, B, TOL);
    cmp(cname("dino ds B%d V%d Vg%d K%d", B, V, Vg, K), dds, c.ds, ns, TOL);
    same_bits(cname("dino row_loss twice B%d V%d Vg%d K%d", B, V, Vg, K), dloss, dloss2, B);
    same_bits(cname("dino ds twice B%d V%d Vg%d K%d", B, V, Vg, K), dds, dds2, ns);
    if (B > 1) {  // the utterances from the second on as a batch of their own: the same bits
        const size_t offs = (size_t)V * K;
        float *dl1 = dev_f(NULL, B - 1), *dd1 = dev_f(NULL, ns - offs);
        float *dw1 = dev_f(NULL, g_be->dino_xent_workspace_floats(B - 1, V, Vg, K));
        g_be->dino_xent(dl1, dd1, ds_ + offs, dt + (size_t)Vg * K, dc, B - 1, V, Vg, K, c.its, c.itt, 0.5f, dw1);
        same_bits(cname("dino row_loss of a sub-batch B%d V%d Vg%d K%d", B, V, Vg, K), dl1, dloss + 1, B - 1);
        same_bits(cname("dino ds of a sub-batch B%d V%d Vg%d K%d", B, V, Vg, K), dd1, dds + offs, ns - offs);
    }
    dev_release();
    test_release();
}

static void backend_checks(void) {
    backend_case(5, 4, 2, 300);
    backend_case(3, 3, 3, 1001);
    backend_case(33, 2, 1, 7);
    backend_case(2, 6, 2, 65536);
}

int main(int argc, char **argv) { return test_main(argc, argv, "test_dino", 53, cpu_checks, backend_checks); }
