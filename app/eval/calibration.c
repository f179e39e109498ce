#include "app/eval/calibration.h"

#include "kernels/base/check.h"
#include "kernels/base/spk_assert.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define MAX_DIM (2 + CALIB_MAX_QUALITY)  // offset, scale, quality weights

static double softplus(double x) { return x > 0 ? x + log1p(exp(-x)) : log1p(exp(x)); }
static double sigmoid(double x) { return x >= 0 ? 1.0 / (1.0 + exp(-x)) : exp(x) / (1.0 + exp(x)); }

double calib_llr(const calibration_t *c, double score, const double *q) {
    double llr = c->offset + c->scale * score;
    for (int k = 0; k < c->n_quality; k++) llr += c->weight[k] * q[k];
    return llr;
}

double calib_cllr(const double *llr, const uint8_t *target, int64_t n) {
    double st = 0, sn = 0;
    int64_t nt = 0;
    for (int64_t i = 0; i < n; i++) {
        if (target[i])
            st += softplus(-llr[i]), nt++;
        else
            sn += softplus(llr[i]);
    }
    if (nt == 0 || nt == n) return NAN;
    return (st / (double)nt + sn / (double)(n - nt)) / (2.0 * log(2.0));
}

// ---- minimum Cllr: pool adjacent violators ---------------------------------------------------

typedef struct {
    double s;
    uint8_t t;
} trial_t;

static int cmp_trial(const void *a, const void *b) {
    const double x = ((const trial_t *)a)->s, y = ((const trial_t *)b)->s;
    return x < y ? -1 : x > y;
}

typedef struct {
    double targets, count;  // trials pooled into the block
} block_t;

double calib_min_cllr(const double *scores, const uint8_t *target, int64_t n) {
    trial_t *v = mallocCheck((size_t)(n ? n : 1) * sizeof *v);
    block_t *stack = mallocCheck((size_t)(n ? n : 1) * sizeof *stack);
    int64_t nt = 0;
    for (int64_t i = 0; i < n; i++) {
        v[i] = (trial_t){scores[i], target[i] ? 1 : 0};
        nt += v[i].t;
    }
    qsort(v, (size_t)n, sizeof *v, cmp_trial);
    // Blocks of tied scores, merged while a block's target fraction is below its left
    // neighbour's: the fractions end non-decreasing in the score (the optimal monotone
    // posterior for the data's own prior).
    int64_t top = 0;
    for (int64_t i = 0; i < n;) {
        block_t b = {0, 0};
        const double s = v[i].s;
        do  // (at least one trial a block: a NaN equals nothing, itself included)
            b.targets += v[i].t, b.count += 1;
        while (++i < n && v[i].s == s);
        while (top > 0 && stack[top - 1].targets * b.count >= b.targets * stack[top - 1].count) {
            b.targets += stack[top - 1].targets;
            b.count += stack[top - 1].count;
            top--;
        }
        stack[top++] = b;
    }
    // Each block's posterior p turns into llr = logit p - log(Nt / Nn); its targets cost
    // log(1 + e^-llr) = log((p Nn + (1-p) Nt) / (p Nn)) each, its nontargets the mirror image.
    const double Nt = (double)nt, Nn = (double)(n - nt);
    double st = 0, sn = 0;
    for (int64_t k = 0; k < top; k++) {
        const double p = stack[k].targets / stack[k].count, tk = stack[k].targets, nk = stack[k].count - tk;
        if (tk > 0) st += tk * log((p * Nn + (1 - p) * Nt) / (p * Nn));
        if (nk > 0) sn += nk * log(((1 - p) * Nt + p * Nn) / ((1 - p) * Nt));
    }
    free(v);
    free(stack);
    if (nt == 0 || nt == n) return NAN;
    return (st / Nt + sn / Nn) / (2.0 * log(2.0));
}

// ---- the fit ---------------------------------------------------------------------------------

typedef struct {
    const double *scores, *quality;
    const uint8_t *target;
    int64_t n;
    int nq, dim;
    double logit_prior, w_target, w_nontarget;  // prior / Nt, (1 - prior) / Nn
} problem_t;

// The objective at w; its gradient and Hessian too when g is not NULL.
static double objective(const problem_t *p, const double *w, double *g, double H[MAX_DIM][MAX_DIM]) {
    const int d = p->dim;
    double loss = 0;
    if (g) {
        memset(g, 0, (size_t)d * sizeof *g);
        memset(H, 0, sizeof(double) * MAX_DIM * MAX_DIM);
    }
    for (int64_t i = 0; i < p->n; i++) {
        double x[MAX_DIM] = {1.0, p->scores[i]};
        for (int k = 0; k < p->nq; k++) x[2 + k] = p->quality[i * p->nq + k];
        double z = p->logit_prior;
        for (int j = 0; j < d; j++) z += w[j] * x[j];
        const double wt = p->target[i] ? p->w_target : p->w_nontarget;
        loss += wt * softplus(p->target[i] ? -z : z);
        if (!g) continue;
        const double dz = p->target[i] ? -wt * sigmoid(-z) : wt * sigmoid(z), h = wt * sigmoid(z) * sigmoid(-z);
        for (int j = 0; j < d; j++) {
            g[j] += dz * x[j];
            for (int l = 0; l < d; l++) H[j][l] += h * x[j] * x[l];
        }
    }
    for (int j = 1; j < d; j++) {  // the penalty leaves the offset alone
        loss += 0.5 * CALIB_L2 * w[j] * w[j];
        if (!g) continue;
        g[j] += CALIB_L2 * w[j];
        H[j][j] += CALIB_L2;
    }
    return loss;
}

// Solves H x = b (d unknowns) by Gaussian elimination with partial pivoting; -1 if singular.
static int solve(int d, double H[MAX_DIM][MAX_DIM], const double *b, double *x) {
    double a[MAX_DIM][MAX_DIM + 1];
    for (int i = 0; i < d; i++) {
        for (int j = 0; j < d; j++) a[i][j] = H[i][j];
        a[i][d] = b[i];
    }
    for (int c = 0; c < d; c++) {
        int piv = c;
        for (int r = c + 1; r < d; r++)
            if (fabs(a[r][c]) > fabs(a[piv][c])) piv = r;
        if (!(fabs(a[piv][c]) > 0)) return -1;
        for (int j = 0; j <= d; j++) {
            const double tmp = a[c][j];
            a[c][j] = a[piv][j];
            a[piv][j] = tmp;
        }
        for (int r = c + 1; r < d; r++) {
            const double f = a[r][c] / a[c][c];
            for (int j = c; j <= d; j++) a[r][j] -= f * a[c][j];
        }
    }
    for (int i = d - 1; i >= 0; i--) {
        double s = a[i][d];
        for (int j = i + 1; j < d; j++) s -= a[i][j] * x[j];
        x[i] = s / a[i][i];
    }
    return 0;
}

int calib_fit(calibration_t *c, const double *scores, const double *quality, int n_quality, const uint8_t *target,
              int64_t n, double prior) {
    int64_t nt = 0;
    for (int64_t i = 0; i < n; i++) nt += target[i] != 0;
    SPK_ASSERT(nt > 0 && nt < n && prior > 0 && prior < 1 && n_quality >= 0 && n_quality <= CALIB_MAX_QUALITY);
    const problem_t p = {scores,
                         quality,
                         target,
                         n,
                         n_quality,
                         2 + n_quality,
                         log(prior / (1 - prior)),
                         prior / (double)nt,
                         (1 - prior) / (double)(n - nt)};
    double w[MAX_DIM] = {0}, g[MAX_DIM], H[MAX_DIM][MAX_DIM], step[MAX_DIM], trial[MAX_DIM];
    int iterations = -1;
    for (int it = 1; it <= 100 && iterations < 0; it++) {
        const double f = objective(&p, w, g, H);
        double neg_g[MAX_DIM], slope = 0;
        for (int j = 0; j < p.dim; j++) neg_g[j] = -g[j];
        if (solve(p.dim, H, neg_g, step) != 0) break;
        for (int j = 0; j < p.dim; j++) slope += g[j] * step[j];
        // Backtracking: Newton's full step, halved until the objective falls enough.
        double t = 1.0;
        for (;; t *= 0.5) {
            for (int j = 0; j < p.dim; j++) trial[j] = w[j] + t * step[j];
            if (objective(&p, trial, NULL, NULL) <= f + 1e-4 * t * slope || t < 1e-12) break;
        }
        int converged = 1;
        for (int j = 0; j < p.dim; j++) {
            converged &= fabs(trial[j] - w[j]) <= 1e-12 * (1.0 + fabs(w[j]));
            w[j] = trial[j];
        }
        if (converged) iterations = it;
    }
    *c = (calibration_t){.prior = prior, .offset = w[0], .scale = w[1], .n_quality = n_quality};
    for (int k = 0; k < n_quality; k++) c->weight[k] = w[2 + k];
    return iterations;
}
