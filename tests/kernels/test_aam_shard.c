// The AAM-softmax head sharded over classes (kernels/aam_shard.h): the whole head's classes cut
// into K contiguous slices (K = 1, 2, 3, 5, uneven), each slice's forward, the rows combined in
// double as the ranks combine them, must give the whole head's loss and hits
// (kernels/aam_softmax.h); the slices' embedding gradients must add up to the whole head's,
// their class-weight gradients be its rows. Then every backend against the CPU kernels on one
// slice whose labels lie inside and outside it.
// The world-size-invariant kernels: slices of whole class blocks (K = 1, 2, 3, 5) give the same
// bits as one slice for every loss, the embeddings' gradient sums and every class row's, on 1 and
// 2 threads, and the whole head's values within rounding; every backend agrees with the CPU.
#include "backends.h"
#include "kernels/aam_layout.h"
#include "kernels/aam_shard.h"
#include "kernels/aam_softmax.h"
#include "kernels/rows_norm.h"

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

// ---- the world-size-invariant mode -------------------------------------------------------------
typedef struct {
    float *loss;  // (G) each row's
    int hits;
    float *dehat;  // (G, E) the sums over every slice, rounded
    float *dw;     // (S, E) every slice's rows, rounded
} exact_out_t;

// A slice's rows: every class of [first, first + n), or (keep) only the kept ones, as Partial FC's
// sampling leaves them: their weights, global classes, and the labels as positions among them.
typedef struct {
    int n, first;  // rows; first: 0 when sampled (labels are positions)
    const float *w;
    int *cls, *y;  // cls NULL: every class
} slice_t;

static slice_t slice_rows(const head_t *h, const unsigned char *keep, int first, int n) {
    if (!keep) return (slice_t){n, first, h->w + (size_t)first * h->E, NULL, h->y};
    slice_t r = {0, 0, NULL, alloc_i((size_t)n + 1), alloc_i(h->G)};
    float *w = alloc_f((size_t)n * h->E + 1);
    for (int c = first; c < first + n; c++)
        if (keep[c]) {
            memcpy(w + (size_t)r.n * h->E, h->w + (size_t)c * h->E, sizeof(float) * (size_t)h->E);
            r.cls[r.n++] = c;
        }
    for (int g = 0; g < h->G; g++) {
        r.y[g] = -1;
        for (int j = 0; j < r.n; j++)
            if (r.cls[j] == h->y[g]) r.y[g] = j;
    }
    r.w = w;
    return r;
}

// The invariant kernels over K slices of whole blocks (head_shard_slice's rule), combined as the
// ranks combine them: the rows' largest logits, each slice's exp sums and embedding-gradient sums
// as partial sums merged, the losses from the merged sums (dloss 1 / G per row). keep: the
// classes scored (NULL: all; the labels' classes must be kept).
static exact_out_t exact_sliced(const head_t *h, const unsigned char *keep, int K, int block, int group, float margin,
                                float scale) {
    const int G = h->G, E = h->E, S = h->S, nb = (S + block - 1) / block;
    int *first = alloc_i(K + 1), *am = alloc_i((size_t)K * G);
    for (int k = 0; k <= K; k++) {
        const int f = block * (int)((int64_t)nb * k / K);
        first[k] = f < S ? f : S;
    }
    float *rows = alloc_f((size_t)K * G * AAM_SHARD_ROW), *ms = alloc_f(2 * (size_t)G);
    float **cache = (float **)test_alloc(sizeof(float *) * K);
    slice_t *sl = (slice_t *)test_alloc(sizeof(slice_t) * K);
    for (int k = 0; k < K; k++) {
        sl[k] = slice_rows(h, keep, first[k], first[k + 1] - first[k]);
        const int n = sl[k].n;
        float *r = rows + (size_t)k * G * AAM_SHARD_ROW;
        cache[k] = alloc_f(aam_shard_cache_floats(G, E, n));
        if (n == 0) {  // a slice that scores nothing (as the layer fills it)
            for (int g = 0; g < G; g++) {
                r[g * AAM_SHARD_ROW + AAM_SHARD_LSE] = r[g * AAM_SHARD_ROW + AAM_SHARD_COSMAX] = -INFINITY;
                r[g * AAM_SHARD_ROW + AAM_SHARD_TARGET] = 0.0f;
                am[(size_t)k * G + g] = -1;
            }
            continue;
        }
        aam_shard_forward_fixed(r, am + (size_t)k * G, cache[k], h->emb, sl[k].w, sl[k].y, sl[k].cls, G, E, n,
                                sl[k].first, block, margin, scale);
        if (sl[k].cls)  // back to global classes
            for (int g = 0; g < G; g++) am[(size_t)k * G + g] = sl[k].cls[am[(size_t)k * G + g]];
    }
    for (int g = 0; g < G; g++) {
        ms[g] = -INFINITY;
        for (int k = 0; k < K; k++) ms[g] = fmaxf(ms[g], rows[((size_t)k * G + g) * AAM_SHARD_ROW + AAM_SHARD_LSE]);
    }
    xsum_t den = host_sums(G), dehat = host_sums((int64_t)G * E);
    for (int k = 0; k < K; k++) {
        xsum_t part = host_sums(G);
        if (sl[k].n > 0) aam_shard_expsum_exact(part, ms, cache[k], G, E, sl[k].n);
        xsum_merge(den, part, G);
    }
    exact_out_t o = {alloc_f(G), 0, alloc_f((size_t)G * E), alloc_f((size_t)S * E)};
    for (int g = 0; g < G; g++) {
        const double sum = xsum_value_of(den, g);
        double target = 0, best = -INFINITY;
        int arg = -1;
        for (int k = 0; k < K; k++) {
            const float *r = rows + ((size_t)k * G + g) * AAM_SHARD_ROW;
            target += r[AAM_SHARD_TARGET];
            if (r[AAM_SHARD_COSMAX] > best) best = r[AAM_SHARD_COSMAX], arg = am[(size_t)k * G + g];
        }
        ms[G + g] = (float)sum;
        o.loss[g] = (float)((double)ms[g] + log(sum) - target);
        o.hits += arg == h->y[g];
    }
    memset(o.dw, 0, sizeof(float) * (size_t)S * E);
    for (int k = 0; k < K; k++) {
        const int n = sl[k].n;
        if (n == 0) continue;
        xsum_t part = host_sums((int64_t)G * E), dw = host_sums((int64_t)n * E);
        float *tmp = alloc_f((size_t)n * E), *ws = alloc_f(aam_shard_workspace_floats(G, E, n));
        aam_shard_backward_exact(part, tmp, dw, ms, 1.0f / (float)G, cache[k], sl[k].y, sl[k].cls, G, E, n, sl[k].first,
                                 block, margin, scale, ws, group);
        xsum_merge(dehat, part, (int64_t)G * E);
        float *d = sums_to_floats(dw, (int64_t)n * E);
        for (int j = 0; j < n; j++)
            memcpy(o.dw + (size_t)(sl[k].cls ? sl[k].cls[j] : first[k] + j) * E, d + (size_t)j * E,
                   sizeof(float) * (size_t)E);
    }
    xsum_to_float(o.dehat, dehat, (int64_t)G * E);
    return o;
}

static int same_out(const exact_out_t *a, const exact_out_t *b, int G, int E, int S) {
    return a->hits == b->hits && memcmp(a->loss, b->loss, sizeof(float) * (size_t)G) == 0 &&
           memcmp(a->dehat, b->dehat, sizeof(float) * (size_t)G * E) == 0 &&
           memcmp(a->dw, b->dw, sizeof(float) * (size_t)S * E) == 0;
}

static void exact_case(int G, int E, int S, int block, int group, float scale) {
    const float margin = 0.2f;
    head_t h = make(G, E, S);
    const char *tag = cname("G%d E%d S%d block %d group %d s%g", G, E, S, block, group, scale);
    char t[96];
    snprintf(t, sizeof t, "%s", tag);
    const exact_out_t one = exact_sliced(&h, NULL, 1, block, group, margin, scale);
    // the whole head's plain kernels
    float loss, *de = zeros_f((size_t)G * E), *dw = zeros_f((size_t)S * E);
    int correct;
    float *cache = alloc_f(aam_softmax_cache_floats(G, E, S)), *ws = alloc_f(aam_softmax_workspace_floats(G, E, S));
    aam_softmax_forward(&loss, &correct, cache, h.emb, h.w, h.y, G, E, S, margin, scale, ws);
    aam_softmax_backward(de, dw, 1.0f, cache, h.emb, h.w, h.y, G, E, S, margin, scale, ws);
    double sum = 0;
    for (int g = 0; g < G; g++) sum += one.loss[g];
    check_scalar(cname("exact loss %s", t), sum / G, loss, 1e-5, 1e-6);
    check_true(one.hits == correct, cname("exact hits %s == the whole head's", t));
    float *z = alloc_f((size_t)G * E), *norm = alloc_f(G), *demb = zeros_f((size_t)G * E);
    rows_normalize_forward(z, norm, h.emb, G, E, AAM_NORM_EPS);
    rows_normalize_backward(demb, one.dehat, z, norm, G, E, AAM_NORM_EPS);
    check_close(cname("exact demb %s", t), demb, de, (size_t)G * E, 1e-4, 1e-5 * max_abs(de, (size_t)G * E));
    check_close(cname("exact dw %s", t), one.dw, dw, (size_t)S * E, 1e-4, 1e-6 * max_abs(dw, (size_t)S * E));
    // any slices of whole blocks, any thread count: the same bits
    for (int K = 2; K <= 5 && K <= (S + block - 1) / block; K += K < 3 ? 1 : 2) {
        const exact_out_t k = exact_sliced(&h, NULL, K, block, group, margin, scale);
        check_true(same_out(&one, &k, G, E, S), cname("exact %s: %d slices, the bits of one", t, K));
    }
    const int before = with_threads(1);
    const exact_out_t t1 = exact_sliced(&h, NULL, 2, block, group, margin, scale);
    with_threads(2);
    const exact_out_t t2 = exact_sliced(&h, NULL, 2, block, group, margin, scale);
    with_threads(before);
    check_true(same_out(&one, &t1, G, E, S) && same_out(&one, &t2, G, E, S),
               cname("exact %s: 1 and 2 threads, the same bits", t));
    test_release();
}

// Partial FC's sampled rows (the labels' classes, all in the lower half, and about a third of the
// other classes of that half, so that the slices of the upper half score none): any slices of
// whole blocks give the bits of one.
static void exact_sampled_case(int G, int E, int S, int block, int group) {
    head_t h = make(G, E, S);
    unsigned char *keep = (unsigned char *)test_alloc((size_t)S);
    for (int c = 0; c < S; c++) keep[c] = c < S / 2 && rng_int(3) == 0;
    for (int g = 0; g < G; g++) keep[h.y[g] %= S / 2] = 1;
    const char *tag = cname("sampled G%d E%d S%d block %d group %d", G, E, S, block, group);
    char t[96];
    snprintf(t, sizeof t, "%s", tag);
    const exact_out_t one = exact_sliced(&h, keep, 1, block, group, 0.2f, 30.0f);
    for (int K = 2; K <= 5 && K <= (S + block - 1) / block; K += K < 3 ? 1 : 2) {
        const exact_out_t k = exact_sliced(&h, keep, K, block, group, 0.2f, 30.0f);
        check_true(same_out(&one, &k, G, E, S), cname("exact %s: %d slices, the bits of one", t, K));
    }
    test_release();
}

static void cpu_checks(void) {
    for (int K = 1; K <= 5; K += K < 3 ? 1 : 2) {
        against_whole(6, 8, 11, K, 30.0f);
        against_whole(6, 8, 11, K, 2.0f);     // every class's probability well above rounding
        against_whole(40, 32, 300, K, 2.0f);  // threaded rows
    }
    exact_case(6, 8, 11, 1, 1, 30.0f);
    exact_case(12, 16, 50, 3, 2, 2.0f);
    exact_case(40, 32, 300, 4, 4, 2.0f);  // threaded
    exact_sampled_case(6, 8, 30, 1, 2);
    exact_sampled_case(12, 16, 90, 3, 3);
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

// The invariant kernels on one slice: rows and argmax, the exp sums and the gradient sums
// (rounded) within tolerance of the CPU's, from the CPU's largest logits and sums. sampled: about
// half of the slice's classes (and its labels'), as Partial FC leaves them.
static void backend_exact_case(int G, int E, int S0, int first0, int block, int group, int sampled) {
    const float margin = 0.2f, scale = 30.0f;
    head_t h = make(G, E, first0 + S0 + 7);
    unsigned char *keep = NULL;
    if (sampled) {
        keep = (unsigned char *)test_alloc((size_t)h.S);
        for (int c = 0; c < h.S; c++) keep[c] = rng_int(2) == 0;
        for (int g = 0; g < G; g++) keep[h.y[g]] = 1;
    }
    const slice_t sl = slice_rows(&h, keep, first0, S0);
    const int S = sl.n, first = sl.first;
    const float *w = sl.w;
    const size_t ne = (size_t)G * E, nw = (size_t)S * E;
    const char *tag = cname("G%d E%d S%d first %d block %d%s", G, E, S, first0, block, sampled ? " sampled" : "");
    char t[96];
    snprintf(t, sizeof t, "%s", tag);
    float *rows = alloc_f((size_t)G * AAM_SHARD_ROW), *cache = alloc_f(aam_shard_cache_floats(G, E, S));
    int *am = alloc_i(G);
    aam_shard_forward_fixed(rows, am, cache, h.emb, w, sl.y, sl.cls, G, E, S, first, block, margin, scale);
    float *demb = dev_f(h.emb, ne), *dw = dev_f(w, nw), *drows = dev_f(NULL, (size_t)G * AAM_SHARD_ROW);
    float *dcache = dev_f(NULL, g_be->aam_shard_cache_floats(G, E, S));
    int *dlabels = dev_i(sl.y, G), *dam = dev_i(am, G), *dcls = sl.cls ? dev_i(sl.cls, S) : NULL;
    g_be->aam_shard_forward_fixed(drows, dam, dcache, demb, dw, dlabels, dcls, G, E, S, first, block, margin, scale);
    cmp(cname("exact rows %s", t), drows, rows, (size_t)G * AAM_SHARD_ROW, TOL_GEMM);
    int *got = alloc_i(G);
    g_be->download(got, dam, sizeof(int) * (size_t)G);
    check_true(memcmp(got, am, sizeof(int) * (size_t)G) == 0, cname("exact argmax %s", t));
    float *ms = alloc_f(2 * (size_t)G);
    for (int g = 0; g < G; g++) ms[g] = rows[(size_t)g * AAM_SHARD_ROW + AAM_SHARD_LSE];
    xsum_t den = host_sums(G), dden = xsum_layout(dev_alloc(xsum_bytes(G)), G);
    float *dms = dev_f(ms, 2 * (size_t)G);
    aam_shard_expsum_exact(den, ms, cache, G, E, S);
    g_be->aam_shard_expsum_exact(dden, dms, dcache, G, E, S);
    float *dsum = dev_f(NULL, G);
    g_be->xsum_to_float(dsum, dden, G);
    cmp(cname("exact exp sums %s", t), dsum, sums_to_floats(den, G), (size_t)G, TOL_GEMM);
    xsum_to_float(ms + G, den, G);
    dev_set(dms, ms, 2 * (size_t)G);
    xsum_t hde = host_sums((int64_t)ne), hdw = host_sums((int64_t)nw);
    xsum_t xde = xsum_layout(dev_alloc(xsum_bytes((int64_t)ne)), (int64_t)ne);
    xsum_t xdw = xsum_layout(dev_alloc(xsum_bytes((int64_t)nw)), (int64_t)nw);
    float *ws = alloc_f(aam_shard_workspace_floats(G, E, S)), *tmp = alloc_f(nw);
    float *dws = dev_f(NULL, g_be->aam_shard_workspace_floats(G, E, S)), *dtmp = dev_f(NULL, nw);
    aam_shard_backward_exact(hde, tmp, hdw, ms, 0.5f, cache, sl.y, sl.cls, G, E, S, first, block, margin, scale, ws,
                             group);
    g_be->aam_shard_backward_exact(xde, dtmp, xdw, dms, 0.5f, dcache, dlabels, dcls, G, E, S, first, block, margin,
                                   scale, dws, group);
    float *dde = dev_f(NULL, ne), *ddw = dev_f(NULL, nw);
    g_be->xsum_to_float(dde, xde, (int64_t)ne);
    g_be->xsum_to_float(ddw, xdw, (int64_t)nw);
    cmp(cname("exact dehat %s", t), dde, sums_to_floats(hde, (int64_t)ne), ne, TOL_GEMM);
    cmp(cname("exact dw %s", t), ddw, sums_to_floats(hdw, (int64_t)nw), nw, TOL_GEMM);
    dev_release();
    test_release();
}

static void backend_checks(void) {
    backend_case(19, 40, 300, 13);
    backend_case(6, 7, 5, 0);
    backend_exact_case(18, 40, 300, 12, 4, 3, 0);
    backend_exact_case(6, 7, 5, 0, 1, 1, 0);
    backend_exact_case(18, 40, 300, 12, 4, 3, 1);
}

int main(int argc, char **argv) { return test_main(argc, argv, "test_aam_shard", 12, cpu_checks, backend_checks); }
