// Additive angular margin softmax head; see kernels/aam_softmax.h.
//
// cache layout (floats):  probs (B, S) | cos_target (B) | enorm (B) | wnorm (S)
//                         | ehat (B, E) | what (S, E)
// workspace (backward):   dcos (B, S) | dehat (B, E) | dwhat (S, E)
#include "kernels/aam_softmax.h"
#include "kernels/aam_cache.h"

#include <math.h>

#include "kernels/elementwise_math.h"
#include "kernels/gemm.h"
#include "kernels/base/spk_assert.h"

#define NORM_EPS 1e-12f  // F.normalize default
#define ROW_BLOCK 256

size_t aam_softmax_cache_floats(int B, int E, int S) { return aam_cache_floats(B, E, S); }

size_t aam_softmax_workspace_floats(int B, int E, int S) {
    return (size_t)B * S + (size_t)B * E + (size_t)S * E;
}

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
    float cos_m, sin_m, th, mm;
} margin_consts;

static margin_consts margin_of(float m) {
    const double pi = 3.14159265358979323846;
    margin_consts c;
    c.cos_m = (float)cos(m);
    c.sin_m = (float)sin(m);
    c.th = (float)cos(pi - m);
    c.mm = (float)(sin(pi - m) * m);
    return c;
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
    const margin_consts mc = margin_of(margin);
    double total = 0.0;
    int ncorrect = 0;
    for (int b0 = 0; b0 < B; b0 += ROW_BLOCK) {
        const int nb = B - b0 < ROW_BLOCK ? B - b0 : ROW_BLOCK;
        float row_loss[ROW_BLOCK];
        int row_ok[ROW_BLOCK];
#pragma omp parallel for schedule(dynamic, 1) if ((size_t)nb * S >= 32768)
        for (int i = 0; i < nb; i++) {
            const int b = b0 + i, y = labels[b];
            SPK_ASSERT(y >= 0 && y < S);
            float* row = c.probs + (size_t)b * S;
            int am = 0;
            for (int j = 1; j < S; j++)
                if (row[j] > row[am]) am = j;
            const float ct = row[y];
            c.cos_target[b] = ct;
            // logits in place
#pragma omp simd
            for (int j = 0; j < S; j++) row[j] *= scale;
            row[y] = scale * spk_aam_phi(ct, mc.cos_m, mc.sin_m, mc.th, mc.mm);
            const float zy = row[y];
            float mx = row[0];
            for (int j = 1; j < S; j++) mx = row[j] > mx ? row[j] : mx;
            float s = 0.0f;
#pragma omp simd reduction(+ : s)
            for (int j = 0; j < S; j++) {
                const float e = spk_expf(row[j] - mx);
                row[j] = e;
                s += e;
            }
            const float inv = 1.0f / s;
#pragma omp simd
            for (int j = 0; j < S; j++) row[j] *= inv;
            row_loss[i] = mx + logf(s) - zy;
            row_ok[i] = am == y;
        }
        for (int i = 0; i < nb; i++) {
            total += row_loss[i];
            ncorrect += row_ok[i];
        }
    }
    *loss = (float)(total / B);
    *correct = ncorrect;
}

void aam_softmax_backward(float* demb, float* dw, float dloss, const float* cache, const float* emb,
                          const float* w, const int* labels, int B, int E, int S, float margin,
                          float scale, float* workspace) {
    (void)emb;
    (void)w;  // normalized copies and norms are in the cache
    SPK_ASSERT(B > 0 && E > 0 && S > 0);
    if (!demb && !dw) return;
    const aam_cache_t c = aam_cache_view(cache, B, E, S);
    float* dcos = workspace;               // (B, S)
    float* dehat = dcos + (size_t)B * S;   // (B, E)
    float* dwhat = dehat + (size_t)B * E;  // (S, E)
    const margin_consts mc = margin_of(margin);
    const float g = dloss / (float)B * scale;  // d loss / d logit, times d logit / d cos
#pragma omp parallel for schedule(dynamic, 1) if ((size_t)B * S >= 32768)
    for (int b = 0; b < B; b++) {
        const float* p = c.probs + (size_t)b * S;
        float* d = dcos + (size_t)b * S;
        const int y = labels[b];
#pragma omp simd
        for (int j = 0; j < S; j++) d[j] = g * p[j];
        d[y] = g * (p[y] - 1.0f) * spk_aam_dphi(c.cos_target[b], mc.cos_m, mc.sin_m, mc.th);
    }
    if (demb) {
        spk_sgemm('N', 'N', B, E, S, 1.0f, dcos, S, c.what, E, 0.0f, dehat, E);
        normalize_rows_backward(demb, dehat, c.ehat, c.enorm, B, E);
    }
    if (dw) {
        spk_sgemm('T', 'N', S, E, B, 1.0f, dcos, S, c.ehat, E, 0.0f, dwhat, E);
        normalize_rows_backward(dw, dwhat, c.what, c.wnorm, S, E);
    }
}
