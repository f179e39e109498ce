// Metric-learning losses (kernels/contrastive.h) against a float64 reference written from the
// papers' formulas (cosines with both norms, prototypes and centroids as means of unit rows),
// its gradient by central differences; the anchors split into ranges give the same row losses
// and gradients that add up to the whole's; the fixed mode repeats its bits; hits; an anchor
// without positives.
#include "kernels/base/rng.h"
#include "kernels/contrastive.h"
#include "tests/test_util.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

enum { G = 12, E = 7, M = 3 };

static double cosd(const double *a, const double *b) {
    double ab = 0, aa = 0, bb = 0;
    for (int i = 0; i < E; i++) ab += a[i] * b[i], aa += a[i] * a[i], bb += b[i] * b[i];
    return ab / (sqrt(aa) * sqrt(bb));
}

static double lse(const double *v, int n) {
    double mx = -INFINITY, s = 0;
    for (int i = 0; i < n; i++) mx = fmax(mx, v[i]);
    for (int i = 0; i < n; i++) s += exp(v[i] - mx);
    return mx + log(s);
}

// Mean of rows of group j, leaving out row `skip` (-1: none) and, when from = 1, the first.
static void group_mean(const double *x, int j, int from, int skip, double *u) {
    int n = 0;
    memset(u, 0, E * sizeof(double));
    for (int r = from; r < M; r++) {
        if (j * M + r == skip) continue;
        for (int i = 0; i < E; i++) u[i] += x[(j * M + r) * E + i];
        n++;
    }
    for (int i = 0; i < E; i++) u[i] /= n;
}

// The sum of every anchor's loss, in double, from the raw embeddings xr (prototypes and centroids
// are means of the unit-norm rows, as the GE2E paper's).
static double reference(contrastive_kind_t kind, const double *xr, const int *y, double scale) {
    double total = 0, logit[G], u[E], x[G * E];
    for (int a = 0; a < G; a++) {
        double n = 0;
        for (int i = 0; i < E; i++) n += xr[a * E + i] * xr[a * E + i];
        for (int i = 0; i < E; i++) x[a * E + i] = xr[a * E + i] / sqrt(n);
    }
    for (int a = 0; a < G; a++) {
        if (kind == CONTRASTIVE_SUPCON) {
            int n = 0, P = 0;
            double pos = 0;
            for (int k = 0; k < G; k++) {
                if (k == a) continue;
                logit[n++] = scale * cosd(x + a * E, x + k * E);
                if (y[k] == y[a]) pos += logit[n - 1], P++;
            }
            if (P) total += lse(logit, n) - pos / P;
        } else if (kind == CONTRASTIVE_PROTO) {
            if (a % M) continue;
            for (int k = 0; k < G / M; k++) {
                group_mean(x, k, 1, -1, u);
                logit[k] = scale * cosd(x + a * E, u);
            }
            total += lse(logit, G / M) - logit[a / M];
        } else {
            for (int k = 0; k < G / M; k++) {
                group_mean(x, k, 0, k == a / M ? a : -1, u);
                logit[k] = scale * cosd(x + a * E, u);
            }
            total += lse(logit, G / M) - logit[a / M];
        }
    }
    return total;
}

// Our losses and gradient w.r.t. x for anchors [a0, a0 + n), with grad_scale gs.
static double ours(contrastive_kind_t kind, const float *x, const int *y, float scale, int a0, int n, float gs,
                   float *dx, float *rows, int *hits) {
    float z[G * E], norm[G], dz[G * E] = {0};
    int hit[G];
    contrastive_normalize(x, z, norm, G, E);
    contrastive_rows(kind, z, y, G, E, M, a0, n, scale, rows, dz, gs, hit, 1);
    for (int i = 0; i < n; i++) *hits += hit[i];
    contrastive_normalize_backward(z, norm, dz, dx, G, E);
    double s = 0;
    for (int i = 0; i < n; i++) s += rows[i];
    return s;
}

static void check(contrastive_kind_t kind, const char *name, int unlabelled) {
    rng_t r = rng_init(5, 77, (uint64_t)kind, (uint64_t)unlabelled);
    float x[G * E];
    double xd[G * E];
    int y[G];
    for (int i = 0; i < G; i++) y[i] = i / M;
    if (unlabelled) y[G - 1] = 99;  // supcon: a row without positives
    for (int i = 0; i < G * E; i++) {
        x[i] = (float)(2 * rng_uniform(&r) - 1) +
               0.8f * (float)((i / E / M) % 2 ? 1 : -1) * (float)((i % E) == y[i / E] % E);
        xd[i] = x[i];
    }
    const float scale = 10.0f;
    float dx[G * E], rows[G];
    int hits = 0;
    const double loss = ours(kind, x, y, scale, 0, G, 1.0f, dx, rows, &hits);
    const double want = reference(kind, xd, y, scale);
    EXPECT(fabs(loss - want) <= 2e-5 * fabs(want) + 1e-5, "%s: loss %.9g, reference %.9g", name, loss, want);
    double worst = 0, gmax = 0;
    for (int i = 0; i < G * E; i++) {
        const double h = 1e-6, keep = xd[i];
        xd[i] = keep + h;
        const double up = reference(kind, xd, y, scale);
        xd[i] = keep - h;
        const double down = reference(kind, xd, y, scale);
        xd[i] = keep;
        const double fd = (up - down) / (2 * h);
        worst = fmax(worst, fabs(fd - dx[i]));
        gmax = fmax(gmax, fabs(fd));
    }
    EXPECT(worst <= 1e-4 * gmax, "%s: gradient off by %.3g (largest %.3g)", name, worst, gmax);
    EXPECT(hits >= 0 && hits <= G, "%s: hits %d", name, hits);

    // Anchor ranges (whole groups): the same rows, gradients adding up to the whole's.
    const int cuts[] = {0, 3, 9, 12};
    float sum[G * E] = {0}, part[G * E], prow[G];
    int phits = 0, phit[G];
    for (int c = 0; c < 3; c++) {
        const int a0 = cuts[c], n = cuts[c + 1] - cuts[c];
        float z[G * E], norm[G], dz[G * E] = {0};
        contrastive_normalize(x, z, norm, G, E);
        contrastive_rows(kind, z, y, G, E, M, a0, n, scale, prow + a0, dz, 0.5f, phit + a0, 0);
        for (int i = 0; i < n; i++) phits += phit[a0 + i];
        contrastive_normalize_backward(z, norm, dz, part, G, E);
        for (int i = 0; i < G * E; i++) sum[i] += part[i];
    }
    double worst_row = 0;
    for (int i = 0; i < G; i++) worst_row = fmax(worst_row, fabs(prow[i] - rows[i]) / fmax(fabs(rows[i]), 1e-3));
    EXPECT(worst_row <= 1e-6, "%s: row losses of anchor ranges off by %.3g", name, worst_row);
    EXPECT(phits == hits, "%s: hits %d in parts, %d whole", name, phits, hits);
    double off = 0;
    for (int i = 0; i < G * E; i++) off = fmax(off, fabs(sum[i] - 0.5 * dx[i]));
    EXPECT(off <= 1e-6 * gmax, "%s: the ranges' gradients add up to the whole's within %.3g", name, off);

    // Without dz, in the fixed mode: the same losses, bitwise.
    float z[G * E], norm[G], rows2[G];
    contrastive_normalize(x, z, norm, G, E);
    contrastive_rows(kind, z, y, G, E, M, 0, G, scale, rows2, NULL, 1.0f, NULL, 1);
    EXPECT(memcmp(rows2, rows, sizeof rows) == 0, "%s: losses without a gradient differ", name);
}

// Hits: well separated speakers are all found.
static void check_hits(void) {
    float z[G * E], norm[G], rows[G], x[G * E];
    int y[G];
    for (int i = 0; i < G; i++) y[i] = i / M;
    for (int i = 0; i < G * E; i++) x[i] = (i % E == y[i / E]) ? 1.0f : 0.01f * (float)(i % 5);
    contrastive_normalize(x, z, norm, G, E);
    const contrastive_kind_t kinds[] = {CONTRASTIVE_SUPCON, CONTRASTIVE_PROTO, CONTRASTIVE_GE2E};
    const int want[] = {G, G, G};
    for (int k = 0; k < 3; k++) {
        int hits = 0, hit[G];
        contrastive_rows(kinds[k], z, y, G, E, M, 0, G, 10.0f, rows, NULL, 1.0f, hit, 0);
        for (int i = 0; i < G; i++) hits += hit[i];
        EXPECT(hits == want[k], "kind %d: %d hits of %d", (int)kinds[k], hits, want[k]);
    }
}

int main(void) {
    check(CONTRASTIVE_SUPCON, "supcon", 0);
    check(CONTRASTIVE_SUPCON, "supcon with an unpaired row", 1);
    check(CONTRASTIVE_PROTO, "proto", 0);
    check(CONTRASTIVE_GE2E, "ge2e", 0);
    check_hits();
    return test_report("test_contrastive");
}
