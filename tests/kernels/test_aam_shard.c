// The AAM-softmax head sharded over classes (kernels/aam_shard.h): the whole head's classes cut
// into K contiguous slices (K = 1, 2, 3, 5, uneven), each slice's forward, the rows combined in
// double as the ranks combine them, must give the whole head's loss and hits
// (kernels/aam_softmax.h); the slices' embedding gradients must add up to the whole head's,
// their class-weight gradients be its rows. Then every backend against the CPU kernels on one
// slice whose labels lie inside and outside it.
#include "backends.h"
#include "kernels/aam_shard.h"
#include "kernels/aam_softmax.h"

typedef struct {
    int G, E, S;
    float *emb, *w;
    int *y;
} head_t;

static head_t make(int G, int E, int S) {
    head_t h = {G, E, S, rand_f((size_t)G * E, -1, 1), rand_f((size_t)S * E, -1, 1), alloc_i(G)};
    for (int g = 0; g < G; g++) h.y[g] = rng_int(S);
    for (int g = 0; g < G; g += 3)  // near its class: a likely hit, a confident row
        for (int e = 0; e < h.E; e++) h.emb[(size_t)g * E + e] += 1.5f * h.w[(size_t)h.y[g] * E + e];
    return h;
}

// The whole head's loss (mean), hits and gradients (dloss = 1) from the kernels of K slices.
static void sharded(const head_t *h, int K, float margin, float scale, double *loss, int *correct, float *demb,
                    float *dw) {
    const int G = h->G, E = h->E, S = h->S;
    float *rows = alloc_f((size_t)K * G * AAM_SHARD_ROW), *factor = alloc_f(G), *part = alloc_f((size_t)G * E);
    int *am = alloc_i((size_t)K * G), *first = alloc_i(K + 1);
    float **cache = (float **)test_alloc(sizeof(float *) * K);
    for (int k = 0; k <= K; k++) first[k] = k + (int)((int64_t)(S - K) * k * k / ((int64_t)K * K));  // uneven
    for (int k = 0; k < K; k++) {
        const int n = first[k + 1] - first[k];
        cache[k] = alloc_f(aam_shard_cache_floats(G, E, n));
        aam_shard_forward(rows + (size_t)k * G * AAM_SHARD_ROW, am + (size_t)k * G, cache[k], h->emb,
                          h->w + (size_t)first[k] * E, h->y, G, E, n, first[k], margin, scale);
    }
    double total = 0;
    int hits = 0;
    double *lse = alloc_d(G);
    for (int g = 0; g < G; g++) {
        double mx = -INFINITY, s = 0, target = 0, best = -INFINITY;
        int arg = -1;
        for (int k = 0; k < K; k++) mx = fmax(mx, rows[((size_t)k * G + g) * AAM_SHARD_ROW + AAM_SHARD_LSE]);
        for (int k = 0; k < K; k++) {
            const float *r = rows + ((size_t)k * G + g) * AAM_SHARD_ROW;
            s += exp(r[AAM_SHARD_LSE] - mx);
            target += r[AAM_SHARD_TARGET];
            if (r[AAM_SHARD_COSMAX] > best) best = r[AAM_SHARD_COSMAX], arg = am[(size_t)k * G + g];
        }
        lse[g] = mx + log(s);
        total += lse[g] - target;
        hits += arg == h->y[g];
    }
    *loss = total / G;
    *correct = hits;
    memset(demb, 0, sizeof(float) * (size_t)G * E);
    for (int k = 0; k < K; k++) {
        const int n = first[k + 1] - first[k];
        for (int g = 0; g < G; g++)
            factor[g] = (float)exp(rows[((size_t)k * G + g) * AAM_SHARD_ROW + AAM_SHARD_LSE] - lse[g]);
        float *ws = alloc_f(aam_shard_workspace_floats(G, E, n));
        aam_shard_backward(part, dw + (size_t)first[k] * E, factor, 1.0f / G, cache[k], h->y, G, E, n, first[k], margin,
                           scale, ws);
        for (size_t i = 0; i < (size_t)G * E; i++) demb[i] += part[i];
    }
}

static void against_whole(int G, int E, int S, int K, float scale) {
    const float margin = 0.2f;
    head_t h = make(G, E, S);
    float loss, *de = zeros_f((size_t)G * E), *dw = zeros_f((size_t)S * E);
    int correct;
    float *cache = alloc_f(aam_softmax_cache_floats(G, E, S)), *ws = alloc_f(aam_softmax_workspace_floats(G, E, S));
    aam_softmax_forward(&loss, &correct, cache, h.emb, h.w, h.y, G, E, S, margin, scale, ws);
    aam_softmax_backward(de, dw, 1.0f, cache, h.emb, h.w, h.y, G, E, S, margin, scale, ws);
    double sloss;
    int scorrect;
    float *sde = alloc_f((size_t)G * E), *sdw = zeros_f((size_t)S * E);
    sharded(&h, K, margin, scale, &sloss, &scorrect, sde, sdw);
    check_scalar(cname("shard loss G%d E%d S%d K%d", G, E, S, K), sloss, loss, 1e-5, 1e-6);
    check_true(scorrect == correct, cname("shard hits G%d E%d S%d K%d == the whole head's", G, E, S, K));
    check_close(cname("shard demb G%d E%d S%d K%d", G, E, S, K), sde, de, (size_t)G * E, 1e-4,
                1e-5 * max_abs(de, (size_t)G * E));
    check_close(cname("shard dw G%d E%d S%d K%d s%g", G, E, S, K, scale), sdw, dw, (size_t)S * E, 1e-4,
                1e-6 * max_abs(dw, (size_t)S * E));
    test_release();
}

static void cpu_checks(void) {
    for (int K = 1; K <= 5; K += K < 3 ? 1 : 2) {
        against_whole(6, 8, 11, K, 30.0f);
        against_whole(6, 8, 11, K, 2.0f);     // every class's probability well above rounding
        against_whole(40, 32, 300, K, 2.0f);  // threaded rows
    }
}

// ---- every backend against the CPU kernels --------------------------------------------------
static void backend_case(int G, int E, int S, int first) {
    const float margin = 0.2f, scale = 30.0f;
    head_t h = make(G, E, first + S + 7);  // labels below, inside and above the slice
    const float *w = h.w + (size_t)first * E;
    const size_t ne = (size_t)G * E, nw = (size_t)S * E;
    float *rows = alloc_f((size_t)G * AAM_SHARD_ROW), *cache = alloc_f(aam_shard_cache_floats(G, E, S));
    int *am = alloc_i(G);
    aam_shard_forward(rows, am, cache, h.emb, w, h.y, G, E, S, first, margin, scale);
    float *demb = dev_f(h.emb, ne), *dw = dev_f(w, nw), *drows = dev_f(NULL, (size_t)G * AAM_SHARD_ROW);
    float *dcache = dev_f(NULL, g_be->aam_shard_cache_floats(G, E, S));
    int *dlabels = dev_i(h.y, G), *dam = dev_i(am, G);
    g_be->aam_shard_forward(drows, dam, dcache, demb, dw, dlabels, G, E, S, first, margin, scale);
    const char *tag = cname("G%d E%d S%d first %d", G, E, S, first);
    char t[64];
    snprintf(t, sizeof t, "%s", tag);
    cmp(cname("shard rows %s", t), drows, rows, (size_t)G * AAM_SHARD_ROW, TOL_GEMM);
    int *got = alloc_i(G);
    g_be->download(got, dam, sizeof(int) * (size_t)G);
    check_true(memcmp(got, am, sizeof(int) * (size_t)G) == 0, cname("shard argmax %s", t));
    cmp(cname("shard probs %s", t), dcache, cache, (size_t)G * S, TOL_GEMM);
    float *factor = rand_f(G, 0.1f, 1.0f), *dfactor = dev_f(factor, G);
    float *ws = alloc_f(aam_shard_workspace_floats(G, E, S));
    float *dws = dev_f(NULL, g_be->aam_shard_workspace_floats(G, E, S));
    grads_t gr = grads_prefill(2, (size_t[]){ne, nw});
    aam_shard_backward(gr.cpu[0], gr.cpu[1], factor, 0.5f, cache, h.y, G, E, S, first, margin, scale, ws);
    g_be->aam_shard_backward(gr.dev[0], gr.dev[1], dfactor, 0.5f, dcache, dlabels, G, E, S, first, margin, scale, dws);
    g_be->aam_shard_backward(gr.dev2[0], gr.dev2[1], dfactor, 0.5f, dcache, dlabels, G, E, S, first, margin, scale,
                             dws);
    grads_check(&gr, "shard", t, (const char *[]){"demb", "dw"}, (double[]){TOL_GEMM, TOL_GEMM});
    dev_release();
    test_release();
}

static void backend_checks(void) {
    backend_case(19, 40, 300, 13);
    backend_case(6, 7, 5, 0);
}

int main(int argc, char **argv) { return test_main(argc, argv, "test_aam_shard", 12, cpu_checks, backend_checks); }
