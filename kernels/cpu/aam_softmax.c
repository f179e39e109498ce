// Additive angular margin softmax head; see kernels/aam_softmax.h. Cache and workspace layouts:
// kernels/aam_layout.h; margin math: kernels/elementwise_math.h; rows: kernels/cpu/rows.h.
#include "kernels/aam_softmax.h"

#include <math.h>
#include <string.h>

#include "kernels/aam_layout.h"
#include "kernels/aam_shard.h"
#include "kernels/base/spk_assert.h"
#include "kernels/cpu/exact_rows.h"
#include "kernels/cpu/rows.h"
#include "kernels/elementwise_math.h"
#include "kernels/gemm.h"

#define NORM_EPS AAM_NORM_EPS

size_t aam_softmax_cache_floats(int B, int E, int S) { return aam_cache_floats(B, E, S); }

size_t aam_softmax_workspace_floats(int B, int E, int S) { return aam_workspace_floats(B, E, S); }

// out = in / max(|in|, eps) for each of `rows` rows of length E; norm[r] = |in_r| (unclamped)
static void normalize_rows(float *out, float *norm, const float *in, int rows, int E) {
#pragma omp parallel for schedule(static) if ((size_t)rows * E >= 32768)
    for (int r = 0; r < rows; r++) {
        const float *x = in + (size_t)r * E;
        float *y = out + (size_t)r * E;
        double ss = 0.0;
        for (int e = 0; e < E; e++) ss += (double)x[e] * x[e];
        const float n = (float)sqrt(ss);
        norm[r] = n;
        const float inv = 1.0f / (n > NORM_EPS ? n : NORM_EPS);
        for (int e = 0; e < E; e++) y[e] = x[e] * inv;
    }
}

// Backward of y = x / max(|x|, eps) for one row: d += (g - y (y.g)) / |x| where |x| > eps,
// else g / eps.
static inline void normalize_row_backward(float *d, const float *g, const float *y, float n, int E) {
    if (n > NORM_EPS) {
        float dot = 0.0f;
        for (int e = 0; e < E; e++) dot += y[e] * g[e];
        const float inv = 1.0f / n;
        for (int e = 0; e < E; e++) d[e] += (g[e] - y[e] * dot) * inv;
    } else {
        for (int e = 0; e < E; e++) d[e] += g[e] / NORM_EPS;
    }
}

static void normalize_rows_backward(float *dx, const float *g, const float *y, const float *norm, int rows, int E) {
#pragma omp parallel for schedule(static) if ((size_t)rows * E >= 32768)
    for (int r = 0; r < rows; r++)
        normalize_row_backward(dx + (size_t)r * E, g + (size_t)r * E, y + (size_t)r * E, norm[r], E);
}

typedef struct {
    aam_cache_t c;
    const int *labels;
    int S;
    float scale;
    spk_aam_margin_t margin;
} aam_rows;

// Row b of cos (B, S), in place in the probs slot: cos -> logits (scale * cos, scale * phi at
// the label) -> softmax. Also the row's cos_target, loss and argmax(cos) hit.
static spk_row_loss_t aam_row(void *ctx, int b) {
    const aam_rows *r = ctx;
    const int S = r->S, y = r->labels[b];
    const float scale = r->scale;
    SPK_ASSERT(y >= 0 && y < S);
    float *row = r->c.probs + (size_t)b * S;
    const int am = spk_row_argmax(row, S);
    const float ct = row[y];
    r->c.cos_target[b] = ct;
#pragma omp simd
    for (int j = 0; j < S; j++) row[j] *= scale;
    row[y] = scale * spk_aam_phi(ct, r->margin);
    const float zy = row[y];
    const float mx = row[spk_row_argmax(row, S)];
    const float s = spk_softmax_row(row, row, S, mx);
    return (spk_row_loss_t){mx + logf(s) - zy, am == y};
}

// Normalized embeddings and class weights into the cache, and cos (B, S) into its probs slot
// (by `gemm`: spk_sgemm, or spk_sgemm_rows in the world-size-invariant mode).
static aam_cache_t cosines(float *cache, const float *emb, const float *w, int B, int E, int S, spk_gemm_fn *gemm) {
    SPK_ASSERT(B > 0 && E > 0 && S > 0);
    aam_cache_t c = aam_cache_view(cache, B, E, S);
    normalize_rows(c.ehat, c.enorm, emb, B, E);
    normalize_rows(c.what, c.wnorm, w, S, E);
    gemm('N', 'T', B, S, E, 1.0f, c.ehat, E, c.what, E, 0.0f, c.probs, S);
    return c;
}

void aam_softmax_forward(float *loss, int *correct, float *cache, const float *emb, const float *w, const int *labels,
                         int B, int E, int S, float margin, float scale, float *workspace) {
    (void)workspace;  // forward needs no scratch; kept for a uniform interface
    // cos turned into probabilities row by row in the probs slot
    aam_rows r = {cosines(cache, emb, w, B, E, S, spk_sgemm), labels, S, scale, spk_aam_margin(margin)};
    spk_row_losses(loss, correct, B, (size_t)S, aam_row, &r);
}

// dcos (B, S) = d (g * loss_b) / d cos for every row: g times the softmax's gradient, and the
// margin's derivative at the label.
static void cos_grad(float *dcos, const aam_cache_t *c, const int *labels, int B, int S, float g,
                     const spk_aam_margin_t *mc) {
#pragma omp parallel for schedule(dynamic, 1) if ((size_t)B * S >= 32768)
    for (int b = 0; b < B; b++) {
        const float *p = c->probs + (size_t)b * S;
        float *d = dcos + (size_t)b * S;
        const int y = labels[b];
#pragma omp simd
        for (int j = 0; j < S; j++) d[j] = g * p[j];
        d[y] = g * (p[y] - 1.0f) * spk_aam_dphi(c->cos_target[b], *mc);
    }
}

void aam_softmax_backward(float *demb, float *dw, float dloss, const float *cache, const float *emb, const float *w,
                          const int *labels, int B, int E, int S, float margin, float scale, float *workspace) {
    (void)emb;
    (void)w;  // normalized copies and norms are in the cache
    SPK_ASSERT(B > 0 && E > 0 && S > 0);
    if (!demb && !dw) return;
    const aam_cache_t c = aam_cache_view(cache, B, E, S);
    const aam_workspace_t ws = aam_workspace_view(workspace, B, E, S);
    const spk_aam_margin_t mc = spk_aam_margin(margin);
    // d loss / d logit, times d logit / d cos
    cos_grad(ws.dcos, &c, labels, B, S, dloss / (float)B * scale, &mc);
    if (demb) {
        spk_sgemm('N', 'N', B, E, S, 1.0f, ws.dcos, S, c.what, E, 0.0f, ws.dehat, E);
        normalize_rows_backward(demb, ws.dehat, c.ehat, c.enorm, B, E);
    }
    if (dw) {
        spk_sgemm('T', 'N', S, E, B, 1.0f, ws.dcos, S, c.ehat, E, 0.0f, ws.dwhat, E);
        normalize_rows_backward(dw, ws.dwhat, c.what, c.wnorm, S, E);
    }
}

// ---- the world-size-invariant mode --------------------------------------------------------------

void aam_softmax_forward_rows(float *row_loss, int *correct, float *cache, const float *emb, const float *w,
                              const int *labels, int B, int E, int S, float margin, float scale, float *workspace) {
    (void)workspace;
    aam_rows r = {cosines(cache, emb, w, B, E, S, spk_sgemm_rows), labels, S, scale, spk_aam_margin(margin)};
    int hits = 0;
#pragma omp parallel for schedule(dynamic, 1) reduction(+ : hits) if ((size_t)B * S >= 32768)
    for (int b = 0; b < B; b++) {
        const spk_row_loss_t l = aam_row(&r, b);
        row_loss[b] = l.loss;
        hits += l.ok;
    }
    *correct = hits;
}

// Class rows of dW per block: about 16K floats (a block and its sums stay in L2 while every
// sample is added), from the shapes only.
static int class_block_rows(int S, int E) {
    const int rows = 16384 / E;
    return rows < 1 ? 1 : (rows < S ? rows : S);
}

// Runs of class rows that one fixed GEMM computes: fixed by the shapes alone. block 0 (the
// replicated head): class_block_rows' runs from row 0; block > 0 (a slice of the sharded head):
// its rows of one block of `block` global classes (row j's class: cls[j], or first + j), so a
// run is the same in any slice (kernels/aam_shard.h).
typedef struct {
    const int *cls;
    int first, block, rows;
} class_runs_t;

static class_runs_t class_runs(int S, int E, const int *cls, int first, int block) {
    return (class_runs_t){cls, first, block, block > 0 ? 0 : class_block_rows(S, E)};
}
static int64_t block_of(class_runs_t r, int j) { return (r.cls ? r.cls[j] : (int64_t)r.first + j) / r.block; }
static int run_starts(class_runs_t r, int j) {
    return r.block > 0 ? j == 0 || block_of(r, j - 1) != block_of(r, j) : j % r.rows == 0;
}
static int run_end(class_runs_t r, int j, int S) {
    if (r.block == 0) return j + r.rows < S ? j + r.rows : S;
    int k = j + 1;
    while (k < S && block_of(r, k) == block_of(r, j)) k++;
    return k;
}

// dw (S x E exact sums) += each group of `group` samples' class-weight gradient as one term: the
// group's dwhat = dcos^T ehat by one fixed GEMM per run of classes, then through the
// normalisation of each class row (linear: once per group). dcos is (B, S) sample-major
// (trans 'T', ld S) or (S, B) class-major ('N', ld B); dwhat (S x E) is scratch.
static void class_grads_exact(xsum_t dw, float *dw_tmp, float *dwhat, const float *dcos, char trans, int ld,
                              const aam_cache_t *c, int B, int E, int S, int group, class_runs_t runs) {
#pragma omp parallel for schedule(dynamic, 1) if ((size_t)B * S * E >= 32768)
    for (int j = 0; j < S; j++) {
        if (!run_starts(runs, j)) continue;
        const int k = run_end(runs, j, S);
        float *a = dwhat + (size_t)j * E, *d = dw_tmp + (size_t)j * E;
        for (int b0 = 0; b0 < B; b0 += group) {
            const float *dc = trans == 'T' ? dcos + (size_t)b0 * ld + j : dcos + (size_t)j * ld + b0;
            spk_sgemm_fixed(trans, 'N', k - j, E, group, 1.0f, dc, ld, c->ehat + (size_t)b0 * E, E, 0.0f, a, E);
            memset(d, 0, (size_t)(k - j) * E * sizeof(float));
            normalize_rows_backward(d, a, c->what + (size_t)j * E, c->wnorm + j, k - j, E);
            xsum_add_row(xsum_at(dw, (int64_t)j * E), d, (int64_t)(k - j) * E);
        }
    }
}

void aam_softmax_backward_exact(float *demb, float *dw_tmp, xsum_t dw, float dloss, const float *cache,
                                const float *emb, const float *w, const int *labels, int B, int E, int S, float margin,
                                float scale, float *workspace, int group) {
    (void)emb;
    (void)w;
    SPK_ASSERT(B > 0 && E > 0 && S > 0 && group > 0 && B % group == 0);
    const aam_cache_t c = aam_cache_view(cache, B, E, S);
    const aam_workspace_t ws = aam_workspace_view(workspace, B, E, S);
    const spk_aam_margin_t mc = spk_aam_margin(margin);
    cos_grad(ws.dcos, &c, labels, B, S, dloss * scale, &mc);  // a sum over samples: no 1/B
    if (demb) {
        spk_sgemm_rows('N', 'N', B, E, S, 1.0f, ws.dcos, S, c.what, E, 0.0f, ws.dehat, E);
        normalize_rows_backward(demb, ws.dehat, c.ehat, c.enorm, B, E);
    }
    if (xsum_empty(dw)) return;
    SPK_ASSERT(dw_tmp != NULL);
    class_grads_exact(dw, dw_tmp, ws.dwhat, ws.dcos, 'T', S, &c, B, E, S, group, class_runs(S, E, NULL, 0, 0));
}

// ---- the head sharded over classes (kernels/aam_shard.h) ------------------------------------------

size_t aam_shard_cache_floats(int G, int E, int S) { return aam_cache_floats(G, E, S); }

size_t aam_shard_workspace_floats(int G, int E, int S) { return aam_workspace_floats(G, E, S); }

typedef struct {
    aam_cache_t c;
    float *rows;
    int *argmax;
    const int *labels;
    int S, first;
    float scale;
    spk_aam_margin_t margin;
} shard_rows;

// Row g of cos (G, S) in place: logits, the slice's softmax and the row's results.
static void shard_row(const shard_rows *r, int g) {
    const int S = r->S, y = r->labels[g] - r->first;
    float *row = r->c.probs + (size_t)g * S, *out = r->rows + (size_t)g * AAM_SHARD_ROW;
    const int am = spk_row_argmax(row, S);
    out[AAM_SHARD_COSMAX] = row[am];
    r->argmax[g] = r->first + am;
    const int here = y >= 0 && y < S;
    const float ct = here ? row[y] : 0.0f;
    r->c.cos_target[g] = ct;
#pragma omp simd
    for (int j = 0; j < S; j++) row[j] *= r->scale;
    if (here) row[y] = r->scale * spk_aam_phi(ct, r->margin);
    out[AAM_SHARD_TARGET] = here ? row[y] : 0.0f;
    const float mx = row[spk_row_argmax(row, S)];
    out[AAM_SHARD_LSE] = mx + logf(spk_softmax_row(row, row, S, mx));
}

void aam_shard_forward(float *rows, int *argmax, float *cache, const float *emb, const float *w, const int *labels,
                       int G, int E, int S, int first, float margin, float scale) {
    const shard_rows r = {
        cosines(cache, emb, w, G, E, S, spk_sgemm), rows, argmax, labels, S, first, scale, spk_aam_margin(margin)};
#pragma omp parallel for schedule(dynamic, 1) if ((size_t)G * S >= 32768)
    for (int g = 0; g < G; g++) shard_row(&r, g);
}

void aam_shard_backward(float *demb, float *dw, const float *factor, float g, const float *cache, const int *labels,
                        int G, int E, int S, int first, float margin, float scale, float *workspace) {
    SPK_ASSERT(G > 0 && E > 0 && S > 0);
    if (!demb && !dw) return;
    const aam_cache_t c = aam_cache_view(cache, G, E, S);
    const aam_workspace_t ws = aam_workspace_view(workspace, G, E, S);
    const spk_aam_margin_t mc = spk_aam_margin(margin);
    const float gs = g * scale;
#pragma omp parallel for schedule(dynamic, 1) if ((size_t)G * S >= 32768)
    for (int b = 0; b < G; b++) {  // the whole head's probabilities, minus 1 at the label
        const float *p = c.probs + (size_t)b * S;
        float *d = ws.dcos + (size_t)b * S;
        const float f = gs * factor[b];
#pragma omp simd
        for (int j = 0; j < S; j++) d[j] = f * p[j];
        const int y = labels[b] - first;
        if (y >= 0 && y < S) d[y] = (factor[b] * p[y] - 1.0f) * gs * spk_aam_dphi(c.cos_target[b], mc);
    }
    if (demb) {
        spk_sgemm('N', 'N', G, E, S, 1.0f, ws.dcos, S, c.what, E, 0.0f, ws.dehat, E);
        memset(demb, 0, (size_t)G * E * sizeof(float));
        normalize_rows_backward(demb, ws.dehat, c.ehat, c.enorm, G, E);
    }
    if (dw) {
        spk_sgemm('T', 'N', S, E, G, 1.0f, ws.dcos, S, c.ehat, E, 0.0f, ws.dwhat, E);
        normalize_rows_backward(dw, ws.dwhat, c.what, c.wnorm, S, E);
    }
}

// ---- the sharded head in the world-size-invariant mode ---------------------------------------------

#define SHARD_COLS 16  // samples a thread takes at once over the class-major logits

void aam_shard_forward_fixed(float *rows, int *argmax, float *cache, const float *emb, const float *w,
                             const int *labels, const int *cls, int G, int E, int S, int first, int block, float margin,
                             float scale) {
    SPK_ASSERT(G > 0 && E > 0 && S > 0 && block > 0);
    const aam_cache_t c = aam_cache_view(cache, G, E, S);
    const spk_aam_margin_t mc = spk_aam_margin(margin);
    normalize_rows(c.ehat, c.enorm, emb, G, E);
    normalize_rows(c.what, c.wnorm, w, S, E);
    float *L = c.probs;  // (S, G)
    const class_runs_t runs = class_runs(S, E, cls, first, block);
#pragma omp parallel for schedule(dynamic, 1) if ((size_t)G * S * E >= 32768)
    for (int j = 0; j < S; j++) {  // one fixed GEMM per block: the block's bits in any slice
        if (!run_starts(runs, j)) continue;
        const int k = run_end(runs, j, S);
        spk_sgemm_fixed('N', 'T', k - j, G, E, 1.0f, c.what + (size_t)j * E, E, c.ehat, E, 0.0f, L + (size_t)j * G, G);
    }
#pragma omp parallel for schedule(static) if ((size_t)G * S >= 32768)
    for (int g0 = 0; g0 < G; g0 += SHARD_COLS) {
        const int n = G - g0 < SHARD_COLS ? G - g0 : SHARD_COLS;
        float cmax[SHARD_COLS], zmax[SHARD_COLS], zy[SHARD_COLS];
        int am[SHARD_COLS], y[SHARD_COLS];
        for (int i = 0; i < n; i++) {
            const int l = labels[g0 + i] - first;
            y[i] = l >= 0 && l < S ? l : -1;
            c.cos_target[g0 + i] = y[i] >= 0 ? L[(size_t)y[i] * G + g0 + i] : 0.0f;
            zy[i] = scale * spk_aam_phi(c.cos_target[g0 + i], mc);
            cmax[i] = zmax[i] = -INFINITY;
            am[i] = 0;
        }
        for (int j = 0; j < S; j++) {  // in class order: the first maximum is the first class's
            float *l = L + (size_t)j * G + g0;
            for (int i = 0; i < n; i++) {
                if (l[i] > cmax[i]) cmax[i] = l[i], am[i] = j;
                l[i] = j == y[i] ? zy[i] : l[i] * scale;
                zmax[i] = fmaxf(zmax[i], l[i]);
            }
        }
        for (int i = 0; i < n; i++) {
            float *out = rows + (size_t)(g0 + i) * AAM_SHARD_ROW;
            out[AAM_SHARD_LSE] = zmax[i];
            out[AAM_SHARD_TARGET] = y[i] >= 0 ? zy[i] : 0.0f;
            out[AAM_SHARD_COSMAX] = cmax[i];
            argmax[g0 + i] = first + am[i];
        }
    }
}

void aam_shard_expsum_exact(xsum_t sums, const float *mx, const float *cache, int G, int E, int S) {
    SPK_ASSERT(G > 0 && E > 0 && S > 0);
    const aam_cache_t c = aam_cache_view(cache, G, E, S);
#pragma omp parallel for schedule(static) if ((size_t)G * S >= 32768)
    for (int g0 = 0; g0 < G; g0 += SHARD_COLS) {
        const int n = G - g0 < SHARD_COLS ? G - g0 : SHARD_COLS;
        float t[SHARD_COLS];
        for (int j = 0; j < S; j++) {
            const float *l = c.probs + (size_t)j * G + g0;
            for (int i = 0; i < n; i++) t[i] = expf(l[i] - mx[g0 + i]);
            xsum_add_row(xsum_at(sums, g0), t, n);
        }
    }
}

void aam_shard_backward_exact(xsum_t dehat, float *dw_tmp, xsum_t dw, const float *mx_sum, float g, const float *cache,
                              const int *labels, const int *cls, int G, int E, int S, int first, int block,
                              float margin, float scale, float *workspace, int group) {
    SPK_ASSERT(G > 0 && E > 0 && S > 0 && block > 0 && group > 0 && G % group == 0);
    const aam_cache_t c = aam_cache_view(cache, G, E, S);
    const aam_workspace_t ws = aam_workspace_view(workspace, G, E, S);
    const spk_aam_margin_t mc = spk_aam_margin(margin);
    const float gs = g * scale, *mx = mx_sum, *sum = mx_sum + G;
#pragma omp parallel for schedule(static) if ((size_t)G * S >= 32768)
    for (int j = 0; j < S; j++) {  // dcos (S, G), class-major as the logits
        const float *l = c.probs + (size_t)j * G;
        float *d = ws.dcos + (size_t)j * G;
        for (int b = 0; b < G; b++) {
            const float p = expf(l[b] - mx[b]) / sum[b];
            d[b] = labels[b] - first == j ? gs * (p - 1.0f) * spk_aam_dphi(c.cos_target[b], mc) : gs * p;
        }
    }
    const class_runs_t runs = class_runs(S, E, cls, first, block);
    if (!xsum_empty(dehat)) {
        // Each block's sum over its classes, in float and class order, per sample: the block's
        // rows of what stay in cache while a thread's samples pass over them.
#pragma omp parallel for schedule(static) if ((size_t)G * S * E >= 32768)
        for (int b0 = 0; b0 < G; b0 += SHARD_COLS) {
            const int n = G - b0 < SHARD_COLS ? G - b0 : SHARD_COLS;
            float *v = ws.dehat + (size_t)b0 * E;  // the n samples' sums of the block
            for (int j = 0; j < S;) {
                const int k = run_end(runs, j, S);
                memset(v, 0, (size_t)n * E * sizeof(float));
                for (int s = j; s < k; s++) {
                    const float *wr = c.what + (size_t)s * E, *d = ws.dcos + (size_t)s * G + b0;
                    for (int i = 0; i < n; i++) {
                        float *vi = v + (size_t)i * E;
                        const float di = d[i];
#pragma omp simd
                        for (int e = 0; e < E; e++) vi[e] += di * wr[e];
                    }
                }
                xsum_add_row(xsum_at(dehat, (int64_t)b0 * E), v, (int64_t)n * E);
                j = k;
            }
        }
    }
    if (xsum_empty(dw)) return;
    SPK_ASSERT(dw_tmp != NULL);
    class_grads_exact(dw, dw_tmp, ws.dwhat, ws.dcos, 'N', G, &c, G, E, S, group, runs);
}
