// DINO cross-entropy (kernels/dino.h) in three steps, each over rows in parallel: the teacher's
// softmax rows into the workspace, then each student row's loss over its teacher views and its
// gradient, then each utterance's mean of its student rows' losses in view order. Sums run in
// fixed lanes of doubles (SPK_LANE_SUM): a row gives the same bits wherever it sits.
#include "kernels/dino.h"

#include <math.h>
#include <stddef.h>

#include "kernels/base/spk_assert.h"
#include "kernels/cpu/rows.h"

#define PAR_MIN 32768  // below this many elements, threading costs more than it saves

size_t dino_xent_workspace_floats(int B, int V, int Vg, int K) { return dino_xent_work_floats(B, V, Vg, K); }

// p = softmax((t - centre) * inv_tau) over K
static void teacher_row(float *p, const float *t, const float *centre, int K, float inv_tau) {
    float mx = -INFINITY;
#pragma omp simd reduction(max : mx)
    for (int k = 0; k < K; k++) {
        p[k] = (t[k] - centre[k]) * inv_tau;
        mx = p[k] > mx ? p[k] : mx;
    }
    double sum;
    SPK_LANE_SUM(sum, float, k, K, p[k] = spk_expf(p[k] - mx));
    const float inv = (float)(1.0 / sum);
#pragma omp simd
    for (int k = 0; k < K; k++) p[k] *= inv;
}

// Position k of a student row whose ds[k] holds T[k]: ds[k] = cn ps[k] - c T[k]; returns
// T[k] log ps[k], log ps[k] = (a[k] - mx) - log_sum.
static inline float student_term(float *ds, const float *s, int k, float inv_tau, float mx, float log_sum,
                                 float inv_sum, float cn, float c) {
    const float a = s[k] * inv_tau - mx, T = ds[k];
    ds[k] = cn * (spk_expf(a) * inv_sum) - c * T;
    return T * (a - log_sum);
}

// Student view v of an utterance (its logits s, its teachers' probabilities pt (Vg, K)): ds =
// c * (n_v ps - T) with T = sum_{g != v} pt[g] (added in g order), and the returned loss
// -sum_k T[k] log ps[k] (its pairs' losses summed).
static float student_row(float *ds, const float *s, const float *pt, int v, int Vg, int K, float inv_tau, float c) {
    int nv = 0;  // T builds up in ds
    for (int g = 0; g < Vg; g++) {
        if (g == v) continue;
        const float *p = pt + (size_t)g * K;
        if (nv++ == 0) {
#pragma omp simd
            for (int k = 0; k < K; k++) ds[k] = p[k];
        } else {
#pragma omp simd
            for (int k = 0; k < K; k++) ds[k] += p[k];
        }
    }
    if (nv == 0)
        for (int k = 0; k < K; k++) ds[k] = 0.0f;
    float mx = -INFINITY;
#pragma omp simd reduction(max : mx)
    for (int k = 0; k < K; k++) {
        const float a = s[k] * inv_tau;
        mx = a > mx ? a : mx;
    }
    double sum;
    SPK_LANE_SUM(sum, float, k, K, spk_expf(s[k] * inv_tau - mx));
    const float log_sum = (float)log(sum), inv_sum = (float)(1.0 / sum), cn = c * (float)nv;
    double tlp;  // sum_k T[k] log ps[k]
    SPK_LANE_SUM(tlp, float, k, K, student_term(ds, s, k, inv_tau, mx, log_sum, inv_sum, cn, c));
    return (float)-tlp;
}

void dino_xent(float *row_loss, float *ds, const float *s, const float *t, const float *centre, int B, int V, int Vg,
               int K, float inv_tau_s, float inv_tau_t, float grad_scale, float *work) {
    SPK_ASSERT(B > 0 && V >= 2 && Vg >= 1 && Vg <= V && K > 0);
    const int P = Vg * (V - 1);
    float *pt = work, *view_loss = work + (size_t)B * Vg * K;
    const float c = (float)((double)grad_scale * inv_tau_s / P);
    const int nt = B * Vg, ns = B * V;
#pragma omp parallel for schedule(dynamic, 1) if ((size_t)nt * K >= PAR_MIN)
    for (int r = 0; r < nt; r++) teacher_row(pt + (size_t)r * K, t + (size_t)r * K, centre, K, inv_tau_t);
#pragma omp parallel for schedule(dynamic, 1) if ((size_t)ns * K >= PAR_MIN)
    for (int r = 0; r < ns; r++) {
        const int u = r / V, v = r - u * V;
        view_loss[r] =
            student_row(ds + (size_t)r * K, s + (size_t)r * K, pt + (size_t)u * Vg * K, v, Vg, K, inv_tau_s, c);
    }
    for (int u = 0; u < B; u++) {
        double sum = 0.0;
        for (int v = 0; v < V; v++) sum += view_loss[(size_t)u * V + v];
        row_loss[u] = (float)(sum / P);
    }
}
