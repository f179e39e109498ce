// Metric-learning losses on the host (kernels/contrastive.h).
#include "kernels/contrastive.h"

#include "kernels/base/check.h"
#include "kernels/base/spk_assert.h"
#include "kernels/gemm.h"

#include <math.h>
#include <stdlib.h>

enum { LANES = 8 };

// A dot product in a fixed order: LANES partial sums, then a fixed tree (vectorises without
// reassociation, and gives the same bits wherever it runs).
static float dot(const float *a, const float *b, int E) {
    float acc[LANES] = {0};
    int i = 0;
    for (; i + LANES <= E; i += LANES)
        for (int l = 0; l < LANES; l++) acc[l] += a[i + l] * b[i + l];
    for (int l = 0; i < E; i++, l++) acc[l] += a[i] * b[i];
    return ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
}

static void axpy(float *y, float a, const float *x, int E) {
    for (int i = 0; i < E; i++) y[i] += a * x[i];
}

static float norm_of(const float *x, int E) { return sqrtf(dot(x, x, E)); }

void contrastive_normalize(const float *x, float *z, float *norm, int B, int E) {
    for (int b = 0; b < B; b++) {
        const float *xb = x + (size_t)b * E;
        const float nb = norm_of(xb, E), inv = 1.0f / fmaxf(nb, 1e-12f);
        norm[b] = nb;
        for (int i = 0; i < E; i++) z[(size_t)b * E + i] = xb[i] * inv;
    }
}

void contrastive_normalize_backward(const float *z, const float *norm, const float *dz, float *dx, int B, int E) {
    for (int b = 0; b < B; b++) {
        const float *zb = z + (size_t)b * E, *gb = dz + (size_t)b * E;
        const float along = dot(zb, gb, E), inv = 1.0f / fmaxf(norm[b], 1e-12f);
        for (int i = 0; i < E; i++) dx[(size_t)b * E + i] = (gb[i] - zb[i] * along) * inv;
    }
}

// Softmax cross-entropy over logits (C) in double: returns log-sum-exp; p (C) the probabilities.
static double softmax(const double *logits, int C, double *p) {
    double mx = -INFINITY, sum = 0.0;
    for (int k = 0; k < C; k++) mx = fmax(mx, logits[k]);
    for (int k = 0; k < C; k++) sum += p[k] = exp(logits[k] - mx);
    for (int k = 0; k < C; k++) p[k] /= sum;
    return mx + log(sum);
}

static int argmax(const double *v, int C) {
    int best = 0;
    for (int k = 1; k < C; k++)
        if (v[k] > v[best]) best = k;
    return best;
}

// supcon by blocks of anchors: their scaled cosines to every row by one GEMM, the softmax of
// each row in double, then the logits' gradient in place of the logits and two GEMMs for the
// rows' gradient.
static void supcon(const float *z, const int *labels, int G, int E, int a0, int n, float scale, float *row_loss,
                   float *dz, float grad_scale, int *row_hit, spk_gemm_fn *gemm) {
    enum { BLOCK = 256 };
    const int rows = n < BLOCK ? n : BLOCK;
    float *s = mallocCheck((size_t)rows * G * sizeof(float));
    double *logit = mallocCheck(2 * (size_t)G * sizeof(double)), *p = logit + G;
    for (int b0 = a0; b0 < a0 + n; b0 += rows) {
        const int nb = a0 + n - b0 < rows ? a0 + n - b0 : rows;
        gemm('N', 'T', nb, G, E, scale, z + (size_t)b0 * E, E, z, E, 0.0f, s, G);
        for (int r = 0; r < nb; r++) {
            const int a = b0 + r;
            float *sr = s + (size_t)r * G;
            int positives = 0;
            double pos = 0.0;
            for (int k = 0; k < G; k++) {
                logit[k] = k == a ? -INFINITY : (double)sr[k];
                if (k != a && labels[k] == labels[a]) positives++, pos += logit[k];
            }
            const double lse = softmax(logit, G, p);
            row_loss[a - a0] = positives ? (float)(lse - pos / positives) : 0.0f;
            if (row_hit) row_hit[a - a0] = labels[argmax(logit, G)] == labels[a];
            for (int k = 0; k < G; k++) {  // the logits' gradient (none without positives)
                const double target = k != a && labels[k] == labels[a] ? 1.0 / positives : 0.0;
                sr[k] = positives && k != a ? (float)((p[k] - target) * scale * grad_scale) : 0.0f;
            }
        }
        if (!dz) continue;
        gemm('N', 'N', nb, E, G, 1.0f, s, G, z, E, 1.0f, dz + (size_t)b0 * E, E);  // d/dz_a: sum_k g_ak z_k
        gemm('T', 'N', G, E, nb, 1.0f, s, G, z + (size_t)b0 * E, E, 1.0f, dz, E);  // d/dz_k: sum_a g_ak z_a
    }
    free(s);
    free(logit);
}

// proto and ge2e: each row of anchor group against every group's sum u (prototype or
// centroid), c = cos(z_a, u). du (groups, E) collects d/du; the caller spreads it to the rows
// that make up each u.
typedef struct {
    const float *z;
    int G, E, M, groups;
    float *u, *unorm;  // (groups, E), (groups)
    float *du;         // (groups, E) or NULL
    double *logits, *p;
} groups_t;

// The sum of group j's rows [j M + from, j M + M).
static void group_sum(const groups_t *q, int j, int from, float *u) {
    for (int i = 0; i < q->E; i++) u[i] = 0.0f;
    for (int r = from; r < q->M; r++) axpy(u, 1.0f, q->z + ((size_t)j * q->M + r) * q->E, q->E);
}

// Row a against the groups' sums, its own group `own` against `own_u` (norm own_norm): writes
// the loss, counts a hit, and adds the gradient (d/dz_a into dza, d/du into du and own_du).
static float row_against_groups(groups_t *q, const float *za, int own, const float *own_u, float own_norm, float scale,
                                float grad_scale, float *dza, float *own_du, int *hit) {
    const int E = q->E;
    for (int k = 0; k < q->groups; k++) {
        const float *u = k == own ? own_u : q->u + (size_t)k * E;
        const float un = k == own ? own_norm : q->unorm[k];
        q->logits[k] = (double)scale * dot(za, u, E) / fmax(un, 1e-12);
    }
    const double lse = softmax(q->logits, q->groups, q->p);
    if (hit) *hit = argmax(q->logits, q->groups) == own;
    if (q->du)
        for (int k = 0; k < q->groups; k++) {
            const float *u = k == own ? own_u : q->u + (size_t)k * E;
            const float un = fmaxf(k == own ? own_norm : q->unorm[k], 1e-12f);
            const float g = (float)((q->p[k] - (k == own)) * scale * grad_scale) / un;
            const float c = (float)(q->logits[k] / scale) / un;  // cos / |u|
            axpy(dza, g, u, E);
            float *du = k == own ? own_du : q->du + (size_t)k * E;
            axpy(du, g, za, E);  // d cos / du = (z_a - cos u / |u|) / |u|
            axpy(du, -g * c, u, E);
        }
    return (float)(lse - q->logits[own]);
}

static void grouped(contrastive_kind_t kind, const float *z, int G, int E, int M, int a0, int n, float scale,
                    float *row_loss, float *dz, float grad_scale, int *row_hit) {
    SPK_ASSERT(M >= 2 && G % M == 0 && a0 % M == 0 && n % M == 0);
    groups_t q = {.z = z, .G = G, .E = E, .M = M, .groups = G / M};
    const int from = kind == CONTRASTIVE_PROTO ? 1 : 0;  // a prototype leaves out its query
    q.u = mallocCheck(((size_t)q.groups * E * 2 + (size_t)E * 2 + q.groups) * sizeof(float));
    q.du = dz ? q.u + (size_t)q.groups * E : NULL;
    float *own_u = q.u + (size_t)q.groups * E * 2, *own_du = own_u + E;
    q.unorm = own_du + E;
    q.logits = mallocCheck(2 * (size_t)q.groups * sizeof(double));
    q.p = q.logits + q.groups;
    for (int j = 0; j < q.groups; j++) {
        group_sum(&q, j, from, q.u + (size_t)j * E);
        q.unorm[j] = norm_of(q.u + (size_t)j * E, E);
        if (q.du)
            for (int i = 0; i < E; i++) q.du[(size_t)j * E + i] = 0.0f;
    }
    for (int a = a0; a < a0 + n; a++) {
        const int own = a / M, pos = a % M;
        const float *za = z + (size_t)a * E;
        float *dza = dz ? dz + (size_t)a * E : own_du;  // (scratch when there is no gradient)
        int *hit = row_hit ? row_hit + (a - a0) : NULL;
        row_loss[a - a0] = 0.0f;
        if (hit) *hit = 0;
        if (kind == CONTRASTIVE_PROTO) {
            if (pos != 0) {  // only a group's first row is a query; the others share its hit
                if (hit) *hit = row_hit[a - a0 - pos];
                continue;
            }
            row_loss[a - a0] = row_against_groups(&q, za, own, q.u + (size_t)own * E, q.unorm[own], scale, grad_scale,
                                                  dza, q.du ? q.du + (size_t)own * E : own_du, hit);
            continue;
        }
        // ge2e: its own centroid without itself
        for (int i = 0; i < E; i++) own_u[i] = q.u[(size_t)own * E + i] - za[i];
        for (int i = 0; i < E; i++) own_du[i] = 0.0f;
        row_loss[a - a0] =
            row_against_groups(&q, za, own, own_u, norm_of(own_u, E), scale, grad_scale, dza, own_du, hit);
        if (!dz) continue;
        for (int r = 0; r < M; r++)  // own_u is the group's other rows
            if (r != pos) axpy(dz + ((size_t)own * M + r) * E, 1.0f, own_du, E);
    }
    if (dz)  // each sum's gradient to the rows it sums
        for (int j = 0; j < q.groups; j++)
            for (int r = from; r < M; r++) axpy(dz + ((size_t)j * M + r) * E, 1.0f, q.du + (size_t)j * E, E);
    free(q.u);
    free(q.logits);
}

void contrastive_rows(contrastive_kind_t kind, const float *z, const int *labels, int G, int E, int M, int a0, int n,
                      float scale, float *row_loss, float *dz, float grad_scale, int *row_hit, int fixed) {
    SPK_ASSERT(G > 0 && E > 0 && a0 >= 0 && n >= 0 && a0 + n <= G);
    switch (kind) {
        case CONTRASTIVE_SUPCON:
            supcon(z, labels, G, E, a0, n, scale, row_loss, dz, grad_scale, row_hit,
                   fixed ? spk_sgemm_fixed : spk_sgemm);
            return;
        case CONTRASTIVE_PROTO:
        case CONTRASTIVE_GE2E:
            grouped(kind, z, G, E, M, a0, n, scale, row_loss, dz, grad_scale, row_hit);
            return;
        default:
            SPK_ASSERT(!"a contrastive loss");
    }
}
