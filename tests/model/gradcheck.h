// Finite-difference checks of a model_t's gradients (tests only): for every parameter tensor (and
// optionally the input), directional derivatives of the loss along three random unit directions,
// (L(p + h v) - L(p - h v)) / 2h, against the analytic <g, v>. The float32 loss carries ~1e-6
// relative rounding, i.e. ~|L| * 1e-6 / h of noise in the quotient; ReLUs make the loss piecewise
// smooth, so a rare direction crosses a kink: a tensor passes when two of its three directions
// agree to 2% of |g| (plus the noise).
#pragma once
#include "kernels/base/rng.h"
#include "tests/test_util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef double (*gc_loss_fn)(void *ctx);  // the loss at the current parameters (and input)

typedef struct {
    const char *name;
    float *p;        // the values perturbed
    const float *g;  // their analytic gradient
    int64_t n;
} gc_tensor_t;

// Checks each tensor; returns the worst median error as a fraction of the tolerance.
static double gradcheck_tensors(const gc_tensor_t *t, int count, gc_loss_fn loss, void *ctx, double base, double h,
                                rng_t *r) {
    const double noise = 1e-6 * fmax(1.0, fabs(base)) / h;
    double worst = 0;
    for (int ti = 0; ti < count; ti++) {
        const gc_tensor_t *x = &t[ti];
        float *v = malloc((size_t)x->n * sizeof(float)), *p0 = malloc((size_t)x->n * sizeof(float));
        memcpy(p0, x->p, (size_t)x->n * sizeof(float));
        double gn = 0;
        for (int64_t j = 0; j < x->n; j++) gn += (double)x->g[j] * x->g[j];
        gn = sqrt(gn);
        int agree = 0;
        double errs[3];
        for (int k = 0; k < 3; k++) {
            double vn = 0, gv = 0;
            for (int64_t j = 0; j < x->n; j++) {
                v[j] = (float)rng_normal(r);
                vn += (double)v[j] * v[j];
            }
            for (int64_t j = 0; j < x->n; j++) {
                v[j] = (float)(v[j] / sqrt(vn));
                gv += (double)x->g[j] * v[j];
            }
            for (int64_t j = 0; j < x->n; j++) x->p[j] = p0[j] + (float)h * v[j];
            const double lp = loss(ctx);
            for (int64_t j = 0; j < x->n; j++) x->p[j] = p0[j] - (float)h * v[j];
            const double lm = loss(ctx);
            memcpy(x->p, p0, (size_t)x->n * sizeof(float));
            errs[k] = fabs((lp - lm) / (2 * h) - gv) / (2e-2 * gn + noise);  // <= 1 passes
            agree += errs[k] <= 1.0;
        }
        const double med =
            errs[0] + errs[1] + errs[2] - fmax(errs[0], fmax(errs[1], errs[2])) - fmin(errs[0], fmin(errs[1], errs[2]));
        if (med > worst) worst = med;
        EXPECT(agree >= 2, "%s: only %d of 3 directional derivatives agree (errors %.2f %.2f %.2f of the tolerance)",
               x->name, agree, errs[0], errs[1], errs[2]);
        free(v);
        free(p0);
    }
    return worst;
}
