// Additive angular margin softmax head; see kernels/aam_softmax.h. Cache and workspace layouts:
// kernels/aam_layout.h; margin math: kernels/elementwise_math.h; rows: kernels/cpu/rows.h.
#include "kernels/aam_softmax.h"

#include <math.h>

#include "kernels/aam_layout.h"
#include "kernels/base/spk_assert.h"
#include "kernels/cpu/rows.h"
#include "kernels/elementwise_math.h"
#include "kernels/gemm.h"

#define NORM_EPS 1e-12f  // F.normalize default

size_t aam_softmax_cache_floats(int B, int E, int S) { return aam_cache_floats(B, E, S); }

size_t aam_softmax_workspace_floats(int B, int E, int S) { return aam_workspace_floats(B, E, S); }

// out = in / max(|in|, eps) for each of `rows` rows of length E; norm[r] = |in_r| (unclamped)
static void normalize_rows(float* out, float* norm, const float* in, int rows, int E) {
#pragma omp parallel for schedule(dynamic, 16) if ((size_t)rows * E >= 32768)
    for (int r = 0; r < rows; r++) {
        const float* x = in + (size_t)r * E;
        float* y = out + (size_t)r * E;
        double ss = 0.0;
        for (int e = 0; e < E; e++) ss += (double)x[e] * x[e];
        const float n = (float)sqrt(ss);
        norm[r] = n;
        const float inv = 1.0f / (n > NORM_EPS ? n : NORM_EPS);
        for (int e = 0; e < E; e++) y[e] = x[e] * inv;
    }
}

// Backward of y = x / max(|x|, eps): dx += (g - y (y.g)) / |x| where |x| > eps, else g / eps.
static void normalize_rows_backward(float* dx, const float* g, const float* y, const float* norm,
                                    int rows, int E) {
#pragma omp parallel for schedule(dynamic, 16) if ((size_t)rows * E >= 32768)
    for (int r = 0; r < rows; r++) {
        const float* gr = g + (size_t)r * E;
        const float* yr = y + (size_t)r * E;
        float* d = dx + (size_t)r * E;
        const float n = norm[r];
        if (n > NORM_EPS) {
            float dot = 0.0f;
            for (int e = 0; e < E; e++) dot += yr[e] * gr[e];
            const float inv = 1.0f / n;
            for (int e = 0; e < E; e++) d[e] += (gr[e] - yr[e] * dot) * inv;
        } else {
            for (int e = 0; e < E; e++) d[e] += gr[e] / NORM_EPS;
        }
    }
}

typedef struct {
    aam_cache_t c;
    const int* labels;
    int S;
    float scale;
    spk_aam_margin_t margin;
} aam_rows;

// Row b of cos (B, S), in place in the probs slot: cos -> logits (scale * cos, scale * phi at
// the label) -> softmax. Also the row's cos_target, loss and argmax(cos) hit.
static spk_row_loss_t aam_row(void* ctx, int b) {
    const aam_rows* r = ctx;
    const int S = r->S, y = r->labels[b];
    const float scale = r->scale;
    SPK_ASSERT(y >= 0 && y < S);
    float* row = r->c.probs + (size_t)b * S;
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

void aam_softmax_forward(float* loss, int* correct, float* cache, const float* emb, const float* w,
                         const int* labels, int B, int E, int S, float margin, float scale,
                         float* workspace) {
    (void)workspace;  // forward needs no scratch; kept for a uniform interface
    SPK_ASSERT(B > 0 && E > 0 && S > 0);
    aam_cache_t c = aam_cache_view(cache, B, E, S);
    normalize_rows(c.ehat, c.enorm, emb, B, E);
    normalize_rows(c.what, c.wnorm, w, S, E);
    // cos (B, S) computed into the probs slot, then turned into probabilities row by row
    spk_sgemm('N', 'T', B, S, E, 1.0f, c.ehat, E, c.what, E, 0.0f, c.probs, S);
    aam_rows r = {c, labels, S, scale, spk_aam_margin(margin)};
    spk_row_losses(loss, correct, B, (size_t)S, aam_row, &r);
}

void aam_softmax_backward(float* demb, float* dw, float dloss, const float* cache, const float* emb,
                          const float* w, const int* labels, int B, int E, int S, float margin,
                          float scale, float* workspace) {
    (void)emb;
    (void)w;  // normalized copies and norms are in the cache
    SPK_ASSERT(B > 0 && E > 0 && S > 0);
    if (!demb && !dw) return;
    const aam_cache_t c = aam_cache_view(cache, B, E, S);
    const aam_workspace_t ws = aam_workspace_view(workspace, B, E, S);
    const spk_aam_margin_t mc = spk_aam_margin(margin);
    const float g = dloss / (float)B * scale;  // d loss / d logit, times d logit / d cos
#pragma omp parallel for schedule(dynamic, 1) if ((size_t)B * S >= 32768)
    for (int b = 0; b < B; b++) {
        const float* p = c.probs + (size_t)b * S;
        float* d = ws.dcos + (size_t)b * S;
        const int y = labels[b];
#pragma omp simd
        for (int j = 0; j < S; j++) d[j] = g * p[j];
        d[y] = g * (p[y] - 1.0f) * spk_aam_dphi(c.cos_target[b], mc);
    }
    if (demb) {
        spk_sgemm('N', 'N', B, E, S, 1.0f, ws.dcos, S, c.what, E, 0.0f, ws.dehat, E);
        normalize_rows_backward(demb, ws.dehat, c.ehat, c.enorm, B, E);
    }
    if (dw) {
        spk_sgemm('T', 'N', S, E, B, 1.0f, ws.dcos, S, c.ehat, E, 0.0f, ws.dwhat, E);
        normalize_rows_backward(dw, ws.dwhat, c.what, c.wnorm, S, E);
    }
}
